package main

import (
	"encoding/json"
	"fmt"
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
	for _, h := range controlHooks {
		h(s, dev)
	}
	if err := s.Start(path); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return s, nil
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
