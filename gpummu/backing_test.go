package gpummu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"vgpu/engine"

	"vgpu/abi"
)

var errTestFault = errors.New("test backing: injected failure")

// memBacking is physical memory for tests: a byte slice per domain. A system access outside
// its slice fails, like an unmapped DMA address. A VRAM access outside its slice also fails,
// and is recorded as a violation: the MMU knows the VRAM size and must never ask for more.
// fail, when set, can refuse any access.
type memBacking struct {
	mu         sync.Mutex
	mem        [2][]byte
	fail       func(d engine.Domain, addr uint64, n int, write bool) error
	accesses   int
	violations []string
}

func newMem(sys, vram int) *memBacking {
	m := &memBacking{}
	m.mem[engine.DomainSystem] = make([]byte, sys)
	m.mem[engine.DomainVRAM] = make([]byte, vram)
	return m
}

func (m *memBacking) access(d engine.Domain, addr uint64, p []byte, write bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.accesses++
	n := uint64(len(p))
	switch {
	case d > engine.DomainVRAM:
		m.violations = append(m.violations, fmt.Sprintf("domain %d", d))
		return errors.New("test backing: bad domain")
	case n == 0 || addr > math.MaxUint64-n:
		m.violations = append(m.violations, fmt.Sprintf("malformed access %v:%#x+%d", d, addr, n))
		return errors.New("test backing: malformed access")
	case addr+n > 1<<abi.GPU_VA_BITS:
		m.violations = append(m.violations, fmt.Sprintf("address beyond 48 bits %v:%#x+%d", d, addr, n))
	}
	if m.fail != nil {
		if err := m.fail(d, addr, len(p), write); err != nil {
			return err
		}
	}
	mem := m.mem[d]
	if addr+n > uint64(len(mem)) {
		if d == engine.DomainVRAM {
			m.violations = append(m.violations, fmt.Sprintf("VRAM access beyond its end: %#x+%d", addr, n))
		}
		return fmt.Errorf("test backing: %v:%#x+%d out of range", d, addr, n)
	}
	if write {
		copy(mem[addr:], p)
	} else {
		copy(p, mem[addr:])
	}
	return nil
}

func (m *memBacking) ReadPhys(d engine.Domain, addr uint64, p []byte) error {
	return m.access(d, addr, p, false)
}

func (m *memBacking) WritePhys(d engine.Domain, addr uint64, p []byte) error {
	return m.access(d, addr, p, true)
}

// cpuWrite and cpuRead touch memory as the host CPU does (no cache, no accounting).
func (m *memBacking) cpuWrite(d engine.Domain, addr uint64, p []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	copy(m.mem[d][addr:], p)
}

func (m *memBacking) cpuRead(d engine.Domain, addr uint64, n int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]byte(nil), m.mem[d][addr:addr+uint64(n)]...)
}

func (m *memBacking) putPTE(d engine.Domain, table uint64, idx int, pte uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], pte)
	m.cpuWrite(d, table+uint64(idx)*8, b[:])
}

func (m *memBacking) violationList() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.violations...)
}
