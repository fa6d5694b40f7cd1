package cp_test

import (
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/engine"
	"vgpu/pm4"
)

// holdMem is the test memory with one write that blocks: the queue making it sits inside a
// call out (at a known packet, or a known DMA chunk) until the test releases it, so a
// preemption lands at a known point.
type holdMem struct {
	*cptest.Memory
	mu      sync.Mutex
	va      uint64 // 0: none armed
	entered chan struct{}
	release chan struct{}
}

func (m *holdMem) hold(va uint64) {
	m.mu.Lock()
	m.va, m.entered, m.release = va, make(chan struct{}), make(chan struct{})
	m.mu.Unlock()
}

func (m *holdMem) Write(a engine.Access, va uint64, p []byte) error {
	m.mu.Lock()
	held := m.va != 0 && va == m.va
	entered, release := m.entered, m.release
	if held {
		m.va = 0
	}
	m.mu.Unlock()
	if held {
		close(entered)
		<-release
	}
	return m.Memory.Write(a, va, p)
}

// waitHeld waits until the armed write is blocked.
func (m *holdMem) waitHeld(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	ch := m.entered
	m.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(cptest.Timeout):
		t.Fatal("the held write never came")
	}
}

func (m *holdMem) unhold() { m.mu.Lock(); close(m.release); m.mu.Unlock() }

// notes counts Notify calls per slot.
type notes struct{ n [cp.NumSlots]atomic.Int64 }

func (n *notes) notify(slot int) { n.n[slot].Add(1) }

// mapRig is a rig whose memory can hold a write, with Notify counted.
func mapRig(t testing.TB, cfg ...func(*cp.Config)) (*cptest.Rig, *holdMem, *notes) {
	hm, nt := &holdMem{}, &notes{}
	r := cptest.NewRig(t, memSize, append([]func(*cp.Config){func(c *cp.Config) {
		hm.Memory = c.Memory.(*cptest.Memory)
		c.Memory, c.Notify, c.MaxRunning = hm, nt.notify, 4
	}}, cfg...)...)
	return r, hm, nt
}

// ringImage is a fresh image of ring k (queueConfig(k)'s ring, rptr report and doorbell).
func ringImage(k int) cp.Image {
	qc := queueConfig(k)
	return cp.Image{
		Base: qc.Base, Control: ringQS << abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT, ReportAddr: qc.RptrReport,
		DoorbellControl: abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK | qc.Doorbell<<abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT,
		DoorbellOffset:  qc.Doorbell,
	}
}

// guestRing is the driver's side of ring k (packets written to memory; the CP is told by Kick).
func guestRing(r *cptest.Rig, k int) *cptest.Ring { return r.NewRing(k, queueConfig(k)) }

// waitStopped waits until slot's mapped queue has stopped and returns Saved.
func waitStopped(t *testing.T, r *cptest.Rig, slot int) (cp.Image, cp.StopState) {
	t.Helper()
	var img cp.Image
	var st cp.StopState
	cptest.Eventually(t, "the mapped queue to stop", func() bool { img, st = r.CP.Saved(slot); return st != cp.Running })
	return img, st
}

// waitDone waits until slot's queue consumed its ring up to w (failing on a halt).
func waitDone(t *testing.T, r *cptest.Rig, slot int, w uint64) {
	t.Helper()
	cptest.Eventually(t, "the mapped queue to finish its ring", func() bool {
		q := r.CP.Queue(slot)
		if q.State == abi.HQD_STATE_HALTED {
			t.Fatalf("slot %d halted: error %d at %#x", slot, q.Error, q.ErrorAddr)
		}
		return q.Rptr == w && q.Idle
	})
}

func mustMap(t *testing.T, r *cptest.Rig, slot int, img cp.Image) {
	t.Helper()
	if err := r.CP.Map(slot, img); err != nil {
		t.Fatalf("Map(%d): %v", slot, err)
	}
}

