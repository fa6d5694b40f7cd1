package cp_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
)

func TestIndirectBuffers(t *testing.T) {
	t.Run("ib1-ib2-chain-order", func(t *testing.T) {
		r, ring := start(t, 1)
		// Each step writes its number to its own slot of a log; the IBs are built callee first.
		log := uint64(dataBase)
		step := func(w cptest.Writer, n uint32) { w.WriteMem(log+uint64(n)*4, n) }

		ib2b := cptest.NewIB(r.Mem, ibBase+0x3000) // chained to from ib2a
		step(ib2b.Writer, 4)
		ib2a := cptest.NewIB(r.Mem, ibBase+0x2000)
		step(ib2a.Writer, 3)
		ib2a.IndirectBuffer(pm4.IndirectBuffer{Addr: ib2b.Base, Size: ib2b.Size(), Chain: true})
		ib2a.WriteMem(log, 0xBAD) // after a chain: never runs
		ib1b := cptest.NewIB(r.Mem, ibBase+0x1000)
		step(ib1b.Writer, 6)
		ib1a := cptest.NewIB(r.Mem, ibBase)
		step(ib1a.Writer, 2)
		ib1a.IB(ib2a)
		step(ib1a.Writer, 5)
		ib1a.IndirectBuffer(pm4.IndirectBuffer{Addr: ib1b.Base, Size: ib1b.Size(), Chain: true})
		ib1a.WriteMem(log, 0xBAD)
		// ring: 1, ib1a (2, ib2a (3, chain ib2b (4)), 5, chain ib1b (6)), 7, empty IB, 8
		step(ring.Writer, 1)
		ring.IB(ib1a)
		step(ring.Writer, 7)
		ring.IndirectBuffer(pm4.IndirectBuffer{Addr: ibBase + 0x4000, Size: 0})
		step(ring.Writer, 8)
		ring.Kick()
		ring.WaitIdle(t)
		wantMem32(t, r, log, 0, 1, 2, 3, 4, 5, 6, 7, 8)
		if got := r.CP.Stats().IBs; got != 5 {
			t.Errorf("IB starts = %d, want 5", got)
		}
	})
	t.Run("ib3-depth", func(t *testing.T) {
		r, ring := start(t, 1)
		ib3 := cptest.NewIB(r.Mem, ibBase+0x2000)
		ib3.WriteMem(dataBase, 1)
		ib2 := cptest.NewIB(r.Mem, ibBase+0x1000)
		ib2.IB(ib3)
		ib1 := cptest.NewIB(r.Mem, ibBase)
		ib1.IB(ib2)
		ring.IB(ib1)
		ring.Kick()
		if got := ring.WaitHalt(t); got != abi.CP_ERROR_IB_DEPTH {
			t.Fatalf("error = %d, want IB_DEPTH", got)
		}
		addr, info := errorRegs(r, 1)
		if addr != ib2.Base || info != cptest.IBCall(ib3)[0] {
			t.Errorf("ERROR_ADDR, INFO = %#x, %#x; want the IB2's packet %#x", addr, info, ib2.Base)
		}
		wantMem32(t, r, dataBase, 0)
		r.IVs.Wait(1, cptest.Timeout)
		wantIV(t, r.IVs.All()[0], haltIV(1, abi.CP_ERROR_IB_DEPTH, ib2.Base, info))
	})
	t.Run("self-chain-limit", func(t *testing.T) {
		r, ring := start(t, 1)
		other := r.StartQueue(2, queueConfig(2))
		ib := cptest.NewIB(r.Mem, ibBase)
		ib.Nop(1)
		ib.IndirectBuffer(pm4.IndirectBuffer{Addr: ibBase, Size: 5, Chain: true}) // itself
		ring.IB(ib)
		ring.Kick()
		start := time.Now()
		// The server stays responsive while the loop runs: register reads and another queue.
		other.Submit(pm4.WriteMem(dataBase, 42))
		other.WaitIdle(t)
		if got := ring.WaitHalt(t); got != abi.CP_ERROR_IB_LIMIT {
			t.Fatalf("error = %d, want IB_LIMIT", got)
		}
		t.Logf("IB loop halted after %v", time.Since(start))
		if got := r.CP.Stats().IBs; got != cp.DefaultMaxIBExpansions+1 {
			t.Errorf("IB starts = %d, want %d", got, cp.DefaultMaxIBExpansions+1)
		}
	})
	t.Run("self-call-is-depth", func(t *testing.T) {
		r, ring := start(t, 1)
		ib := cptest.NewIB(r.Mem, ibBase)
		ib.IndirectBuffer(pm4.IndirectBuffer{Addr: ibBase, Size: 4})
		ring.IB(ib)
		ring.Kick()
		if got := ring.WaitHalt(t); got != abi.CP_ERROR_IB_DEPTH {
			t.Fatalf("error = %d, want IB_DEPTH", got)
		}
	})
	t.Run("limit-is-per-submission", func(t *testing.T) {
		// Many ring-level IBs, each under the limit, never trip it.
		r, ring := start(t, 1, func(c *cp.Config) { c.MaxIBExpansions = 3 })
		ib := cptest.NewIB(r.Mem, ibBase)
		ib.WriteMem(dataBase, 1)
		for i := 0; i < 10; i++ {
			ring.IB(ib)
		}
		ring.Kick()
		ring.WaitIdle(t)
	})
	t.Run("chain-in-ring", func(t *testing.T) {
		r, ring := start(t, 1)
		ring.Submit(pm4.IndirectBuffer{Addr: ibBase, Size: 4, Chain: true}.Encode())
		if got := ring.WaitHalt(t); got != abi.CP_ERROR_BAD_PACKET {
			t.Fatalf("error = %d, want BAD_PACKET", got)
		}
		_ = r
	})
	t.Run("packet-past-ib-end", func(t *testing.T) {
		r, ring := start(t, 1)
		ib := cptest.NewIB(r.Mem, ibBase)
		ib.WriteMem(dataBase, 1, 2)
		ring.Submit(pm4.IndirectBuffer{Addr: ibBase, Size: ib.Size() - 1}.Encode())
		if got := ring.WaitHalt(t); got != abi.CP_ERROR_BAD_PACKET {
			t.Fatalf("error = %d, want BAD_PACKET", got)
		}
		if addr, _ := errorRegs(r, 1); addr != ibBase {
			t.Errorf("ERROR_ADDR = %#x, want %#x", addr, ibBase)
		}
	})
	t.Run("ib-fetch-fault", func(t *testing.T) {
		r, ring := start(t, 1)
		r.Mem.SetFault(ibBase, 1)
		ring.Submit(pm4.IndirectBuffer{Addr: ibBase, Size: 16}.Encode())
		if got := ring.WaitHalt(t); got != abi.CP_ERROR_TRANSLATION {
			t.Fatalf("error = %d, want TRANSLATION", got)
		}
		if addr, _ := errorRegs(r, 1); addr != ibBase {
			t.Errorf("ERROR_ADDR = %#x, want %#x", addr, ibBase)
		}
	})
}

