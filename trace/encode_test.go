package trace

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"vgpu/trace/perfetto"
)

// TestHandEncodingIsTheProto: what appendEvent writes unmarshals into the generated types as
// the message proto.Marshal would have been given.
func TestHandEncodingIsTheProto(t *testing.T) {
	for _, tc := range []struct {
		name    string
		e       event
		dropped bool
	}{
		{"begin with args", event{ts: 12345, track: HQD(3), kind: kindBegin, name: "WRITE_DATA", nargs: 3,
			args: [maxArgs]Arg{U("addr", 0x8000_0000_1000), I("vmid", -1), S("why", "a reason")}}, false},
		{"end", event{ts: 1 << 40, track: HQD(3), kind: kindEnd, nargs: 1, args: [maxArgs]Arg{S("end", "drained")}}, true},
		{"flow step", event{ts: 7, track: TrackIH, kind: kindInstant, name: "doorbell", flow: 0xFFFF_FFFF_FFFF_FFF1}, false},
		{"flow end", event{ts: 8, track: CU(200), kind: kindInstant, name: "IV", flow: 3, flowEnd: true}, false},
	} {
		var c encoder
		b := c.appendEvent(nil, &tc.e, sequenceID, tc.dropped)
		var got perfetto.Trace
		if err := proto.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := wantPacket(&tc.e, tc.dropped)
		if len(got.GetPacket()) != 1 || !proto.Equal(got.GetPacket()[0], want) {
			t.Errorf("%s:\n got %v\nwant %v", tc.name, got.GetPacket(), want)
		}
	}
}

// wantPacket builds e's packet from the generated types.
func wantPacket(e *event, dropped bool) *perfetto.TracePacket {
	ev := &perfetto.TrackEvent{Type: perfetto.TrackEvent_Type(e.kind).Enum(), TrackUuid: proto.Uint64(e.track.uuid())}
	if e.kind != kindEnd {
		ev.Name = proto.String(e.name)
		ev.Categories = []string{e.track.category()}
	}
	for _, a := range e.args[:e.nargs] {
		d := &perfetto.DebugAnnotation{Name: proto.String(a.Key)}
		switch {
		case a.IsStr:
			d.Value = &perfetto.DebugAnnotation_StringValue{StringValue: a.Str}
		case a.IsInt:
			d.Value = &perfetto.DebugAnnotation_IntValue{IntValue: int64(a.Val)}
		default:
			d.Value = &perfetto.DebugAnnotation_UintValue{UintValue: a.Val}
		}
		ev.DebugAnnotations = append(ev.DebugAnnotations, d)
	}
	if e.flow != 0 {
		if e.flowEnd {
			ev.TerminatingFlowIds = []uint64{e.flow}
		} else {
			ev.FlowIds = []uint64{e.flow}
		}
	}
	p := &perfetto.TracePacket{Timestamp: proto.Uint64(uint64(e.ts)), TrustedPacketSequenceId: proto.Uint32(sequenceID),
		Data: &perfetto.TracePacket_TrackEvent{TrackEvent: ev}}
	if dropped {
		p.PreviousPacketDropped = proto.Uint32(1)
	}
	return p
}
