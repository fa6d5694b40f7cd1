package gpuvm

import (
	"testing"

	"vgpu/abi"
	"vgpu/engine"
)

func mustPA(t *testing.T, w *world, a engine.Access, va uint64) engine.PhysAddr {
	t.Helper()
	tr, err := w.vm.Translate(a, va, false)
	if err != nil {
		t.Fatalf("Translate %#x: %v", va, err)
	}
	return tr.PA
}

// A changed PTE is not seen until the VMID is invalidated; only the named VMID's TLB drops.
func TestTLBStaysStaleUntilInvalidated(t *testing.T) {
	w := newWorld(t)
	w.enable(1, cntl(0))
	w.enable(2, cntl(0))
	w.tab.set(0, va1, pg1|rw)
	mustPA(t, w, acc(1), va1)
	mustPA(t, w, acc(2), va1)
	w.tab.set(0, va1, 0x20_0000|rw)
	for _, vmid := range []int{1, 2} {
		if pa := mustPA(t, w, acc(vmid), va1); pa != vram(pg1) {
			t.Fatalf("vmid %d: TLB did not serve the old page: %v", vmid, pa)
		}
	}
	w.flush(1)
	if pa := mustPA(t, w, acc(1), va1); pa != vram(0x20_0000) {
		t.Errorf("vmid 1 after invalidation: %v", pa)
	}
	if pa := mustPA(t, w, acc(2), va1); pa != vram(pg1) {
		t.Errorf("vmid 2 lost its TLB to vmid 1's invalidation: %v", pa)
	}
	// An invalid PTE is not cached: mapping it later needs no invalidation.
	w.tab.set(0, va1+pageSize, 0)
	if _, err := w.vm.Translate(acc(1), va1+pageSize, false); err == nil {
		t.Fatal("invalid page translated")
	}
	w.tab.set(0, va1+pageSize, 0x30_0000|rw)
	if pa := mustPA(t, w, acc(1), va1+pageSize); pa != vram(0x30_0000) {
		t.Errorf("newly mapped page: %v", pa)
	}
}

// The invalidation engine's level bits choose what drops: PTEs only keeps the PDE cache, so a
// walk through a changed PDB0 entry still reaches the old PTB.
func TestInvalidationLevels(t *testing.T) {
	w := newWorld(t)
	w.enable(1, cntl(0))
	w.tab.set(0, va1, pg1|rw)
	mustPA(t, w, acc(1), va1)
	newPTB := w.tab.alloc()
	w.m.put(vram(newPTB+idx(0, va1)*8), 0x40_0000|rw)
	w.m.put(w.tab.entryAddr(1, va1), newPTB|abi.PDE_VALID_MASK)
	w.vm.WriteEngine(4, engReq, 1<<1|abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PTES_MASK)
	if pa := mustPA(t, w, acc(1), va1); pa != vram(pg1) {
		t.Fatalf("PTE-only invalidation: %v, want the old PTB's page", pa)
	}
	if w.vm.Stats().PDECacheHits == 0 {
		t.Error("the walk did not start from the PDE cache")
	}
	w.vm.WriteEngine(4, engReq, 1<<1|abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PTES_MASK|abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE0_MASK)
	if pa := mustPA(t, w, acc(1), va1); pa != vram(0x40_0000) {
		t.Errorf("PDE0 invalidation: %v", pa)
	}
	// No level bit: acknowledged, nothing dropped.
	w.tab.set(0, va1, 0)
	w.m.put(vram(newPTB+idx(0, va1)*8), 0x50_0000|rw)
	w.vm.WriteEngine(4, engReq, 1<<1)
	if ack := w.vm.ReadEngine(4, engAck); ack&2 == 0 {
		t.Errorf("ACK %#x", ack)
	}
	if pa := mustPA(t, w, acc(1), va1); pa != vram(0x40_0000) {
		t.Errorf("a REQ without level bits dropped the TLB: %v", pa)
	}
	// 4K-only keeps huge pages.
	huge := uint64(0x0000_0040_0000_0000)
	w.tab.set(1, huge, 0x20_0000|rw|abi.PDE_PTE_MASK)
	mustPA(t, w, acc(1), huge)
	w.tab.set(1, huge, 0x60_0000|rw|abi.PDE_PTE_MASK)
	w.vm.WriteEngine(4, engReq, 1<<1|reqAny|abi.REG_VM_INV_ENG_REQ__INVALIDATE_4K_PAGES_ONLY_MASK)
	if pa := mustPA(t, w, acc(1), huge); pa != vram(0x20_0000) {
		t.Errorf("4K-only invalidation dropped a huge page: %v", pa)
	}
	if pa := mustPA(t, w, acc(1), va1); pa != vram(0x50_0000) {
		t.Errorf("4K-only invalidation kept a 4K page: %v", pa)
	}
}

