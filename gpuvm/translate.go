package gpuvm

import (
	"errors"

	"vgpu/abi"
	"vgpu/engine"
)

// Translation is where a GPU address of a process VMID lands.
type Translation struct {
	PA  engine.PhysAddr // the physical address of va (meaningless when ReadZero)
	Len uint64          // bytes from va to the end of the physically contiguous mapping (≥ 1)
	PTE uint64          // the leaf entry used (PTE format; a huge page's PDE_PTE entry)
	// MTYPE is the entry's memory type (abi.PTE_MTYPE_*): UC bypasses the L2.
	MTYPE uint8
	// ReadZero: reads return zeros without touching memory (a PRT page, or the default page
	// while FAULT_DEFAULT_ADDR is 0). DropWrites: writes are discarded (PRT, default page).
	ReadZero, DropWrites bool
	// Default: a no-retry fault was redirected to the default page (it was latched).
	Default bool
}

// ErrNotProcessVMID is returned by Translate for VMID 0 (gpummu's) or one out of range: a
// caller bug, not a guest fault, so nothing is latched.
var ErrNotProcessVMID = errors.New("gpuvm: not a process VMID (1..15)")

// Translate maps va for access a (a.VMID in 1..15; a.Kind Fetch needs PTE_EXECUTABLE, a
// write PTE_WRITEABLE unless a.Privileged, a data read PTE_READABLE). It returns the translation, or:
//   - a *Fault (engine.TranslationFaulter) for a no-retry fault whose policy halts;
//   - a *RetryFault (engine.Retrier) for a retry fault: the access must wait and replay;
//   - for a no-retry fault whose policy is the default page, a Translation with Default and
//     DropWrites set and a nil error.
//
// Faults are latched, counted and sent as IVs per the context's policy before it returns.
// Cached translations are used until invalidated, even if the tables changed; in strict mode
// such a use is reported (and the cached translation still used, as hardware would).
func (v *VM) Translate(a engine.Access, va uint64, write bool) (Translation, error) {
	if a.VMID <= 0 || a.VMID >= NumVMIDs {
		return Translation{}, ErrNotProcessVMID
	}
	c := v.cfg[a.VMID].Load()
	e, f, va, rel := v.lookup(a, c, va, write, true)
	if f.k == classNone {
		f = permission(a, e.pte, write)
	}
	if f.k != classNone {
		return v.fault(a, c, va, write, f)
	}
	t := translation(c, e, va, rel)
	if t.ReadZero {
		v.stats.prt.Add(1)
	}
	return t, nil
}

// Probe translates va of vmid without checking permissions and without faulting (nothing
// latched, no IV, no retry): for cache maintenance by address, which is not an access. ok is
// false where Translate would fault.
func (v *VM) Probe(vmid int, va uint64) (t Translation, ok bool) {
	if vmid <= 0 || vmid >= NumVMIDs {
		return Translation{}, false
	}
	c := v.cfg[vmid].Load()
	e, f, va, rel := v.lookup(engine.Access{VMID: vmid, Slot: -1}, c, va, false, false)
	if f.k != classNone {
		return Translation{}, false
	}
	return translation(c, e, va, rel), true
}

