package compute

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"vgpu/engine"
	"vgpu/ratelog"
	"vgpu/trace"
)

// Config is a Pool's shape and what it is connected to.
type Config struct {
	CUs      int // compute units (default 8)
	Parallel int // most CUs executing at once (default GOMAXPROCS: one per host core)
	L0Lines  int // L0 lines of LineBytes per CU, a power of two (default 256: 16 KiB)
	// Budget is how many instructions a work-item runs before its CU looks at the Run again
	// (preemption, errors) and lets its other work-items have a turn (default 4096).
	Budget     uint64
	Memory     engine.Memory
	Interrupts engine.Interrupts
	// Strict reports whether strict mode is on (stale L0 reads are named); nil: never.
	Strict func() bool
	Log    *ratelog.Limiter
}

// Pool is the compute units.
type Pool struct {
	cfg      Config
	sem      chan struct{} // execution turns: Parallel tokens
	l0Gen    atomic.Uint64
	atomicMu sync.Mutex

	mu     sync.Mutex
	cond   *sync.Cond
	runs   []*Run // runs with workgroups not yet claimed, in start order
	rr     int    // round-robin position in runs
	closed bool
	// live is every run not yet ended (Reset kills them), under its own lock: a run's end
	// (under the run's lock) updates it, and claim holds mu while it takes a run's lock.
	liveMu sync.Mutex
	live   map[*Run]struct{}
	wg     sync.WaitGroup

	stats poolStats
	san   sanitizer // strict mode's hazards and stale reads (hazard.go)

	trace *trace.Recorder // the timeline (trace.go; nil: off)
}

type poolStats struct {
	dispatches, groups, l0Hits, l0Misses, atomics, stale, preempts, errors atomic.Uint64
	instructions                                                           atomic.Uint64
}

// Stats are the pool's counters since it was made.
type Stats struct {
	Dispatches, Groups, Instructions uint64
	L0Hits, L0Misses, Atomics        uint64
	StaleReads                       uint64 // strict mode: L0 hits that differed from memory
	Preemptions, Errors              uint64
}

// New starts the pool's CU goroutines.
func New(cfg Config) *Pool {
	if cfg.CUs <= 0 {
		cfg.CUs = 8
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = runtime.GOMAXPROCS(0)
	}
	if cfg.L0Lines <= 0 || cfg.L0Lines&(cfg.L0Lines-1) != 0 {
		cfg.L0Lines = 256
	}
	if cfg.Budget == 0 {
		cfg.Budget = 4096
	}
	if cfg.Log == nil {
		cfg.Log = ratelog.New(nil, 0, 0)
	}
	p := &Pool{cfg: cfg, sem: make(chan struct{}, cfg.Parallel), live: map[*Run]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	for i := range cfg.CUs {
		c := &cu{p: p, id: i, l0: newL0(p, cfg.L0Lines)}
		p.wg.Add(1)
		go c.loop()
	}
	return p
}

// Close kills every run and stops the CUs.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	p.killAll()
	p.wg.Wait()
}

// Reset kills every run (a device reset or a client's disconnect) and drops every L0 line;
// it waits, at most timeout, until no CU is inside any of them, and reports whether that
// happened. No memory access of a killed run begins after Reset returns.
func (p *Pool) Reset(timeout time.Duration) bool {
	runs := p.killAll()
	p.InvalidateL0()
	p.san.reset()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, r := range runs {
		select {
		case <-r.Done():
		case <-deadline.C:
			return false
		}
	}
	return true
}

func (p *Pool) killAll() []*Run {
	p.liveMu.Lock()
	runs := make([]*Run, 0, len(p.live))
	for r := range p.live {
		runs = append(runs, r)
	}
	p.liveMu.Unlock()
	for _, r := range runs {
		r.Kill()
	}
	return runs
}

func (p *Pool) track(r *Run) {
	p.liveMu.Lock()
	p.live[r] = struct{}{}
	p.liveMu.Unlock()
}

func (p *Pool) untrack(r *Run) {
	p.liveMu.Lock()
	delete(p.live, r)
	p.liveMu.Unlock()
}

// InvalidateL0 drops every line of every CU's L0 (ACQUIRE_MEM GL0_INV). Lines filled after it
// returns are new.
func (p *Pool) InvalidateL0() { p.l0Gen.Add(1) }

// Stats returns the counters.
func (p *Pool) Stats() Stats {
	s := &p.stats
	return Stats{Dispatches: s.dispatches.Load(), Groups: s.groups.Load(), Instructions: s.instructions.Load(),
		L0Hits: s.l0Hits.Load(), L0Misses: s.l0Misses.Load(), Atomics: s.atomics.Load(), StaleReads: s.stale.Load(),
		Preemptions: s.preempts.Load(), Errors: s.errors.Load()}
}

func (p *Pool) strict() bool { return p.cfg.Strict != nil && p.cfg.Strict() }

// staleRead names a load the L0 served with data memory no longer holds (strict mode).
func (p *Pool) staleRead(r *Run, addr, cached, now uint64) {
	p.stats.stale.Add(1)
	r.stale.Add(1)
	p.san.noteStale(r, addr)
	p.cfg.Log.Warn("compute.stale", "compute: stale L0 read (a missing GL0 invalidation?)",
		"slot", r.d.Slot, "vmid", r.d.VMID, "addr", addr, "cached", cached, "memory", now)
}

// enqueue makes r's workgroups claimable.
func (p *Pool) enqueue(r *Run) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.runs = append(p.runs, r)
	p.cond.Broadcast()
	return true
}

// claim waits for a workgroup to run: a run with work (round robin among runs) and the work
// it gives. ok false when the pool closes.
func (p *Pool) claim() (*Run, work, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.closed {
			return nil, work{}, false
		}
		for n := len(p.runs); n > 0; n-- {
			if p.rr >= len(p.runs) {
				p.rr = 0
			}
			r := p.runs[p.rr]
			w, more, ok := r.take()
			if !more {
				p.runs = append(p.runs[:p.rr], p.runs[p.rr+1:]...)
			} else {
				p.rr++
			}
			if ok {
				return r, w, true
			}
		}
		p.cond.Wait()
	}
}
