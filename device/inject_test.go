package device

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/inject"
	"vgpu/pm4"
	"vgpu/vfiouser/vfiousertest"
)

// injEnv is one device with a client acting as the driver: guest memory through the GART
// (UC), the IH ring in VRAM raising MSI-X vector 0, the test queue on slot 1.
type injEnv struct {
	t   *testing.T
	dev *Device
	d   *driver
	fds []int
}

func newInjEnv(t *testing.T, rules string) *injEnv {
	dev := newSharedDevice(t)
	if rules != "" {
		if _, err := dev.AddInjection(rules); err != nil {
			t.Fatal(err)
		}
	}
	d := attach(t, dev, 0, true)
	e := &injEnv{t: t, dev: dev, d: d, fds: d.r.enableMSIX()}
	d.setupIH()
	d.r.setReg(abi.REG_IH_RB_CNTL, d.r.reg(abi.REG_IH_RB_CNTL)|abi.REG_IH_RB_CNTL__ENABLE_INTR_MASK)
	d.startQueue()
	return e
}

// fence submits an interrupting fence with value and ctxid k.
func (e *injEnv) fence(k uint32) {
	e.d.submit(pm4.ReleaseMem{CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, DataSel: pm4.Data32,
		IntSel: abi.PM4_RELEASE_MEM_INT_SEL_IRQ_CONFIRM, Addr: abi.GPU_FB_BASE + ltFence, Data: uint64(k), CtxID: k}.Encode())
}

// ivs returns the IVs the IH wrote so far.
func (e *injEnv) ivs() []ivEntry {
	var out []ivEntry
	for i := range min(int(e.d.r.reg(abi.REG_IH_ENTRIES)), 16<<10/abi.IH_ENTRY_BYTES) {
		b := e.d.vram[vtIH+i*abi.IH_ENTRY_BYTES:]
		dw := func(k int) uint32 { return binary.LittleEndian.Uint32(b[4*k:]) }
		out = append(out, ivEntry{client: dw(0) & 0xFF, source: dw(0) >> 8 & 0xFF, data: [4]uint32{dw(4), dw(5), dw(6), dw(7)}})
	}
	return out
}

// rule returns the device's rule i.
func (e *injEnv) rule(i int) inject.Status {
	e.t.Helper()
	st := e.dev.Injections()
	if i >= len(st) {
		e.t.Fatalf("rule %d of %d", i, len(st))
	}
	return st[i]
}

func (e *injEnv) seen(i int, n uint64) {
	e.t.Helper()
	eventually(e.t, "rule seen", func() bool { return e.rule(i).Seen >= n })
}

func (e *injEnv) irqs(vector int, within time.Duration) uint64 {
	n, err := vfiousertest.WaitIRQ(e.fds[vector], within)
	if err != nil && within > 0 {
		e.t.Fatalf("vector %d: %v", vector, err)
	}
	return n
}

