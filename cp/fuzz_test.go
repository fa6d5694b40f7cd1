package cp_test

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
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
		w = append(w, pm4.Nop(rest)...)
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
	ib.IndirectBuffer(pm4.IndirectBuffer{Addr: fuzzData, Size: 0, Chain: true})
	ibWords := make([]uint32, ib.Size())
	for i := range ibWords {
		ibWords[i] = ib.Mem.Load32(fuzzData + uint64(i)*4)
	}
	loop := []uint32{pm4.Nop(1)[0]}
	loop = append(loop, pm4.IndirectBuffer{Addr: fuzzData, Size: 5, Chain: true}.Encode()...)

	f.Add(fuzzInput(0, pad(0, pm4.WriteMem(fuzzData, 1, 2), pm4.Fence(fuzzData+8, 1, 2, true)), nil))
	f.Add(fuzzInput(1, pad(1, cptest.IBCall(ib), pm4.SetUConfigReg(0x40, 5)), ibWords))
	f.Add(fuzzInput(2, pad(2, pm4.IndirectBuffer{Addr: fuzzData, Size: 5}.Encode()), loop))
	f.Add(fuzzInput(0, pad(0, pm4.WaitMem(fuzzData, 1)), nil))
	f.Add(fuzzInput(0, pad(0, pm4.DMACopy(fuzzData+0x100, fuzzData, 0x200), pm4.DMAFill(fuzzData, 7, 13)), nil))
	f.Add(fuzzInput(3, pad(3, pm4.Kernel(abi.KERNEL_INCREMENT, fuzzData, 0, 0), pm4.DispatchDirect(2, 2, 2),
		pm4.Kernel(abi.KERNEL_ENDLESS, 0, 0, 0), pm4.DispatchDirect(1, 1, 1)), nil))
	f.Add(fuzzInput(0, pad(0, pm4.WriteMem(fuzzMem-4, 1, 2)), nil))
	f.Add(fuzzInput(0, pm4.WriteMem(fuzzData, 1, 2)[:3], nil))
	f.Add(fuzzInput(1, pad(1, pm4.WriteReg(cptest.HQDReg(1, abi.REG_HQD_DEQUEUE_REQUEST), 2)), nil))
	f.Add(fuzzInput(0, pad(0, pm4.WriteReg(abi.REG_CP_ENGINE_RESET/4, abi.REG_CP_ENGINE_RESET__COMPUTE_MASK),
		pm4.WriteMem(fuzzData, 1)), nil))
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

// mapInput decodes a fuzz input into an image: mostly plausible values (the fuzz world's
// ring and data, small IBs) unless a flag bit asks for raw ones, so both Map's refusals and
// the execution of accepted images are explored. The bytes after the image are the memory
// from fuzzRing.
type mapInput struct {
	b   []byte
	off int
}

func (m *mapInput) u8() uint8 {
	if m.off >= len(m.b) {
		return 0
	}
	m.off++
	return m.b[m.off-1]
}

func (m *mapInput) u64() uint64 {
	var v uint64
	for i := 0; i < 8; i++ {
		v |= uint64(m.u8()) << (8 * i)
	}
	return v
}

func (m *mapInput) image() cp.Image {
	flags := uint32(m.u8()) | uint32(m.u8())<<8
	raw := func(bit uint) bool { return flags&(1<<14) != 0 && flags&(1<<bit) != 0 } // bit 14: any raw field
	img := cp.Image{Base: fuzzRing, ReportAddr: fuzzReport}
	qs := uint32(m.u8()%4 + 5)
	img.Control = qs << abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT
	if raw(0) {
		img.Base = m.u64()
	}
	if raw(1) {
		img.Control = uint32(m.u64())
	}
	img.VMID = int(m.u8() % 17)
	if raw(2) {
		img.ReportAddr = m.u64()
	}
	img.DoorbellControl = uint32(m.u64())
	if raw(3) {
		img.FenceAddr = m.u64()
	} else if m.u8()&1 != 0 {
		img.FenceAddr = fuzzData + uint64(m.u8())*8
	}
	size := uint64(1) << (qs + 1)
	img.Rptr = uint64(m.u8()) << (m.u8() % 40)
	img.Wptr = img.Rptr + uint64(m.u8())%(size+2)
	if raw(4) {
		img.Rptr, img.Wptr = m.u64(), m.u64()
	}
	e := &img.Exec
	e.Level = int(m.u8()%4) - int(flags>>15) // -1 with the top flag
	parent := img.VMID
	for i := range e.IB {
		ib := &e.IB[i]
		ib.Base = fuzzData + uint64(m.u8())*16
		ib.Size = uint64(m.u8() % 64)
		ib.Pos = uint64(m.u8()) % (ib.Size + 2)
		ib.VMID = parent
		if raw(5) {
			ib.Base, ib.Size, ib.Pos, ib.VMID = m.u64(), m.u64()%(1<<21), m.u64()%(1<<21), int(m.u8()%17)
		}
		if ib.VMID == 0 && parent == 0 {
			ib.VMID = int(m.u8() % 16)
		}
		parent = ib.VMID
	}
	e.IBCount = int(m.u8() % 6)
	if raw(6) {
		e.Progress = m.u64() % (1 << 27)
	} else {
		e.Progress = uint64(m.u8()) * (16 << 10) % (1 << 20)
	}
	e.WaitWritten = raw(7)
	for i := range e.UserData {
		if raw(8) {
			e.UserData[i] = uint32(m.u64())
		}
	}
	e.UserData[0] = uint32(m.u8() % 6)
	e.Fence = m.u64()
	if raw(9) {
		img.Error = uint32(m.u8())
	}
	img.DoorbellOffset = uint32(m.u8())
	return img
}