// A queue preempted at a packet boundary (ring, IB1, IB2) saves its exact position, IB stack,
// IB count and user data; mapped into another slot it continues there, and its IVs carry the
// new slot's ring id.
func TestPreemptResumeElsewhere(t *testing.T) {
	const (
		d0, d1, d2, d3 = dataBase, dataBase + 4, dataBase + 8, dataBase + 12
		counter        = dataBase + 0x40
		hold           = dataBase + 0x80
		fenceVA        = dataBase + 0x100
		ib1VA, ib2VA   = ibBase, ibBase + 0x1000
	)
	cases := []struct {
		name  string
		build func(r *cptest.Rig, ring *cptest.Ring)
		want  func(img cp.Image) cp.ExecState // the expected execution state (user data aside)
		rptr  uint64                          // expected saved ring rptr
	}{
		{"ring packet boundary", func(r *cptest.Rig, ring *cptest.Ring) {
			ring.Emit(pm4.Kernel(abi.KERNEL_INCREMENT, counter, 0, 0), pm4.WriteMem(d0, 1), pm4.WriteMem(hold, 2),
				pm4.DispatchDirect(3, 1, 1), pm4.WriteMem(d1, 3), pm4.WriteMem(d2, 4), pm4.WriteMem(d3, 9))
		}, func(cp.Image) cp.ExecState { return cp.ExecState{} }, uint64(len(pm4.Kernel(abi.KERNEL_INCREMENT, counter, 0, 0))) + 10},
		{"inside IB1", func(r *cptest.Rig, ring *cptest.Ring) {
			ring.Emit(pm4.Kernel(abi.KERNEL_INCREMENT, counter, 0, 0))
			ib1 := cptest.NewIB(r.Mem, ib1VA)
			ib1.Emit(pm4.WriteMem(d0, 1), pm4.WriteMem(hold, 2), pm4.DispatchDirect(3, 1, 1), pm4.WriteMem(d1, 3))
			ring.Emit(cptest.IBCall(ib1), pm4.WriteMem(d2, 4), pm4.WriteMem(d3, 9))
		}, func(cp.Image) cp.ExecState {
			return cp.ExecState{Level: 1, IBCount: 1, IB: [cp.IBMaxDepth]cp.IBState{{Base: ib1VA, Size: 20, Pos: 10}}}
		}, uint64(len(pm4.Kernel(abi.KERNEL_INCREMENT, counter, 0, 0))) + 4},
		{"inside IB2", func(r *cptest.Rig, ring *cptest.Ring) {
			ring.Emit(pm4.Kernel(abi.KERNEL_INCREMENT, counter, 0, 0))
			ib2 := cptest.NewIB(r.Mem, ib2VA)
			ib2.Emit(pm4.WriteMem(hold, 2), pm4.DispatchDirect(3, 1, 1), pm4.WriteMem(d1, 3))
			ib1 := cptest.NewIB(r.Mem, ib1VA)
			ib1.Emit(pm4.WriteMem(d0, 1), cptest.IBCall(ib2), pm4.WriteMem(d2, 4))
			ring.Emit(cptest.IBCall(ib1), pm4.WriteMem(d3, 9))
		}, func(cp.Image) cp.ExecState {
			return cp.ExecState{Level: 2, IBCount: 2, IB: [cp.IBMaxDepth]cp.IBState{{Base: ib1VA, Size: 14, Pos: 9}, {Base: ib2VA, Size: 15, Pos: 5}}}
		}, uint64(len(pm4.Kernel(abi.KERNEL_INCREMENT, counter, 0, 0))) + 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, hm, nt := mapRig(t)
			ring := guestRing(r, 1)
			tc.build(r, ring)
			ring.Emit(pm4.Fence(fenceVA, 7, 0x77, true))
			w := ring.Wptr()
			mustMap(t, r, 1, ringImage(1))
			hm.hold(hold)
			r.CP.Kick(1, w)
			hm.waitHeld(t)
			r.CP.Preempt(1)
			r.CP.Preempt(1) // idempotent
			if _, st := r.CP.Saved(1); st != cp.Running {
				t.Fatalf("Saved while the queue is inside a packet: %v", st)
			}
			hm.unhold()
			img, st := waitStopped(t, r, 1)
			if st != cp.Preempted {
				t.Fatalf("stopped as %v, want preempted", st)
			}
			if img.Rptr != tc.rptr || img.Wptr != w {
				t.Errorf("saved rptr %d wptr %d, want %d %d", img.Rptr, img.Wptr, tc.rptr, w)
			}
			want := tc.want(img)
			want.UserData = img.Exec.UserData
			if !reflect.DeepEqual(img.Exec, want) {
				t.Errorf("saved exec state\n%+v, want\n%+v", img.Exec, want)
			}
			if ud := img.Exec.UserData; ud[0] != abi.KERNEL_INCREMENT || ud[1] != uint32(counter) {
				t.Errorf("user data not saved: %v", ud[:6])
			}
			if r.Mem.Load32(d0) != 1 || r.Mem.Load32(hold) != 2 || r.Mem.Load32(d1) != 0 || r.Mem.Load32(counter) != 0 {
				t.Fatalf("before the resume: d0 %d hold %d d1 %d counter %d", r.Mem.Load32(d0), r.Mem.Load32(hold), r.Mem.Load32(d1), r.Mem.Load32(counter))
			}
			if a := r.ReadHQD(1, abi.REG_HQD_ACTIVE); a != 0 {
				t.Errorf("ACTIVE %d after the preemption", a)
			}
			if nt.n[1].Load() == 0 {
				t.Error("no Notify for the stop")
			}
			r.CP.Release(1)
			if _, st := r.CP.Saved(1); st != cp.Empty {
				t.Errorf("slot 1 after Release: %v", st)
			}
			mustMap(t, r, 5, img)
			waitDone(t, r, 5, w)
			for _, c := range []struct {
				va   uint64
				want uint32
			}{{d0, 1}, {d1, 3}, {d2, 4}, {d3, 9}, {counter, 3}, {fenceVA, 7}} {
				if got := r.Mem.Load32(c.va); got != c.want {
					t.Errorf("%#x = %d, want %d", c.va, got, c.want)
				}
			}
			if r.IVs.Len() != 1 || r.IVs.All()[0].RingID != cp.RingID(5) {
				t.Errorf("IVs %+v, want one from ring id %#x", r.IVs.All(), cp.RingID(5))
			}
			if rep := r.Mem.Load32(queueConfig(1).RptrReport); rep != uint32(w) {
				t.Errorf("rptr report %d, want %d", rep, w)
			}
		})
	}
}

