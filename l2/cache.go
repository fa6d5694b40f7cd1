package l2

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"sync/atomic"

	"vgpu/abi"
	"vgpu/engine"
	"vgpu/trace"
)

// LineBytes is the size of one cache line (abi.L2_LINE_BYTES): the unit of fill, eviction and
// every range operation.
const LineBytes = abi.L2_LINE_BYTES

// MaxLines bounds the cache at 4 MiB (32768 lines of 128 bytes), the size of a mid-range GL2.
// It bounds the memory the model holds and the work of a whole-cache write-back.
const MaxLines = 32768

// MaxWays is the associativity: the cache is MaxWays-way set associative (16, as GL2), and a
// fill into a full set evicts that set's least recently used line. A cache of fewer lines is
// one fully associative set.
const MaxWays = 16

const (
	lineMask  = LineBytes - 1
	lineShift = 7
)

// The set index arithmetic assumes 128-byte lines.
var _ [LineBytes - 1<<lineShift]struct{}
var _ [1<<lineShift - LineBytes]struct{}

// areaShift sets the granularity (64 KiB) at which the cache counts its lines, in
// areaStripes hashed counters, so an uncached access or a copy can tell with a few atomic
// loads that no line overlaps its range (the common case), without looking at any set.
const (
	areaShift   = 16
	areaStripes = 4096
)

// domainSkew spreads the two domains' equal addresses over different sets and area stripes.
const domainSkew = 0x9E3779B97F4A7C15

func stripeOf(d engine.Domain, area uint64) int {
	return int((area ^ uint64(d)*domainSkew) % areaStripes)
}

// Backing is the physical memory below the cache. Errors are access failures (unmapped DMA
// address, Bus Master off, beyond VRAM); the cache never interprets them, only passes them on.
// An implementation must not call back into the cache.
//
// The cache never holds a lock across a Backing call. If the Backing also implements
// DirectBacking, lines are filled and written back only through it, so a line is owned by one
// goroutine (see package doc) only across a bounded memory copy; ReadPhys/WritePhys (which may
// wait, e.g. for a DMA message answered by the client) serve only uncached accesses, with no
// line owned. A Backing without DirectBacking is used for everything, so it must never wait
// (plain memory, as in tests).
type Backing interface {
	ReadPhys(d engine.Domain, addr uint64, p []byte) error
	WritePhys(d engine.Domain, addr uint64, p []byte) error
}

// DirectBacking is the part of a Backing that never waits: it moves bytes with a memory copy,
// or refuses with an error wrapping ErrNotDirect (having moved nothing) when the memory is
// reachable only through a path that may wait. Memory that is not direct is never cached:
// accesses to it go to ReadPhys/WritePhys uncached.
type DirectBacking interface {
	ReadDirect(d engine.Domain, addr uint64, p []byte) error
	WriteDirect(d engine.Domain, addr uint64, p []byte) error
}

// ErrNotDirect is returned by CopyUncached and DirectCopier.CopyPhys when the copy cannot be
// done in one direct step (no direct path to the memory, message-served DMA, a line of the
// cache overlaps the ranges, an access the memory would refuse): nothing was moved, and the
// caller copies through ReadUncached/WriteUncached instead, which report the precise failure.
var ErrNotDirect = errors.New("l2: no direct copy path")

// DirectCopier is an optional interface of a Backing: copy n bytes of memory from src to dst
// with one memory copy. It either moves every byte and returns nil, or returns an error
// wrapping ErrNotDirect (having moved nothing, or only what a repeat copy overwrites). It must
// never wait, like DirectBacking.
type DirectCopier interface {
	CopyPhys(dst, src engine.PhysAddr, n uint64) error
}

// Range is a physical address range [Addr, Addr+Size) in one domain. A range that runs past
// the end of the address space stops there. Operations affect every line the range touches.
type Range struct {
	Domain engine.Domain
	Addr   uint64
	Size   uint64
}

// Errors of malformed requests (they come from the MMU, never straight from the guest).
var (
	// ErrDomain: the address names neither engine.DomainSystem nor engine.DomainVRAM.
	ErrDomain = errors.New("l2: unknown memory domain")
	// ErrAddressOverflow: the access runs past the end of the 64-bit address space.
	ErrAddressOverflow = errors.New("l2: access wraps the address space")
)

// WriteBackError reports a dirty line that could not be written to its backing memory. The
// line's data is lost (the cache drops it): the memory it belonged to is gone.
type WriteBackError struct {
	PA  engine.PhysAddr // first byte that failed to write
	Err error           // the Backing's error
}

