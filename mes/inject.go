package mes

import (
	"time"

	"vgpu/inject"
)

// Fault injection (package inject): a mes.hang rule makes a frame never complete, as firmware
// stuck in it: no api_status write, no rptr progress, no event-log record, no IV; the frames
// behind it (the driver's QUERY_SCHEDULER_STATUS fence) never run, so the driver sees "MES
// failed to respond". The scheduler goroutine keeps placing queues (real firmware stuck on
// its API ring may not; vgpu's keeps its queues alive so a reset finds them). MES_RING_ACTIVE
// = 0 (or a device reset) ends the activation and with it the stuck frame: the next
// activation starts from the ring the driver programs, which is the driver's recovery.

// SetInjector gives the scheduler its rule set (nil: none); safe at any time (frames are few:
// the hook's load is atomic).
func (m *MES) SetInjector(s *inject.Set) { m.inj.Store(s) }

// hangFrame asks the rules whether frame f (at ring position pos) hangs; if so it becomes the
// pending frame with a check that never finishes.
func (a *activation) hangFrame(f *frame, pos uint64, now time.Time) bool {
	if !a.m.inj.Load().MESFrame(f.opcode()) {
		return false
	}
	a.pend = &pending{f: *f, pos: pos, deadline: now.Add(100 * 365 * 24 * time.Hour),
		check: func(time.Time) *frameErr { return errWaiting }}
	return true
}
