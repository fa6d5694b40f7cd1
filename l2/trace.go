package l2

import "vgpu/trace"

// The L2's timeline (package trace): an "L2 maintenance" instant on the device track for each
// L2_CONTROL request (write-back and/or invalidate of the whole cache). The GL2 actions of
// packets (RELEASE_MEM, ACQUIRE_MEM) are recorded by the CP on the queue's track.

// SetTrace makes the cache record on r (nil: off).
func (c *Cache) SetTrace(r *trace.Recorder) { c.trace = r }

func (c *Cache) traceMaintenance(op Op) {
	if r := c.trace; r != nil {
		r.Instant(trace.TrackDevice, "L2 maintenance", trace.S("op", op.String()))
	}
}