func (e *WriteBackError) Error() string {
	return fmt.Sprintf("l2: write-back to %v failed: %v", e.PA, e.Err)
}

func (e *WriteBackError) Unwrap() error { return e.Err }

// Cache is the GPU's L2: a write-back, write-allocate, set-associative cache of LineBytes
// lines over a Backing, with deterministic LRU replacement in each set. All methods are safe
// for concurrent use; accesses to lines of different sets never wait for each other.
type Cache struct {
	b       Backing
	direct  DirectBacking // b's never-waiting path, or nil when b itself never waits
	copier  DirectCopier  // b's one-copy path, or nil
	log     *slog.Logger
	ways    int
	setMask uint64
	sets    []set
	areas   [areaStripes]atomic.Int32 // lines (any state) per area stripe
	// writing counts the uncached writes in progress per area stripe (memory written behind
	// the lines, until those lines are updated or dropped): strict mode does not call a
	// difference stale while one is (the reader is concurrent with the write).
	writing  [areaStripes]atomic.Int32
	slotDirt [slotBits]atomic.Int64 // per slot: dirty lines it wrote

	// Everything below is readable without any set lock, so register reads never wait.
	strict   atomic.Bool
	nLines   atomic.Int64
	nDirty   atomic.Int64
	counters struct {
		evictions, writeBacks, writeBackErrors, fillErrors, discards atomic.Uint64
		slowAccesses                                                 atomic.Uint64
		// lost counts dirty lines dropped because their memory went away (DropLost); unlike
		// the others it survives Reset, so a report after a reconnect still shows it.
		lost atomic.Uint64
	}
	events events
	maint  maintenance

	trace *trace.Recorder // the timeline (trace.go; nil: off)
}

// New returns an empty cache of MaxLines lines over b. A nil log discards messages.
func New(b Backing, log *slog.Logger) *Cache { return NewSize(b, MaxLines, log) }

// NewSize is New with a capacity of about lines lines, clamped to [1, MaxLines]: MaxWays-way
// sets, as many as a power of two fits (Capacity says how many lines that is), or one fully
// associative set below MaxWays lines. Small caches make eviction easy to exercise in tests.
func NewSize(b Backing, lines int, log *slog.Logger) *Cache {
	lines = max(1, min(lines, MaxLines))
	ways := min(MaxWays, lines)
	sets := 1 << (bits.Len(uint(lines/ways)) - 1)
	return newGeometry(b, sets, ways, log)
}

// newGeometry returns a cache of sets sets (a power of two) of ways lines.
func newGeometry(b Backing, sets, ways int, log *slog.Logger) *Cache {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cache{b: b, log: log, ways: ways, setMask: uint64(sets - 1), sets: make([]set, sets)}
	c.direct, _ = b.(DirectBacking)
	c.copier, _ = b.(DirectCopier)
	for i := range c.sets {
		c.sets[i].mu.init()
	}
	c.events.init(log)
	return c
}

// Capacity returns the number of lines the cache holds at most.
func (c *Cache) Capacity() int { return c.ways * len(c.sets) }

func (c *Cache) setOf(k key) *set {
	return &c.sets[(k.addr>>lineShift^uint64(k.domain)*domainSkew)&c.setMask]
}

// SetStrict turns strict mode (L2_CNTL.STRICT) on or off: stale-read checks on read hits and
// dirty-fence checks in FenceCheck. It is off after New.
func (c *Cache) SetStrict(on bool) { c.strict.Store(on) }

// Strict reports whether strict mode is on.
func (c *Cache) Strict() bool { return c.strict.Load() }

// Read copies len(p) bytes at pa into p through the cache: hits are served from the line,
// misses fill the whole line from the Backing first. slot is the reading queue and va the GPU
// address of p[0]; both are used only for strict-mode reports. An access may span lines (the
// MMU passes at most one page). Errors come from the Backing, unwrapped.
func (c *Cache) Read(slot int, pa engine.PhysAddr, va uint64, p []byte) error {
	if inOneLine(pa, len(p)) {
		return c.accessLine(slot, pa.Domain, pa.Addr, va, p, false)
	}
	return c.access(slot, pa, va, p, false)
}

