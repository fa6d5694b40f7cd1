package l2

import "sync"

// maintenance runs L2_CONTROL requests. A register write must be answered in bounded time
// whatever the memory behind the cache does, so the write only records the request and a
// goroutine does the work; L2_STATUS.BUSY says when it is done, as on hardware where a cache
// action is started by a write and its completion polled. Requests written while one runs are
// merged into the next pass (write-back and invalidate are idempotent), so a guest writing
// L2_CONTROL in a loop costs at most one goroutine and one pass at a time.
type maintenance struct {
	c  *Cache
	mu sync.Mutex
	// gen changes on Reset: a pass that finishes after it reports nothing.
	gen     uint64
	pending Op
	busy    bool
	failed  bool   // the last completed pass could not write some lines back
	done    uint32 // passes completed since reset
	closed  bool
	wg      sync.WaitGroup
}

// MaintenanceStats is the state of L2_CONTROL requests.
type MaintenanceStats struct {
	Busy      bool   // L2_STATUS.BUSY
	Failed    bool   // L2_STATUS.ERROR
	Completed uint32 // L2_CONTROL_DONE
}

// StartMaintenance starts op (write-back and/or invalidate of the whole cache) on another
// goroutine and returns at once; L2_STATUS reports progress.
func (c *Cache) StartMaintenance(op Op) {
	m := &c.maint
	op &= opAll
	c.traceMaintenance(op)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	// A request with no action still counts as a request: it completes at once, in order.
	m.pending |= op | opRequested
	if m.busy {
		m.mu.Unlock()
		return
	}
	m.busy = true
	gen := m.gen
	m.wg.Add(1)
	m.mu.Unlock()
	go c.runMaintenance(gen)
}

// opRequested marks a pending request that has no action bits.
const opRequested Op = 1 << 7

func (c *Cache) runMaintenance(gen uint64) {
	m := &c.maint
	defer m.wg.Done()
	for {
		m.mu.Lock()
		if m.gen != gen || m.pending == 0 {
			if m.gen == gen {
				m.busy = false
			}
			m.mu.Unlock()
			return
		}
		op := m.pending &^ opRequested
		m.pending = 0
		m.mu.Unlock()
		err := c.Apply(op, nil) // failures are counted and logged by the cache
		m.mu.Lock()
		if m.gen == gen {
			m.failed = err != nil
			m.done++
		}
		m.mu.Unlock()
	}
}

func (m *maintenance) stats() MaintenanceStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MaintenanceStats{Busy: m.busy, Failed: m.failed, Completed: m.done}
}

// reset forgets pending requests and the status. A pass in progress finishes its Apply (which
// is atomic with respect to the cache's own Reset) and then stops without reporting.
func (m *maintenance) reset() {
	m.mu.Lock()
	m.gen++
	m.pending, m.busy, m.failed, m.done = 0, false, false, 0
	m.mu.Unlock()
}

// StopMaintenance forgets the pending request and the status, as Reset does, without touching
// the lines (a disconnect keeps the L2's VRAM data).
func (c *Cache) StopMaintenance() { c.maint.reset() }

// Close stops accepting L2_CONTROL requests and waits for a pass in progress. Its memory
// accesses are bounded (direct copies; memory that is not direct is never cached), so the wait
// is too.
func (c *Cache) Close() {
	m := &c.maint
	m.mu.Lock()
	m.closed = true
	m.gen++
	m.pending = 0
	m.mu.Unlock()
	m.wg.Wait()
}
