package l2

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"vgpu/engine"

	"vgpu/abi"
)

// LineBytes is the size of one cache line (abi.L2_LINE_BYTES): the unit of fill, eviction and
// every range operation.
const LineBytes = abi.L2_LINE_BYTES

// MaxLines bounds the cache at 4 MiB (32768 lines of 128 bytes), the size of a mid-range GL2.
// It bounds the memory the model holds and the work of a whole-cache write-back; beyond it the
// least recently used line is evicted.
const MaxLines = 32768

const lineMask = LineBytes - 1

// areaShift sets the granularity (64 KiB) at which the cache counts its resident lines, so
// CopyUncached can tell cheaply that no line overlaps a large range.
const areaShift = 16

func areaOf(k key) key { return key{k.domain, k.addr >> areaShift} }

// Backing is the physical memory below the cache. Errors are access failures (unmapped DMA
// address, Bus Master off, beyond VRAM); the cache never interprets them, only passes them on.
// An implementation must not call back into the cache.
//
// If the Backing also implements DirectBacking, the cache calls ReadPhys/WritePhys only without
// its lock (they may wait, e.g. for a DMA message answered by the client) and DirectBacking's
// methods with it. A Backing without DirectBacking is called with the lock held, so it must
// never wait (plain memory, as in tests).
type Backing interface {
	ReadPhys(d engine.Domain, addr uint64, p []byte) error
	WritePhys(d engine.Domain, addr uint64, p []byte) error
}

// DirectBacking is the part of a Backing that never waits: it moves bytes with a memory copy,
// or refuses with an error wrapping ErrNotDirect (having moved nothing) when the memory is
// reachable only through a path that may wait. The cache holds its lock only across these
// calls. Memory that is not direct is never cached: accesses to it go to ReadPhys/WritePhys
// uncached, without the lock.
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
// wrapping ErrNotDirect (having moved nothing, or only what a repeat copy overwrites). It is
// called with the cache's lock held, like the other Backing methods.
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

// line is one resident cache line. dirty is a byte mask: only bytes the engines wrote are
// written back, so a CPU write to other bytes of the same line (a neighbouring write-back slot,
// say) is not clobbered, as with a real GL2's byte-masked write-back.
type line struct {
	key        key
	data       [LineBytes]byte
	dirty      [2]uint64 // bit i: byte i was written by an engine and not yet written back
	writers    uint64    // slotBit of each slot whose writes are dirty in this line
	prev, next *line     // LRU list, most recent first
}

func (l *line) isDirty() bool { return l.dirty[0]|l.dirty[1] != 0 }

func (l *line) dirtyByte(i uint64) bool { return l.dirty[i/64]&(1<<(i%64)) != 0 }

// slotBits is the width of the per-line writer mask: slots 0..62 have their own bit, every
// other slot number (including negative ones used by non-queue clients) shares bit 63.
const slotBits = 64

func slotIndex(slot int) int {
	if slot < 0 || slot >= slotBits-1 {
		return slotBits - 1
	}
	return slot
}

// Cache is the GPU's L2: a write-back, write-allocate cache of LineBytes lines over a Backing,
// with deterministic LRU replacement. All methods are safe for concurrent use.
type Cache struct {
	b        Backing
	direct   DirectBacking // b's never-waiting path, or nil when b itself never waits
	log      *slog.Logger
	capacity int

	// mu guards the lines and is held across DirectBacking calls (see doc.go for why), never
	// across a Backing call that may wait.
	mu        sync.Mutex
	lines     map[key]*line
	areas     map[key]int // resident lines per area (key.addr = address >> areaShift)
	lru       line        // sentinel: lru.next is the most recent line, lru.prev the least recent
	spare     []*line
	slotDirty [slotBits]int // per slot: dirty lines it wrote
	scratch   [LineBytes]byte

	// Everything below is readable without mu, so register reads never wait for memory.
	strict   atomic.Bool
	nLines   atomic.Int64
	nDirty   atomic.Int64
	counters struct {
		hits, misses, evictions, writeBacks, writeBackErrors, fillErrors, discards atomic.Uint64
		slowAccesses                                                               atomic.Uint64
		// lost counts dirty lines dropped because their memory went away (DropLost); unlike
		// the others it survives Reset, so a report after a reconnect still shows it.
		lost atomic.Uint64
	}
	events events
	maint  maintenance
}