func TestRingWrap(t *testing.T) {
	r, ring := start(t, 1)
	size := ring.Size
	// Many laps with packets of 5 and 9 dwords: some straddle the end of the ring.
	total := uint32(0)
	for lap := 0; lap < 5; lap++ {
		for ring.Wptr()-ring.Rptr()+16 < size {
			total++
			if total%2 == 0 {
				ring.WriteMem(dataBase+uint64(total%1000)*4, total)
			} else {
				ring.WriteMem(dataBase+uint64(total%1000)*4, total, 0, 0, 0, 0)
			}
		}
		ring.Kick()
		ring.WaitIdle(t)
	}
	wantMem32(t, r, dataBase+uint64(total%1000)*4, total)
	if ring.Wptr() < 5*size-100 {
		t.Errorf("only %d dwords submitted", ring.Wptr())
	}
	rptr := r.ReadHQD(1, abi.REG_HQD_PQ_RPTR)
	if uint64(rptr) != ring.Wptr()%size {
		t.Errorf("PQ_RPTR = %d, want %d", rptr, ring.Wptr()%size)
	}
	if got := r.Mem.Load32(ring.Config.RptrReport); uint64(got) != ring.Wptr()%size {
		t.Errorf("rptr report = %d, want %d", got, ring.Wptr()%size)
	}
}

func TestRingStraddleEnd(t *testing.T) {
	r, ring := start(t, 1)
	// Position the next packet 2 dwords before the end: header and DW1 at the end, the rest
	// at the start of the ring.
	ring.Nop(int(ring.Size) - 2)
	ring.Kick()
	ring.WaitIdle(t)
	ring.Submit(pm4.WriteMem(dataBase, 0x57AD, 0x57AE))
	ring.WaitIdle(t)
	wantMem32(t, r, dataBase, 0x57AD, 0x57AE)
}

func TestFullRing(t *testing.T) {
	r, ring := start(t, 1)
	// Exactly one ring of packets: wptr = rptr + size.
	for ring.Wptr() < ring.Size-10 {
		ring.WriteMem(dataBase, uint32(ring.Wptr()))
	}
	last := uint32(ring.Wptr())
	ring.WriteMem(dataBase+4, last)
	ring.Nop(int(ring.Size - ring.Wptr()))
	if ring.Wptr() != ring.Size {
		t.Fatalf("wptr = %d", ring.Wptr())
	}
	ring.Kick()
	ring.WaitIdle(t)
	wantMem32(t, r, dataBase+4, last)
}

func TestWptrBounds(t *testing.T) {
	t.Run("beyond-ring", func(t *testing.T) {
		r, ring := start(t, 1)
		ring.SetWptr(ring.Size + 1)
		ring.Kick()
		if got := ring.WaitHalt(t); got != abi.CP_ERROR_RING_CONFIG {
			t.Fatalf("error = %d, want RING_CONFIG", got)
		}
		if addr, info := errorRegs(r, 1); addr != ring.Base || info != uint32(ring.Size+1) {
			t.Errorf("ERROR_ADDR, INFO = %#x, %#x", addr, info)
		}
	})
	t.Run("behind-rptr-waits", func(t *testing.T) {
		r, ring := start(t, 1)
		ring.Submit(pm4.WriteMem(dataBase, 1))
		ring.WaitIdle(t)
		// The low half of a 64-bit wptr crossing 2^32, written first: behind rptr, so not work.
		r.WriteHQD(1, abi.REG_HQD_PQ_WPTR_LO, 0)
		time.Sleep(2 * time.Millisecond)
		if s, e := r.Status(1); s != abi.HQD_STATE_RUNNING || e != 0 {
			t.Fatalf("state %d error %d after a wptr behind rptr", s, e)
		}
		ring.Submit(pm4.WriteMem(dataBase, 2))
		ring.WaitIdle(t)
		wantMem32(t, r, dataBase, 2)
	})
	t.Run("partial-packet-waits", func(t *testing.T) {
		r, ring := start(t, 1)
		ring.Emit(pm4.WriteMem(dataBase, 7, 8, 9))
		r.WriteHQD(1, abi.REG_HQD_PQ_WPTR_LO, 3) // header, DW1, DW2 only
		time.Sleep(2 * time.Millisecond)
		wantMem32(t, r, dataBase, 0)
		ring.Kick()
		ring.WaitIdle(t)
		wantMem32(t, r, dataBase, 7, 8, 9)
	})
	t.Run("packet-longer-than-ring", func(t *testing.T) {
		_, ring := start(t, 1)
		ring.Emit([]uint32{pm4.Header(abi.PM4_IT_WRITE_DATA, 0x3000)})
		ring.Kick()
		if got := ring.WaitHalt(t); got != abi.CP_ERROR_BAD_PACKET {
			t.Fatalf("error = %d, want BAD_PACKET", got)
		}
	})
}