// lookup finds the translation of va: from the TLB, else by a walk (from the deepest cached
// PDE) whose result is cached unless an invalidation happened meanwhile. It returns the
// canonical va and its offset into the context's range. Strict mode checks only accesses
// (access true), not cache maintenance.
func (v *VM) lookup(a engine.Access, c *ctxConfig, va uint64, write, access bool) (tlbEntry, walkFault, uint64, uint64) {
	if !c.enabled {
		return tlbEntry{}, walkFault{k: classDisabled}, va, 0
	}
	va, canon := canonical(va)
	page := va >> pageShift
	if !canon || page < c.startPage || page > c.endPage {
		return tlbEntry{}, walkFault{k: classRange}, va, 0
	}
	rel := va - c.startPage<<pageShift
	cx := &v.ctx[a.VMID]
	cx.mu.Lock()
	e, hit := cx.tlb.lookup(rel)
	gen := cx.gen
	start := rootStart(c)
	if hit {
		cx.hits++ // counted under the context's lock: no shared atomic on the hot path
	} else {
		start = cx.pdeStart(c, rel)
		cx.misses++
		if start.cached {
			cx.pdeHits++
		}
	}
	cx.mu.Unlock()
	strict := access && v.strict.Load()
	if hit {
		if strict {
			v.checkStale(a, c, cx, gen, va, rel, e, write)
		}
		return e, walkFault{}, va, rel
	}
	w := v.walk(c, rel, start)
	if strict && start.cached {
		// The walk trusted cached PDEs: compare with one from the root.
		if w.fault.k == classNone {
			v.checkStale(a, c, cx, gen, va, rel, w.entry, write)
		}
	}
	if w.fault.k != classNone {
		return tlbEntry{}, w.fault, va, rel
	}
	cx.mu.Lock()
	if cx.gen == gen { // no invalidation since we looked: the fill is not stale by construction
		cx.tlb.insert(w.entry)
		for _, p := range w.fills[:w.nfill] {
			cx.pdes.put(p.level, p.prefix, p.pde)
		}
	}
	cx.mu.Unlock()
	return w.entry, walkFault{}, va, rel
}

// pdeStart returns the deepest cached PDE on rel's path (cx.mu held).
func (cx *vmContext) pdeStart(c *ctxConfig, rel uint64) walkStart {
	for l := 1; l <= c.depth; l++ {
		if pde, ok := cx.pdes.get(l, rel>>c.shift(l)); ok {
			return walkStart{pde: pde, level: l - 1, cached: true}
		}
	}
	return rootStart(c)
}

// canonical strips a 48-bit address's sign extension (hardware sees the low 48 bits); an
// address whose bits 63:48 are not a sign extension of bit 47 is not canonical.
func canonical(va uint64) (uint64, bool) {
	switch va >> (vaBits - 1) {
	case 0, 1<<(65-vaBits) - 1:
		return va & (vaLimit - 1), true
	}
	return va & (vaLimit - 1), false
}

// permission checks the entry's R/W/X bits for the access (PRT pages need none). A privileged
// write (engine.Access.Privileged: the kernel's PROTECTED_FENCE_SIGNAL) needs no WRITEABLE.
func permission(a engine.Access, pte uint64, write bool) walkFault {
	if pte&abi.PTE_VALID_MASK == 0 { // PRT
		return walkFault{}
	}
	switch {
	case a.Kind == engine.Fetch && pte&abi.PTE_EXECUTABLE_MASK == 0:
		return walkFault{k: classExecute, entry: pte}
	case a.Kind == engine.Fetch:
	case write && pte&abi.PTE_WRITEABLE_MASK == 0 && !a.Privileged:
		return walkFault{k: classWrite, entry: pte}
	case !write && pte&abi.PTE_READABLE_MASK == 0:
		return walkFault{k: classRead, entry: pte}
	}
	return walkFault{}
}

func translation(c *ctxConfig, e tlbEntry, va, rel uint64) Translation {
	t := Translation{
		PA:    engine.PhysAddr{Domain: engine.DomainVRAM, Addr: e.pa(rel)},
		Len:   uint64(1)<<e.shift - (rel - e.vbase),
		PTE:   e.pte,
		MTYPE: uint8(e.pte & abi.PTE_MTYPE_MASK >> abi.PTE_MTYPE__SHIFT),
	}
	if e.pte&abi.PTE_SYSTEM_MASK != 0 {
		t.PA.Domain = engine.DomainSystem
	}
	if e.pte&abi.PTE_VALID_MASK == 0 { // PRT
		t.ReadZero, t.DropWrites = true, true
	}
	// The range ends at END: the next page faults even if the mapping goes on.
	if rest := (c.endPage+1)<<pageShift - va; rest < t.Len {
		t.Len = rest
	}
	return t
}