// A DMA_DATA preempted between its 64 KiB chunks saves the bytes done; resumed in another
// slot it moves only the rest (the first chunks, overwritten meanwhile, stay as they are).
func TestPreemptDMAData(t *testing.T) {
	const (
		n    = 256 << 10
		dst  = 0x200000
		src  = 0x300000
		word = 0xA5C3_0F96
	)
	cases := []struct {
		name string
		pkt  []uint32
		want func(off int) byte
	}{
		{"fill", pm4.DMAFill(dst, word, n), func(off int) byte { return byte(uint32(word) >> (8 * (off % 4))) }},
		{"copy", pm4.DMACopy(dst, src, n), func(off int) byte { return byte(off*7 + off>>12) }},
		{"fixed source", pm4.DMAData{SrcSel: abi.PM4_DMA_DATA_SEL_ADDR_L2, DstSel: abi.PM4_DMA_DATA_SEL_ADDR_L2,
			Src: src, Dst: dst, Count: n, SAIC: true}.Encode(), func(off int) byte { return byte(off%4*7 + 0) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, hm, _ := mapRig(t)
			pattern := make([]byte, n)
			for i := range pattern {
				pattern[i] = byte(i*7 + i>>12)
			}
			r.Mem.SetBytes(src, pattern)
			ring := guestRing(r, 1)
			w := ring.Emit(tc.pkt, pm4.WriteMem(dataBase, 1))
			mustMap(t, r, 1, ringImage(1))
			hm.hold(dst + 64<<10) // the second chunk
			r.CP.Kick(1, w)
			hm.waitHeld(t)
			r.CP.Preempt(1)
			hm.unhold()
			img, st := waitStopped(t, r, 1)
			if st != cp.Preempted || img.Rptr != 0 || img.Exec.Progress != 128<<10 {
				t.Fatalf("stopped %v at rptr %d with progress %d; want preempted at 0 with %d", st, img.Rptr, img.Exec.Progress, 128<<10)
			}
			r.Mem.SetBytes(dst, make([]byte, 128<<10)) // done: must not be redone
			r.CP.Release(1)
			mustMap(t, r, 9, img)
			waitDone(t, r, 9, w)
			got := r.Mem.Bytes(dst, n+4)
			for off := 0; off < n+4; off++ {
				want := byte(0)
				if off >= 128<<10 && off < n {
					want = tc.want(off)
				}
				if got[off] != want {
					t.Fatalf("dst+%#x = %#x, want %#x", off, got[off], want)
				}
			}
			if r.Mem.Load32(dataBase) != 1 {
				t.Error("the packet after the DMA did not run")
			}
		})
	}
}

