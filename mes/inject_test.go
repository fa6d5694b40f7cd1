package mes

import (
	"fmt"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/inject"
)

// mes.hang against the real scheduler: the frame the rule names never completes (no status,
// no rptr progress, nothing behind it runs), the scheduler itself keeps running, and
// RING_ACTIVE = 0 then 1 on a fresh ring is the recovery: frames complete again.
func TestInjectMESHang(t *testing.T) {
	misc := func() *frameB {
		return newFrame(abi.MES_SCH_API_MISC).set(abi.MES_MISC_DW_OPCODE, abi.MES_MISC_OP_WRITE_REG).
			set(abi.MES_MISC_DW_REG_OFFSET, abi.REG_SCRATCH_1/4).set(abi.MES_MISC_DW_WRITE_REG_VALUE, 0x5EC0FFEE)
	}
	for _, tc := range []struct {
		rules string
		ok    int // frames before the one that hangs (each submission is two: it and its QUERY)
	}{
		{fmt.Sprintf("mes.hang:op=%#x", abi.MES_SCH_API_MISC), 2}, // after SET_HW_RESOURCES and its QUERY
		{"mes.hang:n=1", 0},
		{"mes.hang:n=4", 3}, // the QUERY behind the first MISC
	} {
		t.Run(tc.rules, func(t *testing.T) {
			r := newRig(t)
			rules, err := inject.Parse(tc.rules, nil)
			if err != nil {
				t.Fatal(err)
			}
			set := inject.NewSet(nil)
			if _, err := set.Add(rules...); err != nil {
				t.Fatal(err)
			}
			r.mes.SetInjector(set)
			if tc.ok > 0 {
				r.hwResources(0xFF, 0, 0xFF00)
			}
			// The next submission meets the rule (directly, or in its QUERY).
			slot := uint64(statusBase + 8*(r.n%256))
			r.n++
			r.mem.Store64(slot, 0)
			f := misc().set64(abi.MES_MISC_DW_API_STATUS, slot).set64(abi.MES_MISC_DW_API_STATUS+2, 1)
			r.put(f)
			r.seq++
			r.put(newFrame(abi.MES_SCH_API_QUERY_SCHEDULER_STATUS).set64(abi.MES_QUERY_DW_API_STATUS, ringFence).
				set64(abi.MES_QUERY_DW_API_STATUS+2, r.seq))
			r.mes.Doorbell(4, r.wptr)
			r.waitFor("the rule to fire", 10*time.Second, func() bool { return set.List()[0].Fired == 1 })
			at := uint32(tc.ok * abi.MES_API_FRAME_DWORDS)
			if rp := r.rreg(abi.REG_MES_RING_RPTR); rp != at {
				t.Fatalf("rptr %d, want %d (stuck at the frame)", rp, at)
			}
			if r.mem.Load64(ringFence) >= r.seq || (tc.ok < 3 && r.mem.Load64(slot) != 0) {
				t.Fatal("the frames behind the stuck one completed")
			}
			if got := r.rreg(abi.REG_MES_FRAMES); got != uint32(tc.ok) {
				t.Fatalf("MES_FRAMES %d, want %d", got, tc.ok)
			}
			if st := r.rreg(abi.REG_MES_STATUS) & abi.REG_MES_STATUS__STATE_MASK; st != abi.MES_STATE_RUNNING {
				t.Fatalf("MES_STATE %s, want RUNNING (the firmware is stuck in a frame, not halted)", abi.NameOf("MES_STATE_", uint64(st)))
			}
			// The driver's recovery: halt the scheduler and bring it up on a clean ring.
			r.wreg(abi.REG_MES_RING_ACTIVE, 0)
			r.waitFor("MES off", 10*time.Second, func() bool {
				return r.rreg(abi.REG_MES_STATUS)&abi.REG_MES_STATUS__STATE_MASK == abi.MES_STATE_OFF
			})
			r.mem.StoreDwords(ringBase, make([]uint32, ringDwords))
			r.mem.Store64(ringFence, 0)
			r.wptr, r.seq = 0, 0
			r.wreg(abi.REG_MES_RING_WPTR_LO, 0)
			r.wreg(abi.REG_MES_RING_WPTR_HI, 0)
			r.wreg(abi.REG_MES_RING_ACTIVE, 1)
			r.hwResources(0xFF, 0, 0xFF00)
			r.ok(misc(), abi.MES_MISC_DW_API_STATUS)
			if v := r.regs.Get(abi.REG_SCRATCH_1 / 4); v != 0x5EC0FFEE {
				t.Fatalf("SCRATCH_1 %#x after the recovery", v)
			}
		})
	}
}