func TestRingConfig(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*cptest.QueueConfig)
		addr func(cptest.QueueConfig) uint64
	}{
		{"base-misaligned", func(c *cptest.QueueConfig) { c.Base += 0x80 }, func(c cptest.QueueConfig) uint64 { return c.Base }},
		{"size-too-small", func(c *cptest.QueueConfig) { c.QueueSize = 4 }, func(c cptest.QueueConfig) uint64 { return c.Base }},
		{"size-too-big", func(c *cptest.QueueConfig) { c.QueueSize = 21 }, func(c cptest.QueueConfig) uint64 { return c.Base }},
		{"beyond-48-bits", func(c *cptest.QueueConfig) { c.Base = 1<<48 - 0x100 }, func(c cptest.QueueConfig) uint64 { return c.Base }},
		{"vmid", func(c *cptest.QueueConfig) { c.VMID = 16 }, func(c cptest.QueueConfig) uint64 { return c.Base }},
		{"report-misaligned", func(c *cptest.QueueConfig) { c.RptrReport = 0x802 }, func(c cptest.QueueConfig) uint64 { return c.RptrReport }},
		{"poll-misaligned", func(c *cptest.QueueConfig) { c.Poll, c.PollAddr = true, 0x904 }, func(c cptest.QueueConfig) uint64 { return c.PollAddr }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := cptest.NewRig(t, memSize)
			c := queueConfig(3)
			tc.mod(&c)
			r.StartQueue(3, c)
			// Synchronous: the driver sees the halt right after ACTIVE=1.
			if s, e := r.Status(3); s != abi.HQD_STATE_HALTED || e != abi.CP_ERROR_RING_CONFIG {
				t.Fatalf("state %d error %d, want HALTED RING_CONFIG", s, e)
			}
			if a, _ := errorRegs(r, 3); a != tc.addr(c) {
				t.Errorf("ERROR_ADDR = %#x, want %#x", a, tc.addr(c))
			}
			if !r.IVs.Wait(1, cptest.Timeout) {
				t.Fatal("no IV")
			}
			iv := r.IVs.All()[0]
			if iv.Source != abi.IH_SRC_CP_GPF || iv.Data[0] != abi.CP_ERROR_RING_CONFIG || iv.RingID != cp.RingID(3) {
				t.Errorf("IV %+v", iv)
			}
			// Recovery: reset, fix, start again.
			r.WriteHQD(3, abi.REG_HQD_DEQUEUE_REQUEST, abi.HQD_DEQUEUE_RESET)
			if r.ReadHQD(3, abi.REG_HQD_ACTIVE) != 0 || r.ReadHQD(3, abi.REG_HQD_STATUS) != 0 {
				t.Fatal("DEQUEUE_RESET left the halted queue active or with an error")
			}
			ring := r.StartQueue(3, queueConfig(3))
			ring.Submit(pm4.WriteMem(dataBase, 1))
			ring.WaitIdle(t)
		})
	}
}

func TestHQDRegisters(t *testing.T) {
	r := cptest.NewRig(t, memSize)
	c := queueConfig(5)
	r.Program(5, c)
	r.WriteHQD(5, abi.REG_HQD_PQ_WPTR_LO, 77) // while inactive: stored, then reset by ACTIVE
	if got := r.ReadHQD(5, abi.REG_HQD_PQ_WPTR_LO); got != 77 {
		t.Errorf("inactive PQ_WPTR_LO = %d", got)
	}
	if got := r.ReadHQD(5, abi.REG_HQD_PQ_BASE_LO); got != uint32(c.Base) {
		t.Errorf("PQ_BASE_LO = %#x", got)
	}
	r.WriteHQD(5, abi.REG_HQD_ACTIVE, 1)
	ring := r.NewRing(5, c)
	if r.ReadHQD(5, abi.REG_HQD_ACTIVE) != 1 || r.ReadHQD(5, abi.REG_HQD_PQ_WPTR_LO) != 0 || r.ReadHQD(5, abi.REG_HQD_PQ_RPTR) != 0 {
		t.Fatal("activation did not start at rptr = wptr = 0")
	}
	if s, _ := r.Status(5); s != abi.HQD_STATE_RUNNING {
		t.Errorf("idle active queue state %d, want RUNNING", s)
	}
	// Configuration writes while active are ignored.
	r.WriteHQD(5, abi.REG_HQD_PQ_BASE_LO, 0x1234500)
	if got := r.ReadHQD(5, abi.REG_HQD_PQ_BASE_LO); got != uint32(c.Base) {
		t.Errorf("PQ_BASE_LO changed to %#x while active", got)
	}
	r.WriteHQD(5, abi.REG_HQD_ACTIVE, 1)
	r.WriteHQD(5, abi.REG_HQD_DEQUEUE_REQUEST, 7)
	if got := r.CP.Stats().IgnoredWrites; got != 3 {
		t.Errorf("IgnoredWrites = %d, want 3", got)
	}
	for i := 0; i < 3; i++ {
		ring.Fence(dataBase, uint32(i), 0, false)
	}
	ring.Kick()
	ring.WaitIdle(t)
	if got := r.ReadHQD(5, abi.REG_HQD_FENCES); got != 3 {
		t.Errorf("FENCES = %d", got)
	}
	if got := r.ReadHQD(5, abi.REG_HQD_PQ_WPTR_LO); uint64(got) != ring.Wptr() {
		t.Errorf("PQ_WPTR_LO = %d, want %d", got, ring.Wptr())
	}
	// Drain an idle queue: inactive, rptr kept.
	ring.Dequeue(abi.HQD_DEQUEUE_DRAIN)
	r.WaitInactive(t, 5)
	if got := r.ReadHQD(5, abi.REG_HQD_PQ_RPTR); uint64(got) != ring.Wptr() {
		t.Errorf("PQ_RPTR after drain = %d, want %d", got, ring.Wptr())
	}
	if s, _ := r.Status(5); s != abi.HQD_STATE_IDLE {
		t.Errorf("state after drain %d", s)
	}
	// Configuration is writable again; re-activation starts from 0.
	r.WriteHQD(5, abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO, 0)
	r.WriteHQD(5, abi.REG_HQD_ACTIVE, 1)
	if r.ReadHQD(5, abi.REG_HQD_PQ_RPTR) != 0 || r.ReadHQD(5, abi.REG_HQD_FENCES) != 0 {
		t.Error("re-activation kept rptr or FENCES")
	}
	ring = r.NewRing(5, c)
	ring.Submit(pm4.WriteMem(dataBase, 5))
	ring.WaitIdle(t)

	for _, tc := range []struct{ off, want uint32 }{
		{abi.REG_CP_HQD_COUNT, 17}, {abi.REG_CP_COMPUTE_PIPES, 2}, {abi.REG_CP_QUEUES_PER_PIPE, 8},
		{abi.REG_CP_PACKETS_LO, 4}, {abi.REG_CP_PACKETS_HI, 0}, {abi.REG_CP_HALTS, 0}, {abi.REG_CP_IB_MAX_DEPTH, 2},
	} {
		if got := r.CP.ReadReg(tc.off - abi.BLOCK_CP_BASE); got != tc.want {
			t.Errorf("CP register %#x = %d, want %d", tc.off, got, tc.want)
		}
	}
	if got := r.CP.ReadHQD(17, abi.REG_HQD_ACTIVE); got != 0 {
		t.Errorf("slot 17 reads %d", got)
	}
	r.CP.WriteHQD(-1, abi.REG_HQD_ACTIVE, 1) // ignored
	r.WriteHQD(6, abi.REG_HQD_PQ_WPTR_HI, 5)
	if got := r.ReadHQD(6, abi.REG_HQD_PQ_WPTR_HI); got != 5 {
		t.Errorf("inactive PQ_WPTR_HI = %d", got)
	}
	r.WriteHQD(6, abi.REG_HQD_STATUS, 5) // read-only: ignored
	if got := r.ReadHQD(6, abi.REG_HQD_STATUS); got != 0 {
		t.Errorf("STATUS = %d after a write", got)
	}
}

