package l2

import (
	"fmt"
	"log/slog"
	"sync"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/ratelog"
)

// Event is a strict-mode report.
type Event struct {
	Kind uint32 // abi.L2_EVENT_*
	Slot int    // queue slot of the engine access
	Addr uint64 // GPU address: the stale read, or the fence
}

// Stats is a snapshot of the cache's state and counters. Reading it never waits for an access
// in progress.
type Stats struct {
	Lines, DirtyLines int
	Capacity          int
	Hits, Misses      uint64
	Evictions         uint64 // lines evicted for capacity
	WriteBacks        uint64 // dirty lines written back (eviction, WriteBack, Invalidate)
	WriteBackErrors   uint64 // dirty lines whose write-back failed (data lost)
	FillErrors        uint64 // misses whose line could not be filled (served uncached)
	Discards          uint64 // dirty lines dropped without write-back (Discard)
	SlowAccesses      uint64 // uncached accesses to memory that is not direct (served without the lock)
	Lost              uint64 // dirty lines dropped because their memory went away (DropLost; since New)
	Maintenance       MaintenanceStats
	LogSuppressed     uint64 // log lines the rate limiter held back
	StaleReads        uint64 // strict mode: L2_EVENT_STALE_READ events
	DirtyFences       uint64 // strict mode: L2_EVENT_DIRTY_FENCE events
	LastEvent         Event  // the last strict-mode event (Kind L2_EVENT_NONE: none yet)
}

// Stats returns the current counters.
func (c *Cache) Stats() Stats {
	s := Stats{
		Lines:           int(c.nLines.Load()),
		DirtyLines:      int(c.nDirty.Load()),
		Capacity:        c.capacity,
		Hits:            c.counters.hits.Load(),
		Misses:          c.counters.misses.Load(),
		Evictions:       c.counters.evictions.Load(),
		WriteBacks:      c.counters.writeBacks.Load(),
		WriteBackErrors: c.counters.writeBackErrors.Load(),
		FillErrors:      c.counters.fillErrors.Load(),
		Discards:        c.counters.discards.Load(),
		SlowAccesses:    c.counters.slowAccesses.Load(),
		Lost:            c.counters.lost.Load(),
		Maintenance:     c.maint.stats(),
		LogSuppressed:   c.events.log.Suppressed(),
	}
	c.events.mu.Lock()
	s.StaleReads, s.DirtyFences, s.LastEvent = c.events.stale, c.events.fences, c.events.last
	c.events.mu.Unlock()
	return s
}

// events holds the strict-mode counters and the last event under their own small lock, never
// held across memory accesses. Their log lines go through one rate limiter: strict mode can
// report on every access of a hot loop.
type events struct {
	log *ratelog.Limiter

	mu     sync.Mutex
	stale  uint64
	fences uint64
	last   Event
}

func (e *events) init(log *slog.Logger) { e.log = ratelog.New(log, 0, 10) }

// SetLimiter makes the cache's log lines go through l (the device's one limiter); call it
// before the cache is used.
func (c *Cache) SetLimiter(l *ratelog.Limiter) { c.events.log = l }

func hex(v uint64) string { return fmt.Sprintf("%#x", v) }

func (e *events) staleRead(slot int, va uint64, pa engine.PhysAddr) {
	e.mu.Lock()
	e.stale++
	e.last = Event{Kind: abi.L2_EVENT_STALE_READ, Slot: slot, Addr: va}
	e.mu.Unlock()
	e.log.Warn("l2-stale-read", "l2: stale read: an engine read a cached line older than memory (missing GL2_INV after a CPU write?)",
		"addr", hex(va), "queue", slot, "phys", pa.String())
}

func (e *events) dirtyFence(slot int, va uint64, dirtyLines int) {
	e.mu.Lock()
	e.fences++
	e.last = Event{Kind: abi.L2_EVENT_DIRTY_FENCE, Slot: slot, Addr: va}
	e.mu.Unlock()
	e.log.Warn("l2-dirty-fence", "l2: dirty fence: fence written while dirty lines of that job remained (missing GL2_WB before the fence?)",
		"fence", hex(va), "queue", slot, "dirty_lines", dirtyLines)
}

func (e *events) writeBackFailed(err error) {
	e.log.Warn("l2-writeback-failed", "l2: write-back failed, dirty data lost", "err", err)
}

func (e *events) lostLines(r *Range, dirty int) {
	where := "all memory"
	if r != nil {
		where = fmt.Sprintf("%v [%#x, +%#x)", r.Domain, r.Addr, r.Size)
	}
	e.log.Warn("l2-lost-lines", "l2: dirty lines dropped unwritten: their memory went away (unmapped, or its client disconnected) before a write-back",
		"range", where, "dirty_lines", dirty)
}

func (e *events) reset() {
	e.mu.Lock()
	e.stale, e.fences, e.last = 0, 0, Event{}
	e.mu.Unlock()
}
