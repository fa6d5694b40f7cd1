package gpuvm

import "vgpu/abi"

// Register offsets relative to the VM block.
const (
	regFaultStatus  = abi.REG_VM_FAULT_STATUS - abi.BLOCK_VM_BASE
	regFaultAddrLo  = abi.REG_VM_FAULT_ADDR_LO - abi.BLOCK_VM_BASE
	regFaultAddrHi  = abi.REG_VM_FAULT_ADDR_HI - abi.BLOCK_VM_BASE
	regFaultCntl    = abi.REG_VM_FAULT_CNTL - abi.BLOCK_VM_BASE
	regDefaultLo    = abi.REG_VM_FAULT_DEFAULT_ADDR_LO - abi.BLOCK_VM_BASE
	regDefaultHi    = abi.REG_VM_FAULT_DEFAULT_ADDR_HI - abi.BLOCK_VM_BASE
	regCAMAck       = abi.REG_VM_RETRY_CAM_ACK - abi.BLOCK_VM_BASE
	regCAMStatus    = abi.REG_VM_RETRY_CAM_STATUS - abi.BLOCK_VM_BASE
	regRetryFaults  = abi.REG_VM_RETRY_FAULTS - abi.BLOCK_VM_BASE
	regFaults       = abi.REG_VM_FAULTS - abi.BLOCK_VM_BASE
	regStrictCntl   = abi.REG_VM_STRICT_CNTL - abi.BLOCK_VM_BASE
	regStaleUses    = abi.REG_VM_STALE_USES - abi.BLOCK_VM_BASE
	regStaleEvent   = abi.REG_VM_STALE_EVENT - abi.BLOCK_VM_BASE
	regStaleVALo    = abi.REG_VM_STALE_VA_LO - abi.BLOCK_VM_BASE
	regStaleVAHi    = abi.REG_VM_STALE_VA_HI - abi.BLOCK_VM_BASE
	regStaleOldLo   = abi.REG_VM_STALE_OLD_PTE_LO - abi.BLOCK_VM_BASE
	regStaleOldHi   = abi.REG_VM_STALE_OLD_PTE_HI - abi.BLOCK_VM_BASE
	regStaleNewLo   = abi.REG_VM_STALE_NEW_PTE_LO - abi.BLOCK_VM_BASE
	regStaleNewHi   = abi.REG_VM_STALE_NEW_PTE_HI - abi.BLOCK_VM_BASE
	regPASIDLUT0    = abi.REG_VM_PASID_LUT_0 - abi.BLOCK_VM_BASE
	regPASIDLUTEnd  = regPASIDLUT0 + 4*NumVMIDs
	pageHiMask      = 1<<(pageBits-32) - 1 // page-number registers' high halves: bits [35:32]
	faultCntlStored = abi.REG_VM_FAULT_CNTL__CRASH_ON_NO_RETRY_FAULT_MASK
)

// ReadReg returns the VM-block register at off (bytes from abi.BLOCK_VM_BASE); write-only
// and unknown offsets read 0. It never waits for memory.
func (v *VM) ReadReg(off uint32) uint32 {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch off {
	case regFaultStatus:
		return v.latch.status
	case regFaultAddrLo:
		return uint32(v.latch.page)
	case regFaultAddrHi:
		return uint32(v.latch.page>>32) & pageHiMask
	case regFaultCntl:
		return v.regs.faultCntl
	case regDefaultLo:
		return v.regs.defLo
	case regDefaultHi:
		return v.regs.defHi
	case regCAMStatus:
		return v.camStatusLocked()
	case regRetryFaults:
		return uint32(v.stats.retryIVs.Load())
	case regFaults:
		return uint32(v.faults.Load())
	case regStrictCntl:
		if v.strict.Load() {
			return abi.REG_VM_STRICT_CNTL__ENABLE_MASK
		}
		return 0
	case regStaleUses:
		return uint32(v.stats.staleUses.Load())
	case regStaleEvent:
		return v.stale.reg()
	case regStaleVALo:
		return uint32(v.stale.va)
	case regStaleVAHi:
		return uint32(v.stale.va >> 32)
	case regStaleOldLo:
		return uint32(v.stale.old)
	case regStaleOldHi:
		return uint32(v.stale.old >> 32)
	case regStaleNewLo:
		return uint32(v.stale.new)
	case regStaleNewHi:
		return uint32(v.stale.new >> 32)
	}
	if off >= regPASIDLUT0 && off < regPASIDLUTEnd && off%4 == 0 {
		return v.regs.pasid[(off-regPASIDLUT0)/4]
	}
	return 0
}

// WriteReg writes the VM-block register at off. FAULT_CNTL bit 0 clears and re-arms the
// latch; RETRY_CAM_ACK frees a CAM entry and wakes its waiters. Read-only and unknown offsets
// ignore writes.
func (v *VM) WriteReg(off uint32, val uint32) {
	v.mu.Lock()
	bogus := false
	switch off {
	case regFaultCntl:
		if val&abi.REG_VM_FAULT_CNTL__CLEAR_PROTECTION_FAULT_STATUS_ADDR_MASK != 0 {
			v.latch = faultLatch{}
		}
		v.regs.faultCntl = val & faultCntlStored
	case regDefaultLo:
		v.regs.defLo = val
	case regDefaultHi:
		v.regs.defHi = val & pageHiMask
	case regCAMAck:
		bogus = !v.ackCAMLocked(val)
	case regStrictCntl:
		v.strict.Store(val&abi.REG_VM_STRICT_CNTL__ENABLE_MASK != 0)
	default:
		if off >= regPASIDLUT0 && off < regPASIDLUTEnd && off%4 == 0 {
			v.regs.pasid[(off-regPASIDLUT0)/4] = val & 0xFFFF
		}
	}
	v.mu.Unlock()
	if bogus {
		v.rl.Warn("gpuvm-cam-ack", "gpuvm: RETRY_CAM_ACK of an entry not in use", "index", val)
	}
}

