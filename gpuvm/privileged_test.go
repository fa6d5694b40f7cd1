package gpuvm

import (
	"errors"
	"testing"

	"vgpu/abi"
	"vgpu/engine"
)

// A privileged access (the CP's PROTECTED_FENCE_SIGNAL) skips only the WRITEABLE check of a
// write: reads, fetches, invalid entries and ranges fault exactly as for any other access.
func TestPrivilegedWrite(t *testing.T) {
	ro := uint64(pg1 | abi.PTE_VALID_MASK | abi.PTE_READABLE_MASK)
	cases := []struct {
		name       string
		pte        uint64
		va         uint64
		write      bool
		kind       engine.Kind
		privileged bool
		cause      uint32 // 0: translates
	}{
		{"privileged write to a read-only page", ro, va1, true, engine.Data, true, 0},
		{"ordinary write to the same page", ro, va1, true, engine.Data, false, statusOf(abi.VM_PERM_WRITE, 0, false)},
		{"privileged write to an invalid entry", pg1 | abi.PTE_READABLE_MASK, va1, true, engine.Data, true, statusOf(abi.VM_PERM_VALID, 0, false)},
		{"privileged read of an unreadable page", pg1 | abi.PTE_VALID_MASK | abi.PTE_WRITEABLE_MASK, va1, false, engine.Data, true, statusOf(abi.VM_PERM_READ, 0, false)},
		{"privileged fetch of a non-executable page", ro, va1, false, engine.Fetch, true, statusOf(abi.VM_PERM_EXECUTE, 0, false)},
		{"privileged write outside the range", ro, va1 | 1<<50, true, engine.Data, true, statusOf(0, 0, true)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.enable(1, cntl(0))
			w.tab.set(0, va1, tc.pte)
			a := engine.Access{VMID: 1, Slot: 2, Kind: tc.kind, Client: abi.VM_CID_CPC, Privileged: tc.privileged}
			tr, err := w.vm.Translate(a, tc.va, tc.write)
			if tc.cause == 0 {
				if err != nil || tr.PA != vram(pg1) || tr.DropWrites {
					t.Fatalf("Translate = %+v, %v; want %v", tr, err, vram(pg1))
				}
				if ivs := w.takeIVs(); len(ivs) != 0 {
					t.Errorf("%d IVs for an access that did not fault", len(ivs))
				}
				return
			}
			var f *Fault
			if !errors.As(err, &f) {
				t.Fatalf("Translate = %+v, %v; want a *Fault", tr, err)
			}
			if got := f.Status & causeMask; got != tc.cause {
				t.Errorf("cause %#x, want %#x (%s)", got, tc.cause, StatusString(f.Status))
			}
		})
	}
}
