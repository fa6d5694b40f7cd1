package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"vgpu/guest/drmtest/ktap"
)

func TestSelectCases(t *testing.T) {
	known := []string{"a", "b", "c"}
	for _, c := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"", known, ""},
		{"  ", known, ""},
		{"c,a", []string{"a", "c"}, ""},
		{"b, b ,", []string{"b"}, ""},
		{"a,x", nil, `unknown case "x"`},
		{",", nil, "names no case"},
	} {
		got, err := selectCases(c.in, known)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("selectCases(%q): %v, want an error with %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("selectCases(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	for _, c := range []struct {
		args    []string
		check   func(o *options) bool
		wantErr bool
	}{
		{[]string{}, func(o *options) bool { return slices.Equal(o.tests, order) && o.iommuMode == "" }, false},
		{[]string{"--tests", "kernel_queue,userq_basic", "--iommu-mode", "on"}, func(o *options) bool {
			return slices.Equal(o.tests, []string{"userq_basic", "kernel_queue"}) && o.iommuMode == "on"
		}, false},
		{[]string{"--tests=vram_bo"}, func(o *options) bool { return slices.Equal(o.tests, []string{"vram_bo"}) }, false},
		{[]string{"--child", "many", "3"}, func(o *options) bool { return o.child == "many" && slices.Equal(o.childArgs, []string{"3"}) }, false},
		{[]string{"--case-timeout", "10s"}, func(o *options) bool { return o.caseLimit == 10*time.Second }, false},
		{[]string{"--tests", "inject_mes_hang", "--inject-rules"}, func(o *options) bool { return o.injected }, false},
		{[]string{"--tests", "inject_mes_hang"}, func(o *options) bool { return !o.injected }, false},
		{[]string{"stray"}, nil, true},
		{[]string{"--tests", "userq_nope"}, nil, true},
		{[]string{"--bogus"}, nil, true},
	} {
		o, err := parseFlags(c.args, io.Discard)
		if c.wantErr {
			if err == nil {
				t.Errorf("parseFlags(%q): no error", c.args)
			}
			continue
		}
		if err != nil || !c.check(o) {
			t.Errorf("parseFlags(%q) = %+v, %v", c.args, o, err)
		}
	}
}

// TestSuiteNames: every case of the list has a function, under its exact name, and
// every child mode a case starts exists.
func TestSuiteNames(t *testing.T) {
	want := []string{"userq_basic", "userq_many", "userq_priority", "userq_signal_wait", "userq_invalid",
		"userq_hang", "userq_evict", "userq_kill", "vram_bo", "protected_fence", "kernel_queue", "perf_userq_vs_kq",
		"shader_vector_add", "shader_atomics", "shader_ids_2d", "shader_bad", "shader_preempt",
		"shader_endless", "inject_mes_hang", "inject_eop_lost"}
	if !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	for _, n := range order {
		if suite[n] == nil {
			t.Errorf("case %s has no function", n)
		}
	}
	if len(suite) != len(order) {
		t.Errorf("%d functions for %d cases", len(suite), len(order))
	}
	for _, m := range []string{"many", "signal", "nocap", "kill"} {
		if children[m] == nil {
			t.Errorf("child mode %s missing", m)
		}
	}
}

func TestStatsAndRatio(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Microsecond)
	}
	s := stats(d)
	if s.median != 51*time.Microsecond || s.p99 != 100*time.Microsecond {
		t.Errorf("stats: median %v p99 %v, want 51µs 100µs", s.median, s.p99)
	}
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{5}, 5}, {[]float64{9, 1, 4}, 4}, {[]float64{3, 1, 2, 8}, 3}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if z := stats(nil); z.median != 0 || z.p99 != 0 {
		t.Errorf("stats(nil) = %+v", z)
	}
	for _, c := range []struct {
		uj, kj     float64
		ul, kl     time.Duration
		jr, lr     float64
		jobs, late string
	}{
		{3000, 1000, 10 * time.Microsecond, 40 * time.Microsecond, 3, 0.25, "target >= 2x: met", "target <= 0.5x: met"},
		{1500, 1000, 30 * time.Microsecond, 40 * time.Microsecond, 1.5, 0.75, "target >= 2x: not met", "target <= 0.5x: not met"},
	} {
		jr, lr, line := ratioLine(c.uj, c.kj, c.ul, c.kl)
		if jr != c.jr || lr != c.lr || !strings.Contains(line, c.jobs) || !strings.Contains(line, c.late) {
			t.Errorf("ratioLine(%v, %v, %v, %v) = %v, %v, %q", c.uj, c.kj, c.ul, c.kl, jr, lr, line)
		}
	}
}

// TestInjectCasesSkip: without --inject-rules an inject case skips with "needs injection" and
// its rules, before it opens the device (here there is none).
func TestInjectCasesSkip(t *testing.T) {
	injected = false
	for name, rules := range injectCaseRules {
		c := &T{name: name, k: ktap.New(io.Discard, 1)}
		c.run(suite[name])
		if len(c.errors()) > 0 || !strings.HasPrefix(c.skip, "needs injection") || !strings.Contains(c.skip, "'"+rules+"'") {
			t.Errorf("%s without --inject-rules: skip %q, errors %v", name, c.skip, c.errors())
		}
	}
}