// New returns an empty cache of MaxLines lines over b. A nil log discards messages.
func New(b Backing, log *slog.Logger) *Cache { return NewSize(b, MaxLines, log) }

// NewSize is New with a capacity of lines lines, clamped to [1, MaxLines]. Small caches make
// eviction easy to exercise in tests.
func NewSize(b Backing, lines int, log *slog.Logger) *Cache {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lines = max(1, min(lines, MaxLines))
	c := &Cache{b: b, log: log, capacity: lines, lines: make(map[key]*line), areas: make(map[key]int)}
	c.direct, _ = b.(DirectBacking)
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	c.events.init(log)
	return c
}

// Capacity returns the number of lines the cache holds at most.
func (c *Cache) Capacity() int { return c.capacity }

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
	return c.access(slot, pa, va, p, false)
}

// Write copies p into the cache at pa: the line is filled first if absent (write-allocate),
// modified, and marked dirty with slot as a writer. Memory sees the data only on write-back
// (WriteBack, Invalidate, Apply) or eviction.
func (c *Cache) Write(slot int, pa engine.PhysAddr, va uint64, p []byte) error {
	return c.access(slot, pa, va, p, true)
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
	c.mu.Lock()
	l, hit := c.lines[k]
	if hit {
		c.counters.hits.Add(1)
		c.touch(l)
	} else {
		c.counters.misses.Add(1)
		var err error
		if l, err = c.fill(k); err != nil {
			// The line as a whole is not backed (it straddles the end of VRAM or of a DMA
			// mapping, or the memory is gone), or it is memory the cache never holds (reached
			// only by a path that may wait): serve the requested bytes uncached, which is
			// coherent because the line is not resident. Their own error, if any, is returned.
			if !errors.Is(err, ErrNotDirect) {
				c.counters.fillErrors.Add(1)
				err = c.moveLocked(d, addr, p, write)
			}
			c.mu.Unlock()
			if errors.Is(err, ErrNotDirect) {
				return c.moveSlow(d, addr, p, write)
			}
			return err
		}
	}
	if write {
		copy(l.data[off:], p)
		c.setDirty(l, off, uint64(len(p)), slot)
		c.mu.Unlock()
		return nil
	}
	copy(p, l.data[off:])
	if hit && c.strict.Load() {
		c.checkStale(l, off, uint64(len(p)), slot, va)
	}
	c.mu.Unlock()
	return nil
}

// readLocked and writeLocked are the cache's memory accesses under its lock: they never wait
// (an error wrapping ErrNotDirect means the memory needs the slow path, without the lock).
func (c *Cache) readLocked(d engine.Domain, addr uint64, p []byte) error {
	if c.direct != nil {
		return c.direct.ReadDirect(d, addr, p)
	}
	return c.b.ReadPhys(d, addr, p)
}

func (c *Cache) writeLocked(d engine.Domain, addr uint64, p []byte) error {
	if c.direct != nil {
		return c.direct.WriteDirect(d, addr, p)
	}
	return c.b.WritePhys(d, addr, p)
}

func (c *Cache) moveLocked(d engine.Domain, addr uint64, p []byte, write bool) error {
	if write {
		return c.writeLocked(d, addr, p)
	}
	return c.readLocked(d, addr, p)
}

// moveSlow is an uncached access to memory that is not direct, made without the lock.
func (c *Cache) moveSlow(d engine.Domain, addr uint64, p []byte, write bool) error {
	c.counters.slowAccesses.Add(1)
	if write {
		return c.b.WritePhys(d, addr, p)
	}
	return c.b.ReadPhys(d, addr, p)
}

