package gpummu

import "sync/atomic"

// tlb caches the valid GART entries of one VMID by page number: MaxTLBEntries entries,
// direct-mapped (page p lives in entry p mod MaxTLBEntries, replacing what was there), so it
// never grows with the guest's working set. Lookups take no lock, so engines translating
// at once never wait for each other: each entry is a small sequence lock (seq odd while it
// is written), and a flush makes every entry invalid at once by moving the TLB's generation.
// Fills and flushes are made with the MMU's lock held, one at a time.
type tlb struct {
	gen     atomic.Uint64
	entries atomic.Pointer[[MaxTLBEntries]tlbEntry] // allocated by the first fill
}

type tlbEntry struct {
	seq atomic.Uint64
	tag atomic.Uint64 // page+1; 0: empty
	pte atomic.Uint64
	gen atomic.Uint64 // the TLB's generation when filled
}

// get returns the cached entry of page, if any. Safe without the MMU's lock.
func (t *tlb) get(page uint64) (uint64, bool) {
	es := t.entries.Load()
	if es == nil {
		return 0, false
	}
	e := &es[page%MaxTLBEntries]
	s := e.seq.Load()
	tag, pte, gen := e.tag.Load(), e.pte.Load(), e.gen.Load()
	if s&1 != 0 || e.seq.Load() != s || tag != page+1 || gen != t.gen.Load() {
		return 0, false
	}
	return pte, true
}

// put caches pte for page. Called with the MMU's lock held.
func (t *tlb) put(page, pte uint64) {
	es := t.entries.Load()
	if es == nil {
		es = new([MaxTLBEntries]tlbEntry)
		t.entries.Store(es)
	}
	e := &es[page%MaxTLBEntries]
	e.seq.Add(1)
	e.tag.Store(page + 1)
	e.pte.Store(pte)
	e.gen.Store(t.gen.Load())
	e.seq.Add(1)
}

// flush drops every entry. Called with the MMU's lock held.
func (t *tlb) flush() { t.gen.Add(1) }

// size counts the valid entries.
func (t *tlb) size() int {
	es := t.entries.Load()
	if es == nil {
		return 0
	}
	n, gen := 0, t.gen.Load()
	for i := range es {
		if es[i].tag.Load() != 0 && es[i].gen.Load() == gen {
			n++
		}
	}
	return n
}
