package cptest

import (
	"encoding/binary"
	"fmt"
	"sync"
	"vgpu/engine"
)

// FaultError is Memory's access error. Translation faults (outside the memory, or a page set
// with SetFault) report TranslationFault() true; pages set with SetBroken fail as access
// errors (CP_ERROR_MEMORY).
type FaultError struct {
	Addr        uint64
	Write       bool
	Translation bool
}

func (e *FaultError) Error() string {
	kind := "read"
	if e.Write {
		kind = "write"
	}
	if e.Translation {
		return fmt.Sprintf("cptest: %s at %#x: translation fault", kind, e.Addr)
	}
	return fmt.Sprintf("cptest: %s at %#x: access failed", kind, e.Addr)
}

// TranslationFault is how cp tells translation faults from other memory errors.
func (e *FaultError) TranslationFault() bool { return e.Translation }

// PageSize is the granularity of SetFault and SetBroken.
const PageSize = 4096

// Event is one recorded engine operation (see Memory.SetTrace).
type Event struct {
	Kind   string // "read", "write", "cache", "fence", "iv"
	Access engine.Access
	Addr   uint64
	Size   uint64
	Op     engine.CacheOp
	Data   uint64 // first bytes written (writes), IV Data[0] (iv)
}

func (e Event) String() string {
	switch e.Kind {
	case "cache":
		return fmt.Sprintf("cache %v %#x+%#x", e.Op, e.Addr, e.Size)
	case "fence":
		return fmt.Sprintf("fence slot %d %#x", e.Access.Slot, e.Addr)
	case "iv":
		return fmt.Sprintf("iv %#x", e.Data)
	}
	return fmt.Sprintf("%s %#x+%d bypass=%v data=%#x", e.Kind, e.Addr, e.Size, e.Access.Bypass, e.Data)
}

// Memory is a flat GPU address space for tests: GPU address va is byte va of a slice (no
// cache: CacheOp and FenceCheck are only counted and traced). It implements engine.Memory. Pages
// can be made to fault. Host-side helpers (Load32, Store32, ...) are the CPU's view: they do
// not wake the CP, as a CPU store does not.
type Memory struct {
	mu      sync.Mutex
	data    []byte
	pages   map[uint64]uint8 // page -> pageFault/pageBroken
	onWrite func()
	trace   bool
	events  []Event

	Reads, Writes, CacheOps, FenceChecks, OutOfRange uint64 // guarded by mu; read with Counters
}

const (
	pageFault = iota + 1
	pageBroken
)

// NewMemory returns size bytes of zeroed memory at GPU addresses [0, size).
func NewMemory(size int) *Memory { return &Memory{data: make([]byte, size)} }

// Reset zeroes the memory and forgets faulting pages, the trace and the counters (the
// SetOnWrite hook stays), so one Memory can serve many fuzz inputs.
func (m *Memory) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.data)
	m.pages, m.trace, m.events = nil, false, nil
	m.Reads, m.Writes, m.CacheOps, m.FenceChecks, m.OutOfRange = 0, 0, 0, 0, 0
}

// Size is the memory size in bytes.
func (m *Memory) Size() uint64 { return uint64(len(m.data)) }

// SetOnWrite installs the hook engine writes call after their data landed (the CP's Wake).
func (m *Memory) SetOnWrite(f func()) {
	m.mu.Lock()
	m.onWrite = f
	m.mu.Unlock()
}

// SetTrace turns the event trace on or off (off clears it).
func (m *Memory) SetTrace(on bool) {
	m.mu.Lock()
	m.trace, m.events = on, nil
	m.mu.Unlock()
}

// Trace returns the recorded events.
func (m *Memory) Trace() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Event(nil), m.events...)
}

func (m *Memory) record(e Event) {
	m.mu.Lock()
	if m.trace {
		m.events = append(m.events, e)
	}
	m.mu.Unlock()
}

// SetFault makes the pages covering [va, va+size) fault on translation.
func (m *Memory) SetFault(va, size uint64) { m.setPages(va, size, pageFault) }

// SetBroken makes the pages covering [va, va+size) fail as access errors.
func (m *Memory) SetBroken(va, size uint64) { m.setPages(va, size, pageBroken) }

