package vfiouser_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

// listen starts Serve on a socket in a temporary directory and stops it at cleanup.
func listen(t *testing.T, dev vfiouser.Device) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vgpu.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- vfiouser.NewServer(dev, nil).Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Serve = %v, want context.Canceled", err)
			}
		case <-time.After(waitLong):
			t.Error("Serve did not return")
		}
	})
	return path
}

func dial(t *testing.T, path string) *vfiousertest.Client {
	t.Helper()
	c, err := vfiousertest.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestServeRefusesSecondClient(t *testing.T) {
	dev := newTestDevice(t)
	path := listen(t, dev)
	first := dial(t, path)
	if _, err := first.Negotiate(); err != nil {
		t.Fatal(err)
	}
	second := dial(t, path)
	wantDisconnect(t, second)
	if err := first.Sync(); err != nil {
		t.Fatalf("first client broken by the second: %v", err)
	}
	if n, m := dev.counts(); n != 1 || m != 0 {
		t.Fatalf("Connected/Disconnected = %d/%d, want 1/0", n, m)
	}
}

// TestServeReconnect plays a QEMU restart: the first client maps memory and installs eventfds,
// goes away, the device drops them, and a second client is served from scratch.
func TestServeReconnect(t *testing.T) {
	dev := newTestDevice(t)
	path := listen(t, dev)
	baseline := openFDs(t)

	first := dial(t, path)
	if _, err := first.Negotiate(); err != nil {
		t.Fatal(err)
	}
	mem, err := vfiousertest.NewGuestMemory(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.DMAMap(0, mem, 0, 1<<16, vfiousertest.MapOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.EnableMSIX(4); err != nil {
		t.Fatal(err)
	}
	if err := first.Write(regTrap, 0, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	first.Close()
	mem.Close()
	select {
	case <-dev.disconnectCh:
	case <-time.After(waitLong):
		t.Fatal("Disconnected not called")
	}
	waitFDs(t, baseline) // the device and the server let go of every fd

	second := dial(t, path)
	if _, err := second.Negotiate(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if err := second.Read(regTrap, 0, got); err != nil || string(got) != "kept" {
		t.Fatalf("device state after reconnect = %q, %v", got, err)
	}
	if n, m := dev.counts(); n != 2 || m != 1 {
		t.Fatalf("Connected/Disconnected = %d/%d, want 2/1", n, m)
	}
}

func TestServeConnBusy(t *testing.T) {
	dev := newTestDevice(t)
	srv := vfiouser.NewServer(dev, nil)
	a, aPeer, err := vfiousertest.Socketpair()
	if err != nil {
		t.Fatal(err)
	}
	defer aPeer.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeConn(ctx, a) }()

	// Once the first connection is being served, a second one is refused.
	c, err := vfiousertest.NewClient(aPeer)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Negotiate(); err != nil {
		t.Fatal(err)
	}
	b, bPeer, err := vfiousertest.Socketpair()
	if err != nil {
		t.Fatal(err)
	}
	defer bPeer.Close()
	if err := srv.ServeConn(ctx, b); !errors.Is(err, vfiouser.ErrBusy) {
		t.Fatalf("second ServeConn = %v, want ErrBusy", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeConn after cancel = %v", err)
	}
}