// A parked WAIT_REG_MEM is a preemption point: rptr stays on it and it is evaluated again
// after the resume; a write-then-wait's write is not repeated.
func TestPreemptParkedWait(t *testing.T) {
	const flag = dataBase + 0x200
	cases := []struct {
		name        string
		pkt         []uint32
		writes      int // writes of scratch(0) the whole run makes
		waitWritten bool
		satisfy     func(r *cptest.Rig)
	}{
		{"memory wait", pm4.WaitMem(flag, 1), 0, false, func(r *cptest.Rig) { r.Mem.Store32(flag, 1) }},
		{"write then wait", pm4.WaitRegMem{Function: pm4.FuncEQ, Space: pm4.SpaceReg,
			Operation: abi.PM4_WAIT_REG_MEM_OPERATION_WRITE_WAIT, Reg1: scratch(0), Reg2: scratch(1), Ref: 5, Mask: ^uint32(0), Interval: 10}.Encode(),
			1, true, func(r *cptest.Rig) { r.Regs.Set(scratch(1), 5) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _, nt := mapRig(t)
			ring := guestRing(r, 1)
			w := ring.Emit(tc.pkt, pm4.WriteMem(dataBase, 1))
			mustMap(t, r, 1, ringImage(1))
			r.CP.Kick(1, w)
			r.WaitState(t, 1, abi.HQD_STATE_WAITING)
			if nt.n[1].Load() == 0 {
				t.Error("no Notify for the parked wait")
			}
			r.CP.Preempt(1)
			img, st := waitStopped(t, r, 1)
			if st != cp.Preempted || img.Rptr != 0 || img.Exec.WaitWritten != tc.waitWritten {
				t.Fatalf("stopped %v at rptr %d, written %v", st, img.Rptr, img.Exec.WaitWritten)
			}
			r.CP.Release(1)
			tc.satisfy(r)
			mustMap(t, r, 6, img)
			waitDone(t, r, 6, w)
			if r.Mem.Load32(dataBase) != 1 {
				t.Error("the packet after the wait did not run")
			}
			n := 0
			for _, wr := range r.Regs.Writes() {
				if wr.Reg == scratch(0) {
					n++
				}
			}
			if n != tc.writes {
				t.Errorf("%d writes of REG_ADDR1, want %d", n, tc.writes)
			}
		})
	}
}

// The endless kernel does not preempt (that is how the scheduler sees a hang); Kill stops it
// at once and Saved says so.
func TestEndlessKernelKill(t *testing.T) {
	r, _, nt := mapRig(t)
	ring := guestRing(r, 1)
	w := ring.Dispatch(abi.KERNEL_ENDLESS, 0, 0, 0, 1, 1, 1)
	mustMap(t, r, 1, ringImage(1))
	r.CP.Kick(1, w)
	r.WaitState(t, 1, abi.HQD_STATE_BUSY_KERNEL)
	r.CP.Preempt(1)
	time.Sleep(20 * time.Millisecond)
	if _, st := r.CP.Saved(1); st != cp.Running {
		t.Fatalf("the endless kernel stopped on a preemption: %v", st)
	}
	if s, _ := r.Status(1); s != abi.HQD_STATE_BUSY_KERNEL {
		t.Fatalf("state %d", s)
	}
	r.CP.Kill(1)
	if _, st := r.CP.Saved(1); st != cp.Killed {
		t.Fatalf("after Kill: %v", st)
	}
	if a := r.ReadHQD(1, abi.REG_HQD_ACTIVE); a != 0 {
		t.Errorf("ACTIVE %d after Kill", a)
	}
	cptest.Eventually(t, "the killed goroutine to end", func() bool { return r.CP.Stats().Live == 0 })
	if nt.n[1].Load() == 0 {
		t.Error("no Notify for the kill")
	}
	if err := r.CP.Map(1, ringImage(2)); !errors.Is(err, cp.ErrSlotBusy) {
		t.Errorf("Map over an unreleased killed queue: %v", err)
	}
	r.CP.Release(1)
	mustMap(t, r, 1, ringImage(2))
}