// Write copies p into the cache at pa: the line is filled first if absent (write-allocate),
// modified, and marked dirty with slot as a writer. Memory sees the data only on write-back
// (WriteBack, Invalidate, Apply) or eviction.
func (c *Cache) Write(slot int, pa engine.PhysAddr, va uint64, p []byte) error {
	if inOneLine(pa, len(p)) {
		return c.accessLine(slot, pa.Domain, pa.Addr, va, p, true)
	}
	return c.access(slot, pa, va, p, true)
}

// inOneLine reports whether an access of n > 0 bytes at pa lies inside one line of a known
// domain (the usual engine access, served without splitting).
func inOneLine(pa engine.PhysAddr, n int) bool {
	return pa.Domain < engine.NumDomains && n > 0 && pa.Addr&lineMask+uint64(n) <= LineBytes
}

func checkAccess(pa engine.PhysAddr, n int) error {
	if pa.Domain >= engine.NumDomains {
		return ErrDomain
	}
	if n > 0 && uint64(n-1) > math.MaxUint64-pa.Addr {
		return ErrAddressOverflow
	}
	return nil
}

func (c *Cache) access(slot int, pa engine.PhysAddr, va uint64, p []byte, write bool) error {
	if err := checkAccess(pa, len(p)); err != nil {
		return err
	}
	addr := pa.Addr
	for len(p) > 0 {
		n := min(uint64(len(p)), LineBytes-addr&lineMask)
		if err := c.accessLine(slot, pa.Domain, addr, va, p[:n], write); err != nil {
			return err
		}
		addr += n
		va += n
		p = p[n:]
	}
	return nil
}

// accessLine serves an access that lies inside one line.
func (c *Cache) accessLine(slot int, d engine.Domain, addr, va uint64, p []byte, write bool) error {
	k := key{d, addr &^ lineMask}
	off := addr - k.addr
	s := c.setOf(k)
	s.mu.Lock()
	for {
		l := s.find(k)
		if l == nil {
			break
		}
		if l.busy {
			s.mu.wait()
			continue
		}
		s.hits++
		s.touch(l)
		if write {
			copy(l.data[off:], p)
			c.setDirty(l, off, uint64(len(p)), slot)
			s.mu.Unlock()
			return nil
		}
		copy(p, l.data[off:])
		if !c.strict.Load() {
			s.mu.Unlock()
			return nil
		}
		l.busy = true // the check reads memory: own the line so its state cannot change meanwhile
		s.mu.Unlock()
		c.checkStale(l, off, uint64(len(p)), slot, va)
		s.mu.Lock()
		s.release(l)
		s.mu.Unlock()
		return nil
	}

	// Miss: claim the key with a busy line (later accesses to it wait for the fill), fill it
	// without the lock, then evict what the set holds beyond its ways.
	s.misses++
	l := c.insert(s, k)
	s.mu.Unlock()
	err := c.readDirect(d, k.addr, l.data[:])
	s.mu.Lock()
	if err != nil {
		c.remove(s, l, false)
		s.mu.Unlock()
		// The line as a whole is not backed (it straddles the end of VRAM or of a DMA
		// mapping, or the memory is gone), or it is memory the cache never holds (reached
		// only by a path that may wait): serve the requested bytes uncached, which is
		// coherent because the line is not resident. Their own error, if any, is returned.
		if !errors.Is(err, ErrNotDirect) {
			c.counters.fillErrors.Add(1)
			if err = c.moveDirect(d, addr, p, write); !errors.Is(err, ErrNotDirect) {
				return err
			}
		}
		return c.moveSlow(d, addr, p, write)
	}
	c.nLines.Add(1)
	s.touch(l)
	if write {
		copy(l.data[off:], p)
		c.setDirty(l, off, uint64(len(p)), slot)
	} else {
		copy(p, l.data[off:])
	}
	s.release(l)
	c.evictOver(s, l)
	return nil
}

// insert adds a busy line for k to s, owned by the caller. Called with s.mu held.
func (c *Cache) insert(s *set, k key) *line {
	var l *line
	if n := len(s.spare); n > 0 {
		l = s.spare[n-1]
		s.spare = s.spare[:n-1]
	} else {
		l = new(line)
	}
	l.key, l.busy, l.leaving, l.dirty, l.writers = k, true, false, [2]uint64{}, 0
	s.lines = append(s.lines, l)
	s.held.Store(int32(len(s.lines)))
	c.areas[stripeOf(k.domain, k.addr>>areaShift)].Add(1)
	return l
}