func TestStrictModeNamesStaleUse(t *testing.T) {
	w := newWorld(t)
	w.enable(3, cntl(0))
	w.vm.WriteReg(regStrictCntl, 1)
	w.tab.set(0, va1, pg1|rw)
	a := engine.Access{VMID: 3, Slot: 7}
	mustPA(t, w, a, va1)
	if w.vm.ReadReg(regStaleUses) != 0 {
		t.Fatal("stale use without a change")
	}
	w.tab.set(0, va1, 0x20_0000|rw)
	if _, err := w.vm.Translate(a, va1+8, true); err != nil {
		t.Fatal(err)
	}
	if got := w.vm.ReadReg(regStaleUses); got != 1 {
		t.Fatalf("STALE_USES %d", got)
	}
	ev := w.vm.ReadReg(regStaleEvent)
	wantEv := uint32(7) | 3<<abi.REG_VM_STALE_EVENT__VMID__SHIFT | abi.REG_VM_STALE_EVENT__WRITE_MASK
	if ev != wantEv {
		t.Errorf("STALE_EVENT %#x, want %#x", ev, wantEv)
	}
	reg64 := func(lo uint32) uint64 { return uint64(w.vm.ReadReg(lo+4))<<32 | uint64(w.vm.ReadReg(lo)) }
	if reg64(regStaleVALo) != va1+8 || reg64(regStaleOldLo) != pg1|rw || reg64(regStaleNewLo) != 0x20_0000|rw {
		t.Errorf("event va %#x old %#x new %#x", reg64(regStaleVALo), reg64(regStaleOldLo), reg64(regStaleNewLo))
	}
	// Unmapping without invalidation: named too, with NEW_FAULTS.
	w.tab.set(0, va1, 0)
	mustPA(t, w, a, va1)
	if w.vm.ReadReg(regStaleEvent)&abi.REG_VM_STALE_EVENT__NEW_FAULTS_MASK == 0 || w.vm.ReadReg(regStaleUses) != 2 {
		t.Error("unmapped-but-cached page not named")
	}
	// The invalidation handshake fixes it: no more events.
	w.tab.set(0, va1, 0x20_0000|rw)
	w.flush(3)
	mustPA(t, w, a, va1)
	mustPA(t, w, a, va1)
	if got := w.vm.ReadReg(regStaleUses); got != 2 {
		t.Errorf("STALE_USES %d after invalidation", got)
	}
	// Without strict mode nothing is counted.
	w.vm.WriteReg(regStrictCntl, 0)
	w.tab.set(0, va1, pg1|rw)
	mustPA(t, w, a, va1)
	if got := w.vm.ReadReg(regStaleUses); got != 2 {
		t.Errorf("STALE_USES %d with strict off", got)
	}
}

// A stale PDE is named too: the walk from a cached PDE differs from the walk from the root.
func TestStrictModeNamesStalePDE(t *testing.T) {
	w := newWorld(t)
	w.enable(1, cntl(0))
	w.vm.WriteReg(regStrictCntl, 1)
	w.tab.set(0, va1, pg1|rw)
	mustPA(t, w, acc(1), va1)
	newPTB := w.tab.alloc()
	w.m.put(vram(newPTB+idx(0, va1)*8), 0x40_0000|rw)
	w.m.put(w.tab.entryAddr(1, va1), newPTB|abi.PDE_VALID_MASK)
	w.vm.WriteEngine(0, engReq, 1<<1|abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PTES_MASK)
	if pa := mustPA(t, w, acc(1), va1); pa != vram(pg1) {
		t.Fatalf("%v", pa)
	}
	if w.vm.ReadReg(regStaleUses) != 1 {
		t.Errorf("stale PDE use not named (STALE_USES %d)", w.vm.ReadReg(regStaleUses))
	}
}

