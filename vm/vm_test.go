package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"vgpu/images"
)

// lineLogger sends each complete line written to it to t.Log.
type lineLogger struct {
	t   testing.TB
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}

var (
	qemuOnce sync.Once
	qemuInst *images.QEMUInstall
	qemuErr  error
	qemuTook time.Duration
)

// testQEMU provisions (or finds) the QEMU once per test binary. It skips only with
// VGPU_SKIP_QEMU=1; a provisioning failure fails the test.
func testQEMU(t *testing.T) *images.QEMUInstall {
	t.Helper()
	if os.Getenv("VGPU_SKIP_QEMU") == "1" {
		t.Skip("VGPU_SKIP_QEMU=1")
	}
	qemuOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		start := time.Now()
		qemuInst, qemuErr = images.QEMU(ctx, images.QEMUOptions{Progress: &lineLogger{t: t}})
		qemuTook = time.Since(start)
	})
	if qemuErr != nil {
		t.Fatalf("provisioning QEMU: %v", qemuErr)
	}
	t.Logf("%s (root %q, system %v), provisioning call took %v", qemuInst.Version().Text, qemuInst.Root, qemuInst.System, qemuTook.Round(time.Millisecond))
	return qemuInst
}

// startVM starts a VM and arranges for its logs to be shown when the test fails.
func startVM(t *testing.T, ctx context.Context, cfg Config) *VM {
	t.Helper()
	inst := testQEMU(t)
	cfg.Log = &lineLogger{t: t}
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = 256
	}
	dir := t.TempDir()
	start := time.Now()
	v, err := Start(ctx, inst, cfg, dir)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("started in %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		v.Close()
		if t.Failed() {
			for _, f := range []string{v.Logs().Stderr, v.Logs().Console, v.Logs().Events} {
				b, _ := os.ReadFile(f)
				t.Logf("--- %s:\n%s", filepath.Base(f), b)
			}
		}
	})
	return v
}

func TestBootNoDevice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now()
	v := startVM(t, ctx, Config{})

	devs, err := v.QueryPCI()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		t.Logf("pci %s", d)
	}
	host, ok := FindPCI(devs, 0x8086, 0x29c0)
	if !ok || host.BDF() != "00:00.0" || host.Class != 0x0600 {
		t.Fatalf("no q35 host bridge 8086:29c0 at 00:00.0: %+v", host)
	}
	for _, d := range devs {
		if d.Vendor == 0x1234 && d.Device == 0x1111 {
			t.Errorf("stdvga present despite -vga none")
		}
	}

	// SeaBIOS prints its banner on the serial console once per boot.
	waitConsole(t, v, "SeaBIOS", 1)
	r0 := time.Now()
	if err := v.SystemReset(); err != nil {
		t.Fatalf("SystemReset: %v", err)
	}
	if st, err := v.Status(); err != nil || st != "running" {
		t.Fatalf("after reset: status %q, %v", st, err)
	}
	waitConsole(t, v, "SeaBIOS", 2)
	t.Logf("system_reset and firmware restart took %v", time.Since(r0).Round(time.Millisecond))
	if _, err := v.QueryPCI(); err != nil {
		t.Fatalf("QueryPCI after reset: %v", err)
	}
	// Still alive a little later: -no-reboot is back in force but nothing reset again.
	time.Sleep(300 * time.Millisecond)
	if v.Exited() {
		t.Fatalf("QEMU exited after system_reset")
	}

	// A QMP error comes back as an error, not a hang.
	if _, err := v.Run("no-such-command", nil); err == nil || !strings.Contains(err.Error(), "no-such-command") {
		t.Errorf("unknown command: %v", err)
	}
	raw, err := v.Run("query-name", nil)
	if err != nil || !json.Valid(raw) {
		t.Errorf("query-name: %s %v", raw, err)
	}

	if err := v.Quit(); err != nil {
		t.Fatalf("Quit: %v", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := v.Wait(wctx); err != nil {
		t.Fatalf("QEMU exit: %v", err)
	}
	if _, err := v.Run("query-status", nil); err == nil {
		t.Errorf("QMP after quit succeeded")
	}
	t.Logf("VM lifetime %v", time.Since(t0).Round(time.Millisecond))
}

func TestBootIOMMU(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now()
	v := startVM(t, ctx, Config{IOMMU: true})
	if !strings.Contains(strings.Join(v.Args, " "), "intel-iommu,caching-mode=on") {
		t.Fatalf("args lack intel-iommu: %v", v.Args)
	}
	devs, err := v.QueryPCI()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := FindPCI(devs, 0x8086, 0x29c0); !ok {
		t.Fatalf("no host bridge: %v", devs)
	}
	waitConsole(t, v, "SeaBIOS", 1)
	raw, err := v.Run("qom-get", map[string]string{"path": "/machine/peripheral-anon/device[0]", "property": "type"})
	if err != nil || string(raw) != `"intel-iommu"` {
		t.Errorf("first anonymous device: %s, %v", raw, err)
	}
	if err := v.Quit(); err != nil {
		t.Fatal(err)
	}
	if err := v.Wait(ctx); err != nil {
		t.Fatalf("exit: %v", err)
	}
	t.Logf("VM lifetime %v", time.Since(t0).Round(time.Millisecond))
}

// TestStartFailure: a vfio-user socket nobody listens on makes QEMU exit at once; Start must
// return promptly with QEMU's message.
func TestStartFailure(t *testing.T) {
	inst := testQEMU(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	t0 := time.Now()
	v, err := Start(ctx, inst, Config{MemoryMiB: 128, VfioUserSocket: filepath.Join(dir, "nobody.sock")}, dir)
	if err == nil {
		v.Close()
		t.Fatal("Start succeeded without a vfio-user server")
	}
	t.Logf("failed as expected after %v: %v", time.Since(t0).Round(time.Millisecond), err)
	if !strings.Contains(err.Error(), "nobody.sock") {
		t.Errorf("error lacks QEMU's message: %v", err)
	}
}

func waitConsole(t *testing.T, v *VM, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Count(v.Console(), s) >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("console has %d × %q, want %d:\n%s", strings.Count(v.Console(), s), s, n, v.Console())
}

// TestContextEndsVM: cancelling Start's context kills QEMU; Wait reports it and Close is a
// no-op afterwards.
func TestContextEndsVM(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := startVM(t, ctx, Config{MemoryMiB: 128})
	t0 := time.Now()
	cancel()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	err := v.Wait(wctx)
	if err == nil || !v.Exited() {
		t.Fatalf("Wait after cancel: %v (exited %v)", err, v.Exited())
	}
	t.Logf("killed by context in %v: %v", time.Since(t0).Round(time.Millisecond), err)
	if _, err := v.Run("query-status", nil); err == nil {
		t.Errorf("QMP on a dead VM succeeded")
	}
	if err := v.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