// checkStale compares the bytes just served from a resident line with memory. Bytes the
// engines wrote (dirty) are newer than memory by design; any other difference means memory
// changed behind the cache (a CPU write, or a bypass write by another device path) and the
// reader got old data.
func (c *Cache) checkStale(l *line, off, n uint64, slot int, va uint64) {
	mem := c.scratch[:n]
	if err := c.readLocked(l.key.domain, l.key.addr+off, mem); err != nil {
		return // memory unreadable now: nothing to compare with
	}
	for i := range n {
		if !l.dirtyByte(off+i) && mem[i] != l.data[off+i] {
			c.events.staleRead(slot, va, engine.PhysAddr{Domain: l.key.domain, Addr: l.key.addr + off})
			return
		}
	}
}

// ReadUncached reads memory without allocating a line (MTYPE_UC pages, BYPASS cache policy).
// The GPU stays coherent with itself: bytes dirty in a resident line are returned from the
// line, every other byte from memory (so a stale clean line is not consulted).
func (c *Cache) ReadUncached(pa engine.PhysAddr, p []byte) error {
	if err := checkAccess(pa, len(p)); err != nil || len(p) == 0 {
		return err
	}
	c.mu.Lock()
	err := c.readLocked(pa.Domain, pa.Addr, p)
	if errors.Is(err, ErrNotDirect) {
		// Memory the cache never holds: read it without the lock, then merge dirty bytes of
		// lines that may still be resident from before (the memory behind them changed).
		c.mu.Unlock()
		if err := c.moveSlow(pa.Domain, pa.Addr, p, false); err != nil {
			return err
		}
		c.mu.Lock()
	} else if err != nil {
		c.mu.Unlock()
		return err
	}
	c.eachResident(pa, len(p), func(l *line, off, pos, n uint64) {
		for i := range n {
			if l.dirtyByte(off + i) {
				p[pos+i] = l.data[off+i]
			}
		}
	})
	c.mu.Unlock()
	return nil
}

// WriteUncached writes memory without allocating a line. A resident line covering the bytes is
// updated too (and those bytes are no longer dirty: memory has them), so later cached reads by
// any queue see the write, as on hardware where the L2 is the GPU's point of coherence.
func (c *Cache) WriteUncached(pa engine.PhysAddr, p []byte) error {
	if err := checkAccess(pa, len(p)); err != nil || len(p) == 0 {
		return err
	}
	c.mu.Lock()
	err := c.writeLocked(pa.Domain, pa.Addr, p)
	if errors.Is(err, ErrNotDirect) {
		c.mu.Unlock()
		if err := c.moveSlow(pa.Domain, pa.Addr, p, true); err != nil {
			return err
		}
		c.mu.Lock()
	} else if err != nil {
		c.mu.Unlock()
		return err
	}
	c.eachResident(pa, len(p), func(l *line, off, pos, n uint64) {
		copy(l.data[off:off+n], p[pos:pos+n])
		c.clearDirty(l, off, n)
	})
	c.mu.Unlock()
	return nil
}

// forgetArea drops the line at k from the per-area count. Called with mu held.
func (c *Cache) forgetArea(k key) {
	a := areaOf(k)
	if c.areas[a] <= 1 {
		delete(c.areas, a)
	} else {
		c.areas[a]--
	}
}

// anyLineIn reports whether any line overlaps [pa, pa+n) (n > 0, no wrap), looking at the
// per-area counts first. Called with mu held.
func (c *Cache) anyLineIn(pa engine.PhysAddr, n uint64) bool {
	if len(c.lines) == 0 {
		return false
	}
	first, last := pa.Addr&^lineMask, (pa.Addr+n-1)&^lineMask
	for a := first >> areaShift; a <= last>>areaShift; a++ {
		if c.areas[key{pa.Domain, a}] == 0 {
			continue
		}
		// Some line lives in this area: look at the lines of the range inside it.
		lo, hi := max(first, a<<areaShift), min(last, (a+1)<<areaShift-LineBytes)
		for l := lo; ; l += LineBytes {
			if c.lines[key{pa.Domain, l}] != nil {
				return true
			}
			if l >= hi {
				break
			}
		}
	}
	return false
}

