package main

import (
	"fmt"
	"strconv"
	"strings"

	"vgpu/ci/ktap"
)

// perfFigure is one "# perf <name> <value> <unit>" diagnostic of the DRM suite's program.
type perfFigure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Case  string  `json:"case,omitempty"` // the KTAP case it was printed under; "" at the top level
}

// parsePerf collects the perf lines of a report, wherever they are nested, in order. A line
// that starts "perf " but is not "perf NAME NUMBER UNIT" is returned as a problem: the program's
// format is meant to be stable.
func parsePerf(rep *ktap.Report) ([]perfFigure, []string) {
	var figs []perfFigure
	var problems []string
	visit := func(d, where string) {
		rest, ok := strings.CutPrefix(d, "perf ")
		if !ok {
			return
		}
		f := strings.Fields(rest)
		if len(f) != 3 {
			problems = append(problems, fmt.Sprintf("perf line %q: want \"perf NAME VALUE UNIT\"", d))
			return
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil || v < 0 || v != v {
			problems = append(problems, fmt.Sprintf("perf line %q: %q is not a number ≥ 0", d, f[1]))
			return
		}
		figs = append(figs, perfFigure{Name: f[0], Value: v, Unit: f[2], Case: where})
	}
	if rep == nil {
		return nil, nil
	}
	var walk func([]*ktap.Test, string)
	walk = func(ts []*ktap.Test, prefix string) {
		for _, t := range ts {
			for _, d := range t.Diagnostics {
				visit(d, prefix+t.Name)
			}
			walk(t.Subtests, prefix+t.Name+"/")
		}
	}
	walk(rep.Tests, "")
	for _, d := range rep.Diagnostics {
		visit(d, "")
	}
	return figs, problems
}

// kernelQueueSpellings are the names a kernel-queue figure may use where its user-queue twin
// says "userq": userq_jobs_per_s beside kq_jobs_per_s (or kernelq_, kernel_queue_, kernel_).
var kernelQueueSpellings = []string{"kq", "kernelq", "kernel_queue", "kernel"}

// drmFigureLines renders the DRM figures for the summary: each user-queue figure beside its
// kernel-queue twin with their ratio (user queue over kernel queue: the target is ≥ 2×
// for throughput and ≤ 0.5× for latency), then every figure without a twin as it is.
func drmFigureLines(figs []perfFigure) []string {
	byName := map[string]int{}
	for i, f := range figs {
		byName[f.Name] = i
	}
	paired := map[int]bool{}
	var lines []string
	for i, f := range figs {
		if paired[i] || !strings.Contains("_"+f.Name+"_", "_userq_") {
			continue
		}
		for _, k := range kernelQueueSpellings {
			twin := strings.TrimPrefix(strings.ReplaceAll("_"+f.Name+"_", "_userq_", "_"+k+"_"), "_")
			twin = strings.TrimSuffix(twin, "_")
			j, ok := byName[twin]
			if !ok || paired[j] || j == i {
				continue
			}
			paired[i], paired[j] = true, true
			kq := figs[j]
			metric := strings.Trim(strings.ReplaceAll("_"+f.Name+"_", "_userq_", "_"), "_")
			line := fmt.Sprintf("%-22s userq %s, kernel queue %s", metric, fmtFigure(f), fmtFigure(kq))
			if kq.Value > 0 && f.Unit == kq.Unit {
				r := f.Value / kq.Value
				line += fmt.Sprintf(": %.2f×", r)
				switch {
				case isRate(f.Unit):
					line += " (target ≥ 2×)"
				case isTime(f.Unit) && strings.Contains(metric, "median"):
					line += " (target ≤ 0.5×)"
				}
			}
			lines = append(lines, line)
			break
		}
	}
	for i, f := range figs {
		if !paired[i] {
			lines = append(lines, fmt.Sprintf("%-22s %s", f.Name, fmtFigure(f)))
		}
	}
	return lines
}

func isRate(unit string) bool {
	return strings.HasSuffix(unit, "/s") || strings.HasSuffix(unit, "_per_s")
}

func isTime(unit string) bool {
	switch unit {
	case "ns", "us", "µs", "ms", "s":
		return true
	}
	return false
}

func fmtFigure(f perfFigure) string {
	v := strconv.FormatFloat(f.Value, 'f', -1, 64)
	if f.Value >= 1000 {
		v = strconv.FormatFloat(f.Value, 'f', 0, 64)
	} else if f.Value != float64(int64(f.Value)) {
		v = strconv.FormatFloat(f.Value, 'f', 2, 64)
	}
	return v + " " + f.Unit
}
