package timeline

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"vgpu/trace/perfetto"
)

// traceBuilder writes a Perfetto trace with the generated types, as a recorder would.
type traceBuilder struct {
	b []byte
	t testing.TB
}

func (tb *traceBuilder) packet(p *perfetto.TracePacket) {
	var err error
	tb.b, err = perfetto.AppendPacket(tb.b, p)
	if err != nil {
		tb.t.Fatal(err)
	}
}

func (tb *traceBuilder) track(uuid, parent uint64, name string, rank int32) {
	td := &perfetto.TrackDescriptor{Uuid: proto.Uint64(uuid), Name: proto.String(name), SiblingOrderRank: proto.Int32(rank)}
	if parent != 0 {
		td.ParentUuid = proto.Uint64(parent)
	} else {
		td.ChildOrdering = perfetto.TrackDescriptor_EXPLICIT.Enum()
	}
	tb.packet(&perfetto.TracePacket{Data: &perfetto.TracePacket_TrackDescriptor{TrackDescriptor: td}})
}

type ev struct {
	t           uint64
	track       uint64
	typ         perfetto.TrackEvent_Type
	name        string
	flows, term []uint64
	args        map[string]uint64
}

func (tb *traceBuilder) event(e ev) {
	te := &perfetto.TrackEvent{Type: e.typ.Enum(), TrackUuid: proto.Uint64(e.track), FlowIds: e.flows, TerminatingFlowIds: e.term}
	if e.name != "" {
		te.Name = proto.String(e.name)
	}
	for k, v := range e.args {
		te.DebugAnnotations = append(te.DebugAnnotations, &perfetto.DebugAnnotation{Name: proto.String(k),
			Value: &perfetto.DebugAnnotation_UintValue{UintValue: v}})
	}
	tb.packet(&perfetto.TracePacket{Timestamp: proto.Uint64(e.t), Data: &perfetto.TracePacket_TrackEvent{TrackEvent: te}})
}

const (
	begin   = perfetto.TrackEvent_TYPE_SLICE_BEGIN
	end     = perfetto.TrackEvent_TYPE_SLICE_END
	instant = perfetto.TrackEvent_TYPE_INSTANT
)

// Track uuids of sampleTrace, named as the recorder names its tracks.
const (
	uRoot, uTransport, uMES, uIH, uHQD1, uHQD2, uCU0 = 1, 0x101, 0x102, 0x103, 0x105, 0x106, 0x200
)

// sampleTrace is a small workload: two queues mapped by the MES, each kicked by a doorbell
// (transport) whose flow goes through the queue's fence to the IH's interrupt, a dispatch on
// a CU, and a slice the trace never ends.
func sampleTrace(t testing.TB) []byte {
	tb := &traceBuilder{t: t}
	tb.track(uRoot, 0, "vgpu", 0)
	tb.track(uCU0, uRoot, "CU 0", 30) // declared first, ranked last
	tb.track(uTransport, uRoot, "transport", 1)
	tb.track(uMES, uRoot, "MES", 2)
	tb.track(uIH, uRoot, "IH ring", 3)
	tb.track(uHQD1, uRoot, "HQD 1", 5)
	tb.track(uHQD2, uRoot, "HQD 2", 6)
	tb.event(ev{t: 1000, track: uMES, typ: begin, name: "map queue"})
	tb.event(ev{t: 3000, track: uMES, typ: end})
	tb.event(ev{t: 3500, track: uMES, typ: begin, name: "map queue"})
	tb.event(ev{t: 5000, track: uMES, typ: end})
	for i, q := range []struct{ hqd, at uint64 }{{uHQD1, 10_000}, {uHQD2, 12_000}} {
		id := uint64(0x10 + i)
		tb.event(ev{t: q.at, track: uTransport, typ: instant, name: "doorbell", flows: []uint64{id}})
		tb.event(ev{t: q.at + 500, track: q.hqd, typ: begin, name: "INDIRECT_BUFFER", args: map[string]uint64{"ib": 0x1000}})
		tb.event(ev{t: q.at + 800, track: q.hqd, typ: begin, name: "DISPATCH_DIRECT"})
		tb.event(ev{t: q.at + 5000, track: q.hqd, typ: end})
		tb.event(ev{t: q.at + 6000, track: q.hqd, typ: end})
		tb.event(ev{t: q.at + 6500, track: q.hqd, typ: instant, name: "fence", flows: []uint64{id}})
		tb.event(ev{t: q.at + 6500 + uint64(1000*(i+1)), track: uIH, typ: instant, name: "interrupt", term: []uint64{id}})
	}
	tb.event(ev{t: 11_000, track: uCU0, typ: begin, name: "workgroup 0"})
	tb.event(ev{t: 15_000, track: uCU0, typ: end})
	tb.event(ev{t: 30_000, track: uMES, typ: begin, name: "unmap queue"}) // never ends
	tb.event(ev{t: 40_000, track: uIH, typ: instant, name: "trace closed"})
	return tb.b
}
