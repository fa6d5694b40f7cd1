package gpummu

import (
	"encoding/binary"
	"sync"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/l2"
)

// maxPTEBatch bounds the pages of one run (2 MiB) and the GART entries a copy reads from the
// table at once (one 4 KiB read). Runs that long keep large copies single memory copies (Go's
// copy switches to non-temporal stores for large sizes); the batch array is only on the
// stack of a TLB miss.
const maxPTEBatch = PageSize / abi.PTE_BYTES

// maxTLBFillPerRun: a run that read more GART entries than this does not cache them.
const maxTLBFillPerRun = 16

// copyBufBytes is the size of the bounce buffer of the page-by-page copy path.
const copyBufBytes = 64 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufBytes); return &b }}

// tableBufs hold the GART entries readPTEs reads at once. A buffer on readPTEs's stack would
// move to the heap (it is passed to the Backing, an interface): one 4 KiB allocation per TLB
// miss, which a stream of large copies makes on every copy.
var tableBufs = sync.Pool{New: func() any { return new([PageSize]byte) }}

// Copy copies n bytes from GPU address src to GPU address dst, as Read into a buffer followed
// by Write would: the source needs read permission, the destination write permission, and
// faults and refused accesses are reported and latched the same way (bytes before the failing
// one are copied). Both ranges are translated into physically contiguous runs; a pair of runs
// that are both uncached (Bypass or MTYPE_UC) and that no L2 line overlaps is copied with one
// memory copy when the backing memory offers it (l2.DirectCopier); any other run goes through
// the L2 page by page. If anything was written it then calls the OnWrite hook. Overlapping
// ranges give chunk-wise results, as undefined on hardware.
func (m *MMU) Copy(a engine.Access, dst, src, n uint64) error {
	written, err := m.copy(a, dst, src, n)
	if written {
		if f := m.onWrite.Load(); f != nil {
			(*f)()
		}
	}
	return err
}

func (m *MMU) copy(a engine.Access, dst, src, n uint64) (written bool, err error) {
	if m.inVM(a.VMID) {
		return m.copyVM(a, dst, src, n)
	}
	for n > 0 {
		sx, sn, reason := m.translateRun(a, src, n, false)
		if reason != abi.VM_FAULT_NONE {
			return written, m.fault(a, src, false, reason)
		}
		dx, dn, reason := m.translateRun(a, dst, sn, true)
		if reason != abi.VM_FAULT_NONE {
			return written, m.fault(a, dst, true, reason)
		}
		k := dn // <= sn
		if m.copyDirect(a, dx, sx, k) {
			written = true
		} else {
			w, err := m.copySlow(a, dst, src, k)
			written = written || w
			if err != nil {
				return written, err
			}
		}
		dst, src, n = dst+k, src+k, n-k
	}
	return written, nil
}

// copyDirect tries the one-copy path for a pair of translated runs of n bytes.
func (m *MMU) copyDirect(a engine.Access, dx, sx xlat, n uint64) bool {
	if m.cache != nil && (!(a.Bypass || sx.uc) || !(a.Bypass || dx.uc)) {
		return false // a cached side goes through the L2
	}
	for _, x := range [2]xlat{dx, sx} {
		if x.pa.Domain == engine.DomainVRAM && (x.pa.Addr >= m.vramSize || n > m.vramSize-x.pa.Addr) {
			return false // the slow path reports ErrBeyondVRAM for the right page
		}
	}
	var err error
	if m.cache != nil {
		err = m.cache.CopyUncached(dx.pa, sx.pa, n)
	} else if dc, ok := m.b.(l2.DirectCopier); ok {
		err = dc.CopyPhys(dx.pa, sx.pa, n)
	} else {
		return false
	}
	// Any failure falls back: nothing moved, and the slow path finds the precise page.
	return err == nil
}

// copySlow copies n bytes through a bounce buffer with Read and Write.
func (m *MMU) copySlow(a engine.Access, dst, src, n uint64) (written bool, err error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for n > 0 {
		k := min(n, uint64(len(buf)))
		if _, err := m.access(a, src, buf[:k], false); err != nil {
			return written, err
		}
		w, err := m.access(a, dst, buf[:k], true)
		written = written || w > 0
		if err != nil {
			return written, err
		}
		dst, src, n = dst+k, src+k, n-k
	}
	return written, nil
}

// translateRun translates the longest prefix of [va, va+max) (max > 0) that is one
// physically contiguous run with one cache policy and the needed permission. x.pa is the
// physical address of va itself (not of its page) and n the length of the run (0 < n <= max).
// A reason other than VM_FAULT_NONE is the fault of va's own page; a later page that faults
// only ends the run (it is reported when the copy reaches it). A run is made of TLB hits, or,
// when va's page misses, of GART entries read a table piece at a time (translateMiss).
func (m *MMU) translateRun(a engine.Access, va, max uint64, write bool) (x xlat, n uint64, reason uint32) {
	if va >= vaLimit || a.VMID != 0 {
		return xlat{}, 0, abi.VM_FAULT_OUTSIDE
	}
	max = min(max, vaLimit)
	if m.inFB(va) {
		off := va - abi.GPU_FB_BASE
		return xlat{pa: engine.PhysAddr{Domain: engine.DomainVRAM, Addr: off}}, min(max, m.vramSize-off), abi.VM_FAULT_NONE
	}
	first := va >> pageShift
	want := min((va&pageMask+max+pageMask)>>pageShift, maxPTEBatch) // pages the range touches

	v := m.view.Load()
	g, gen := v.g, v.gen
	if g.empty || first < g.startPage || first > g.endPage {
		return xlat{}, 0, abi.VM_FAULT_OUTSIDE
	}
	if !g.enabled {
		return xlat{}, 0, abi.VM_FAULT_GART_DISABLED
	}
	want = min(want, g.endPage-first+1)
	pte, hit := m.tlb[a.VMID].get(first)
	if !hit {
		return m.translateMiss(a, g, gen, va, max, want, write)
	}
	// Extend the run over the following pages while they hit and stay contiguous.
	hits := uint64(1)
	if reason = permReason(pte, write); reason == abi.VM_FAULT_NONE {
		x = pteXlat(pte)
		x.pa.Addr += va & pageMask
		n = min(max, PageSize-va&pageMask)
		for hits < want && n < max {
			page := first + hits
			if m.inFB(page << pageShift) {
				break // the frame buffer wins where the apertures overlap
			}
			next, ok := m.tlb[a.VMID].get(page)
			if !ok || !extends(x, n, next, write) {
				break
			}
			hits++
			n += min(max-n, PageSize)
		}
	}
	m.stats.tlbHits.Add(hits)
	if reason != abi.VM_FAULT_NONE {
		return xlat{}, 0, reason
	}
	return x, n, abi.VM_FAULT_NONE
}

