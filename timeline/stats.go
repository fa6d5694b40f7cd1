package timeline

import (
	"cmp"
	"slices"
	"time"
)

// Span is the time from the trace's first event to its last.
func (m *Model) Span() time.Duration { return time.Duration(m.End - m.Start) }

// Latency summarises one step of the flows (from an event named From to the next event of
// the same flow, named To), or a whole flow from its first event to its last (Whole).
type Latency struct {
	From, To         string
	Whole            bool
	Count            int
	Median, P90, Max int64 // nanoseconds
}

// maxLatencyRows bounds the summary: step names come from the trace.
const maxLatencyRows = 16

// Latencies summarises the flows: for each pair of consecutive event names along a flow (a
// doorbell → its fence → its interrupt gives "doorbell → fence" and "fence → interrupt"), and
// for whole flows of three or more events by their first and last names, the count, median,
// 90th percentile and maximum. The most frequent rows come first, at most 16 of them.
func (m *Model) Latencies() []Latency {
	type key struct {
		from, to string
		whole    bool
	}
	groups := map[key][]int64{}
	for _, f := range m.Flows {
		pts := slices.Clone(f.Points)
		slices.SortStableFunc(pts, func(a, b FlowPoint) int { return cmp.Compare(a.T, b.T) })
		for i := 1; i < len(pts); i++ {
			k := key{pts[i-1].Name, pts[i].Name, false}
			groups[k] = append(groups[k], pts[i].T-pts[i-1].T)
		}
		if len(pts) >= 3 {
			k := key{pts[0].Name, pts[len(pts)-1].Name, true}
			groups[k] = append(groups[k], pts[len(pts)-1].T-pts[0].T)
		}
	}
	var out []Latency
	for k, ds := range groups {
		slices.Sort(ds)
		out = append(out, Latency{From: k.from, To: k.to, Whole: k.whole, Count: len(ds),
			Median: percentile(ds, 50), P90: percentile(ds, 90), Max: ds[len(ds)-1]})
	}
	slices.SortFunc(out, func(a, b Latency) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.From, b.From),
			cmp.Compare(a.To, b.To), cmp.Compare(btoi(a.Whole), btoi(b.Whole)))
	})
	if len(out) > maxLatencyRows {
		out = out[:maxLatencyRows]
	}
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// percentile is the nearest-rank percentile of sorted, non-empty ds.
func percentile(ds []int64, p int) int64 {
	r := (p*len(ds) + 99) / 100 // ceil(p/100 · n)
	return ds[max(r, 1)-1]
}

// Busy is the time a track had any slice open (nested slices counted once), in nanoseconds,
// and that time as a fraction of the trace's span.
func (m *Model) Busy(t *Track) (busy int64, fraction float64) {
	var end int64
	first := true
	for _, s := range t.Slices { // sorted by start
		lo, hi := s.Start, s.End
		if !first && lo < end {
			lo = end
		}
		if hi > lo {
			busy += hi - lo
		}
		if first || hi > end {
			end = hi
		}
		first = false
	}
	if span := m.End - m.Start; span > 0 {
		fraction = float64(busy) / float64(span)
	}
	return busy, fraction
}

// NameCount is how often a name occurs among a track's slices and instants.
type NameCount struct {
	Name  string
	Count int
}

// TopNames are the n most frequent slice and instant names of a track (the MES track's
// decisions: map, unmap, preempt ...).
func TopNames(t *Track, n int) []NameCount {
	c := map[string]int{}
	for _, s := range t.Slices {
		c[s.Name]++
	}
	for _, i := range t.Instants {
		c[i.Name]++
	}
	out := make([]NameCount, 0, len(c))
	for name, k := range c {
		out = append(out, NameCount{name, k})
	}
	slices.SortFunc(out, func(a, b NameCount) int { return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Name, b.Name)) })
	if len(out) > n {
		out = out[:n]
	}
	return out
}
