package images

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The stand-in DRM suite of these tests (testdata/drmsuite): a vgpu_drm.ko that links against
// every DRM module and includes from ../include, and a program built like vgpu-drmtest that
// prints KTAP about /proc/modules and its arguments.
const (
	standInDRMSrc     = "testdata/drmsuite/drm"
	standInDRMProgram = "vgpu/images/testdata/drmsuite/drmprobe"
)

// genericGuest provisions (or reuses, from the user's cache) the generic kernel with the
// stand-in DRM suite.
func genericGuest(t *testing.T, ctx context.Context) *GuestImage {
	t.Helper()
	g, err := Guest(ctx, GuestOptions{Suite: SuiteDRM, DRMSrc: standInDRMSrc, DRMTestPackage: standInDRMProgram,
		Progress: &lineLogger{t: t, prefix: "[generic] "}})
	if err != nil {
		t.Fatalf("the generic guest: %v", err)
	}
	return g
}

// kernelConfig reads the /boot/config-<release> of a provisioned kernel tree.
func kernelConfig(t *testing.T, g *GuestImage) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(filepath.Dir(g.Kernel), "boot", "config-"+g.KernelRelease))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(k, "CONFIG_") {
			cfg[strings.TrimPrefix(k, "CONFIG_")] = v
		}
	}
	return cfg
}

