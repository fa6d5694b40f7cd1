package trace

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"vgpu/trace/perfetto"
)

// Timeline is a trace file read back: its tracks, and its events ordered by time with each
// SLICE_BEGIN matched to its SLICE_END.
type Timeline struct {
	Tracks   []TrackInfo // in the file's order
	Slices   []Slice     // by start time, outer before inner
	Instants []Instant   // by time
	// Flows are each flow id's events in time order.
	Flows map[uint64][]FlowPoint
	// Unmatched counts SLICE_ENDs with no open slice on their track; Unfinished slices that
	// never ended (the trace was closed first). A complete trace has neither.
	Unmatched, Unfinished int
}

// TrackInfo is one TrackDescriptor.
type TrackInfo struct {
	UUID, Parent uint64
	Name         string
	Rank         int32 // sibling_order_rank: the order among its parent's children
}

// Slice is a matched begin/end pair.
type Slice struct {
	Track      uint64
	Name       string
	Start, End uint64 // ns
	Depth      int    // 0: the track's outermost slice
	Args       []Arg  // the begin's annotations, then the end's
}

// Instant is a point event.
type Instant struct {
	Track uint64
	Name  string
	TS    uint64
	Args  []Arg
}

// FlowPoint is one event of a flow.
type FlowPoint struct {
	Track uint64
	Name  string
	TS    uint64
	Last  bool // the flow terminates here
}

// ErrUnknownTrack is Load's error for an event on a track no descriptor declares.
var ErrUnknownTrack = errors.New("trace: event on an undeclared track")

// LoadFile reads a trace file (at most perfetto.MaxFileSize bytes).
func LoadFile(path string) (*Timeline, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	return Load(f)
}

// Load reads a trace (at most perfetto.MaxFileSize bytes) into a Timeline.
func Load(r io.Reader) (*Timeline, error) {
	tr, err := perfetto.ReadTrace(r)
	if err != nil {
		return nil, err
	}
	return FromTrace(tr)
}

// Track returns the first track named name.
func (t *Timeline) Track(name string) (TrackInfo, bool) {
	for _, tk := range t.Tracks {
		if tk.Name == name {
			return tk, true
		}
	}
	return TrackInfo{}, false
}

// Arg returns the annotation named key and whether there is one.
func (s *Slice) Arg(key string) (Arg, bool) { return findArg(s.Args, key) }

// Arg returns the annotation named key and whether there is one.
func (i *Instant) Arg(key string) (Arg, bool) { return findArg(i.Args, key) }

func findArg(args []Arg, key string) (Arg, bool) {
	for _, a := range args {
		if a.Key == key {
			return a, true
		}
	}
	return Arg{}, false
}

// String is the annotation's value as text.
func (a Arg) String() string {
	switch {
	case a.IsStr:
		return a.Str
	case a.IsInt:
		return strconv.FormatInt(int64(a.Val), 10)
	}
	return "0x" + strconv.FormatUint(a.Val, 16)
}

type timed struct {
	ts  uint64
	seq int
	ev  *perfetto.TrackEvent
}

// FromTrace matches a decoded trace's events into a Timeline.
func FromTrace(tr *perfetto.Trace) (*Timeline, error) {
	t := &Timeline{Flows: map[uint64][]FlowPoint{}}
	known := map[uint64]bool{}
	var evs []timed
	for i, p := range tr.GetPacket() {
		if d := p.GetTrackDescriptor(); d != nil {
			if !known[d.GetUuid()] {
				known[d.GetUuid()] = true
				t.Tracks = append(t.Tracks, TrackInfo{UUID: d.GetUuid(), Parent: d.GetParentUuid(),
					Name: d.GetName(), Rank: d.GetSiblingOrderRank()})
			}
		}
		if e := p.GetTrackEvent(); e != nil {
			evs = append(evs, timed{p.GetTimestamp(), i, e})
		}
	}
	// Stable by timestamp: one goroutine's events keep their order at equal times.
	slices.SortStableFunc(evs, func(a, b timed) int { return cmp.Compare(a.ts, b.ts) })
	type open struct {
		name  string
		start uint64
		args  []Arg
	}
	stacks := map[uint64][]open{}
	for _, x := range evs {
		e, uuid := x.ev, x.ev.GetTrackUuid()
		if !known[uuid] {
			return nil, fmt.Errorf("%w: uuid %d (packet %d)", ErrUnknownTrack, uuid, x.seq)
		}
		args := argsOf(e)
		switch e.GetType() {
		case perfetto.TrackEvent_TYPE_SLICE_BEGIN:
			stacks[uuid] = append(stacks[uuid], open{e.GetName(), x.ts, args})
		case perfetto.TrackEvent_TYPE_SLICE_END:
			st := stacks[uuid]
			if len(st) == 0 {
				t.Unmatched++
				continue
			}
			o := st[len(st)-1]
			stacks[uuid] = st[:len(st)-1]
			t.Slices = append(t.Slices, Slice{Track: uuid, Name: o.name, Start: o.start, End: x.ts,
				Depth: len(st) - 1, Args: append(o.args, args...)})
		case perfetto.TrackEvent_TYPE_INSTANT:
			t.Instants = append(t.Instants, Instant{Track: uuid, Name: e.GetName(), TS: x.ts, Args: args})
		}
		for _, id := range e.GetFlowIds() {
			t.Flows[id] = append(t.Flows[id], FlowPoint{Track: uuid, Name: e.GetName(), TS: x.ts})
		}
		for _, id := range e.GetTerminatingFlowIds() {
			t.Flows[id] = append(t.Flows[id], FlowPoint{Track: uuid, Name: e.GetName(), TS: x.ts, Last: true})
		}
	}
	for _, st := range stacks {
		t.Unfinished += len(st)
	}
	slices.SortStableFunc(t.Slices, func(a, b Slice) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Depth, b.Depth))
	})
	return t, nil
}

func argsOf(e *perfetto.TrackEvent) []Arg {
	var args []Arg
	for _, d := range e.GetDebugAnnotations() {
		a := Arg{Key: d.GetName()}
		switch v := d.GetValue().(type) {
		case *perfetto.DebugAnnotation_UintValue:
			a.Val = v.UintValue
		case *perfetto.DebugAnnotation_IntValue:
			a.Val, a.IsInt = uint64(v.IntValue), true
		case *perfetto.DebugAnnotation_PointerValue:
			a.Val = v.PointerValue
		case *perfetto.DebugAnnotation_BoolValue:
			if v.BoolValue {
				a.Val = 1
			}
		case *perfetto.DebugAnnotation_StringValue:
			a.Str, a.IsStr = v.StringValue, true
		case *perfetto.DebugAnnotation_DoubleValue:
			a.Str, a.IsStr = strconv.FormatFloat(v.DoubleValue, 'g', -1, 64), true
		}
		args = append(args, a)
	}
	return args
}
