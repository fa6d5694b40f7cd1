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

// TestInjectCases boots the vgpu_test cases of the drivers' recovery paths as `vgpu run` does:
// each rule set in its own boot, without and with an emulated VT-d; every case must pass. Then
// once more with inject_rules=1 but no rules: each must fail (the fault did not happen), so
// none passes without its injection.
func TestInjectCases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	q := needQEMU(t, ctx)
	src, err := filepath.Abs(filepath.Join("..", "..", "guest"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := images.Guest(ctx, images.GuestOptions{Suite: images.SuiteKTAP, ModuleSrc: src, Progress: lineWriter{t}})
	if err != nil {
		t.Fatalf("the KTAP suite's image: %v", err)
	}
	var names []string
	for _, c := range ktapInjectCases {
		names = append(names, c.name)
	}
	runBoot := func(t *testing.T, sr suiteRun, iommu bool) *boot.Result {
		res, err := boot.Run(ctx, boot.Config{QEMU: q, Guest: g, Device: sr.device(device.DefaultConfig()), IOMMU: iommu,
			TestArgs: sr.testArgs, Dir: shortDir(t), Log: lineWriter{t}, Timeout: boot.DefaultTimeout})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, sr := range suiteBoots(images.SuiteKTAP, g, names, names) {
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
		res := runBoot(t, suiteRun{testArgs: suiteTestArgs(images.SuiteKTAP, names) + " inject_rules=1"}, false)
		for _, c := range names {
			var got *ktap.Test
			for _, tc := range res.Report.Tests {
				if tc.Name == c {
					got = tc
				}
			}
			if got == nil || got.Result != ktap.Fail {
				t.Errorf("%s without its rules: %+v, want not ok", c, got)
			} else {
				t.Logf("%s without its rules: not ok # %s", c, got.Directive)
			}
		}
	})
}
