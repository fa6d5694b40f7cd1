package l2

import (
	"errors"
	"slices"
	"testing"

	"vgpu/engine"
)

// TestSaveRestoreLines: lines come back with their bytes, dirty masks and writers, in LRU
// order (the next eviction picks the same victim), and a restored dirty line is written back.
func TestSaveRestoreLines(t *testing.T) {
	m := newMem(1<<16, 1<<16)
	c := NewSize(m, 16, nil)
	_ = c.Write(3, sys(0x100), 0, []byte{1, 2, 3})
	_ = c.Write(5, vram(0x2000), 0, []byte{9})
	buf := make([]byte, 4)
	_ = c.Read(1, vram(0x4000), 0, buf) // a clean line
	saved := c.SaveLines()
	if len(saved) != 3 {
		t.Fatalf("%d lines saved, want 3", len(saved))
	}
	m2 := newMem(1<<16, 1<<16)
	c2 := NewSize(m2, 16, nil)
	if err := c2.RestoreLines(saved); err != nil {
		t.Fatal(err)
	}
	if got := c2.SaveLines(); !slices.Equal(got, saved) {
		t.Errorf("restored lines differ")
	}
	if s, s2 := c.Stats(), c2.Stats(); s.Lines != s2.Lines || s.DirtyLines != s2.DirtyLines ||
		c.DirtyLinesOf(3) != c2.DirtyLinesOf(3) || c2.DirtyLinesOf(5) != 1 {
		t.Errorf("stats %+v, restored %+v", s, s2)
	}
	c2.WriteBack(nil)
	if got := m2.cpuRead(engine.DomainSystem, 0x100, 3); !slices.Equal(got, []byte{1, 2, 3}) {
		t.Errorf("restored dirty bytes written back as %v", got)
	}
	if got := m2.cpuRead(engine.DomainVRAM, 0x4000, 4); !slices.Equal(got, []byte{0, 0, 0, 0}) {
		t.Errorf("a clean line was written back: %v", got)
	}
}

func TestRestoreLinesRefusals(t *testing.T) {
	ok := Line{Domain: engine.DomainVRAM, Addr: 0x80}
	sameSet := func(n int) []Line { // lines of one set of a 16-line (one-set) cache
		var out []Line
		for i := range n {
			out = append(out, Line{Domain: engine.DomainVRAM, Addr: uint64(i) * LineBytes})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		lines []Line
	}{
		{"misaligned", []Line{{Domain: engine.DomainVRAM, Addr: 0x81}}},
		{"domain", []Line{{Domain: engine.NumDomains, Addr: 0}}},
		{"twice", []Line{ok, ok}},
		{"more than the ways", sameSet(MaxWays + 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewSize(newMem(1<<16, 1<<16), 16, nil)
			if err := c.RestoreLines(tc.lines); !errors.Is(err, ErrBadLines) {
				t.Fatalf("%v, want ErrBadLines", err)
			}
			if c.Stats().Lines != 0 {
				t.Error("a refused restore left lines")
			}
		})
	}
	c := NewSize(newMem(1<<16, 1<<16), 16, nil)
	_ = c.Write(1, sys(0), 0, []byte{1})
	if err := c.RestoreLines([]Line{ok}); !errors.Is(err, ErrBadLines) {
		t.Errorf("restore into a cache with lines: %v", err)
	}
}
