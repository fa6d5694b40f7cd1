package main

import (
	"flag"
	"testing"
)

// TestRunTracePaths: one file per boot, named after suite and IOMMU mode.
func TestRunTracePaths(t *testing.T) {
	fl := flag.NewFlagSet("run", flag.ContinueOnError)
	path := addRunTraceFlag(fl)
	if got := path("ktap", "no IOMMU"); got != "" {
		t.Errorf("without --trace: %q", got)
	}
	if err := fl.Parse([]string{"--trace", "/tmp/tr"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ suite, mode, want string }{
		{"ktap", "no IOMMU", "/tmp/tr/ktap-no-IOMMU.pftrace"},
		{"drm", "intel-iommu", "/tmp/tr/drm-intel-iommu.pftrace"},
		{"", "no IOMMU", "/tmp/tr/user-no-IOMMU.pftrace"},
	} {
		if got := path(tc.suite, tc.mode); got != tc.want {
			t.Errorf("%s/%s: %q, want %q", tc.suite, tc.mode, got, tc.want)
		}
	}
}
