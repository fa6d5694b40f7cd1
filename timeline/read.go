package timeline

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"vgpu/trace/perfetto"
)

// Bounds on what Read accepts. A trace is a user's file: it is refused, with a named error,
// rather than read into unbounded memory.
const (
	// MaxTraceBytes is above the recorder's own cap (trace.DefaultMaxBytes, 256 MiB, plus its
	// trailer), so every file vgpu records can be drawn.
	MaxTraceBytes = 320 << 20
	MaxEvents     = 8 << 20 // track events (slice begins and ends, instants)
	MaxTrackDecls = 1 << 16 // TrackDescriptors
	maxArgs       = 8       // debug annotations kept per event
)

var (
	ErrTooLarge      = errors.New("timeline: trace file larger than MaxTraceBytes")
	ErrTooManyEvents = errors.New("timeline: trace has more than MaxEvents track events")
	ErrTooManyTracks = errors.New("timeline: trace declares more than MaxTrackDecls tracks")
	ErrNotATrace     = errors.New("timeline: not a Perfetto trace")
)

const errPacketEncoding = "timeline: trace packet %d at byte %d"

// ReadFile reads the Perfetto trace at path into a Model.
func ReadFile(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxTraceBytes {
		return nil, fmt.Errorf("%s: %w (%d bytes)", path, ErrTooLarge, fi.Size())
	}
	m, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Read reads a whole Perfetto trace (at most MaxTraceBytes) into a Model.
func Read(r io.Reader) (*Model, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxTraceBytes+1))
	if err != nil {
		return nil, fmt.Errorf("timeline: read trace: %w", err)
	}
	if len(b) > MaxTraceBytes {
		return nil, ErrTooLarge
	}
	return Parse(b)
}

// Parse decodes a trace held in memory. The file is a Trace message: its packets (field 1)
// are unmarshalled one at a time into a perfetto.TracePacket, so memory holds the model's
// events rather than every packet's Go struct; other top-level fields are skipped, as a proto
// reader would. Counter values are not drawn. An empty input is an empty trace; anything that
// is not a Trace message is ErrNotATrace.
func Parse(b []byte) (*Model, error) {
	var (
		infos   []TrackInfo
		events  []Event
		pkt     perfetto.TracePacket
		off     int
		skipped int
	)
	for n := 0; off < len(b); n++ {
		num, typ, l := protowire.ConsumeTag(b[off:])
		if l < 0 {
			return nil, fmt.Errorf(errPacketEncoding+": %w: %v", n, off, ErrNotATrace, protowire.ParseError(l))
		}
		if num != 1 || typ != protowire.BytesType {
			k := protowire.ConsumeFieldValue(num, typ, b[off+l:])
			if k < 0 {
				return nil, fmt.Errorf(errPacketEncoding+": %w: %v", n, off, ErrNotATrace, protowire.ParseError(k))
			}
			off += l + k
			continue
		}
		body, k := protowire.ConsumeBytes(b[off+l:])
		if k < 0 {
			return nil, fmt.Errorf(errPacketEncoding+": %w: %v", n, off, ErrNotATrace, protowire.ParseError(k))
		}
		if err := proto.Unmarshal(body, &pkt); err != nil {
			return nil, fmt.Errorf(errPacketEncoding+": %w", n, off, err)
		}
		off += l + k
		switch d := pkt.GetData().(type) {
		case *perfetto.TracePacket_TrackDescriptor:
			if len(infos) >= MaxTrackDecls {
				return nil, ErrTooManyTracks
			}
			td := d.TrackDescriptor
			name := td.GetName()
			if name == "" {
				name = td.GetProcess().GetProcessName()
			}
			if name == "" {
				name = td.GetThread().GetThreadName()
			}
			infos = append(infos, TrackInfo{UUID: td.GetUuid(), Parent: td.GetParentUuid(), Name: name,
				Rank: td.GetSiblingOrderRank(), ExplicitChildren: td.GetChildOrdering() == perfetto.TrackDescriptor_EXPLICIT})
		case *perfetto.TracePacket_TrackEvent:
			te := d.TrackEvent
			var typ EventType
			switch te.GetType() {
			case perfetto.TrackEvent_TYPE_SLICE_BEGIN:
				typ = Begin
			case perfetto.TrackEvent_TYPE_SLICE_END:
				typ = End
			case perfetto.TrackEvent_TYPE_INSTANT:
				typ = Instant
			default:
				skipped++ // counters and unspecified events are not drawn
				continue
			}
			if len(events) >= MaxEvents {
				return nil, ErrTooManyEvents
			}
			ts := pkt.GetTimestamp()
			if ts > math.MaxInt64 {
				ts = math.MaxInt64
			}
			events = append(events, Event{T: int64(ts), Track: te.GetTrackUuid(), Type: typ, Name: te.GetName(),
				Args: args(te.GetDebugAnnotations()), Flows: te.GetFlowIds(), Terminating: te.GetTerminatingFlowIds()})
		}
	}
	m := Build(infos, events)
	m.Skipped = skipped
	return m, nil
}

// args renders an event's debug annotations as "name=value", at most maxArgs of them.
func args(as []*perfetto.DebugAnnotation) []string {
	if len(as) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(as), maxArgs))
	for _, a := range as {
		if len(out) == maxArgs {
			break
		}
		var v string
		switch x := a.GetValue().(type) {
		case *perfetto.DebugAnnotation_BoolValue:
			v = strconv.FormatBool(x.BoolValue)
		case *perfetto.DebugAnnotation_UintValue:
			v = strconv.FormatUint(x.UintValue, 10)
		case *perfetto.DebugAnnotation_IntValue:
			v = strconv.FormatInt(x.IntValue, 10)
		case *perfetto.DebugAnnotation_DoubleValue:
			v = strconv.FormatFloat(x.DoubleValue, 'g', 6, 64)
		case *perfetto.DebugAnnotation_StringValue:
			v = x.StringValue
		case *perfetto.DebugAnnotation_PointerValue:
			v = "0x" + strconv.FormatUint(x.PointerValue, 16)
		}
		out = append(out, cleanName(a.GetName()+"="+v))
	}
	return out
}

// WriteFile renders the trace at tracePath as the page htmlPath (written to a temporary file
// beside it, then renamed, so a reader never sees half a page).
func WriteFile(tracePath, htmlPath string) error {
	m, err := ReadFile(tracePath)
	if err != nil {
		return err
	}
	return WriteHTML(htmlPath, m, Options{Source: filepath.Base(tracePath)})
}

// WriteHTML renders m as the page at path, through a temporary file renamed into place.
func WriteHTML(path string, m *Model, o Options) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".timeline-*.html")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := Render(tmp, m, o); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
