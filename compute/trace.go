package compute

import "vgpu/trace"

// The compute units' timeline (package trace): on each CU's track, a "workgroup" slice per
// workgroup it executes, annotated with its run (the dispatch instant on the HQD track has
// the same run id), the queue's slot and the workgroup's index; its end says whether the
// workgroup finished, failed or was preempted.

// SetTrace makes the pool record on r (nil: off). Call it before any dispatch starts.
func (p *Pool) SetTrace(r *trace.Recorder) { p.trace = r }

// tracedGroup is runGroup inside the CU's "workgroup" slice.
func (c *cu) tracedGroup(r *Run, w work) groupEnd {
	tr := c.p.trace
	if tr == nil {
		return c.runGroup(r, w)
	}
	t := trace.CU(c.id)
	tr.Begin(t, "workgroup", trace.U("run", r.id), trace.I("slot", int64(r.d.Slot)), trace.U("group", w.group))
	e := c.runGroup(r, w)
	end := "done"
	switch {
	case e.err != nil:
		end = "error"
	case e.saved != nil:
		end = "preempted"
	}
	tr.End(t, trace.S("end", end))
	return e
}
