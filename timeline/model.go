package timeline

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is what a track stands for, recognised from its name; it chooses the track's colour
// band and lets a test ask for "the MES track" without knowing its exact name.
type Kind string

const (
	KindHQD       Kind = "hqd"       // a hardware queue slot
	KindMES       Kind = "mes"       // the scheduler firmware
	KindCU        Kind = "cu"        // a compute unit
	KindIH        Kind = "ih"        // the interrupt handler ring
	KindTransport Kind = "transport" // vfio-user messages, doorbells from the client
	KindOther     Kind = "other"
)

// kindOf recognises a track by the words of its name ("HQD slot 3", "MES", "CU 0", "IH ring",
// "transport"). The recorder names its tracks that way; an unknown name is KindOther.
func kindOf(name string) Kind {
	l := strings.ToLower(name)
	word := func(w string) bool {
		for _, f := range strings.FieldsFunc(l, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			if f == w || strings.TrimRight(f, "0123456789") == w {
				return true
			}
		}
		return false
	}
	switch {
	case word("hqd") || word("slot") || word("queue"):
		return KindHQD
	case word("mes") || word("scheduler"):
		return KindMES
	case word("cu") || word("compute"):
		return KindCU
	case word("ih") || word("interrupt") || word("interrupts"):
		return KindIH
	case word("transport") || word("vfio") || word("client"):
		return KindTransport
	}
	return KindOther
}

// TrackInfo is one track as the trace declares it (a TrackDescriptor).
type TrackInfo struct {
	UUID, Parent uint64 // Parent 0: a root track
	Name         string
	Rank         int32 // order among its siblings when the parent asks for explicit order
	// ExplicitChildren: this track's children are shown by Rank (Perfetto's
	// ChildTracksOrdering EXPLICIT, what the recorder asks for); otherwise in declaration order.
	ExplicitChildren bool
}

// EventType is the kind of a track event.
type EventType uint8

const (
	Begin   EventType = iota + 1 // a slice begins
	End                          // the innermost open slice of the track ends
	Instant                      // a point in time
)

// Event is one track event, in trace order.
type Event struct {
	T     int64 // nanoseconds
	Track uint64
	Type  EventType
	Name  string
	Args  []string // "name=value" of its debug annotations
	// Flows continue (or start) the flows with these ids at this event; Terminating ends them.
	Flows, Terminating []uint64
}

// Model is a trace ready to draw: tracks in display order (each parent before its children),
// slices matched per track, instants, flows, and what the matching found unbalanced.
type Model struct {
	Tracks     []*Track
	Flows      []*Flow // by id, each with at least one point
	Start, End int64   // the first and last event time (both 0 for an empty trace)
	Events     int
	// Unbalanced counts slices that had a begin but no end (drawn to the trace's end) or an
	// end but no begin (drawn from the trace's start).
	Unbalanced int
	Skipped    int // counter values and events of no type: read, not drawn
}

// Track is one row group of the picture.
type Track struct {
	UUID, Parent uint64
	Name         string
	Kind         Kind
	Level        int // nesting under parent tracks: 0 for a root
	rank         int32
	explicit     bool
	Slices       []Slice
	Instants     []Mark
	MaxDepth     int // deepest slice nesting seen (0: slices do not nest)
}

// Slice is one matched begin/end pair on a track.
type Slice struct {
	Start, End int64
	Name       string
	Args       []string // the begin's annotations
	Depth      int      // how many slices of the same track enclose it
	Open       bool     // no end in the trace: it runs to the trace's end
	NoBegin    bool     // an end without a begin: it runs from the trace's start
}

// Mark is an instant event.
type Mark struct {
	T    int64
	Name string
	Args []string
}

// Flow is the chain of events that share a flow id, in time order.
type Flow struct {
	ID     uint64
	Points []FlowPoint
}

// FlowPoint is one event of a flow.
type FlowPoint struct {
	T     int64
	Track int // index into Model.Tracks
	Name  string
}

// maxNameBytes bounds a name kept from the trace: names come from the guest's actions (packet
// names, queue labels) and the page must stay small.
const maxNameBytes = 160

