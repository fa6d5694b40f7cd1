package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"vgpu/ci/boot"
	"vgpu/ci/ktap"
	"vgpu/images"
)

func TestSuiteList(t *testing.T) {
	for _, tc := range []struct {
		flag string
		own  bool
		want string // "" → error
	}{
		{"", false, "ktap drm"},
		{"", true, "ktap"},
		{"all", false, "ktap drm"},
		{"all", true, "ktap drm"},
		{"ktap", false, "ktap"},
		{"drm", false, "drm"},
		{"kunit", false, ""},
	} {
		got, err := suiteList(tc.flag, tc.own)
		if tc.want == "" {
			if err == nil {
				t.Errorf("--suite %q: %v, want an error", tc.flag, got)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("--suite %q (own kernel %v): %v %v, want %s", tc.flag, tc.own, got, err, tc.want)
		}
	}
}

func TestKTAPCases(t *testing.T) {
	cases, err := ktapCases(filepath.Join("..", "..", "guest"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 30 || cases[0] != "probe_identity" || !containsSuite(cases, "fences") || !containsSuite(cases, "protected_fence") {
		t.Errorf("vgpu_test cases: %v", cases)
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c] {
			t.Errorf("%s twice", c)
		}
		seen[c] = true
	}
}

func TestSplitTests(t *testing.T) {
	ktapList := []string{"scratch", "fences", "protected_fence"}
	drmList := []string{"userq_basic", "vram_bo", "protected_fence"}
	both := []string{images.SuiteKTAP, images.SuiteDRM}
	for _, tc := range []struct {
		tests   string
		suites  []string
		drmList []string
		want    map[string][]string // nil → error
	}{
		{"", both, drmList, map[string][]string{}},
		{"scratch,userq_basic", both, drmList, map[string][]string{"ktap": {"scratch"}, "drm": {"userq_basic"}}},
		{" fences , , vram_bo", both, drmList, map[string][]string{"ktap": {"fences"}, "drm": {"vram_bo"}}},
		{"protected_fence", both, drmList, map[string][]string{"ktap": {"protected_fence"}, "drm": {"protected_fence"}}},
		{"protected_fence", []string{"drm"}, drmList, map[string][]string{"drm": {"protected_fence"}}},
		{"drm:protected_fence", both, drmList, map[string][]string{"drm": {"protected_fence"}}},
		{"ktap:protected_fence,drm:vram_bo", both, drmList, map[string][]string{"ktap": {"protected_fence"}, "drm": {"vram_bo"}}},
		{"drm:whatever", both, drmList, map[string][]string{"drm": {"whatever"}}}, // the program says it does not know it
		{"no_such", both, drmList, nil},
		{"scratch", []string{"drm"}, drmList, nil},
		{"userq_basic", []string{"ktap"}, drmList, nil},
		{"userq_basic", []string{"ktap"}, nil, nil},
		{"drm:userq_basic", []string{"ktap"}, drmList, nil}, // that suite does not run
		{"kunit:x", both, drmList, nil},
		// The DRM cases unknown (a program without --list): other names go to the DRM suite.
		{"scratch,userq_basic,no_such", both, nil, map[string][]string{"ktap": {"scratch"}, "drm": {"userq_basic", "no_such"}}},
		{"protected_fence", both, nil, map[string][]string{"ktap": {"protected_fence"}}},
		{"scratch", []string{"drm"}, nil, map[string][]string{"drm": {"scratch"}}},
	} {
		got, err := splitTests(tc.tests, tc.suites, ktapList, tc.drmList)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%q %v: %v, want an error", tc.tests, tc.suites, got)
			} else {
				t.Logf("%q %v: %v", tc.tests, tc.suites, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q %v %v: %v %v, want %v", tc.tests, tc.suites, tc.drmList, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		suite string
		names []string
		want  string
	}{
		{"ktap", nil, ""},
		{"drm", nil, ""},
		{"ktap", []string{"a", "b"}, "tests=a,b"},
		{"drm", []string{"a", "b"}, "--tests a,b"},
	} {
		if got := suiteTestArgs(tc.suite, tc.names); got != tc.want {
			t.Errorf("suiteTestArgs(%s, %v) = %q, want %q", tc.suite, tc.names, got, tc.want)
		}
	}
}

func TestDRMInitProblems(t *testing.T) {
	good := map[string]string{"drm-kmods": "0", "drm-insmod": "0", "render-node": "/dev/dri/renderD128", "drmtest": "0", "drm-rmmod": "0", "end": ""}
	if p := drmInitProblems(good); len(p) != 0 {
		t.Errorf("a clean run: %v", p)
	}
	for key, val := range map[string]string{"drm-kmods": "1", "drm-insmod": "none", "drmtest": "timeout", "drm-rmmod": "1", "render-node": "none"} {
		m := map[string]string{}
		for k, v := range good {
			m[k] = v
		}
		m[key] = val
		if p := drmInitProblems(m); len(p) != 1 {
			t.Errorf("%s=%s: %v", key, val, p)
		}
		delete(m, key)
		if p := drmInitProblems(m); len(p) != 1 && key != "render-node" {
			t.Errorf("no %s line: %v", key, p)
		}
	}
	// A guest that never got to the end is reported as such by boot, not line by line here.
	if p := drmInitProblems(map[string]string{"drm-kmods": "0"}); len(p) != 0 {
		t.Errorf("cut short: %v", p)
	}
}

// drmKTAP is a DRM suite's report as vgpu-drmtest prints it (the shape, not its numbers).
const drmKTAP = `KTAP version 1
1..3
# userq_basic: 41 ms
ok 1 userq_basic
    KTAP version 1
    # Subtest: kernel_queue
    1..1
    # perf kq_jobs_per_s 5000 jobs/s
    ok 1 submit
ok 2 kernel_queue
# perf userq_jobs_per_s 25000 jobs/s
# perf userq_latency_median 40 us
# perf kq_latency_median 200 us
# perf userq_latency_p99 90.5 us
# perf kernel_queue_latency_p99 400 us
# perf doorbells 1200 count
# userq_perf: skipped below
ok 3 userq_perf # SKIP for the test
# perf broken line
`

func TestDRMFigures(t *testing.T) {
	rep := ktap.Parse(strings.NewReader(drmKTAP))
	figs, problems := parsePerf(rep)
	if len(figs) != 7 || len(problems) != 1 || !strings.Contains(problems[0], "broken line") {
		t.Fatalf("figures %+v, problems %v", figs, problems)
	}
	if figs[0] != (perfFigure{"kq_jobs_per_s", 5000, "jobs/s", "kernel_queue/submit"}) {
		t.Errorf("first figure %+v", figs[0])
	}
	lines := drmFigureLines(figs)
	want := []string{
		"jobs_per_s             userq 25000 jobs/s, kernel queue 5000 jobs/s: 5.00× (target ≥ 2×)",
		"latency_median         userq 40 us, kernel queue 200 us: 0.20× (target ≤ 0.5×)",
		"latency_p99            userq 90.50 us, kernel queue 400 us: 0.23×",
		"doorbells              1200 count",
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []string{"perf x y z", "perf x -1 s", "perf x NaN s", "perf x 1"} {
		if _, p := parsePerf(&ktap.Report{Diagnostics: []string{bad}}); len(p) != 1 {
			t.Errorf("%q: %v", bad, p)
		}
	}
	if f, p := parsePerf(&ktap.Report{Diagnostics: []string{"performance is fine", "perfect"}}); len(f)+len(p) != 0 {
		t.Errorf("not perf lines: %v %v", f, p)
	}
}

func TestSuiteSummary(t *testing.T) {
	res := &boot.Result{Report: ktap.Parse(strings.NewReader(drmKTAP)), Init: map[string]string{"drm-kmods": "0", "drm-insmod": "0",
		"render-node": "/dev/dri/renderD128", "drmtest": "0", "drm-rmmod": "1", "end": ""}}
	judgeSuite(images.SuiteDRM, res)
	var b bytes.Buffer
	printSuiteSummary(&b, images.SuiteDRM, "no IOMMU", res)
	out := b.String()
	rest := out
	for _, w := range []string{"vgpu guest suite (drm, no IOMMU)", "PASS userq_basic", "41 ms", "PASS kernel_queue", "SKIP userq_perf",
		"PROBLEM rmmod vgpu_drm: 1, want 0", "DRM figures", "jobs_per_s", "5.00×", "PROBLEM perf line"} {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("summary lacks %q (in order) in:\n%s", w, out)
		}
		rest = rest[i+len(w):]
	}
	// The KTAP suite's summary has no DRM block.
	b.Reset()
	printSuiteSummary(&b, images.SuiteKTAP, "no IOMMU", res)
	if strings.Contains(b.String(), "DRM figures") {
		t.Errorf("KTAP summary with DRM figures:\n%s", b.String())
	}
	b.Reset()
	ok := &boot.Result{Report: ktap.Parse(strings.NewReader("KTAP version 1\n1..1\nok 1 scratch\n"))}
	printOverall(&b, []bootOutcome{{"ktap", "no IOMMU", ok}, {"drm", "intel-iommu", res}})
	for _, w := range []string{"summary:", "PASS ktap  no IOMMU       1 passed, 0 failed, 0 skipped, 0 problems",
		"FAIL drm   intel-iommu    2 passed, 0 failed, 1 skipped, 1 problems"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("overall summary lacks %q:\n%s", w, b.String())
		}
	}
}

func TestDRMCases(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lister := script("lister", `[ "$1" = --list ] || exit 2; printf 'userq_basic\nvram_bo\n\n'`)
	if got := drmCases(t.Context(), lister); runtime.GOOS == "linux" && runtime.GOARCH == "amd64" && !reflect.DeepEqual(got, []string{"userq_basic", "vram_bo"}) {
		t.Errorf("drmCases = %v", got)
	}
	for name, body := range map[string]string{
		"no-list": `echo "flag provided but not defined: -list" >&2; exit 2`,
		"ktap":    `printf 'KTAP version 1\n1..1\nok 1 x\n'`,
	} {
		if got := drmCases(t.Context(), script(name, body)); got != nil {
			t.Errorf("%s: %v, want nil", name, got)
		}
	}
	if got := drmCases(t.Context(), ""); got != nil {
		t.Errorf("no program: %v", got)
	}
}

// TestFailureNotes: a failed case without subtests shows its diagnostics (the DRM program's
// reasons), without the timing note.
func TestFailureNotes(t *testing.T) {
	const doc = "KTAP version 1\n1..2\n# userq_basic: 5 ms\n# userq_basic: open: no such file\nnot ok 1 userq_basic\n# vram_bo: 2 ms\nok 2 vram_bo\n"
	var b bytes.Buffer
	printSummary(&b, "drm, no IOMMU", &boot.Result{Report: ktap.Parse(strings.NewReader(doc))})
	out := b.String()
	if !strings.Contains(out, "FAIL userq_basic") || !strings.Contains(out, "    | userq_basic: open: no such file\n") ||
		strings.Contains(out, "| userq_basic: 5 ms") || strings.Contains(out, "| vram_bo") {
		t.Errorf("summary:\n%s", out)
	}
}

func TestSuiteBounds(t *testing.T) {
	for _, tc := range []struct {
		suite string
		flag  time.Duration
		want  time.Duration
		extra string
	}{
		{"ktap", 0, boot.DefaultTimeout, ""},
		{"", 0, boot.DefaultTimeout, ""},
		{"ktap", time.Minute, time.Minute, ""},
		{"drm", 0, drmTimeout, "vgpu_drmtest_wait=840"},
		{"drm", 10 * time.Minute, 10 * time.Minute, "vgpu_drmtest_wait=540"},
		{"drm", time.Minute, time.Minute, "vgpu_drmtest_wait=30"},
	} {
		got, extra := suiteBounds(tc.suite, tc.flag)
		if got != tc.want || strings.Join(extra, " ") != tc.extra {
			t.Errorf("suiteBounds(%q, %v) = %v %q, want %v %q", tc.suite, tc.flag, got, extra, tc.want, tc.extra)
		}
	}
}

// TestSuiteJSON: the DRM suite's boot in --json names its suite, its KTAP's source and its
// figures; the KTAP suite's is as it was.
func TestSuiteJSON(t *testing.T) {
	res := &boot.Result{Report: ktap.Parse(strings.NewReader(drmKTAP))}
	jb := suiteJSON(images.SuiteDRM, "no IOMMU", res)
	if jb.Suite != "drm" || len(jb.KTAP) != 1 || jb.KTAP[0].Source != "vgpu-drmtest" || len(jb.Perf) != 7 {
		t.Fatalf("%+v", jb)
	}
	if c := jb.KTAP[0].Cases; len(c) != 4 || c[1].Name != "kernel_queue" || c[2].Name != "kernel_queue/submit" || c[3].Result != "skip" {
		t.Errorf("cases %+v", c)
	}
	b, err := json.Marshal(jb)
	if err != nil || !strings.Contains(string(b), `"perf":[{"name":"kq_jobs_per_s","value":5000,"unit":"jobs/s","case":"kernel_queue/submit"}`) {
		t.Errorf("json %s %v", b, err)
	}
	k := suiteJSON(images.SuiteKTAP, "no IOMMU", res)
	if k.Suite != "ktap" || k.KTAP[0].Source != "vgpu_test" || k.Perf != nil {
		t.Errorf("ktap %+v", k)
	}
}

// TestDRMFiguresProgramNames: the names vgpu-drmtest's perf_userq_vs_kq prints pair up, and its
// own ratio lines are shown as they are.
func TestDRMFiguresProgramNames(t *testing.T) {
	var d []string
	for _, l := range []string{"userq_jobs_per_s 40000 jobs/s", "kq_jobs_per_s 5000 jobs/s", "userq_latency_median_us 50 us",
		"userq_latency_p99_us 120 us", "kq_latency_median_us 230 us", "kq_latency_p99_us 1700 us",
		"userq_vs_kq_jobs_ratio 8 x", "userq_vs_kq_latency_ratio 0.22 x"} {
		d = append(d, "perf "+l)
	}
	figs, problems := parsePerf(&ktap.Report{Diagnostics: d})
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	want := []string{
		"jobs_per_s             userq 40000 jobs/s, kernel queue 5000 jobs/s: 8.00× (target ≥ 2×)",
		"latency_median_us      userq 50 us, kernel queue 230 us: 0.22× (target ≤ 0.5×)",
		"latency_p99_us         userq 120 us, kernel queue 1700 us: 0.07×",
		"userq_vs_kq_jobs_ratio 8 x",
		"userq_vs_kq_latency_ratio 0.22 x",
	}
	if got := drmFigureLines(figs); !reflect.DeepEqual(got, want) {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
