package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"vgpu/device"
	"vgpu/images"
)

// The inject cases' table: every rule parses, every case is one of vgpu_test's, and its C
// source names the same rules (the messages a user reads say what the boot must give).
func TestInjectCaseTable(t *testing.T) {
	dir := filepath.Join("..", "..", "guest")
	ktap, err := ktapCases(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		suite string
		cases []string // nil: named in the sources as "name" (vgpu-drmtest's case table)
		glob  string
	}{
		{images.SuiteKTAP, ktap, filepath.Join(dir, "t_inject_*.c")},
		{images.SuiteDRM, nil, filepath.Join(dir, "drmtest", "*.go")},
	} {
		srcs, _ := filepath.Glob(s.glob)
		var all strings.Builder
		for _, f := range srcs {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			all.Write(b)
		}
		if len(injectCases(s.suite)) == 0 {
			t.Errorf("%s: no inject cases", s.suite)
		}
		for _, c := range injectCases(s.suite) {
			if _, err := device.ParseInjections(c.rules); err != nil {
				t.Errorf("%s %s: %v", s.suite, c.name, err)
			}
			if s.cases != nil && !containsSuite(s.cases, c.name) || s.cases == nil && !strings.Contains(all.String(), `"`+c.name+`"`) {
				t.Errorf("%s is not a case of the %s suite", c.name, s.suite)
			}
			if !strings.Contains(all.String(), `"`+c.rules+`"`) {
				t.Errorf("%s %s: no %s names its rules %q", s.suite, c.name, s.glob, c.rules)
			}
		}
	}
}

func TestSuiteBoots(t *testing.T) {
	all := []string{"dma", "fences", "inject_eop_lost", "inject_mes_hang", "inject_dma_fail"}
	type boot struct{ args, rules string }
	for _, tc := range []struct {
		suite string
		sel   []string
		want  []boot
	}{
		{images.SuiteKTAP, nil, []boot{
			{"tests=dma,fences", ""},
			{"tests=inject_eop_lost inject_rules=1", injectRules(images.SuiteKTAP, "inject_eop_lost")},
			{"tests=inject_mes_hang inject_rules=1", injectRules(images.SuiteKTAP, "inject_mes_hang")},
			{"tests=inject_dma_fail inject_rules=1", injectRules(images.SuiteKTAP, "inject_dma_fail")},
		}},
		{images.SuiteKTAP, []string{"fences"}, []boot{{"tests=fences", ""}}},
		{images.SuiteKTAP, []string{"inject_mes_hang"}, []boot{{"tests=inject_mes_hang inject_rules=1", injectRules(images.SuiteKTAP, "inject_mes_hang")}}},
		{images.SuiteKTAP, []string{"inject_dma_fail", "dma"}, []boot{
			{"tests=dma", ""}, {"tests=inject_dma_fail inject_rules=1", injectRules(images.SuiteKTAP, "inject_dma_fail")},
		}},
		{images.SuiteKTAP, nil, nil}, // with all = nil below: a module without inject cases
		{images.SuiteDRM, []string{"basic"}, []boot{{"--tests basic", ""}}},
		{images.SuiteDRM, []string{"inject_mes_hang", "basic"}, []boot{
			{"--tests basic", ""}, {"--tests inject_mes_hang --inject-rules", injectRules(images.SuiteDRM, "inject_mes_hang")},
		}},
	} {
		a := all
		if tc.suite == images.SuiteKTAP && tc.sel == nil && tc.want == nil {
			a = []string{"dma"}
			tc.want = []boot{{"", ""}}
		}
		got := suiteBoots(tc.suite, nil, tc.sel, a)
		if len(got) != len(tc.want) {
			t.Errorf("%s %v: %d boots, want %d: %+v", tc.suite, tc.sel, len(got), len(tc.want), got)
			continue
		}
		for i, w := range tc.want {
			if got[i].testArgs != w.args || got[i].rules != w.rules || (w.rules != "") != (len(got[i].inject) > 0) {
				t.Errorf("%s %v boot %d: %q with %q, want %q with %q", tc.suite, tc.sel, i, got[i].testArgs, got[i].rules, w.args, w.rules)
			}
		}
	}
	// The DRM suite with every case: the plain cases by name, then each inject case's boot;
	// with its cases unknown (vgpu-drmtest could not list them), one boot of everything.
	drm := []string{"userq_basic", "inject_mes_hang", "kernel_queue", "inject_eop_lost"}
	got := suiteBoots(images.SuiteDRM, nil, nil, drm)
	if len(got) != 3 || got[0].testArgs != "--tests userq_basic,kernel_queue" ||
		got[1].testArgs != "--tests inject_mes_hang --inject-rules" || got[1].rules != injectRules(images.SuiteDRM, "inject_mes_hang") ||
		got[2].testArgs != "--tests inject_eop_lost --inject-rules" || got[2].rules != injectRules(images.SuiteDRM, "inject_eop_lost") {
		t.Errorf("DRM suite, every case: %+v", got)
	}
	if got := suiteBoots(images.SuiteDRM, nil, nil, nil); len(got) != 1 || got[0].testArgs != "" || got[0].rules != "" {
		t.Errorf("DRM suite, cases unknown: %+v", got)
	}
	// The boot's device: the configured rules and the boot's.
	cfg := device.DefaultConfig()
	cfg.Inject, _ = device.ParseInjections("tlb.stale")
	sr := suiteBoots(images.SuiteKTAP, nil, []string{"inject_dma_fail"}, all)[0]
	if d := sr.device(cfg); len(d.Inject) != 3 || len(cfg.Inject) != 1 {
		t.Errorf("device rules %d (config %d), want 3 (1)", len(d.Inject), len(cfg.Inject))
	}
}