// TestKernelFlavours checks what the boot path takes for granted of each flavour's kernel: the
// same ABI, PVH and intel-iommu built in, the virtio console set as modules (so both initramfs
// load the same VirtioModules), and DRM as modules only in the generic kernel, with dma-buf
// and sync_file built in.
func TestKernelFlavours(t *testing.T) {
	skipWithoutQEMU(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cloud, err := Guest(ctx, GuestOptions{NoTestModule: true, Progress: &lineLogger{t: t, prefix: "[cloud] "}})
	if err != nil {
		t.Fatal(err)
	}
	generic := genericGuest(t, ctx)
	if cloud.Flavour != FlavourCloud || generic.Flavour != FlavourGeneric || cloud.Kernel == generic.Kernel || cloud.KDir == generic.KDir {
		t.Errorf("flavours share a tree: %s %s / %s %s", cloud.Flavour, cloud.Kernel, generic.Flavour, generic.Kernel)
	}
	for _, tc := range []struct {
		g    *GuestImage
		want map[string]string // "" → not set
	}{
		{cloud, map[string]string{"PVH": "y", "INTEL_IOMMU": "y", "IRQ_REMAP": "y", "VIRTIO_PCI": "m", "VIRTIO_CONSOLE": "m",
			"DEVTMPFS": "y", "MODULE_COMPRESS_NONE": "y", "DRM": ""}},
		{generic, map[string]string{"PVH": "y", "INTEL_IOMMU": "y", "IRQ_REMAP": "y", "VIRTIO_PCI": "m", "VIRTIO_CONSOLE": "m",
			"DEVTMPFS": "y", "DEBUG_FS": "y", "MODULE_COMPRESS_NONE": "y", "DRM": "m", "DRM_GEM_SHMEM_HELPER": "m",
			"DRM_BUDDY": "m", "DRM_SCHED": "m", "DMA_SHARED_BUFFER": "y", "SYNC_FILE": "y"}},
	} {
		cfg := kernelConfig(t, tc.g)
		for k, v := range tc.want {
			if cfg[k] != v {
				t.Errorf("%s: CONFIG_%s=%q, want %q", tc.g.KernelRelease, k, cfg[k], v)
			}
		}
		if want := GuestKernelReleaseOf(tc.g.Flavour); tc.g.KernelRelease != want && len(tc.g.Fallbacks) == 0 {
			t.Errorf("release %s, want %s", tc.g.KernelRelease, want)
		}
		if len(tc.g.VirtioModules) != len(VirtioModules) {
			t.Errorf("%s: virtio modules %v", tc.g.KernelRelease, tc.g.VirtioModules)
		}
	}
	if _, err := cloud.KernelModules(ctx, []string{"drm"}, nil); err == nil {
		t.Errorf("the cloud kernel has a drm module")
	}
}

// TestDRMModuleOrder resolves the DRM set against the generic kernel's real module tree: every
// module after each module it depends on (modinfo), none built in, none twice; and the
// stand-in driver's own dependencies are among them.
func TestDRMModuleOrder(t *testing.T) {
	skipWithoutQEMU(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g := genericGuest(t, ctx)
	mods, err := g.KernelModules(ctx, DRMModules, nil)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, m := range mods {
		if _, dup := pos[m.Name]; dup {
			t.Errorf("%s twice", m.Name)
		}
		pos[m.Name] = i
		info, err := ModuleInfo(m.Path)
		if err != nil {
			t.Fatal(err)
		}
		if n := kmodName(first(info["name"])); n != m.Name {
			t.Errorf("%s: modinfo name %s", m.Path, n)
		}
		for _, d := range strings.Split(first(info["depends"]), ",") {
			if d = kmodName(d); d == "" {
				continue
			}
			if j, ok := pos[d]; !ok || j >= i {
				t.Errorf("%s depends on %s, which is not loaded before it", m.Name, d)
			}
		}
		t.Logf("%d %s (depends=%s)", i, m.Name, first(info["depends"]))
	}
	for _, n := range DRMModules {
		if _, ok := pos[n]; !ok {
			t.Errorf("%s is not in the set", n)
		}
	}
	if len(g.DRMModules) < len(DRMModules) {
		t.Errorf("the image carries %v", g.DRMModules)
	}
	info, err := ModuleInfo(g.DRMDriver)
	if err != nil {
		t.Fatal(err)
	}
	carried := map[string]bool{}
	for _, p := range g.DRMModules {
		carried[kmodName(strings.TrimSuffix(filepath.Base(p), ".ko"))] = true
	}
	for _, d := range strings.Split(first(info["depends"]), ",") {
		if d = kmodName(d); d != "" && !carried[d] {
			t.Errorf("vgpu_drm.ko needs %s, which the initramfs does not carry (%v)", d, g.DRMModules)
		}
	}
}

// TestGuestDRMSuiteBoot boots the generic kernel with the stand-in DRM suite (no vgpu device:
// this is the boot path, not the driver) and checks /init's DRM path: the modules load in
// order, the driver loads and unloads, the program runs with the arguments and the IOMMU mode
// and its KTAP reaches the results port.
func TestGuestDRMSuiteBoot(t *testing.T) {
	skipWithoutQEMU(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g := genericGuest(t, ctx)
	if g.Suite != SuiteDRM || g.DRMDriver == "" || g.DRMTest == "" || g.ModulePath != "" {
		t.Fatalf("image %+v", *g)
	}
	qemu, err := QEMU(ctx, QEMUOptions{Progress: &lineLogger{t: t, prefix: "[qemu] "}})
	if err != nil {
		t.Fatal(err)
	}
	// intel_iommu=on without a VT-d device: the kernel runs as without one, but /init must read
	// the parameter into --iommu-mode on.
	r := bootGuest(t, ctx, qemu, g.Kernel, g.Initrd, g.Cmdline("--tests a,b", "intel_iommu=on"), "")
	want := []string{}
	for _, p := range g.DRMModules {
		want = append(want, InitPrefix+"kmod "+kmodName(strings.TrimSuffix(filepath.Base(p), ".ko"))+" rc=0\n")
	}
	want = append(want,
		InitPrefix+"drm-kmods rc=0\n", InitPrefix+"drm-insmod rc=0\n", InitPrefix+"render-node=none\n",
		"KTAP version 1\n1..6\n",
		"ok 1 module_drm\n", "ok 2 module_drm_shmem_helper\n", "ok 3 module_drm_buddy\n", "ok 4 module_gpu_sched\n", "ok 5 module_vgpu_drm\n",
		`# args: tests="a,b" iommu-mode=on`, "# perf probe_args 4 count\n", "ok 6 args\n",
		InitPrefix+"note: vgpu-drmtest: drmprobe: done\n", InitPrefix+"drmtest rc=0\n", InitPrefix+"drm-rmmod rc=0\n",
		InitPrefix+"irqs-after-rmmod=0\n", InitPrefix+"kernel-warnings=0\n", InitEnd)
	rest := r.results
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("the report lacks %q (in order); it is:\n%s", w, r.results)
		}
		rest = rest[i+len(w):]
	}
	if strings.Contains(r.results, "vgpu_test") {
		t.Errorf("the DRM suite mentions vgpu_test:\n%s", r.results)
	}
}
