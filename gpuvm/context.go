package gpuvm

import "vgpu/abi"

// ctxConfig is a context's registers decoded for the walker. It is immutable: a register
// write stores a new one, so Translate reads it without a lock.
type ctxConfig struct {
	enabled            bool
	cntl               uint32
	depth              int  // levels below the root (0..3)
	blockSize          uint // extra PTB bits (PAGE_TABLE_BLOCK_SIZE)
	root               uint64
	startPage, endPage uint64 // inclusive; endPage < startPage: empty
}

func decodeContext(r ctxRegs) *ctxConfig {
	pages := func(lo, hi uint32) uint64 {
		return (uint64(hi)<<32 | uint64(lo)) & (1<<pageBits - 1)
	}
	return &ctxConfig{
		enabled:   r.cntl&abi.REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK != 0,
		cntl:      r.cntl,
		depth:     int(r.cntl & abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH_MASK >> abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH__SHIFT),
		blockSize: uint(r.cntl & abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_BLOCK_SIZE_MASK >> abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_BLOCK_SIZE__SHIFT),
		root:      uint64(r.baseHi)<<32 | uint64(r.baseLo),
		startPage: pages(r.startLo, r.startHi),
		endPage:   pages(r.endLo, r.endHi),
	}
}

// Level numbering counts up from the leaf: 0 is the PTB, 1 PDB0, 2 PDB1, 3 PDB2. The root is
// level depth.

// shift is log2 of the bytes one entry of level l maps.
func (c *ctxConfig) shift(l int) uint {
	if l == 0 {
		return pageShift
	}
	return pageShift + abi.VM_LEVEL_BITS + c.blockSize + abi.VM_LEVEL_BITS*uint(l-1)
}

// index is the entry of level l that maps rel (a VA relative to the context's start). The
// root takes every VA bit above its shift (amdgpu sizes the root to the VA range), other
// levels 9 bits, the PTB 9+block size bits.
func (c *ctxConfig) index(l int, rel uint64) uint64 {
	s := c.shift(l)
	if s >= 64 {
		return 0
	}
	i := rel >> s
	if l == c.depth {
		return i
	}
	bits := uint(abi.VM_LEVEL_BITS)
	if l == 0 {
		bits += c.blockSize
	}
	return i & (1<<bits - 1)
}

// hugeLevel reports whether a PDE_PTE entry is allowed at level l: PDB0 (2 MiB) and PDB1
// (1 GiB), as on gfx10/11.
func hugeLevel(l int) bool { return l == 1 || l == 2 }

// policy bits of a fault class in CONTEXT_CNTL: interrupt enable and default-page enable.
func (c *ctxConfig) policy(k class) (interrupt, toDefault bool) {
	var ie, de uint32
	switch k {
	case classRange:
		ie, de = abi.REG_VM_CONTEXT_CNTL__RANGE_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK, abi.REG_VM_CONTEXT_CNTL__RANGE_PROTECTION_FAULT_ENABLE_DEFAULT_MASK
	case classPDE, classWalker:
		ie, de = abi.REG_VM_CONTEXT_CNTL__PDE0_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK, abi.REG_VM_CONTEXT_CNTL__PDE0_PROTECTION_FAULT_ENABLE_DEFAULT_MASK
	case classValid, classMarker:
		ie, de = abi.REG_VM_CONTEXT_CNTL__VALID_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK, abi.REG_VM_CONTEXT_CNTL__VALID_PROTECTION_FAULT_ENABLE_DEFAULT_MASK
	case classRead:
		ie, de = abi.REG_VM_CONTEXT_CNTL__READ_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK, abi.REG_VM_CONTEXT_CNTL__READ_PROTECTION_FAULT_ENABLE_DEFAULT_MASK
	case classWrite:
		ie, de = abi.REG_VM_CONTEXT_CNTL__WRITE_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK, abi.REG_VM_CONTEXT_CNTL__WRITE_PROTECTION_FAULT_ENABLE_DEFAULT_MASK
	case classExecute:
		ie, de = abi.REG_VM_CONTEXT_CNTL__EXECUTE_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK, abi.REG_VM_CONTEXT_CNTL__EXECUTE_PROTECTION_FAULT_ENABLE_DEFAULT_MASK
	default: // a disabled context: always interrupt, always halt
		return true, false
	}
	return c.cntl&ie != 0, c.cntl&de != 0
}

// retries reports whether a fault of class k is a retry fault in this context.
func (c *ctxConfig) retries(k class) bool {
	switch k {
	case classPDE, classValid, classRead, classWrite, classExecute:
		return c.cntl&abi.REG_VM_CONTEXT_CNTL__RETRY_PERMISSION_OR_INVALID_PAGE_FAULT_MASK != 0
	case classRange, classWalker:
		return c.cntl&abi.REG_VM_CONTEXT_CNTL__RETRY_OTHER_FAULT_MASK != 0
	}
	return false // no-retry markers and disabled contexts never retry
}