func TestRingIDs(t *testing.T) {
	want := map[int]uint8{0: 0, 1: 1 << 2, 2: 1<<2 | 1<<4, 8: 1<<2 | 7<<4, 9: 1 | 1<<2, 16: 1 | 1<<2 | 7<<4}
	r := cptest.NewRig(t, memSize)
	for slot, id := range want {
		if got := cp.RingID(slot); got != id {
			t.Errorf("RingID(%d) = %#x, want %#x", slot, got, id)
		}
		ring := r.StartQueue(slot, queueConfig(slot))
		ring.Submit(pm4.Fence(dataBase+uint64(slot)*8, 1, uint32(slot), true))
		ring.WaitIdle(t)
	}
	r.IVs.Wait(len(want), cptest.Timeout)
	for _, iv := range r.IVs.All() {
		if want[int(iv.Data[0])] != iv.RingID {
			t.Errorf("slot %d IV ring id %#x, want %#x", iv.Data[0], iv.RingID, want[int(iv.Data[0])])
		}
	}
}

func TestDoorbells(t *testing.T) {
	r := cptest.NewRig(t, memSize)
	a := r.StartQueue(1, queueConfig(1))
	b := r.StartQueue(2, queueConfig(2))
	cfg := queueConfig(3)
	cfg.DoorbellEn = false
	c := r.StartQueue(3, cfg)
	a.Emit(pm4.WriteMem(dataBase, 1))
	b.Emit(pm4.WriteMem(dataBase+4, 2))
	c.Emit(pm4.WriteMem(dataBase+8, 3))
	b.Ring()
	b.WaitIdle(t)
	c.Ring() // DOORBELL_EN clear: nothing
	r.Doorbell(1000, 5)
	time.Sleep(time.Millisecond)
	wantMem32(t, r, dataBase, 0, 2, 0)
	a.Ring()
	a.WaitIdle(t)
	wantMem32(t, r, dataBase, 1, 2, 0)
	s := r.CP.Stats()
	if s.Doorbells != 4 || s.DoorbellMisses != 2 {
		t.Errorf("doorbells %d misses %d, want 4 and 2", s.Doorbells, s.DoorbellMisses)
	}
	// A doorbell of an inactive queue does nothing.
	a.Dequeue(abi.HQD_DEQUEUE_DRAIN)
	r.WaitInactive(t, 1)
	a.Emit(pm4.WriteMem(dataBase, 9))
	a.Ring()
	if s := r.CP.Stats(); s.DoorbellMisses != 3 {
		t.Errorf("doorbell of an inactive queue matched")
	}
}

func TestWptrPoll(t *testing.T) {
	r := cptest.NewRig(t, memSize)
	cfg := queueConfig(4)
	cfg.Poll, cfg.PollAddr, cfg.PollIntervalUS, cfg.DoorbellEn = true, pollAddr, 50, false
	ring := r.StartQueue(4, cfg)
	// No kick at all: the timer finds the new wptr.
	w := ring.Emit(pm4.WriteMem(dataBase, 11))
	r.Mem.Store64(pollAddr, w)
	ring.WaitIdle(t)
	wantMem32(t, r, dataBase, 11)
	// A kick reads the polled value, which wins over the written one.
	w = ring.Emit(pm4.WriteMem(dataBase+4, 12))
	r.Mem.Store64(pollAddr, w)
	r.WriteHQD(4, abi.REG_HQD_PQ_WPTR_LO, 1)
	ring.WaitIdle(t)
	wantMem32(t, r, dataBase+4, 12)
	if got := r.ReadHQD(4, abi.REG_HQD_PQ_WPTR_LO); uint64(got) != w {
		t.Errorf("PQ_WPTR_LO = %d, want the polled %d", got, w)
	}
	// A polled wptr that cannot be read halts the queue.
	r.Mem.SetFault(pollAddr, 8)
	if got := ring.WaitHalt(t); got != abi.CP_ERROR_TRANSLATION {
		t.Errorf("error = %d, want TRANSLATION", got)
	}
}

func TestRptrReport(t *testing.T) {
	t.Run("written", func(t *testing.T) {
		r, ring := start(t, 1)
		r.Mem.Store32(ring.Config.RptrReport, 0xFFFF)
		w := ring.Submit(pm4.WriteMem(dataBase, 1))
		ring.WaitIdle(t)
		cptest.Eventually(t, "rptr report", func() bool { return uint64(r.Mem.Load32(ring.Config.RptrReport)) == w })
	})
	t.Run("no-update", func(t *testing.T) {
		r := cptest.NewRig(t, memSize)
		c := queueConfig(1)
		c.NoUpdateRptr = true
		ring := r.StartQueue(1, c)
		r.Mem.Store32(c.RptrReport, 0xFFFF)
		ring.Submit(pm4.WriteMem(dataBase, 1))
		ring.WaitIdle(t)
		time.Sleep(time.Millisecond)
		if got := r.Mem.Load32(c.RptrReport); got != 0xFFFF {
			t.Errorf("rptr written with NO_UPDATE_RPTR: %d", got)
		}
	})
	t.Run("fault-halts", func(t *testing.T) {
		r, ring := start(t, 1)
		r.Mem.SetBroken(ring.Config.RptrReport, 4)
		ring.Submit(pm4.WriteMem(dataBase, 1))
		if got := ring.WaitHalt(t); got != abi.CP_ERROR_MEMORY {
			t.Fatalf("error = %d, want MEMORY", got)
		}
		if a, _ := errorRegs(r, 1); a != ring.Config.RptrReport {
			t.Errorf("ERROR_ADDR = %#x", a)
		}
	})
}