// Write pointers reach a mapped queue by its doorbell and by Kick, and only move forward;
// its HQD registers read back the live queue; a doorbell for a stopped mapped queue misses.
func TestMappedDoorbellKickAndRegisters(t *testing.T) {
	r, _, _ := mapRig(t)
	ring := guestRing(r, 2)
	img := ringImage(2)
	img.VMID = 0
	mustMap(t, r, 3, img)
	w := ring.Emit(pm4.WriteMem(dataBase, 1))
	if !r.CP.Doorbell(queueConfig(2).Doorbell, w) {
		t.Fatal("the doorbell missed the mapped queue")
	}
	waitDone(t, r, 3, w)
	w = ring.Emit(pm4.WriteMem(dataBase+4, 2))
	r.CP.Kick(3, w)
	waitDone(t, r, 3, w)
	r.CP.Kick(3, 1) // behind: ignored
	if q := r.CP.Queue(3); q.Wptr != w {
		t.Errorf("wptr %d after a smaller kick, want %d", q.Wptr, w)
	}
	for _, c := range []struct {
		off, want uint32
	}{
		{abi.REG_HQD_ACTIVE, 1},
		{abi.REG_HQD_PQ_BASE_LO, uint32(img.Base)},
		{abi.REG_HQD_PQ_CONTROL, img.Control},
		{abi.REG_HQD_PQ_DOORBELL_CONTROL, img.DoorbellControl},
		{abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO, uint32(img.ReportAddr)},
		{abi.REG_HQD_PQ_RPTR, uint32(w)},
		{abi.REG_HQD_PQ_WPTR_LO, uint32(w)},
		{abi.REG_HQD_PQ_WPTR_POLL_CNTL, 0},
		{abi.REG_HQD_STATUS, abi.HQD_STATE_RUNNING << abi.REG_HQD_STATUS__STATE__SHIFT},
	} {
		if got := r.ReadHQD(3, c.off); got != c.want {
			t.Errorf("HQD register %#x = %#x, want %#x", c.off, got, c.want)
		}
	}
	if r.Mem.Load32(dataBase) != 1 || r.Mem.Load32(dataBase+4) != 2 {
		t.Fatal("packets did not run")
	}
	r.CP.Preempt(3)
	if _, st := waitStopped(t, r, 3); st != cp.Preempted {
		t.Fatalf("idle queue stopped as %v", st)
	}
	if r.CP.Doorbell(queueConfig(2).Doorbell, w+5) {
		t.Error("a doorbell for a stopped mapped queue hit")
	}
}

