package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"vgpu/ci/boot"
	"vgpu/timeline"
)

// timelineCmd is `vgpu timeline TRACE [-o OUT.html]`: the trace drawn as one self-contained
// HTML page (package timeline).
func timelineCmd(args []string) error {
	fl := flag.NewFlagSet("timeline", flag.ContinueOnError)
	out := fl.String("o", "", "the page to write (default: TRACE with .html for its extension)")
	title := fl.String("title", "", "the page's heading (default \"vgpu timeline\")")
	width := fl.Int("width", 0, "pixels of the time axis (default 940)")
	maxElems := fl.Int("max-elements", 0, "bars and marks drawn at most; closer ones are merged (default 10000)")
	fl.Usage = func() {
		fmt.Fprintf(fl.Output(), "usage: vgpu timeline TRACE [-o OUT.html]\n\n"+
			"Draws a Perfetto trace (vgpu serve --trace, vgpu run --trace) as one self-contained HTML page.\n\n")
		fl.PrintDefaults()
	}
	// Flags may come before or after the trace's name.
	if err := fl.Parse(args); err != nil {
		return err
	}
	rest := fl.Args()
	if len(rest) == 0 {
		fl.Usage()
		return errors.New("the trace file is missing")
	}
	path := rest[0]
	if err := fl.Parse(rest[1:]); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (one trace at a time)", fl.Args())
	}
	if *out == "" {
		*out = strings.TrimSuffix(path, filepath.Ext(path)) + ".html"
	}
	if *out == path {
		return fmt.Errorf("the page would overwrite the trace %s; name it with -o", path)
	}
	m, err := timeline.ReadFile(path)
	if err != nil {
		return err
	}
	o := timeline.Options{Title: *title, Source: filepath.Base(path), Width: *width, MaxElements: *maxElems}
	if err := timeline.WriteHTML(*out, m, o); err != nil {
		return err
	}
	slices := 0
	for _, t := range m.Tracks {
		slices += len(t.Slices)
	}
	fi, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d bytes): %d tracks, %d slices, %d flows over %v\n", *out, fi.Size(), len(m.Tracks), slices, len(m.Flows), roundSpan(m.Span()))
	return nil
}

// roundSpan keeps about four significant digits of a trace's span.
func roundSpan(d time.Duration) time.Duration {
	for unit := time.Second; unit > time.Microsecond; unit /= 1000 {
		if d >= unit {
			return d.Round(unit / 1000)
		}
	}
	return d
}

// writeTimeline draws a boot's trace (vgpu run --trace) as the page beside it,
// DIR/<suite>-<IOMMU mode>.html, and names it. A page that cannot be made is reported and
// does not fail the run: the trace itself is there.
func writeTimeline(w io.Writer, res *boot.Result) {
	path := res.Artefacts["trace"]
	if path == "" {
		return
	}
	page := strings.TrimSuffix(path, filepath.Ext(path)) + ".html"
	if err := timeline.WriteFile(path, page); err != nil {
		fmt.Fprintf(w, "== timeline: not written: %v\n", err)
		return
	}
	if fi, err := os.Stat(page); err == nil {
		fmt.Fprintf(w, "== timeline: %s (%d bytes; open it in a browser)\n", page, fi.Size())
	}
}
