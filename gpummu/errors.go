package gpummu

import (
	"errors"
	"fmt"
	"vgpu/engine"

	"vgpu/abi"
)

// Fault is a translation fault: the GPU address has no usable translation. It is a guest
// mistake; the MMU has latched it in GMC_VM_FAULT_STATUS/ADDR (or counted it as MORE) and the
// engine stops with CP_ERROR_TRANSLATION.
type Fault struct {
	VA     uint64 // the GPU address that did not translate (the first byte of its page piece)
	VMID   int
	Slot   int
	Write  bool
	Reason uint32 // abi.VM_FAULT_*
}

func (f *Fault) Error() string {
	return fmt.Sprintf("gpummu: %s fault at %#x (vmid %d, slot %d): %s",
		dir(f.Write), f.VA, f.VMID, f.Slot, ReasonString(f.Reason))
}

// TranslationFault reports true: the engine stops with CP_ERROR_TRANSLATION (the command
// processor classifies errors by this method).
func (f *Fault) TranslationFault() bool { return true }

// AccessError is a translated access that the memory refused (no DMA mapping, Bus Master off,
// beyond VRAM), or a dirty line that could not be written back. It is latched like a fault, with
// reason VM_FAULT_BACKING; the engine stops with CP_ERROR_MEMORY.
type AccessError struct {
	VA    uint64          // GPU address of the failed piece
	PA    engine.PhysAddr // where it translated
	Write bool
	Err   error // the backing's (or the cache's) error
}

func (e *AccessError) Error() string {
	return fmt.Sprintf("gpummu: %s at %#x (%v) failed: %v", dir(e.Write), e.VA, e.PA, e.Err)
}

// Unwrap returns the cause, so errors.Is works through it.
func (e *AccessError) Unwrap() error { return e.Err }

// TranslationFault reports false: the address translated; memory refused (CP_ERROR_MEMORY).
func (e *AccessError) TranslationFault() bool { return false }

// FaultAddress returns VA (cp reports it for a failed copy).
func (e *AccessError) FaultAddress() uint64 { return e.VA }

// FaultAddress returns VA (cp reports it for a failed copy).
func (f *Fault) FaultAddress() uint64 { return f.VA }

// ErrBeyondVRAM is the cause of an AccessError for a VRAM address at or past the end of VRAM
// (a GART entry pointing there); the Backing is never asked.
var ErrBeyondVRAM = errors.New("gpummu: address beyond the end of VRAM")

// ErrCacheOp is CacheOp's error for a value that is no engine.CacheOp (an engine bug: packets'
// cache fields are decoded by the engine).
var ErrCacheOp = errors.New("gpummu: unknown cache operation")

func dir(write bool) string {
	if write {
		return "write"
	}
	return "read"
}

// ReasonString names an abi.VM_FAULT_* value.
func ReasonString(r uint32) string {
	switch r {
	case abi.VM_FAULT_NONE:
		return "none"
	case abi.VM_FAULT_OUTSIDE:
		return "address in no aperture"
	case abi.VM_FAULT_INVALID_PTE:
		return "GART entry not valid"
	case abi.VM_FAULT_NO_READ:
		return "page not readable"
	case abi.VM_FAULT_NO_WRITE:
		return "page not writeable"
	case abi.VM_FAULT_TABLE:
		return "GART table unreadable"
	case abi.VM_FAULT_BACKING:
		return "memory not backed"
	case abi.VM_FAULT_GART_DISABLED:
		return "GART disabled"
	}
	return fmt.Sprintf("reason %d", r)
}
