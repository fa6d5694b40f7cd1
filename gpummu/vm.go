package gpummu

import (
	"vgpu/abi"
	"vgpu/engine"
	"vgpu/gpuvm"
	"vgpu/l2"
)

// SetVM hands VMIDs 1..15 to v: their accesses are translated by gpuvm (page-table walks,
// TLBs, faults, retry faults) and then go through the L2 like VMID 0's. VMID 0's faults are
// also reported through v's AMD-format latch and VM-fault IV. Call it before the MMU is used;
// without it every VMID but 0 faults (VM_FAULT_OUTSIDE), as before gpuvm existed.
func (m *MMU) SetVM(v *gpuvm.VM) { m.vm = v }

// inVM reports whether gpuvm translates address space vmid (VMIDs past 15 fault as outside).
// It takes the VMID, not the Access: copying an Access to test one field costs a
// store-forwarding stall on every access.
func (m *MMU) inVM(vmid int) bool {
	return vmid > 0 && vmid < gpuvm.NumVMIDs && m.vm != nil
}

// accessVM is Read/Write for a process VMID: the access is split at the ends of the
// translated mappings (pages, fragments, huge pages). gpuvm's errors come back as they are:
// a *gpuvm.Fault (already latched there) or a *gpuvm.RetryFault the engine waits on.
func (m *MMU) accessVM(a engine.Access, va uint64, p []byte, write bool) (int, error) {
	done := 0
	for len(p) > 0 {
		t, err := m.vm.Translate(a, va, write)
		if err != nil {
			if _, retry := err.(*gpuvm.RetryFault); !retry {
				m.stats.faults.Add(1)
			}
			return done, err
		}
		n := min(uint64(len(p)), t.Len)
		switch {
		case write && t.DropWrites:
		case !write && t.ReadZero:
			clear(p[:n])
		default:
			uc := uint64(t.MTYPE) == abi.PTE_MTYPE_UC
			if err := m.phys(a, uc, t.PA, va, p[:n], write); err != nil {
				return done, m.accessError(a, va, t.PA, write, err)
			}
		}
		done += int(n)
		va += n // the next Translate faults if it runs past the range or the 48-bit space
		p = p[n:]
	}
	return done, nil
}

// copyVM is Copy for a process VMID: Read then Write through a bounce buffer, chunk by chunk.
func (m *MMU) copyVM(a engine.Access, dst, src, n uint64) (written bool, err error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for n > 0 {
		k := min(n, uint64(len(buf)))
		if _, err := m.accessVM(a, src, buf[:k], false); err != nil {
			return written, err
		}
		w, err := m.accessVM(a, dst, buf[:k], true)
		written = written || w > 0
		if err != nil {
			return written, err
		}
		dst, src, n = dst+k, src+k, n-k
	}
	return written, nil
}

// cacheOpVM applies op to the lines of [va, va+size) of a process VMID: pages are translated
// without faulting (gpuvm.Probe; a cache action is not an access) and contiguous pieces
// merged. A range of more than MaxCacheOpPages pages acts on the whole cache, as for VMID 0.
func (m *MMU) cacheOpVM(a engine.Access, op l2.Op, va, size uint64) error {
	if size-1 >= MaxCacheOpPages*PageSize {
		whole := op
		if whole&l2.OpDiscard != 0 {
			whole = whole&^l2.OpDiscard | l2.OpWriteBackInvalidate
		}
		return m.apply(a, whole, nil, va)
	}
	var first error
	var run *l2.Range
	var runVA uint64
	flush := func() {
		if run != nil {
			if err := m.apply(a, op, run, runVA); err != nil && first == nil {
				first = err
			}
			run = nil
		}
	}
	end := va + size
	if end < va {
		end = ^uint64(0)
	}
	for va < end {
		t, ok := m.vm.Probe(a.VMID, va)
		n := min(end-va, PageSize-va&pageMask)
		if ok {
			n = min(end-va, t.Len)
		}
		if !ok || t.ReadZero {
			flush()
			va += n
			continue
		}
		if run != nil && run.Domain == t.PA.Domain && run.Addr+run.Size == t.PA.Addr {
			run.Size += n
		} else {
			flush()
			run, runVA = &l2.Range{Domain: t.PA.Domain, Addr: t.PA.Addr, Size: n}, va
		}
		va += n
	}
	flush()
	return first
}

// vmStatus is the VM_FAULT_STATUS cause of a VMID-0 fault reason.
func vmStatus(reason uint32) uint32 {
	perm := func(p uint32) uint32 { return p << abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS__SHIFT }
	switch reason {
	case abi.VM_FAULT_INVALID_PTE:
		return perm(abi.VM_PERM_VALID)
	case abi.VM_FAULT_NO_READ:
		return perm(abi.VM_PERM_READ)
	case abi.VM_FAULT_NO_WRITE:
		return perm(abi.VM_PERM_WRITE)
	case abi.VM_FAULT_TABLE:
		return abi.VM_WALKER_READ_FAILED << abi.REG_VM_FAULT_STATUS__WALKER_ERROR__SHIFT
	}
	return abi.REG_VM_FAULT_STATUS__MAPPING_ERROR_MASK // outside every aperture, GART disabled
}

// reportVM sends a VMID-0 translation fault to gpuvm's latch and IV. Faults of accesses
// without a queue (the IH writing its own ring) are not: their IV would need the ring that
// just failed.
func (m *MMU) reportVM(a engine.Access, va uint64, write bool, reason uint32) {
	if m.vm != nil && a.Slot >= 0 {
		m.vm.ReportFault(a, va, write, vmStatus(reason))
	}
}
