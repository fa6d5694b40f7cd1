package cp_test

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
	"vgpu/ratelog"
)

// stall makes engine memory writes block inside their call out (after the data landed)
// while armed, as a DMA to a client that does not answer would.
type stall struct {
	armed   atomic.Bool
	entered chan struct{} // one token per write that blocked
	release chan struct{}
}

func newStall(r *cptest.Rig) *stall {
	s := &stall{entered: make(chan struct{}, 64), release: make(chan struct{})}
	r.Mem.SetOnWrite(func() {
		if s.armed.Load() {
			s.entered <- struct{}{}
			<-s.release
		}
		r.CP.Wake()
	})
	return s
}

// wait waits until a write is blocked.
func (s *stall) wait(t *testing.T) {
	t.Helper()
	select {
	case <-s.entered:
	case <-time.After(cptest.Timeout):
		t.Fatal("no engine write blocked")
	}
}

// open lets every blocked write return and stops blocking.
func (s *stall) open() {
	s.armed.Store(false)
	close(s.release)
}

// oneAddr is WRITE_DATA to memory with WR_ONE_ADDR: one call out per dword, with no stop
// check between them, so a revoked goroutine's next call out is the one the gate refuses.
func oneAddr(addr uint64, data ...uint32) []uint32 {
	return pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_MEM, Addr: addr, OneAddr: true, Data: data}.Encode()
}

func wantZeroHQD(t *testing.T, r *cptest.Rig, slot int) {
	t.Helper()
	for off := uint32(0); off < abi.BLOCK_HQD_STRIDE; off += 4 {
		if v := r.ReadHQD(slot, off); v != 0 {
			t.Errorf("slot %d register %#x = %#x, want the power-on 0", slot, off, v)
		}
	}
}

// TestResetRevokesStalledQueue: Reset returns while a queue goroutine is stuck inside a
// call out; Quiesce reports it in flight until the call returns; its next call out is
// refused, so nothing it does after the reset reaches memory, registers or interrupts.
func TestResetRevokesStalledQueue(t *testing.T) {
	r, ring := start(t, 1)
	st := newStall(r)
	st.armed.Store(true)
	ring.Submit(oneAddr(dataBase, 1, 2), pm4.Fence(dataBase+8, 1, 0, true))
	st.wait(t)

	r.CP.Reset() // must not wait for the stuck goroutine
	wantZeroHQD(t, r, 1)
	if r.CP.Quiesce(time.Millisecond) {
		t.Fatal("Quiesce reported quiet while a call out that began before Reset is in flight")
	}
	if s := r.CP.Stats(); s.Draining != 1 {
		t.Errorf("Draining = %d, want 1", s.Draining)
	}
	st.open()
	if !r.CP.Quiesce(cptest.Timeout) {
		t.Fatal("Quiesce timed out after the call out returned")
	}
	s := r.CP.Stats()
	if s.StaleCallouts != 1 || s.Draining != 0 || s.Halts != 0 {
		t.Errorf("StaleCallouts %d Draining %d Halts %d, want 1, 0, 0", s.StaleCallouts, s.Draining, s.Halts)
	}
	wantMem32(t, r, dataBase, 1, 0, 0) // the second dword and the fence were refused
	if n := r.IVs.Len(); n != 0 {
		t.Errorf("%d IVs from a revoked queue", n)
	}
	// The slot works again.
	ring = r.StartQueue(1, queueConfig(1))
	ring.Submit(pm4.WriteMem(dataBase+12, 3))
	ring.WaitIdle(t)
	wantMem32(t, r, dataBase+12, 3)
}

// TestQuiesceIgnoresCurrentQueues: Quiesce waits only for revoked activations: running,
// parked and endless queues that are current do not delay it.
func TestQuiesceIgnoresCurrentQueues(t *testing.T) {
	r := cptest.NewRig(t, memSize)
	parked := r.StartQueue(1, queueConfig(1))
	endless := r.StartQueue(2, queueConfig(2))
	parked.Submit(pm4.WaitMem(dataBase, 1))
	endless.Dispatch(abi.KERNEL_ENDLESS, 0, 0, 0, 1, 1, 1)
	endless.Kick()
	r.WaitState(t, 1, abi.HQD_STATE_WAITING)
	r.WaitState(t, 2, abi.HQD_STATE_BUSY_KERNEL)
	if !r.CP.Quiesce(0) {
		t.Fatalf("Quiesce(0) false with no revoked activation: %+v", r.CP.Stats())
	}
	r.CP.Reset()
	if !r.CP.Quiesce(cptest.Timeout) {
		t.Fatal("Quiesce timed out after resetting a parked and an endless queue")
	}
}

