package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"vgpu/ci/boot"
	"vgpu/ci/ktap"
)

// printUserSummary writes what a user run showed: every module, every --run command with its
// status and time, every KTAP case, every kernel splat, the problems, and on failure the last
// lines of the kernel log and of the console, and where the logs are.
func printUserSummary(w io.Writer, mode string, res *boot.Result) {
	verdict := "PASS"
	if res.Failed() {
		verdict = "FAIL"
	}
	u := res.User
	fmt.Fprintf(w, "\nvgpu run (%s): %s in %v\n", mode, verdict, res.Wall.Round(time.Millisecond))
	for _, m := range u.Modules {
		status := "loaded"
		switch m.RC {
		case "0":
		case "":
			status = "DID NOT FINISH"
		default:
			status = "FAIL (insmod exit " + m.RC + ")"
		}
		name := m.Name
		if m.Args != "" {
			name += " " + m.Args
		}
		if m.Dependency {
			name += " (dependency)"
		}
		fmt.Fprintf(w, "  module  %-40s %-22s %s\n", name, status, dur(m.Time, m.RC != ""))
		writeLines(w, "          | ", m.Output)
	}
	for _, r := range u.Runs {
		status := "PASS"
		switch r.RC {
		case "0":
		case "skipped":
			status = "SKIPPED"
		case "":
			status = "DID NOT FINISH"
		default:
			status = "FAIL (exit " + r.RC + ")"
		}
		fmt.Fprintf(w, "  run %-3d %-40s %-22s %s\n", r.N, oneLine(r.Command, 40), status, dur(r.Time, r.RC != "" && r.RC != "skipped"))
		if r.RC != "0" {
			writeLines(w, "          | ", tail(r.Output, 15))
		}
	}
	for _, d := range u.KTAP {
		fmt.Fprintf(w, "  KTAP from %s:\n", d.Source)
		walkKTAP(w, d.Report.Tests, "    ")
	}
	for _, un := range u.Unloads {
		status := "ok"
		if un.RC != "0" {
			status = "FAIL (rmmod exit " + un.RC + ")"
		}
		fmt.Fprintf(w, "  unload  %-40s %s\n", un.Name, status)
	}
	for _, s := range res.Splats {
		fmt.Fprintf(w, "  SPLAT   %s\n", s)
	}
	for _, p := range res.Problems {
		fmt.Fprintf(w, "  PROBLEM %s\n", p)
	}
	if res.Failed() {
		for _, s := range res.Splats {
			fmt.Fprintf(w, "kernel %s report (%s line %d):\n", s.Kind, s.Source, s.Line)
			writeLines(w, "  ", splatHead(s.Lines))
		}
		if len(res.KernelLog) > 0 {
			fmt.Fprintln(w, "kernel log, last lines:")
			writeLines(w, "  ", tail(res.KernelLog, 15))
		}
		if _, ended := res.Init["end"]; res.TimedOut || !ended {
			fmt.Fprintln(w, "console, last lines (what the guest printed last):")
			writeLines(w, "  ", res.LastOutput)
		}
		printArtefacts(w, res)
	}
}

// splatHead is the start of a report: its title up to a few frames of the call trace.
func splatHead(lines []string) []string {
	for i, l := range lines {
		if strings.Contains(l, "Call Trace:") {
			return lines[:min(len(lines), i+8)]
		}
	}
	return lines[:min(len(lines), 20)]
}

func printArtefacts(w io.Writer, res *boot.Result) {
	names := make([]string, 0, len(res.Artefacts))
	for n := range res.Artefacts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %s: %s\n", n, res.Artefacts[n])
	}
}

func walkKTAP(w io.Writer, ts []*ktap.Test, indent string) {
	for _, t := range ts {
		verdict := map[ktap.Result]string{ktap.Pass: "PASS", ktap.Fail: "FAIL", ktap.Skip: "SKIP"}[t.Result]
		line := fmt.Sprintf("%s%-4s %s", indent, verdict, t.Name)
		if t.Result != ktap.Pass && t.Directive != "" {
			line += "  # " + t.Directive
		}
		fmt.Fprintln(w, line)
		walkKTAP(w, t.Subtests, indent+"    ")
	}
}

