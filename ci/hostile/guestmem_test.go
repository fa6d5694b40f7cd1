package hostile

import (
	"bytes"
	"fmt"
	"math"

	"vgpu/vfiouser/vfiousertest"
)

// Guest memory layout: DMA-mapped areas at IOVAs with unmapped IOVA space around them, laid
// out in one memfd with an unmapped guard area before, between and after them.
const (
	guardSize = 64 << 10

	sysIOVA   = 0x1_0000_0000 // the main area, reached through the GART
	sysSize   = 8 << 20
	smallIOVA = 0x1_0100_0000 // 8 MiB of unmapped IOVA space after sys
	smallSize = 64 << 10
	nofdIOVA  = 0x2_0000_0000 // mapped without an fd: the server must use DMA messages
	nofdSize  = 256 << 10
	topIOVA   = 0xFFFF_FFFF_FFFF_0000 // ends at 2^64
	topSize   = 64 << 10
)

// area is one DMA-mapped window of the guest memory.
type area struct {
	name       string
	iova, size uint64
	nofd       bool
	off        uint64 // where it lies in the memfd
}

func defaultAreas() []area {
	return []area{
		{name: "sys", iova: sysIOVA, size: sysSize},
		{name: "small", iova: smallIOVA, size: smallSize},
		{name: "nofd", iova: nofdIOVA, size: nofdSize, nofd: true},
		{name: "top", iova: topIOVA, size: topSize},
	}
}

// span is a byte range of the memfd.
type span struct{ off, n uint64 }

// guestMem is guarded guest memory. want is what every byte should hold: the pattern the
// memory was filled with, plus what the client itself wrote (set). allowed lists what the
// current attack may change.
type guestMem struct {
	g       *vfiousertest.GuestMemory
	b       []byte
	areas   []area
	guards  []span
	want    []byte
	allowed []span
}

// canary is the guard pattern and fill the area pattern, both functions of the memfd offset,
// so a write of any constant, or a copy from elsewhere in the memfd, shows.
func canary(o uint64) byte { return byte((o*0x9E3779B97F4A7C15)>>56) ^ 0x5A }
func fill(o uint64) byte   { return byte((o*0xC2B2AE3D27D4EB4F)>>48) ^ 0xC3 }

// newGuestMem makes guarded memory for areas; zero leaves the areas zero-filled (what a new
// VM's RAM looks like) instead of patterned. Guards always hold the canary.
func newGuestMem(areas []area, zero bool) (*guestMem, error) {
	total := uint64(guardSize)
	for i := range areas {
		areas[i].off = total
		total += areas[i].size + guardSize
	}
	g, err := vfiousertest.NewGuestMemory(int(total))
	if err != nil {
		return nil, err
	}
	m := &guestMem{g: g, b: g.Bytes(), areas: areas}
	prev := uint64(0)
	for _, a := range areas {
		m.guards = append(m.guards, span{prev, a.off - prev})
		prev = a.off + a.size
	}
	m.guards = append(m.guards, span{prev, total - prev})
	for _, s := range m.guards {
		for o := s.off; o < s.off+s.n; o++ {
			m.b[o] = canary(o)
		}
	}
	if !zero {
		for _, a := range areas {
			for o := a.off; o < a.off+a.size; o++ {
				m.b[o] = fill(o)
			}
		}
	}
	m.want = bytes.Clone(m.b)
	return m, nil
}

func (m *guestMem) close() { m.g.Close() }

// mapAll DMA_MAPs every area.
func (m *guestMem) mapAll(c *vfiousertest.Client) error {
	for _, a := range m.areas {
		if err := m.mapArea(c, a.name); err != nil {
			return err
		}
	}
	return nil
}

func (m *guestMem) mapArea(c *vfiousertest.Client, name string) error {
	a := m.area(name)
	if err := c.DMAMap(a.iova, m.g, a.off, a.size, vfiousertest.MapOptions{NoFD: a.nofd}); err != nil {
		return fmt.Errorf("DMA_MAP %s at %#x: %w", a.name, a.iova, err)
	}
	return nil
}

func (m *guestMem) area(name string) *area {
	for i := range m.areas {
		if m.areas[i].name == name {
			return &m.areas[i]
		}
	}
	panic("no guest memory area " + name)
}

// offset returns where IOVA range [iova, iova+n) lies in the memfd, when it is inside one area.
func (m *guestMem) offset(iova, n uint64) (uint64, bool) {
	for _, a := range m.areas {
		if iova >= a.iova && iova-a.iova < a.size && n <= a.size-(iova-a.iova) {
			return a.off + (iova - a.iova), true
		}
	}
	return 0, false
}

// at returns the live bytes of [iova, iova+n), which must be inside one area.
func (m *guestMem) at(iova, n uint64) []byte {
	o, ok := m.offset(iova, n)
	if !ok {
		panic(fmt.Sprintf("IOVA range %#x+%#x is not inside one area", iova, n))
	}
	return m.b[o : o+n]
}

