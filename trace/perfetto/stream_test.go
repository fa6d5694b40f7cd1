package perfetto

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestStreamedPacketsAreATrace writes packets one by one, as the recorder does, and reads the
// bytes back as one Trace message.
func TestStreamedPacketsAreATrace(t *testing.T) {
	packets := []*TracePacket{
		{
			TrustedPacketSequenceId: proto.Uint32(1),
			SequenceFlags:           proto.Uint32(uint32(TracePacket_SEQ_INCREMENTAL_STATE_CLEARED)),
			Data: &TracePacket_TrackDescriptor{TrackDescriptor: &TrackDescriptor{
				Uuid:    proto.Uint64(7),
				Name:    proto.String("HQD 0"),
				Process: &ProcessDescriptor{Pid: proto.Int32(1), ProcessName: proto.String("vgpu")},
			}},
		},
		{
			Timestamp:               proto.Uint64(100),
			TrustedPacketSequenceId: proto.Uint32(1),
			Data: &TracePacket_TrackEvent{TrackEvent: &TrackEvent{
				Type:      TrackEvent_TYPE_SLICE_BEGIN.Enum(),
				TrackUuid: proto.Uint64(7),
				Name:      proto.String("RELEASE_MEM"),
				FlowIds:   []uint64{42},
				DebugAnnotations: []*DebugAnnotation{
					{Name: proto.String("addr"), Value: &DebugAnnotation_UintValue{UintValue: 0x1000}},
				},
			}},
		},
		{
			Timestamp:               proto.Uint64(250),
			TrustedPacketSequenceId: proto.Uint32(1),
			Data: &TracePacket_TrackEvent{TrackEvent: &TrackEvent{
				Type:      TrackEvent_TYPE_SLICE_END.Enum(),
				TrackUuid: proto.Uint64(7),
			}},
		},
	}
	var buf bytes.Buffer
	for _, p := range packets {
		if err := WritePacket(&buf, p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadTrace(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetPacket()) != len(packets) {
		t.Fatalf("read %d packets, wrote %d", len(got.GetPacket()), len(packets))
	}
	for i, p := range packets {
		if !proto.Equal(got.GetPacket()[i], p) {
			t.Errorf("packet %d: read %v, wrote %v", i, got.GetPacket()[i], p)
		}
	}
	ev := got.GetPacket()[1].GetTrackEvent()
	if ev.GetName() != "RELEASE_MEM" || ev.GetFlowIds()[0] != 42 || ev.GetDebugAnnotations()[0].GetUintValue() != 0x1000 {
		t.Errorf("event fields lost: %v", ev)
	}
}

// TestWireNumbers pins a few field numbers to Perfetto's by checking the encoded bytes: a
// TracePacket{timestamp: 1} is field 8 varint (tag 0x40), track_event field 11 (tag 0x5a) and
// track_descriptor field 60 (tag 0xe2 0x03).
func TestWireNumbers(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *TracePacket
		want []byte
	}{
		{"timestamp", &TracePacket{Timestamp: proto.Uint64(1)}, []byte{0x40, 0x01}},
		{"track_event", &TracePacket{Data: &TracePacket_TrackEvent{TrackEvent: &TrackEvent{}}}, []byte{0x5a, 0x00}},
		{"track_descriptor", &TracePacket{Data: &TracePacket_TrackDescriptor{TrackDescriptor: &TrackDescriptor{}}}, []byte{0xe2, 0x03, 0x00}},
		{"sequence_id", &TracePacket{TrustedPacketSequenceId: proto.Uint32(3)}, []byte{0x50, 0x03}},
		{"flow_ids fixed64", &TracePacket{Data: &TracePacket_TrackEvent{TrackEvent: &TrackEvent{FlowIds: []uint64{1}}}},
			[]byte{0x5a, 0x0a, 0xf9, 0x02, 1, 0, 0, 0, 0, 0, 0, 0}},
	} {
		got, err := proto.Marshal(tc.p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s: encoded % x, want % x", tc.name, got, tc.want)
		}
	}
}

func TestReadTraceRejectsGarbage(t *testing.T) {
	if _, err := ReadTrace(bytes.NewReader([]byte{0x0a, 0x05, 0x01})); err == nil {
		t.Fatal("a truncated packet decoded without error")
	}
}
