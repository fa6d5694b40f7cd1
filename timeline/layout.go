package timeline

import (
	"math"
)

// Options bound and shape the page. Zero fields take the defaults.
type Options struct {
	Title       string // the page's heading (default "vgpu timeline")
	Source      string // where the trace came from, shown under the heading
	Width       int    // pixels of the time axis (default 940)
	MaxElements int    // bars and marks drawn in all (default 10000)
	MaxTracks   int    // tracks drawn (default 200); the rest are listed in the table only
	MaxRows     int    // slice nesting levels drawn per track (default 4)
	MaxFlows    int    // flow lines drawn (default 2000)
	MaxLabels   int    // names written inside wide bars (default 1500)
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Width, 940)
	def(&o.MaxElements, 10000)
	def(&o.MaxTracks, 200)
	def(&o.MaxRows, 4)
	def(&o.MaxFlows, 2000)
	def(&o.MaxLabels, 1500)
	o.Width = min(o.Width, 20000)
	if o.Title == "" {
		o.Title = "vgpu timeline"
	}
	return o
}

// bar is what is drawn for one slice, or for several merged because they were closer than
// the merge distance.
type bar struct {
	x0, x1     float64
	row        int
	n          int      // slices drawn as this bar
	names      []string // the first few distinct names
	more       bool     // more distinct names than names holds
	args       []string // a single slice's annotations
	start, end int64
	open       bool // contains a slice with no end in the trace
	noBegin    bool // contains a slice with no begin
}

// dot is what is drawn for one instant, or for several within the merge distance.
type dot struct {
	x          float64
	n          int
	names      []string
	more       bool
	args       []string // a single instant's annotations
	start, end int64
}

const maxMergedNames = 3

// addName adds n to the distinct names kept, or notes that there are more than it keeps.
func addName(names []string, more *bool, n string) []string {
	for _, have := range names {
		if have == n {
			return names
		}
	}
	if len(names) >= maxMergedNames {
		*more = true
		return names
	}
	return append(names, n)
}

// trackLayout is one track's drawn content at one merge distance.
type trackLayout struct {
	bars   []bar
	dots   []dot
	rows   int // slice rows drawn
	hidden int // slices nested deeper than the rows drawn
}

// layoutTrack merges the track's slices row by row and its instants: a slice narrower than
// gap pixels that starts less than gap pixels after the previous bar of its row ends joins
// it when that bar too is made of such slices, so a burst of tiny slices becomes one bar that
// says how many it holds. A wide slice is never merged (it keeps its name), and a row holds
// at most about two bars per gap pixels: each is wide, or is followed by a gap or a wide one.
func layoutTrack(t *Track, sc scale, gap float64, maxRows int) trackLayout {
	var l trackLayout
	l.rows = min(t.MaxDepth+1, maxRows)
	if len(t.Slices) == 0 {
		l.rows = 0
	}
	cur := make([]*bar, l.rows)
	tinyRun := make([]bool, l.rows) // every slice of the row's current bar is narrower than gap
	flush := func(r int) {
		if cur[r] != nil {
			l.bars = append(l.bars, *cur[r])
			cur[r] = nil
		}
	}
	for _, s := range t.Slices {
		if s.Depth >= l.rows {
			l.hidden++
			continue
		}
		r := s.Depth
		x0, x1 := sc.x(s.Start), sc.x(s.End)
		tiny := x1-x0 < gap
		if c := cur[r]; c != nil && x0-c.x1 < gap && tiny && tinyRun[r] {
			c.x1 = math.Max(c.x1, x1)
			c.end = max(c.end, s.End)
			c.n++
			c.names = addName(c.names, &c.more, s.Name)
			c.open = c.open || s.Open
			c.noBegin = c.noBegin || s.NoBegin
			continue
		}
		flush(r)
		cur[r] = &bar{x0: x0, x1: x1, row: r, n: 1, names: []string{s.Name}, args: s.Args, start: s.Start, end: s.End, open: s.Open, noBegin: s.NoBegin}
		tinyRun[r] = tiny
	}
	for r := range cur {
		flush(r)
	}
	var d *dot
	for _, i := range t.Instants { // in time order
		x := sc.x(i.T)
		if d != nil && x-d.x < gap {
			d.n++
			d.names = addName(d.names, &d.more, i.Name)
			d.end = i.T
			continue
		}
		if d != nil {
			l.dots = append(l.dots, *d)
		}
		d = &dot{x: x, n: 1, names: []string{i.Name}, args: i.Args, start: i.T, end: i.T}
	}
	if d != nil {
		l.dots = append(l.dots, *d)
	}
	return l
}

// layout is the whole drawing: the tracks drawn, at the smallest merge distance (1, 2, 4 …
// pixels) that keeps the bars and marks within the element cap.
type layout struct {
	sc     scale
	tracks []trackLayout // for m.Tracks[:len(tracks)]
	gap    float64       // merge distance in pixels
	merged int           // slices and instants drawn together with others
	capped bool          // even the widest merge distance left too many elements: the rest were dropped
}

func layoutModel(m *Model, o Options) layout {
	sc := newScale(m, o.Width)
	n := min(len(m.Tracks), o.MaxTracks)
	var l layout
	for gap := 1.0; ; gap *= 2 {
		l = layout{sc: sc, tracks: make([]trackLayout, n), gap: gap}
		total := 0
		for i := range n {
			l.tracks[i] = layoutTrack(m.Tracks[i], sc, gap, o.MaxRows)
			total += len(l.tracks[i].bars) + len(l.tracks[i].dots)
		}
		if total <= o.MaxElements {
			break
		}
		if gap >= float64(o.Width) {
			l.capped = true
			break
		}
	}
	for i := range l.tracks {
		for _, b := range l.tracks[i].bars {
			if b.n > 1 {
				l.merged += b.n
			}
		}
		for _, d := range l.tracks[i].dots {
			if d.n > 1 {
				l.merged += d.n
			}
		}
	}
	return l
}