func dur(d time.Duration, known bool) string {
	if !known {
		return ""
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func oneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", "; ")
	if len(s) > n {
		s = s[:n-3] + "..."
	}
	return s
}

func tail(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

// The --json report: the summary's content for machines.
type jsonReport struct {
	Passed bool       `json:"passed"`
	Boots  []jsonBoot `json:"boots"`
}

type jsonBoot struct {
	Name       string            `json:"name"`
	Suite      string            `json:"suite,omitempty"` // ktap, drm; "" for a user run
	Perf       []perfFigure      `json:"perf,omitempty"`  // the DRM suite's "# perf" figures
	Passed     bool              `json:"passed"`
	WallMS     int64             `json:"wall_ms"`
	TimedOut   bool              `json:"timed_out"`
	Modules    []jsonModule      `json:"modules,omitempty"`
	Runs       []jsonRun         `json:"runs,omitempty"`
	Unloads    []jsonUnload      `json:"unloads,omitempty"`
	KTAP       []jsonKTAP        `json:"ktap,omitempty"`
	Splats     []jsonSplat       `json:"splats,omitempty"`
	Problems   []string          `json:"problems,omitempty"`
	LastOutput []string          `json:"last_output,omitempty"`
	Artefacts  map[string]string `json:"artefacts,omitempty"`
}

type jsonModule struct {
	Name       string   `json:"name"`
	Args       string   `json:"args,omitempty"`
	Dependency bool     `json:"dependency,omitempty"`
	Exit       string   `json:"exit"` // "" when it never finished
	MS         int64    `json:"ms"`
	Output     []string `json:"output,omitempty"`
}

type jsonRun struct {
	N       int      `json:"n"`
	Command string   `json:"command"`
	Status  string   `json:"status"` // passed, failed (exit N), skipped, did not finish
	Exit    string   `json:"exit"`
	MS      int64    `json:"ms"`
	Output  []string `json:"output,omitempty"`
}

type jsonUnload struct {
	Name string `json:"name"`
	Exit string `json:"exit"`
	IRQs int    `json:"irqs_left"`
}

type jsonKTAP struct {
	Source   string     `json:"source"`
	Cases    []jsonCase `json:"cases"`
	Problems []string   `json:"problems,omitempty"`
}

type jsonCase struct {
	Name      string `json:"name"` // suite/case
	Result    string `json:"result"`
	Directive string `json:"directive,omitempty"`
}

type jsonSplat struct {
	Kind  string   `json:"kind"`
	Title string   `json:"title"`
	Lines []string `json:"lines"`
}

func jsonBootOf(name string, res *boot.Result) jsonBoot {
	b := jsonBoot{Name: name, Passed: !res.Failed(), WallMS: res.Wall.Milliseconds(), TimedOut: res.TimedOut,
		Problems: append(append([]string(nil), res.Report.Problems...), res.Problems...), Artefacts: res.Artefacts}
	if res.User != nil {
		b.Problems = res.Problems // a user run's KTAP problems are in Problems already
	}
	if res.Failed() {
		b.LastOutput = res.LastOutput
	}
	for _, s := range res.Splats {
		b.Splats = append(b.Splats, jsonSplat{s.Kind, s.Title, s.Lines})
	}
	if res.User == nil {
		b.KTAP = append(b.KTAP, jsonKTAPOf("vgpu_test", res.Report))
		return b
	}
	for _, m := range res.User.Modules {
		b.Modules = append(b.Modules, jsonModule{m.Name, m.Args, m.Dependency, m.RC, m.Time.Milliseconds(), m.Output})
	}
	for _, r := range res.User.Runs {
		b.Runs = append(b.Runs, jsonRun{r.N, r.Command, r.Status(), r.RC, r.Time.Milliseconds(), r.Output})
	}
	for _, u := range res.User.Unloads {
		b.Unloads = append(b.Unloads, jsonUnload{u.Name, u.RC, u.IRQs})
	}
	for _, d := range res.User.KTAP {
		b.KTAP = append(b.KTAP, jsonKTAPOf(d.Source, d.Report))
	}
	return b
}

// suiteJSON is a boot's --json record with its suite: the DRM suite's KTAP is vgpu-drmtest's,
// and its perf figures are listed.
func suiteJSON(suite, name string, res *boot.Result) jsonBoot {
	jb := jsonBootOf(name, res)
	jb.Suite = suite
	if suite == "drm" && res.User == nil && len(jb.KTAP) > 0 {
		jb.KTAP[0].Source = "vgpu-drmtest"
		jb.Perf, _ = parsePerf(res.Report)
	}
	return jb
}

func jsonKTAPOf(source string, rep *ktap.Report) jsonKTAP {
	k := jsonKTAP{Source: source, Cases: []jsonCase{}, Problems: rep.Problems}
	var walk func([]*ktap.Test, string)
	walk = func(ts []*ktap.Test, prefix string) {
		for _, t := range ts {
			k.Cases = append(k.Cases, jsonCase{prefix + t.Name, t.Result.String(), t.Directive})
			walk(t.Subtests, prefix+t.Name+"/")
		}
	}
	walk(rep.Tests, "")
	return k
}

func writeJSON(path string, r *jsonReport) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