// set writes p at iova as the client (the guest's CPU) does: it becomes what must be there.
func (m *guestMem) set(iova uint64, p []byte) {
	copy(m.at(iova, uint64(len(p))), p)
	o, _ := m.offset(iova, uint64(len(p)))
	copy(m.want[o:], p)
}

// allow lets the current attack change [iova, iova+n) (clipped to the areas it overlaps; a
// range past 2^64 is cut there).
func (m *guestMem) allow(iova, n uint64) {
	if n == 0 {
		return
	}
	last := iova + n - 1
	if last < iova {
		last = math.MaxUint64
	}
	for _, a := range m.areas {
		lo, hi := max(iova, a.iova), min(last, a.iova+a.size-1)
		if lo <= hi {
			m.allowed = append(m.allowed, span{a.off + (lo - a.iova), hi - lo + 1})
		}
	}
}

// allowArea lets the attack change a whole area.
func (m *guestMem) allowArea(name string) {
	a := m.area(name)
	m.allowed = append(m.allowed, span{a.off, a.size})
}

// accept takes the memory as it is now as what should be there (after a check) and forgets
// what was allowed.
func (m *guestMem) accept() {
	copy(m.want, m.b)
	m.allowed = nil
}

// describe names a memfd offset: an area's IOVA, or a guard.
func (m *guestMem) describe(o uint64) string {
	for _, a := range m.areas {
		if o >= a.off && o < a.off+a.size {
			return fmt.Sprintf("%s IOVA %#x", a.name, a.iova+(o-a.off))
		}
	}
	for i, g := range m.guards {
		if o >= g.off && o < g.off+g.n {
			where := "before the first area"
			if i > 0 {
				where = "after " + m.areas[i-1].name
			}
			return fmt.Sprintf("guard %s, +%#x", where, o-g.off)
		}
	}
	return fmt.Sprintf("memfd offset %#x", o)
}

// diffRun is a run of differing bytes.
type diffRun struct {
	off, n   uint64
	got, was []byte // at most 16 bytes of each
}

// diffs compares got with want over [lo, hi), skipping the skip spans, and returns the first
// limit differing runs and the total number of differing bytes.
func diffs(got, want []byte, lo, hi uint64, skip []span, limit int) (runs []diffRun, total uint64) {
	const chunk = 4096
	skipped := func(o uint64) bool {
		for _, s := range skip {
			if o >= s.off && o-s.off < s.n {
				return true
			}
		}
		return false
	}
	for c := lo; c < hi; c += chunk {
		e := min(c+chunk, hi)
		if bytes.Equal(got[c:e], want[c:e]) {
			continue
		}
		for o := c; o < e; o++ {
			if got[o] == want[o] || skipped(o) {
				continue
			}
			total++
			if n := len(runs); n > 0 && runs[n-1].off+runs[n-1].n == o {
				r := &runs[n-1]
				r.n++
				if len(r.got) < 16 {
					r.got, r.was = append(r.got, got[o]), append(r.was, want[o])
				}
				continue
			}
			if len(runs) < limit {
				runs = append(runs, diffRun{off: o, n: 1, got: []byte{got[o]}, was: []byte{want[o]}})
			}
		}
	}
	return runs, total
}

func (m *guestMem) report(what string, runs []diffRun, total uint64) string {
	s := fmt.Sprintf("%s: %d bytes changed", what, total)
	for _, r := range runs {
		s += fmt.Sprintf("\n    %d bytes at %s: % x (was % x)", r.n, m.describe(r.off), r.got, r.was)
	}
	return s
}

// check returns what is wrong with the memory now: guard bytes that are not the canary, and
// area bytes the attack did not target that are not what the client left there.
func (m *guestMem) check() []string {
	var out []string
	for _, g := range m.guards {
		if runs, total := diffs(m.b, m.want, g.off, g.off+g.n, nil, 4); total > 0 {
			out = append(out, m.report("canary overwritten (a write to unmapped memory)", runs, total))
		}
	}
	for _, a := range m.areas {
		if runs, total := diffs(m.b, m.want, a.off, a.off+a.size, m.allowed, 4); total > 0 {
			out = append(out, m.report("untargeted guest memory written in area "+a.name, runs, total))
		}
	}
	return out
}

// snapshot copies the whole memfd, guards included.
func (m *guestMem) snapshot() []byte { return bytes.Clone(m.b) }

// changedSince reports every byte (guards and areas) that differs from snap.
func (m *guestMem) changedSince(snap []byte, what string) []string {
	if runs, total := diffs(m.b, snap, 0, uint64(len(m.b)), nil, 6); total > 0 {
		return []string{m.report(what, runs, total)}
	}
	return nil
}
