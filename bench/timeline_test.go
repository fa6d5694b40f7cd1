package bench

import (
	"path/filepath"
	"testing"

	"vgpu/timeline"
	"vgpu/trace"
)

// TestTimelineWorkload: the workload runs (its own checks: every job, fence and work-item) and
// its trace shows what docs/timeline.md's picture is for: the scheduler adding, mapping,
// unmapping and removing queues, three slots at work, dispatches on both CUs, and the kernel
// queue's doorbell → fence → IV flows.
func TestTimelineWorkload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "workload.pftrace")
	rec, err := trace.Create(path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	werr := TimelineWorkload(rec)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if werr != nil {
		t.Fatal(werr)
	}
	m, err := timeline.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]map[string]int{}
	busy := map[timeline.Kind]int{}
	for _, tr := range m.Tracks {
		names[tr.Name] = map[string]int{}
		for _, s := range tr.Slices {
			names[tr.Name][s.Name]++
		}
		for _, i := range tr.Instants {
			names[tr.Name][i.Name]++
		}
		if len(tr.Slices) > 0 {
			busy[tr.Kind]++
		}
	}
	for _, want := range []struct{ track, name string }{
		// Three queues with work on two slots: at least one must be unmapped for another.
		{"MES", "ADD_QUEUE"}, {"MES", "MAP"}, {"MES", "UNMAP"}, {"MES", "REMOVE_QUEUE"}, {"HQD 1", "DISPATCH_DIRECT"}, {"CU 0", "workgroup"}, {"CU 1", "workgroup"},
	} {
		if names[want.track][want.name] == 0 {
			t.Errorf("no %q on %q: %v", want.name, want.track, names[want.track])
		}
	}
	if busy[timeline.KindHQD] != 3 {
		t.Errorf("%d HQD slots with slices, want 3 (the kernel queue's and the scheduler's two)", busy[timeline.KindHQD])
	}
	flows := 0
	for _, l := range m.Latencies() {
		if l.From == "doorbell" && l.To == "IV" && l.Whole {
			flows = l.Count
		}
	}
	if flows < tlRounds {
		t.Errorf("%d whole doorbell → IV flows, want at least %d (one per dispatch)", flows, tlRounds)
	}
}
