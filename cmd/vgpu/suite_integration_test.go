package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"vgpu/ci/boot"
	"vgpu/ci/ktap"
	"vgpu/device"
	"vgpu/images"
)

// lineWriter sends progress lines to the test log.
type lineWriter struct{ t *testing.T }

func (w lineWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func needQEMU(t *testing.T, ctx context.Context) *images.QEMUInstall {
	t.Helper()
	if testing.Short() {
		t.Skip("boots QEMU; skipped with -short")
	}
	if os.Getenv("VGPU_SKIP_QEMU") == "1" {
		t.Skip("VGPU_SKIP_QEMU=1")
	}
	q, err := images.QEMU(ctx, images.QEMUOptions{Progress: lineWriter{t}})
	if err != nil {
		t.Fatalf("provisioning QEMU: %v", err)
	}
	return q
}

// shortDir is a folder for a boot's sockets: unix socket paths are limited to 108 bytes, and
// t.TempDir's can be longer.
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "vgpu-suite-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestDRMSuite boots the DRM suite as `vgpu run --suite drm` does — the generic kernel, its
// DRM modules, vgpu_drm.ko and vgpu-drmtest from this checkout — without and with an emulated
// VT-d, and turns every KTAP case of the program into a Go subtest. (The KTAP suite boots in
// ./ci's TestGuestSuite.)
func TestDRMSuite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*drmTimeout+5*time.Minute)
	defer cancel()
	q := needQEMU(t, ctx)
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "guest", "drm", "Kbuild")); err != nil {
		t.Skip("no DRM driver in this checkout yet (guest/drm/Kbuild); images' TestGuestDRMSuiteBoot covers the boot path with a stand-in")
	}
	if m, _ := filepath.Glob(filepath.Join(root, "guest", "drmtest", "*.go")); len(m) == 0 {
		t.Skip("no DRM suite program in this checkout yet (guest/drmtest); images' TestGuestDRMSuiteBoot covers the boot path with a stand-in")
	}
	g, err := images.Guest(ctx, images.GuestOptions{Suite: images.SuiteDRM, Progress: lineWriter{t}})
	if err != nil {
		t.Fatalf("the DRM suite's image: %v", err)
	}
	for _, tc := range []struct {
		name  string
		iommu bool
	}{{"no-iommu", false}, {"intel-iommu", true}} {
		t.Run(tc.name, func(t *testing.T) {
			// Within go test's -timeout (10 min by default): each boot gets at most half of
			// what is left, so a slow run fails with the guest's report, not a panic.
			limit := drmTimeout
			if d, ok := t.Deadline(); ok {
				limit = min(limit, time.Until(d)/2-30*time.Second)
			}
			bound, extra := suiteBounds(images.SuiteDRM, max(limit, 2*time.Minute))
			res, err := boot.Run(ctx, boot.Config{QEMU: q, Guest: g, Device: device.DefaultConfig(), IOMMU: tc.iommu,
				Dir: shortDir(t), Log: lineWriter{t}, Timeout: bound, Append: extra})
			if err != nil {
				t.Fatal(err)
			}
			judgeSuite(images.SuiteDRM, res)
			var b bytes.Buffer
			printSuiteSummary(&b, images.SuiteDRM, tc.name, res)
			t.Logf("summary:\n%s", b.String())
			if res.Failed() {
				for name, p := range res.Artefacts {
					if data, err := os.ReadFile(p); err == nil {
						lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
						t.Logf("--- %s, last lines:\n%s", name, strings.Join(lines[max(0, len(lines)-60):], "\n"))
					}
				}
			}
			for _, p := range res.Problems {
				t.Errorf("guest run: %s", p)
			}
			if figs, problems := parsePerf(res.Report); len(problems) > 0 {
				t.Errorf("perf lines: %v", problems)
			} else if len(figs) == 0 && len(res.Report.Tests) > 0 {
				t.Logf("no perf figures in this run")
			}
			ktap.RunTests(t, res.Report)
		})
	}
}

// TestGenericUserRun is `vgpu run --flavour generic --module drm_buddy --run ...`: a user run on
// the generic kernel, its module with the dependency from the kernel's tree.
func TestGenericUserRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	q := needQEMU(t, ctx)
	opts := images.GuestOptions{Progress: lineWriter{t}, Flavour: images.FlavourGeneric}
	img, plan, user, err := userPlan(ctx, opts, "", []moduleArg{{name: "drm_buddy"}}, []string{"grep -E '^(drm|drm_buddy) ' /proc/modules", "uname -r"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if plan == nil || user != "--module" || img.Flavour != images.FlavourGeneric {
		t.Fatalf("plan %+v (%s), image flavour %s", plan, user, img.Flavour)
	}
	if len(plan.Modules) != 2 || plan.Modules[0].Name != "drm" || !plan.Modules[0].Dependency || plan.Modules[1].Name != "drm_buddy" {
		t.Errorf("modules %+v", plan.Modules)
	}
	res, err := boot.Run(ctx, boot.Config{QEMU: q, Guest: img, Device: device.DefaultConfig(), Plan: plan, Dir: shortDir(t), Log: lineWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	printUserSummary(&b, "no IOMMU", res)
	t.Logf("summary:\n%s", b.String())
	if res.Failed() {
		t.Errorf("problems: %v", res.Problems)
	}
	if len(res.User.Runs) != 2 {
		t.Fatalf("runs %+v", res.User.Runs)
	}
	out := strings.Join(res.User.Runs[0].Output, "\n")
	if !strings.Contains(out, "drm_buddy ") || !strings.Contains(out, "\ndrm ") && !strings.HasPrefix(out, "drm ") {
		t.Errorf("/proc/modules: %q", out)
	}
	if got := strings.Join(res.User.Runs[1].Output, ""); got != img.KernelRelease || !strings.HasSuffix(got, "-amd64") || strings.Contains(got, "cloud") {
		t.Errorf("uname -r %q, image %s", got, img.KernelRelease)
	}
}
