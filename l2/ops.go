package l2

import (
	"math"
	"slices"
	"strings"
	"vgpu/engine"
)

// Op is a set of cache maintenance actions, as packets request them (RELEASE_MEM and
// ACQUIRE_MEM GCR_GL2_WB / GCR_GL2_INV / GCR_GL2_DISCARD, L2_CONTROL). Apply performs the set
// bits in a fixed order: write-back, then discard, then invalidate.
type Op uint8

const (
	// OpWriteBack writes dirty lines to memory; they stay resident, clean (GL2_WB).
	OpWriteBack Op = 1 << iota
	// OpInvalidate drops lines, writing dirty ones back first (GL2_INV).
	OpInvalidate
	// OpDiscard drops lines without writing dirty data back (GL2_DISCARD).
	OpDiscard

	// OpWriteBackInvalidate is the usual acquire/release pair: write back, then drop.
	OpWriteBackInvalidate = OpWriteBack | OpInvalidate

	opAll = OpWriteBack | OpInvalidate | OpDiscard
)

// OpFor returns the actions of an engine's cache operation; false for a value that names
// none.
func OpFor(op engine.CacheOp) (Op, bool) {
	switch op {
	case engine.CacheWB:
		return OpWriteBack, true
	case engine.CacheInv:
		return OpInvalidate, true
	case engine.CacheWBInv:
		return OpWriteBackInvalidate, true
	case engine.CacheDiscard:
		return OpDiscard, true
	}
	return 0, false
}

func (o Op) String() string {
	if o == 0 {
		return "none"
	}
	var parts []string
	if o&OpWriteBack != 0 {
		parts = append(parts, "WB")
	}
	if o&OpDiscard != 0 {
		parts = append(parts, "DISCARD")
	}
	if o&OpInvalidate != 0 {
		parts = append(parts, "INV")
	}
	if o&^opAll != 0 {
		parts = append(parts, "?")
	}
	return strings.Join(parts, "+")
}

// WriteBack writes every dirty line in r (nil: the whole cache) to memory; the lines stay
// resident and clean. A line whose write-back fails is dropped (see Apply).
func (c *Cache) WriteBack(r *Range) { _ = c.Apply(OpWriteBack, r) }

// Invalidate drops every line in r (nil: the whole cache). Dirty lines are written back first,
// so invalidating never loses data silently; use Discard to drop dirty data on purpose. This
// is what makes data the CPU wrote visible to later engine reads.
func (c *Cache) Invalidate(r *Range) { _ = c.Apply(OpInvalidate, r) }

// Discard drops every line in r (nil: the whole cache) without writing dirty data back: the
// engines' unwritten data there is lost (counted in Stats.Discards).
func (c *Cache) Discard(r *Range) { _ = c.Apply(OpDiscard, r) }

// Apply performs op on every line the range touches (nil: the whole cache): write-back, then
// discard, then invalidate (which writes back what is still dirty). It returns the first
// write-back failure as a *WriteBackError; a line that failed to write back is dropped, its data
// lost, because the memory it belongs to is gone (unmapped, Bus Master off). Every failure is
// also counted and logged. Lines are handled one at a time, in address order, each owned only
// across its own write-back; a line an engine fills while Apply runs may or may not be
// included, as on hardware.
func (c *Cache) Apply(op Op, r *Range) error {
	if op&opAll == 0 {
		return nil
	}
	var first error
	for _, k := range c.collect(r) {
		first = cmpErr(first, c.applyLine(op, k))
	}
	return first
}

func (c *Cache) applyLine(op Op, k key) error {
	s := c.setOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.findIdle(k)
	if l == nil {
		return nil
	}
	if op&OpWriteBack != 0 && l.isDirty() {
		if err := c.writeBackHeld(s, l); err != nil {
			c.drop(s, l)
			return err
		}
	}
	if op&OpDiscard != 0 {
		c.drop(s, l)
		return nil
	}
	var err error
	if op&OpInvalidate != 0 {
		if l.isDirty() {
			err = c.writeBackHeld(s, l)
		}
		c.drop(s, l)
	}
	return err
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// collect returns the keys of the lines r touches, in address order (so the Backing sees the
// same sequence of writes for the same cache contents, whichever way they were found). A range
// whose areas may hold fewer lines than the cache has is looked up line by line in those
// areas; a larger one, or the whole cache, is found by scanning the sets.
func (c *Cache) collect(r *Range) []key {
	var out []key
	first, lastLine := uint64(0), uint64(math.MaxUint64)
	if r != nil {
		if r.Size == 0 || r.Domain >= engine.NumDomains {
			return nil
		}
		last := r.Addr + min(r.Size-1, math.MaxUint64-r.Addr) // the last byte that exists
		first, lastLine = r.Addr&^lineMask, last&^lineMask
		if last-r.Addr < math.MaxUint64 && c.lookupCheaper(r.Domain, r.Addr, last-r.Addr+1) {
			c.eachLineIn(r.Domain, r.Addr, last-r.Addr+1, func(k key) bool {
				s := c.setOf(k)
				s.mu.Lock()
				if s.find(k) != nil {
					out = append(out, k)
				}
				s.mu.Unlock()
				return true
			})
			return out
		}
	}
	for i := range c.sets {
		s := &c.sets[i]
		if s.held.Load() == 0 {
			continue // empty now; a line filled meanwhile may or may not be included anyway
		}
		s.mu.Lock()
		for _, l := range s.lines {
			if r == nil || l.key.domain == r.Domain && l.key.addr >= first && l.key.addr <= lastLine {
				out = append(out, l.key)
			}
		}
		s.mu.Unlock()
	}
	slices.SortFunc(out, cmpKey)
	return out
}

// lookupCheaper reports whether looking up the lines of [addr, addr+n) in the areas that may
// hold lines costs less than scanning every line of the cache.
func (c *Cache) lookupCheaper(d engine.Domain, addr, n uint64) bool {
	first, last := addr>>areaShift, (addr+n-1)>>areaShift
	if last-first >= areaStripes {
		return false
	}
	budget := uint64(c.Capacity()) + uint64(len(c.sets))
	work := uint64(0)
	for a := first; ; a++ {
		if c.areas[stripeOf(d, a)].Load() != 0 {
			if work += 1 << (areaShift - lineShift); work > budget {
				return false
			}
		}
		if a == last {
			return true
		}
	}
}

// FenceCheck is called by the command processor before it writes a fence at GPU address va for
// queue slot. In strict mode, if lines written by that queue are still dirty (its data would
// not be in memory when the CPU sees the fence), it records an L2_EVENT_DIRTY_FENCE: counted,
// kept as the last event and logged. It changes nothing in the cache.
func (c *Cache) FenceCheck(slot int, va uint64) {
	if !c.strict.Load() {
		return
	}
	if n := c.slotDirt[slotIndex(slot)].Load(); n > 0 {
		c.events.dirtyFence(slot, va, int(n))
	}
}

// DirtyLinesOf returns how many resident dirty lines hold data written by slot.
func (c *Cache) DirtyLinesOf(slot int) int { return int(c.slotDirt[slotIndex(slot)].Load()) }
