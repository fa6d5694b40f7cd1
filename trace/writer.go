package trace

import (
	"bufio"
	"fmt"
	"os"

	"google.golang.org/protobuf/proto"

	"vgpu/trace/perfetto"
)

// sequenceID is the one packet sequence a recorder writes.
const sequenceID = 1

// writer is the recorder's goroutine: it owns the file and everything below.
type writer struct {
	r        *Recorder
	out      *bufio.Writer
	max      int64
	err      error // the first write error; later events are dropped
	declared [numTracks]bool
	seenLost uint64

	// Reused for every packet: the writer marshals one at a time.
	buf  []byte
	pkt  perfetto.TracePacket
	ev   perfetto.TrackEvent
	data perfetto.TracePacket_TrackEvent
	anns [maxArgs]perfetto.DebugAnnotation
	annp [maxArgs]*perfetto.DebugAnnotation
	vals [maxArgs]struct {
		u perfetto.DebugAnnotation_UintValue
		i perfetto.DebugAnnotation_IntValue
		s perfetto.DebugAnnotation_StringValue
	}
	cats     [1]string
	flows    [1]uint64
	ts, uuid uint64
	seq      uint32
	typ      perfetto.TrackEvent_Type
	names    [maxArgs]string
}

func newWriter(r *Recorder, out *bufio.Writer, max int64) *writer {
	w := &writer{r: r, out: out, max: max, seq: sequenceID}
	for i := range w.annp {
		w.annp[i] = &w.anns[i]
	}
	return w
}

func (w *writer) run() {
	defer close(w.r.done)
	w.header()
	for {
		select {
		case e := <-w.r.events:
			w.event(&e)
		case <-w.r.stop:
			for {
				select {
				case e := <-w.r.events:
					w.event(&e)
					continue
				default:
				}
				break
			}
			w.trailer()
			if err := w.out.Flush(); err != nil && w.err == nil {
				w.err = fmt.Errorf("trace: %w", err)
			}
			return
		}
	}
}

// header declares the process track and the fixed tracks, in the order the UI shows them.
func (w *writer) header() {
	w.packet(&perfetto.TracePacket{
		TrustedPacketSequenceId: proto.Uint32(sequenceID),
		SequenceFlags:           proto.Uint32(uint32(perfetto.TracePacket_SEQ_INCREMENTAL_STATE_CLEARED)),
		FirstPacketOnSequence:   proto.Bool(true),
		Data: &perfetto.TracePacket_TrackDescriptor{TrackDescriptor: &perfetto.TrackDescriptor{
			Uuid:          proto.Uint64(rootUUID),
			Name:          proto.String("vgpu"),
			Process:       &perfetto.ProcessDescriptor{Pid: proto.Int32(int32(os.Getpid())), ProcessName: proto.String("vgpu")},
			ChildOrdering: perfetto.TrackDescriptor_EXPLICIT.Enum(),
		}},
	})
	for t := range fixedTracks {
		w.declare(Track(t))
	}
}

// declare writes t's descriptor: a named child of the process track, ranked by its index.
func (w *writer) declare(t Track) {
	w.declared[t] = true
	w.packet(&perfetto.TracePacket{
		TrustedPacketSequenceId: proto.Uint32(sequenceID),
		Data: &perfetto.TracePacket_TrackDescriptor{TrackDescriptor: &perfetto.TrackDescriptor{
			Uuid:             proto.Uint64(t.uuid()),
			ParentUuid:       proto.Uint64(rootUUID),
			Name:             proto.String(t.Name()),
			SiblingOrderRank: proto.Int32(int32(t)),
		}},
	})
}

// trailer records, on the device track, how many events the trace lost.
func (w *writer) trailer() {
	e := event{ts: int64(w.r.sinceStart()), track: TrackDevice, kind: kindInstant, name: "trace closed",
		nargs: 2, args: [maxArgs]Arg{U("events written", w.r.written.Load()), U("events dropped", w.r.dropped.Load())}}
	w.max += 1 << 10 // room for this one past the cap
	w.event(&e)
}

// event writes one engine event (its track's descriptor first, for a CU's first event).
func (w *writer) event(e *event) {
	if !w.declared[e.track] {
		w.declare(e.track)
	}
	w.ts, w.uuid = uint64(e.ts), e.track.uuid()
	w.pkt = perfetto.TracePacket{Timestamp: &w.ts, TrustedPacketSequenceId: &w.seq, Data: &w.data}
	if d := w.r.dropped.Load(); d != w.seenLost {
		w.seenLost = d
		one := uint32(1)
		w.pkt.PreviousPacketDropped = &one
	}
	w.typ = perfetto.TrackEvent_Type(e.kind)
	w.cats[0] = e.track.category()
	w.ev = perfetto.TrackEvent{Type: &w.typ, TrackUuid: &w.uuid}
	if e.kind != kindEnd {
		w.ev.Name = &e.name
		w.ev.Categories = w.cats[:]
	}
	if e.flow != 0 {
		w.flows[0] = e.flow
		if e.flowEnd {
			w.ev.TerminatingFlowIds = w.flows[:]
		} else {
			w.ev.FlowIds = w.flows[:]
		}
	}
	for i := range int(e.nargs) {
		a, d, v := &e.args[i], &w.anns[i], &w.vals[i]
		w.names[i] = a.Key
		*d = perfetto.DebugAnnotation{Name: &w.names[i]}
		switch {
		case a.IsStr:
			v.s.StringValue = a.Str
			d.Value = &v.s
		case a.IsInt:
			v.i.IntValue = int64(a.Val)
			d.Value = &v.i
		default:
			v.u.UintValue = a.Val
			d.Value = &v.u
		}
	}
	w.ev.DebugAnnotations = w.annp[:e.nargs]
	w.data.TrackEvent = &w.ev
	if w.packet(&w.pkt) {
		w.r.written.Add(1)
	} else {
		w.r.dropped.Add(1)
	}
}

// packet writes p unless the file is at its cap or broken; it reports whether it did.
func (w *writer) packet(p *perfetto.TracePacket) bool {
	if w.err != nil {
		return false
	}
	var err error
	w.buf, err = perfetto.AppendPacket(w.buf[:0], p)
	if err != nil {
		w.err = err
		return false
	}
	n := w.r.bytes.Load()
	if n+int64(len(w.buf)) > w.max {
		return false
	}
	if _, err := w.out.Write(w.buf); err != nil {
		w.err = fmt.Errorf("trace: %w", err)
		return false
	}
	w.r.bytes.Add(int64(len(w.buf)))
	return true
}