// CopyUncached copies n bytes of memory from src to dst as ReadUncached followed by
// WriteUncached would, but with one direct memory copy: it does so only when the Backing is a
// DirectCopier and no resident line overlaps either range (then there is no dirty byte to
// read from the cache and no cached copy to update). Otherwise, or when the Backing cannot
// copy directly, it returns an error wrapping ErrNotDirect and nothing moved. The cache lock
// is held across the copy, as across any uncached access, so the copy is atomic with respect
// to the cache.
func (c *Cache) CopyUncached(dst, src engine.PhysAddr, n uint64) error {
	if n == 0 {
		return nil
	}
	if n > math.MaxInt {
		return ErrNotDirect
	}
	if err := checkAccess(src, int(n)); err != nil {
		return err
	}
	if err := checkAccess(dst, int(n)); err != nil {
		return err
	}
	dc, ok := c.b.(DirectCopier)
	if !ok {
		return ErrNotDirect
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.anyLineIn(src, n) || c.anyLineIn(dst, n) {
		return ErrNotDirect
	}
	return dc.CopyPhys(dst, src, n)
}

// eachResident calls f for each resident line overlapping [pa, pa+n): off is the offset in the
// line, pos the offset in the access, n the overlap length. Called with mu held.
func (c *Cache) eachResident(pa engine.PhysAddr, n int, f func(l *line, off, pos, n uint64)) {
	if len(c.lines) == 0 {
		return
	}
	addr, pos, left := pa.Addr, uint64(0), uint64(n)
	for left > 0 {
		k := key{pa.Domain, addr &^ lineMask}
		off := addr - k.addr
		m := min(left, LineBytes-off)
		if l := c.lines[k]; l != nil {
			f(l, off, pos, m)
		}
		addr += m
		pos += m
		left -= m
	}
}

// fill makes k resident, reading it from memory, and returns it as the most recent line. On a
// Backing error nothing changes (no line is evicted for a fill that fails).
func (c *Cache) fill(k key) (*line, error) {
	if err := c.readLocked(k.domain, k.addr, c.scratch[:]); err != nil {
		return nil, err
	}
	var l *line
	switch {
	case len(c.lines) >= c.capacity:
		l = c.lru.prev
		c.evict(l)
	case len(c.spare) > 0:
		l = c.spare[len(c.spare)-1]
		c.spare = c.spare[:len(c.spare)-1]
	default:
		l = new(line)
	}
	*l = line{key: k, data: c.scratch}
	c.lines[k] = l
	c.areas[areaOf(k)]++
	c.pushFront(l)
	c.nLines.Add(1)
	return l, nil
}

// evict removes the least recently used line for reuse, writing it back if dirty. A failed
// write-back is counted and logged (the access that caused the eviction is not at fault).
func (c *Cache) evict(l *line) {
	c.counters.evictions.Add(1)
	if l.isDirty() {
		_ = c.writeBack(l) // counted and logged inside; the line goes either way
	}
	c.unlink(l)
	delete(c.lines, l.key)
	c.forgetArea(l.key)
	c.nLines.Add(-1)
}

// writeBack writes the dirty bytes of l to memory, run by run, and marks it clean. On failure
// the line's remaining dirty data cannot go anywhere: it is marked clean (the caller drops or
// keeps the line), counted and logged, and the error returned.
func (c *Cache) writeBack(l *line) error {
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
		if err := c.writeLocked(l.key.domain, l.key.addr+i, l.data[i:j]); err != nil && first == nil {
			first = &WriteBackError{PA: engine.PhysAddr{Domain: l.key.domain, Addr: l.key.addr + i}, Err: err}
		}
		i = j
	}
	c.clearDirty(l, 0, LineBytes)
	if first != nil {
		c.counters.writeBackErrors.Add(1)
		c.events.writeBackFailed(first)
		return first
	}
	c.counters.writeBacks.Add(1)
	return nil
}

