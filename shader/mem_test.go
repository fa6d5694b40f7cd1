package shader

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// flatMem is a test Memory: GPU addresses [base, base+len) over a byte slice; anything else
// faults.
type flatMem struct {
	base uint64
	b    []byte
}

var errUnmapped = errors.New("unmapped")

func (m *flatMem) at(addr uint64, size int) ([]byte, error) {
	off := addr - m.base
	if addr < m.base || off+uint64(size) > uint64(len(m.b)) {
		return nil, fmt.Errorf("%#x: %w", addr, errUnmapped)
	}
	return m.b[off : off+uint64(size)], nil
}

func (m *flatMem) Load(addr uint64, size int) (uint64, error) {
	b, err := m.at(addr, size)
	if err != nil {
		return 0, err
	}
	return getLE(b, size), nil
}

func (m *flatMem) Store(addr uint64, size int, v uint64) error {
	b, err := m.at(addr, size)
	if err != nil {
		return err
	}
	putLE(b, size, v)
	return nil
}

func (m *flatMem) Atomic(op AtomicOp, addr uint64, size int, v, cmp uint64) (uint64, error) {
	b, err := m.at(addr, size)
	if err != nil {
		return 0, err
	}
	old := getLE(b, size)
	putLE(b, size, op.Apply(old, v, cmp))
	return old, nil
}

func (m *flatMem) u64(addr uint64) uint64 { return binary.LittleEndian.Uint64(m.b[addr-m.base:]) }

// traps records HELPER_TRAP calls.
type traps struct{ codes []uint32 }

func (t *traps) Trap(l *Lane, pc int, code uint32) { t.codes = append(t.codes, code) }

func (m *flatMem) LoadRange(addr uint64, p []byte, _ int) error {
	b, err := m.at(addr, len(p))
	if err != nil {
		return err
	}
	copy(p, b)
	return nil
}

func (m *flatMem) StoreRange(addr uint64, p []byte, _ int) error {
	b, err := m.at(addr, len(p))
	if err != nil {
		return err
	}
	copy(b, p)
	return nil
}