// remove takes l out of s: l is not busy, or busy and owned by the caller; it is clean.
// resident says whether it counted as a line (it was filled). Called with s.mu held.
func (c *Cache) remove(s *set, l *line, resident bool) {
	for i, x := range s.lines {
		if x == l {
			last := len(s.lines) - 1
			s.lines[i] = s.lines[last]
			s.lines[last] = nil
			s.lines = s.lines[:last]
			s.held.Store(int32(last))
			break
		}
	}
	c.areas[stripeOf(l.key.domain, l.key.addr>>areaShift)].Add(-1)
	if resident {
		c.nLines.Add(-1)
	}
	s.release(l) // waiters look again and miss
	s.spare = append(s.spare, l)
}

// evictOver evicts the least recently used lines of s (but not keep) while it holds more than
// its ways, writing dirty ones back without the lock. A failed write-back is counted and
// logged (the access that caused the eviction is not at fault). Called with s.mu held; it
// returns with s.mu released.
func (c *Cache) evictOver(s *set, keep *line) {
	for len(s.lines)-s.leaving > c.ways {
		v := s.victim(keep)
		if v == nil {
			break // every other line is busy: the set stays over its ways until a later fill
		}
		c.counters.evictions.Add(1)
		if !v.isDirty() {
			c.remove(s, v, true)
			continue
		}
		v.busy, v.leaving = true, true
		s.leaving++
		s.mu.Unlock()
		_ = c.writeLine(v) // counted and logged inside; the line goes either way
		s.mu.Lock()
		c.clearDirty(v, 0, LineBytes)
		s.leaving--
		c.remove(s, v, true)
	}
	s.mu.Unlock()
}

// writeLine writes the dirty bytes of l, which the caller owns, to memory, run by run, without
// any lock; the caller then marks it clean. A failure is counted and logged: the line's
// remaining dirty data cannot go anywhere.
func (c *Cache) writeLine(l *line) error {
	var first error
	for i := uint64(0); i < LineBytes; {
		if !l.dirtyByte(i) {
			i++
			continue
		}
		j := i + 1
		for j < LineBytes && l.dirtyByte(j) {
			j++
		}
		// A line's memory was direct when it was filled; if it is not any more (the mapping was
		// replaced by one served through messages), the memory it belonged to is gone.
		if err := c.writeDirect(l.key.domain, l.key.addr+i, l.data[i:j]); err != nil && first == nil {
			pa := engine.PhysAddr{Domain: l.key.domain, Addr: l.key.addr + i}
			first = &WriteBackError{PA: pa, Err: err}
		}
		i = j
	}
	if first != nil {
		c.counters.writeBackErrors.Add(1)
		c.events.writeBackFailed(first)
		return first
	}
	c.counters.writeBacks.Add(1)
	return nil
}

// writeBackHeld writes back l (dirty, not busy), owning it meanwhile, and marks it clean.
// Called with s.mu held, which it releases across the write and holds again on return.
func (c *Cache) writeBackHeld(s *set, l *line) error {
	l.busy = true
	s.mu.Unlock()
	err := c.writeLine(l)
	s.mu.Lock()
	c.clearDirty(l, 0, LineBytes)
	s.release(l)
	return err
}

// readDirect and writeDirect are the cache's never-waiting memory accesses (an error wrapping
// ErrNotDirect means the memory needs the slow path).
func (c *Cache) readDirect(d engine.Domain, addr uint64, p []byte) error {
	if c.direct != nil {
		return c.direct.ReadDirect(d, addr, p)
	}
	return c.b.ReadPhys(d, addr, p)
}

func (c *Cache) writeDirect(d engine.Domain, addr uint64, p []byte) error {
	if c.direct != nil {
		return c.direct.WriteDirect(d, addr, p)
	}
	return c.b.WritePhys(d, addr, p)
}

func (c *Cache) moveDirect(d engine.Domain, addr uint64, p []byte, write bool) error {
	if write {
		return c.writeDirect(d, addr, p)
	}
	return c.readDirect(d, addr, p)
}

// moveSlow is an uncached access to memory that is not direct, made with no line owned.
func (c *Cache) moveSlow(d engine.Domain, addr uint64, p []byte, write bool) error {
	c.counters.slowAccesses.Add(1)
	if write {
		return c.b.WritePhys(d, addr, p)
	}
	return c.b.ReadPhys(d, addr, p)
}