// cleanName makes a name safe to keep: valid UTF-8, no control characters, bounded length.
// (HTML escaping happens when the page is written.)
func cleanName(s string) string {
	if len(s) > 4*maxNameBytes {
		s = s[:4*maxNameBytes]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxNameBytes {
		cut := maxNameBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// cleanArgs cleans each annotation and keeps at most maxArgs.
func cleanArgs(as []string) []string {
	if len(as) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(as), maxArgs))
	for _, a := range as[:min(len(as), maxArgs)] {
		out = append(out, cleanName(a))
	}
	return out
}

// Build matches the events into a Model. Events need not be sorted: they are ordered by time,
// keeping trace order among equal times (a slice that ends and a slice that begins at the same
// nanosecond stay in the order recorded). An event on an undeclared track creates a root track
// named after its uuid; a parent that is missing or part of a cycle makes a track a root.
func Build(infos []TrackInfo, events []Event) *Model {
	m := &Model{Events: len(events)}
	byUUID := map[uint64]*Track{}
	var declared []*Track
	for _, ti := range infos {
		if t, ok := byUUID[ti.UUID]; ok {
			if t.Name == "" {
				t.Name = cleanName(ti.Name)
			}
			continue
		}
		t := &Track{UUID: ti.UUID, Parent: ti.Parent, Name: cleanName(ti.Name), rank: ti.Rank, explicit: ti.ExplicitChildren}
		byUUID[ti.UUID] = t
		declared = append(declared, t)
	}
	evs := slices.Clone(events)
	slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.T, b.T) })
	for _, e := range evs {
		if _, ok := byUUID[e.Track]; !ok {
			t := &Track{UUID: e.Track, Name: fmt.Sprintf("track %#x", e.Track)}
			byUUID[e.Track] = t
			declared = append(declared, t)
		}
	}
	if len(evs) > 0 {
		m.Start, m.End = evs[0].T, evs[len(evs)-1].T
	}
	m.Tracks = orderTracks(declared, byUUID)
	index := make(map[uint64]int, len(m.Tracks))
	for i, t := range m.Tracks {
		if t.Name == "" {
			t.Name = fmt.Sprintf("track %#x", t.UUID)
		}
		t.Kind = kindOf(t.Name)
		index[t.UUID] = i
	}

	type open struct {
		start int64
		name  string
		args  []string
	}
	stacks := map[uint64][]open{}
	flows := map[uint64]*Flow{}
	var flowOrder []uint64
	addFlow := func(id uint64, p FlowPoint) {
		f := flows[id]
		if f == nil {
			f = &Flow{ID: id}
			flows[id] = f
			flowOrder = append(flowOrder, id)
		}
		f.Points = append(f.Points, p)
	}
	for _, e := range evs {
		t := byUUID[e.Track]
		name := cleanName(e.Name)
		e.Args = cleanArgs(e.Args)
		switch e.Type {
		case Begin:
			st := stacks[e.Track]
			stacks[e.Track] = append(st, open{e.T, name, e.Args})
		case End:
			st := stacks[e.Track]
			if len(st) == 0 {
				if name == "" {
					name = "(an end without a begin)"
				}
				t.Slices = append(t.Slices, Slice{Start: m.Start, End: e.T, Name: name, Args: e.Args, NoBegin: true})
				m.Unbalanced++
				break
			}
			o := st[len(st)-1]
			stacks[e.Track] = st[:len(st)-1]
			name = o.name + " end"
			// An end's annotations belong to its slice (Perfetto merges them the same way).
			args := o.args
			if len(e.Args) > 0 {
				args = append(slices.Clip(args), e.Args...)[:min(len(args)+len(e.Args), maxArgs)]
			}
			t.Slices = append(t.Slices, Slice{Start: o.start, End: e.T, Name: o.name, Args: args, Depth: len(st) - 1})
		case Instant:
			t.Instants = append(t.Instants, Mark{T: e.T, Name: name, Args: e.Args})
		default:
			continue
		}
		p := FlowPoint{T: e.T, Track: index[e.Track], Name: name}
		for _, id := range e.Flows {
			addFlow(id, p)
		}
		for _, id := range e.Terminating {
			addFlow(id, p)
		}
	}
	for uuid, st := range stacks {
		t := byUUID[uuid]
		for d, o := range st {
			t.Slices = append(t.Slices, Slice{Start: o.start, End: m.End, Name: o.name, Args: o.args, Depth: d, Open: true})
			m.Unbalanced++
		}
	}
	for _, t := range m.Tracks {
		slices.SortStableFunc(t.Slices, func(a, b Slice) int {
			return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Depth, b.Depth))
		})
		for _, s := range t.Slices {
			t.MaxDepth = max(t.MaxDepth, s.Depth)
		}
	}
	for _, id := range flowOrder {
		m.Flows = append(m.Flows, flows[id])
	}
	return m
}

// orderTracks puts every parent before its children (depth first, declaration order among
// siblings) and sets each track's Level. A track whose parent is undeclared or itself, or that
// is on a cycle of parents, is a root. Linear in the number of tracks: a trace may declare
// very many.
func orderTracks(declared []*Track, byUUID map[uint64]*Track) []*Track {
	cyclic := cycleMembers(declared, byUUID)
	children := map[uint64][]*Track{}
	var roots []*Track
	for _, t := range declared {
		if t.Parent == 0 || byUUID[t.Parent] == nil || cyclic[t.UUID] {
			roots = append(roots, t)
			continue
		}
		children[t.Parent] = append(children[t.Parent], t)
	}
	for uuid, cs := range children {
		if byUUID[uuid].explicit {
			slices.SortStableFunc(cs, func(a, b *Track) int { return cmp.Compare(a.rank, b.rank) })
		}
	}
	out := make([]*Track, 0, len(declared))
	type frame struct {
		t     *Track
		level int
	}
	for _, r := range roots {
		stack := []frame{{r, 0}}
		for len(stack) > 0 {
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			f.t.Level = f.level
			out = append(out, f.t)
			cs := children[f.t.UUID]
			for i := len(cs) - 1; i >= 0; i-- {
				stack = append(stack, frame{cs[i], f.level + 1})
			}
		}
	}
	return out
}

// cycleMembers finds the tracks on a cycle of parent links (a self-parent included), each
// track's chain walked once.
func cycleMembers(declared []*Track, byUUID map[uint64]*Track) map[uint64]bool {
	const (
		walking = 1
		done    = 2
	)
	state := map[uint64]int{}
	cyclic := map[uint64]bool{}
	for _, t := range declared {
		var path []*Track
		for p := t; p != nil && state[p.UUID] == 0; p = byUUID[p.Parent] {
			state[p.UUID] = walking
			path = append(path, p)
			if p.Parent == 0 {
				break
			}
			if next := byUUID[p.Parent]; next != nil && state[next.UUID] == walking {
				// The chain came back to itself: mark the loop from next to p.
				for i := len(path) - 1; i >= 0; i-- {
					cyclic[path[i].UUID] = true
					if path[i] == next {
						break
					}
				}
				break
			}
		}
		for _, p := range path {
			state[p.UUID] = done
		}
	}
	return cyclic
}
