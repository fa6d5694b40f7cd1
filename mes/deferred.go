package mes

import "runtime"

// Deferred writes. In a switch the new queue's work waits for its map, and nothing in the map
// needs what the unmap before it writes to memory (the old queue's MQD, gang context and rptr
// report) or what the map itself records there (ACTIVE, the VMID, IS_QUEUE_UNMAP, the status):
// the scheduler keeps its own copy of both. So the policy (schedule) owes those writes and the
// pass pays them after it, once the HQDs it mapped have had the chance to start (yieldToHQDs).
// The pass pays everything before it sleeps, so no frame runs, no snapshot pauses and no
// later pass decides with a write still owed; the counters and the register-visible status
// are updated at once. A queue whose unmap is owed is saved before it is mapped again (its
// MQD is read on map). With a trace recorder attached nothing is deferred, so that the
// "unmap" slice spans the save.

// owedWrite is what a queue is owed.
type owedWrite uint8

const (
	oweSave   owedWrite = 1 << iota // writeSaved (an unmap)
	oweMapped                       // writeMapped (a map)
)

// deferWrites starts a policy pass's deferral (none while tracing).
func (a *activation) deferWrites() { a.deferring = a.m.trace == nil }

// owe records that q is owed w (in the order the pass met them).
func (a *activation) owe(q *queue, w owedWrite) {
	if q.owed == 0 {
		a.owedQueues = append(a.owedQueues, q)
	}
	q.owed |= w
}

// payOwed writes what q is owed now.
func (a *activation) payOwed(q *queue) {
	w := q.owed
	q.owed = 0
	if w&oweSave != 0 {
		a.writeSaved(q)
	}
	if w&oweMapped != 0 {
		a.writeMapped(q)
	}
}

// payAll ends the deferral and writes everything owed, in order.
func (a *activation) payAll() {
	a.deferring = false
	for i, q := range a.owedQueues {
		a.payOwed(q)
		a.owedQueues[i] = nil
	}
	a.owedQueues = a.owedQueues[:0]
}

// yieldToHQDs lets the HQD goroutines this pass's maps woke run before the pass goes on (once
// per pass, after the policy, before the owed writes), unless queues still wait for a slot.
// In hardware MES and the HQDs are separate engines: a mapped queue starts while MES still
// does its bookkeeping. Here they share the host's cores, and a goroutine woken waits in its
// waker's P's next slot until the waker blocks (another P takes it from there only after a
// few µs): the queue would wait for every write and decision left in the pass. Yielding puts
// the scheduler's goroutine behind the woken ones (an idle P picks it up at once); while
// queues wait for slots the scheduler's next decisions matter more, and it does not yield.
func (a *activation) yieldToHQDs() {
	if !a.wokeHQD {
		return
	}
	a.wokeHQD = false
	for _, q := range a.waitList {
		if q.runnable() {
			return
		}
	}
	runtime.Gosched()
}
