package main

import (
	"errors"
	"flag"
	"fmt"
	"testing"
)

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"success", nil, 0},
		{"help asked", flag.ErrHelp, 0},
		{"help from a wrapped parse", fmt.Errorf("run: %w", flag.ErrHelp), 0},
		{"tests failed", errTestsFailed, 1},
		{"other error", errors.New("boom"), 1},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("%s: exitCode(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
}

// Every subcommand's -h returns flag.ErrHelp (so the process exits 0), not another error.
func TestSubcommandHelp(t *testing.T) {
	for name, cmd := range map[string]func([]string) error{
		"run": run, "serve": serve, "bench": runBench, "qemu": provisionQEMU,
	} {
		if err := cmd([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("vgpu %s -h: %v, want flag.ErrHelp", name, err)
		}
	}
}