func waitReg(fn, reg, ref, mask uint32) []uint32 {
	return pm4.WaitRegMem{Function: fn, Space: pm4.SpaceReg, Reg1: reg, Ref: ref, Mask: mask, Interval: 10}.Encode()
}

func waitMem(fn uint32, addr uint64, ref, mask uint32) []uint32 {
	return pm4.WaitRegMem{Function: fn, Space: pm4.SpaceMem, Addr: addr, Ref: ref, Mask: mask, Interval: 10}.Encode()
}

func TestWaitRegMemFunctions(t *testing.T) {
	// value 0x1234_5605 against references, masked with 0xFF: 0x05 op ref&0xFF.
	const v, mask = 0x12345605, 0xFF
	cases := []struct {
		fn, ref uint32
		holds   bool
		fix     uint32 // low byte that makes a false condition hold
	}{
		{pm4.FuncAlways, 0, true, 0},
		{pm4.FuncLT, 0xAB06, true, 0}, {pm4.FuncLT, 0x05, false, 0x04},
		{pm4.FuncLE, 0x05, true, 0}, {pm4.FuncLE, 0x04, false, 0x04},
		{pm4.FuncEQ, 0xFF05, true, 0}, {pm4.FuncEQ, 0x06, false, 0x06},
		{pm4.FuncNE, 0x06, true, 0}, {pm4.FuncNE, 0x105, false, 0x06},
		{pm4.FuncGE, 0x05, true, 0}, {pm4.FuncGE, 0x06, false, 0x06},
		{pm4.FuncGT, 0x04, true, 0}, {pm4.FuncGT, 0x05, false, 0x06},
	}
	for _, space := range []string{"reg", "mem"} {
		for _, tc := range cases {
			t.Run(space+"-"+hex(uint64(tc.fn))+"-"+hex(uint64(tc.ref)), func(t *testing.T) {
				t.Parallel()
				r, ring := start(t, 1)
				r.Regs.Set(scratch(2), v)
				r.Mem.Store32(dataBase, v)
				w := waitReg(tc.fn, scratch(2), tc.ref, mask)
				if space == "mem" {
					w = waitMem(tc.fn, dataBase, tc.ref, mask)
				}
				ring.Submit(w, pm4.WriteMem(dataBase+4, 1))
				if tc.holds {
					ring.WaitIdle(t)
					return
				}
				r.WaitState(t, 1, abi.HQD_STATE_WAITING)
				wantMem32(t, r, dataBase+4, 0)
				if got := r.ReadHQD(1, abi.REG_HQD_PQ_RPTR); got != 0 {
					t.Errorf("parked rptr %d, want the wait packet (0)", got)
				}
				// Make it hold: the register by MMIO (found by the poll timer), memory by a CPU store.
				nv := v&^mask | tc.fix
				if space == "mem" {
					r.Mem.Store32(dataBase, nv)
				} else {
					r.Regs.Set(scratch(2), nv)
				}
				ring.WaitIdle(t)
				wantMem32(t, r, dataBase+4, 1)
			})
		}
	}
	runPktCases(t, []pktCase{
		{name: "function-7", pkts: [][]uint32{waitMem(7, dataBase, 0, 0)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "space-2", pkts: [][]uint32{pm4.WaitRegMem{Space: 2}.Encode()}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "operation-2", pkts: [][]uint32{pm4.WaitRegMem{Operation: 2, Reg1: scratch(0)}.Encode()}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "mem-write-wait", pkts: [][]uint32{pm4.WaitRegMem{Space: pm4.SpaceMem, Operation: pm4.OpWriteWait, Addr: dataBase}.Encode()},
			wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "misaligned", pkts: [][]uint32{waitMem(pm4.FuncAlways, dataBase+1, 0, 0)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "mem-fault", pkts: [][]uint32{waitMem(pm4.FuncEQ, memSize, 0, 0)}, wantErr: abi.CP_ERROR_TRANSLATION, errAddr: memSize},
		{name: "reg-refused", pkts: [][]uint32{waitReg(pm4.FuncEQ, cptest.RegisterCount, 0, 0)}, wantErr: abi.CP_ERROR_BAD_REGISTER},
		{name: "reg-reserved", pkts: [][]uint32{waitReg(pm4.FuncEQ, 1<<18, 0, 0)}, wantErr: abi.CP_ERROR_RESERVED_BITS},
		{name: "wait-preemptable-op", pkts: [][]uint32{pm4.WaitRegMem{Function: pm4.FuncAlways, Space: pm4.SpaceMem, Operation: 3, Addr: dataBase}.Encode()}},
	})
}

// TestWaitRegMemWriteWait is amdgpu's HDP flush: write REQ, wait until DONE & mask == ref.
func TestWaitRegMemWriteWait(t *testing.T) {
	r, ring := start(t, 1)
	req, done := uint32(abi.REG_HDP_FLUSH_REQ/4), uint32(abi.REG_HDP_FLUSH_DONE/4)
	r.Regs.Hook = func(reg, v uint32, write bool) (uint32, bool) {
		if write && reg == req {
			r.Regs.Hook = nil // the device answers one request
			return 0, false
		}
		return 0, false
	}
	ring.Submit(pm4.WaitRegMem{Function: pm4.FuncEQ, Space: pm4.SpaceReg, Operation: pm4.OpWriteWait,
		Reg1: req, Reg2: done, Ref: 1 << 2, Mask: 1 << 2, Interval: 0x20}.Encode(), pm4.WriteMem(dataBase, 1))
	r.WaitState(t, 1, abi.HQD_STATE_WAITING)
	if got := r.Regs.Get(req); got != 1<<2 {
		t.Fatalf("REQ = %#x, want the reference written first", got)
	}
	r.Regs.Set(done, 0xFFFF0004) // the flush is done
	ring.WaitIdle(t)
	wantMem32(t, r, dataBase, 1)
}

// TestSemaphore: queue B waits on memory that queue A writes later; B parks without
// spinning and is released by A's write.
func TestSemaphore(t *testing.T) {
	r := cptest.NewRig(t, memSize)
	a := r.StartQueue(1, queueConfig(1))
	b := r.StartQueue(9, queueConfig(9))
	sem := uint64(dataBase + 0x40)
	b.Submit(pm4.WaitMem(sem, 1), pm4.WriteMem(dataBase, 0xB))
	r.WaitState(t, 9, abi.HQD_STATE_WAITING)
	checks0 := r.CP.Stats().WaitChecks
	time.Sleep(100 * time.Millisecond)
	checks := r.CP.Stats().WaitChecks - checks0
	// 100 ms of parking with a 4 µs interval: the backoff to 1 ms allows ~110 checks.
	t.Logf("re-checks in 100 ms of parking: %d", checks)
	if checks > 150 {
		t.Errorf("parked queue re-checked %d times in 100 ms: it spins", checks)
	}
	wantMem32(t, r, dataBase, 0)
	a.Submit(pm4.WriteMem(dataBase+0x80, 5), pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_MEM, Addr: sem,
		CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, Data: []uint32{1}}.Encode())
	a.WaitIdle(t)
	b.WaitIdle(t) // woken by A's write (Wake), not by a timer: well within the timeout
	wantMem32(t, r, dataBase, 0xB)
	if r.CP.Stats().Wakes == 0 {
		t.Error("A's write did not wake B")
	}
}

// TestSemaphoreBusyNeighbour: a parked queue does not spin while another queue streams
// unrelated writes (each of which calls Wake).
func TestSemaphoreBusyNeighbour(t *testing.T) {
	r := cptest.NewRig(t, memSize)
	busy := r.StartQueue(1, queueConfig(1))
	waiter := r.StartQueue(2, queueConfig(2))
	sem := uint64(dataBase + 0x40)
	waiter.Submit(pm4.WaitMem(sem, 1), pm4.WriteMem(dataBase, 0xB))
	r.WaitState(t, 2, abi.HQD_STATE_WAITING)
	checks0 := r.CP.Stats().WaitChecks
	const writes = 20000
	for i := 0; i < writes; i++ {
		for busy.Wptr()+5+8-busy.Rptr() > busy.Size {
			time.Sleep(20 * time.Microsecond)
		}
		busy.Emit(pm4.WriteMem(dataBase+0x100+uint64(i%64)*4, uint32(i)))
		if i%256 == 0 {
			busy.Kick()
		}
	}
	busy.WriteMem(sem, 1)
	busy.Kick()
	busy.WaitIdle(t)
	waiter.WaitIdle(t)
	checks := r.CP.Stats().WaitChecks - checks0
	t.Logf("%d neighbour writes caused %d re-checks", writes, checks)
	if checks > writes/10 {
		t.Errorf("%d re-checks for %d unrelated writes: the parked queue spins", checks, writes)
	}
	wantMem32(t, r, dataBase, 0xB)
}

func TestParkedDequeue(t *testing.T) {
	for _, req := range []uint32{abi.HQD_DEQUEUE_RESET, abi.HQD_DEQUEUE_DRAIN} {
		t.Run(hex(uint64(req)), func(t *testing.T) {
			r, ring := start(t, 1)
			ring.Submit(pm4.WriteMem(dataBase, 1), pm4.WaitMem(dataBase+4, 1), pm4.WriteMem(dataBase, 2))
			r.WaitState(t, 1, abi.HQD_STATE_WAITING)
			ring.Dequeue(req)
			r.WaitInactive(t, 1)
			if s, e := r.Status(1); s != abi.HQD_STATE_IDLE || e != 0 {
				t.Errorf("state %d error %d", s, e)
			}
			if got := r.ReadHQD(1, abi.REG_HQD_PQ_RPTR); got != 5 {
				t.Errorf("rptr %d, want 5 (on the wait)", got)
			}
			r.Mem.Store32(dataBase+4, 1)
			r.CP.Wake()
			time.Sleep(time.Millisecond)
			wantMem32(t, r, dataBase, 1)
		})
	}
}

func TestEndlessKernel(t *testing.T) {
	r, ring := start(t, 1)
	ring.Submit(pm4.WriteMem(dataBase, 1))
	ring.Dispatch(abi.KERNEL_ENDLESS, 0, 0, 0, 1, 1, 1)
	ring.Submit(pm4.WriteMem(dataBase, 2))
	r.WaitState(t, 1, abi.HQD_STATE_BUSY_KERNEL)
	// Doorbells, wakes and a drain do not end it (a running dispatch is not preemptible).
	ring.Kick()
	r.CP.Wake()
	ring.Dequeue(abi.HQD_DEQUEUE_DRAIN)
	time.Sleep(5 * time.Millisecond)
	if s, _ := r.Status(1); s != abi.HQD_STATE_BUSY_KERNEL || r.ReadHQD(1, abi.REG_HQD_ACTIVE) != 1 {
		t.Fatalf("endless kernel stopped: state %d", s)
	}
	wantMem32(t, r, dataBase, 1)
	ring.Dequeue(abi.HQD_DEQUEUE_RESET)
	r.WaitInactive(t, 1)
	wantMem32(t, r, dataBase, 1)
	// Re-activation works.
	ring = r.StartQueue(1, queueConfig(1))
	ring.Submit(pm4.WriteMem(dataBase, 3))
	ring.WaitIdle(t)
	wantMem32(t, r, dataBase, 3)
}

// TestHaltIsolation: a bad packet halts its queue only; another queue keeps running, and the
// halted one recovers with DEQUEUE_RESET and a fresh bring-up.
func TestHaltIsolation(t *testing.T) {
	r := cptest.NewRig(t, memSize)
	bad := r.StartQueue(1, queueConfig(1))
	good := r.StartQueue(2, queueConfig(2))
	bad.Submit(pm4.WriteMem(dataBase, 1), pm4.Packet(0xEE, 0), pm4.WriteMem(dataBase, 2))
	if got := bad.WaitHalt(t); got != abi.CP_ERROR_BAD_OPCODE {
		t.Fatalf("error %d", got)
	}
	for i := uint32(1); i <= 100; i++ {
		good.Emit(pm4.WriteMem(dataBase+8, i))
	}
	good.Kick()
	good.WaitIdle(t)
	wantMem32(t, r, dataBase, 1, 0, 100)
	// Kicks and doorbells to a halted queue change nothing.
	bad.Submit(pm4.WriteMem(dataBase, 3))
	bad.Ring()
	time.Sleep(time.Millisecond)
	wantMem32(t, r, dataBase, 1)
	if got := r.CP.ReadReg(abi.REG_CP_HALTS - abi.BLOCK_CP_BASE); got != 1 {
		t.Errorf("HALTS = %d", got)
	}
	if got := r.ReadHQD(1, abi.REG_HQD_PQ_RPTR); got != 5 {
		t.Errorf("halted rptr = %d, want 5 (the bad packet)", got)
	}
	// DRAIN of a halted queue: inactive, error kept; RESET clears it.
	bad.Dequeue(abi.HQD_DEQUEUE_DRAIN)
	if r.ReadHQD(1, abi.REG_HQD_ACTIVE) != 0 {
		t.Fatal("drained halted queue still active")
	}
	if s, e := r.Status(1); s != abi.HQD_STATE_IDLE || e != abi.CP_ERROR_BAD_OPCODE {
		t.Errorf("after drain: state %d error %d", s, e)
	}
	bad.Dequeue(abi.HQD_DEQUEUE_RESET)
	if r.ReadHQD(1, abi.REG_HQD_STATUS) != 0 {
		t.Errorf("after reset: status %#x", r.ReadHQD(1, abi.REG_HQD_STATUS))
	}
	bad = r.StartQueue(1, queueConfig(1))
	bad.Submit(pm4.WriteMem(dataBase, 4))
	bad.WaitIdle(t)
	wantMem32(t, r, dataBase, 4)
}

// TestSelfDequeue: a queue writes its own DEQUEUE_REQUEST through the register path (the
// register lock is taken by the queue goroutine's register write, then the HQD's).
func TestSelfDequeue(t *testing.T) {
	r, ring := start(t, 1)
	r.RouteCPBlocks()
	dq := uint32(abi.BLOCK_HQD_BASE+abi.BLOCK_HQD_STRIDE*1+abi.REG_HQD_DEQUEUE_REQUEST) / 4
	status := uint32(abi.BLOCK_HQD_BASE+abi.BLOCK_HQD_STRIDE*1+abi.REG_HQD_STATUS) / 4
	ring.Submit(pm4.CopyData{SrcSel: abi.PM4_COPY_DATA_SEL_REG, DstSel: abi.PM4_COPY_DATA_SEL_MEM, Src: uint64(status), Dst: dataBase}.Encode(),
		pm4.WriteReg(dq, abi.HQD_DEQUEUE_RESET), pm4.WriteMem(dataBase+4, 1))
	r.WaitInactive(t, 1)
	wantMem32(t, r, dataBase, abi.HQD_STATE_RUNNING, 0)
}

// TestFences: 10,000 fences over 4 queues with wrap-around, each with exactly one IV, in
// order per queue; the fence values and FENCES counts match.
func TestFences(t *testing.T) {
	const queues, perQueue = 4, 2500
	r := cptest.NewRig(t, memSize)
	slots := []int{0, 1, 8, 16}
	var wg sync.WaitGroup
	for i, slot := range slots {
		c := queueConfig(slot)
		c.QueueSize = 8 // 512 dwords: many wraps
		ring := r.StartQueue(slot, c)
		wg.Add(1)
		go func(i int, ring *cptest.Ring) {
			defer wg.Done()
			fence := uint64(dataBase + i*8)
			for seq := uint32(1); seq <= perQueue; seq++ {
				for ring.Wptr()+8+2-ring.Rptr() > ring.Size { // wait for room, as a driver does
					time.Sleep(20 * time.Microsecond)
				}
				ring.Emit(pm4.WriteMem(dataBase+0x1000+uint64(i)*4, seq))
				ring.Fence(fence, seq, uint32(i)<<24|seq, true)
				if seq%7 == 0 || seq == perQueue {
					if i%2 == 0 {
						ring.Kick()
					} else {
						ring.Ring()
					}
				}
			}
		}(i, ring)
	}
	wg.Wait()
	if !r.IVs.Wait(queues*perQueue, cptest.Timeout) {
		t.Fatalf("%d IVs, want %d", r.IVs.Len(), queues*perQueue)
	}
	last := make([]uint32, queues)
	for _, iv := range r.IVs.All() {
		q, seq := iv.Data[0]>>24, iv.Data[0]&0xFFFFFF
		if iv.Source != abi.IH_SRC_CP_EOP || iv.RingID != cp.RingID(slots[q]) {
			t.Fatalf("IV %+v", iv)
		}
		if seq != last[q]+1 {
			t.Fatalf("queue %d: fence IV %d after %d", q, seq, last[q])
		}
		last[q] = seq
	}
	time.Sleep(time.Millisecond)
	if n := r.IVs.Len(); n != queues*perQueue {
		t.Errorf("%d IVs, want exactly %d", n, queues*perQueue)
	}
	for i, slot := range slots {
		wantMem32(t, r, dataBase+uint64(i)*8, perQueue)
		if got := r.ReadHQD(slot, abi.REG_HQD_FENCES); got != perQueue {
			t.Errorf("slot %d FENCES = %d", slot, got)
		}
	}
}

func TestResetAndClose(t *testing.T) {
	base := runtime.NumGoroutine()
	r := cptest.NewRig(t, memSize)
	running := r.StartQueue(1, queueConfig(1))
	parked := r.StartQueue(2, queueConfig(2))
	endless := r.StartQueue(3, queueConfig(3))
	halted := r.StartQueue(4, queueConfig(4))
	running.Submit(pm4.WriteMem(dataBase, 1))
	parked.Submit(pm4.WaitMem(dataBase+4, 1))
	endless.Dispatch(abi.KERNEL_ENDLESS, 0, 0, 0, 1, 1, 1)
	endless.Kick()
	halted.Submit(pm4.Packet(0xEE, 0))
	running.WaitIdle(t)
	r.WaitState(t, 2, abi.HQD_STATE_WAITING)
	r.WaitState(t, 3, abi.HQD_STATE_BUSY_KERNEL)
	halted.WaitHalt(t)

	r.CP.Reset()
	for slot := 0; slot < cp.NumSlots; slot++ {
		for off := uint32(0); off < abi.BLOCK_HQD_STRIDE; off += 4 {
			if v := r.ReadHQD(slot, off); v != 0 {
				t.Errorf("slot %d register %#x = %#x after reset", slot, off, v)
			}
		}
	}
	if r.CP.ReadReg(abi.REG_CP_PACKETS_LO-abi.BLOCK_CP_BASE) != 0 || r.CP.ReadReg(abi.REG_CP_HALTS-abi.BLOCK_CP_BASE) != 0 {
		t.Error("counters survived reset")
	}
	ring := r.StartQueue(2, queueConfig(2))
	ring.Submit(pm4.WriteMem(dataBase, 2))
	ring.WaitIdle(t)

	r.CP.Close()
	r.WriteHQD(5, abi.REG_HQD_ACTIVE, 1)
	if r.ReadHQD(5, abi.REG_HQD_ACTIVE) != 0 {
		t.Error("activation after Close")
	}
	cptest.Eventually(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= base })
}

