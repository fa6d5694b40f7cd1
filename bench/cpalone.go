package bench

import (
	"fmt"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
)

// bareCP is the CP alone over cptest's in-memory stand-ins: no GPU MMU, no L2, no transport,
// no client. It is the packet-rate figure's baseline, so that ratio says what the rest of the
// device adds to the CP's own cost.
type bareCP struct {
	cp         *cp.CP
	mem        *cptest.Memory
	regs       *cptest.Registers
	ivs        *cptest.Interrupts
	wptr, size uint64
}

// Addresses in the bare CP's memory.
const (
	bareDst   = 0x10000
	bareFence = 0x20000
	bareRing  = 0x100000
	bareSlot  = 1
)

func newBareCP(ringDwords uint64) *bareCP {
	b := &bareCP{mem: cptest.NewMemory(bareRing + 4*int(ringDwords)), regs: cptest.NewRegisters(),
		ivs: cptest.NewInterrupts(), size: ringDwords}
	b.cp = cp.New(cp.Config{Memory: b.mem, Registers: b.regs, Interrupts: b.ivs})
	b.mem.SetOnWrite(b.cp.Wake)
	log2 := uint32(0)
	for 1<<log2 < ringDwords {
		log2++
	}
	b.writeHQD(abi.REG_HQD_PQ_BASE_LO, bareRing)
	b.writeHQD(abi.REG_HQD_PQ_CONTROL, log2-1)
	b.writeHQD(abi.REG_HQD_ACTIVE, 1)
	return b
}

// writeHQD writes a register of the queue under the register lock, as the device does.
func (b *bareCP) writeHQD(reg, v uint32) {
	b.regs.Lock.Lock()
	defer b.regs.Lock.Unlock()
	b.cp.WriteHQD(bareSlot, reg, v)
}

// emit writes dwords at the ring's wptr, in at most two stores (the ring may wrap).
func (b *bareCP) emit(dws []uint32) {
	for len(dws) > 0 {
		at := b.wptr % b.size
		n := min(uint64(len(dws)), b.size-at)
		b.mem.StoreDwords(bareRing+4*at, dws[:n])
		dws, b.wptr = dws[n:], b.wptr+n
	}
}

func (b *bareCP) kick() error {
	b.writeHQD(abi.REG_HQD_PQ_WPTR_LO, uint32(b.wptr))
	b.writeHQD(abi.REG_HQD_PQ_WPTR_HI, uint32(b.wptr>>32))
	return nil
}

// waitFence waits for fence seq's interrupt: every fence interrupts, in order, and nothing
// else does, so the seq-th interrupt is fence seq's.
func (b *bareCP) waitFence(seq uint32, timeout time.Duration) error {
	b.ivs.Wait(int(seq), timeout)
	if f := b.mem.Load32(bareFence); int32(f-seq) < 0 {
		return fmt.Errorf("bare CP: fence %d not written after %v (fence %d)", seq, timeout, f)
	}
	return nil
}

func (b *bareCP) packets() (uint64, error) { return b.cp.Stats().Packets, nil }

func (b *bareCP) target() packetTarget {
	return packetTarget{emit: b.emit, kick: b.kick, waitFence: b.waitFence, packets: b.packets,
		fence: bareFence, dst: bareDst, readDst: func() uint32 { return b.mem.Load32(bareDst) }}
}

func (b *bareCP) Close() { b.cp.Close() }
