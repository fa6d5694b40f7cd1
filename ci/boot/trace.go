package boot

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"vgpu/device"
	"vgpu/trace"
)

// startTrace opens the boot's timeline when Config.TracePath is set: the device records to it
// (devCfg.Trace), it is the "trace" artefact, and the returned function closes it, after the
// device (Run defers it first), and says on log what it holds. A trace that lost events or
// could not be written is reported there, not as a problem of the guest's run.
func startTrace(path string, devCfg *device.Config, res *Result, log io.Writer) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	rec, err := trace.Create(path, trace.Options{})
	if err != nil {
		return nil, err
	}
	devCfg.Trace = rec
	res.Artefacts["trace"] = path
	return func() {
		err := rec.Close()
		events, bytes := rec.Written()
		fmt.Fprintf(log, "trace: %s: %d events, %d bytes, %d dropped\n", path, events, bytes, rec.Dropped())
		if err != nil {
			fmt.Fprintf(log, "trace: %s: %v\n", path, err)
		}
	}, nil
}
