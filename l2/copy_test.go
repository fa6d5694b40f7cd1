package l2

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"vgpu/engine"
)

// directMem is memBacking with a direct copy path (l2.DirectCopier); refuse makes it decline.
type directMem struct {
	*memBacking
	refuse bool
	copies int
}

func (m *directMem) CopyPhys(dst, src engine.PhysAddr, n uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refuse {
		return fmt.Errorf("test: declined: %w", ErrNotDirect)
	}
	s, err1 := m.span(src.Domain, src.Addr, int(n))
	d, err2 := m.span(dst.Domain, dst.Addr, int(n))
	if err1 != nil || err2 != nil {
		return ErrNotDirect
	}
	copy(d, s)
	m.copies++
	return nil
}

func TestCopyUncached(t *testing.T) {
	const size = 1 << 20
	tests := []struct {
		name   string
		setup  func(c *Cache, m *directMem)
		dst    engine.PhysAddr
		src    engine.PhysAddr
		n      uint64
		direct bool
	}{
		{name: "empty-cache", dst: vram(0x1000), src: sys(0x2000), n: 256 << 10, direct: true},
		{name: "lines-elsewhere", setup: func(c *Cache, m *directMem) {
			c.Write(0, sys(0x90000), 0, []byte{1})
			c.Read(0, vram(0x80000), 0, make([]byte, 4))
			c.Read(0, sys(0x1000), 0, make([]byte, 4)) // same address, other domain
		}, dst: vram(0x1000), src: sys(0x2000), n: 64 << 10, direct: true},
		{name: "line-in-same-area-outside-range", setup: func(c *Cache, m *directMem) {
			c.Read(0, sys(0x2000-LineBytes), 0, make([]byte, 4))
		}, dst: vram(0x1000), src: sys(0x2000), n: 4096, direct: true},
		{name: "dirty-line-in-source", setup: func(c *Cache, m *directMem) {
			c.Write(3, sys(0x2f00), 0, []byte{0xde, 0xad})
		}, dst: vram(0x1000), src: sys(0x2000), n: 8192},
		{name: "clean-line-in-destination", setup: func(c *Cache, m *directMem) {
			c.Read(0, vram(0x1080), 0, make([]byte, 4))
		}, dst: vram(0x1000), src: sys(0x2000), n: 4096},
		{name: "dirty-line-last-byte", setup: func(c *Cache, m *directMem) {
			c.Write(3, vram(0x1000+4095), 0, []byte{7})
		}, dst: vram(0x1000), src: sys(0x2000), n: 4096},
		{name: "backing-declines", setup: func(c *Cache, m *directMem) { m.refuse = true },
			dst: vram(0x1000), src: sys(0x2000), n: 4096},
		{name: "out-of-range", dst: vram(size - 16), src: sys(0), n: 32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &directMem{memBacking: newMem(size, size)}
			for d := range engine.NumDomains {
				for i := range m.mem[d] {
					m.mem[d][i] = byte(i*7) ^ byte(d)
				}
			}
			c := New(m, nil)
			if tc.setup != nil {
				tc.setup(c, m)
			}
			err := c.CopyUncached(tc.dst, tc.src, tc.n)
			if tc.direct {
				if err != nil || m.copies != 1 {
					t.Fatalf("err %v, copies %d: want one direct copy", err, m.copies)
				}
			} else if !errors.Is(err, ErrNotDirect) || m.copies != 0 {
				t.Fatalf("err %v, copies %d: want ErrNotDirect and nothing copied", err, m.copies)
			}
			if !tc.direct {
				// The fallback the MMU takes: uncached read, then uncached write.
				buf := make([]byte, tc.n)
				if err := c.ReadUncached(tc.src, buf); err != nil {
					return // the slow path reports it
				}
				if err := c.WriteUncached(tc.dst, buf); err != nil {
					return
				}
			}
			// Whatever the path, uncached and cached reads of the destination see the source
			// as the GPU sees it (dirty bytes included).
			want := make([]byte, tc.n)
			c.ReadUncached(tc.src, want)
			got := make([]byte, tc.n)
			c.ReadUncached(tc.dst, got)
			if !bytes.Equal(got, want) {
				t.Fatal("destination (uncached view) differs from source")
			}
			c.Read(0, tc.dst, 0, got)
			if !bytes.Equal(got, want) {
				t.Fatal("destination (cached view) differs from source")
			}
		})
	}
}

func TestCopyUncachedNoDirectBacking(t *testing.T) {
	c := New(newMem(4096, 4096), nil)
	if err := c.CopyUncached(vram(0), sys(0), 16); !errors.Is(err, ErrNotDirect) {
		t.Fatalf("err %v, want ErrNotDirect", err)
	}
	if err := c.CopyUncached(vram(0), engine.PhysAddr{Domain: 9}, 16); !errors.Is(err, ErrDomain) {
		t.Fatalf("err %v, want ErrDomain", err)
	}
	if err := c.CopyUncached(vram(0), sys(0), 0); err != nil {
		t.Fatalf("empty copy: %v", err)
	}
}

// TestAreaCounts: the per-area line counts follow fills, evictions, drops and Reset.
func TestAreaCounts(t *testing.T) {
	m := &directMem{memBacking: newMem(1<<20, 1<<20)}
	c := NewSize(m, 4, nil)
	check := func() {
		t.Helper()
		if err := c.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		c.Write(0, sys(uint64(i)*40000), 0, []byte{1})
		check()
	}
	c.Apply(OpInvalidate, &Range{Domain: engine.DomainSystem, Addr: 0, Size: 1 << 20})
	check()
	c.Read(0, vram(0), 0, make([]byte, 4))
	c.Apply(OpDiscard, nil)
	check()
	c.Read(0, vram(0), 0, make([]byte, 4))
	c.Reset()
	check()
}