// The rules against the real engines, each on a fresh device: what the driver sees.
func TestInjectionRules(t *testing.T) {
	for _, tc := range []struct {
		rules string
		run   func(t *testing.T, e *injEnv)
	}{
		{"irq.drop:vector=0,n=1", func(t *testing.T, e *injEnv) {
			e.fence(1)
			e.seen(0, 1) // the interrupt reached the hook: it is gone
			if n := e.irqs(0, 0); n != 0 || len(e.ivs()) != 1 {
				t.Fatalf("first fence: %d interrupts, %d IVs (want 0, 1: the IV written, its MSI dropped)", n, len(e.ivs()))
			}
			e.fence(2)
			if n := e.irqs(0, 10*time.Second); n != 1 {
				t.Fatalf("second fence: %d interrupts, want 1", n)
			}
		}},
		{"irq.delay:vector=0,n=1,for=300ms", func(t *testing.T, e *injEnv) {
			start := time.Now()
			e.fence(1)
			if n := e.irqs(0, 10*time.Second); n != 1 {
				t.Fatalf("%d interrupts, want 1", n)
			}
			if d := time.Since(start); d < 300*time.Millisecond {
				t.Fatalf("delayed interrupt came after %v, before its 300 ms", d)
			}
		}},
		{"iv.drop:src=CP_EOP,n=1", func(t *testing.T, e *injEnv) {
			e.fence(1)
			e.fence(2)
			eventually(t, "fence 2", func() bool { return e.d.fence() == 2 })
			eventually(t, "one IV", func() bool { return len(e.ivs()) == 1 })
			if iv := e.ivs()[0]; iv.source != abi.IH_SRC_CP_EOP || iv.data[0] != 2 {
				t.Fatalf("IV %+v, want the second fence's EOP (ctxid 2)", iv)
			}
			if n := e.irqs(0, 10*time.Second); n != 1 {
				t.Fatalf("%d interrupts, want 1 (for the IV written)", n)
			}
		}},
		{"iv.corrupt:n=1,new-src=0x42,xor0=0xff", func(t *testing.T, e *injEnv) {
			e.fence(1)
			e.fence(2)
			eventually(t, "two IVs", func() bool { return len(e.ivs()) == 2 })
			ivs := e.ivs()
			if ivs[0].source != 0x42 || ivs[0].data[0] != 1^0xff {
				t.Fatalf("first IV %+v, want source 0x42, DW4 %#x", ivs[0], 1^0xff)
			}
			if ivs[1].source != abi.IH_SRC_CP_EOP || ivs[1].data[0] != 2 {
				t.Fatalf("second IV %+v, want it untouched", ivs[1])
			}
		}},
		{"dma.fail:iova=0x100000000+0x1000,dir=write", func(t *testing.T, e *injEnv) {
			e.d.submit(bypassWrite(ltGART0+0x10, 7), bypassWrite(abi.GPU_FB_BASE+ltFence, 1))
			e.d.halted(t, abi.CP_ERROR_MEMORY)
			eventually(t, "GPF IV", func() bool { return len(e.ivs()) == 1 })
			if iv := e.ivs()[0]; iv.source != abi.IH_SRC_CP_GPF || iv.data[0] != abi.CP_ERROR_MEMORY {
				t.Fatalf("IV %+v, want CP_GPF with CP_ERROR_MEMORY", iv)
			}
			if e.d.fence() != 0 || binary.LittleEndian.Uint32(e.d.mem.Bytes()[0x10:]) != 0 {
				t.Fatal("the failed write or the fence after it landed")
			}
			// Outside the range DMA works: the driver resets the queue and carries on.
			e.d.hqd(abi.REG_HQD_DEQUEUE_REQUEST, abi.HQD_DEQUEUE_RESET)
			eventually(t, "queue reset", func() bool { return e.d.hqdRead(abi.REG_HQD_ACTIVE) == 0 })
			e.d.startQueue()
			e.d.submit(bypassWrite(ltGART0+0x1010, 8), bypassWrite(abi.GPU_FB_BASE+ltFence, 2))
			eventually(t, "fence 2", func() bool { return e.d.fence() == 2 })
			if v := binary.LittleEndian.Uint32(e.d.mem.Bytes()[0x1010:]); v != 8 {
				t.Fatalf("write outside the range: %#x", v)
			}
		}},
		{"dma.fail:iova=0x100000000+0x1000", func(t *testing.T, e *injEnv) {
			// The self-test engine reports the failure in its status.
			if st := e.d.r.runDMA(ltIOVA, 64, 0x1234); st != abi.SELFTEST_DMA_STATUS_ERR_FAULT {
				t.Fatalf("STATUS %s", abi.NameOf("SELFTEST_DMA_STATUS_", uint64(st)))
			}
			if st := e.d.r.runDMA(ltIOVA+0x1000, 64, 0x1234); st != abi.SELFTEST_DMA_STATUS_DONE {
				t.Fatalf("outside the range: STATUS %s", abi.NameOf("SELFTEST_DMA_STATUS_", uint64(st)))
			}
			if f := e.rule(0).Fired; f != 1 {
				t.Fatalf("fired %d, want 1", f)
			}
		}},
		{"queue.stall:slot=1", stallThenReset},
		{"queue.stall:doorbell=6", stallThenReset},
		{"tlb.stale:vmid=3", func(t *testing.T, e *injEnv) {
			d := e.d
			vt := newVMTables(d, vtTables)
			vt.mapPage(vaIB, vtIB|pteRWX)
			vt.mapPage(vaData, vtDataA|pteRWX)
			vt.enableContext(3, 0)
			n := d.writeIB(vtIB, bypassWrite(vaData, 1))
			ib := pm4.IndirectBuffer{Addr: vaIB, Size: n, VMID: 3}.Encode()
			inv := pm4.Packet(abi.PM4_IT_INVALIDATE_TLBS, 1|1<<abi.PM4_INVALIDATE_TLBS_ALL_HUB__SHIFT|vtPASID<<abi.PM4_INVALIDATE_TLBS_PASID__SHIFT)
			d.submit(ib, bypassWrite(abi.GPU_FB_BASE+ltFence, 1))
			eventually(t, "first write", func() bool { return d.fence() == 1 && d.u32(vtDataA) == 1 })
			vt.mapPage(vaData, vtDataB|pteRWX)
			// The invalidation is acknowledged (the ring goes on) but drops nothing.
			d.writeIB(vtIB, bypassWrite(vaData, 2))
			d.submit(inv, ib, bypassWrite(abi.GPU_FB_BASE+ltFence, 2))
			eventually(t, "write after the stale invalidation", func() bool { return d.fence() == 2 })
			if a, b := d.u32(vtDataA), d.u32(vtDataB); a != 2 || b != 0 {
				t.Fatalf("A %d, B %d: want the stale page A written", a, b)
			}
			// The rule is spent: the next invalidation works.
			d.writeIB(vtIB, bypassWrite(vaData, 3))
			d.submit(inv, ib, bypassWrite(abi.GPU_FB_BASE+ltFence, 3))
			eventually(t, "write after the next invalidation", func() bool { return d.fence() == 3 })
			if b := d.u32(vtDataB); b != 3 {
				t.Fatalf("page B holds %d, want 3", b)
			}
		}},
	} {
		t.Run(tc.rules, func(t *testing.T) {
			e := newInjEnv(t, tc.rules)
			tc.run(t, e)
			var fired uint64
			for _, s := range e.dev.Injections() {
				fired += s.Fired
			}
			if fired == 0 {
				t.Fatal("no rule fired")
			}
			// vgpu status shows the rules and what they did.
			st := e.dev.Status()
			var made uint64
			for _, n := range st.Injection.Totals {
				made += n
			}
			if len(st.Injection.Rules) == 0 || made != fired {
				t.Fatalf("status: %d rules, totals %v, want %d injections", len(st.Injection.Rules), st.Injection.Totals, fired)
			}
			text := st.Text(nil)
			if r := st.Injection.Rules[0]; !strings.Contains(text, fmt.Sprintf("rule %d: %s: %d seen, %d fired", r.ID, r.Rule, r.Seen, r.Fired)) {
				t.Fatalf("status text lacks rule %+v:\n%s", r, text)
			}
		})
	}
}

