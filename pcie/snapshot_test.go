package pcie

import (
	"errors"
	"testing"
)

// TestSaveRestoreState: a restored config space reads back as saved; only writable bits come
// from the file, and a file whose read-only bits differ (another function) is refused.
func TestSaveRestoreState(t *testing.T) {
	c := mustNew(t, vgpuSpec(), Hooks{})
	for _, w := range []struct {
		off, n int
		v      uint32
	}{
		{offCommand, 2, cmdMemory | cmdBusMaster},
		{0x10, 4, 0xFE000000},            // BAR0 low
		{capMSIX + msixCtrl, 2, 1 << 15}, // MSI-X enable
	} {
		if err := c.Write(uint64(w.off), le32(w.v)[:w.n]); err != nil {
			t.Fatal(err)
		}
	}
	saved := c.SaveState()
	c2 := mustNew(t, vgpuSpec(), Hooks{})
	if err := c2.RestoreState(saved); err != nil {
		t.Fatal(err)
	}
	if c2.SaveState() != saved || !c2.BusMasterEnabled() || !c2.MSIXEnabled() || c2.BARAddress(0) != c.BARAddress(0) {
		t.Error("restored config space differs")
	}
	for _, tc := range []struct {
		name string
		off  int
	}{
		{"vendor id", 0x00},
		{"capability pointer", 0x34},
		{"BAR size bits", 0x10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := saved
			bad[tc.off] ^= 0x01
			c3 := mustNew(t, vgpuSpec(), Hooks{})
			if err := c3.RestoreState(bad); !errors.Is(err, ErrSnapshotMismatch) {
				t.Fatalf("%v, want ErrSnapshotMismatch", err)
			}
			if c3.SaveState() != c3.init {
				t.Error("a refused restore changed config space")
			}
		})
	}
}
