package l2

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"vgpu/engine"
)

var errTestFault = errors.New("test backing: injected failure")

// memBacking is physical memory for tests: one byte slice per domain. Accesses beyond a
// domain's slice fail (like an unmapped DMA address or an offset beyond VRAM). fail, when set,
// can refuse any access. Every access is recorded.
type memBacking struct {
	mu   sync.Mutex
	mem  [engine.NumDomains][]byte
	fail func(d engine.Domain, addr uint64, n int, write bool) error
	ops  []string // "R sys:0x80+128", in order
	keep bool     // record ops
}

func newMem(sys, vram int) *memBacking {
	m := &memBacking{}
	m.mem[engine.DomainSystem] = make([]byte, sys)
	m.mem[engine.DomainVRAM] = make([]byte, vram)
	return m
}

func (m *memBacking) span(d engine.Domain, addr uint64, n int) ([]byte, error) {
	if d >= engine.NumDomains {
		return nil, fmt.Errorf("test backing: bad domain %d", d)
	}
	mem := m.mem[d]
	if n == 0 || addr > math.MaxUint64-uint64(n) || addr+uint64(n) > uint64(len(mem)) {
		return nil, fmt.Errorf("test backing: %v:%#x+%d out of range", d, addr, n)
	}
	return mem[addr : addr+uint64(n)], nil
}

func (m *memBacking) access(d engine.Domain, addr uint64, p []byte, write bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keep {
		dir := "R"
		if write {
			dir = "W"
		}
		m.ops = append(m.ops, fmt.Sprintf("%s %v:%#x+%d", dir, d, addr, len(p)))
	}
	if m.fail != nil {
		if err := m.fail(d, addr, len(p), write); err != nil {
			return err
		}
	}
	b, err := m.span(d, addr, len(p))
	if err != nil {
		return err
	}
	if write {
		copy(b, p)
	} else {
		copy(p, b)
	}
	return nil
}

func (m *memBacking) ReadPhys(d engine.Domain, addr uint64, p []byte) error {
	return m.access(d, addr, p, false)
}

func (m *memBacking) WritePhys(d engine.Domain, addr uint64, p []byte) error {
	return m.access(d, addr, p, true)
}

// cpuWrite changes memory behind the cache, as the host CPU does.
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

func (m *memBacking) takeOps() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.ops
	m.ops = nil
	return o
}