// setDirty marks bytes [off, off+n) of l dirty, written by slot.
func (c *Cache) setDirty(l *line, off, n uint64, slot int) {
	if !l.isDirty() {
		c.nDirty.Add(1)
	}
	for i := off; i < off+n; i++ {
		l.dirty[i/64] |= 1 << (i % 64)
	}
	bit := uint64(1) << slotIndex(slot)
	if l.writers&bit == 0 {
		l.writers |= bit
		c.slotDirty[slotIndex(slot)]++
	}
}

// clearDirty marks bytes [off, off+n) of l clean; when no dirty byte remains the line stops
// counting against its writers.
func (c *Cache) clearDirty(l *line, off, n uint64) {
	if !l.isDirty() {
		return
	}
	for i := off; i < off+n; i++ {
		l.dirty[i/64] &^= 1 << (i % 64)
	}
	if l.isDirty() {
		return
	}
	c.nDirty.Add(-1)
	for s := range slotBits {
		if l.writers&(1<<s) != 0 {
			c.slotDirty[s]--
		}
	}
	l.writers = 0
}

// drop removes l without writing it back.
func (c *Cache) drop(l *line) {
	if l.isDirty() {
		c.counters.discards.Add(1)
		c.clearDirty(l, 0, LineBytes)
	}
	c.unlink(l)
	delete(c.lines, l.key)
	c.forgetArea(l.key)
	c.nLines.Add(-1)
	c.spare = append(c.spare, l)
}

func (c *Cache) pushFront(l *line) {
	l.prev, l.next = &c.lru, c.lru.next
	c.lru.next.prev = l
	c.lru.next = l
}

func (c *Cache) unlink(l *line) {
	l.prev.next, l.next.prev = l.next, l.prev
	l.prev, l.next = nil, nil
}

func (c *Cache) touch(l *line) {
	if c.lru.next != l {
		c.unlink(l)
		c.pushFront(l)
	}
}

// Reset drops every line without writing anything back and zeroes the counters and the last
// event (device reset: the L2's contents are lost, as on hardware). Strict mode is left as it
// is; the owner of L2_CNTL sets it.
func (c *Cache) Reset() {
	c.mu.Lock()
	clear(c.lines)
	clear(c.areas)
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	c.spare = nil
	c.slotDirty = [slotBits]int{}
	c.nLines.Store(0)
	c.nDirty.Store(0)
	c.counters.hits.Store(0)
	c.counters.misses.Store(0)
	c.counters.evictions.Store(0)
	c.counters.writeBacks.Store(0)
	c.counters.writeBackErrors.Store(0)
	c.counters.fillErrors.Store(0)
	c.counters.discards.Store(0)
	c.counters.slowAccesses.Store(0)
	c.mu.Unlock()
	c.events.reset()
	c.maint.reset()
}

// DropLost drops every line in r (nil: the whole cache) without writing it back, because the
// memory behind it went away (the client that mapped it disconnected, or unmapped it): there
// is nowhere to write the data. Dirty lines are counted (Stats.Lost, L2_DISCARDED, kept across
// Reset) and logged once per call (rate-limited), and their number is returned. The caller
// makes sure nothing can refill the range with old data first (DMA is cut off).
func (c *Cache) DropLost(r *Range) int {
	c.mu.Lock()
	dirty := 0
	for _, l := range c.collect(r) {
		if l.isDirty() {
			dirty++
			c.clearDirty(l, 0, LineBytes)
		}
		c.drop(l)
	}
	c.mu.Unlock()
	if dirty > 0 {
		c.counters.lost.Add(uint64(dirty))
		c.events.lostLines(r, dirty)
	}
	return dirty
}
