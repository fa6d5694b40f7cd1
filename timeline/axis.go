package timeline

import (
	"math"
	"strconv"
)

// unit is a time unit the axis can label in.
type unit struct {
	ns   int64
	name string
}

var units = []unit{{1, "ns"}, {1e3, "µs"}, {1e6, "ms"}, {1e9, "s"}}

// tickStep is a 1, 2 or 5 × 10ⁿ nanosecond step that puts about want ticks on span.
func tickStep(span int64, want int) int64 {
	if span <= 0 || want <= 0 {
		return 1
	}
	raw := float64(span) / float64(want)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, f := range []float64{1, 2, 5, 10} {
		if f*p >= raw {
			return max(int64(f*p), 1)
		}
	}
	return max(int64(10*p), 1)
}

// axisUnit is the largest unit at most five steps long: labels read "2.5 ms", "1.2 s", not
// "2500 µs" or "1200 ms".
func axisUnit(step int64) unit {
	u := units[0]
	for _, c := range units {
		if c.ns <= 5*step {
			u = c
		}
	}
	return u
}

// formatTick labels t nanoseconds in unit u with as many decimals as step needs.
func formatTick(t, step int64, u unit) string {
	dec := 0
	for s := step; s < u.ns && dec < 9; s *= 10 {
		dec++
	}
	return strconv.FormatFloat(float64(t)/float64(u.ns), 'f', dec, 64) + " " + u.name
}

// formatDuration writes d nanoseconds with three significant digits in a readable unit
// ("850 ns", "12.4 µs", "3.05 ms", "1.20 s").
func formatDuration(d int64) string {
	neg := d < 0
	if neg {
		d = -d
	}
	u := units[0]
	for _, c := range units {
		if d >= c.ns {
			u = c
		}
	}
	v := float64(d) / float64(u.ns)
	dec := 0
	switch {
	case u.ns == 1:
	case v < 10:
		dec = 2
	case v < 100:
		dec = 1
	}
	s := strconv.FormatFloat(v, 'f', dec, 64) + " " + u.name
	if neg {
		s = "-" + s
	}
	return s
}
