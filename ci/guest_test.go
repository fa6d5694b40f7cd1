package ci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"vgpu/bars"
	"vgpu/ci/boot"
	"vgpu/ci/ktap"
	"vgpu/device"
	"vgpu/images"
)

// needGuest builds (or reuses) the guest image: kernel, module, initramfs.
func needGuest(t *testing.T) *images.GuestImage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	src, _ := filepath.Abs("../guest")
	g, err := images.Guest(ctx, images.GuestOptions{Progress: testWriter{t}, ModuleSrc: src})
	if err != nil {
		t.Fatalf("building the guest image: %v", err)
	}
	t.Logf("guest image ready in %v (kernel %s)", time.Since(start).Round(time.Millisecond), g.KernelRelease)
	return g
}

// TestGuestSuite boots a real Linux guest against the device — without and with an emulated
// VT-d, and once more with polled doorbells — and turns every KTAP case the guest module
// prints into a Go subtest.
func TestGuestSuite(t *testing.T) {
	inst := needQEMU(t)
	guest := needGuest(t)
	total := time.Now()
	for _, tc := range []struct {
		name     string
		iommu    bool
		doorbell bars.DoorbellMode
	}{
		{"no-iommu", false, bars.DoorbellTrap},
		{"intel-iommu", true, bars.DoorbellTrap},
		{"poll-doorbells", false, bars.DoorbellPoll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dev := device.DefaultConfig()
			dev.Doorbells = tc.doorbell
			res, err := boot.Run(context.Background(), boot.Config{
				QEMU: inst, Guest: guest, Device: dev, IOMMU: tc.iommu, TestArgs: raceGuestArgs,
				Dir: dir, Log: testWriter{t},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("boot wall time: %v", res.Wall.Round(time.Millisecond))
			for _, l := range res.Figures.Lines() {
				t.Logf("guest figure: %s", l)
			}
			if res.Failed() {
				saveArtefacts(t, res)
			}
			for _, p := range res.Problems {
				t.Errorf("guest run: %s", p)
			}
			ktap.RunTests(t, res.Report)
		})
	}
	t.Logf("guest suite wall time (all boots): %v", time.Since(total).Round(time.Millisecond))
}

// saveArtefacts copies the run's logs where CI keeps them ($VGPU_ARTEFACTS) and prints the
// interesting tails into the test log.
func saveArtefacts(t *testing.T, res *boot.Result) {
	t.Helper()
	keep := os.Getenv("VGPU_ARTEFACTS")
	for name, path := range res.Artefacts {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if keep != "" {
			dst := filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_")+"-"+filepath.Base(path))
			os.MkdirAll(keep, 0o755)
			os.WriteFile(dst, b, 0o644)
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		t.Logf("--- %s (%s), last %d lines:\n%s", name, path, len(lines), strings.Join(lines, "\n"))
	}
	t.Log(fmt.Sprintf("device diagnostics:\n%s", res.Diagnostics))
}
