package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/bars"
	"vgpu/device"
	"vgpu/vfiouser"
)

// Some figures need the device in another process, as QEMU sees it: under load, the device's
// goroutines must not compete with the client for the same Go scheduler (a client in the
// server's process would wait for the server's busy goroutines twice: once for the worker,
// once for itself). The bench process re-executes itself as the server: ServeIfChild, called
// first thing by every program that runs these scenarios (`vgpu bench`, the package's
// TestMain), turns that child into a device server on the socket it inherited.

// childEnv names the doorbell mode of the device a child serves; unset in a normal run.
const childEnv = "VGPU_BENCH_SERVER"

// errChildRecursion: this process was started as a child device server but its program did not
// call ServeIfChild first.
var errChildRecursion = errors.New("bench: this process was started as a device server (" + childEnv +
	" is set) but runs the scenarios: its program must call bench.ServeIfChild first")

// childFD is the inherited socket's fd (the first of exec.Cmd.ExtraFiles).
const childFD = 3

// ServeIfChild returns at once, unless this process was started by the bench package as a
// device server: then it serves the device to the client on the inherited socket until the
// client hangs up, and exits.
func ServeIfChild() {
	mode := os.Getenv(childEnv)
	if mode == "" {
		return
	}
	if err := serveChild(mode); err != nil {
		fmt.Fprintf(os.Stderr, "bench device server: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveChild(modeName string) error {
	mode, err := bars.ParseDoorbellMode(modeName)
	if err != nil {
		return err
	}
	dev, err := newDevice(mode, 0)
	if err != nil {
		return err
	}
	defer dev.Close()
	f := os.NewFile(childFD, "bench socket")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("inherited fd %d is a %T, not a unix socket", childFD, c)
	}
	srv := vfiouser.NewServer(dev, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return ignoreHangUp(srv.ServeConn(context.Background(), uc))
}

// ignoreHangUp: the client hanging up is how a child's work ends.
func ignoreHangUp(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// newDevice is the device every rig serves: 256 MiB of VRAM, all of it in the BAR window.
func newDevice(mode bars.DoorbellMode, cus int, opts ...func(*device.Config)) (*device.Device, error) {
	cfg := device.DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow = rigVRAM, rigVRAM
	cfg.Doorbells = mode
	if cus > 0 {
		cfg.ComputeUnits = cus
	}
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, o := range opts {
		o(&cfg)
	}
	return device.New(cfg)
}

// startChild starts this program again as a device server and returns the client's end of
// its socket, and wait, which ends the child (it exits when the client's end is closed; it is
// killed if it has not after a few seconds) and reports how it ended.
func startChild(mode bars.DoorbellMode) (*net.UnixConn, func() error, error) {
	if os.Getenv(childEnv) != "" {
		// A child that ran the scenarios instead of serving: each one would start another.
		return nil, nil, errChildRecursion
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "bench client"), os.NewFile(uintptr(fds[1]), "bench server")
	defer theirs.Close()
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"="+mode.String())
	cmd.ExtraFiles = []*os.File{theirs}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	// No Pdeathsig: it fires when the forking OS thread exits, which a Go thread may do while
	// we live. If we die, the child's socket closes and it exits with its client.
	if err := cmd.Start(); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("start the device server process: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	wait := func() error {
		var err error
		select {
		case err = <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
			err = fmt.Errorf("did not exit after its client hung up")
		}
		if err != nil {
			return fmt.Errorf("device server process: %v: %s", err, bytes.TrimSpace(stderr.Bytes()))
		}
		return nil
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		wait()
		return nil, nil, fmt.Errorf("socketpair end is a %T", c)
	}
	return uc, wait, nil
}