// TestLockingRule hammers the register path (HQD reads/writes, doorbells, Wake) under the
// device lock while queues make register accesses that take the same lock and read their own
// HQD through it. A CP that held a queue lock across a call out would deadlock here.
func TestLockingRule(t *testing.T) {
	r := cptest.NewRig(t, memSize)
	r.RouteCPBlocks()
	var rings []*cptest.Ring
	for _, slot := range []int{1, 2, 3} {
		rings = append(rings, r.StartQueue(slot, queueConfig(slot)))
	}
	stop := make(chan struct{})
	var hammered atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for slot := 0; slot < 4; slot++ {
				r.ReadHQD(slot, abi.REG_HQD_STATUS)
				r.ReadHQD(slot, abi.REG_HQD_PQ_RPTR)
				r.WriteHQD(slot, abi.REG_HQD_VMID, 0) // ignored while active
				r.Doorbell(uint32(2*slot+1), 1)       // matches no queue
			}
			r.CP.Wake()
			hammered.Add(1)
		}
	}()
	for round := uint32(1); round <= 200; round++ {
		for i, ring := range rings {
			for ring.Wptr()+32-ring.Rptr() > ring.Size {
				time.Sleep(20 * time.Microsecond)
			}
			status := uint32(abi.BLOCK_HQD_BASE+abi.BLOCK_HQD_STRIDE*uint32(i+1)+abi.REG_HQD_STATUS) / 4
			ring.Emit(pm4.CopyData{SrcSel: abi.PM4_COPY_DATA_SEL_REG, DstSel: abi.PM4_COPY_DATA_SEL_MEM, Src: uint64(status), Dst: dataBase + uint64(i)*4}.Encode(),
				pm4.SetUConfigReg(scratchOff+uint32(i), round),
				waitReg(pm4.FuncEQ, scratch(uint32(i)), round, 0xFFFFFFFF))
			ring.Ring()
		}
	}
	for _, ring := range rings {
		ring.WaitIdle(t)
	}
	close(stop)
	wg.Wait()
	t.Logf("register path iterations: %d", hammered.Load())
	for i := range rings {
		wantReg(t, r, scratch(uint32(i)), 200)
	}
}

