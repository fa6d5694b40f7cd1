package gpummu

import (
	"fmt"

	"vgpu/abi"
)

// Register offsets relative to the GMC block.
const (
	regFBBaseLo      = abi.REG_GMC_FB_BASE_LO - abi.BLOCK_GMC_BASE
	regFBBaseHi      = abi.REG_GMC_FB_BASE_HI - abi.BLOCK_GMC_BASE
	regGARTCntl      = abi.REG_GMC_GART_CNTL - abi.BLOCK_GMC_BASE
	regGARTStartLo   = abi.REG_GMC_GART_START_LO - abi.BLOCK_GMC_BASE
	regGARTStartHi   = abi.REG_GMC_GART_START_HI - abi.BLOCK_GMC_BASE
	regGARTEndLo     = abi.REG_GMC_GART_END_LO - abi.BLOCK_GMC_BASE
	regGARTEndHi     = abi.REG_GMC_GART_END_HI - abi.BLOCK_GMC_BASE
	regGARTTableLo   = abi.REG_GMC_GART_TABLE_LO - abi.BLOCK_GMC_BASE
	regGARTTableHi   = abi.REG_GMC_GART_TABLE_HI - abi.BLOCK_GMC_BASE
	regVMFaultStatus = abi.REG_GMC_VM_FAULT_STATUS - abi.BLOCK_GMC_BASE
	regVMFaultAddrLo = abi.REG_GMC_VM_FAULT_ADDR_LO - abi.BLOCK_GMC_BASE
	regVMFaultAddrHi = abi.REG_GMC_VM_FAULT_ADDR_HI - abi.BLOCK_GMC_BASE
	regVMFaultCntl   = abi.REG_GMC_VM_FAULT_CNTL - abi.BLOCK_GMC_BASE
	regVMInvalidate  = abi.REG_GMC_VM_INVALIDATE - abi.BLOCK_GMC_BASE
)

// ReadReg returns the GMC register at off (bytes from abi.BLOCK_GMC_BASE). GART registers
// read back as written (GART_CNTL: only ENABLE); write-only and unknown offsets read 0. It
// never waits for a memory access.
func (m *MMU) ReadReg(off uint32) uint32 {
	switch off {
	case regFBBaseLo:
		return uint32(abi.GPU_FB_BASE & math32)
	case regFBBaseHi:
		return uint32(abi.GPU_FB_BASE >> 32)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch off {
	case regGARTCntl:
		return m.regs.cntl
	case regGARTStartLo:
		return m.regs.startLo
	case regGARTStartHi:
		return m.regs.startHi
	case regGARTEndLo:
		return m.regs.endLo
	case regGARTEndHi:
		return m.regs.endHi
	case regGARTTableLo:
		return m.regs.tableLo
	case regGARTTableHi:
		return m.regs.tableHi
	case regVMFaultStatus:
		return m.faultStatus
	case regVMFaultAddrLo:
		return uint32(m.faultAddr)
	case regVMFaultAddrHi:
		return uint32(m.faultAddr >> 32)
	}
	return 0
}

const math32 = 1<<32 - 1

// WriteReg writes the GMC register at off. A write to any GART register (CNTL, START, END,
// TABLE) takes effect at once and drops VMID 0's cached translations; VM_FAULT_CNTL.CLEAR
// clears and re-arms the fault latch; VM_INVALIDATE drops the translations of each VMID whose
// bit is set. Read-only and unknown offsets ignore writes.
func (m *MMU) WriteReg(off uint32, v uint32) {
	m.mu.Lock()
	clamped := m.writeRegLocked(off, v)
	start := m.gart.startPage << pageShift
	m.mu.Unlock()
	if clamped {
		m.rl.Warn("gpummu-gart-clamped", "gpummu: GART aperture larger than MaxGARTPages; only its start is translated",
			"start", fmt.Sprintf("%#x", start), "max_bytes", uint64(MaxGARTPages)*PageSize)
	}
}

// writeRegLocked performs a register write with m.mu held. It reports whether the new GART
// configuration is enabled and had to be cut to MaxGARTPages.
func (m *MMU) writeRegLocked(off uint32, v uint32) bool {
	switch off {
	case regGARTCntl:
		m.regs.cntl = v & abi.REG_GMC_GART_CNTL__ENABLE_MASK
	case regGARTStartLo:
		m.regs.startLo = v
	case regGARTStartHi:
		m.regs.startHi = v
	case regGARTEndLo:
		m.regs.endLo = v
	case regGARTEndHi:
		m.regs.endHi = v
	case regGARTTableLo:
		m.regs.tableLo = v
	case regGARTTableHi:
		m.regs.tableHi = v
	case regVMFaultCntl:
		if v&abi.REG_GMC_VM_FAULT_CNTL__CLEAR_MASK != 0 {
			m.faultStatus, m.faultAddr = 0, 0
		}
		return false
	case regVMInvalidate:
		if mask := v & (1<<NumVMIDs - 1); mask != 0 {
			m.flushTLBs(mask)
			if m.vm != nil && mask&^1 != 0 {
				m.vm.InvalidateVMIDs(mask &^ 1) // gpuvm takes only its own locks
			}
		}
		return false
	default:
		return false
	}
	var clamped bool
	m.gart, clamped = decodeGART(m.regs)
	m.flushTLBs(1) // VMID 0
	return clamped && m.gart.enabled
}
