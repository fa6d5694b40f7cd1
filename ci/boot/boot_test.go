package boot

import (
	"strings"
	"testing"

	"vgpu/images"
)

func TestInitReport(t *testing.T) {
	for _, tc := range []struct {
		name     string
		text     string
		problems []string // substrings, in order
	}{
		{"clean", "# vgpu-init: insmod rc=0\n# vgpu-init: rmmod rc=0\n# vgpu-init: irqs-after-rmmod=0\n# vgpu-init: kernel-warnings=0\n# vgpu-init: note: something\n# vgpu-init: end\n", nil},
		{"console prefixes", "[    3.1] # vgpu-init: insmod rc=0\r\n[    3.2] # vgpu-init: end\r\n", nil},
		{"insmod failed", "# vgpu-init: insmod rc=22\n# vgpu-init: end\n", []string{"insmod vgpu_test.ko: 22"}},
		{"leaked irq", "# vgpu-init: insmod rc=0\n# vgpu-init: irqs-after-rmmod=2\n# vgpu-init: end\n", []string{"interrupt handlers left after rmmod: 2"}},
		{"no end", "# vgpu-init: insmod rc=0\n", []string{"never reported its end"}},
		{"nothing", "", []string{"never reported its end"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkInit(initLines([]byte(tc.text)))
			if len(got) != len(tc.problems) {
				t.Fatalf("problems = %q, want %d matching %q", got, len(tc.problems), tc.problems)
			}
			for i, want := range tc.problems {
				if !strings.Contains(got[i], want) {
					t.Errorf("problem %d = %q, want it to mention %q", i, got[i], want)
				}
			}
		})
	}
}

func TestCmdline(t *testing.T) {
	got := cmdline(Config{Guest: &images.GuestImage{CmdlineBase: "console=ttyS0"}, IOMMU: true, TestArgs: "tests=dma,msix", Keep: true})
	for _, want := range []string{"console=ttyS0", "intel_iommu=on", "vgpu_keep=1", `"vgpu_test_args=tests=dma,msix"`} {
		if !strings.Contains(got, want) {
			t.Errorf("cmdline %q lacks %q", got, want)
		}
	}
}
