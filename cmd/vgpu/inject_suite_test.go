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
	cases, err := ktapCases(dir)
	if err != nil {
		t.Fatal(err)
	}
	srcs, _ := filepath.Glob(filepath.Join(dir, "t_inject_*.c"))
	var all strings.Builder
	for _, s := range srcs {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	for _, c := range ktapInjectCases {
		if _, err := device.ParseInjections(c.rules); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !containsSuite(cases, c.name) {
			t.Errorf("%s is not a vgpu_test case", c.name)
		}
		if !strings.Contains(all.String(), `"`+c.rules+`"`) {
			t.Errorf("%s: no t_inject_*.c names its rules %q", c.name, c.rules)
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
			{"tests=inject_eop_lost inject_rules=1", injectRules("inject_eop_lost")},
			{"tests=inject_mes_hang inject_rules=1", injectRules("inject_mes_hang")},
			{"tests=inject_dma_fail inject_rules=1", injectRules("inject_dma_fail")},
		}},
		{images.SuiteKTAP, []string{"fences"}, []boot{{"tests=fences", ""}}},
		{images.SuiteKTAP, []string{"inject_mes_hang"}, []boot{{"tests=inject_mes_hang inject_rules=1", injectRules("inject_mes_hang")}}},
		{images.SuiteKTAP, []string{"inject_dma_fail", "dma"}, []boot{
			{"tests=dma", ""}, {"tests=inject_dma_fail inject_rules=1", injectRules("inject_dma_fail")},
		}},
		{images.SuiteKTAP, nil, nil}, // with all = nil below: a module without inject cases
		{images.SuiteDRM, []string{"basic"}, []boot{{"--tests basic", ""}}},
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
	// The boot's device: the configured rules and the boot's.
	cfg := device.DefaultConfig()
	cfg.Inject, _ = device.ParseInjections("tlb.stale")
	sr := suiteBoots(images.SuiteKTAP, nil, []string{"inject_dma_fail"}, all)[0]
	if d := sr.device(cfg); len(d.Inject) != 3 || len(cfg.Inject) != 1 {
		t.Errorf("device rules %d (config %d), want 3 (1)", len(d.Inject), len(cfg.Inject))
	}
}
