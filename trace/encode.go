package trace

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"vgpu/trace/perfetto"
)

// An engine event is encoded by hand (protowire) rather than through proto.Marshal of the
// generated messages: the writer must keep up with packets the CP runs in a few hundred
// nanoseconds, and marshalling cost several times more than this. The field numbers are read
// from the generated descriptors (perfetto.proto), never written here a second time, and
// encode_test.go checks that what this writes unmarshals into the generated types as the
// equivalent message.

// Field numbers, from the descriptors.
var (
	fPacketTimestamp = fieldNum(&perfetto.TracePacket{}, "timestamp")
	fPacketEvent     = fieldNum(&perfetto.TracePacket{}, "track_event")
	fPacketSeq       = fieldNum(&perfetto.TracePacket{}, "trusted_packet_sequence_id")
	fPacketDropped   = fieldNum(&perfetto.TracePacket{}, "previous_packet_dropped")
	fEventType       = fieldNum(&perfetto.TrackEvent{}, "type")
	fEventTrack      = fieldNum(&perfetto.TrackEvent{}, "track_uuid")
	fEventName       = fieldNum(&perfetto.TrackEvent{}, "name")
	fEventCategories = fieldNum(&perfetto.TrackEvent{}, "categories")
	fEventArgs       = fieldNum(&perfetto.TrackEvent{}, "debug_annotations")
	fEventFlow       = fieldNum(&perfetto.TrackEvent{}, "flow_ids")
	fEventFlowEnd    = fieldNum(&perfetto.TrackEvent{}, "terminating_flow_ids")
	fArgName         = fieldNum(&perfetto.DebugAnnotation{}, "name")
	fArgUint         = fieldNum(&perfetto.DebugAnnotation{}, "uint_value")
	fArgInt          = fieldNum(&perfetto.DebugAnnotation{}, "int_value")
	fArgString       = fieldNum(&perfetto.DebugAnnotation{}, "string_value")
	fTracePacket     = fieldNum(&perfetto.Trace{}, "packet")
)

func fieldNum(m interface{ ProtoReflect() protoreflect.Message }, name protoreflect.Name) protowire.Number {
	f := m.ProtoReflect().Descriptor().Fields().ByName(name)
	if f == nil {
		panic("trace: perfetto.proto has no field " + string(name))
	}
	return f.Number()
}

// encoder holds the scratch buffers of nested messages.
type encoder struct {
	ev, arg []byte
}

// appendEvent appends e as one Trace.packet record (a TracePacket holding a TrackEvent on
// sequence seq); dropped sets previous_packet_dropped.
func (c *encoder) appendEvent(b []byte, e *event, seq uint32, dropped bool) []byte {
	ev := c.ev[:0]
	ev = protowire.AppendTag(ev, fEventType, protowire.VarintType)
	ev = protowire.AppendVarint(ev, uint64(e.kind))
	ev = protowire.AppendTag(ev, fEventTrack, protowire.VarintType)
	ev = protowire.AppendVarint(ev, e.track.uuid())
	if e.kind != kindEnd {
		ev = protowire.AppendTag(ev, fEventName, protowire.BytesType)
		ev = protowire.AppendString(ev, e.name)
		ev = protowire.AppendTag(ev, fEventCategories, protowire.BytesType)
		ev = protowire.AppendString(ev, e.track.category())
	}
	for i := range int(e.nargs) {
		a := &e.args[i]
		arg := c.arg[:0]
		arg = protowire.AppendTag(arg, fArgName, protowire.BytesType)
		arg = protowire.AppendString(arg, a.Key)
		switch {
		case a.IsStr:
			arg = protowire.AppendTag(arg, fArgString, protowire.BytesType)
			arg = protowire.AppendString(arg, a.Str)
		case a.IsInt:
			arg = protowire.AppendTag(arg, fArgInt, protowire.VarintType)
			arg = protowire.AppendVarint(arg, a.Val) // int64 two's complement, as proto encodes it
		default:
			arg = protowire.AppendTag(arg, fArgUint, protowire.VarintType)
			arg = protowire.AppendVarint(arg, a.Val)
		}
		c.arg = arg
		ev = protowire.AppendTag(ev, fEventArgs, protowire.BytesType)
		ev = protowire.AppendBytes(ev, arg)
	}
	if e.flow != 0 {
		f := fEventFlow
		if e.flowEnd {
			f = fEventFlowEnd
		}
		ev = protowire.AppendTag(ev, f, protowire.Fixed64Type)
		ev = protowire.AppendFixed64(ev, e.flow)
	}
	c.ev = ev

	n := protowire.SizeTag(fPacketTimestamp) + protowire.SizeVarint(uint64(e.ts)) +
		protowire.SizeTag(fPacketSeq) + protowire.SizeVarint(uint64(seq)) +
		protowire.SizeTag(fPacketEvent) + protowire.SizeBytes(len(ev))
	if dropped {
		n += protowire.SizeTag(fPacketDropped) + protowire.SizeVarint(1)
	}
	b = protowire.AppendTag(b, fTracePacket, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	b = protowire.AppendTag(b, fPacketTimestamp, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(e.ts))
	b = protowire.AppendTag(b, fPacketSeq, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(seq))
	if dropped {
		b = protowire.AppendTag(b, fPacketDropped, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	b = protowire.AppendTag(b, fPacketEvent, protowire.BytesType)
	return protowire.AppendBytes(b, ev)
}
