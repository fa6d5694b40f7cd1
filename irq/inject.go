package irq

import (
	"sync/atomic"
	"time"

	"vgpu/engine"
	"vgpu/inject"
)

// Fault injection (package inject): the MSI-X side drops or delays a vector's interrupt
// (irq.drop, irq.delay), the IH side drops an IV or corrupts it before it is written into the
// ring (iv.drop, iv.corrupt). With no rule of those kinds each hook is one atomic load.

// maxDelayed bounds the interrupts an irq.delay rule holds at once; past it an interrupt is
// delivered at once (a rule cannot make the server hold timers without bound).
const maxDelayed = 256

// injection is the Controller's part: the rules and the delayed interrupts in flight.
type injection struct {
	set     *inject.Set
	delayed atomic.Int32
}

// SetInjector gives the controller its rule set (nil: none). Call before interrupts flow.
func (c *Controller) SetInjector(s *inject.Set) { c.inj.set = s }

// intercept reports whether the injection rules took the interrupt of vector (dropped, or
// re-raised later). Small enough to inline: the common case is the load in HasAny.
func (i *injection) intercept(c *Controller, vector int) bool {
	return i.set.HasAny(inject.IRQKinds) && i.take(c, vector)
}

func (i *injection) take(c *Controller, vector int) bool {
	drop, delay := i.set.Interrupt(vector)
	if drop {
		return true
	}
	if delay <= 0 || i.delayed.Add(1) > maxDelayed {
		if delay > 0 {
			i.delayed.Add(-1)
		}
		return false
	}
	time.AfterFunc(delay, func() {
		i.delayed.Add(-1)
		c.trigger(vector)
	})
	return true
}

// trigger is TriggerMSIX past its checks and the rules (a delayed interrupt is delivered as
// the vector's state is then: masked it goes pending, after Close it goes nowhere).
func (c *Controller) trigger(vector int) {
	c.mu.Lock()
	s, ok := c.triggerLocked(vector)
	c.mu.Unlock()
	if ok {
		c.send(s)
	}
}

// SetInjector gives the IH its rule set (nil: none). Call before IVs are pushed.
func (h *IH) SetInjector(s *inject.Set) { h.inj = s }

// injectIV applies the IV rules to iv; true: it is dropped.
func (h *IH) injectIV(iv *engine.IV) bool {
	a := h.inj.IV(iv.Client, iv.Source)
	if a.Drop {
		return true
	}
	if a.SetSource {
		iv.Source = a.Source
	}
	for k, x := range a.XOR {
		iv.Data[k] ^= x
	}
	return false
}
