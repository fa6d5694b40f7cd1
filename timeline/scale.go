package timeline

import (
	"cmp"
	"slices"
	"sort"
)

// Quiet stretches: a span of the trace in which no slice is open and no instant happens (a
// driver's set-up, a guest booting between two bursts of work) would take its share of the
// picture and squeeze the work into a corner. Such a stretch longer than breakMinFraction of
// the trace's span is drawn breakWidth pixels wide instead, as a marked break in the axis;
// at most maxBreaks of them, the longest.
const (
	breakMinFraction = 0.1
	breakWidth       = 24.0
	maxBreaks        = 8
)

// segment is a piece of the axis: time [t0, t1] drawn over pixels [x0, x1].
type segment struct {
	t0, t1 int64
	x0, x1 float64
	quiet  bool // a break: a quiet stretch drawn narrow
}

// scale maps trace time to pixels of the axis: linear within each segment.
type scale struct {
	segs []segment
	px   float64 // pixels per nanosecond outside the breaks
}

// linearScale is one segment over the whole width.
func linearScale(start, end int64, width float64) scale {
	span := max(end-start, 1)
	return scale{segs: []segment{{t0: start, t1: start + span, x0: 0, x1: width}}, px: width / float64(span)}
}

func (s scale) x(t int64) float64 {
	i := sort.Search(len(s.segs), func(i int) bool { return s.segs[i].t1 >= t })
	if i == len(s.segs) {
		return s.segs[i-1].x1 // after the end
	}
	g := s.segs[i]
	if t <= g.t0 {
		return g.x0
	}
	if g.t1 == g.t0 {
		return g.x1
	}
	return g.x0 + float64(t-g.t0)/float64(g.t1-g.t0)*(g.x1-g.x0)
}

// breaks are the scale's quiet segments.
func (s scale) breaks() []segment {
	var out []segment
	for _, g := range s.segs {
		if g.quiet {
			out = append(out, g)
		}
	}
	return out
}

// newScale lays the model's span over width pixels, with its long quiet stretches as breaks.
func newScale(m *Model, width int) scale {
	w := float64(width)
	span := m.End - m.Start
	if span <= 0 {
		return linearScale(m.Start, m.End, w)
	}
	gaps := quietStretches(m, int64(float64(span)*breakMinFraction))
	if len(gaps) > maxBreaks {
		slices.SortFunc(gaps, func(a, b [2]int64) int { return cmp.Compare(b[1]-b[0], a[1]-a[0]) })
		gaps = gaps[:maxBreaks]
		slices.SortFunc(gaps, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	}
	quiet := int64(0)
	for _, g := range gaps {
		quiet += g[1] - g[0]
	}
	rest := w - breakWidth*float64(len(gaps))
	if len(gaps) == 0 || rest < w/2 || span-quiet <= 0 {
		return linearScale(m.Start, m.End, w)
	}
	px := rest / float64(span-quiet)
	s := scale{px: px}
	t, x := m.Start, 0.0
	for _, g := range gaps {
		nx := x + float64(g[0]-t)*px
		s.segs = append(s.segs, segment{t0: t, t1: g[0], x0: x, x1: nx},
			segment{t0: g[0], t1: g[1], x0: nx, x1: nx + breakWidth, quiet: true})
		t, x = g[1], nx+breakWidth
	}
	s.segs = append(s.segs, segment{t0: t, t1: m.End, x0: x, x1: w})
	return s
}

// quietStretches are the spans longer than min in which no slice of any track is open and no
// instant happens, in time order.
func quietStretches(m *Model, min int64) [][2]int64 {
	var iv [][2]int64
	for _, t := range m.Tracks {
		for _, s := range t.Slices {
			iv = append(iv, [2]int64{s.Start, s.End})
		}
		for _, i := range t.Instants {
			iv = append(iv, [2]int64{i.T, i.T})
		}
	}
	slices.SortFunc(iv, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]int64
	var end int64
	for i, v := range iv {
		if i > 0 && v[0]-end > min {
			out = append(out, [2]int64{end, v[0]})
		}
		if i == 0 || v[1] > end {
			end = v[1]
		}
	}
	return out
}
