package cp

import (
	"testing"
	"time"

	"vgpu/abi"
)

// TestTurnsServeHigherPriorityFirst: with the turn taken, waiters are granted it by priority,
// first come first served within one; and a holder yields only to a waiter of at least its
// own priority.
func TestTurnsServeHigherPriorityFirst(t *testing.T) {
	tr := &turns{}
	mk := func(p uint8) *queue {
		return &queue{prio: p, grant: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
	}
	low1, low2, high, normal := mk(abi.MES_PRIORITY_LOW), mk(abi.MES_PRIORITY_LOW), mk(abi.MES_PRIORITY_HIGH), mk(abi.MES_PRIORITY_NORMAL)
	got := make(chan *queue, 4)
	for _, q := range []*queue{low1, low2, high, normal} {
		go func() {
			if tr.acquire(q, stopOnRevoke) {
				got <- q
			}
		}()
		waitQueued(t, tr, q) // arrival order is the order above
	}
	if !tr.waitingAtLeast(abi.MES_PRIORITY_HIGH) || tr.waitingAtLeast(abi.MES_PRIORITY_REALTIME) {
		t.Fatalf("prios %#b", tr.prios.Load())
	}
	for _, want := range []*queue{high, normal, low1, low2} {
		tr.release()
		select {
		case q := <-got:
			if q != want {
				t.Fatalf("granted priority %d, want %d", q.prio, want.prio)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no grant")
		}
	}
}

// waitQueued waits until q is among the waiters (a liveness bound).
func waitQueued(t *testing.T, tr *turns, q *queue) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tr.mu.Lock()
		for _, w := range tr.waiting {
			if w == q {
				tr.mu.Unlock()
				return
			}
		}
		tr.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("waiter never queued")
		}
		time.Sleep(time.Millisecond)
	}
}
