package hostile

import (
	"encoding/binary"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// ivStorm makes every compute queue push perQueue end-of-pipe IVs (RELEASE_MEM with an
// interrupt and no data) and waits until all of them ran. It returns the IVs pushed.
func ivStorm(t *testing.T, d *driver, perQueue int, during func()) int {
	t.Helper()
	var qs []*queue
	for slot := 1; slot < numSlots; slot++ {
		q, err := d.startQueue(slot, queueOpts{log2: 12})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < perQueue; i++ {
			q.emit(pm4.ReleaseMem{DataSel: pm4.DataNone, IntSel: pm4.IntSend, CtxID: uint32(slot<<16 | i)}.Encode())
		}
		qs = append(qs, q)
	}
	for _, q := range qs {
		if err := q.kick(); err != nil {
			t.Fatal(err)
		}
	}
	if during != nil {
		during()
	}
	for _, q := range qs {
		state, code, err := q.settle(livenessTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if state != abi.HQD_STATE_RUNNING {
			t.Fatalf("slot %d: %s after pushing its IVs", q.slot, describeState(state, code))
		}
		if rptr, _ := d.reg(hqd(q.slot, abi.REG_HQD_PQ_RPTR)); uint64(rptr) != q.wptr {
			t.Fatalf("slot %d: rptr %d, want %d within %v: stuck behind a full IH ring?", q.slot, rptr, q.wptr, livenessTimeout)
		}
	}
	return perQueue * len(qs)
}

func ihCounts(t *testing.T, d *driver) (entries, dropped uint32) {
	t.Helper()
	var err error
	if entries, err = d.reg(abi.REG_IH_ENTRIES); err == nil {
		dropped, err = d.reg(abi.REG_IH_DROPPED)
	}
	if err != nil {
		t.Fatal(err)
	}
	return entries, dropped
}

// attackIHOverflow overflows the smallest IH ring from every compute queue at once with the
// driver never consuming an entry: without WPTR_OVERFLOW_ENABLE the ring keeps what fits and
// counts the rest as dropped; with it every entry is written over the oldest and RB_OVERFLOW
// is flagged. Then a storm with garbage IH_RB_RPTR writes and a flooded rptr doorbell, and the
// largest ring placed across the end of a mapping. Queues must never stall on a full IH.
func attackIHOverflow(t *testing.T, e *env) {
	d, r := e.d, e.rng
	const perQueue = 200
	t.Run("drop when full", func(t *testing.T) {
		if err := d.setupIH(8, 0); err != nil {
			t.Fatal(err)
		}
		e0, x0 := ihCounts(t, d)
		n := ivStorm(t, d, perQueue, nil)
		e1, x1 := ihCounts(t, d)
		// 2^8 dwords = 1 KiB = 32 slots of 32 bytes, of which 31 can be full.
		if e1-e0 > 31 || (e1-e0)+(x1-x0) != uint32(n) {
			t.Errorf("%d IVs into a 31-entry ring nobody drains: %d entries written, %d dropped; want ≤ 31 and the rest dropped", n, e1-e0, x1-x0)
		}
		t.Logf("%d IVs: %d written, %d dropped", n, e1-e0, x1-x0)
	})
	t.Run("overwrite when full", func(t *testing.T) {
		if err := d.setupIH(8, abi.REG_IH_RB_CNTL__WPTR_OVERFLOW_ENABLE_MASK); err != nil {
			t.Fatal(err)
		}
		e0, x0 := ihCounts(t, d)
		n := ivStorm(t, d, perQueue, nil)
		e1, x1 := ihCounts(t, d)
		if e1-e0 != uint32(n) || x1 != x0 {
			t.Errorf("%d IVs with overflow enabled: %d written, %d dropped; want all written", n, e1-e0, x1-x0)
		}
		w, err := d.reg(abi.REG_IH_RB_WPTR)
		if err != nil {
			t.Fatal(err)
		}
		if w&abi.REG_IH_RB_WPTR__RB_OVERFLOW_MASK == 0 {
			t.Errorf("IH_RB_WPTR %#x: RB_OVERFLOW not set after overwriting entries", w)
		}
		ctl, _ := d.reg(abi.REG_IH_RB_CNTL)
		if err := d.setReg(abi.REG_IH_RB_CNTL, ctl|abi.REG_IH_RB_CNTL__WPTR_OVERFLOW_CLEAR_MASK); err != nil {
			t.Fatal(err)
		}
		if w, _ = d.reg(abi.REG_IH_RB_WPTR); w&abi.REG_IH_RB_WPTR__RB_OVERFLOW_MASK != 0 {
			t.Errorf("IH_RB_WPTR %#x: RB_OVERFLOW still set after WPTR_OVERFLOW_CLEAR", w)
		}
	})
	t.Run("garbage read pointers", func(t *testing.T) {
		if err := d.setupIH(10, 0); err != nil {
			t.Fatal(err)
		}
		// Let a doorbell carry the rptr too, and flood both with nonsense.
		const ihDoorbell = 2 * (doorbellBase + numSlots + 3)
		if err := d.setReg(abi.REG_IH_DOORBELL_RPTR, ihDoorbell|abi.REG_IH_DOORBELL_RPTR__ENABLE_MASK); err != nil {
			t.Fatal(err)
		}
		p := &poster{d: d}
		n := ivStorm(t, d, perQueue, func() {
			var b8 [8]byte
			for i := 0; i < 5000; i++ {
				var err error
				if i%2 == 0 {
					err = p.reg(abi.REG_IH_RB_RPTR, garbage(r))
				} else {
					binary.LittleEndian.PutUint64(b8[:], r.Uint64())
					err = p.write(abi.BAR_DOORBELL, 4*ihDoorbell, b8[:])
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := p.sync(); err != nil {
				t.Fatal(err)
			}
		})
		e1, x1 := ihCounts(t, d)
		t.Logf("%d IVs with 5000 garbage rptr writes: IH entries %d, dropped %d", n, e1, x1)
	})
	t.Run("largest ring across the end of a mapping", func(t *testing.T) {
		e.mem.allow(sysEnd-64<<10, 64<<10)
		regs := [][2]uint32{{abi.REG_IH_RB_CNTL, 0}}
		regs = append(regs, set64(abi.REG_IH_RB_BASE_LO, gSysEnd-64<<10)...)
		regs = append(regs, set64(abi.REG_IH_RB_WPTR_ADDR_LO, fb(vIHWptr))...)
		regs = append(regs, [2]uint32{abi.REG_IH_RB_CNTL, abi.REG_IH_RB_CNTL__RB_SIZE_MASK | abi.REG_IH_RB_CNTL__RB_ENABLE_MASK |
			abi.REG_IH_RB_CNTL__ENABLE_INTR_MASK | abi.REG_IH_RB_CNTL__WPTR_WRITEBACK_ENABLE_MASK | abi.REG_IH_RB_CNTL__WPTR_OVERFLOW_ENABLE_MASK})
		if err := d.setRegs(regs...); err != nil {
			t.Fatal(err)
		}
		e0, x0 := ihCounts(t, d)
		n := ivStorm(t, d, perQueue, nil)
		e1, x1 := ihCounts(t, d)
		// 64 KiB of the ring are mapped: 2048 entries; the rest cannot be written.
		if e1-e0 > 2048 || x1 == x0 {
			t.Errorf("%d IVs into a ring of which 2048 entries are mapped: %d written, %d dropped", n, e1-e0, x1-x0)
		}
		t.Logf("%d IVs: %d written, %d dropped", n, e1-e0, x1-x0)
	})
	// A flood of self-test interrupts on every vector: eventfd counters, not a server-side
	// backlog.
	p := &poster{d: d}
	start := time.Now()
	for i := 0; i < 20000; i++ {
		if err := p.reg(abi.REG_SELFTEST_IRQ, uint32(i%msixCount)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.sync(); err != nil {
		t.Fatal(err)
	}
	t.Logf("20000 self-test interrupts in %v", time.Since(start).Round(time.Millisecond))
}
