package cptest

import (
	"fmt"
	"sync"

	"vgpu/abi"
	"vgpu/cp"
)

// RegWrite is one register write seen by Registers.
type RegWrite struct{ Reg, Value uint32 }

// Registers is a map-backed register BAR for tests, implementing cp.Registers. Like the
// device, it serves every access under one lock (Lock; the Rig shares it with its HQD
// accesses, so a CP that broke the locking rule would deadlock in tests).
type Registers struct {
	Lock *sync.Mutex

	vals   map[uint32]uint32
	writes []RegWrite
	// Hook, when set, sees every access first (Lock held): handled=true means it served it
	// (the value is what a read returns).
	Hook func(reg uint32, v uint32, write bool) (value uint32, handled bool)
	// Deny makes matching registers refuse access (CP_ERROR_BAD_REGISTER).
	Deny func(reg uint32) bool
}

// RegisterCount is the register BAR size in dwords: offsets beyond it are refused.
const RegisterCount = abi.REGS_SIZE / 4

// NewRegisters returns an empty register file with its own lock.
func NewRegisters() *Registers { return &Registers{Lock: new(sync.Mutex), vals: map[uint32]uint32{}} }

// RegError is the error of a refused access.
type RegError struct{ Reg uint32 }

func (e *RegError) Error() string { return fmt.Sprintf("cptest: register %#x refused", e.Reg) }

func (r *Registers) refused(reg uint32) bool {
	return reg >= RegisterCount || r.Deny != nil && r.Deny(reg)
}

// ReadReg implements cp.Registers.
func (r *Registers) ReadReg(reg uint32) (uint32, error) {
	r.Lock.Lock()
	defer r.Lock.Unlock()
	if r.refused(reg) {
		return 0, &RegError{reg}
	}
	if r.Hook != nil {
		if v, ok := r.Hook(reg, 0, false); ok {
			return v, nil
		}
	}
	return r.vals[reg], nil
}

// WriteReg implements cp.Registers.
func (r *Registers) WriteReg(reg uint32, v uint32) error {
	r.Lock.Lock()
	defer r.Lock.Unlock()
	if r.refused(reg) {
		return &RegError{reg}
	}
	r.writes = append(r.writes, RegWrite{reg, v})
	if r.Hook != nil {
		if _, ok := r.Hook(reg, v, true); ok {
			return nil
		}
	}
	r.vals[reg] = v
	return nil
}

// Reset forgets every value and recorded write (Hook and Deny stay).
func (r *Registers) Reset() {
	r.Lock.Lock()
	defer r.Lock.Unlock()
	clear(r.vals)
	r.writes = nil
}

// Get returns a register's value (as a CPU MMIO read would, without the hook).
func (r *Registers) Get(reg uint32) uint32 {
	r.Lock.Lock()
	defer r.Lock.Unlock()
	return r.vals[reg]
}

// Set sets a register's value (as a CPU MMIO write would, without the hook).
func (r *Registers) Set(reg, v uint32) {
	r.Lock.Lock()
	defer r.Lock.Unlock()
	r.vals[reg] = v
}

// Writes returns the writes packets made, in order.
func (r *Registers) Writes() []RegWrite {
	r.Lock.Lock()
	defer r.Lock.Unlock()
	return append([]RegWrite(nil), r.writes...)
}

var _ cp.Registers = (*Registers)(nil)
