package cp

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"vgpu/abi"
)

// turns is the CP-wide fair limit on queue goroutines executing at once: a counting
// semaphore whose waiters are served first come, first served. A queue holds a turn while it
// runs and gives it back before it blocks (idle, parked, in the endless kernel) and when its
// budget is used up, so a queue that always has work goes to the back of the line and at
// most limit goroutines compete with the transport for the CPU.
type turns struct {
	mu      sync.Mutex
	free    int
	waiting []*queue     // in arrival order; each waiter is in it at most once
	queued  atomic.Int32 // len(waiting), readable without mu
	// prios has bit p set while a queue of priority p waits (readable without mu): a turn
	// goes to the highest priority waiting, first come first served within it, and a holder
	// yields only to a waiter of at least its own priority.
	prios atomic.Uint32
	waits atomic.Uint64
	// spareP: limit < GOMAXPROCS at New, so a P is always left for everything else and a
	// turn that nobody waits for need not go through the scheduler.
	spareP bool
	// limit is free at New; paused (under mu, mirrored in pausing) holds every turn given
	// back (a snapshot, snapshot.go).
	limit   int
	paused  bool
	pausing atomic.Bool
}

// acquire waits for a turn for q. It returns false, holding nothing, when a stop request
// matching on is seen after a wake of q (a kick, a dequeue request, a revocation) arrived
// while it waited.
func (t *turns) acquire(q *queue, on stopOn) bool {
	t.mu.Lock()
	if t.free > 0 && len(t.waiting) == 0 && !t.paused {
		t.free--
		t.mu.Unlock()
		return true
	}
	q.waitOn = on
	t.waiting = append(t.waiting, q)
	t.changed()
	t.mu.Unlock()
	t.waits.Add(1)
	for {
		select {
		case <-q.grant:
			return true
		case <-q.wake:
			// A wake is only a hint (the caller re-reads wptr and re-checks waits after
			// its turn begins), so consuming it here loses nothing.
			if !q.stopRequested(on) {
				continue
			}
			t.mu.Lock()
			for i, w := range t.waiting {
				if w == q {
					t.waiting = append(t.waiting[:i], t.waiting[i+1:]...)
					t.changed()
					t.mu.Unlock()
					return false
				}
			}
			t.mu.Unlock()
			// Already granted: the turn is ours to pass on.
			<-q.grant
			t.release()
			return false
		}
	}
}

// changed republishes the waiters' count and priorities (mu held).
func (t *turns) changed() {
	var m uint32
	for _, w := range t.waiting {
		m |= 1 << w.prio
	}
	t.queued.Store(int32(len(t.waiting)))
	t.prios.Store(m)
}

// waitingAtLeast reports whether a queue of priority p or higher waits for a turn.
func (t *turns) waitingAtLeast(p uint8) bool { return t.prios.Load()>>p != 0 }

// release gives a turn back: to the first waiter of the highest priority, or to the pool.
func (t *turns) release() {
	t.mu.Lock()
	if len(t.waiting) > 0 && !t.paused {
		best := 0
		for i, w := range t.waiting {
			if w.prio > t.waiting[best].prio {
				best = i
			}
		}
		w := t.waiting[best]
		t.waiting = append(t.waiting[:best], t.waiting[best+1:]...)
		t.changed()
		t.mu.Unlock()
		w.grant <- struct{}{} // one-slot channel, one grant per wait: never blocks
		return
	}
	t.free++
	t.mu.Unlock()
}

// stopOn says which requests end a wait for a turn.
type stopOn uint8

const (
	stopOnRevoke  stopOn = iota // only a revocation (reporting a configuration fault)
	stopOnReset                 // also DEQUEUE_RESET (inside a packet)
	stopOnPreempt               // also a preemption (between DMA_DATA chunks)
	stopOnDequeue               // also DEQUEUE_DRAIN (at a packet boundary)
)

func (q *queue) stopRequested(on stopOn) bool {
	if q.gate.revoked.Load() {
		return true
	}
	switch r := q.stopReq.Load(); on {
	case stopOnReset:
		return r == abi.HQD_DEQUEUE_RESET
	case stopOnPreempt:
		return r == abi.HQD_DEQUEUE_RESET || r == stopPreempt
	case stopOnDequeue:
		return r != 0
	}
	return false
}