// extends reports whether the page of pte continues a run x of n bytes: readable or writeable
// as needed, the same domain and cache policy, physically next.
func extends(x xlat, n, pte uint64, write bool) bool {
	if permReason(pte, write) != abi.VM_FAULT_NONE {
		return false
	}
	px := pteXlat(pte)
	return px.uc == x.uc && px.pa.Domain == x.pa.Domain && px.pa.Addr == x.pa.Addr+n
}

// translateMiss is translateRun for a page the TLB does not hold: it reads the GART entries
// of up to want pages from the table (g, as of TLB generation gen), stopping at the frame
// buffer, caches them if the run is short, and builds the run from them.
func (m *MMU) translateMiss(a engine.Access, g gart, gen uint64, va, max, want uint64, write bool) (x xlat, n uint64, reason uint32) {
	var ptes [maxPTEBatch]uint64
	first := va >> pageShift
	k := uint64(1)
	for k < want && !m.inFB((first+k)<<pageShift) {
		k++
	}
	got, r := m.readPTEs(g, first, ptes[:k])
	if got == 0 {
		return xlat{}, 0, r
	}
	m.stats.tlbMisses.Add(got)
	// A long streaming run is not kept in the TLB: it would only push out the working set of
	// the other accesses (a TLB may always drop entries).
	m.mu.Lock()
	if m.gen == gen && got <= maxTLBFillPerRun { // no invalidation or GART change since we looked
		for i := range got {
			m.tlb[a.VMID].put(first+i, ptes[i])
		}
	}
	m.mu.Unlock()

	if r := permReason(ptes[0], write); r != abi.VM_FAULT_NONE {
		return xlat{}, 0, r
	}
	x = pteXlat(ptes[0])
	x.pa.Addr += va & pageMask
	n = min(max, PageSize-va&pageMask)
	for i := uint64(1); i < got && n < max && extends(x, n, ptes[i], write); i++ {
		n += min(max-n, PageSize)
	}
	return x, n, abi.VM_FAULT_NONE
}

// readPTEs fills ptes with the GART entries of the pages from first on, reading the table at
// once when it can. It returns how many leading entries are valid, or 0 and the fault reason
// of the first page.
func (m *MMU) readPTEs(g gart, first uint64, ptes []uint64) (uint64, uint32) {
	if len(ptes) > 1 && g.tableValid {
		addr := g.tableAddr + (first-g.startPage)*abi.PTE_BYTES
		size := uint64(len(ptes)) * abi.PTE_BYTES
		if g.tableDomain != engine.DomainVRAM || addr < m.vramSize && m.vramSize-addr >= size {
			buf := tableBufs.Get().(*[PageSize]byte)
			got := uint64(0)
			if m.b.ReadPhys(g.tableDomain, addr, buf[:size]) == nil {
				for got < uint64(len(ptes)) {
					pte := binary.LittleEndian.Uint64(buf[got*abi.PTE_BYTES:])
					if pte&abi.PTE_VALID_MASK == 0 {
						break
					}
					ptes[got] = pte
					got++
				}
			}
			tableBufs.Put(buf)
			if got > 0 {
				return got, abi.VM_FAULT_NONE
			}
		}
	}
	// One entry, with the precise reason when it fails.
	pte, r := m.readPTE(g, first)
	if r != abi.VM_FAULT_NONE {
		return 0, r
	}
	ptes[0] = pte
	return 1, abi.VM_FAULT_NONE
}

// permReason checks a valid PTE's R/W bit for the access.
func permReason(pte uint64, write bool) uint32 {
	if write && pte&abi.PTE_WRITEABLE_MASK == 0 {
		return abi.VM_FAULT_NO_WRITE
	}
	if !write && pte&abi.PTE_READABLE_MASK == 0 {
		return abi.VM_FAULT_NO_READ
	}
	return abi.VM_FAULT_NONE
}

// pteXlat decodes a valid PTE into the translation of its page.
func pteXlat(pte uint64) xlat {
	x := xlat{
		pa: engine.PhysAddr{Domain: engine.DomainVRAM, Addr: pte & abi.PTE_ADDRESS_MASK},
		uc: (pte&abi.PTE_MTYPE_MASK)>>abi.PTE_MTYPE__SHIFT == abi.PTE_MTYPE_UC,
	}
	if pte&abi.PTE_SYSTEM_MASK != 0 {
		x.pa.Domain = engine.DomainSystem
	}
	return x
}
