package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"vgpu/abi"
	"vgpu/control"
	"vgpu/device"
	"vgpu/pm4"
)

func newTestDevice(t *testing.T) *device.Device {
	t.Helper()
	cfg := device.DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow = 16<<20, 16<<20
	dev, err := device.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// dialTestControl serves dev's control socket and dials it; both close when the test ends.
func dialTestControl(t *testing.T, dev *device.Device) (path string, c *control.Client) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "c.ctl")
	s, err := startControl(path, dev, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if c, err = control.Dial(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return path, c
}

// TestStatusCommand: `vgpu status` against a device's control socket prints the text and the
// JSON form; the socket is owner-only and goes away when the server closes.
func TestStatusCommand(t *testing.T) {
	dev := newTestDevice(t)
	path := filepath.Join(t.TempDir(), "vgpu.sock.control")
	s, err := startControl(path, dev, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket %v %v", fi, err)
	}
	for _, tc := range []struct {
		json bool
		want []string
	}{
		{false, []string{"vgpu status at ", "queues (HQD slots in use)", "mes (scheduler)", "register spins"}},
		{true, []string{`"hqds"`, `"mes"`, `"spins"`, `"unmodelled"`}},
	} {
		var out bytes.Buffer
		if err := printStatus(&out, path, tc.json); err != nil {
			t.Fatalf("json %v: %v", tc.json, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("json %v: output lacks %q:\n%s", tc.json, w, out.String())
			}
		}
		if tc.json && !json.Valid(out.Bytes()) {
			t.Errorf("not JSON:\n%s", out.String())
		}
	}
	c, err := control.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Call("status", map[string]int{"ring": 1}, nil); !errors.Is(err, &control.Error{Code: control.CodeBadArgs}) {
		t.Errorf("status with unknown arguments: %v", err)
	}
	var cmds []string
	if err := c.Call("help", nil, &cmds); err != nil || !strings.Contains(strings.Join(cmds, " "), "status") {
		t.Errorf("help: %v %v", cmds, err)
	}
	s.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket left after Close: %v", err)
	}
}

func TestStatusFlags(t *testing.T) {
	t.Setenv(controlEnv, "")
	if err := status(nil); err == nil || !strings.Contains(err.Error(), "--control is required") {
		t.Errorf("no socket: %v", err)
	}
	if err := status([]string{"--control", filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Error("a missing socket is not an error")
	}
}

// TestStatusPacketDecoder: a stopped queue's packet is shown decoded, then raw; a packet
// longer than the status keeps decodes as truncated rather than failing.
func TestStatusPacketDecoder(t *testing.T) {
	for _, tc := range []struct {
		dws  []uint32
		want []string
	}{
		{pm4.WaitMem(0x1000, 1), []string{"WAIT_REG_MEM", "\n", fmt.Sprintf("%08x", pm4.WaitMem(0x1000, 1)[0])}},
		{[]uint32{pm4.Header(abi.PM4_IT_WRITE_DATA, 40), 1, 2}, []string{"WRITE_DATA", "truncated"}},
	} {
		got := statusPacketDecoder(tc.dws)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%#x: %q lacks %q", tc.dws, got, w)
			}
		}
	}
}

// TestRingCommand: the "ring" command's named errors, and the text of a dump.
func TestRingCommand(t *testing.T) {
	path, c := dialTestControl(t, newTestDevice(t))
	for _, tc := range []struct {
		args any
		code string
	}{
		{nil, control.CodeBadArgs},
		{map[string]int{"slot": 1}, "slot-inactive"},
		{map[string]int{"slot": 64}, "no-such-slot"},
		{map[string]string{"slot": "x"}, control.CodeBadArgs},
	} {
		if err := c.Call("ring", tc.args, nil); !errors.Is(err, &control.Error{Code: tc.code}) {
			t.Errorf("ring %v: %v, want %s", tc.args, err, tc.code)
		}
	}
	if err := printRing(&bytes.Buffer{}, path, 1, false); !errors.Is(err, &control.Error{Code: "slot-inactive"}) {
		t.Errorf("printRing: %v", err)
	}
	// vgpu decode ring --slot asks the same server.
	if err := decodeTo([]string{"ring", "--slot", "1", "--control", path}, nil, &bytes.Buffer{}); !errors.Is(err, &control.Error{Code: "slot-inactive"}) {
		t.Errorf("decode ring --slot: %v", err)
	}
	for _, args := range [][]string{{"ib", "--slot", "1", "--control", path}, {"ring", "--slot", "1", "--control", path, "file.bin"}} {
		if err := decodeTo(args, nil, &bytes.Buffer{}); !errors.Is(err, errDecodeUsage) {
			t.Errorf("decode %v: %v, want a usage error", args, err)
		}
	}
	wait := pm4.WaitMem(0x1000, 1)
	text := ringText(&device.RingDump{Slot: 3, SizeDwords: 1024, Rptr: 1022, Wptr: 1022 + uint64(len(wait)), Start: 1022, Dwords: wait})
	for _, w := range []string{"slot 3:", "0x0003fe: WAIT_REG_MEM", fmt.Sprintf("%d dwords pending", len(wait))} {
		if !strings.Contains(text, w) {
			t.Errorf("ring text lacks %q:\n%s", w, text)
		}
	}
}
