package cp

import (
	"strings"
	"sync"

	"vgpu/abi"
	"vgpu/compute"
	"vgpu/engine"
	"vgpu/trace"
)

// The CP's timeline (package trace): on each HQD slot's track, a "run" slice per execution
// batch (a wake of the queue until its ring is drained, it stops or it halts), inside it an
// "IB1"/"IB2" slice per indirect buffer and a slice per packet named by its opcode, inside
// those a "wait" slice when the packet parks or waits for its dispatches; instants for
// doorbells, fences, cache actions, dispatches and halts. A doorbell starts a flow that its
// queue's next fence continues and the fence's EOP IV (package irq) ends.

// SetTrace makes the CP record on r (nil: recording off). Call it before any queue runs.
func (c *CP) SetTrace(r *trace.Recorder) {
	c.trace = r
	if r != nil {
		opNamesOnce.Do(makeOpNames)
	}
}

// queueTrace is a queue's trace state, used by its own goroutine only.
type queueTrace struct {
	open int // slices tracedExecute has open on the slot's track: the run and its IBs
}

var (
	opNamesOnce sync.Once
	opNames     [256]string // PM4 opcode → its name without PM4_IT_
)

func makeOpNames() {
	for op := range opNames {
		opNames[op] = strings.TrimPrefix(abi.NameOf("PM4_IT_", uint64(op)), "PM4_IT_")
	}
}

// tracedExecute is execute inside a "run" slice. IB slices still open when the batch ends
// (a stop or a halt inside an IB) are closed with it, and a batch that resumes inside IBs (a
// preempted mapped queue) opens one per level, so the slot's slices always balance.
func (q *queue) tracedExecute() execStatus {
	r := q.c.trace
	if r == nil {
		return q.execute()
	}
	t := trace.HQD(q.slot)
	ring := &q.streams[0]
	r.Begin(t, "run", trace.U("rptr", ring.pos), trace.U("wptr", ring.end), trace.I("vmid", int64(q.vmid)))
	q.tr.open = 1
	for l := 1; l <= q.level; l++ {
		r.Begin(t, "IB (resumed)", trace.U("base", q.streams[l].base), trace.I("level", int64(l)))
		q.tr.open++
	}
	st := q.execute()
	for ; q.tr.open > 1; q.tr.open-- {
		r.End(t)
	}
	r.End(t, trace.S("end", st.String()), trace.U("rptr end", ring.pos))
	q.tr.open = 0
	return st
}

func (s execStatus) String() string {
	switch s {
	case execDone:
		return "drained"
	case execStuck:
		return "partial packet"
	case execStop:
		return "stopped"
	case execHalt:
		return "halted"
	}
	return "?"
}

// tracePacket opens the slice of a packet about to run at pos of s; an INDIRECT_BUFFER has
// none (its IB slice, traceIB, stands for it). It and tracePacketEnd run for every packet:
// they inline to a nil check when recording is off.
func (q *queue) tracePacket(op uint32, s *stream, pos uint64) {
	if q.c.trace != nil {
		q.tracePacketOn(op, s, pos)
	}
}

func (q *queue) tracePacketOn(op uint32, s *stream, pos uint64) {
	if op != abi.PM4_IT_INDIRECT_BUFFER {
		q.c.trace.Begin(trace.HQD(q.slot), opNames[op&0xFF], trace.U("addr", s.addr(pos)))
	}
}

// tracePacketEnd closes tracePacket's slice.
func (q *queue) tracePacketEnd(op uint32, err error) {
	if q.c.trace != nil {
		q.tracePacketEndOn(op, err)
	}
}

func (q *queue) tracePacketEndOn(op uint32, err error) {
	r := q.c.trace
	if op == abi.PM4_IT_INDIRECT_BUFFER {
		return
	}
	if err != nil && err != errStop {
		r.End(trace.HQD(q.slot), trace.S("error", err.Error()))
		return
	}
	r.End(trace.HQD(q.slot))
}

// traceIB opens the slice of an IB that starts (a CHAIN closes the IB it replaces first).
func (q *queue) traceIB(base, dwords uint64, chain bool) {
	r := q.c.trace
	if r == nil || q.tr.open == 0 {
		return
	}
	t := trace.HQD(q.slot)
	name := "IB1"
	if q.level == 2 {
		name = "IB2"
	}
	if chain && q.tr.open > 1 {
		r.End(t)
		q.tr.open--
		name += " (chained)"
	}
	r.Begin(t, name, trace.U("base", base), trace.U("dwords", dwords), trace.I("vmid", int64(q.streams[q.level].vmid)))
	q.tr.open++
}

