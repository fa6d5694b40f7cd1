package gpuvm

import (
	"math/bits"
	"sync"
)

// vmContext is one VMID's translation state: its TLB and PDE cache, which stay as they are —
// stale if the tables changed — until an invalidation drops them, and the generation that
// lets a walk which raced an invalidation know not to insert what it found.
type vmContext struct {
	mu  sync.Mutex // everything below; held only for cache operations, never across memory
	gen uint64
	// hits, misses (walks) and pdeHits (walks from a cached PDE) for Stats.
	hits, misses, pdeHits uint64
	tlb                   tlb
	pdes                  pdeCache
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
	return cx.tlb.n
}

// counts returns the context's TLB entries, hits, walks and walks from a cached PDE.
func (cx *vmContext) counts() (entries int, hits, misses, pdeHits uint64) {
	cx.mu.Lock()
	defer cx.mu.Unlock()
	return cx.tlb.n, cx.hits, cx.misses, cx.pdeHits
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

// Both caches are set-associative, as hardware's are: a key hashes to a set of ways entries,
// replaced in turn within the set. Lookups and fills are a few array reads, no allocation.
const (
	ways       = 4
	tlbSets    = TLBEntries / ways
	pdeSets    = PDECacheEntries / ways
	tlbSetBits = 8 // log2(tlbSets)
	pdeSetBits = 6 // log2(pdeSets)
)

var (
	_ [tlbSets - 1<<tlbSetBits]struct{}
	_ [1<<tlbSetBits - tlbSets]struct{}
	_ [pdeSets - 1<<pdeSetBits]struct{}
	_ [1<<pdeSetBits - pdeSets]struct{}
)

func setOf(key uint64, bits uint) int { return int(key * 0x9E3779B97F4A7C15 >> (64 - bits)) }

// tlb is a fixed-capacity translation cache. Entries of different sizes coexist; a lookup
// probes the set of each size present (usually one or two).
type tlb struct {
	e      []tlbEntry // tlbSets × ways, allocated on first fill
	turn   [tlbSets]uint8
	n      int    // valid entries
	shifts uint64 // bit s: some entry has shift s
	count  [64]uint16
	mru    int32
}

func (t *tlb) lookup(rel uint64) (tlbEntry, bool) {
	if t.n == 0 {
		return tlbEntry{}, false
	}
	if e := &t.e[t.mru]; e.covers(rel) {
		return *e, true
	}
	for m := t.shifts; m != 0; m &= m - 1 {
		s := uint8(bits.TrailingZeros64(m))
		vb := rel &^ (uint64(1)<<s - 1)
		base := setOf(tlbKey(vb, s), tlbSetBits) * ways
		for i := base; i < base+ways; i++ {
			if e := &t.e[i]; e.valid && e.shift == s && e.vbase == vb {
				t.mru = int32(i)
				return *e, true
			}
		}
	}
	return tlbEntry{}, false
}

func (t *tlb) insert(n tlbEntry) {
	if t.e == nil {
		t.e = make([]tlbEntry, TLBEntries)
	}
	set := setOf(tlbKey(n.vbase, n.shift), tlbSetBits)
	base := set * ways
	slot := -1
	for i := base; i < base+ways; i++ {
		if e := &t.e[i]; e.valid && e.shift == n.shift && e.vbase == n.vbase {
			*e = n
			return
		}
		if slot < 0 && !t.e[i].valid {
			slot = i
		}
	}
	if slot < 0 {
		slot = base + int(t.turn[set])
		t.turn[set] = (t.turn[set] + 1) % ways
		t.evict(int32(slot))
	}
	t.e[slot] = n
	t.n++
	t.count[n.shift]++
	t.shifts |= 1 << n.shift
}

func (t *tlb) evict(i int32) {
	old := &t.e[i]
	if !old.valid {
		return
	}
	t.n--
	if t.count[old.shift]--; t.count[old.shift] == 0 {
		t.shifts &^= 1 << old.shift
	}
	old.valid = false
}

func (t *tlb) dropShift(s uint8) {
	if t.count[s] == 0 {
		return
	}
	for i := range t.e {
		if t.e[i].valid && t.e[i].shift == s {
			t.evict(int32(i))
		}
	}
}

func (t *tlb) flush() {
	if t.n == 0 {
		return
	}
	clear(t.e)
	t.n, t.shifts, t.count, t.mru, t.turn = 0, 0, [64]uint16{}, 0, [tlbSets]uint8{}
}

// pdeCache caches valid page-directory entries (not huge pages: those are TLB entries) by
// level and the VA prefix they map, so a TLB miss can start its walk below the root.
type pdeCache struct {
	e    []pdeSlot // pdeSets × ways
	turn [pdeSets]uint8
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
	k := pdeKey(level, prefix)
	base := setOf(k, pdeSetBits) * ways
	for i := base; i < base+ways; i++ {
		if s := &c.e[i]; s.valid && s.key == k {
			return s.pde, true
		}
	}
	return 0, false
}

func (c *pdeCache) put(level int, prefix, pde uint64) {
	if c.e == nil {
		c.e = make([]pdeSlot, PDECacheEntries)
	}
	k := pdeKey(level, prefix)
	set := setOf(k, pdeSetBits)
	base := set * ways
	slot := -1
	for i := base; i < base+ways; i++ {
		if s := &c.e[i]; s.valid && s.key == k {
			s.pde = pde
			return
		}
		if slot < 0 && !c.e[i].valid {
			slot = i
		}
	}
	if slot < 0 {
		slot = base + int(c.turn[set])
		c.turn[set] = (c.turn[set] + 1) % ways
	}
	c.e[slot] = pdeSlot{key: k, pde: pde, valid: true}
}

func (c *pdeCache) dropLevel(level int) {
	for i := range c.e {
		if s := &c.e[i]; s.valid && int(s.key&3) == level {
			s.valid = false
		}
	}
}