// stallThenReset: the queue stops fetching with work in its ring, does not drain, and a
// DEQUEUE_RESET releases it; restarted, it runs (the rule spent itself).
func stallThenReset(t *testing.T, e *injEnv) {
	d := e.d
	d.submit(bypassWrite(abi.GPU_FB_BASE+ltFence, 1))
	e.seen(0, 1)
	if d.fence() != 0 || d.state() != abi.HQD_STATE_RUNNING || d.hqdRead(abi.REG_HQD_PQ_RPTR) != 0 {
		t.Fatalf("stalled queue: fence %d, state %s, rptr %d", d.fence(), abi.NameOf("HQD_STATE_", uint64(d.state())),
			d.hqdRead(abi.REG_HQD_PQ_RPTR))
	}
	d.hqd(abi.REG_HQD_DEQUEUE_REQUEST, abi.HQD_DEQUEUE_DRAIN)
	d.submit() // a doorbell: a wake that must not end the stall
	if d.hqdRead(abi.REG_HQD_ACTIVE) != 1 || d.fence() != 0 {
		t.Fatal("a drain stopped the stalled queue")
	}
	d.hqd(abi.REG_HQD_DEQUEUE_REQUEST, abi.HQD_DEQUEUE_RESET)
	eventually(t, "reset ends the stall", func() bool { return d.hqdRead(abi.REG_HQD_ACTIVE) == 0 })
	d.startQueue()
	d.submit(bypassWrite(abi.GPU_FB_BASE+ltFence, 2))
	eventually(t, "fence after the reset", func() bool { return d.fence() == 2 })
}

