package gpuvm

import (
	"fmt"

	"vgpu/abi"
	"vgpu/engine"
)

// staleEvent is the last strict-mode event (VM_STALE_*).
type staleEvent struct {
	slot, vmid       int
	write, newFaults bool
	va, old, new     uint64
}

// The entry bits that change what an access does; the address is compared as a translation.
const flagBits = abi.PTE_VALID_MASK | abi.PTE_SYSTEM_MASK | abi.PTE_SNOOPED_MASK | abi.PTE_EXECUTABLE_MASK |
	abi.PTE_READABLE_MASK | abi.PTE_WRITEABLE_MASK | abi.PTE_MTYPE_MASK | abi.PTE_PRT_MASK

// checkStale re-walks rel from the root, bypassing every cache, and reports a use of the
// cached translation used if memory now says otherwise. A walk that raced an invalidation of
// this VMID (gen moved) proves nothing and is not reported.
func (v *VM) checkStale(a engine.Access, c *ctxConfig, cx *vmContext, gen uint64, va, rel uint64, used tlbEntry, write bool) {
	w := v.walk(c, rel, rootStart(c))
	newPTE, faults := w.entry.pte, w.fault.k != classNone
	if faults {
		newPTE = w.fault.entry
	} else if w.entry.pa(rel) == used.pa(rel) && w.entry.pte&flagBits == used.pte&flagBits {
		return
	}
	cx.mu.Lock()
	raced := cx.gen != gen
	cx.mu.Unlock()
	if raced {
		v.stats.staleRaces.Add(1)
		return
	}
	v.stats.staleUses.Add(1)
	v.mu.Lock()
	v.stale = staleEvent{slot: a.Slot, vmid: a.VMID, write: write, newFaults: faults, va: va, old: used.pte, new: newPTE}
	v.mu.Unlock()
	v.rl.Warn("gpuvm-stale-tlb", "gpuvm: strict: access used a stale translation (missed TLB invalidation?)",
		"queue", a.Slot, "vmid", a.VMID, "addr", fmt.Sprintf("%#x", va),
		"old_pte", fmt.Sprintf("%#x", used.pte), "new_pte", fmt.Sprintf("%#x", newPTE), "new_faults", faults)
}

func (e staleEvent) reg() uint32 {
	slot := uint32(e.slot) & 0xFF // -1 (no queue) reads 0xFF
	s := slot<<abi.REG_VM_STALE_EVENT__SLOT__SHIFT | uint32(e.vmid)<<abi.REG_VM_STALE_EVENT__VMID__SHIFT&abi.REG_VM_STALE_EVENT__VMID_MASK
	if e.write {
		s |= abi.REG_VM_STALE_EVENT__WRITE_MASK
	}
	if e.newFaults {
		s |= abi.REG_VM_STALE_EVENT__NEW_FAULTS_MASK
	}
	return s
}
