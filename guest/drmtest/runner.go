package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"vgpu/guest/drmtest/ktap"
)

// T is one case's state: its failures (every check that differed, by name) and cleanups.
type T struct {
	name     string
	k        *ktap.Writer
	mu       sync.Mutex
	errs     []string
	skip     string
	cleanups []func()
}

// stop unwinds a case from Fatalf or Skipf.
type stop struct{}

// Errorf records a failure and lets the case go on.
func (t *T) Errorf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, fmt.Sprintf(format, args...))
}

// Fatalf records a failure and ends the case (only from the case's own goroutine).
func (t *T) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	panic(stop{})
}

// Skipf ends the case as skipped.
func (t *T) Skipf(format string, args ...any) {
	t.skip = fmt.Sprintf(format, args...)
	panic(stop{})
}

// Check ends the case when err is not nil, naming what was being done.
func (t *T) Check(err error, what string, args ...any) {
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}

// Logf prints a diagnostic of the case.
func (t *T) Logf(format string, args ...any) {
	t.k.Diag("%s: %s", t.name, fmt.Sprintf(format, args...))
}

// Perf prints a figure.
func (t *T) Perf(name string, v float64, unit string) { t.k.Perf(name, v, unit) }

// Cleanup runs f when the case ends (last registered first).
func (t *T) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

// Failed says whether a check failed so far.
func (t *T) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.errs) > 0
}

func (t *T) run(f func(*T)) {
	defer func() {
		for i := len(t.cleanups) - 1; i >= 0; i-- {
			t.cleanups[i]()
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stop); !ok {
				t.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}
	}()
	f(t)
}

// runSuite runs the selected cases in order. A case that outlives opts.caseLimit (an ioctl
// that never returns) fails, the rest are reported as not run, and the program exits: the
// KTAP document stays complete.
func runSuite(k *ktap.Writer, o *options) {
	for i, name := range o.tests {
		t := &T{name: name, k: k}
		done := make(chan struct{})
		start := time.Now()
		go func() {
			defer close(done)
			t.run(suite[name])
		}()
		select {
		case <-done:
		case <-time.After(o.caseLimit):
			k.Fail(name, fmt.Sprintf("still running after %v; %s", o.caseLimit, strings.Join(t.errors(), "; ")))
			for _, rest := range o.tests[i+1:] {
				k.Fail(rest, "not run: an earlier case never finished")
			}
			os.Exit(0)
		}
		k.Diag("%s: %d ms", name, time.Since(start).Milliseconds())
		switch errs := t.errors(); {
		case len(errs) > 0:
			k.Fail(name, strings.Join(errs, "\n"))
		case t.skip != "":
			k.Skip(name, t.skip)
		default:
			k.Pass(name)
		}
	}
}

func (t *T) errors() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.errs...)
}
