package cp

import (
	"time"

	"vgpu/abi"
)

// Engines as CP_ENGINE_RESET names them: GFX is slot 0, COMPUTE slots 1..NumSlots-1.
const (
	EngineGFX     = abi.REG_CP_ENGINE_RESET__GFX_MASK
	EngineCompute = abi.REG_CP_ENGINE_RESET__COMPUTE_MASK
	engineAll     = EngineGFX | EngineCompute
)

// engineSlots is the slot range [first, end) of one engine bit.
func engineSlots(bit uint32) (first, end int) {
	if bit == EngineGFX {
		return 0, 1
	}
	return 1, NumSlots
}

// Reset returns the CP to power-on state without waiting for anything: every queue is
// stopped at once (as DEQUEUE_RESET) and every activation alive is revoked, so no goroutine
// started before Reset can make another call out; every HQD register and counter (CP_PACKETS,
// CP_HALTS, CP_ENGINE_RESET_STATUS, CP_ENGINE_RESETS) returns to its power-on value. It never
// blocks on a queue goroutine. Quiesce waits until no call out that began before it is still
// in progress.
func (c *CP) Reset() {
	c.engMu.Lock()
	for i := range c.hqds {
		c.hqds[i].reset()
	}
	c.engBusy, c.engResets = 0, 0
	c.owned.Store(0)
	c.engMu.Unlock()
	c.packets.Store(0)
	c.halts.Store(0)
}

// EngineReset is a write of v to CP_ENGINE_RESET: every queue of each named engine is
// stopped at once (as DEQUEUE_RESET), its HQD registers return to power-on values and its
// activations are revoked; the engine's ENGINE_RESET_STATUS bit stays set until none of
// those activations can act any more (engineStatus). Queues of other engines are not
// touched; CP_PACKETS and CP_HALTS keep counting. A write naming an engine whose reset is
// in progress resets it again and merges with it (one completion is counted). Unknown bits
// are ignored. It never blocks on a queue goroutine.
func (c *CP) EngineReset(v uint32) {
	v &= engineAll
	if v == 0 {
		return
	}
	c.traceEngineReset(v)
	c.engMu.Lock()
	defer c.engMu.Unlock()
	for _, bit := range []uint32{EngineGFX, EngineCompute} {
		if v&bit == 0 {
			continue
		}
		first, end := engineSlots(bit)
		for slot := first; slot < end; slot++ {
			c.hqds[slot].reset()
		}
		c.engBusy |= bit
	}
}

// engineStatus completes the engine resets whose slots have no revoked activation inside
// a turn any more and returns CP_ENGINE_RESET_STATUS and CP_ENGINE_RESETS. Completion is
// evaluated whenever either register (or Stats) is read, which is when it can be observed.
func (c *CP) engineStatus() (busy, resets uint32) {
	c.engMu.Lock()
	defer c.engMu.Unlock()
	for _, bit := range []uint32{EngineGFX, EngineCompute} {
		if c.engBusy&bit == 0 {
			continue
		}
		first, end := engineSlots(bit)
		n := 0
		for slot := first; slot < end; slot++ {
			n += c.hqds[slot].draining()
		}
		if n == 0 {
			c.engBusy &^= bit
			c.engResets++
		}
	}
	return c.engBusy, c.engResets
}

// Quiesce waits until no activation revoked by Reset, an engine reset or a newer activation
// is inside a turn (so none can call out again; a call out that began before the revocation
// has returned), and reports true, or false when timeout passes first. It sleeps between
// checks (a revoked goroutine leaving its turn wakes it at once), so it is cheap to call
// right after the device has cut the engines off from memory.
func (c *CP) Quiesce(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	var timer *time.Timer
	poll := minQuiescePoll
	for {
		n := 0
		for i := range c.hqds {
			n += c.hqds[i].draining()
		}
		if n == 0 {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		d := min(poll, left)
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-c.quiet:
		case <-timer.C:
			poll = min(2*poll, maxQuiescePoll)
		}
	}
}

// signalQuiet wakes a Quiesce (without blocking).
func (c *CP) signalQuiet() {
	select {
	case c.quiet <- struct{}{}:
	default:
	}
}

// Close is Reset that also refuses later activations, then waits (at most
// Config.StopTimeout) for every goroutine the CP started; a goroutine still running then is
// one stuck in a call out, which can no longer act (it is revoked) and is logged.
func (c *CP) Close() {
	c.closed.Store(true)
	c.Reset()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	t := time.NewTimer(c.stopTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		c.limiter.Warn(logKeyClose, "cp: close: queue goroutines still inside a call out; they are revoked and will exit when it returns",
			"timeout", c.stopTimeout, "draining", c.Stats().Draining)
	}
}
