package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"vgpu/ci/boot"
	"vgpu/ci/ktap"
	"vgpu/device"
	"vgpu/images"
	"vgpu/inject"
)

// ktapInjectCases are the vgpu_test cases of the drivers' recovery paths (guest/t_inject_*.c):
// each needs the device to run with its fault-injection rules, so `vgpu run` boots it in a
// boot of its own with those rules and the module parameter inject_rules=1. (Their C sources
// name the same rules, in their skip and failure messages; a test keeps the two equal.)
var ktapInjectCases = []injectCase{
	{"inject_eop_lost", "iv.drop:src=CP_EOP,n=1"},
	{"inject_mes_hang", "mes.hang:op=MISC,n=1"},
	{"inject_dma_fail", "dma.fail:iova=0-0xffffffffffffffff,dir=write,n=1; dma.fail:iova=0-0xffffffffffffffff,dir=write,n=3"},
}

// drmInjectCases are vgpu-drmtest's cases of vgpu_drm.ko's recovery paths
// (guest/drmtest/case_inject*.go), booted the same way with vgpu-drmtest's --inject-rules.
var drmInjectCases = []injectCase{
	{"inject_mes_hang", "mes.hang:op=ADD_QUEUE,n=2"},
	{"inject_eop_lost", "iv.drop:src=CP_EOP,n=1"},
}

type injectCase struct{ name, rules string }

// injectCases are a suite's inject cases.
func injectCases(suite string) []injectCase {
	switch suite {
	case images.SuiteKTAP:
		return ktapInjectCases
	case images.SuiteDRM:
		return drmInjectCases
	}
	return nil
}

// injectRules returns the rules of a suite's inject case ("" for any other case).
func injectRules(suite, name string) string {
	for _, c := range injectCases(suite) {
		if c.name == name {
			return c.rules
		}
	}
	return ""
}

// injectArg is what an inject boot adds to the suite's arguments: vgpu_test's module
// parameter, vgpu-drmtest's flag.
func injectArg(suite string) string {
	if suite == images.SuiteDRM {
		return " --inject-rules"
	}
	return " inject_rules=1"
}

// suiteRun is one boot of a suite: its image, its share of --tests as module or program
// arguments, and the fault-injection rules of its cases (an inject boot) on top of the
// device's.
type suiteRun struct {
	name     string
	img      *images.GuestImage
	testArgs string
	inject   []inject.Rule
	cases    []string // an inject boot's cases (they must pass, not skip)
	rules    string   // ... and their rules, as the table writes them
}

// suiteBoots splits a suite's selection (sel; empty: every case of all, the suite's cases)
// into its boots: the cases without rules in one, each rule set's cases in one of their own.
// With all unknown (nil: vgpu-drmtest could not list its cases) and nothing selected, one boot
// runs every case (its inject cases skip).
func suiteBoots(name string, img *images.GuestImage, sel, all []string) []suiteRun {
	if len(injectCases(name)) == 0 || (len(sel) == 0 && len(all) == 0) {
		return []suiteRun{{name: name, img: img, testArgs: suiteTestArgs(name, sel)}}
	}
	chosen := sel
	if len(chosen) == 0 {
		chosen = all
	}
	var plain []string
	byRules := map[string][]string{}
	var order []string
	for _, c := range chosen {
		r := injectRules(name, c)
		if r == "" {
			plain = append(plain, c)
			continue
		}
		if _, ok := byRules[r]; !ok {
			order = append(order, r)
		}
		byRules[r] = append(byRules[r], c)
	}
	var out []suiteRun
	if len(plain) > 0 {
		args := suiteTestArgs(name, plain)
		if len(sel) == 0 && len(order) == 0 {
			args = "" // every case (a module that has no inject cases)
		}
		out = append(out, suiteRun{name: name, img: img, testArgs: args})
	}
	for _, r := range order {
		rules, err := device.ParseInjections(r)
		if err != nil {
			panic(fmt.Sprintf("%s inject cases: %v", name, err)) // TestInjectCaseTable keeps this from shipping
		}
		cs := byRules[r]
		out = append(out, suiteRun{name: name, img: img, testArgs: suiteTestArgs(name, cs) + injectArg(name),
			inject: rules, cases: cs, rules: r})
	}
	return out
}

// device is the boot's device: the configured one with the boot's rules added.
func (sr suiteRun) device(cfg device.Config) device.Config {
	if len(sr.inject) > 0 {
		cfg.Inject = append(slices.Clone(cfg.Inject), sr.inject...)
	}
	return cfg
}

// dir names the boot's folder (beside the mode).
func (sr suiteRun) dir() string {
	if len(sr.cases) > 0 {
		return sr.name + "-" + strings.Join(sr.cases, "-")
	}
	return sr.name
}

// note labels an inject boot in the progress and summary lines.
func (sr suiteRun) note() string {
	if sr.rules == "" {
		return ""
	}
	return "; inject " + sr.rules
}

// judge adds to an inject boot's result each of its cases that did not pass: such a case
// skips without its rules, and a skip here means the boot did not give them.
func (sr suiteRun) judge(res *boot.Result) {
	if res.Report == nil {
		return
	}
	for _, c := range sr.cases {
		found := false
		for _, tc := range res.Report.Tests {
			if tc.Name != c {
				continue
			}
			found = true
			if tc.Result != ktap.Pass {
				res.Problems = append(res.Problems, fmt.Sprintf("%s (inject %s): %s, want ok (%s)", c, sr.rules, tc.Result, tc.Directive))
			}
		}
		if !found {
			res.Problems = append(res.Problems, fmt.Sprintf("%s (inject %s): no result", c, sr.rules))
		}
	}
}

// injectFlag defines --inject (repeatable): rules in force on the device from the start.
func injectFlag(fl *flag.FlagSet) *[]inject.Rule {
	var rules []inject.Rule
	fl.Func("inject", "fault-injection rules from the start, e.g. 'irq.drop:vector=0,n=3; mes.hang:op=ADD_QUEUE' (docs/inject.md); repeatable", func(s string) error {
		r, err := device.ParseInjections(s)
		if err != nil {
			return err
		}
		if len(rules)+len(r) > inject.MaxRules {
			return fmt.Errorf("more than %d rules", inject.MaxRules)
		}
		rules = append(rules, r...)
		return nil
	})
	return &rules
}
