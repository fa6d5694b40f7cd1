package ktap

import (
	"strings"
	"testing"
)

// RunTests turns a report into Go subtests: one t.Run per KTAP case, nested names kept, so
// `go test -v` shows the guest's cases. Problems with the document itself (no plan, missing
// results, truncated output) fail t.
func RunTests(t *testing.T, rep *Report) {
	t.Helper()
	runLevel(t, rep.Tests)
	for _, p := range rep.Problems {
		t.Errorf("KTAP: %s", p)
	}
}

func runLevel(t *testing.T, tests []*Test) {
	for _, tc := range tests {
		name := tc.Name
		if name == "" {
			name = "unnamed"
		}
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			for _, d := range tc.Diagnostics {
				t.Log(d)
			}
			runLevel(t, tc.Subtests)
			switch tc.Result {
			case Fail:
				t.Errorf("guest: not ok %d %s # %s", tc.Number, tc.Name, tc.Directive)
			case Skip:
				t.Skipf("guest: %s", tc.Directive)
			}
		})
	}
}