// Rules are the user's configuration: a device reset (FLR) keeps them, and releases a queue
// they stalled; ClearInjections drops them.
func TestInjectionLifecycle(t *testing.T) {
	e := newInjEnv(t, "queue.stall:slot=1,n=every; irq.drop:vector=5")
	d := e.d
	d.submit(bypassWrite(abi.GPU_FB_BASE+ltFence, 1))
	e.seen(0, 1)
	exp := d.r.findCap(0x10)
	d.r.cfgWrite(exp+8, 2, d.r.cfgRead(exp+8, 2)|1<<15) // FLR
	if !e.dev.gpu.cp.Quiesce(5 * time.Second) {
		t.Fatal("the stalled queue outlived the reset")
	}
	if st := e.dev.Injections(); len(st) != 2 || st[0].Fired != 1 {
		t.Fatalf("after the reset: %+v", st)
	}
	e.dev.ClearInjections()
	if st := e.dev.Injections(); len(st) != 0 || e.dev.InjectionTotals()[inject.QueueStall] != 1 {
		t.Fatalf("after Clear: %+v, totals %v", st, e.dev.InjectionTotals())
	}
	ids, err := e.dev.AddInjection("mes.hang:op=ADD_QUEUE; iv.drop:src=IH_SRC_CP_GPF,client=GRBM_CP")
	if err != nil || len(ids) != 2 {
		t.Fatalf("names: %v, %v", ids, err)
	}
	if st := e.dev.Injections(); !strings.Contains(st[0].Rule, fmt.Sprintf("op=%#x", abi.MES_SCH_API_ADD_QUEUE)) ||
		!strings.Contains(st[1].Rule, fmt.Sprintf("src=%#x", abi.IH_SRC_CP_GPF)) {
		t.Fatalf("rules %+v", st)
	}
	if err := e.dev.RemoveInjection(ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dev.AddInjection("iv.drop:src=NO_SUCH_SOURCE"); !errors.Is(err, inject.ErrBadValue) {
		t.Fatalf("unknown name: %v", err)
	}
	cfg := DefaultConfig()
	cfg.Inject = make([]inject.Rule, inject.MaxRules+1)
	if _, err := New(cfg); err == nil {
		t.Fatal("a config with too many rules was accepted")
	}
}

// With no rule the hooks cost nothing the CP's hot path allocates (the fast path is a load).
func TestInjectionOffAllocatesNothing(t *testing.T) {
	dev := newSharedDevice(t)
	if n := testing.AllocsPerRun(1000, func() {
		dev.inj.Interrupt(0)
		_ = dev.inj.Has(inject.DMAFail) || dev.inj.Stall(1, 6) || dev.inj.MESFrame(1) || dev.inj.Stale(1)
		_ = dev.inj.IV(1, 2)
	}); n != 0 {
		t.Fatalf("%v allocations per event with no rule", n)
	}
}