// Slots MES owns ignore register writes (counted) but read back the live queue; Reset empties
// every mapped slot and clears the ownership.
func TestOwnedSlotsAndReset(t *testing.T) {
	r, _, _ := mapRig(t)
	r.CP.SetOwned(1<<3 | 1<<4)
	img := ringImage(3)
	mustMap(t, r, 3, img)
	ring := guestRing(r, 3)
	w := ring.Emit(pm4.WriteMem(dataBase, 1))
	before := r.CP.Stats().IgnoredWrites
	r.WriteHQD(3, abi.REG_HQD_PQ_WPTR_LO, uint32(w))
	r.WriteHQD(3, abi.REG_HQD_DEQUEUE_REQUEST, abi.HQD_DEQUEUE_RESET)
	r.WriteHQD(3, abi.REG_HQD_PQ_BASE_LO, 0x4000)
	r.WriteHQD(4, abi.REG_HQD_PQ_BASE_LO, 0x4000)
	r.WriteHQD(4, abi.REG_HQD_ACTIVE, 1)
	if got := r.CP.Stats().IgnoredWrites - before; got != 5 {
		t.Errorf("%d writes ignored, want 5", got)
	}
	time.Sleep(5 * time.Millisecond)
	if r.Mem.Load32(dataBase) != 0 {
		t.Error("an ignored wptr write kicked the queue")
	}
	if r.ReadHQD(3, abi.REG_HQD_ACTIVE) != 1 || r.ReadHQD(3, abi.REG_HQD_PQ_BASE_LO) != uint32(img.Base) {
		t.Error("an owned slot does not read back its live queue")
	}
	if r.ReadHQD(4, abi.REG_HQD_ACTIVE) != 0 || r.ReadHQD(4, abi.REG_HQD_PQ_BASE_LO) != 0 {
		t.Error("an owned empty slot took register writes")
	}
	r.CP.Kick(3, w)
	waitDone(t, r, 3, w)
	mustMap(t, r, 4, ringImage(4))

	r.CP.Reset()
	for _, s := range []int{3, 4} {
		if _, st := r.CP.Saved(s); st != cp.Empty {
			t.Errorf("slot %d after Reset: %v", s, st)
		}
		if r.ReadHQD(s, abi.REG_HQD_ACTIVE) != 0 {
			t.Errorf("slot %d active after Reset", s)
		}
	}
	r.WriteHQD(3, abi.REG_HQD_PQ_BASE_LO, 0x4000)
	if got := r.ReadHQD(3, abi.REG_HQD_PQ_BASE_LO); got != 0x4000 {
		t.Errorf("ownership survived Reset: PQ_BASE_LO %#x", got)
	}
	if !r.CP.Quiesce(cptest.Timeout) {
		t.Fatal("Quiesce")
	}
	mustMap(t, r, 3, ringImage(3))
	// CP_ENGINE_RESET empties the engine's mapped slots too, and leaves the ownership.
	r.CP.SetOwned(1 << 3)
	r.CP.EngineReset(cp.EngineCompute)
	if _, st := r.CP.Saved(3); st != cp.Empty || r.ReadHQD(3, abi.REG_HQD_ACTIVE) != 0 {
		t.Errorf("slot 3 after CP_ENGINE_RESET: %v", st)
	}
	r.WriteHQD(3, abi.REG_HQD_PQ_BASE_LO, 0x8000)
	if got := r.ReadHQD(3, abi.REG_HQD_PQ_BASE_LO); got == 0x8000 {
		t.Error("CP_ENGINE_RESET cleared the ownership")
	}
	cptest.Eventually(t, "the engine reset to complete", func() bool { return r.CP.Stats().EngineResetBusy == 0 })
}

