package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"vgpu/ci/boot"
	"vgpu/ci/ktap"
	"vgpu/device"
	"vgpu/images"
)

// TestInjectCases boots the cases of the drivers' recovery paths as `vgpu run` does — the
// KTAP suite's (vgpu_test.ko) and the DRM suite's (vgpu_drm.ko + vgpu-drmtest) — each rule set
// in its own boot, without and with an emulated VT-d; every case must pass. Then once more
// with the inject flag but no rules: each must fail (the fault did not happen), so none passes
// without its injection.
func TestInjectCases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	q := needQEMU(t, ctx)
	src, err := filepath.Abs(filepath.Join("..", "..", "guest"))
	if err != nil {
		t.Fatal(err)
	}
	for _, suite := range []string{images.SuiteKTAP, images.SuiteDRM} {
		t.Run(suite, func(t *testing.T) {
			opts := images.GuestOptions{Suite: suite, Progress: lineWriter{t}}
			if suite == images.SuiteKTAP {
				opts.ModuleSrc = src
			}
			g, err := images.Guest(ctx, opts)
			if err != nil {
				t.Fatalf("the %s suite's image: %v", suite, err)
			}
			var names []string
			for _, c := range injectCases(suite) {
				names = append(names, c.name)
			}
			runBoot := func(t *testing.T, sr suiteRun, iommu bool) *boot.Result {
				bound, extra := suiteBounds(suite, 0)
				if suite == images.SuiteDRM {
					bound, extra = suiteBounds(suite, 5*time.Minute)
				}
				res, err := boot.Run(ctx, boot.Config{QEMU: q, Guest: g, Device: sr.device(device.DefaultConfig()), IOMMU: iommu,
					TestArgs: sr.testArgs, Dir: shortDir(t), Log: lineWriter{t}, Timeout: bound, Append: extra})
				if err != nil {
					t.Fatal(err)
				}
				judgeSuite(suite, res)
				return res
			}
			for _, sr := range suiteBoots(suite, g, names, names) {
				for _, mode := range []struct {
					name  string
					iommu bool
				}{{"no-iommu", false}, {"intel-iommu", true}} {
					t.Run(strings.Join(sr.cases, "+")+"/"+mode.name, func(t *testing.T) {
						res := runBoot(t, sr, mode.iommu)
						sr.judge(res)
						for _, p := range res.Problems {
							t.Errorf("guest run: %s", p)
						}
						ktap.RunTests(t, res.Report)
					})
				}
			}
			t.Run("without-rules", func(t *testing.T) {
				res := runBoot(t, suiteRun{testArgs: suiteTestArgs(suite, names) + injectArg(suite)}, false)
				for _, c := range names {
					var got *ktap.Test
					if res.Report != nil {
						for _, tc := range res.Report.Tests {
							if tc.Name == c {
								got = tc
							}
						}
					}
					if got == nil || got.Result != ktap.Fail {
						t.Errorf("%s without its rules: %+v, want not ok", c, got)
					} else {
						t.Logf("%s without its rules: not ok # %s %s", c, got.Directive, strings.Join(got.Diagnostics, " | "))
					}
				}
			})
		})
	}
}
