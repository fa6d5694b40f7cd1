package gpuvm

import (
	"encoding/binary"

	"vgpu/abi"
	"vgpu/engine"
)

// class is a fault's kind: it selects the context's policy bits and the status fields.
type class uint8

const (
	classNone     class = iota
	classDisabled       // the context is not enabled (or the VMID has none)
	classRange          // outside START..END, or not a canonical 48-bit address
	classPDE            // a PDE (the root included) is not valid
	classWalker         // the walk failed: unreadable entry, reserved bits, misplaced huge page
	classMarker         // an entry amdgpu writes to force a no-retry fault
	classValid          // the leaf PTE is not valid (and not PRT)
	classRead
	classWrite
	classExecute
)

// walkFault says why a walk (or a permission check) did not give a translation.
type walkFault struct {
	k      class
	walker uint32 // VM_WALKER_* for classWalker and classMarker
	entry  uint64 // the entry the walk stopped at (0: none was read)
	prt    bool
}

// walkStart is where a walk begins: the PDE that points to the table of level, either the
// root (VM_CONTEXT_PAGE_TABLE_BASE) or a PDE from the cache.
type walkStart struct {
	pde    uint64
	level  int
	cached bool
}

func rootStart(c *ctxConfig) walkStart { return walkStart{pde: c.root, level: c.depth} }

// pdeFill is a PDE the walk read, for the PDE cache.
type pdeFill struct {
	level  int
	prefix uint64
	pde    uint64
}

type walkResult struct {
	entry tlbEntry
	fault walkFault
	fills [3]pdeFill
	nfill int
}

const pteBytes = abi.PTE_BYTES

// walk translates rel from start down to the leaf. It reads at most depth+1 entries — the
// level goes down by one per read — so no table, however malformed, makes it loop; every
// entry address is checked against VRAM before the read, and every read is 8 bytes. It takes
// no lock.
func (v *VM) walk(c *ctxConfig, rel uint64, start walkStart) (w walkResult) {
	pde, level := start.pde, start.level
	buf := new([pteBytes]byte) // escapes through the TableReader interface: one allocation per walk
	for {
		if f, bad := checkPDE(pde); bad {
			w.fault = f
			return w
		}
		pa := engine.PhysAddr{Domain: engine.DomainVRAM, Addr: pde & abi.PDE_TABLE_ADDRESS_MASK}
		if pde&abi.PDE_SYSTEM_MASK != 0 {
			pa.Domain = engine.DomainSystem
		}
		pa.Addr += c.index(level, rel) * pteBytes // < 2^48 + 2^39: no overflow
		e, ok := v.readEntry(pa, buf)
		if !ok {
			w.fault = walkFault{k: classWalker, walker: abi.VM_WALKER_READ_FAILED, entry: pde}
			return w
		}
		switch {
		case level == 0:
			w.entry, w.fault = leafEntry(e, pageShift, 0, rel)
			return w
		case e&abi.PDE_PTE_MASK != 0:
			if !hugeLevel(level) {
				w.fault = walkFault{k: classWalker, walker: abi.VM_WALKER_BAD_HUGE_PAGE, entry: e}
				return w
			}
			w.entry, w.fault = leafEntry(e, c.shift(level), level, rel)
			return w
		}
		if f, bad := checkPDE(e); bad {
			w.fault = f
			return w
		}
		w.fills[w.nfill] = pdeFill{level: level, prefix: rel >> c.shift(level), pde: e}
		w.nfill++
		pde, level = e, level-1
	}
}

// checkPDE refuses a PDE that is not valid or has reserved bits set.
func checkPDE(pde uint64) (walkFault, bool) {
	switch {
	case pde&abi.PDE_VALID_MASK == 0:
		return walkFault{k: classPDE, entry: pde}, true
	case pde&abi.PDE_RESERVED_MASK != 0:
		return walkFault{k: classWalker, walker: abi.VM_WALKER_RESERVED_BITS, entry: pde}, true
	}
	return walkFault{}, false
}

func (v *VM) readEntry(pa engine.PhysAddr, b *[pteBytes]byte) (uint64, bool) {
	if pa.Domain == engine.DomainVRAM && (pa.Addr >= v.vramSize || v.vramSize-pa.Addr < pteBytes) {
		return 0, false
	}
	if pa.Domain == engine.DomainSystem && pa.Addr >= vaLimit {
		return 0, false
	}
	v.stats.tableReads.Add(1)
	if v.tables == nil || v.tables.ReadPTE(pa, b[:]) != nil {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[:]), true
}

// leafEntry checks a leaf entry of a level mapping 2^shift bytes and makes it a TLB entry for
// rel. PRT entries (VALID clear) are translations too: they read zeros.
func leafEntry(e uint64, shift uint, level int, rel uint64) (tlbEntry, walkFault) {
	switch {
	case e&abi.PTE_RESERVED_MASK != 0:
		return tlbEntry{}, walkFault{k: classWalker, walker: abi.VM_WALKER_RESERVED_BITS, entry: e}
	case e&abi.PTE_TF_MASK != 0, level == 0 && e&abi.PDE_PTE_MASK != 0:
		return tlbEntry{}, walkFault{k: classMarker, walker: abi.VM_WALKER_NO_RETRY_MARKER, entry: e}
	case e&abi.PTE_PRT_MASK != 0 && e&abi.PTE_VALID_MASK != 0:
		return tlbEntry{}, walkFault{k: classMarker, walker: abi.VM_WALKER_NO_RETRY_MARKER, entry: e, prt: true}
	case e&(abi.PTE_VALID_MASK|abi.PTE_PRT_MASK) == 0:
		return tlbEntry{}, walkFault{k: classValid, entry: e}
	}
	s := uint64(1) << shift
	base := e & abi.PTE_ADDRESS_MASK &^ (s - 1)
	n := tlbEntry{vbase: rel &^ (s - 1), pbase: base, pte: e, shift: uint8(shift), valid: true}
	// A fragment claims an aligned, contiguous run larger than the entry's own span: one TLB
	// entry covers it, if the claim is consistent (the run's physical start is aligned).
	if f := pageShift + uint(e&abi.PTE_FRAGMENT_MASK>>abi.PTE_FRAGMENT__SHIFT); f > shift && f < vaBits {
		fs := uint64(1) << f
		vb := rel &^ (fs - 1)
		if off := n.vbase - vb; base >= off && (base-off)&(fs-1) == 0 {
			n.vbase, n.pbase, n.shift = vb, base-off, uint8(f)
		}
	}
	return n, walkFault{}
}