// takeTurn waits for an execution turn and enters the call-out gate (gate.go). It returns
// false, holding nothing, if the activation is revoked or a stop request matching on
// arrives first.
func (q *queue) takeTurn(on stopOn) bool {
	if q.stopRequested(on) || !q.c.turns.acquire(q, on) {
		return false
	}
	q.gate.holding.Store(true)
	q.gate.inflight.Store(true)
	q.turn = true
	// Entered after inflight is set: a revocation stored before this load is seen here;
	// one stored after it sees inflight (gate.go).
	if q.gate.revoked.Load() {
		q.endTurn()
		return false
	}
	q.turnStart = time.Now()
	q.turnWork, q.nextCheck = 0, firstBudgetCheck
	return true
}

// endTurn leaves the gate and gives the turn back (unless a revocation already did).
func (q *queue) endTurn() {
	if !q.turn {
		return
	}
	q.turn = false
	q.flushCount() // a queue that always has work never ends a batch: count its packets here
	q.gate.inflight.Store(false)
	if q.gate.holding.CompareAndSwap(true, false) {
		q.c.turns.release()
	}
	if q.gate.revoked.Load() {
		q.c.signalQuiet()
	}
}

// spend counts n units of work (a packet is 1, a 4 KiB piece of a data transfer 1) against
// the turn and yields when the turn's budget is spent. Reading the clock costs up to half a
// microsecond on some hosts, so it is read only when the work done so far predicts the
// budget is reached (at most maxBudgetStep units later). False: stop (nothing held).
//
// A queue of a higher priority waiting for a turn ends the turn at once (one atomic load per
// unit of work): a HIGH user queue waits for a packet boundary of the lower one, not for its
// budget.
func (q *queue) spend(n int, on stopOn) bool {
	q.turnWork += n
	return q.turnWork < q.nextCheck && !q.c.turns.waitingAtLeast(q.prio+1) || q.checkBudget(on)
}

// checkBudget is spend's slow path: read the clock, predict the next check or yield.
func (q *queue) checkBudget(on stopOn) bool {
	if q.c.turns.waitingAtLeast(q.prio + 1) {
		return q.yield(on)
	}
	el := time.Since(q.turnStart)
	if left := q.c.turnBudget - el; left > 0 {
		step := int64(q.turnWork) * int64(left) / max(int64(el), 1)
		q.nextCheck = q.turnWork + int(min(max(step, minBudgetStep), maxBudgetStep))
		return true
	}
	return q.yield(on)
}

// yield ends a turn whose budget is spent and queues for the next one, behind every queue
// that waits; without a spare P it also lets the Go scheduler run whatever waits for one
// (the transport, timers). When nobody waits and a P is spare, the turn is just renewed:
// handing it over would only cost a trip through the scheduler (and, on a loaded host, a
// wait for a CPU). It returns false, holding nothing, if a stop request matching on arrives.
//
// Only a waiter of at least the holder's priority takes the turn: with only lower ones
// waiting the turn is renewed (after a Gosched when no P is spare), so a user queue MES
// placed at a higher level is never made to wait behind lower ones.
func (q *queue) yield(on stopOn) bool {
	t := &q.c.turns
	if !t.pausing.Load() && (t.queued.Load() == 0 && t.spareP || t.queued.Load() != 0 && !t.waitingAtLeast(q.prio)) {
		if !t.spareP {
			runtime.Gosched()
		}
		q.flushCount()
		q.turnStart = time.Now()
		q.turnWork, q.nextCheck = 0, firstBudgetCheck
		return true
	}
	q.c.yields.Add(1)
	q.endTurn()
	if !t.spareP {
		runtime.Gosched()
	}
	return q.takeTurn(on)
}

// packetDone counts a finished packet, against the turn too. False: stop (nothing held).
func (q *queue) packetDone() bool {
	q.count++
	return q.spend(1, stopOnDequeue)
}

// chunkDone is the check between the pieces of a long packet (DMA_DATA, kernels, long
// register writes) that did units of work: only DEQUEUE_RESET interrupts a packet, and the
// turn's budget applies. False: stop (nothing held, or a reset).
func (q *queue) chunkDone(units int) bool {
	return !q.resetRequested() && q.spend(units, stopOnReset)
}

// dmaChunkDone is chunkDone between the pieces of a DMA_DATA, which a preemption of a
// mapped queue interrupts too (the bytes done are saved: q.progress).
func (q *queue) dmaChunkDone(units int) bool {
	if r := q.stopReq.Load(); r == abi.HQD_DEQUEUE_RESET || r == stopPreempt {
		return false
	}
	return q.spend(units, stopOnPreempt)
}
