package l2

import (
	"errors"
	"math"

	"vgpu/engine"
)

// mayHold reports whether a line (in any state) may overlap [addr, addr+n) of d (n > 0, no
// wrap): false means certainly none, from the area stripes alone.
func (c *Cache) mayHold(d engine.Domain, addr, n uint64) bool {
	first, last := addr>>areaShift, (addr+n-1)>>areaShift
	if last-first >= areaStripes {
		return c.anyStripe()
	}
	for a := first; ; a++ {
		if c.areas[stripeOf(d, a)].Load() != 0 {
			return true
		}
		if a == last {
			return false
		}
	}
}

func (c *Cache) anyStripe() bool {
	for i := range c.areas {
		if c.areas[i].Load() != 0 {
			return true
		}
	}
	return false
}

// eachLineIn calls f, in address order, with the key of every line of [addr, addr+n) of d
// (n > 0, no wrap) whose area stripe holds lines, until f returns false. It costs a load
// per area, and work only in areas that may hold lines.
func (c *Cache) eachLineIn(d engine.Domain, addr, n uint64, f func(k key) bool) {
	first, last := addr&^lineMask, (addr+n-1)&^lineMask
	for a := first >> areaShift; a <= last>>areaShift; a++ {
		if c.areas[stripeOf(d, a)].Load() != 0 {
			lo, hi := max(first, a<<areaShift), min(last, (a+1)<<areaShift-LineBytes)
			for l := lo; ; l += LineBytes {
				if !f(key{d, l}) {
					return
				}
				if l >= hi {
					break
				}
			}
		}
		if a == math.MaxUint64>>areaShift {
			return
		}
	}
}

// markWriting adds delta to the in-progress uncached write count of every area stripe of
// [addr, addr+n) of d (n > 0, no wrap).
func (c *Cache) markWriting(d engine.Domain, addr, n uint64, delta int32) {
	first, last := addr>>areaShift, (addr+n-1)>>areaShift
	if last-first >= areaStripes {
		for i := range c.writing {
			c.writing[i].Add(delta)
		}
		return
	}
	for a := first; ; a++ {
		c.writing[stripeOf(d, a)].Add(delta)
		if a == last {
			return
		}
	}
}

// own takes ownership of the lines of [addr, addr+n) (only the dirty ones if dirtyOnly), in
// address order, waiting for busy ones. Owning lines in address order, and never waiting
// while owning a line above the one waited for, keeps owners from waiting on each other in a
// cycle.
func (c *Cache) own(d engine.Domain, addr, n uint64, dirtyOnly bool) []*line {
	var own []*line
	c.eachLineIn(d, addr, n, func(k key) bool {
		s := c.setOf(k)
		s.mu.Lock()
		for {
			l := s.find(k)
			if l == nil || dirtyOnly && !l.isDirty() {
				break
			}
			if l.busy {
				s.mu.wait()
				continue
			}
			l.busy = true
			own = append(own, l)
			break
		}
		s.mu.Unlock()
		return true
	})
	return own
}

func (c *Cache) releaseAll(own []*line) {
	for _, l := range own {
		s := c.setOf(l.key)
		s.mu.Lock()
		s.release(l)
		s.mu.Unlock()
	}
}

// overlap is the part of line l that [addr, addr+n) covers: off in the line, pos in the
// access, m bytes.
func overlap(l key, addr, n uint64) (off, pos, m uint64) {
	lo, hi := max(addr, l.addr), min(addr+n, l.addr+LineBytes)
	return lo - l.addr, lo - addr, hi - lo
}

// ReadUncached reads memory without allocating a line (MTYPE_UC pages, BYPASS cache policy).
// The GPU stays coherent with itself: bytes dirty in a resident line are returned from the
// line, every other byte from memory (so a stale clean line is not consulted). The dirty lines
// of the range are owned across the memory read, so none is written back meanwhile.
func (c *Cache) ReadUncached(pa engine.PhysAddr, p []byte) error {
	if err := checkAccess(pa, len(p)); err != nil || len(p) == 0 {
		return err
	}
	n := uint64(len(p))
	maybe := c.mayHold(pa.Domain, pa.Addr, n)
	var own []*line
	if maybe {
		own = c.own(pa.Domain, pa.Addr, n, true)
	}
	err := c.readDirect(pa.Domain, pa.Addr, p)
	if errors.Is(err, ErrNotDirect) {
		// Memory the cache never holds: read it with no line owned (it may wait), then merge
		// dirty bytes of lines that may still be resident from before (the memory behind them
		// changed; their write-back would fail anyway).
		c.releaseAll(own)
		if err := c.moveSlow(pa.Domain, pa.Addr, p, false); err != nil {
			return err
		}
		if maybe || c.mayHold(pa.Domain, pa.Addr, n) {
			c.eachLineIn(pa.Domain, pa.Addr, n, func(k key) bool {
				s := c.setOf(k)
				s.mu.Lock()
				if l := s.find(k); l != nil {
					mergeDirty(p, l, pa.Addr)
				}
				s.mu.Unlock()
				return true
			})
		}
		return nil
	}
	if err == nil {
		for _, l := range own {
			mergeDirty(p, l, pa.Addr) // owned: its bytes cannot change
		}
	}
	c.releaseAll(own)
	return err
}

