package l2

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"vgpu/engine"
)

// Line is one resident line as a snapshot keeps it: its physical address, its bytes, which of
// them are dirty (bit i of Dirty: byte i, not yet written back) and which queue slots wrote
// them (bit s: slot s; bit 63: every other writer), as the strict mode's fence check needs.
type Line struct {
	Domain  engine.Domain
	Addr    uint64 // line-aligned
	Dirty   [2]uint64
	Writers uint64
	Data    [LineBytes]byte
}

// ErrBadLines: lines a snapshot gives that this cache could not hold (misaligned, an unknown
// domain, duplicated, more than a set's ways, or a cache that is not empty).
var ErrBadLines = errors.New("l2: invalid saved lines")

// SaveLines returns every resident line, each set's in least-recently-used-first order (so a
// restore keeps the eviction order). It waits for lines being filled or written back (each
// within one memory copy), set by set; run it with the engines stopped so that the result is
// one moment's contents.
func (c *Cache) SaveLines() []Line {
	var out []Line
	for i := range c.sets {
		s := &c.sets[i]
		if s.held.Load() == 0 {
			continue
		}
		s.lockIdle()
		ls := slices.Clone(s.lines)
		slices.SortFunc(ls, func(a, b *line) int { return cmpUint(a.used, b.used) })
		for _, l := range ls {
			out = append(out, Line{Domain: l.key.domain, Addr: l.key.addr, Dirty: l.dirty, Writers: l.writers, Data: l.data})
		}
		s.mu.Unlock()
	}
	return out
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// RestoreLines fills an empty cache with lines (as SaveLines returned them: within a set the
// least recently used first). Every line is checked first; a bad one restores nothing. A clean
// line's writers are ignored (only dirty lines count against the slots that wrote them).
func (c *Cache) RestoreLines(lines []Line) error {
	if c.nLines.Load() != 0 {
		return fmt.Errorf("%w: the cache already holds %d lines", ErrBadLines, c.nLines.Load())
	}
	perSet := make(map[*set]int)
	seen := make(map[key]bool, len(lines))
	for i, l := range lines {
		k := key{l.Domain, l.Addr}
		switch {
		case l.Domain >= engine.NumDomains:
			return fmt.Errorf("%w: line %d: domain %d", ErrBadLines, i, l.Domain)
		case l.Addr%LineBytes != 0:
			return fmt.Errorf("%w: line %d: address %#x not line-aligned", ErrBadLines, i, l.Addr)
		case seen[k]:
			return fmt.Errorf("%w: line %d: %v %#x twice", ErrBadLines, i, l.Domain, l.Addr)
		}
		seen[k] = true
		s := c.setOf(k)
		if perSet[s]++; perSet[s] > c.ways {
			return fmt.Errorf("%w: more than %d lines in one set", ErrBadLines, c.ways)
		}
	}
	for _, sl := range lines {
		k := key{sl.Domain, sl.Addr}
		s := c.setOf(k)
		s.mu.Lock()
		l := c.insert(s, k)
		l.data = sl.Data
		c.nLines.Add(1)
		s.touch(l)
		if sl.Dirty != [2]uint64{} {
			l.dirty = sl.Dirty
			c.nDirty.Add(1)
			l.writers = sl.Writers
			for w := l.writers; w != 0; w &= w - 1 {
				c.slotDirt[bits.TrailingZeros64(w)].Add(1)
			}
		}
		s.release(l)
		s.mu.Unlock()
	}
	return nil
}
