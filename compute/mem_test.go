package compute

import (
	"encoding/binary"
	"fmt"
	"sync"

	"vgpu/engine"
)

// testMem is a flat engine.Memory for the CU tests: GPU addresses [base, base+len), with an
// optional retry fault on one page until released.
type testMem struct {
	mu    sync.Mutex
	base  uint64
	b     []byte
	reads int

	retryPage uint64 // non-zero: accesses to this page fail with a retry fault
	retryCh   chan struct{}
}

type retryErr struct{ ch chan struct{} }

func (e retryErr) Error() string                { return "retry fault" }
func (e retryErr) RetryReady() <-chan struct{}  { return e.ch }
func (e retryErr) TranslationFault() bool       { return true }
func newTestMem(base uint64, size int) *testMem { return &testMem{base: base, b: make([]byte, size)} }
func (m *testMem) u64(addr uint64) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return binary.LittleEndian.Uint64(m.b[addr-m.base:])
}
func (m *testMem) setU64(addr, v uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	binary.LittleEndian.PutUint64(m.b[addr-m.base:], v)
}
func (m *testMem) CacheOp(engine.Access, engine.CacheOp, uint64, uint64) error { return nil }
func (m *testMem) FenceCheck(int, uint64)                                      {}

func (m *testMem) span(va uint64, n int) ([]byte, error) {
	if m.retryPage != 0 && va&^0xFFF == m.retryPage {
		select {
		case <-m.retryCh:
			m.retryPage = 0
		default:
			return nil, retryErr{m.retryCh}
		}
	}
	if va < m.base || va-m.base+uint64(n) > uint64(len(m.b)) {
		return nil, fmt.Errorf("address %#x+%d unmapped", va, n)
	}
	return m.b[va-m.base : va-m.base+uint64(n)], nil
}

func (m *testMem) Read(_ engine.Access, va uint64, p []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	s, err := m.span(va, len(p))
	if err != nil {
		return err
	}
	copy(p, s)
	return nil
}

func (m *testMem) Write(_ engine.Access, va uint64, p []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.span(va, len(p))
	if err != nil {
		return err
	}
	copy(s, p)
	return nil
}

// ivs records pushed interrupts.
type ivs struct {
	mu  sync.Mutex
	ivs []engine.IV
}

func (v *ivs) Push(iv engine.IV) { v.mu.Lock(); v.ivs = append(v.ivs, iv); v.mu.Unlock() }
func (v *ivs) all() []engine.IV {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]engine.IV(nil), v.ivs...)
}
