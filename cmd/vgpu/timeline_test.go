package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"vgpu/ci/boot"
	"vgpu/timeline"
	"vgpu/trace"
)

// recordTrace records a small trace with the real recorder.
func recordTrace(t *testing.T, path string) {
	t.Helper()
	r, err := trace.Create(path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := r.NewFlow()
	r.FlowStep(trace.TrackTransport, "doorbell", f, trace.U("wptr", 16))
	r.Begin(trace.TrackMES, "MAP_QUEUE")
	r.End(trace.TrackMES)
	r.Begin(trace.HQD(1), "INDIRECT_BUFFER")
	r.Begin(trace.HQD(1), "RELEASE_MEM")
	r.FlowStep(trace.HQD(1), "fence", f)
	r.End(trace.HQD(1))
	r.End(trace.HQD(1))
	r.FlowEnd(trace.TrackIH, "IV", f)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestTimelineCommand(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "run.pftrace")
	recordTrace(t, tr)

	// Default output: the trace's name with .html.
	if err := timelineCmd([]string{tr}); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "run.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`data-track="HQD 1" data-kind="hqd" data-slices="2"`, `data-track="MES" data-kind="mes" data-slices="1"`,
		`data-track="IH ring"`, `data-track="transport"`, "<td>doorbell</td><td>fence</td><td>1</td>"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}

	// -o after the trace's name, and other flags.
	out := filepath.Join(dir, "other.html")
	if err := timelineCmd([]string{tr, "-o", out, "-title", "my run"}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), "<h1>my run</h1>") {
		t.Errorf("-o after the trace: %v", err)
	}

	garbage := filepath.Join(dir, "garbage.pftrace")
	os.WriteFile(garbage, []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want error
	}{
		{"help", []string{"-h"}, flag.ErrHelp},
		{"no trace", nil, nil},
		{"missing file", []string{filepath.Join(dir, "nope.pftrace")}, os.ErrNotExist},
		{"not a trace", []string{garbage}, timeline.ErrNotATrace},
		{"two traces", []string{tr, tr}, nil},
		{"page over the trace", []string{tr, "-o", tr}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := timelineCmd(tc.args)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("vgpu timeline %q: %v, want %v", tc.args, err, tc.want)
			}
		})
	}
	if b, err := os.ReadFile(tr); err != nil || len(b) == 0 || strings.Contains(string(b), "<html") {
		t.Errorf("the trace was damaged: %v", err)
	}
}

// TestWriteTimeline: vgpu run writes the page beside each boot's trace.
func TestWriteTimeline(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "ktap-no-IOMMU.pftrace")
	recordTrace(t, tr)
	var out bytes.Buffer
	writeTimeline(&out, &boot.Result{Artefacts: map[string]string{"trace": tr}})
	page := filepath.Join(dir, "ktap-no-IOMMU.html")
	if b, err := os.ReadFile(page); err != nil || !bytes.Contains(b, []byte(`data-kind="hqd"`)) {
		t.Fatalf("page: %v", err)
	}
	if !strings.Contains(out.String(), "== timeline: "+page) {
		t.Errorf("output %q does not name the page", out.String())
	}

	out.Reset()
	os.WriteFile(tr, []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"), 0o644)
	writeTimeline(&out, &boot.Result{Artefacts: map[string]string{"trace": tr}})
	if !strings.Contains(out.String(), "not written") {
		t.Errorf("a broken trace: output %q", out.String())
	}
	out.Reset()
	writeTimeline(&out, &boot.Result{Artefacts: map[string]string{}})
	if out.Len() != 0 {
		t.Errorf("no trace: output %q", out.String())
	}
}
