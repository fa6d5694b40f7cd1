package browser

import (
	"testing"

	"vgpu/bench"
	"vgpu/trace"
)

// What the workload's trace must show (bench.TimelineWorkload: MES queues on slots 2 and 3, a
// kernel queue in slot 1 dispatching on two CUs).
var (
	wantHQDTracks  = trace.HQDSlots
	wantBusy       = map[string]int{"hqd": 3, "mes": 1, "cu": 2, "transport": 1}
	highlightQuery = "WRITE_DATA"
)

// recordWorkload records bench.TimelineWorkload: a real device driven through vfio-user.
func recordWorkload(t *testing.T, path string) {
	t.Helper()
	r, err := trace.Create(path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	werr := bench.TimelineWorkload(r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if werr != nil {
		t.Fatal(werr)
	}
	if d := r.Dropped(); d != 0 {
		t.Errorf("the recorder dropped %d events", d)
	}
}
