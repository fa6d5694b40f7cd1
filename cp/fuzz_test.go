package cp_test

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
)

// The fuzz world: 16 KiB of memory; the ring of slot 1 at fuzzRing (64..512 dwords), its
// rptr report at fuzzReport, and guest data (IBs, operands) from fuzzData to the end.
const (
	fuzzMem    = 16 << 10
	fuzzReport = 0x800
	fuzzRing   = 0x1000
	fuzzData   = 0x2000
	// fuzzMaxPackets bounds the work one input may cause: the ring (≤ 512 packets) times
	// MaxIBExpansions (4) IBs of at most 4 Ki dwords each (IBs beyond the memory fault).
	fuzzMaxPackets = 512 * 4 * (fuzzMem / 4)
	fuzzDeadline   = 20 * time.Second // generous for -race; a hang fails here
)

// fuzzInput lays out one input: byte 0 picks the ring size (2^(qs%4+6) dwords), then the
// ring's dwords (fewer than the ring size: only those are submitted), then memory from
// fuzzData (only after a full ring).
func fuzzInput(qs uint8, ring []uint32, data []uint32) []byte {
	b := []byte{qs}
	for _, d := range append(ring, data...) {
		b = binary.LittleEndian.AppendUint32(b, d)
	}
	return b
}

func concat(pkts ...[]uint32) []uint32 {
	var out []uint32
	for _, p := range pkts {
		out = append(out, p...)
	}
	return out
}

// pad fills a ring of 2^(qs%4+6) dwords with NOPs after pkts.
func pad(qs uint8, pkts ...[]uint32) []uint32 {
	w := concat(pkts...)
	size := 1 << (qs%4 + 6)
	if rest := size - len(w); rest > 0 {
		w = append(w, cptest.Nop(rest)...)
	}
	return w
}

