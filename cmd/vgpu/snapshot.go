package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"vgpu/control"
	"vgpu/device"
)

// Snapshots from the command line (docs/snapshot.md): the control socket's "snapshot" command
// saves the device's state to a file the server writes, `vgpu snapshot save FILE` asks for
// one, and `vgpu serve --restore FILE` starts a server from one.

func init() {
	controlHooks = append(controlHooks, func(s *control.Server, dev *device.Device) {
		s.Handle("snapshot", func(args json.RawMessage) (any, error) { return snapshotCommand(dev, args) })
	})
}

// snapshotArgs are the "snapshot" command's arguments.
type snapshotArgs struct {
	Path string `json:"path"` // absolute path of the file to write (replaced if it exists)
}

// snapshotResult is its result.
type snapshotResult struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// Named codes of the snapshot command (beside control's).
const (
	codeSnapshotBusy = "snapshot-busy" // the engines did not reach a packet boundary (device.ErrSnapshotBusy)
	codeSnapshotFile = "snapshot-file" // the file could not be written
)

// maxSnapshotPath bounds the path argument (PATH_MAX).
const maxSnapshotPath = 4096

// snapshotCommand writes dev's snapshot to args.Path: into a temporary file (0600) in the same
// folder, renamed over the path once complete, so a reader never sees half a snapshot.
func snapshotCommand(dev *device.Device, raw json.RawMessage) (any, error) {
	var a snapshotArgs
	if err := control.DecodeArgs(raw, &a); err != nil {
		return nil, err
	}
	switch {
	case a.Path == "":
		return nil, control.Errorf(control.CodeBadArgs, `"path" is required`)
	case len(a.Path) > maxSnapshotPath:
		return nil, control.Errorf(control.CodeBadArgs, "path of %d bytes, at most %d", len(a.Path), maxSnapshotPath)
	case !filepath.IsAbs(a.Path):
		// The server's working folder is not the client's: the client resolves the path.
		return nil, control.Errorf(control.CodeBadArgs, "path %q is not absolute", a.Path)
	}
	f, err := os.CreateTemp(filepath.Dir(a.Path), "."+filepath.Base(a.Path)+".*")
	if err != nil {
		return nil, control.Errorf(codeSnapshotFile, "%v", err)
	}
	tmp := f.Name()
	err = dev.SaveSnapshot(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, a.Path)
	}
	if err != nil {
		os.Remove(tmp)
		if errors.Is(err, device.ErrSnapshotBusy) {
			return nil, control.Errorf(codeSnapshotBusy, "%v", err)
		}
		return nil, control.Errorf(codeSnapshotFile, "%v", err)
	}
	fi, err := os.Stat(a.Path)
	if err != nil {
		return nil, control.Errorf(codeSnapshotFile, "%v", err)
	}
	return snapshotResult{Path: a.Path, Bytes: fi.Size()}, nil
}

// snapshot is `vgpu snapshot [--control PATH] save FILE`.
func snapshot(args []string) error {
	fl := flag.NewFlagSet("snapshot", flag.ContinueOnError)
	path := fl.String("control", os.Getenv(controlEnv), "the server's control socket (default $"+controlEnv+")")
	fl.Usage = func() {
		fmt.Fprintln(fl.Output(), "usage: vgpu snapshot [--control PATH] save FILE\n\nSaves the running server's device state to FILE (written by the server); vgpu serve --restore FILE starts a server from it.")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() != 2 || fl.Arg(0) != "save" {
		fl.Usage()
		return fmt.Errorf("want: save FILE, got %q", fl.Args())
	}
	if *path == "" {
		return errors.New("--control is required (or set $" + controlEnv + ")")
	}
	file, err := filepath.Abs(fl.Arg(1))
	if err != nil {
		return err
	}
	r, err := saveSnapshot(*path, file)
	if err != nil {
		return err
	}
	fmt.Printf("snapshot: %s (%d bytes)\n", r.Path, r.Bytes)
	return nil
}

func saveSnapshot(ctl, file string) (snapshotResult, error) {
	var r snapshotResult
	err := callControl(ctl, "snapshot", snapshotArgs{Path: file}, &r)
	return r, err
}

// restoreSnapshot is `vgpu serve --restore FILE`: the fresh device takes the file's state
// before the server accepts a client.
func restoreSnapshot(dev *device.Device, file string, log *slog.Logger) error {
	if file == "" {
		return nil
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("--restore: %w", err)
	}
	defer f.Close()
	if err := dev.RestoreSnapshot(f); err != nil {
		return fmt.Errorf("--restore %s: %w", file, err)
	}
	if log != nil {
		log.Info("restored", "snapshot", file)
	}
	return nil
}
