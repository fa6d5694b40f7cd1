package hostile

import (
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// neverWait is a WAIT_REG_MEM that can never be satisfied, of one of several kinds, aimed at
// per-slot state; vramWord is the VRAM dword the first kind waits on (for the proof that waits
// still work after the flood).
func neverWait(slot int, vramWord uint64) []uint32 {
	word := uint64(sysIOVA + 0x600000 + 64*uint64(slot))
	switch slot % 6 {
	case 0: // VRAM dword that nobody writes, polled bypassing L2
		return pm4.WaitMem(fb(vramWord), 0x1234_5678)
	case 1: // guest memory through the GART and L2, no poll interval
		return pm4.WaitRegMem{Function: pm4.FuncEQ, Space: pm4.SpaceMem, Addr: gartSys(word), Ref: 0x1234_5678, Mask: ^uint32(0)}.Encode()
	case 2: // guest memory served by DMA messages: every re-check is a round trip to the client
		return pm4.WaitRegMem{Function: pm4.FuncEQ, Space: pm4.SpaceMem, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS,
			Addr: gart(gNofd) + 64*uint64(slot), Ref: 0x1234_5678, Mask: ^uint32(0)}.Encode()
	case 3: // a register nobody sets to that value
		return pm4.WaitRegMem{Function: pm4.FuncEQ, Space: pm4.SpaceReg, Reg1: abi.REG_SCRATCH_7 / 4, Ref: 0xFEED_FACE, Mask: ^uint32(0), Interval: 1}.Encode()
	case 4: // write-then-wait: writes SCRATCH_5, polls SCRATCH_6
		return pm4.WaitRegMem{Function: pm4.FuncEQ, Space: pm4.SpaceReg, Operation: pm4.OpWriteWait,
			Reg1: abi.REG_SCRATCH_5 / 4, Reg2: abi.REG_SCRATCH_6 / 4, Ref: 0xABCD, Mask: ^uint32(0)}.Encode()
	}
	// A comparison no value satisfies: nothing is greater than all ones.
	return pm4.WaitRegMem{Function: pm4.FuncGT, Space: pm4.SpaceMem, Addr: fb(vramWord), Ref: ^uint32(0), Mask: ^uint32(0)}.Encode()
}

// attackWaitFlood parks a never-satisfied WAIT_REG_MEM on every queue (memory in VRAM, in
// guest memory through L2, in message-served guest memory, registers, write-then-wait, an
// impossible comparison), then floods doorbells and PQ_WPTR writes that re-check them, and
// writes to unrelated registers, while register reads must be answered. No wait may be
// satisfied by the flood (the packet after it writes a marker); afterwards a wait whose
// condition is met must still go on.
func attackWaitFlood(t *testing.T, e *env) {
	d, r := e.d, e.rng
	word := func(slot int) uint64 { return vMarker + 64*uint64(slot) + 32 }
	marker := func(slot int) uint64 { return vMarker + 64*uint64(slot) }
	qs := make([]*queue, numSlots)
	for slot := range qs {
		d.setVRAM32(marker(slot), 0)
		d.setVRAM32(word(slot), 0)
		q, err := d.startQueue(slot, queueOpts{})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.submit(neverWait(slot, word(slot)), bypassWrite(fb(marker(slot)), 0xBAD)); err != nil {
			t.Fatal(err)
		}
		qs[slot] = q
	}
	for _, q := range qs {
		if state, code, err := d.awaitState(q.slot, abi.HQD_STATE_WAITING, livenessTimeout); err != nil || state != abi.HQD_STATE_WAITING {
			t.Fatalf("slot %d: %s (%v), want WAITING before the flood", q.slot, describeState(state, code), err)
		}
	}
	p := &poster{d: d}
	const flood = 30000
	start := time.Now()
	var worst time.Duration
	for i := 0; i < flood; i++ {
		q := qs[r.IntN(len(qs))]
		var err error
		switch r.IntN(5) {
		case 0, 1: // its own doorbell with the wptr it already has
			err = d.ring(doorbellBase+uint64(q.slot), q.wptr, true)
		case 2: // a doorbell no queue listens on
			err = d.ring(uint64(doorbellBase+numSlots+r.IntN(1000)), r.Uint64(), true)
		case 3: // PQ_WPTR_LO with the wptr it already has
			err = p.reg(hqd(q.slot, abi.REG_HQD_PQ_WPTR_LO), uint32(q.wptr))
		default: // registers the register waits read, but never with the awaited values
			err = p.reg([]uint32{abi.REG_SCRATCH_6, abi.REG_SCRATCH_7}[r.IntN(2)], r.Uint32()&0xFFFF0000|1)
		}
		if err != nil {
			t.Fatalf("flood write %d: %v", i, err)
		}
		if i%1000 == 999 {
			lat, err := d.alive()
			if err != nil {
				t.Fatalf("register read during the flood (after %d writes): %v", i+1, err)
			}
			worst = max(worst, lat)
		}
	}
	if err := p.sync(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d doorbell/register writes in %v; worst register read meanwhile %v", flood, time.Since(start).Round(time.Millisecond), worst.Round(time.Microsecond))
	for _, q := range qs {
		state, code, err := d.status(q.slot)
		if err != nil {
			t.Fatal(err)
		}
		if state != abi.HQD_STATE_WAITING || d.vramU32(marker(q.slot)) != 0 {
			t.Errorf("slot %d after the flood: %s, marker %#x; want still WAITING with no marker", q.slot, describeState(state, code), d.vramU32(marker(q.slot)))
		}
	}
	// The waits still work: satisfy slot 0's (VRAM, polled) and see it go on.
	d.setVRAM32(word(0), 0x1234_5678)
	deadline := time.Now().Add(livenessTimeout)
	for d.vramU32(marker(0)) != 0xBAD {
		if time.Now().After(deadline) {
			state, code, _ := d.status(0)
			t.Fatalf("slot 0's wait was satisfied %v ago but the queue did not go on (%s)", livenessTimeout, describeState(state, code))
		}
		time.Sleep(time.Millisecond)
	}
}