// checkStale compares the bytes just served from l (owned by the caller) with memory. Bytes
// the engines wrote (dirty) are newer than memory by design; any other difference means memory
// changed behind the cache (a CPU write, or a bypass write by another device path) and the
// reader got old data.
func (c *Cache) checkStale(l *line, off, n uint64, slot int, va uint64) {
	var buf [LineBytes]byte
	mem := buf[:n]
	if err := c.readDirect(l.key.domain, l.key.addr+off, mem); err != nil {
		return // memory unreadable now: nothing to compare with
	}
	if c.writing[stripeOf(l.key.domain, l.key.addr>>areaShift)].Load() != 0 {
		return // an engine's uncached write is changing memory here: not a stale read
	}
	for i := range n {
		if !l.dirtyByte(off+i) && mem[i] != l.data[off+i] {
			c.events.staleRead(slot, va, engine.PhysAddr{Domain: l.key.domain, Addr: l.key.addr + off})
			return
		}
	}
}

// setDirty marks bytes [off, off+n) of l dirty, written by slot. Called with the set's lock.
func (c *Cache) setDirty(l *line, off, n uint64, slot int) {
	if !l.isDirty() {
		c.nDirty.Add(1)
	}
	m := byteMask(off, n)
	l.dirty[0] |= m[0]
	l.dirty[1] |= m[1]
	bit := uint64(1) << slotIndex(slot)
	if l.writers&bit == 0 {
		l.writers |= bit
		c.slotDirt[slotIndex(slot)].Add(1)
	}
}

// clearDirty marks bytes [off, off+n) of l clean; when no dirty byte remains the line stops
// counting against its writers. Called with the set's lock.
func (c *Cache) clearDirty(l *line, off, n uint64) {
	if !l.isDirty() {
		return
	}
	m := byteMask(off, n)
	l.dirty[0] &^= m[0]
	l.dirty[1] &^= m[1]
	if l.isDirty() {
		return
	}
	c.nDirty.Add(-1)
	for w := l.writers; w != 0; w &= w - 1 {
		c.slotDirt[bits.TrailingZeros64(w)].Add(-1)
	}
	l.writers = 0
}

// drop removes l (not busy) without writing it back. Called with s.mu held.
func (c *Cache) drop(s *set, l *line) {
	if l.isDirty() {
		c.counters.discards.Add(1)
		c.clearDirty(l, 0, LineBytes)
	}
	c.remove(s, l, true)
}

// Reset drops every line without writing anything back and zeroes the counters and the last
// event (device reset: the L2's contents are lost, as on hardware). Strict mode is left as it
// is; the owner of L2_CNTL sets it. A fill or write-back in progress (a bounded memory copy)
// finishes first.
func (c *Cache) Reset() {
	for i := range c.sets {
		s := &c.sets[i]
		s.lockIdle()
		for _, l := range s.lines {
			c.areas[stripeOf(l.key.domain, l.key.addr>>areaShift)].Add(-1)
			if l.isDirty() {
				c.nDirty.Add(-1)
			}
		}
		s.lines, s.spare = nil, nil
		s.held.Store(0)
		s.clock, s.hits, s.misses = 0, 0, 0
		s.mu.Unlock()
	}
	for i := range c.slotDirt {
		c.slotDirt[i].Store(0)
	}
	c.nLines.Store(0)
	c.nDirty.Store(0)
	c.counters.evictions.Store(0)
	c.counters.writeBacks.Store(0)
	c.counters.writeBackErrors.Store(0)
	c.counters.fillErrors.Store(0)
	c.counters.discards.Store(0)
	c.counters.slowAccesses.Store(0)
	c.events.reset()
	c.maint.reset()
}

// DropLost drops every line in r (nil: the whole cache) without writing it back, because the
// memory behind it went away (the client that mapped it disconnected, or unmapped it): there
// is nowhere to write the data. Dirty lines are counted (Stats.Lost, L2_DISCARDED, kept across
// Reset) and logged once per call (rate-limited), and their number is returned. The caller
// makes sure nothing can refill the range with old data first (DMA is cut off).
func (c *Cache) DropLost(r *Range) int {
	dirty := 0
	for _, k := range c.collect(r) {
		s := c.setOf(k)
		s.mu.Lock()
		if l := s.findIdle(k); l != nil {
			if l.isDirty() {
				dirty++
				c.clearDirty(l, 0, LineBytes)
			}
			c.remove(s, l, true)
		}
		s.mu.Unlock()
	}
	if dirty > 0 {
		c.counters.lost.Add(uint64(dirty))
		c.events.lostLines(r, dirty)
	}
	return dirty
}
