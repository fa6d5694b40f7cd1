package boot

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"vgpu/ci/ktap"
)

// fencesReport is a report shaped as the guest prints it: the figures are diagnostics of the
// fences case's subtests, indented one level, with printk timestamps.
func fencesReport(lines ...string) string {
	var b strings.Builder
	b.WriteString("[    1.0] KTAP version 1\n[    1.0] 1..1\n")
	b.WriteString("    KTAP version 1\n    # Subtest: fences\n    1..2\n")
	b.WriteString("    # fences: 10000 jobs in 60 ms: 164933 jobs/s; 2500 interrupting fences, 214 interrupts on vector 0\n")
	b.WriteString("    ok 1 queue_0\n")
	for _, l := range lines {
		b.WriteString("[    2.5]     # " + l + "\n")
	}
	b.WriteString("    ok 2 latency\n")
	b.WriteString("# fences: 213 ms\nok 1 fences\n# vgpu_test: done pass=1 fail=0 skip=0\n")
	return b.String()
}

func TestParseFigures(t *testing.T) {
	us, ns := time.Microsecond, time.Nanosecond
	for _, tc := range []struct {
		name     string
		ktap     string
		want     Figures
		problems []string // substrings, in order
	}{
		{
			name: "all figures",
			ktap: fencesReport("fence_jobs_per_s: 164933", "reg_read_ns: median=21500 p99=48000 samples=1000",
				"reg_read: 1000 trapped reads of ID_MAGIC, each timed alone: min 9000 ns, max 900000 ns",
				"fence_latency_us: median=77 p99=1740 samples=200",
				"fence_latency: 200 single-fence submits on slot 1, doorbell to IH handler: min 47 us, max 4290 us"),
			want: Figures{
				FenceLatency: &Latency{Median: 77 * us, P99: 1740 * us, Samples: 200},
				JobsPerSec:   164933,
				RegRead:      &Latency{Median: 21500 * ns, P99: 48000 * ns, Samples: 1000},
			},
		},
		{
			name: "older guest without samples or baseline",
			ktap: fencesReport("fence_latency_us: median=180 p99=2025"),
			want: Figures{FenceLatency: &Latency{Median: 180 * us, P99: 2025 * us}},
		},
		{
			name: "unknown keys are ignored",
			ktap: fencesReport("reg_read_ns: median=100 p99=200 samples=1000 min=50"),
			want: Figures{RegRead: &Latency{Median: 100 * ns, P99: 200 * ns, Samples: 1000}},
		},
		{
			name: "at the top level",
			ktap: "KTAP version 1\n1..1\n# fence_jobs_per_s: 12\nok 1 fences\n",
			want: Figures{JobsPerSec: 12},
		},
		{name: "no figures", ktap: fencesReport("fences: stopped at job 3 of 10000: timeout")},
		{name: "prose with the same words is not a figure", ktap: fencesReport("fence_latency: 200 single-fence submits")},
		{
			name:     "not a number",
			ktap:     fencesReport("fence_latency_us: median=abc p99=2"),
			problems: []string{`median: "abc" is not an unsigned number`},
		},
		{
			name:     "negative",
			ktap:     fencesReport("reg_read_ns: median=-1 p99=2"),
			problems: []string{"not an unsigned number"},
		},
		{
			name:     "p99 missing",
			ktap:     fencesReport("reg_read_ns: median=10 samples=1000"),
			problems: []string{"want median= and p99="},
		},
		{
			name:     "not key=value",
			ktap:     fencesReport("fence_latency_us: 77 1740"),
			problems: []string{`"77" is not key=value`},
		},
		{
			name:     "p99 below the median",
			ktap:     fencesReport("fence_latency_us: median=80 p99=70"),
			problems: []string{"p99 70 below the median 80"},
		},
		{
			name:     "zero samples",
			ktap:     fencesReport("reg_read_ns: median=1 p99=2 samples=0"),
			problems: []string{"samples=0"},
		},
		{
			name:     "key twice",
			ktap:     fencesReport("reg_read_ns: median=1 median=2 p99=3"),
			problems: []string{"median given twice"},
		},
		{
			name:     "out of range",
			ktap:     fencesReport("fence_latency_us: median=1 p99=99999999999999999"),
			problems: []string{"out of range"},
		},
		{
			name:     "rate not a number",
			ktap:     fencesReport("fence_jobs_per_s: 12.5"),
			problems: []string{`"fence_jobs_per_s: 12.5"`},
		},
		{
			name:     "printed twice",
			ktap:     fencesReport("fence_jobs_per_s: 10", "fence_jobs_per_s: 20"),
			want:     Figures{JobsPerSec: 10},
			problems: []string{"fence_jobs_per_s printed more than once"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := ktap.Parse(strings.NewReader(tc.ktap))
			if len(rep.Problems) > 0 {
				t.Fatalf("test input is not valid KTAP: %q", rep.Problems)
			}
			got, problems := ParseFigures(rep)
			if len(tc.problems) == 0 && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("figures = %s, want %s", dump(got), dump(tc.want))
			}
			if len(problems) != len(tc.problems) {
				t.Fatalf("problems = %q, want %d matching %q", problems, len(tc.problems), tc.problems)
			}
			for i, want := range tc.problems {
				if !strings.Contains(problems[i], want) {
					t.Errorf("problem %d = %q, want it to mention %q", i, problems[i], want)
				}
			}
		})
	}
}

