package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"vgpu/abi"
	"vgpu/control"
	"vgpu/device"
	"vgpu/vfiouser/vfiousertest"
)

// TestSnapshotCommand: the control socket's "snapshot" command writes a file (owner-only)
// that `vgpu serve --restore` (restoreSnapshot) puts into a fresh device; bad paths are named
// errors.
func TestSnapshotCommand(t *testing.T) {
	dev := newTestDevice(t)
	c := vfiousertest.NewPair(t, dev)
	var b [4]byte
	if err := c.Write(7, 4, []byte{2, 0}); err != nil { // COMMAND.Memory Space
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(b[:], 0xFEED)
	if err := c.Write(abi.BAR_REGS, abi.REG_SCRATCH_2, b[:]); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "vgpu.sock.control")
	s, err := startControl(path, dev, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	file := filepath.Join(dir, "state.vgpusnap")
	r, err := saveSnapshot(path, file)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Size() != r.Bytes || fi.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot file %v %v, result %+v", fi, err, r)
	}
	for _, tc := range []struct {
		file string
		code string
	}{
		{"relative.vgpusnap", control.CodeBadArgs},
		{"", control.CodeBadArgs},
		{filepath.Join(dir, "no-such-folder", "x"), codeSnapshotFile},
	} {
		if _, err := saveSnapshot(path, tc.file); !errors.Is(err, &control.Error{Code: tc.code}) {
			t.Errorf("snapshot %q: %v, want code %s", tc.file, err, tc.code)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	dev2 := newTestDevice(t)
	if err := restoreSnapshot(dev2, file, nil); err != nil {
		t.Fatal(err)
	}
	// The restored state is inspectable before any client attaches.
	ctl2 := filepath.Join(dir, "vgpu2.sock.control")
	s2, err := startControl(ctl2, dev2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var st bytes.Buffer
	if err := printStatus(&st, ctl2, true); err != nil || !strings.Contains(st.String(), `"hqds"`) {
		t.Errorf("status of the restored server: %v\n%s", err, st.String())
	}
	c2 := vfiousertest.NewPair(t, dev2)
	if err := c2.Read(abi.BAR_REGS, abi.REG_SCRATCH_2, b[:]); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint32(b[:]); got != 0xFEED {
		t.Errorf("restored SCRATCH_2 = %#x", got)
	}
	cfg := device.DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow = 32<<20, 16<<20
	other, err := device.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := restoreSnapshot(other, file, nil); !errors.Is(err, device.ErrSnapshotConfig) {
		t.Errorf("restore into another configuration: %v", err)
	}
}

func TestSnapshotFlags(t *testing.T) {
	t.Setenv(controlEnv, "")
	for _, args := range [][]string{nil, {"load", "x"}, {"save"}} {
		if err := snapshot(args); err == nil || !strings.Contains(err.Error(), "want: save FILE") {
			t.Errorf("%q: %v", args, err)
		}
	}
	if err := snapshot([]string{"save", "x"}); err == nil || !strings.Contains(err.Error(), "--control is required") {
		t.Errorf("no socket: %v", err)
	}
}