// TestResetDuringDMA: DEQUEUE_RESET stops a long DMA_DATA between 64 KiB chunks. The reset
// is requested from inside the first chunk's write (the queue goroutine holds no CP lock
// there, so the register path may be called from it).
func TestResetDuringDMA(t *testing.T) {
	for _, kernel := range []bool{false, true} {
		t.Run(map[bool]string{false: "dma", true: "fill-kernel"}[kernel], func(t *testing.T) {
			r, ring := start(t, 1)
			src, dst := uint64(dataBase), uint64(dataBase+0x100000)
			var once sync.Once
			r.Mem.SetOnWrite(func() {
				once.Do(func() { r.WriteHQD(1, abi.REG_HQD_DEQUEUE_REQUEST, abi.HQD_DEQUEUE_RESET) })
			})
			if kernel {
				ring.Dispatch(abi.KERNEL_FILL, dst, 0, 0xFFFFFFFF, 1024, 1, 1) // 256 KiB: 4 chunks
			} else {
				ring.Emit(pm4.DMAFill(src, 0x01010101, 0x80000))
			}
			ring.Kick()
			r.WaitInactive(t, 1)
			if kernel {
				wantMem32(t, r, dst+0x10000-4, 0xFFFFFFFF, 0) // first chunk only
			} else {
				wantMem32(t, r, src+0x10000-4, 0x01010101, 0) // first chunk only
			}
		})
	}
}

