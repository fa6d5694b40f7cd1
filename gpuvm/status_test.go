package gpuvm

import (
	"testing"

	"vgpu/abi"
)

// TestRecentFaults: every no-retry fault is kept (the latch keeps only the first), with its
// VMID, page and status, the last maxRecentFaults of them, oldest first.
func TestRecentFaults(t *testing.T) {
	w := newWorld(t)
	w.enable(2, cntl(0))
	if got := w.vm.RecentFaults(); len(got) != 0 {
		t.Fatalf("faults before any: %+v", got)
	}
	n := maxRecentFaults + 3
	for i := range n {
		if _, err := w.vm.Translate(acc(2), uint64(i+1)<<20|0x123, i%2 == 0); err == nil {
			t.Fatal("unmapped page translated")
		}
	}
	got := w.vm.RecentFaults()
	if len(got) != maxRecentFaults {
		t.Fatalf("%d faults kept, want %d", len(got), maxRecentFaults)
	}
	for j, f := range got {
		i := n - maxRecentFaults + j
		write := f.Status&abi.REG_VM_FAULT_STATUS__RW_MASK != 0
		if f.VMID != 2 || f.Addr != uint64(i+1)<<20 || write != (i%2 == 0) || f.What == "" {
			t.Errorf("fault %d: %+v", j, f)
		}
	}
}
