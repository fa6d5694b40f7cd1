package ktap

import (
	"strings"
	"testing"

	cktap "vgpu/ci/ktap"
)

func TestWriter(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(k *Writer)
		want string
	}{
		{"pass", func(k *Writer) { k.Pass("userq_basic") }, "KTAP version 1\n1..1\nok 1 userq_basic\n"},
		{"fail with a two-line reason", func(k *Writer) { k.Fail("vram_bo", "mmap: EPERM expected\ngot 0") },
			"KTAP version 1\n1..1\n# vram_bo: mmap: EPERM expected\n# got 0\nnot ok 1 vram_bo\n"},
		{"fail without a reason", func(k *Writer) { k.Fail("x", "") },
			"KTAP version 1\n1..1\n# x: failed (no reason given)\nnot ok 1 x\n"},
		{"skip", func(k *Writer) { k.Skip("userq_hang", "no\ndriver") }, "KTAP version 1\n1..1\nok 1 userq_hang # SKIP no driver\n"},
		{"diagnostic and perf", func(k *Writer) {
			k.Diag("iommu-mode %s", "on")
			k.Perf("userq_jobs_per_s", 12345.5, "jobs/s")
			k.Perf("kq latency", 3, "")
			k.Pass("perf_userq_vs_kq")
		}, "KTAP version 1\n1..1\n# iommu-mode on\n# perf userq_jobs_per_s 12345.5 jobs/s\n# perf kq_latency 3 -\nok 1 perf_userq_vs_kq\n"},
	} {
		var b strings.Builder
		k := New(&b, 1)
		c.run(k)
		if b.String() != c.want {
			t.Errorf("%s:\n%q\nwant\n%q", c.name, b.String(), c.want)
		}
	}
}

// TestHostParses feeds a document through the host's KTAP parser, which merges it into the
// run's report: numbering, results, the failure reason and the perf lines must survive.
func TestHostParses(t *testing.T) {
	var b strings.Builder
	k := New(&b, 3)
	k.Diag("iommu-mode off")
	k.Pass("a")
	k.Fail("b", "value 1, want 2")
	k.Perf("userq_jobs_per_s", 100, "jobs/s")
	k.Skip("c", "not here")
	r := cktap.Parse(strings.NewReader(b.String()))
	if len(r.Problems) != 0 || r.Plan != 3 || len(r.Tests) != 3 {
		t.Fatalf("parsed %+v from\n%s", r, b.String())
	}
	want := []struct {
		name string
		res  cktap.Result
	}{{"a", cktap.Pass}, {"b", cktap.Fail}, {"c", cktap.Skip}}
	for i, w := range want {
		if got := r.Tests[i]; got.Name != w.name || got.Result != w.res || got.Number != i+1 {
			t.Errorf("test %d: %q %v #%d, want %q %v", i, got.Name, got.Result, got.Number, w.name, w.res)
		}
	}
	if d := r.Tests[1].Diagnostics; len(d) != 1 || d[0] != "b: value 1, want 2" {
		t.Errorf("b's diagnostics %q", d)
	}
	if d := r.Tests[2].Diagnostics; len(d) != 1 || d[0] != "perf userq_jobs_per_s 100 jobs/s" {
		t.Errorf("c's diagnostics %q", d)
	}
	if k.Failed() != 1 {
		t.Errorf("Failed() = %d", k.Failed())
	}
}
