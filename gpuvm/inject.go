package gpuvm

import "vgpu/inject"

// Fault injection (package inject): a tlb.stale rule makes an invalidation of a VMID drop
// nothing while it is acknowledged as usual (the engine's ACK bit, the packet completes, the
// counters count it): the VMID keeps translating through the entries cached before, the
// driver bug "freed a page the GPU still reaches" made visible from the device side. It
// applies to every invalidation path of VMIDs 1..15 (the engines' REQ/ACK, INVALIDATE_TLBS,
// GMC_VM_INVALIDATE, a bind by MES); VMID 0's GART translations are gpummu's.

// SetInjector gives the VM block its rule set (nil: none). Call before translations run.
func (v *VM) SetInjector(s *inject.Set) { v.inj = s }