func TestInvalidatePASID(t *testing.T) {
	w := newWorld(t)
	for vmid := 1; vmid <= 3; vmid++ {
		w.enable(vmid, cntl(0))
	}
	w.vm.WriteReg(regPASIDLUT0+4*1, 0x42)
	w.vm.WriteReg(regPASIDLUT0+4*2, 0x43)
	w.vm.WriteReg(regPASIDLUT0+4*3, 0x42)
	w.tab.set(0, va1, pg1|rw)
	for vmid := 1; vmid <= 3; vmid++ {
		mustPA(t, w, acc(vmid), va1)
	}
	w.tab.set(0, va1, 0x20_0000|rw)
	if mask := w.vm.InvalidatePASID(0x42, true, 0); mask != 1<<1|1<<3 {
		t.Errorf("invalidated %#x", mask)
	}
	for vmid, want := range map[int]uint64{1: 0x20_0000, 2: pg1, 3: 0x20_0000} {
		if pa := mustPA(t, w, acc(vmid), va1); pa != vram(want) {
			t.Errorf("vmid %d: %v", vmid, pa)
		}
	}
}

func TestEngineSemaphoreAndVMID0(t *testing.T) {
	w := newWorld(t)
	flushed := 0
	w.vm.SetVMID0Flush(func() { flushed++ })
	if w.vm.ReadEngine(17, engSem) != 1 {
		t.Fatal("free semaphore not acquired")
	}
	if w.vm.ReadEngine(17, engSem) != 0 {
		t.Error("held semaphore acquired twice")
	}
	if w.vm.ReadEngine(17, engAck)&abi.REG_VM_INV_ENG_ACK__SEMAPHORE_MASK == 0 {
		t.Error("ACK.SEMAPHORE not set")
	}
	w.vm.WriteEngine(17, engReq, 1|reqAny)
	if flushed != 1 || w.vm.ReadEngine(17, engAck)&1 == 0 {
		t.Errorf("VMID 0 invalidation: hook ran %d times, ACK %#x", flushed, w.vm.ReadEngine(17, engAck))
	}
	w.vm.WriteEngine(17, engSem, 0)
	if w.vm.ReadEngine(17, engSem) != 1 {
		t.Error("released semaphore not acquired")
	}
	w.vm.WriteEngine(17, engRangeLo, 0xFFFFFFFF)
	w.vm.WriteEngine(17, engRangeHi, 0xFFFFFFFF)
	if w.vm.ReadEngine(17, engRangeLo) != 0xFFFFFFFF || w.vm.ReadEngine(17, engRangeHi) != 0x1F {
		t.Error("range registers")
	}
	// CLEAR_PROTECTION_FAULT_STATUS_ADDR in a REQ clears the latch.
	w.vm.ReportFault(engine.Access{Client: abi.VM_CID_CPF}, 0x1234_5000, false, abi.REG_VM_FAULT_STATUS__MAPPING_ERROR_MASK)
	if w.vm.ReadReg(regFaultStatus) == 0 || len(w.takeIVs()) != 1 {
		t.Fatal("ReportFault did not latch and interrupt")
	}
	w.vm.WriteEngine(3, engReq, abi.REG_VM_INV_ENG_REQ__CLEAR_PROTECTION_FAULT_STATUS_ADDR_MASK)
	if w.vm.ReadReg(regFaultStatus) != 0 {
		t.Error("REQ did not clear the latch")
	}
	for _, bad := range []int{-1, NumEngines} {
		w.vm.WriteEngine(bad, engReq, 0xFFFF|reqAny)
		if w.vm.ReadEngine(bad, engAck) != 0 {
			t.Errorf("engine %d exists", bad)
		}
	}
}

// The TLB never grows past its capacity (a set-associative cache fills most of it), and
// still translates correctly when full.
func TestTLBCapacity(t *testing.T) {
	w := newWorld(t)
	w.enable(1, cntl(0))
	n := TLBEntries + 100
	for i := range n {
		w.tab.set(0, uint64(i)<<12, uint64(i)<<12|rw)
	}
	for round := range 2 {
		for i := range n {
			if pa := mustPA(t, w, acc(1), uint64(i)<<12+8); pa != vram(uint64(i)<<12+8) {
				t.Fatalf("round %d page %d: %v", round, i, pa)
			}
		}
	}
	if got := w.vm.Stats().TLBEntries; got > TLBEntries || got < TLBEntries*3/4 {
		t.Errorf("%d TLB entries, capacity %d", got, TLBEntries)
	}
}
