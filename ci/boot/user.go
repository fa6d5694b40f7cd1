package boot

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"vgpu/ci/ktap"
	"vgpu/images"
)

// UserReport is what a user run (Config.Plan) did, step by step.
type UserReport struct {
	Modules []ModuleStep
	Runs    []RunStep
	Unloads []UnloadStep
	KTAP    []KTAPDoc // every KTAP document found in the commands' output and the kernel log
}

// ModuleStep is one module load.
type ModuleStep struct {
	Name, Args string
	Dependency bool
	RC         string // insmod's exit status; "" when /init never reported it
	Time       time.Duration
	Output     []string
}

// RunStep is one --run command.
type RunStep struct {
	N       int // 1-based, in command-line order
	Command string
	RC      string // exit status, "skipped" (a module failed to load), "" (never finished)
	Time    time.Duration
	Output  []string
}

// Status is "passed", "failed (exit N)", "skipped (a module failed to load)" or "did not
// finish".
func (r RunStep) Status() string {
	switch r.RC {
	case "0":
		return "passed"
	case "skipped":
		return "skipped (a module failed to load)"
	case "":
		return "did not finish"
	}
	return "failed (exit " + r.RC + ")"
}

// UnloadStep is the rmmod of a loaded module.
type UnloadStep struct {
	Name string
	RC   string
	IRQs int // /proc/interrupts lines still naming the module afterwards
}

// KTAPDoc is one KTAP document and where it was printed.
type KTAPDoc struct {
	Source string // "run 2", "kernel log"
	Report *ktap.Report
}

var (
	userModuleRE = regexp.MustCompile(`# vgpu-init: module (\S+) rc=(\S+) cs=(\d+)`)
	userRunRE    = regexp.MustCompile(`# vgpu-init: run (\d+) rc=(\S+) cs=(\d+)`)
	userUnloadRE = regexp.MustCompile(`# vgpu-init: unload (\S+) rc=(\S+)`)
	userIRQsRE   = regexp.MustCompile(`# vgpu-init: irqs (\S+)=(\d+)`)
	userOutRE    = regexp.MustCompile(`^# vgpu-init: out (\S+): (.*)$`)
	userBeginRE  = regexp.MustCompile(`# vgpu-init: begin (module|run|unload) (\S+)`)
	ktapStartRE  = regexp.MustCompile(`^K?TAP version \d+\s*$`)
)

func centis(s string) time.Duration {
	n, _ := strconv.Atoi(s)
	return time.Duration(n) * 10 * time.Millisecond
}

// judgeUser fills in a user run's verdict from /init's report (text) and the kernel log and
// splats already in res: every step, every KTAP document, every splat.
func judgeUser(res *Result, plan *images.RunPlan, text []byte) {
	res.Report = &ktap.Report{Plan: -1}
	res.Init = initLines(text)
	_, ended := res.Init["end"]
	if !ended && !res.TimedOut {
		res.Problems = append(res.Problems, "the guest's /init never reported its end (crash or hang before power-off)")
	}
	res.User = parseUser(plan, consoleLines(text), res.KernelLog)
	res.Problems = append(res.Problems, res.User.Problems(ended)...)
	for _, s := range res.Splats {
		res.Problems = append(res.Problems, "kernel splat: "+s.String())
	}
}

// parseUser reads /init's report of a user run (the results port's text, or the console's
// when that never arrived; the console lacks the framed output lines).
func parseUser(plan *images.RunPlan, report []string, kernelLog []string) *UserReport {
	u := &UserReport{}
	for _, m := range plan.Modules {
		u.Modules = append(u.Modules, ModuleStep{Name: m.Name, Args: m.Args, Dependency: m.Dependency})
	}
	for i, c := range plan.Commands {
		u.Runs = append(u.Runs, RunStep{N: i + 1, Command: c})
	}
	module := func(name string) *ModuleStep {
		for i := range u.Modules {
			if u.Modules[i].Name == name {
				return &u.Modules[i]
			}
		}
		return nil
	}
	run := func(n string) *RunStep {
		i, err := strconv.Atoi(n)
		if err != nil || i < 1 || i > len(u.Runs) {
			return nil
		}
		return &u.Runs[i-1]
	}
	for _, line := range report {
		if g := userOutRE.FindStringSubmatch(line); g != nil {
			tag, text := g[1], g[2]
			switch {
			case strings.HasPrefix(tag, "m-"):
				if m := module(tag[2:]); m != nil {
					m.Output = append(m.Output, text)
				}
			case strings.HasPrefix(tag, "u-"):
				// rmmod's complaints are in the kernel log and its rc.
			default:
				if r := run(tag); r != nil {
					r.Output = append(r.Output, text)
				}
			}
			continue
		}
		if g := userModuleRE.FindStringSubmatch(line); g != nil {
			if m := module(g[1]); m != nil {
				m.RC, m.Time = g[2], centis(g[3])
			}
		} else if g := userRunRE.FindStringSubmatch(line); g != nil {
			if r := run(g[1]); r != nil {
				r.RC, r.Time = g[2], centis(g[3])
			}
		} else if g := userUnloadRE.FindStringSubmatch(line); g != nil {
			u.Unloads = append(u.Unloads, UnloadStep{Name: g[1], RC: g[2]})
		} else if g := userIRQsRE.FindStringSubmatch(line); g != nil {
			n, _ := strconv.Atoi(g[2])
			for i := range u.Unloads {
				if u.Unloads[i].Name == g[1] {
					u.Unloads[i].IRQs = n
				}
			}
		}
	}
	for _, r := range u.Runs {
		for _, doc := range splitKTAP(r.Output) {
			u.KTAP = append(u.KTAP, KTAPDoc{Source: fmt.Sprintf("run %d", r.N), Report: ktap.Parse(strings.NewReader(strings.Join(doc, "\n")))})
		}
	}
	for _, doc := range splitKTAP(kernelLog) {
		u.KTAP = append(u.KTAP, KTAPDoc{Source: "kernel log", Report: ktap.Parse(strings.NewReader(strings.Join(doc, "\n")))})
	}
	return u
}

