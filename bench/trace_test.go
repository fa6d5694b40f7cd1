package bench

import (
	"testing"

	"vgpu/trace"
)

// TestTraceScenariosRun runs the trace-cost scenarios' two sides a few times: each checks its
// results, and the recording side must have recorded.
func TestTraceScenariosRun(t *testing.T) {
	for _, sc := range []struct {
		make func(**trace.Recorder) Scenario
		n    int
	}{{tracePacketScenario, 1000}, {traceIRQScenario, 20}} {
		var rec *trace.Recorder
		s := sc.make(&rec)
		t.Run(s.Name, func(t *testing.T) {
			p, err := s.Setup()
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range []Op{p.Dev, p.Base} {
				r, err := timeOp(op, sc.n)
				if err != nil {
					t.Fatal(err)
				}
				if v := s.Value(r.N, r.T); !(v > 0) {
					t.Fatalf("measured %v %s", v, s.Unit)
				}
			}
			p.Close()
			if events, _ := rec.Written(); events == 0 {
				t.Fatal("the recording rig recorded nothing")
			}
			t.Log(traceNote(rec))
		})
	}
}