// mergeDirty copies the dirty bytes of l that lie in p (at physical address addr) into p.
func mergeDirty(p []byte, l *line, addr uint64) {
	if !l.isDirty() {
		return
	}
	off, pos, m := overlap(l.key, addr, uint64(len(p)))
	for i := range m {
		if l.dirtyByte(off + i) {
			p[pos+i] = l.data[off+i]
		}
	}
}

// WriteUncached writes memory without allocating a line. A resident line covering the bytes is
// updated too (and those bytes are no longer dirty: memory has them), so later cached reads by
// any queue see the write, as on hardware where the L2 is the GPU's point of coherence. The
// resident lines of the range are owned across the memory write, so none is written back or
// changed meanwhile; a line filled while the write ran (it may hold older bytes) is written
// back if an engine dirtied it, and dropped.
func (c *Cache) WriteUncached(pa engine.PhysAddr, p []byte) error {
	if err := checkAccess(pa, len(p)); err != nil || len(p) == 0 {
		return err
	}
	n := uint64(len(p))
	c.markWriting(pa.Domain, pa.Addr, n, 1)
	defer c.markWriting(pa.Domain, pa.Addr, n, -1)
	maybe := c.mayHold(pa.Domain, pa.Addr, n)
	var own []*line
	if maybe {
		own = c.own(pa.Domain, pa.Addr, n, false)
	}
	err := c.writeDirect(pa.Domain, pa.Addr, p)
	if errors.Is(err, ErrNotDirect) {
		// Memory the cache never holds: write it with no line owned (it may wait); lines
		// still resident from before are dropped below (their memory was replaced).
		c.releaseAll(own)
		own = nil
		err = c.moveSlow(pa.Domain, pa.Addr, p, true)
	}
	if err != nil {
		c.releaseAll(own)
		return err
	}
	var done []key // the owned lines' keys: once released, a line may be reused for another
	for _, l := range own {
		s := c.setOf(l.key)
		s.mu.Lock()
		off, pos, m := overlap(l.key, pa.Addr, n)
		copy(l.data[off:off+m], p[pos:pos+m])
		c.clearDirty(l, off, m)
		done = append(done, l.key)
		s.release(l)
		s.mu.Unlock()
	}
	if maybe || c.mayHold(pa.Domain, pa.Addr, n) {
		c.settle(pa.Domain, pa.Addr, n, done)
	}
	return nil
}

// settle writes back (if dirty) and drops the lines of [addr, addr+n) that are not in done
// (sorted by address): lines that appeared while memory there was written behind the cache,
// and that may hold the older bytes. Dropping a line after writing it back is what an
// eviction does, so it is always coherent.
func (c *Cache) settle(d engine.Domain, addr, n uint64, done []key) {
	c.eachLineIn(d, addr, n, func(k key) bool {
		if len(done) > 0 && done[0] == k {
			done = done[1:]
			return true
		}
		s := c.setOf(k)
		s.mu.Lock()
		if l := s.findIdle(k); l != nil {
			if l.isDirty() {
				_ = c.writeBackHeld(s, l) // counted and logged inside
			}
			c.remove(s, l, true)
		}
		s.mu.Unlock()
		return true
	})
}

// anyLineIn reports whether a line (in any state) overlaps [addr, addr+n) of d.
func (c *Cache) anyLineIn(d engine.Domain, addr, n uint64) bool {
	if !c.mayHold(d, addr, n) {
		return false
	}
	found := false
	c.eachLineIn(d, addr, n, func(k key) bool {
		s := c.setOf(k)
		s.mu.Lock()
		found = s.find(k) != nil
		s.mu.Unlock()
		return !found
	})
	return found
}

// CopyUncached copies n bytes of memory from src to dst as ReadUncached followed by
// WriteUncached would, but with one direct memory copy: it does so only when the Backing is a
// DirectCopier and no line overlaps either range (then there is no dirty byte to read from the
// cache and no cached copy to update). Otherwise, or when the Backing cannot copy directly, it
// returns an error wrapping ErrNotDirect and nothing moved. No lock is held across the copy; a
// line of dst filled while it ran is written back (if dirty) and dropped after it, as by
// WriteUncached.
func (c *Cache) CopyUncached(dst, src engine.PhysAddr, n uint64) error {
	if n == 0 {
		return nil
	}
	if n > math.MaxInt {
		return ErrNotDirect
	}
	if err := checkAccess(src, int(n)); err != nil {
		return err
	}
	if err := checkAccess(dst, int(n)); err != nil {
		return err
	}
	if c.copier == nil {
		return ErrNotDirect
	}
	c.markWriting(dst.Domain, dst.Addr, n, 1)
	defer c.markWriting(dst.Domain, dst.Addr, n, -1)
	if c.anyLineIn(src.Domain, src.Addr, n) || c.anyLineIn(dst.Domain, dst.Addr, n) {
		return ErrNotDirect
	}
	if err := c.copier.CopyPhys(dst, src, n); err != nil {
		return err
	}
	if c.mayHold(dst.Domain, dst.Addr, n) {
		c.settle(dst.Domain, dst.Addr, n, nil)
	}
	return nil
}
