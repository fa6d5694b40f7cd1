package gpuvm

import (
	"math/bits"
	"sync"
)

// vmContext is one VMID's translation state: its TLB and PDE cache, which stay as they are —
// stale if the tables changed — until an invalidation drops them, and the generation that
// lets a walk which raced an invalidation know not to insert what it found.
type vmContext struct {
	mu   sync.Mutex // tlb, pdes, gen; held only for map operations, never across memory
	gen  uint64
	tlb  tlb
	pdes pdeCache
}

// invMask selects what an invalidation drops.
type invMask uint8

const (
	invPTEs   invMask = 1 << iota // leaf translations (TLB)
	invPDE0                       // cached PDB0 entries (level 1)
	invPDE1                       // PDB1 (level 2)
	invPDE2                       // PDB2 (level 3)
	inv4KOnly                     // with invPTEs: only single-page translations

	invAll = invPTEs | invPDE0 | invPDE1 | invPDE2
)

func (cx *vmContext) invalidate(m invMask) {
	cx.mu.Lock()
	cx.gen++
	if m&invPTEs != 0 {
		if m&inv4KOnly != 0 {
			cx.tlb.dropShift(pageShift)
		} else {
			cx.tlb.flush()
		}
	}
	for l := 1; l <= 3; l++ {
		if m&(invPDE0<<(l-1)) != 0 {
			cx.pdes.dropLevel(l)
		}
	}
	cx.mu.Unlock()
}

func (cx *vmContext) entries() int {
	cx.mu.Lock()
	defer cx.mu.Unlock()
	return len(cx.tlb.idx)
}

// tlbEntry is a cached translation of an aligned run of 2^shift bytes: a page, a fragment
// (PTE_FRAGMENT) or a huge page (PDE_PTE). Addresses are VAs relative to the context's start.
type tlbEntry struct {
	vbase, pbase uint64
	pte          uint64 // the leaf entry the translation came from
	shift        uint8
	valid        bool
}

func (e *tlbEntry) covers(rel uint64) bool {
	return e.valid && rel-e.vbase < uint64(1)<<e.shift // rel < vbase wraps to a huge value
}

func (e *tlbEntry) pa(rel uint64) uint64 { return e.pbase + (rel - e.vbase) }

func tlbKey(vbase uint64, shift uint8) uint64 { return vbase>>shift<<6 | uint64(shift) }

// tlb is a fixed-capacity translation cache replaced first in, first out. Entries of
// different sizes coexist; a lookup probes each size present (usually one or two).
type tlb struct {
	idx    map[uint64]int32
	e      []tlbEntry
	next   int
	shifts uint64 // bit s: some entry has shift s
	count  [64]uint16
	mru    int32
}

func (t *tlb) lookup(rel uint64) (tlbEntry, bool) {
	if t.e == nil {
		return tlbEntry{}, false
	}
	if e := &t.e[t.mru]; e.covers(rel) {
		return *e, true
	}
	for m := t.shifts; m != 0; m &= m - 1 {
		s := uint8(bits.TrailingZeros64(m))
		if i, ok := t.idx[tlbKey(rel&^(uint64(1)<<s-1), s)]; ok {
			t.mru = i
			return t.e[i], true
		}
	}
	return tlbEntry{}, false
}

func (t *tlb) insert(n tlbEntry) {
	if t.e == nil {
		t.e = make([]tlbEntry, TLBEntries)
		t.idx = make(map[uint64]int32, TLBEntries)
	}
	k := tlbKey(n.vbase, n.shift)
	if i, ok := t.idx[k]; ok {
		t.e[i] = n
		return
	}
	i := int32(t.next)
	t.next = (t.next + 1) % TLBEntries
	t.evict(i)
	t.e[i] = n
	t.idx[k] = i
	t.count[n.shift]++
	t.shifts |= 1 << n.shift
}

func (t *tlb) evict(i int32) {
	old := &t.e[i]
	if !old.valid {
		return
	}
	delete(t.idx, tlbKey(old.vbase, old.shift))
	if t.count[old.shift]--; t.count[old.shift] == 0 {
		t.shifts &^= 1 << old.shift
	}
	old.valid = false
}

func (t *tlb) dropShift(s uint8) {
	for i := range t.e {
		if t.e[i].valid && t.e[i].shift == s {
			t.evict(int32(i))
		}
	}
}

func (t *tlb) flush() {
	if t.e == nil {
		return
	}
	clear(t.e)
	clear(t.idx)
	t.next, t.shifts, t.count, t.mru = 0, 0, [64]uint16{}, 0
}

// pdeCache caches valid page-directory entries (not huge pages: those are TLB entries) by
// level and the VA prefix they map, so a TLB miss can start its walk below the root.
type pdeCache struct {
	idx  map[uint64]int32
	e    []pdeSlot
	next int
}

type pdeSlot struct {
	key, pde uint64
	valid    bool
}

func pdeKey(level int, prefix uint64) uint64 { return prefix<<2 | uint64(level) }

func (c *pdeCache) get(level int, prefix uint64) (uint64, bool) {
	if c.e == nil {
		return 0, false
	}
	i, ok := c.idx[pdeKey(level, prefix)]
	if !ok {
		return 0, false
	}
	return c.e[i].pde, true
}

func (c *pdeCache) put(level int, prefix, pde uint64) {
	if c.e == nil {
		c.e = make([]pdeSlot, PDECacheEntries)
		c.idx = make(map[uint64]int32, PDECacheEntries)
	}
	k := pdeKey(level, prefix)
	if i, ok := c.idx[k]; ok {
		c.e[i].pde = pde
		return
	}
	i := c.next
	c.next = (c.next + 1) % PDECacheEntries
	if c.e[i].valid {
		delete(c.idx, c.e[i].key)
	}
	c.e[i] = pdeSlot{key: k, pde: pde, valid: true}
	c.idx[k] = int32(i)
}

func (c *pdeCache) dropLevel(level int) {
	for i := range c.e {
		if s := &c.e[i]; s.valid && int(s.key&3) == level {
			delete(c.idx, s.key)
			s.valid = false
		}
	}
}
