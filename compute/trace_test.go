package compute

import (
	"bytes"
	"testing"

	"vgpu/trace"
)

// TestTraceWorkgroups: a traced dispatch puts one "workgroup" slice per workgroup on the CU
// tracks, each annotated with the run, balanced.
func TestTraceWorkgroups(t *testing.T) {
	var buf bytes.Buffer
	rec := trace.New(&buf, trace.Options{})
	p, mem, _ := newPool(t, Config{CUs: 4, Parallel: 2})
	p.SetTrace(rec) // before Start: a CU reads it only after claiming work Start queued
	setArgs(mem)
	const groups = 16
	r, err := p.Start(Dispatch{Program: build(t, vectorAdd()), Groups: [3]uint32{groups, 1, 1}, GroupSize: [3]uint32{64, 1, 1},
		Args: argsVA, VMID: 1, Slot: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err, _ := wait(t, r); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	tl, err := trace.Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if tl.Unmatched != 0 || tl.Unfinished != 0 {
		t.Errorf("unbalanced: %d unmatched, %d unfinished", tl.Unmatched, tl.Unfinished)
	}
	cus := map[uint64]bool{}
	for _, tk := range tl.Tracks {
		if len(tk.Name) > 3 && tk.Name[:3] == "CU " {
			cus[tk.UUID] = true
		}
	}
	seen := map[uint64]bool{}
	for _, s := range tl.Slices {
		if s.Name != "workgroup" || !cus[s.Track] || s.Depth != 0 {
			t.Errorf("slice %q at depth %d on track %d", s.Name, s.Depth, s.Track)
			continue
		}
		run, _ := s.Arg("run")
		g, _ := s.Arg("group")
		end, _ := s.Arg("end")
		if run.Val != r.ID() || end.String() != "done" {
			t.Errorf("workgroup %d: run %d (want %d), end %q", g.Val, run.Val, r.ID(), end.String())
		}
		seen[g.Val] = true
	}
	if len(seen) != groups {
		t.Errorf("%d workgroups traced, want %d", len(seen), groups)
	}
}