// Map refuses every malformed image with a named error and leaves the slot as it was.
func TestMapRefuses(t *testing.T) {
	ok := ringImage(1)
	ok.Rptr, ok.Wptr = 100, 120
	cases := []struct {
		name string
		slot int
		edit func(*cp.Image)
		want error
	}{
		{"slot out of range", cp.NumSlots, func(*cp.Image) {}, cp.ErrBadSlot},
		{"negative slot", -1, func(*cp.Image) {}, cp.ErrBadSlot},
		{"queue size too small", 1, func(i *cp.Image) { i.Control = 4 << abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT }, cp.ErrBadImage},
		{"queue size too large", 1, func(i *cp.Image) { i.Control = 21 << abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT }, cp.ErrBadImage},
		{"unaligned ring", 1, func(i *cp.Image) { i.Base += 4 }, cp.ErrBadImage},
		{"ring past 48 bits", 1, func(i *cp.Image) { i.Base = 1<<48 - 256 }, cp.ErrBadImage},
		{"VMID 16", 1, func(i *cp.Image) { i.VMID = 16 }, cp.ErrBadImage},
		{"negative VMID", 1, func(i *cp.Image) { i.VMID = -1 }, cp.ErrBadImage},
		{"unaligned report", 1, func(i *cp.Image) { i.ReportAddr = 2 }, cp.ErrBadImage},
		{"unaligned fence", 1, func(i *cp.Image) { i.FenceAddr = 4 }, cp.ErrBadImage},
		{"wptr behind rptr", 1, func(i *cp.Image) { i.Wptr = 99 }, cp.ErrBadImage},
		{"wptr more than a ring ahead", 1, func(i *cp.Image) { i.Wptr = 100 + 2049 }, cp.ErrBadImage},
		{"level 3", 1, func(i *cp.Image) { i.Exec.Level = 3 }, cp.ErrBadImage},
		{"negative level", 1, func(i *cp.Image) { i.Exec.Level = -1 }, cp.ErrBadImage},
		{"IB position past its size", 1, func(i *cp.Image) { i.Exec.Level, i.Exec.IB[0] = 1, cp.IBState{Base: ibBase, Size: 4, Pos: 5} }, cp.ErrBadImage},
		{"IB too large", 1, func(i *cp.Image) { i.Exec.Level, i.Exec.IB[0] = 1, cp.IBState{Base: ibBase, Size: 1 << 20} }, cp.ErrBadImage},
		{"IB wraps", 1, func(i *cp.Image) { i.Exec.Level, i.Exec.IB[0] = 1, cp.IBState{Base: ^uint64(3), Size: 8} }, cp.ErrBadImage},
		{"IB unaligned", 1, func(i *cp.Image) { i.Exec.Level, i.Exec.IB[0] = 1, cp.IBState{Base: ibBase + 2, Size: 8} }, cp.ErrBadImage},
		{"IB leaves a process address space", 1, func(i *cp.Image) {
			i.VMID, i.Exec.Level, i.Exec.IB[0] = 3, 1, cp.IBState{Base: ibBase, Size: 8, VMID: 4}
		}, cp.ErrBadImage},
		{"IB2 leaves its IB1's address space", 1, func(i *cp.Image) {
			i.Exec.Level = 2
			i.Exec.IB[0], i.Exec.IB[1] = cp.IBState{Base: ibBase, Size: 8, VMID: 3}, cp.IBState{Base: ibBase, Size: 8}
		}, cp.ErrBadImage},
		{"IB count over the limit", 1, func(i *cp.Image) { i.Exec.IBCount = cp.DefaultMaxIBExpansions + 1 }, cp.ErrBadImage},
		{"progress not in dwords", 1, func(i *cp.Image) { i.Exec.Progress = 6 }, cp.ErrBadImage},
		{"progress without a packet", 1, func(i *cp.Image) { i.Rptr, i.Exec.Progress = 120, 64<<10 }, cp.ErrBadImage},
		{"written wait without a packet", 1, func(i *cp.Image) {
			i.Exec.Level, i.Exec.IB[0], i.Exec.WaitWritten = 1, cp.IBState{Base: ibBase, Size: 8, Pos: 8}, true
		}, cp.ErrBadImage},
		{"halted image", 1, func(i *cp.Image) { i.Error = abi.CP_ERROR_BAD_OPCODE }, cp.ErrBadImage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _, _ := mapRig(t)
			img := ok
			tc.edit(&img)
			err := r.CP.Map(tc.slot, img)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Map: %v, want %v", err, tc.want)
			}
			if _, st := r.CP.Saved(1); st != cp.Empty || r.CP.Stats().Live != 0 {
				t.Errorf("a refused Map left %v, %d goroutines", st, r.CP.Stats().Live)
			}
		})
	}
	r, _, _ := mapRig(t)
	mustMap(t, r, 1, ok)
	if err := r.CP.Map(1, ok); !errors.Is(err, cp.ErrSlotBusy) {
		t.Errorf("Map over a running mapped queue: %v", err)
	}
	r.StartQueue(2, queueConfig(2))
	if err := r.CP.Map(2, ok); !errors.Is(err, cp.ErrSlotBusy) {
		t.Errorf("Map over an active register queue: %v", err)
	}
	r.CP.Close()
	if err := r.CP.Map(3, ok); !errors.Is(err, cp.ErrClosed) {
		t.Errorf("Map after Close: %v", err)
	}
}

