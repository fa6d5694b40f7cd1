package gpummu

import (
	"errors"
	"testing"

	"vgpu/engine"
)

// TestPeek: the FB aperture and valid GART entries translate; everything a real access would
// fault on does not; nothing is counted, cached or latched; an entry the reader cannot reach
// directly does not translate.
func TestPeek(t *testing.T) {
	w := newWorld(t)
	before := w.mmu.Stats()
	for _, tc := range []struct {
		name string
		va   uint64
		want engine.PhysAddr
		ok   bool
	}{
		{"FB aperture", fb + 0x1234, vram(0x1234), true},
		{"GART system page", page(0) + 0x10, sys(0x20010), true},
		{"GART VRAM page", page(1) + 4, vram(0x3004), true},
		{"GART read-only page", page(3), sys(0x21000), true}, // permissions are the access's business
		{"GART invalid entry", page(2), engine.PhysAddr{}, false},
		{"GART entry without VALID", page(9), engine.PhysAddr{}, false},
		{"past the GART", page(gartPages), engine.PhysAddr{}, false},
		{"beyond the VA space", vaLimit, engine.PhysAddr{}, false},
	} {
		got, ok := w.mmu.Peek(tc.va, w.mem.ReadPhys)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if after := w.mmu.Stats(); after != before {
		t.Errorf("Peek changed the counters: %+v → %+v", before, after)
	}
	if st, _ := w.faultLatch(); st != 0 {
		t.Errorf("Peek latched a fault: %#x", st)
	}
	refuse := func(engine.Domain, uint64, []byte) error { return errors.New("not direct") }
	if _, ok := w.mmu.Peek(page(0), refuse); ok {
		t.Error("translated with an entry the reader refused")
	}
	w.program(gartStart, page(gartPages)-1, sysTable, false)
	if _, ok := w.mmu.Peek(page(0), w.mem.ReadPhys); ok {
		t.Error("translated with the GART off")
	}
}
