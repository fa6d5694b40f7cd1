package l2

import "vgpu/abi"

// Register offsets relative to the L2 block.
const (
	regCNTL        = abi.REG_L2_CNTL - abi.BLOCK_L2_BASE
	regStaleReads  = abi.REG_L2_STALE_READS - abi.BLOCK_L2_BASE
	regDirtyFences = abi.REG_L2_DIRTY_FENCES - abi.BLOCK_L2_BASE
	regLastEvent   = abi.REG_L2_LAST_EVENT - abi.BLOCK_L2_BASE
	regLastAddrLo  = abi.REG_L2_LAST_ADDR_LO - abi.BLOCK_L2_BASE
	regLastAddrHi  = abi.REG_L2_LAST_ADDR_HI - abi.BLOCK_L2_BASE
	regLines       = abi.REG_L2_LINES - abi.BLOCK_L2_BASE
	regDirtyLines  = abi.REG_L2_DIRTY_LINES - abi.BLOCK_L2_BASE
	regControl     = abi.REG_L2_CONTROL - abi.BLOCK_L2_BASE
	regStatus      = abi.REG_L2_STATUS - abi.BLOCK_L2_BASE
	regControlDone = abi.REG_L2_CONTROL_DONE - abi.BLOCK_L2_BASE
	regWBErrors    = abi.REG_L2_WB_ERRORS - abi.BLOCK_L2_BASE
	regDiscarded   = abi.REG_L2_DISCARDED - abi.BLOCK_L2_BASE
)

// ReadReg returns the L2 block register at off (bytes from abi.BLOCK_L2_BASE). Unknown offsets
// and write-only registers read 0. It never waits for a memory access in progress.
func (c *Cache) ReadReg(off uint32) uint32 {
	switch off {
	case regCNTL:
		if c.strict.Load() {
			return abi.REG_L2_CNTL__STRICT_MASK
		}
		return 0
	case regLines:
		return uint32(c.nLines.Load())
	case regDirtyLines:
		return uint32(c.nDirty.Load())
	case regWBErrors:
		return uint32(c.counters.writeBackErrors.Load())
	case regDiscarded:
		return uint32(c.counters.lost.Load())
	case regStatus, regControlDone:
		m := c.maint.stats()
		if off == regControlDone {
			return m.Completed
		}
		var v uint32
		if m.Busy {
			v |= abi.REG_L2_STATUS__BUSY_MASK
		}
		if m.Failed {
			v |= abi.REG_L2_STATUS__ERROR_MASK
		}
		return v
	}
	c.events.mu.Lock()
	defer c.events.mu.Unlock()
	last := c.events.last
	switch off {
	case regStaleReads:
		return uint32(c.events.stale)
	case regDirtyFences:
		return uint32(c.events.fences)
	case regLastEvent:
		return last.Kind<<abi.REG_L2_LAST_EVENT__KIND__SHIFT&abi.REG_L2_LAST_EVENT__KIND_MASK |
			uint32(last.Slot)<<abi.REG_L2_LAST_EVENT__SLOT__SHIFT&abi.REG_L2_LAST_EVENT__SLOT_MASK
	case regLastAddrLo:
		return uint32(last.Addr)
	case regLastAddrHi:
		return uint32(last.Addr >> 32)
	}
	return 0
}

// WriteReg writes the L2 block register at off. L2_CNTL sets strict mode; L2_CONTROL WB/INV
// start a write-back / invalidate of the whole cache on another goroutine (StartMaintenance):
// the register write returns at once, L2_STATUS.BUSY reads 1 until it is done. Other offsets
// are ignored.
func (c *Cache) WriteReg(off uint32, v uint32) {
	switch off {
	case regCNTL:
		c.SetStrict(v&abi.REG_L2_CNTL__STRICT_MASK != 0)
	case regControl:
		var op Op
		if v&abi.REG_L2_CONTROL__WB_MASK != 0 {
			op |= OpWriteBack
		}
		if v&abi.REG_L2_CONTROL__INV_MASK != 0 {
			op |= OpInvalidate
		}
		c.StartMaintenance(op)
	}
}