// fenceLoop submits n fences on ring one after the other, each waited for, and returns
// how many completed; it is the bystander that must not notice another engine's reset.
func fenceLoop(t *testing.T, r *cptest.Rig, ring *cptest.Ring, addr uint64, n int) int {
	t.Helper()
	for seq := uint32(1); seq <= uint32(n); seq++ {
		ring.Submit(pm4.Fence(addr, seq, 0, false))
		deadline := time.Now().Add(cptest.Timeout)
		for r.Mem.Load32(addr) != seq {
			if time.Now().After(deadline) {
				return int(seq) - 1
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	return n
}

// TestEngineReset resets one engine while queues of it are in every state and a queue of
// the other engine keeps completing fences.
func TestEngineReset(t *testing.T) {
	cases := []struct {
		name      string
		bits      uint32
		victims   []int
		bystander int
	}{
		{"compute", abi.REG_CP_ENGINE_RESET__COMPUTE_MASK, []int{1, 2, 3, 16}, 0},
		{"gfx", abi.REG_CP_ENGINE_RESET__GFX_MASK, []int{0}, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := cptest.NewRig(t, memSize)
			flag := uint64(dataBase + 0x1000) // the victims' waits
			for i, slot := range tc.victims {
				ring := r.StartQueue(slot, queueConfig(slot))
				switch i % 4 {
				case 0: // parked, with a write behind the wait that must never happen
					ring.Submit(pm4.WaitMem(flag, 1), pm4.WriteMem(dataBase+0x2000, 0xBAD))
					r.WaitState(t, slot, abi.HQD_STATE_WAITING)
				case 1: // in the endless kernel
					ring.Dispatch(abi.KERNEL_ENDLESS, 0, 0, 0, 1, 1, 1)
					ring.Kick()
					r.WaitState(t, slot, abi.HQD_STATE_BUSY_KERNEL)
				case 2: // halted
					ring.Submit(pm4.Packet(0xEE, 0))
					ring.WaitHalt(t)
				case 3: // idle
					ring.Submit(pm4.WriteMem(dataBase+0x3000, 1))
					ring.WaitIdle(t)
				}
			}
			by := r.StartQueue(tc.bystander, queueConfig(tc.bystander))
			fenceAddr := uint64(dataBase + 0x4000)
			done := make(chan int)
			go func() { done <- fenceLoop(t, r, by, fenceAddr, 300) }()
			cptest.Eventually(t, "bystander fences", func() bool { return r.Mem.Load32(fenceAddr) >= 10 })

			r.WriteCP(abi.REG_CP_ENGINE_RESET, tc.bits)
			for _, slot := range tc.victims {
				wantZeroHQD(t, r, slot)
			}
			cptest.Eventually(t, "ENGINE_RESET_STATUS = 0", func() bool { return r.ReadCP(abi.REG_CP_ENGINE_RESET_STATUS) == 0 })
			if got := r.ReadCP(abi.REG_CP_ENGINE_RESETS); got != 1 {
				t.Errorf("ENGINE_RESETS = %d, want 1", got)
			}
			// Completed: no old activation can act, so releasing the wait does nothing.
			r.Mem.Store32(flag, 1)
			r.CP.Wake()
			if got := <-done; got != 300 {
				t.Errorf("bystander completed %d of 300 fences across the reset", got)
			}
			if got := fenceLoop(t, r, by, fenceAddr+4, 20); got != 20 {
				t.Errorf("bystander completed %d of 20 fences after the reset", got)
			}
			wantMem32(t, r, dataBase+0x2000, 0)
			wantHalts := uint64(0)
			if len(tc.victims) > 2 {
				wantHalts = 1 // engine resets do not clear CP_HALTS
			}
			if r.ReadHQD(tc.bystander, abi.REG_HQD_ACTIVE) != 1 || r.CP.Stats().Halts != wantHalts {
				t.Errorf("bystander inactive or halts changed: %+v", r.CP.Stats())
			}
			// The reset engine's slots work again.
			ring := r.StartQueue(tc.victims[0], queueConfig(tc.victims[0]))
			ring.Submit(pm4.WriteMem(dataBase+0x5000, 7))
			ring.WaitIdle(t)
			wantMem32(t, r, dataBase+0x5000, 7)
		})
	}
}

// TestEngineResetStalled: an engine reset whose victim is stuck in a call out stays in
// progress (STATUS set, idempotent under more writes) until the call returns, while the
// other engine runs (the stuck goroutine gave its execution turn back when revoked).
func TestEngineResetStalled(t *testing.T) {
	r := cptest.NewRig(t, memSize, func(c *cp.Config) { c.MaxRunning = 1 })
	st := newStall(r)
	victim := r.StartQueue(1, queueConfig(1))
	gfx := r.StartQueue(0, queueConfig(0))
	st.armed.Store(true)
	victim.Submit(oneAddr(dataBase, 1, 2))
	st.wait(t)

	compute := uint32(abi.REG_CP_ENGINE_RESET__COMPUTE_MASK)
	r.WriteCP(abi.REG_CP_ENGINE_RESET, compute)
	r.WriteCP(abi.REG_CP_ENGINE_RESET, compute) // a second write merges with the first
	st.armed.Store(false)                       // the bystander's writes must not block
	if got := fenceLoop(t, r, gfx, dataBase+0x100, 20); got != 20 {
		t.Fatalf("GFX completed %d of 20 fences while a revoked compute queue was stuck", got)
	}
	if got := r.ReadCP(abi.REG_CP_ENGINE_RESET_STATUS); got != compute {
		t.Errorf("ENGINE_RESET_STATUS = %#x while the victim is in a call out, want %#x", got, compute)
	}
	if got := r.ReadCP(abi.REG_CP_ENGINE_RESETS); got != 0 {
		t.Errorf("ENGINE_RESETS = %d before completion", got)
	}
	st.open()
	cptest.Eventually(t, "ENGINE_RESET_STATUS = 0", func() bool { return r.ReadCP(abi.REG_CP_ENGINE_RESET_STATUS) == 0 })
	if got := r.ReadCP(abi.REG_CP_ENGINE_RESETS); got != 1 {
		t.Errorf("ENGINE_RESETS = %d, want 1 (two writes, one reset)", got)
	}
	wantMem32(t, r, dataBase, 1, 0)
	if s := r.CP.Stats(); s.StaleCallouts != 1 {
		t.Errorf("StaleCallouts = %d, want 1", s.StaleCallouts)
	}
	// Both engines at once: the whole CP; two completions.
	r.WriteCP(abi.REG_CP_ENGINE_RESET, 0xFFFFFFFF) // unknown bits are ignored
	cptest.Eventually(t, "ENGINE_RESET_STATUS = 0", func() bool { return r.ReadCP(abi.REG_CP_ENGINE_RESET_STATUS) == 0 })
	if got := r.ReadCP(abi.REG_CP_ENGINE_RESETS); got != 3 {
		t.Errorf("ENGINE_RESETS = %d, want 3", got)
	}
	wantZeroHQD(t, r, 0)
	r.CP.Reset()
	if got := r.ReadCP(abi.REG_CP_ENGINE_RESETS); got != 0 {
		t.Errorf("ENGINE_RESETS = %d after Reset, want 0", got)
	}
}

// TestEngineResetFromPacket: a queue that resets its own engine through the register file
// stops at once; the packets after the write never run.
func TestEngineResetFromPacket(t *testing.T) {
	r, ring := start(t, 1)
	r.RouteCPBlocks()
	ring.Submit(pm4.WriteReg(abi.REG_CP_ENGINE_RESET/4, abi.REG_CP_ENGINE_RESET__COMPUTE_MASK),
		pm4.WriteMem(dataBase, 0xBAD), pm4.Fence(dataBase+4, 1, 0, true))
	cptest.Eventually(t, "ENGINE_RESETS = 1", func() bool { return r.ReadCP(abi.REG_CP_ENGINE_RESETS) == 1 })
	if !r.CP.Quiesce(cptest.Timeout) {
		t.Fatal("Quiesce timed out")
	}
	wantMem32(t, r, dataBase, 0, 0)
	wantZeroHQD(t, r, 1)
	if n := r.IVs.Len(); n != 0 {
		t.Errorf("%d IVs after the queue reset its engine", n)
	}
}

// TestInitFaultReport: a queue activated with an invalid ring reports its fault from the
// configuration at activation, even when a DEQUEUE_RESET clears the error fields before its
// goroutine runs (under -race, reading the live fields is a data race).
func TestInitFaultReport(t *testing.T) {
	r := cptest.NewRig(t, memSize)
	c := queueConfig(1)
	c.Base = ringBase + 0x10 // not 256-byte aligned
	for i := 1; i <= 50; i++ {
		r.Program(1, c)
		r.WriteHQD(1, abi.REG_HQD_ACTIVE, 1)
		r.WriteHQD(1, abi.REG_HQD_DEQUEUE_REQUEST, abi.HQD_DEQUEUE_RESET)
		if !r.IVs.Wait(i, cptest.Timeout) {
			t.Fatalf("activation %d: no IV", i)
		}
		ctl := c.QueueSize << abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT
		wantIV(t, r.IVs.All()[i-1], haltIV(1, abi.CP_ERROR_RING_CONFIG, c.Base, ctl))
		if s, e := r.Status(1); s != abi.HQD_STATE_IDLE || e != 0 {
			t.Fatalf("after DEQUEUE_RESET: state %d error %d", s, e)
		}
	}
}

// TestHaltLogRateLimited: halts are logged through the limiter; beyond its burst they are
// counted, not written.
func TestHaltLogRateLimited(t *testing.T) {
	h := &recordHandler{}
	lim := ratelog.New(slog.New(h), time.Hour, 3)
	r, ring := start(t, 1, func(c *cp.Config) { c.Limiter = lim })
	const halts = 20
	for i := 1; i <= halts; i++ {
		ring.Submit(pm4.Packet(0xEE, 0))
		ring.WaitHalt(t)
		if !r.IVs.Wait(i, cptest.Timeout) {
			t.Fatalf("halt %d: no IV", i)
		}
		ring.Dequeue(abi.HQD_DEQUEUE_RESET)
		r.WaitInactive(t, 1)
		ring = r.StartQueue(1, queueConfig(1))
	}
	h.mu.Lock()
	lines := 0
	for _, rec := range h.records {
		if strings.Contains(rec.Msg, "halted") {
			lines++
		}
	}
	h.mu.Unlock()
	if lines != 3 {
		t.Errorf("%d halt lines written, want the burst of 3", lines)
	}
	if s := r.CP.Stats(); s.LogLines != 3 || s.LogSuppressed != halts-3 || s.Halts != halts {
		t.Errorf("LogLines %d LogSuppressed %d Halts %d, want 3, %d, %d", s.LogLines, s.LogSuppressed, s.Halts, halts-3, halts)
	}
}

// TestCloseStalled: Close gives up on a goroutine stuck in a call out after StopTimeout,
// says so (once, through the limiter), and refuses later activations; the goroutine can no
// longer act when its call returns.
func TestCloseStalled(t *testing.T) {
	h := &recordHandler{}
	r, ring := start(t, 1, func(c *cp.Config) {
		c.Log = slog.New(h)
		c.StopTimeout = 5 * time.Millisecond
	})
	st := newStall(r)
	st.armed.Store(true)
	ring.Submit(oneAddr(dataBase, 1, 2))
	st.wait(t)
	r.CP.Close()
	h.mu.Lock()
	warned := false
	for _, rec := range h.records {
		warned = warned || rec.Level == slog.LevelWarn && strings.Contains(rec.Msg, "close")
	}
	h.mu.Unlock()
	if !warned {
		t.Error("Close did not report the goroutine it gave up on")
	}
	r.WriteHQD(2, abi.REG_HQD_ACTIVE, 1)
	if r.ReadHQD(2, abi.REG_HQD_ACTIVE) != 0 {
		t.Error("activation after Close")
	}
	st.open()
	if !r.CP.Quiesce(cptest.Timeout) {
		t.Fatal("Quiesce timed out")
	}
	wantMem32(t, r, dataBase, 1)
}

// TestActivationsBounded: resets cannot pile up goroutines behind call outs that do not
// return: beyond MaxLivePerSlot live goroutines for a slot, ACTIVE=1 is ignored.
func TestActivationsBounded(t *testing.T) {
	r := cptest.NewRig(t, memSize)
	st := newStall(r)
	st.armed.Store(true)
	for i := 0; i < cp.MaxLivePerSlot; i++ {
		ring := r.StartQueue(1, queueConfig(1))
		ring.Submit(pm4.WriteMem(dataBase, uint32(i)))
		st.wait(t)
		r.WriteCP(abi.REG_CP_ENGINE_RESET, abi.REG_CP_ENGINE_RESET__COMPUTE_MASK)
	}
	r.StartQueue(1, queueConfig(1))
	if r.ReadHQD(1, abi.REG_HQD_ACTIVE) != 0 {
		t.Fatal("activation accepted with MaxLivePerSlot stuck goroutines")
	}
	if s := r.CP.Stats(); s.RefusedActivations != 1 || s.Draining != cp.MaxLivePerSlot {
		t.Errorf("RefusedActivations %d Draining %d", s.RefusedActivations, s.Draining)
	}
	st.open()
	if !r.CP.Quiesce(cptest.Timeout) {
		t.Fatal("Quiesce timed out")
	}
	cptest.Eventually(t, "slot usable again", func() bool {
		r.StartQueue(1, queueConfig(1))
		return r.ReadHQD(1, abi.REG_HQD_ACTIVE) == 1
	})
}
