package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"vgpu/abi"
	"vgpu/bars"
	"vgpu/device"
	"vgpu/vfiouser"
)

func serve(args []string) error {
	fl := flag.NewFlagSet("serve", flag.ContinueOnError)
	socket := fl.String("socket", "", "path of the vfio-user unix socket to create (required)")
	ctlPath := fl.String("control", "", "path of the control socket for `vgpu status` (owner-only; default: the socket path + \".control\"; \""+controlOff+"\": none)")
	devFlags := addDeviceFlags(fl)
	openTrace := addTraceFlag(fl)
	restore := fl.String("restore", "", "start from a snapshot file (vgpu snapshot save) taken of a server with the same device flags")
	level := fl.String("log-level", "info", "log level: debug, info, warn, error")
	format := fl.String("log-format", "text", "log format: text or json")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *socket == "" {
		return errors.New("--socket is required")
	}
	log, err := newLogger(*level, *format)
	if err != nil {
		return err
	}
	cfg, err := devFlags()
	if err != nil {
		return err
	}
	cfg.Log = log
	if cfg.Trace, err = openTrace(); err != nil {
		return err
	}
	defer closeTrace(cfg.Trace, log) // after dev.Close: the engines' last events are in
	dev, err := device.New(cfg)
	if err != nil {
		return err
	}
	defer dev.Close()
	if err := restoreSnapshot(dev, *restore, log); err != nil {
		return err
	}

	l, err := listen(*socket)
	if err != nil {
		return err
	}
	defer os.Remove(*socket)
	ctlDefault := *ctlPath == ""
	if ctlDefault {
		*ctlPath = *socket + ".control"
	}
	if *ctlPath != controlOff {
		ctl, err := startControl(*ctlPath, dev, log)
		switch {
		case err != nil && ctlDefault:
			// The default must not stop a server that asked for no control socket.
			log.Warn("no control socket", "path", *ctlPath, "err", err)
			*ctlPath = controlOff
		case err != nil:
			return err
		default:
			defer ctl.Close()
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go printDiagnosticsOn(ctx, syscall.SIGUSR1, dev)

	log.Info("ready", "socket", *socket, "control", *ctlPath, "vendor", fmt.Sprintf("%#04x", cfg.VendorID), "device", fmt.Sprintf("%#04x", cfg.DeviceID),
		"vram", cfg.VRAMSize, "bar_window", cfg.VRAMWindow, "doorbell", cfg.Doorbells.String(), "msix_vectors", cfg.MSIXVectors)
	err = vfiouser.NewServer(dev, log, vfiouser.WithTrace(cfg.Trace)).Serve(ctx, l)
	fmt.Fprintf(os.Stderr, "vgpu diagnostics:\n%s", dev.Diagnostics())
	if err != nil && ctx.Err() == nil {
		return err
	}
	log.Info("shut down", "signal", context.Cause(ctx))
	return nil
}

// listen creates the socket. A stale socket file (left by a killed server) is replaced; any
// other kind of file at the path is refused rather than deleted.
func listen(path string) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket; refusing to replace it", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s is in use by a running server", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale socket: %w", err)
		}
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false) // we remove it ourselves, once, at exit
	return l, nil
}

func printDiagnosticsOn(ctx context.Context, sig os.Signal, dev *device.Device) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sig)
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			// The goroutine count lets a test watch for goroutines that outlive the work
			// (resets, disconnects) that should have ended them.
			fmt.Fprintf(os.Stderr, "vgpu diagnostics:\n%sgoroutines: %d\n", dev.Diagnostics(), runtime.NumGoroutine())
		}
	}
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// addDeviceFlags defines the device's flags (shared by serve and run) and returns a function
// that builds the device configuration from them once they are parsed.
func addDeviceFlags(fl *flag.FlagSet) func() (device.Config, error) {
	def := device.DefaultConfig()
	vram := sizeFlag(fl, "vram", def.VRAMSize, "VRAM size (power of two; K/M/G suffixes)")
	window := sizeFlag(fl, "bar-window", def.VRAMWindow, "CPU-visible VRAM: the BAR0 size (power of two, at most --vram)")
	doorbell := fl.String("doorbell", "trap", "doorbell mode: trap (every write is a message) or poll (shared page polled by the server)")
	vendor := idFlag(fl, "vendor-id", abi.PCI_VENDOR_ID, "PCI vendor ID")
	devID := idFlag(fl, "device-id", abi.PCI_DEVICE_ID, "PCI device ID")
	subVendor := idFlag(fl, "subsystem-vendor-id", abi.PCI_SUBSYSTEM_VENDOR_ID, "PCI subsystem vendor ID")
	subID := idFlag(fl, "subsystem-id", abi.PCI_SUBSYSTEM_ID, "PCI subsystem ID")
	vectors := fl.Int("msix-vectors", def.MSIXVectors, fmt.Sprintf("number of MSI-X vectors (1..%d)", abi.REGS_MSIX_MAX_VECTORS))
	cus := fl.Int("compute-units", def.ComputeUnits, "compute units running shader dispatches (1..64)")
	rules := injectFlag(fl)
	return func() (device.Config, error) {
		mode, err := bars.ParseDoorbellMode(*doorbell)
		if err != nil {
			return device.Config{}, err
		}
		if *cus < 1 || *cus > 64 {
			return device.Config{}, fmt.Errorf("--compute-units %d: 1..64", *cus)
		}
		return device.Config{
			VendorID: uint16(*vendor), DeviceID: uint16(*devID),
			SubsystemVendorID: uint16(*subVendor), SubsystemID: uint16(*subID),
			VRAMSize: *vram, VRAMWindow: *window, Doorbells: mode, MSIXVectors: *vectors, ComputeUnits: *cus,
			Inject: *rules,
		}, nil
	}
}

// sizeFlag parses sizes like 1G, 256M, 4096, 1GiB.
func sizeFlag(fl *flag.FlagSet, name string, def uint64, usage string) *uint64 {
	v := def
	fl.Func(name, fmt.Sprintf("%s (default %s)", usage, formatSize(def)), func(s string) error {
		n, err := parseSize(s)
		v = n
		return err
	})
	return &v
}

func parseSize(s string) (uint64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "IB"), "B")
	shift := 0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		case 'T':
			shift = 40
		}
		if shift != 0 {
			t = t[:n-1]
		}
	}
	n, err := strconv.ParseUint(t, 0, 64)
	if err != nil || n > (1<<63)>>shift {
		return 0, fmt.Errorf("size %q: want a number with an optional K, M, G or T suffix", s)
	}
	return n << shift, nil
}

func formatSize(n uint64) string {
	for _, u := range []struct {
		s     string
		shift uint
	}{{"T", 40}, {"G", 30}, {"M", 20}, {"K", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.s)
		}
	}
	return strconv.FormatUint(n, 10)
}

func idFlag(fl *flag.FlagSet, name string, def uint64, usage string) *uint64 {
	v := def
	fl.Func(name, fmt.Sprintf("%s (default %#04x)", usage, def), func(s string) error {
		n, err := strconv.ParseUint(s, 0, 16)
		if err != nil {
			return fmt.Errorf("want a 16-bit number such as 0x1234")
		}
		v = n
		return nil
	})
	return &v
}
