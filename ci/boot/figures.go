package boot

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"vgpu/ci/ktap"
)

// Figures are the guest's own measurements from one boot, each beside the baseline the guest
// measures in the same boot (a speed alone says little about a TCG or a KVM guest on a loaded
// machine; its ratio to a trapped register read does).
type Figures struct {
	// FenceLatency is the fences case's single interrupting fences, doorbell write to the IH
	// handler decoding the EOP IV ("fence_latency_us: median=.. p99=.. [samples=..]").
	FenceLatency *Latency
	// JobsPerSec is the fences case's throughput over 4 queues ("fence_jobs_per_s: N"); 0 when
	// the guest did not print it.
	JobsPerSec float64
	// RegRead is the baseline: the round trip of a trapped register read, each of the samples
	// timed alone ("reg_read_ns: median=.. p99=.. samples=..").
	RegRead *Latency
}

// Latency is a distribution the guest summarised.
type Latency struct {
	Median, P99 time.Duration
	Samples     int // 0 when the guest did not say
}

// Ratio is the median fence latency over the median register read: how many trapped register
// reads one fence round trip costs. 0 when either figure is missing.
func (f Figures) Ratio() float64 {
	if f.FenceLatency == nil || f.RegRead == nil || f.RegRead.Median <= 0 {
		return 0
	}
	return float64(f.FenceLatency.Median) / float64(f.RegRead.Median)
}

// Empty reports whether the guest printed no figure at all (e.g. the fences case did not run).
func (f Figures) Empty() bool { return f.FenceLatency == nil && f.JobsPerSec == 0 && f.RegRead == nil }

// Lines renders the figures for a summary, one per line, without a trailing newline.
func (f Figures) Lines() []string {
	var l []string
	if f.FenceLatency != nil {
		l = append(l, fmt.Sprintf("fence latency    median %s, p99 %s%s (doorbell to IH handler)",
			fmtDuration(f.FenceLatency.Median), fmtDuration(f.FenceLatency.P99), samples(f.FenceLatency, "fences")))
	}
	if f.JobsPerSec > 0 {
		l = append(l, fmt.Sprintf("fence throughput %.0f jobs/s", f.JobsPerSec))
	}
	if f.RegRead != nil {
		l = append(l, fmt.Sprintf("register read    median %s, p99 %s%s (trapped MMIO read: the baseline)",
			fmtDuration(f.RegRead.Median), fmtDuration(f.RegRead.P99), samples(f.RegRead, "reads")))
	}
	if r := f.Ratio(); r > 0 {
		l = append(l, fmt.Sprintf("fence / read     %.1fx (median fence latency over median register read)", r))
	}
	return l
}

func samples(l *Latency, what string) string {
	if l.Samples == 0 {
		return ""
	}
	return fmt.Sprintf(" over %d %s", l.Samples, what)
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < 10*time.Microsecond:
		return fmt.Sprintf("%.2f µs", float64(d)/float64(time.Microsecond))
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// figureRE matches a diagnostic that names a figure; its value part is checked strictly.
var figureRE = regexp.MustCompile(`^(fence_latency_us|fence_jobs_per_s|reg_read_ns):\s*(.*)$`)

// ParseFigures collects the figures from a report's diagnostics, wherever they are nested. A
// diagnostic that names a figure but does not parse, or names one a second time, is returned
// as a problem: the guest's format is meant to be stable.
func ParseFigures(rep *ktap.Report) (Figures, []string) {
	var f Figures
	var problems []string
	seen := map[string]bool{}
	visit := func(d string) {
		m := figureRE.FindStringSubmatch(d)
		if m == nil {
			return
		}
		name, val := m[1], m[2]
		if seen[name] {
			problems = append(problems, fmt.Sprintf("figure %s printed more than once (%q)", name, d))
			return
		}
		seen[name] = true
		var err error
		switch name {
		case "fence_latency_us":
			f.FenceLatency, err = parseLatency(val, time.Microsecond)
		case "reg_read_ns":
			f.RegRead, err = parseLatency(val, time.Nanosecond)
		case "fence_jobs_per_s":
			var n uint64
			if n, err = strconv.ParseUint(strings.TrimSpace(val), 10, 64); err == nil {
				f.JobsPerSec = float64(n)
			}
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("figure line %q: %v", d, err))
		}
	}
	if rep == nil {
		return f, nil
	}
	var walk func([]*ktap.Test)
	walk = func(ts []*ktap.Test) {
		for _, t := range ts {
			for _, d := range t.Diagnostics {
				visit(d)
			}
			walk(t.Subtests)
		}
	}
	walk(rep.Tests)
	for _, d := range rep.Diagnostics {
		visit(d)
	}
	return f, problems
}

// parseLatency reads "median=N p99=N [samples=N]" (N unsigned decimal, in units of unit).
// Keys it does not know are ignored, so the guest may add some.
func parseLatency(s string, unit time.Duration) (*Latency, error) {
	kv := map[string]uint64{}
	for _, field := range strings.Fields(s) {
		k, v, ok := strings.Cut(field, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", field)
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an unsigned number", k, v)
		}
		if _, dup := kv[k]; dup {
			return nil, fmt.Errorf("%s given twice", k)
		}
		kv[k] = n
	}
	med, okm := kv["median"]
	p99, okp := kv["p99"]
	if !okm || !okp {
		return nil, fmt.Errorf("want median= and p99=")
	}
	const max = uint64(1<<63-1) / uint64(time.Millisecond) // far beyond any real figure
	if med > max || p99 > max {
		return nil, fmt.Errorf("value out of range")
	}
	if p99 < med {
		return nil, fmt.Errorf("p99 %d below the median %d", p99, med)
	}
	l := &Latency{Median: time.Duration(med) * unit, P99: time.Duration(p99) * unit}
	if n, ok := kv["samples"]; ok {
		if n == 0 || n > 1<<31 {
			return nil, fmt.Errorf("samples=%d", n)
		}
		l.Samples = int(n)
	}
	return l, nil
}