// traceIBEnd closes the slice of an IB that returned to its parent stream.
func (q *queue) traceIBEnd() {
	if r := q.c.trace; r != nil && q.tr.open > 1 {
		r.End(trace.HQD(q.slot))
		q.tr.open--
	}
}

// traceWait opens a "wait" slice (a parked WAIT_REG_MEM, or a packet waiting for the queue's
// dispatches); traceWaitEnd closes it.
func (q *queue) traceWait(what string) {
	if r := q.c.trace; r != nil {
		r.Begin(trace.HQD(q.slot), "wait", trace.S("for", what))
	}
}

func (q *queue) traceWaitEnd() {
	if r := q.c.trace; r != nil {
		r.End(trace.HQD(q.slot))
	}
}

// traceDoorbell records a doorbell that reached slot's queue: it starts the flow the queue's
// next fence continues.
func (c *CP) traceDoorbell(slot int, value uint64) {
	if r := c.trace; r != nil {
		f := r.NewFlow()
		r.FlowStep(trace.HQD(slot), "doorbell", f, trace.U("wptr", value))
		r.SetSlotFlow(slot, f)
	}
}

// traceFence records a fence (RELEASE_MEM's or PROTECTED_FENCE_SIGNAL's data written, and/or
// its interrupt): it continues the flow of the doorbell before it, which its IV ends.
func (q *queue) traceFence(addr uint64, data, irq bool) {
	r := q.c.trace
	if r == nil {
		return
	}
	t := trace.HQD(q.slot)
	if !data && !irq {
		return
	}
	f := r.TakeSlotFlow(q.slot)
	switch {
	case f == 0:
		r.Instant(t, "fence", trace.U("addr", addr))
	case irq:
		r.FlowStep(t, "fence", f, trace.U("addr", addr))
		r.SetRingFlow(q.ringID, f)
	default:
		r.FlowEnd(t, "fence", f, trace.U("addr", addr))
	}
}

// traceCache records a GL2 cache action a packet requested.
func (q *queue) traceCache(op engine.CacheOp, va, size uint64) {
	if r := q.c.trace; r != nil {
		name := "GL2 " + op.String()
		if int(op) < len(gl2Names) {
			name = gl2Names[op]
		}
		if size == engine.CacheAll {
			r.Instant(trace.HQD(q.slot), name, trace.S("range", "all"))
			return
		}
		r.Instant(trace.HQD(q.slot), name, trace.U("va", va), trace.U("bytes", size))
	}
}

// gl2Names are traceCache's event names, made once (not a string per event).
var gl2Names = func() (n [engine.CacheDiscard + 1]string) {
	for op := range n {
		n[op] = "GL2 " + engine.CacheOp(op).String()
	}
	return n
}()

// invalidateL0 invalidates the compute units' L0 caches (GLV/GL1 invalidation), recorded.
func (q *queue) invalidateL0() {
	if r := q.c.trace; r != nil {
		r.Instant(trace.HQD(q.slot), "L0 invalidate")
	}
	q.c.compute.InvalidateL0()
}

// traceDispatch records a dispatch started on the compute units (its workgroups are on the
// CU tracks with the same run id).
func (q *queue) traceDispatch(run *compute.Run, groups [3]uint32, resumed bool) {
	if r := q.c.trace; r != nil && run != nil {
		name := "dispatch"
		if resumed {
			name = "dispatch (resumed)"
		}
		r.Instant(trace.HQD(q.slot), name, trace.U("run", run.ID()),
			trace.U("groups", uint64(groups[0])*uint64(groups[1])*uint64(groups[2])))
	}
}

// traceHalt records a queue halt.
func (q *queue) traceHalt(f *fault, addr uint64, info uint32) {
	if r := q.c.trace; r != nil {
		r.Instant(trace.HQD(q.slot), "halt", trace.S("error", errorName(f.code)), trace.U("addr", addr),
			trace.U("info", uint64(info)), trace.S("why", f.why))
	}
}

// traceEngineReset records a CP_ENGINE_RESET request (v: its engine bits).
func (c *CP) traceEngineReset(v uint32) {
	if r := c.trace; r != nil {
		r.Instant(trace.TrackDevice, "CP engine reset", trace.U("engines", uint64(v)))
	}
}