// FuzzMapImage maps arbitrary images: Map never panics and refuses a bad image with
// ErrBadImage; an accepted one runs bounded (as FuzzRing's queue: it settles), a Preempt
// stops it unless it is in the endless kernel, which Kill stops; a preempted queue's saved
// image is always accepted again, in another slot, and can be killed there.
func FuzzMapImage(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(append(make([]byte, 40), fuzzInput(0, pad(0, pm4.WriteMem(fuzzData, 1, 2), pm4.DMAFill(fuzzData+64, 7, 0x800)), nil)...))
	f.Add(append([]byte{0x80, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 20, 2, 5, 8, 2, 9, 9, 1}, make([]byte, 64)...))
	f.Add(append([]byte{0xFF, 0xFF}, make([]byte, 200)...))
	f.Add(append(make([]byte, 40), fuzzInput(0, pad(0, pm4.Kernel(abi.KERNEL_ENDLESS, 0, 0, 0), pm4.DispatchDirect(1, 1, 1)), nil)...))

	r := cptest.NewRig(f, fuzzMem, func(c *cp.Config) { c.MaxIBExpansions = 4 })
	f.Fuzz(func(t *testing.T, in []byte) {
		defer fuzzReset(t, r)
		m := &mapInput{b: in}
		img := m.image()
		r.Mem.SetBytes(fuzzRing, in[min(m.off, len(in)):min(len(in), m.off+fuzzMem-fuzzRing)])
		if err := r.CP.Map(1, img); err != nil {
			if !errors.Is(err, cp.ErrBadImage) {
				t.Fatalf("Map refused with %v, want ErrBadImage", err)
			}
			if _, st := r.CP.Saved(1); st != cp.Empty {
				t.Fatalf("refused Map left %v", st)
			}
			return
		}
		deadline := time.Now().Add(fuzzDeadline)
		r.CP.Preempt(1)
		saved, st := fuzzStop(t, r, 1, deadline)
		if st == cp.Preempted {
			r.CP.Release(1)
			if err := r.CP.Map(2, saved); err != nil {
				t.Fatalf("the saved image %+v was refused: %v", saved, err)
			}
			r.CP.Preempt(2)
			fuzzStop(t, r, 2, deadline)
		}
	})
}

// fuzzStop waits for a preempted slot to stop (killing it in the endless kernel), with the
// packet bound of FuzzRing, and returns Saved.
func fuzzStop(t *testing.T, r *cptest.Rig, slot int, deadline time.Time) (cp.Image, cp.StopState) {
	for spin := 0; ; spin++ {
		if p := fuzzPackets(r); p > fuzzMaxPackets {
			t.Fatalf("%d packets executed, bound %d", p, fuzzMaxPackets)
		}
		img, st := r.CP.Saved(slot)
		if st != cp.Running {
			return img, st
		}
		if q := r.CP.Queue(slot); q.State == abi.HQD_STATE_BUSY_KERNEL {
			r.CP.Kill(slot)
			if img, st = r.CP.Saved(slot); st != cp.Killed {
				t.Fatalf("Kill left %v", st)
			}
			return img, st
		}
		fuzzPause(t, spin, deadline, "a preempted queue did not stop", r.CP.Queue(slot))
	}
}
