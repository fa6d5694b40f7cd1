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
// also counted and logged.
func (c *Cache) Apply(op Op, r *Range) error {
	if op&opAll == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var first error
	for _, l := range c.collect(r) {
		if op&OpWriteBack != 0 && l.isDirty() {
			if err := c.writeBack(l); err != nil {
				first = cmpErr(first, err)
				c.drop(l)
				continue
			}
		}
		if op&OpDiscard != 0 {
			c.drop(l)
			continue
		}
		if op&OpInvalidate != 0 {
			if l.isDirty() {
				if err := c.writeBack(l); err != nil {
					first = cmpErr(first, err)
				}
			}
			c.drop(l)
		}
	}
	return first
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// collect returns the resident lines r touches, in address order (so the Backing sees the
// same sequence of writes for the same cache contents, whichever way they were found). A small
// range is looked up line by line; a large one is found by scanning the resident lines.
// Called with mu held.
func (c *Cache) collect(r *Range) []*line {
	var out []*line
	if r == nil {
		out = make([]*line, 0, len(c.lines))
		for l := c.lru.next; l != &c.lru; l = l.next {
			out = append(out, l)
		}
	} else {
		if r.Size == 0 || r.Domain >= engine.NumDomains || len(c.lines) == 0 {
			return nil
		}
		last := math.MaxUint64 - r.Addr // bytes after Addr that exist
		last = r.Addr + min(r.Size-1, last)
		first, lastLine := r.Addr&^lineMask, last&^lineMask
		if (lastLine-first)/LineBytes < uint64(len(c.lines)) {
			for a := first; ; a += LineBytes {
				if l := c.lines[key{r.Domain, a}]; l != nil {
					out = append(out, l)
				}
				if a == lastLine {
					break
				}
			}
			return out
		}
		for l := c.lru.next; l != &c.lru; l = l.next {
			if l.key.domain == r.Domain && l.key.addr >= first && l.key.addr <= lastLine {
				out = append(out, l)
			}
		}
	}
	slices.SortFunc(out, func(a, b *line) int {
		switch {
		case a.key.less(b.key):
			return -1
		case b.key.less(a.key):
			return 1
		}
		return 0
	})
	return out
}

// FenceCheck is called by the command processor before it writes a fence at GPU address va for
// queue slot. In strict mode, if lines written by that queue are still dirty (its data would
// not be in memory when the CPU sees the fence), it records an L2_EVENT_DIRTY_FENCE: counted,
// kept as the last event and logged. It changes nothing in the cache.
func (c *Cache) FenceCheck(slot int, va uint64) {
	if !c.strict.Load() {
		return
	}
	c.mu.Lock()
	n := c.slotDirty[slotIndex(slot)]
	c.mu.Unlock()
	if n > 0 {
		c.events.dirtyFence(slot, va, n)
	}
}

// DirtyLinesOf returns how many resident dirty lines hold data written by slot.
func (c *Cache) DirtyLinesOf(slot int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slotDirty[slotIndex(slot)]
}
