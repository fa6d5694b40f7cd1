// Command drmprobe stands in for vgpu-drmtest in images' tests of the DRM suite's boot path. It
// is built like the real program (static, linux/amd64, from the vgpu module: it imports
// vgpu/abi, so its cache key covers a package of the module besides its own) and prints KTAP
// like it: one case per DRM module it finds in /proc/modules, one for the arguments /init
// passes, a perf line, a plan.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"

	"vgpu/abi"
)

func main() {
	tests := flag.String("tests", "", "comma-separated cases")
	mode := flag.String("iommu-mode", "", "on or off")
	flag.Parse()
	loaded := map[string]bool{}
	if f, err := os.Open("/proc/modules"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if name, _, ok := strings.Cut(sc.Text(), " "); ok {
				loaded[name] = true
			}
		}
		f.Close()
	}
	cases := []string{"drm", "drm_shmem_helper", "drm_buddy", "gpu_sched", "vgpu_drm"}
	fmt.Println("KTAP version 1")
	fmt.Printf("1..%d\n", len(cases)+1)
	for i, m := range cases {
		if loaded[m] {
			fmt.Printf("ok %d module_%s\n", i+1, m)
		} else {
			fmt.Printf("# module_%s: not in /proc/modules\n", m)
			fmt.Printf("not ok %d module_%s\n", i+1, m)
		}
	}
	fmt.Printf("# args: tests=%q iommu-mode=%s pci=%04x:%04x\n", *tests, *mode, abi.PCI_VENDOR_ID, abi.PCI_DEVICE_ID)
	fmt.Printf("# perf probe_args %d count\n", len(os.Args)-1)
	n := len(cases) + 1
	if *mode == "on" || *mode == "off" {
		fmt.Printf("ok %d args\n", n)
	} else {
		fmt.Printf("not ok %d args # iommu-mode %q\n", n, *mode)
	}
	fmt.Fprintln(os.Stderr, "drmprobe: done")
}
