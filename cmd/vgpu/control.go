package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"vgpu/control"
	"vgpu/device"
)

// controlHooks register further commands on a device's control socket: a file of this
// command that adds commands (fault injection, snapshots) appends its hook in an init
// function, so the parts stay in their own files:
//
//	func init() { controlHooks = append(controlHooks, func(s *control.Server, dev *device.Device) { s.Handle("inject", ...) }) }
var controlHooks []func(s *control.Server, dev *device.Device)

// controlOff is the --control value that turns the socket off.
const controlOff = "off"

// startControl serves dev's control socket at path: the built-in commands (help, status) and
// every hook's. The caller closes the server (which removes the socket).
func startControl(path string, dev *device.Device, log *slog.Logger) (*control.Server, error) {
	s := control.NewServer(log)
	s.Handle("status", func(args json.RawMessage) (any, error) {
		if err := control.DecodeArgs(args, &struct{}{}); err != nil {
			return nil, err
		}
		return dev.Status(), nil
	})
	s.Handle("ring", func(args json.RawMessage) (any, error) {
		var a struct {
			Slot *int `json:"slot"`
		}
		if err := control.DecodeArgs(args, &a); err != nil {
			return nil, err
		}
		if a.Slot == nil {
			return nil, control.Errorf(control.CodeBadArgs, `"slot" is required`)
		}
		r, err := dev.RingDump(*a.Slot)
		if err != nil {
			return nil, control.Errorf(ringErrorCode(err), "%v", err)
		}
		return r, nil
	})
	for _, h := range controlHooks {
		h(s, dev)
	}
	if err := s.Start(path); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return s, nil
}

// ringErrorCode names a RingDump failure for the protocol.
func ringErrorCode(err error) string {
	switch {
	case errors.Is(err, device.ErrNoSuchSlot):
		return "no-such-slot"
	case errors.Is(err, device.ErrSlotInactive):
		return "slot-inactive"
	case errors.Is(err, device.ErrRingNotReadable):
		return "ring-not-readable"
	}
	return control.CodeFailed
}

// runControl is `vgpu run --control PATH`: each boot's device serves the control socket at
// path while its guest runs (nil without --control).
func runControl(path string) func(dev *device.Device) (func(), error) {
	if path == "" {
		return nil
	}
	return func(dev *device.Device) (func(), error) {
		s, err := startControl(path, dev, nil)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "== control socket: %s (vgpu status --control %s)\n", path, path)
		return func() { s.Close() }, nil
	}
}

// callControl runs one command on a server's control socket: the client side of `vgpu status`,
// `inject`, `snapshot` and `decode ring --slot`.
func callControl(path, cmd string, args, out any) error {
	c, err := control.Dial(path)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Call(cmd, args, out)
}

// printJSON writes a command's raw result indented, for --json.
func printJSON(w io.Writer, raw json.RawMessage) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}