func dump(f Figures) string {
	return strings.Join(append([]string{"{"}, append(f.Lines(), "}")...), " | ")
}

func TestFiguresRatioAndLines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		f     Figures
		ratio float64
		lines []string // substrings, one per line, in order
	}{
		{
			name: "all",
			f: Figures{
				FenceLatency: &Latency{Median: 77 * time.Microsecond, P99: 1740 * time.Microsecond, Samples: 200},
				JobsPerSec:   164933,
				RegRead:      &Latency{Median: 22 * time.Microsecond, P99: 48 * time.Microsecond, Samples: 1000},
			},
			ratio: 3.5,
			lines: []string{"median 77 µs, p99 1.74 ms over 200 fences", "164933 jobs/s", "median 22 µs, p99 48 µs over 1000 reads", "3.5x"},
		},
		{
			name:  "sub-10 µs reads keep two decimals",
			f:     Figures{FenceLatency: &Latency{Median: 30 * time.Microsecond, P99: 40 * time.Microsecond}, RegRead: &Latency{Median: 2500, P99: 9990}},
			ratio: 12,
			lines: []string{"median 30 µs, p99 40 µs (doorbell", "median 2.50 µs, p99 9.99 µs (trapped", "12.0x"},
		},
		{name: "no baseline, no ratio", f: Figures{FenceLatency: &Latency{Median: time.Millisecond, P99: 2 * time.Millisecond}}, lines: []string{"median 1.00 ms, p99 2.00 ms"}},
		{name: "baseline of zero, no ratio", f: Figures{FenceLatency: &Latency{Median: 1}, RegRead: &Latency{}}, lines: []string{"fence latency", "register read"}},
		{name: "empty", f: Figures{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.Ratio(); got != tc.ratio {
				t.Errorf("Ratio() = %v, want %v", got, tc.ratio)
			}
			got := tc.f.Lines()
			if len(got) != len(tc.lines) {
				t.Fatalf("Lines() = %q, want %d lines matching %q", got, len(tc.lines), tc.lines)
			}
			for i, want := range tc.lines {
				if !strings.Contains(got[i], want) {
					t.Errorf("line %d = %q, want it to contain %q", i, got[i], want)
				}
			}
			if tc.f.Empty() != (len(tc.lines) == 0) {
				t.Errorf("Empty() = %v with %d lines", tc.f.Empty(), len(tc.lines))
			}
		})
	}
}