func TestRingFetchFault(t *testing.T) {
	t.Run("first-read", func(t *testing.T) {
		r := cptest.NewRig(t, memSize)
		c := queueConfig(1)
		r.Mem.SetFault(c.Base, 1)
		ring := r.StartQueue(1, c)
		ring.Submit(pm4.WriteMem(dataBase, 1))
		if got := ring.WaitHalt(t); got != abi.CP_ERROR_TRANSLATION {
			t.Fatalf("error = %d", got)
		}
		if addr, info := errorRegs(r, 1); addr != c.Base || info != 0 {
			t.Errorf("ERROR_ADDR, INFO = %#x, %#x; want the ring, 0", addr, info)
		}
	})
	t.Run("wrapped-second-read", func(t *testing.T) {
		r, ring := start(t, 1)
		ring.Nop(int(ring.Size) - 2)
		ring.Kick()
		ring.WaitIdle(t)
		r.Mem.SetBroken(ring.Base, 1) // the start of the ring: the wrapped part of the next fetch
		ring.Submit(pm4.WriteMem(dataBase, 1))
		if got := ring.WaitHalt(t); got != abi.CP_ERROR_MEMORY {
			t.Fatalf("error = %d", got)
		}
		if addr, _ := errorRegs(r, 1); addr != ring.Base {
			t.Errorf("ERROR_ADDR = %#x, want the ring start %#x", addr, ring.Base)
		}
	})
}

// TestHaltLogged: a halt is logged at Warn with the error's name.
func TestHaltLogged(t *testing.T) {
	h := &recordHandler{}
	r, ring := start(t, 1, func(c *cp.Config) { c.Log = slog.New(h) })
	ring.Submit(pm4.Packet(0xEE, 0))
	ring.WaitHalt(t)
	r.IVs.Wait(1, cptest.Timeout)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, rec := range h.records {
		if rec.Level == slog.LevelWarn && strings.Contains(rec.attrs, "CP_ERROR_BAD_OPCODE") && strings.Contains(rec.attrs, "slot=1") {
			return
		}
	}
	t.Errorf("no Warn record naming CP_ERROR_BAD_OPCODE: %+v", h.records)
}

type logRecord struct {
	Level slog.Level
	Msg   string
	attrs string
}

type recordHandler struct {
	mu      sync.Mutex
	records []logRecord
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, "%s=%v ", a.Key, a.Value); return true })
	h.mu.Lock()
	h.records = append(h.records, logRecord{r.Level, r.Message, b.String()})
	h.mu.Unlock()
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }
