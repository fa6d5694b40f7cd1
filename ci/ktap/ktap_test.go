package ktap

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.ktap")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, in := range files {
		t.Run(filepath.Base(in), func(t *testing.T) {
			f, err := os.Open(in)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got := Parse(f).String()
			golden := strings.TrimSuffix(in, ".ktap") + ".golden"
			if *update {
				os.WriteFile(golden, []byte(got), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("parse of %s:\n%s\nwant:\n%s", in, got, want)
			}
		})
	}
}

func TestVerdicts(t *testing.T) {
	tests := []struct {
		in         string
		wantFailed bool
		problems   int
	}{
		{"KTAP version 1\n1..1\nok 1 a\n", false, 0},
		{"KTAP version 1\n1..1\nnot ok 1 a # reason\n", true, 0},
		{"KTAP version 1\n1..2\nok 1 a\n", true, 1},                                   // missing result
		{"KTAP version 1\nok 1 a\n", true, 1},                                         // missing plan
		{"", true, 1},                                                                 // nothing at all
		{"KTAP version 1\n1..1\nok 1 a # SKIP not selected\n", false, 0},              // skip is not failure
		{"KTAP version 1\n1..2\nok 1 a\nok 3 b\n", true, 1},                           // misnumbered
		{"KTAP version 1\n1..1\n    KTAP version 1\n    1..1\n    ok 1 x\n", true, 2}, // truncated group
	}
	for _, tc := range tests {
		rep := Parse(strings.NewReader(tc.in))
		if rep.Failed() != tc.wantFailed || len(rep.Problems) != tc.problems {
			t.Errorf("Parse(%q): failed=%v problems=%q; want failed=%v, %d problems", tc.in, rep.Failed(), rep.Problems, tc.wantFailed, tc.problems)
		}
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.ktap")
	for _, in := range files {
		b, _ := os.ReadFile(in)
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		rep := Parse(strings.NewReader(s))
		_ = rep.String()
	})
}
