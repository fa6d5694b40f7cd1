// Package ktap writes KTAP version 1 (Documentation/dev-tools/ktap.rst) as vgpu-drmtest
// prints it: the version line and plan first, then per case its "# " diagnostics, on failure
// the reason, and one top-level result line. Performance figures are diagnostics of the form
// "# perf <name> <value> <unit>", which the host collects into the run's summary.
package ktap

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// Writer prints one KTAP document. It is safe for concurrent use (a case's goroutines may log).
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	n      int
	failed int
}

// New prints the header and the plan of n cases.
func New(w io.Writer, n int) *Writer {
	k := &Writer{w: w}
	fmt.Fprintf(w, "KTAP version 1\n1..%d\n", n)
	return k
}

// Diag prints a diagnostic; each line of it becomes a "# " line.
func (k *Writer) Diag(format string, args ...any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.diag(fmt.Sprintf(format, args...))
}

func (k *Writer) diag(s string) {
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		fmt.Fprintf(k.w, "# %s\n", strings.TrimRight(l, " \t"))
	}
}

// Perf prints a figure: "# perf <name> <value> <unit>". Names and units are single words.
func (k *Writer) Perf(name string, value float64, unit string) {
	k.Diag("perf %s %s %s", word(name), strconv.FormatFloat(value, 'f', -1, 64), word(unit))
}

func word(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Join(strings.Fields(s), "_")
}

// Pass prints "ok N name".
func (k *Writer) Pass(name string) { k.result(name, "", "") }

// Fail prints the reason as "# name: reason" lines, then "not ok N name".
func (k *Writer) Fail(name, reason string) {
	if reason == "" {
		reason = "failed (no reason given)"
	}
	k.result(name, reason, "")
}

// Skip prints "ok N name # SKIP reason".
func (k *Writer) Skip(name, reason string) { k.result(name, "", reason) }

func (k *Writer) result(name, failure, skip string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n++
	name = word(name)
	switch {
	case failure != "":
		k.failed++
		k.diag(name + ": " + failure)
		fmt.Fprintf(k.w, "not ok %d %s\n", k.n, name)
	case skip != "":
		fmt.Fprintf(k.w, "ok %d %s # SKIP %s\n", k.n, name, strings.Join(strings.Fields(skip), " "))
	default:
		fmt.Fprintf(k.w, "ok %d %s\n", k.n, name)
	}
}

// Failed is the number of cases that failed so far.
func (k *Writer) Failed() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.failed
}
