package mes

import (
	"strings"
	"sync"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/trace"
)

// The scheduler's timeline (package trace): on the MES track, a slice per API frame named by
// its opcode (its end says whether it completed, failed or waits), a "map" slice while a queue
// is loaded into a slot and an "unmap" slice while one that left is saved, and an instant per
// event-log record (MES_EVT_*: preempt, hang, reset, VMID, ...). A map or unmap is also an
// instant on the slot's HQD track.

// SetTrace makes the scheduler record on r (nil: off). Call it before MES starts.
func (m *MES) SetTrace(r *trace.Recorder) {
	m.trace = r
	if r != nil {
		namesOnce.Do(makeNames)
	}
}

var (
	namesOnce                        sync.Once
	apiNames, eventNames, unmapNames [64]string
)

func makeNames() {
	fill := func(names *[64]string, prefix string) {
		for _, g := range abi.Groups {
			if g.Prefix != prefix {
				continue
			}
			for _, c := range g.Consts {
				if c.Value < 64 && names[c.Value] == "" && !strings.HasPrefix(c.Name, "DW_") &&
					!strings.HasSuffix(c.Name, "_MASK") && !strings.HasSuffix(c.Name, "__SHIFT") {
					names[c.Value] = c.Name
				}
			}
		}
	}
	fill(&apiNames, "MES_SCH_API_")
	fill(&eventNames, "MES_EVT_")
	fill(&unmapNames, "MES_UNMAP_")
}

// name is table[v], or v in hex for a value without a name.
func name(table *[64]string, prefix string, v uint32) string {
	if v < 64 && table[v] != "" {
		return table[v]
	}
	return abi.NameOf(prefix, uint64(v))
}

// tracedExecute is execute inside the frame's slice.
func (a *activation) tracedExecute(f *frame, pos uint64, now time.Time) *frameErr {
	r := a.m.trace
	if r == nil {
		return a.execute(f, pos, now)
	}
	r.Begin(trace.TrackMES, name(&apiNames, "MES_SCH_API_", f.opcode()), trace.U("rptr", pos))
	err := a.execute(f, pos, now)
	switch {
	case err == errWaiting:
		r.End(trace.TrackMES, trace.S("result", "waiting"))
	case err != nil:
		r.End(trace.TrackMES, trace.S("result", err.Error()))
	default:
		r.End(trace.TrackMES, trace.S("result", "done"))
	}
	return err
}

// tracedPlace is place inside a "map" slice.
func (a *activation) tracedPlace(q *queue, slot int, now time.Time) bool {
	r := a.m.trace
	if r == nil {
		return a.place(q, slot, now)
	}
	r.Begin(trace.TrackMES, "map", trace.U("doorbell", uint64(q.doorbell)), trace.I("slot", int64(slot)),
		trace.U("priority", uint64(q.gang.level)))
	ok := a.place(q, slot, now)
	if ok {
		r.End(trace.TrackMES, trace.S("result", "mapped"))
	} else {
		r.End(trace.TrackMES, trace.S("result", "not mapped"))
	}
	return ok
}

// tracedLeftSlot is leftSlot inside an "unmap" slice.
func (a *activation) tracedLeftSlot(q *queue, img cp.Image, reason uint32, now time.Time) {
	r := a.m.trace
	if r == nil {
		a.leftSlot(q, img, reason, now)
		return
	}
	r.Begin(trace.TrackMES, "unmap", trace.U("doorbell", uint64(q.doorbell)), trace.I("slot", int64(q.slot)),
		trace.S("reason", name(&unmapNames, "MES_UNMAP_", reason)))
	a.leftSlot(q, img, reason, now)
	r.End(trace.TrackMES)
}

// traceEvent records an event-log record (whether or not the driver set a log buffer).
func (a *activation) traceEvent(kind, reason uint32, slot int, doorbell uint32, rptr uint64) {
	r := a.m.trace
	if r == nil {
		return
	}
	ev := name(&eventNames, "MES_EVT_", kind)
	switch kind {
	case abi.MES_EVT_FRAME:
		r.Instant(trace.TrackMES, "frame done", trace.S("opcode", name(&apiNames, "MES_SCH_API_", doorbell)))
		return
	case abi.MES_EVT_FRAME_ERROR:
		r.Instant(trace.TrackMES, "frame error", trace.S("opcode", name(&apiNames, "MES_SCH_API_", doorbell)),
			trace.S("error", abi.NameOf("MES_ERR_", uint64(reason))))
		return
	case abi.MES_EVT_UNMAP, abi.MES_EVT_PREEMPT:
		r.Instant(trace.TrackMES, ev, trace.I("slot", int64(slot)), trace.U("doorbell", uint64(doorbell)),
			trace.U("rptr", rptr), trace.S("reason", name(&unmapNames, "MES_UNMAP_", reason)))
	default:
		r.Instant(trace.TrackMES, ev, trace.I("slot", int64(slot)), trace.U("doorbell", uint64(doorbell)),
			trace.U("rptr", rptr), trace.U("reason", uint64(reason)))
	}
	if (kind == abi.MES_EVT_MAP || kind == abi.MES_EVT_UNMAP) && slot >= 0 && slot < cp.NumSlots {
		r.Instant(trace.HQD(slot), "MES "+ev, trace.U("doorbell", uint64(doorbell)), trace.U("rptr", rptr))
	}
}
