package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The guest suites (GuestOptions.Suite).
const (
	// SuiteKTAP is vgpu's kernel test module, vgpu_test.ko, on the cloud kernel: /init loads it
	// and sends its KTAP.
	SuiteKTAP = "ktap"
	// SuiteDRM is the DRM render driver vgpu_drm.ko and its userspace program vgpu-drmtest on
	// the generic kernel: /init loads the DRM modules and the driver, runs the program and sends
	// its KTAP (init.sh, drm_suite).
	SuiteDRM = "drm"
)

// Suites lists the guest suites in the order `vgpu run` runs them.
func Suites() []string { return []string{SuiteKTAP, SuiteDRM} }

// SuiteFlavour is the kernel flavour a suite runs on: the cloud kernel for the KTAP suite, the
// generic one (it has DRM) for the DRM suite.
func SuiteFlavour(suite string) string {
	if suite == SuiteDRM {
		return FlavourGeneric
	}
	return FlavourCloud
}

// Where the DRM suite's files lie in its initramfs (init.sh reads the same paths).
const (
	drmInitrdDir     = "lib/modules/drm" // the kernel's DRM modules and load.order
	drmInitrdDriver  = "lib/modules/vgpu_drm.ko"
	drmInitrdProgram = "bin/vgpu-drmtest"
	suiteInitrdFile  = "etc/vgpu-suite" // "drm": /init runs the DRM suite
)

// suiteFlavour checks a Guest call's suite and flavour and fills in the defaults.
func suiteFlavour(opts GuestOptions) (suite, flavour string, err error) {
	suite, flavour = opts.Suite, opts.Flavour
	switch suite {
	case "":
		suite = SuiteKTAP
	case SuiteKTAP, SuiteDRM:
	default:
		return "", "", fmt.Errorf("images: unknown guest suite %q (want %s)", suite, strings.Join(Suites(), " or "))
	}
	if flavour == "" {
		flavour = SuiteFlavour(suite)
		if opts.NoTestModule {
			flavour = FlavourCloud
		}
	}
	if _, err := DebianFlavour(flavour); err != nil {
		return "", "", err
	}
	if suite == SuiteDRM && flavour == FlavourCloud && opts.Kernel == "" && !opts.NoTestModule {
		return "", "", errors.New("images: the DRM suite needs a kernel with DRM: the cloud kernel has none (use the generic flavour)")
	}
	return suite, flavour, nil
}

// drmPayload prepares what the DRM suite's initramfs carries beyond the base image: the
// kernel's DRM modules in load order (from its whole module tree, KernelModules), vgpu_drm.ko
// built against kdir, and the static vgpu-drmtest.
func drmPayload(ctx context.Context, cache, kdir string, opts GuestOptions, g *GuestImage, progress io.Writer) error {
	if kdir == "" {
		return errors.New("images: the DRM suite builds vgpu_drm.ko: GuestOptions.HeadersDir (KDIR) is needed with your own kernel")
	}
	t := time.Now()
	src := opts.DRMSrc
	var err error
	if src == "" {
		if src, err = findDRMSrc(); err != nil {
			return err
		}
	}
	if g.DRMDriver, err = BuildModuleWith(ctx, kdir, src, []string{"include", "*.h"}, "vgpu_drm.ko", cache, progress); err != nil {
		return err
	}
	if filepath.Base(g.DRMDriver) != "vgpu_drm.ko" {
		return fmt.Errorf("images: the DRM driver build in %s made %s, not vgpu_drm.ko", src, filepath.Base(g.DRMDriver))
	}
	info, err := ModuleInfo(g.DRMDriver)
	if err != nil {
		return err
	}
	if vm := first(info["vermagic"]); g.KernelRelease != "" && !strings.HasPrefix(vm, g.KernelRelease+" ") {
		return fmt.Errorf("images: %s has vermagic %q; it would not load into kernel %s", g.DRMDriver, vm, g.KernelRelease)
	}
	// The DRM set, and whatever else of the kernel's the driver links against (its depends=),
	// each after what it needs.
	mods, err := g.KernelModules(ctx, drmModuleNames(first(info["depends"])), progress)
	if err != nil {
		return fmt.Errorf("images: the modules vgpu_drm.ko needs: %w", err)
	}
	g.DRMModules = nil
	for _, m := range mods {
		g.DRMModules = append(g.DRMModules, m.Path)
	}
	root := opts.GoModule
	if root == "" {
		if root, err = findModuleRoot(); err != nil {
			return err
		}
	}
	pkg := opts.DRMTestPackage
	if pkg == "" {
		pkg = DRMTestPackage
	}
	if g.DRMTest, err = BuildGoProgram(ctx, root, pkg, "vgpu-drmtest", cache, progress); err != nil {
		return err
	}
	g.KDir = kdir
	fmt.Fprintf(progress, "guest: DRM suite ready in %.1fs (%d kernel modules, %s, %s)\n",
		time.Since(t).Seconds(), len(g.DRMModules), g.DRMDriver, g.DRMTest)
	return nil
}

// drmModuleNames are the kernel modules the DRM suite loads: DRMModules, then those of the
// driver's depends= that are not among them.
func drmModuleNames(depends string) []string {
	names := append([]string(nil), DRMModules...)
	for _, d := range strings.Split(depends, ",") {
		if d = kmodName(strings.TrimSpace(d)); d != "" && !containsString(names, d) {
			names = append(names, d)
		}
	}
	return names
}

// findDRMSrc finds guest/drm of the vgpu Go module that contains the working directory.
func findDRMSrc() (string, error) {
	root, err := findModuleRoot()
	if err != nil {
		return "", err
	}
	src := filepath.Join(root, "guest", "drm")
	if !isModuleDir(src) {
		return "", fmt.Errorf("images: no DRM driver sources in %s (no Kbuild): set GuestOptions.DRMSrc", src)
	}
	return src, nil
}

// DRMSuiteSources reports whether the DRM suite can be built from the vgpu checkout that
// contains the working directory: the driver (guest/drm, with its Kbuild) and the program's
// package (guest/drmtest). The KTAP suite's sources travel inside the vgpu binary; the DRM
// suite's are read from the checkout.
func DRMSuiteSources() error {
	src, err := findDRMSrc()
	if err != nil {
		return err
	}
	prog := filepath.Join(filepath.Dir(src), "drmtest")
	if m, _ := filepath.Glob(filepath.Join(prog, "*.go")); len(m) == 0 {
		return fmt.Errorf("images: no DRM suite program in %s (no Go files)", prog)
	}
	return nil
}

// addDRM puts the DRM suite into the initramfs spec: the kernel modules (in g's order), the
// driver, the program and the suite file that makes /init run it.
func (s *initrdSpec) addDRM(g *GuestImage) error {
	s.Suite = SuiteDRM
	for _, p := range g.DRMModules {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s.DRM = append(s.DRM, initrdFile{Name: kmodName(strings.TrimSuffix(filepath.Base(p), ".ko")), Mode: 0o644, Data: b})
	}
	var err error
	if s.Driver, err = os.ReadFile(g.DRMDriver); err != nil {
		return err
	}
	if s.Program, err = os.ReadFile(g.DRMTest); err != nil {
		return err
	}
	return nil
}