// splitKTAP cuts lines into KTAP documents: each starts at a top-level (unindented) version
// line and runs to the next one. Lines before the first are not part of any.
func splitKTAP(lines []string) [][]string {
	var docs [][]string
	for _, l := range lines {
		if ktapStartRE.MatchString(stripTimestamp(l)) {
			docs = append(docs, nil)
		}
		if len(docs) > 0 {
			docs[len(docs)-1] = append(docs[len(docs)-1], l)
		}
	}
	return docs
}

// Problems are the reasons a user run failed, each naming what failed. ended tells whether
// /init reached its end; when it did not (a crash, a timeout) modules it never got to unload
// are no problem of their own.
func (u *UserReport) Problems(ended bool) []string {
	var p []string
	loaded := map[string]bool{}
	for _, m := range u.Modules {
		switch m.RC {
		case "0":
			loaded[m.Name] = true
		case "":
			p = append(p, fmt.Sprintf("module %s: never finished loading", m.Name))
		default:
			why := ""
			if len(m.Output) > 0 {
				why = ": " + strings.Join(m.Output, " / ")
			}
			p = append(p, fmt.Sprintf("module %s: insmod exited %s%s", m.Name, m.RC, why))
		}
	}
	for _, r := range u.Runs {
		if r.RC != "0" {
			p = append(p, fmt.Sprintf("run %d `%s`: %s", r.N, r.Command, r.Status()))
		}
	}
	unloaded := map[string]bool{}
	for _, un := range u.Unloads {
		unloaded[un.Name] = true
		if un.RC != "0" {
			p = append(p, fmt.Sprintf("rmmod %s: exited %s", un.Name, un.RC))
		}
		if un.IRQs != 0 {
			p = append(p, fmt.Sprintf("rmmod %s: %d interrupt handlers naming it are left in /proc/interrupts", un.Name, un.IRQs))
		}
	}
	for _, m := range u.Modules {
		if ended && loaded[m.Name] && !unloaded[m.Name] {
			p = append(p, fmt.Sprintf("module %s: loaded but never unloaded", m.Name))
		}
	}
	for _, d := range u.KTAP {
		if failed := failedCases(d.Report.Tests, ""); len(failed) > 0 {
			p = append(p, fmt.Sprintf("KTAP (%s): failed: %s", d.Source, strings.Join(failed, ", ")))
		}
		for _, q := range d.Report.Problems {
			p = append(p, fmt.Sprintf("KTAP (%s): %s", d.Source, q))
		}
	}
	return p
}

func failedCases(ts []*ktap.Test, prefix string) []string {
	var out []string
	for _, t := range ts {
		name := prefix + t.Name
		if sub := failedCases(t.Subtests, name+"/"); len(sub) > 0 {
			out = append(out, sub...)
		} else if t.Result == ktap.Fail {
			out = append(out, name)
		}
	}
	return out
}

// guestWhere names what the guest was doing when the run ended, from /init's console lines:
// the step it began last and never finished, or the phase after its last step.
func guestWhere(console []string, plan *images.RunPlan) string {
	sawInit := false
	open := ""
	for _, l := range console {
		if strings.Contains(l, images.InitPrefix) {
			sawInit = true
		}
		if g := userBeginRE.FindStringSubmatch(l); g != nil {
			switch g[1] {
			case "run":
				n, _ := strconv.Atoi(g[2])
				open = "running run " + g[2]
				if plan != nil && n >= 1 && n <= len(plan.Commands) {
					open += " `" + plan.Commands[n-1] + "`"
				}
			case "module":
				open = "loading module " + g[2]
			case "unload":
				open = "unloading module " + g[2]
			}
			continue
		}
		if userModuleRE.MatchString(l) || userRunRE.MatchString(l) || userUnloadRE.MatchString(l) {
			open = ""
		}
	}
	switch {
	case open != "":
		return open
	case !sawInit:
		return "booting the kernel (no line from /init yet)"
	case plan == nil:
		return "in the vgpu_test suite (after /init's last report line)"
	}
	return "in /init after its last step"
}