// Context register offsets inside a VM_CONTEXT instance.
const (
	ctxCntl    = abi.REG_VM_CONTEXT_CNTL
	ctxBaseLo  = abi.REG_VM_CONTEXT_PAGE_TABLE_BASE_LO
	ctxBaseHi  = abi.REG_VM_CONTEXT_PAGE_TABLE_BASE_HI
	ctxStartLo = abi.REG_VM_CONTEXT_START_LO
	ctxStartHi = abi.REG_VM_CONTEXT_START_HI
	ctxEndLo   = abi.REG_VM_CONTEXT_END_LO
	ctxEndHi   = abi.REG_VM_CONTEXT_END_HI

	cntlStored = 1<<(abi.REG_VM_CONTEXT_CNTL__EXECUTE_PROTECTION_FAULT_ENABLE_DEFAULT__SHIFT+1) - 1
	cntlWalk   = abi.REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK | abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH_MASK |
		abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_BLOCK_SIZE_MASK
)

// ReadContext returns register off of VM_CONTEXT instance vmid (instance 0 and unknown
// offsets read 0).
func (v *VM) ReadContext(vmid int, off uint32) uint32 {
	if vmid <= 0 || vmid >= NumVMIDs {
		return 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	r := &v.regs.ctx[vmid]
	switch off {
	case ctxCntl:
		return r.cntl
	case ctxBaseLo:
		return r.baseLo
	case ctxBaseHi:
		return r.baseHi
	case ctxStartLo:
		return r.startLo
	case ctxStartHi:
		return r.startHi
	case ctxEndLo:
		return r.endLo
	case ctxEndHi:
		return r.endHi
	}
	return 0
}

// WriteContext writes register off of VM_CONTEXT instance vmid. The next walk uses the new
// value; cached translations stay until invalidated (as on AMD parts, where the driver
// writes the page-table base and then invalidates). A CNTL write that changes how the
// context walks releases its waiting retry faults, which then replay.
func (v *VM) WriteContext(vmid int, off uint32, val uint32) {
	if vmid <= 0 || vmid >= NumVMIDs {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	r := &v.regs.ctx[vmid]
	switch off {
	case ctxCntl:
		val &= cntlStored
		if (r.cntl^val)&cntlWalk != 0 {
			v.cam.releaseVMID(vmid)
		}
		r.cntl = val
	case ctxBaseLo:
		r.baseLo = val
	case ctxBaseHi:
		r.baseHi = val
	case ctxStartLo:
		r.startLo = val
	case ctxStartHi:
		r.startHi = val & pageHiMask
	case ctxEndLo:
		r.endLo = val
	case ctxEndHi:
		r.endHi = val & pageHiMask
	default:
		return
	}
	v.cfg[vmid].Store(decodeContext(*r))
}

// Engine register offsets inside a VM_INV_ENG instance.
const (
	engSem     = abi.REG_VM_INV_ENG_SEM
	engReq     = abi.REG_VM_INV_ENG_REQ
	engAck     = abi.REG_VM_INV_ENG_ACK
	engRangeLo = abi.REG_VM_INV_ENG_ADDR_RANGE_LO
	engRangeHi = abi.REG_VM_INV_ENG_ADDR_RANGE_HI

	reqStored = 1<<(abi.REG_VM_INV_ENG_REQ__INVALIDATE_4K_PAGES_ONLY__SHIFT+1) - 1
	vmidBits  = abi.REG_VM_INV_ENG_REQ__PER_VMID_INVALIDATE_REQ_MASK
)

// ReadEngine returns register off of invalidation engine eng. Reading SEM takes the
// semaphore when it is free (and reads 1), else reads 0.
func (v *VM) ReadEngine(eng int, off uint32) uint32 {
	if eng < 0 || eng >= NumEngines {
		return 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	r := &v.regs.eng[eng]
	switch off {
	case engSem:
		if r.sem == 0 {
			r.sem = 1
			return 1
		}
		return 0
	case engReq:
		return r.req
	case engAck:
		ack := r.ack
		if r.sem != 0 {
			ack |= abi.REG_VM_INV_ENG_ACK__SEMAPHORE_MASK
		}
		return ack
	case engRangeLo:
		return r.rangeLo
	case engRangeHi:
		return r.rangeHi
	}
	return 0
}

// WriteEngine writes register off of invalidation engine eng. A REQ write clears the named
// VMIDs' ACK bits, invalidates what its level bits select (and clears the fault latch with
// CLEAR_PROTECTION_FAULT_STATUS_ADDR), then sets the ACK bits: all before it returns, and
// without waiting for memory.
func (v *VM) WriteEngine(eng int, off uint32, val uint32) {
	if eng < 0 || eng >= NumEngines {
		return
	}
	v.mu.Lock()
	r := &v.regs.eng[eng]
	switch off {
	case engSem:
		r.sem = val & 1
	case engRangeLo:
		r.rangeLo = val
	case engRangeHi:
		r.rangeHi = val & 0x1F
	case engReq:
		val &= reqStored
		r.req = val
		r.ack &^= val & vmidBits
		if val&abi.REG_VM_INV_ENG_REQ__CLEAR_PROTECTION_FAULT_STATUS_ADDR_MASK != 0 {
			v.latch = faultLatch{}
		}
		v.mu.Unlock()
		v.invalidate(val&vmidBits, reqMask(val))
		v.mu.Lock()
		r.ack |= val & vmidBits
	}
	v.mu.Unlock()
}