// PROTECTED_FENCE_SIGNAL's packet checks (the value and privilege are in fence_test.go).
func TestProtectedFenceErrors(t *testing.T) {
	const fenceVA = dataBase + 0x300
	cases := []struct {
		name   string
		fence  uint64
		pkt    []uint32
		code   uint32
		mapped bool
	}{
		{"no fence address", 0, pm4.Packet(abi.PM4_IT_PROTECTED_FENCE_SIGNAL, 0), abi.CP_ERROR_BAD_PACKET, true},
		{"register-activated queue", 0, pm4.Packet(abi.PM4_IT_PROTECTED_FENCE_SIGNAL, 0), abi.CP_ERROR_BAD_PACKET, false},
		{"reserved payload", fenceVA, pm4.Packet(abi.PM4_IT_PROTECTED_FENCE_SIGNAL, 1), abi.CP_ERROR_RESERVED_BITS, true},
		{"COUNT 1", fenceVA, pm4.Packet(abi.PM4_IT_PROTECTED_FENCE_SIGNAL, 0, 0), abi.CP_ERROR_BAD_PACKET, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _, _ := mapRig(t)
			ring := guestRing(r, 1)
			if !tc.mapped {
				ring = r.StartQueue(1, queueConfig(1))
				ring.Submit(tc.pkt)
				if code := ring.WaitHalt(t); code != tc.code {
					t.Errorf("halted with %d, want %d", code, tc.code)
				}
				return
			}
			w := ring.Emit(tc.pkt)
			img := ringImage(1)
			img.FenceAddr = tc.fence
			mustMap(t, r, 1, img)
			r.CP.Kick(1, w)
			saved, st := waitStopped(t, r, 1)
			if st != cp.Halted || saved.Error != tc.code || saved.ErrorAddr != img.Base || saved.Rptr != 0 {
				t.Errorf("stopped %v with error %d at %#x rptr %d; want halted with %d at %#x", st, saved.Error, saved.ErrorAddr, saved.Rptr, tc.code, img.Base)
			}
			if r.Mem.Load64(fenceVA) != 0 {
				t.Error("the fence was written")
			}
			if s, e := r.Status(1); s != abi.HQD_STATE_HALTED || e != tc.code {
				t.Errorf("HQD status %d/%d", s, e)
			}
			if err := r.CP.Map(2, saved); !errors.Is(err, cp.ErrBadImage) {
				t.Errorf("Map of a halted image: %v", err)
			}
		})
	}
}

// A Preempt of an idle mapped queue stops it before it returns; the next Map of the slot
// runs on the stopped queue's goroutine (one goroutine per slot however often it switches),
// and a reset ends that goroutine when no Map comes.
func TestIdlePreemptAndSpareGoroutine(t *testing.T) {
	r, _, _ := mapRig(t)
	imgs := [2]cp.Image{ringImage(1), ringImage(2)}
	rings := [2]*cptest.Ring{guestRing(r, 1), guestRing(r, 2)}
	mustMap(t, r, 1, imgs[0])
	for i := 0; i < 20; i++ {
		cur := i & 1
		w := rings[cur].Emit(pm4.WriteMem(dataBase+uint64(cur)*4, uint32(i)))
		r.CP.Kick(1, w)
		waitDone(t, r, 1, w)
		r.CP.Preempt(1)
		img, st := r.CP.Saved(1)
		if st != cp.Preempted || img.Rptr != w {
			t.Fatalf("switch %d: Saved right after Preempt of an idle queue: %v rptr %d, want preempted at %d", i, st, img.Rptr, w)
		}
		imgs[cur] = img
		r.CP.Release(1)
		mustMap(t, r, 1, imgs[1-cur])
		if got := r.Mem.Load32(dataBase + uint64(cur)*4); got != uint32(i) {
			t.Fatalf("switch %d: data %d", i, got)
		}
	}
	waitDone(t, r, 1, rings[0].Wptr())
	if live := r.CP.Stats().Live; live != 1 {
		t.Errorf("%d goroutines after 20 switches of one slot, want 1", live)
	}
	r.CP.Preempt(1)
	if _, st := r.CP.Saved(1); st != cp.Preempted {
		t.Fatalf("last preemption: %v", st)
	}
	r.CP.Release(1)
	// An idle queue handed to the spare and killed before it ever ran.
	mustMap(t, r, 1, ringImage(3))
	if !r.CP.Queue(1).Idle || r.ReadHQD(1, abi.REG_HQD_ACTIVE) != 1 {
		t.Errorf("an idle mapped queue: %+v", r.CP.Queue(1))
	}
	r.CP.Kill(1)
	if _, st := r.CP.Saved(1); st != cp.Killed {
		t.Fatalf("Kill of a queue that never ran: %v", st)
	}
	r.CP.Release(1)
	mustMap(t, r, 1, ringImage(3))
	r.CP.Reset() // the spare (and the queue it never picked up) wait for no Map: the reset ends them
	if _, st := r.CP.Saved(1); st != cp.Empty {
		t.Errorf("after Reset: %v", st)
	}
	cptest.Eventually(t, "the spare goroutine to end", func() bool { return r.CP.Stats().Live == 0 })
}
