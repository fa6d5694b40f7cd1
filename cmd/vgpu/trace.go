package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"vgpu/ci/boot"
	"vgpu/trace"
)

// addTraceFlag defines serve's --trace FILE; the returned function opens the recorder once
// the flags are parsed (nil when --trace is not given: recording off).
func addTraceFlag(fl *flag.FlagSet) func() (*trace.Recorder, error) {
	path := fl.String("trace", "", "record a timeline of the device to this file, in Perfetto's trace format (open it in ui.perfetto.dev; docs/trace.md)")
	return func() (*trace.Recorder, error) {
		if *path == "" {
			return nil, nil
		}
		return trace.Create(*path, trace.Options{})
	}
}

// closeTrace closes serve's recorder (after the device) and logs what the file holds.
func closeTrace(rec *trace.Recorder, log *slog.Logger) {
	if rec == nil {
		return
	}
	err := rec.Close()
	events, bytes := rec.Written()
	if err != nil {
		log.Error("trace not complete", "err", err)
	}
	log.Info("trace written", "events", events, "bytes", bytes, "dropped", rec.Dropped())
}

// addRunTraceFlag defines run's --trace DIR; the returned function names the file of one
// boot: DIR/<suite>-<IOMMU mode>.pftrace ("" without --trace).
func addRunTraceFlag(fl *flag.FlagSet) func(suite, mode string) string {
	dir := fl.String("trace", "", "record each guest boot's timeline in this folder, one Perfetto trace per boot named after suite and IOMMU mode (docs/trace.md)")
	return func(suite, mode string) string {
		if *dir == "" {
			return ""
		}
		if suite == "" {
			suite = "user"
		}
		return filepath.Join(*dir, suite+"-"+strings.ReplaceAll(mode, " ", "-")+".pftrace")
	}
}

// printTrace names a boot's trace file and its size.
func printTrace(w io.Writer, res *boot.Result) {
	path := res.Artefacts["trace"]
	if path == "" {
		return
	}
	if fi, err := os.Stat(path); err == nil {
		fmt.Fprintf(w, "== trace: %s (%d bytes)\n", path, fi.Size())
	}
}
