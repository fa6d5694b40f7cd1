package l2

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"vgpu/engine"
)

// lockedCond is a set's lock and the condition its busy lines' owners broadcast on release.
type lockedCond struct {
	sync.Mutex
	cond    sync.Cond
	waiters int // goroutines in wait: a release broadcasts only when there are any
}

func (m *lockedCond) init() { m.cond.L = &m.Mutex }

// wait releases the lock until a busy line of the set is released. Called with the lock.
func (m *lockedCond) wait() {
	m.waiters++
	m.cond.Wait()
	m.waiters--
}

func (m *lockedCond) broadcast() {
	if m.waiters > 0 {
		m.cond.Broadcast()
	}
}

const unsafeSizeofSetState = unsafe.Sizeof(setState{})

type key struct {
	domain engine.Domain
	addr   uint64 // line-aligned
}

func (k key) less(o key) bool {
	if k.domain != o.domain {
		return k.domain < o.domain
	}
	return k.addr < o.addr
}

func cmpKey(a, b key) int {
	switch {
	case a.less(b):
		return -1
	case b.less(a):
		return 1
	}
	return 0
}

// line is one line of a set. dirty is a byte mask: only bytes the engines wrote are written
// back, so a CPU write to other bytes of the same line (a neighbouring write-back slot, say)
// is not clobbered, as with a real GL2's byte-masked write-back.
//
// A busy line is owned by one goroutine that moves its bytes to or from memory without the
// set's lock: a fill (data not valid yet), a write-back, an uncached access that must be
// atomic with it, a strict-mode check. Nobody else reads or changes a busy line's state (its
// dirty bytes may be read, under the set's lock), evicts it or drops it; they wait on the
// set's idle condition. Only the owner clears busy (release) or removes the line.
type line struct {
	key     key
	busy    bool
	leaving bool      // busy being evicted: no longer counts against the set's ways
	used    uint64    // set clock at the last access: the least recently used line is evicted
	dirty   [2]uint64 // bit i: byte i was written by an engine and not yet written back
	writers uint64    // slotBit of each slot whose writes are dirty in this line
	data    [LineBytes]byte
}

func (l *line) isDirty() bool { return l.dirty[0]|l.dirty[1] != 0 }

func (l *line) dirtyByte(i uint64) bool { return l.dirty[i/64]&(1<<(i%64)) != 0 }

// byteMask is the dirty mask of bytes [off, off+n) of a line (n > 0, off+n <= LineBytes).
func byteMask(off, n uint64) [2]uint64 {
	end := off + n
	return [2]uint64{
		below(min(end, 64)) &^ below(min(off, 64)),
		below(max(end, 64)-64) &^ below(max(off, 64)-64),
	}
}

// below is the mask of bits [0, k), k <= 64 (a shift by 64 is 0 in Go, so 64 gives all ones).
func below(k uint64) uint64 { return 1<<k - 1 }

// slotBits is the width of the per-line writer mask: slots 0..62 have their own bit, every
// other slot number (including negative ones used by non-queue clients) shares bit 63.
const slotBits = 64

func slotIndex(slot int) int {
	if slot < 0 || slot >= slotBits-1 {
		return slotBits - 1
	}
	return slot
}

// setState is one set: its lines (resident, being filled, being evicted) under its own lock,
// which is never held across a memory access.
type setState struct {
	mu      lockedCond
	lines   []*line
	spare   []*line
	clock   uint64 // LRU clock, advanced by each access
	leaving int    // lines being evicted (busy, still findable)
	hits    uint64
	misses  uint64
	// held is len(lines), written under mu and readable without it, so a whole-cache
	// operation passes over empty sets without taking their locks.
	held atomic.Int32
}

// set pads setState to whole cache lines: neighbouring sets serve neighbouring lines, often
// for different queues on different cores.
type set struct {
	setState
	_ [(64 - unsafeSizeofSetState%64) % 64]byte
}

// find returns the line of k, or nil. A line found is moved to the front, so an engine
// hitting the same line again finds it first (the order means nothing else: LRU is by used).
func (s *set) find(k key) *line {
	for i, l := range s.lines {
		if l.key == k {
			if i > 0 {
				s.lines[0], s.lines[i] = l, s.lines[0]
			}
			return l
		}
	}
	return nil
}

func (s *set) touch(l *line) {
	s.clock++
	l.used = s.clock
}

// release ends the caller's ownership of l. Called with s.mu held.
func (s *set) release(l *line) {
	l.busy = false
	s.mu.broadcast()
}

// victim returns the least recently used line that may be evicted (not busy, not keep).
func (s *set) victim(keep *line) *line {
	var v *line
	for _, l := range s.lines {
		if l != keep && !l.busy && (v == nil || l.used < v.used) {
			v = l
		}
	}
	return v
}

// lockIdle locks s and waits until none of its lines is busy.
func (s *set) lockIdle() {
	s.mu.Lock()
	for {
		busy := false
		for _, l := range s.lines {
			busy = busy || l.busy
		}
		if !busy {
			return
		}
		s.mu.wait()
	}
}

// findIdle returns the line of k once it is not busy, or nil. Called with s.mu held (which it
// may release while it waits).
func (s *set) findIdle(k key) *line {
	for {
		l := s.find(k)
		if l == nil || !l.busy {
			return l
		}
		s.mu.wait()
	}
}
