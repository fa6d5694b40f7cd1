package hostile

import (
	"fmt"

	"vgpu/abi"
	"vgpu/pm4"
)

// loopDwords is the ring size of a self-kicking queue: one pass is the whole ring.
const loopDwords = 64

// selfKicking starts a queue that runs body forever without the CPU: its wptr is polled from
// VRAM, and every pass, after body, a KERNEL_INCREMENT adds one ring's worth to that polled
// wptr (through L2, written back by a ranged ACQUIRE_MEM), so the queue finds more work each
// time it catches up. Only a reset (queue, engine, device) stops it.
func (d *driver) selfKicking(slot int, body ...[]uint32) (*queue, error) {
	q, err := d.startQueue(slot, queueOpts{log2: 6, poll: true})
	if err != nil {
		return nil, err
	}
	poll := fb(q.pollAddr)
	tail := [][]uint32{
		pm4.Kernel(abi.KERNEL_INCREMENT, poll, 0, 0),
		pm4.DispatchDirect(loopDwords, 1, 1),
		pm4.AcquireMem{GCR: abi.PM4_ACQUIRE_MEM_GCR_GL2_WB_MASK | abi.PM4_ACQUIRE_MEM_GCR_GL2_RANGE_RANGE<<abi.PM4_ACQUIRE_MEM_GCR_GL2_RANGE__SHIFT,
			Base: poll >> 8, Size: 1}.Encode(),
	}
	n := 0
	for _, p := range append(body, tail...) {
		n += len(p)
	}
	if n > loopDwords {
		return nil, fmt.Errorf("self-kicking body of %d dwords does not fit a %d-dword ring", n, loopDwords)
	}
	q.emit(body...)
	if pad := loopDwords - n; pad > 0 {
		q.emit(pm4.Nop(pad))
	}
	q.emit(tail...)
	return q, q.kick()
}

// clockTo writes the 64-bit GPU clock to addr, bypassing L2: a value that changes on every
// pass, so a loop that still runs is seen.
func clockTo(addr uint64) []uint32 {
	return pm4.CopyData{SrcSel: abi.PM4_COPY_DATA_SEL_GPU_CLOCK, DstSel: abi.PM4_COPY_DATA_SEL_MEM, Dst: addr,
		Bits64: true, DstPolicy: abi.PM4_CACHE_POLICY_BYPASS}.Encode()
}
