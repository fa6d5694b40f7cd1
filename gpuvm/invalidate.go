package gpuvm

import (
	"vgpu/abi"
	"vgpu/inject"
)

// The REQ bits that select what an engine invalidates.
const (
	reqPTEs = abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PTES_MASK | abi.REG_VM_INV_ENG_REQ__INVALIDATE_L1_PTES_MASK
	reqAny  = reqPTEs | abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE0_MASK |
		abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE1_MASK | abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE2_MASK
)

// reqMask turns a REQ value's level bits into what to drop.
func reqMask(req uint32) invMask {
	var m invMask
	if req&reqPTEs != 0 {
		m |= invPTEs
		if req&abi.REG_VM_INV_ENG_REQ__INVALIDATE_4K_PAGES_ONLY_MASK != 0 {
			m |= inv4KOnly
		}
	}
	if req&abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE0_MASK != 0 {
		m |= invPDE0
	}
	if req&abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE1_MASK != 0 {
		m |= invPDE1
	}
	if req&abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE2_MASK != 0 {
		m |= invPDE2
	}
	return m
}

// invalidate drops what m selects for every VMID in vmids (bit per VMID); bit 0 runs the
// VMID-0 hook (gpummu's GART translations) when m drops anything. Called without v.mu.
func (v *VM) invalidate(vmids uint32, m invMask) {
	if m == 0 {
		return
	}
	v.traceInvalidate(vmids, m)
	if vmids&1 != 0 {
		if f := v.flush0.Load(); f != nil {
			(*f)()
		}
	}
	for id := 1; id < NumVMIDs; id++ {
		if vmids&(1<<id) != 0 {
			if v.inj.Has(inject.TLBStale) && v.inj.Stale(id) {
				continue // acknowledged, entries kept (inject.go)
			}
			v.ctx[id].invalidate(m)
			v.stats.invalidations.Add(1)
		}
	}
}

// InvalidateVMIDs drops every cached translation and PDE of the VMIDs in mask (bit per VMID;
// bit 0: the VMID-0 hook), as a heavyweight invalidation would. For gpummu's
// GMC_VM_INVALIDATE and the device.
func (v *VM) InvalidateVMIDs(mask uint32) { v.invalidate(mask&(1<<NumVMIDs-1), invAll) }

// InvalidatePASID is the PM4 INVALIDATE_TLBS packet: every VMID 1..15 whose PASID LUT entry
// holds pasid is invalidated completely (vgpu has one hub, so allHub changes nothing, and
// every flush type acts alike). It returns the VMIDs it invalidated (a bit each).
func (v *VM) InvalidatePASID(pasid uint16, allHub bool, flushType uint8) uint32 {
	_, _ = allHub, flushType
	var mask uint32
	v.mu.Lock()
	for id := 1; id < NumVMIDs; id++ {
		if uint16(v.regs.pasid[id]) == pasid {
			mask |= 1 << id
		}
	}
	v.mu.Unlock()
	v.invalidate(mask, invAll)
	return mask
}
