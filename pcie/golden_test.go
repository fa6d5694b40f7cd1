package pcie

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// vgpuSpec is the layout vgpu serves (docs/design.md), with test IDs.
func vgpuSpec() Spec {
	return Spec{
		VendorID:          0x1234,
		DeviceID:          0x5650,
		SubsystemVendorID: 0x1234,
		SubsystemID:       0x0001,
		Revision:          1,
		ClassCode:         0x030200,
		BARs: [6]BAR{
			0: {Size: 256 << 20, Mem64: true, Prefetchable: true},
			2: {Size: 16 << 10, Mem64: true},
			5: {Size: 256 << 10},
		},
		MSIX: MSIX{Vectors: 16, TableBAR: 5, TableOffset: 0x3f000, PBABAR: 5, PBAOffset: 0x3f800},
		ResizableBAR: &ResizableBAR{
			BAR: 0, Current: 256 << 20, Max: 1 << 30,
		},
	}
}

func mustNew(t testing.TB, s Spec, h Hooks) *Config {
	t.Helper()
	c, err := New(s, h)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func TestGoldenDump(t *testing.T) {
	c := mustNew(t, vgpuSpec(), Hooks{})
	got := c.Dump()
	path := filepath.Join("testdata", "config.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pcie -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("Dump() differs from %s (run with -update after checking):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff lists the lines that differ, "-want" then "+got".
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("-" + wl + "\n+" + gl + "\n")
		}
	}
	return b.String()
}

// TestDumpAfterProgramming checks that Dump decodes live state, not the spec.
func TestDumpAfterProgramming(t *testing.T) {
	c := mustNew(t, vgpuSpec(), Hooks{})
	writes := []struct {
		off uint64
		val []byte
	}{
		{offCommand, []byte{cmdMemory | cmdBusMaster, 0}},
		{offBAR0, le32(0xe0000000)},
		{offBAR0 + 4, le32(0x1)},
		{capMSIX + msixCtrl + 1, []byte{0xc0}},
		{capPM + pmPMCSR, []byte{pmcsrD3hot}},
	}
	for _, w := range writes {
		if err := c.Write(w.off, w.val); err != nil {
			t.Fatal(err)
		}
	}
	d := c.Dump()
	for _, want := range []string{
		"Control: I/O- Mem+ BusMaster+",
		"Region 0: Memory at 1e0000000 (64-bit, prefetchable) [size=256M]",
		"MSI-X: Enable+ Count=16 Masked+",
		"Status: D3 NoSoftRst+",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("Dump() lacks %q:\n%s", want, d)
		}
	}
}
