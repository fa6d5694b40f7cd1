package main

import (
	"bytes"
	"strings"
	"testing"

	"vgpu/ci/boot"
	"vgpu/ci/ktap"
)

// TestSummaryFigures checks that `vgpu run` prints the guest's figures, with the baseline and
// the ratio, from the same KTAP the guest prints, and prints no figure section without them.
func TestSummaryFigures(t *testing.T) {
	const withFigures = `KTAP version 1
1..1
    KTAP version 1
    # Subtest: fences
    1..2
    # fence_jobs_per_s: 150000
    ok 1 queue_0
    # reg_read_ns: median=20000 p99=41000 samples=1000
    # fence_latency_us: median=80 p99=1600 samples=200
    ok 2 latency
# fences: 213 ms
ok 1 fences
`
	const without = "KTAP version 1\n1..1\n# scratch: 1 ms\nok 1 scratch\n"
	for _, tc := range []struct {
		name string
		ktap string
		want []string // substrings, in order
		not  []string
	}{
		{"figures", withFigures, []string{
			"PASS fences", "213 ms",
			"guest figures",
			"fence latency    median 80 µs, p99 1.60 ms over 200 fences",
			"fence throughput 150000 jobs/s",
			"register read    median 20 µs, p99 41 µs over 1000 reads",
			"fence / read     4.0x",
			"device diagnostics",
		}, nil},
		{"no figures", without, []string{"PASS scratch", "device diagnostics"}, []string{"guest figures"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &boot.Result{Report: ktap.Parse(strings.NewReader(tc.ktap))}
			res.Figures, res.Problems = boot.ParseFigures(res.Report)
			var b bytes.Buffer
			printSummary(&b, "no IOMMU", res)
			out := b.String()
			rest := out
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("summary lacks %q (in order) in:\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			for _, w := range tc.not {
				if strings.Contains(out, w) {
					t.Errorf("summary has %q:\n%s", w, out)
				}
			}
		})
	}
}