// FuzzRing runs one queue over arbitrary ring contents and memory. It asserts: no panic;
// the queue reaches a quiet state (drained, stuck on a partial packet, parked, busy in the
// endless kernel, halted or stopped) within a bounded number of packets and a deadline;
// DEQUEUE_RESET then stops it from whatever state; and an access outside the test memory
// always halts the queue with CP_ERROR_TRANSLATION (engine writes land only in memory).
//
// One CP serves every input of a worker: between inputs it is Reset (which revokes whatever
// the input left running, so nothing of one input can touch the next), quiesced, and the
// memory, registers and IVs the input touched are cleared.
func FuzzRing(f *testing.F) {
	ib := cptest.NewIB(cptest.NewMemory(fuzzMem), fuzzData)
	ib.WriteMem(fuzzData+0x1000, 1, 2, 3)
	ib.IndirectBuffer(cptest.IndirectBuffer{Addr: fuzzData, Size: 0, Chain: true})
	ibWords := make([]uint32, ib.Size())
	for i := range ibWords {
		ibWords[i] = ib.Mem.Load32(fuzzData + uint64(i)*4)
	}
	loop := []uint32{cptest.Nop(1)[0]}
	loop = append(loop, cptest.IndirectBuffer{Addr: fuzzData, Size: 5, Chain: true}.Encode()...)

	f.Add(fuzzInput(0, pad(0, cptest.WriteMem(fuzzData, 1, 2), cptest.Fence(fuzzData+8, 1, 2, true)), nil))
	f.Add(fuzzInput(1, pad(1, cptest.IBCall(ib), cptest.SetUConfigReg(0x40, 5)), ibWords))
	f.Add(fuzzInput(2, pad(2, cptest.IndirectBuffer{Addr: fuzzData, Size: 5}.Encode()), loop))
	f.Add(fuzzInput(0, pad(0, cptest.WaitMem(fuzzData, 1)), nil))
	f.Add(fuzzInput(0, pad(0, cptest.DMACopy(fuzzData+0x100, fuzzData, 0x200), cptest.DMAFill(fuzzData, 7, 13)), nil))
	f.Add(fuzzInput(3, pad(3, cptest.Kernel(abi.KERNEL_INCREMENT, fuzzData, 0, 0), cptest.DispatchDirect(2, 2, 2),
		cptest.Kernel(abi.KERNEL_ENDLESS, 0, 0, 0), cptest.DispatchDirect(1, 1, 1)), nil))
	f.Add(fuzzInput(0, pad(0, cptest.WriteMem(fuzzMem-4, 1, 2)), nil))
	f.Add(fuzzInput(0, cptest.WriteMem(fuzzData, 1, 2)[:3], nil))
	f.Add(fuzzInput(1, pad(1, cptest.WriteReg(cptest.HQDReg(1, abi.REG_HQD_DEQUEUE_REQUEST), 2)), nil))
	f.Add(fuzzInput(0, pad(0, cptest.WriteReg(abi.REG_CP_ENGINE_RESET/4, abi.REG_CP_ENGINE_RESET__COMPUTE_MASK),
		cptest.WriteMem(fuzzData, 1)), nil))
	f.Add([]byte{0, 0xEE, 0x10, 0, 0xC0})

	r := cptest.NewRig(f, fuzzMem, func(c *cp.Config) {
		c.MaxIBExpansions = 4
		c.GPUClock = func() uint64 { return 1 }
		c.SystemClock = func() uint64 { return 2 }
	})
	// Packets may read HQD and CP registers, dequeue queues (their own included) and reset
	// engines, but not program or kick queues: a queue that advances its own wptr could
	// legitimately run forever.
	r.RouteCPBlocks()
	route := r.Regs.Hook
	r.Regs.Hook = func(reg, v uint32, write bool) (uint32, bool) {
		if write && reg*4 >= abi.BLOCK_HQD_BASE && reg*4 < abi.BLOCK_HQD_BASE+abi.BLOCK_HQD_SIZE &&
			(reg*4-abi.BLOCK_HQD_BASE)%abi.BLOCK_HQD_STRIDE != abi.REG_HQD_DEQUEUE_REQUEST {
			return 0, true
		}
		return route(reg, v, write)
	}

	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		defer fuzzReset(t, r)
		qs := uint32(in[0]%4 + 5) // 64..512 dwords
		size := 1 << (qs + 1)
		ringBytes := in[1:]
		if len(ringBytes) > size*4 {
			ringBytes = ringBytes[:size*4]
		}
		rest := in[1+len(ringBytes):]
		wptr := uint64(len(ringBytes) / 4)

		r.Mem.SetBytes(fuzzRing, ringBytes)
		if len(rest) > fuzzMem-fuzzData {
			rest = rest[:fuzzMem-fuzzData]
		}
		r.Mem.SetBytes(fuzzData, rest)
		ring := r.StartQueue(1, cptest.QueueConfig{Base: fuzzRing, QueueSize: qs, RptrReport: fuzzReport})
		ring.SetWptr(wptr)
		ring.Kick()

		// Wait for a quiet state: idle (drained, or stuck on a packet that extends past
		// wptr), parked, in the endless kernel, halted, or stopped (the input may dequeue
		// its queue or reset its engine).
		deadline := time.Now().Add(fuzzDeadline)
		var q cp.QueueStats
		for spin := 0; ; spin++ {
			q = r.CP.Queue(1)
			if p := fuzzPackets(r); p > fuzzMaxPackets {
				t.Fatalf("%d packets executed, bound %d", p, fuzzMaxPackets)
			}
			if !q.Active || q.Idle || q.State == abi.HQD_STATE_HALTED || q.State == abi.HQD_STATE_WAITING ||
				q.State == abi.HQD_STATE_BUSY_KERNEL {
				break
			}
			fuzzPause(t, spin, deadline, "queue did not settle", q)
		}
		t.Logf("settled: %+v", q)
		if _, _, _, _, oob := r.Mem.Counters(); oob > 0 && q.Error != abi.CP_ERROR_TRANSLATION {
			t.Fatalf("%d accesses outside memory but the queue did not halt with TRANSLATION: %+v", oob, q)
		}
		// DEQUEUE_RESET stops the queue from any state.
		r.WriteHQD(1, abi.REG_HQD_DEQUEUE_REQUEST, abi.HQD_DEQUEUE_RESET)
		for spin := 0; r.ReadHQD(1, abi.REG_HQD_ACTIVE) != 0; spin++ {
			fuzzPause(t, spin, deadline, "DEQUEUE_RESET did not stop the queue", r.CP.Queue(1))
		}
		if st := r.ReadHQD(1, abi.REG_HQD_STATUS); st != 0 {
			t.Fatalf("status %#x after DEQUEUE_RESET", st)
		}
	})
}

func fuzzPackets(r *cptest.Rig) uint64 {
	return uint64(r.CP.ReadReg(abi.REG_CP_PACKETS_HI-abi.BLOCK_CP_BASE))<<32 | uint64(r.CP.ReadReg(abi.REG_CP_PACKETS_LO-abi.BLOCK_CP_BASE))
}

// fuzzPause is one step of a wait for the queue: a yield at first (the queue goroutine is
// usually done within microseconds), then short sleeps; past the deadline it fails.
func fuzzPause(t *testing.T, spin int, deadline time.Time, what string, q cp.QueueStats) {
	if spin < 2000 {
		runtime.Gosched()
		return
	}
	if time.Now().After(deadline) {
		t.Fatalf("%s: %+v", what, q)
	}
	time.Sleep(20 * time.Microsecond)
}

// fuzzReset returns the rig to its state before the input: Reset revokes whatever the input
// left running, Quiesce proves none of it can act any more, and the goroutines are gone
// before the next input activates the slot again.
func fuzzReset(t *testing.T, r *cptest.Rig) {
	r.CP.Reset()
	if !r.CP.Quiesce(fuzzDeadline) {
		t.Fatalf("Quiesce timed out: %+v", r.CP.Stats())
	}
	deadline := time.Now().Add(fuzzDeadline)
	for spin := 0; r.CP.Stats().Live != 0; spin++ {
		fuzzPause(t, spin, deadline, "queue goroutines did not end", r.CP.Queue(1))
	}
	r.Mem.Reset()
	r.Regs.Reset()
	r.IVs.Reset()
}