func (m *Memory) setPages(va, size uint64, kind uint8) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pages == nil {
		m.pages = map[uint64]uint8{}
	}
	for p := va / PageSize; p <= (va+size-1)/PageSize; p++ {
		m.pages[p] = kind
	}
}

// check validates an access (mu held) and returns its error, if any.
func (m *Memory) check(va uint64, n int, write bool) error {
	end := va + uint64(n)
	if end < va || end > uint64(len(m.data)) {
		m.OutOfRange++
		return &FaultError{Addr: va, Write: write, Translation: true}
	}
	if len(m.pages) != 0 && n > 0 {
		for p := va / PageSize; p <= (end-1)/PageSize; p++ {
			if k := m.pages[p]; k != 0 {
				return &FaultError{Addr: max(va, p*PageSize), Write: write, Translation: k == pageFault}
			}
		}
	}
	return nil
}

// Read implements engine.Memory.
func (m *Memory) Read(a engine.Access, va uint64, p []byte) error {
	m.mu.Lock()
	m.Reads++
	if err := m.check(va, len(p), false); err != nil {
		m.mu.Unlock()
		return err
	}
	copy(p, m.data[va:])
	if m.trace {
		m.events = append(m.events, Event{Kind: "read", Access: a, Addr: va, Size: uint64(len(p))})
	}
	m.mu.Unlock()
	return nil
}

// Write implements engine.Memory; it calls the SetOnWrite hook after the data landed.
func (m *Memory) Write(a engine.Access, va uint64, p []byte) error {
	m.mu.Lock()
	m.Writes++
	if err := m.check(va, len(p), true); err != nil {
		m.mu.Unlock()
		return err
	}
	copy(m.data[va:], p)
	if m.trace {
		var d [8]byte
		copy(d[:], p)
		m.events = append(m.events, Event{Kind: "write", Access: a, Addr: va, Size: uint64(len(p)), Data: binary.LittleEndian.Uint64(d[:])})
	}
	hook := m.onWrite
	m.mu.Unlock()
	if hook != nil {
		hook()
	}
	return nil
}

// CacheOp implements engine.Memory: counted and traced (there is no cache).
func (m *Memory) CacheOp(a engine.Access, op engine.CacheOp, va, size uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.CacheOps++
	if m.trace {
		m.events = append(m.events, Event{Kind: "cache", Access: a, Op: op, Addr: va, Size: size})
	}
	return nil
}

// FenceCheck implements engine.Memory: counted and traced.
func (m *Memory) FenceCheck(slot int, va uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.FenceChecks++
	if m.trace {
		m.events = append(m.events, Event{Kind: "fence", Access: engine.Access{Slot: slot}, Addr: va})
	}
}

// Counters returns Reads, Writes, CacheOps, FenceChecks and OutOfRange.
func (m *Memory) Counters() (reads, writes, cacheOps, fenceChecks, outOfRange uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Reads, m.Writes, m.CacheOps, m.FenceChecks, m.OutOfRange
}

// Host-side (CPU) access. They panic on out-of-range addresses: test bugs, not CP behaviour.

// Load32 reads the dword at va.
func (m *Memory) Load32(va uint64) uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return binary.LittleEndian.Uint32(m.data[va:])
}

// Load64 reads the qword at va.
func (m *Memory) Load64(va uint64) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return binary.LittleEndian.Uint64(m.data[va:])
}

// Store32 writes the dword at va.
func (m *Memory) Store32(va uint64, v uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	binary.LittleEndian.PutUint32(m.data[va:], v)
}

// Store64 writes the qword at va.
func (m *Memory) Store64(va uint64, v uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	binary.LittleEndian.PutUint64(m.data[va:], v)
}

// StoreDwords writes dws from va.
func (m *Memory) StoreDwords(va uint64, dws []uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, d := range dws {
		binary.LittleEndian.PutUint32(m.data[va+uint64(i)*4:], d)
	}
}

// Bytes returns a copy of [va, va+n).
func (m *Memory) Bytes(va uint64, n int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]byte(nil), m.data[va:va+uint64(n)]...)
}

// SetBytes copies p to va.
func (m *Memory) SetBytes(va uint64, p []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	copy(m.data[va:], p)
}
