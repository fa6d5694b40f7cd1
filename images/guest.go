package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// GuestOptions tunes Guest.
type GuestOptions struct {
	CacheDir string    // "" → CacheDir()
	Progress io.Writer // provisioning progress; nil → discarded

	// ModuleSrc is the folder with the test module's sources (the repository's guest/). "" →
	// the guest/ folder of the vgpu module that contains the working directory.
	ModuleSrc string
	// Module is a prebuilt vgpu_test.ko to use instead of building ModuleSrc.
	Module string
	// NoTestModule leaves vgpu_test.ko out: the image is the kernel, busybox and /init only,
	// for a user run that brings its own modules (RunPlan). KDir is still set, to build them.
	NoTestModule bool

	// Kernel and HeadersDir bring your own kernel: a vmlinux (an ELF with the PVH note) or a
	// bzImage, and its configured tree or headers folder (KDIR) to build the module against.
	// The pinned Debian kernel is then not downloaded. A bzImage is unpacked to a vmlinux when
	// its compression is known (lz4, gzip, xz, zstd), otherwise booted as it is.
	Kernel, HeadersDir string
	// ModulesDir is searched (recursively) for the virtio console modules of a kernel of your
	// own (VirtioModules, as plain .ko files). Those not found are taken to be built in.
	ModulesDir string

	// Mirror and SecurityMirror choose the Debian archives; "" takes them from
	// $VGPU_DEBIAN_MIRROR / $VGPU_DEBIAN_SECURITY_MIRROR or the host's apt sources (HostMirror,
	// HostSecurityMirror), and only when something must be downloaded. They are not part of
	// any cache key.
	Mirror, SecurityMirror string

	// Gzip compresses the initramfs (gzip -1). The kernel takes both; uncompressed is the
	// default: it builds in a few milliseconds and boots as fast.
	Gzip bool

	// Flavour chooses the pinned Debian kernel: FlavourCloud (the default, also for "") or
	// FlavourGeneric. Its packages, trees and modules have their own cache entries. A kernel of
	// your own (Kernel) ignores it.
	Flavour string
	// Suite chooses what /init runs: SuiteKTAP ("" too: vgpu_test.ko) or SuiteDRM (the DRM
	// modules, vgpu_drm.ko and /bin/vgpu-drmtest; it needs a kernel with DRM, so "" Flavour
	// means FlavourGeneric for it). NoTestModule leaves either out.
	Suite string
	// DRMSrc is the DRM driver's folder (the repository's guest/drm; it includes from the
	// include/ folder beside it and from guest/*.h, which the build copies with it). "" →
	// guest/drm of the vgpu module that contains the working directory.
	DRMSrc string
	// GoModule is the root of the vgpu Go module (its go.mod) the DRM suite's program is built
	// in; "" → the module that contains the working directory. DRMTestPackage is the program,
	// "" → DRMTestPackage (vgpu/guest/drmtest).
	GoModule, DRMTestPackage string

	// StrictPin forbids the fallback from a pinned guest package the archive no longer serves
	// (GuestKernelABI's kernel set, busybox-static) to the one it serves now: Guest fails
	// instead. $VGPU_STRICT_PIN=1 does the same.
	StrictPin bool
}

// strictPinEnv reports whether $VGPU_STRICT_PIN asks for StrictPin: any value but "", "0" and
// "false".
func strictPinEnv() bool {
	v := strings.TrimSpace(os.Getenv("VGPU_STRICT_PIN"))
	return v != "" && v != "0" && !strings.EqualFold(v, "false")
}

// GuestImage is everything needed to boot the test guest: qemu -kernel Kernel -initrd Initrd
// -append Cmdline(...).
type GuestImage struct {
	// Kernel is the file for -kernel: an uncompressed vmlinux booted through PVH, or (PVH false)
	// a bzImage of your own that could not be unpacked.
	Kernel string
	PVH    bool
	Initrd string
	// KernelRelease is uname -r of the guest kernel, and the vermagic of ModulePath.
	KernelRelease string
	// ModulePath is the vgpu_test.ko packed into the initrd (/lib/modules/vgpu_test.ko).
	ModulePath string
	// KDir is the kernel headers folder the module was built against ("" with a prebuilt one).
	KDir string
	// VirtioModules are the .ko files packed into the initrd, in load order.
	VirtioModules []string
	// CmdlineBase is the kernel command line without test arguments:
	// "console=ttyS0 panic=-1 quiet no_timer_check". The VM adds intel_iommu=on when it has an
	// IOMMU.
	CmdlineBase string
	// Packages lists the Debian kernel packages used (name=version): the pinned set, or the one
	// Fallbacks names; empty for your own kernel.
	Packages []string
	// Fallbacks holds a warning for each pinned set (kernel, busybox-static) the archive no
	// longer serves and that was replaced by what it serves now; empty when every pin held. See
	// GuestOptions.StrictPin.
	Fallbacks []string

	// Flavour is the pinned kernel's flavour (FlavourCloud, FlavourGeneric); "" for a kernel of
	// your own. Suite is SuiteKTAP or SuiteDRM; "" when the image runs no suite (NoTestModule).
	Flavour, Suite string
	// DRMModules are the kernel modules the DRM suite's initramfs loads before vgpu_drm.ko
	// (DRMModules and their dependencies, in load order); DRMDriver is vgpu_drm.ko and DRMTest
	// the static program /init runs as /bin/vgpu-drmtest. Empty for the KTAP suite.
	DRMModules         []string
	DRMDriver, DRMTest string

	// kmods returns the folder with all the kernel's modules (KernelModules); nil when there
	// is none (your own kernel without ModulesDir).
	kmods func(context.Context, io.Writer) (string, error)
}

// GuestCmdlineBase is GuestImage.CmdlineBase: the serial console for the report, a reboot
// (which -no-reboot turns into QEMU's exit) on panic, a quiet boot log, and no_timer_check:
// under TCG on a busy host the kernel's early check that the timer interrupt arrives through
// the IO-APIC can miss its window, which with interrupt remapping (intel-iommu) is a panic
// ("timer doesn't work through Interrupt-remapped IO-APIC"); the check exists for broken
// chipsets, and QEMU's timer works.
const GuestCmdlineBase = "console=ttyS0 panic=-1 quiet no_timer_check"

// Cmdline returns the kernel command line: CmdlineBase, then extra, then
// vgpu_test_args="<testArgs>" when testArgs is not empty. The kernel hands parameters it does
// not know to /init as environment variables; /init passes vgpu_test_args to insmod
// vgpu_test.ko (e.g. "tests=dma,msix timeout_ms=5000"), or in the DRM suite to vgpu-drmtest
// (e.g. "--tests userq_basic"). Other /init switches go into extra:
// "vgpu_keep=1" (a shell instead of power-off), "vgpu_wait=N" (seconds), "vgpu_no_test=1".
func (g *GuestImage) Cmdline(testArgs string, extra ...string) string {
	parts := []string{g.CmdlineBase}
	parts = append(parts, extra...)
	if testArgs = strings.TrimSpace(testArgs); testArgs != "" {
		parts = append(parts, `vgpu_test_args="`+strings.ReplaceAll(testArgs, `"`, ``)+`"`)
	}
	return strings.Join(parts, " ")
}

// Guest provisions the test guest into the cache folder and returns it. With no kernel of your
// own it downloads the pinned Debian bookworm kernel of opts.Flavour (the cloud one by
// default, the generic one for the DRM suite), its headers and busybox-static
// (guestPackages; signature-checked through private apt roots) and unpacks them once into
// guest-kernel-<key>/ and guest-busybox-<key>/, builds the test module from ModuleSrc into
// guest-module-<key>/ (for the DRM suite: vgpu_drm.ko from DRMSrc there too, the program into
// guest-prog-<key>/, the kernel's whole module tree into guest-kmods-<key>/) and writes
// guest-initrd-<key>.cpio. Every key is a hash of what went into
// the entry, so a second call reuses them without network, and any change (a pinned version,
// a module source, /init) builds a new entry beside the old. Concurrent callers wait on lock
// files.
//
// When a pinned set is not cached and the archive no longer serves it, Guest uses the kernel
// (or busybox-static) the archive serves now, warns on Progress and in GuestImage.Fallbacks,
// and records the choice so later calls reuse it without network (resolvePins);
// GuestOptions.StrictPin or $VGPU_STRICT_PIN=1 makes it fail instead.
func Guest(ctx context.Context, opts GuestOptions) (*GuestImage, error) {
	var progress io.Writer = io.Discard
	if opts.Progress != nil {
		// The kernel and busybox are provisioned in parallel.
		progress = &lockedWriter{w: opts.Progress}
	}
	cache := opts.CacheDir
	if cache == "" {
		var err error
		if cache, err = CacheDir(); err != nil {
			return nil, err
		}
	}
	cache, err := filepath.Abs(cache)
	if err != nil {
		return nil, err
	}
	mirrors := guestMirrors{Main: opts.Mirror, Security: opts.SecurityMirror}

	start := time.Now()
	suite, flavour, err := suiteFlavour(opts)
	if err != nil {
		return nil, err
	}
	kernelPkgs, busyboxPkgs := splitGuestPackages(guestPackages, flavour)
	strict := opts.StrictPin || strictPinEnv()
	g := &GuestImage{CmdlineBase: GuestCmdlineBase, Suite: suite}
	if opts.NoTestModule {
		g.Suite = ""
	}
	var used []string // cache entries to keep (pruneGuestCache)

	// The busybox tree is needed in both cases; fetch it while the kernel is handled.
	type bbResult struct {
		path string
		res  *pinResolution
		err  error
	}
	bbc := make(chan bbResult, 1)
	go func() {
		res, err := resolvePins(ctx, cache, busyboxPins, busyboxPkgs, strict,
			guestPinLister(cache, mirrors, busyboxPkgs, progress), progress)
		var p string
		if err == nil {
			p, err = provisionBusybox(ctx, cache, res.Packages, mirrors, progress)
		}
		bbc <- bbResult{p, res, err}
	}()
	waitBusybox := func() (string, error) {
		r := <-bbc
		if r.err == nil && r.res.Warning != "" {
			g.Fallbacks = append(g.Fallbacks, r.res.Warning)
			used = append(used, r.res.Record)
		}
		return r.path, r.err
	}

	var kdir string
	var virtio []initrdFile
	if opts.Kernel == "" && opts.HeadersDir == "" {
		res, err := resolvePins(ctx, cache, kernelPins, kernelPkgs, strict,
			guestPinLister(cache, mirrors, kernelPkgs, progress), progress)
		if err != nil {
			waitBusybox()
			return nil, err
		}
		kt, err := provisionKernel(ctx, cache, res.Packages, mirrors, progress)
		if err != nil {
			waitBusybox()
			return nil, err
		}
		if res.Warning != "" {
			g.Fallbacks = append(g.Fallbacks, res.Warning)
			used = append(used, res.Record)
		}
		g.Kernel, g.PVH, g.KernelRelease, kdir, g.Packages = kt.Vmlinux, true, kt.Release, kt.KDir, kt.Packages
		g.Flavour = flavour
		kernelSet := res.Packages
		g.kmods = func(ctx context.Context, progress io.Writer) (string, error) {
			return provisionKernelModules(ctx, cache, kernelSet, mirrors, progress)
		}
		for _, m := range VirtioModules {
			g.VirtioModules = append(g.VirtioModules, kt.Modules[m])
		}
	} else {
		if err := ownKernel(ctx, cache, opts, g, progress); err != nil {
			waitBusybox()
			return nil, err
		}
		kdir = opts.HeadersDir
		if dir := opts.ModulesDir; dir != "" {
			g.kmods = func(context.Context, io.Writer) (string, error) { return dir, nil }
		}
	}
	for _, p := range g.VirtioModules {
		b, err := os.ReadFile(p)
		if err != nil {
			waitBusybox()
			return nil, err
		}
		virtio = append(virtio, initrdFile{Name: strings.TrimSuffix(filepath.Base(p), ".ko"), Mode: 0o644, Data: b})
	}

	// The test module.
	switch {
	case opts.NoTestModule:
		g.KDir = kdir
	case g.Suite == SuiteDRM:
		err = drmPayload(ctx, cache, kdir, opts, g, progress)
	case opts.Module != "":
		g.ModulePath, err = filepath.Abs(opts.Module)
	case kdir == "":
		err = errors.New("images: GuestOptions.HeadersDir (KDIR) or Module is needed with your own kernel")
	default:
		src := opts.ModuleSrc
		if src == "" {
			src, err = findModuleSrc()
		}
		if err == nil {
			t := time.Now()
			g.ModulePath, err = buildModule(ctx, kdir, src, cache, progress)
			if err == nil {
				g.KDir = kdir
				fmt.Fprintf(progress, "guest: module %s ready in %.1fs\n", g.ModulePath, time.Since(t).Seconds())
			}
		}
	}
	if err != nil {
		waitBusybox()
		return nil, err
	}
	if g.ModulePath != "" {
		info, err := ModuleInfo(g.ModulePath)
		if err != nil {
			waitBusybox()
			return nil, err
		}
		vermagic := first(info["vermagic"])
		if g.KernelRelease == "" {
			g.KernelRelease, _, _ = strings.Cut(vermagic, " ")
		}
		if !strings.HasPrefix(vermagic, g.KernelRelease+" ") {
			waitBusybox()
			return nil, fmt.Errorf("images: %s has vermagic %q; it would not load into kernel %s", g.ModulePath, vermagic, g.KernelRelease)
		}
	}

	busybox, err := waitBusybox()
	if err != nil {
		return nil, err
	}
	t := time.Now()
	spec := &initrdSpec{Init: initScript, Modules: virtio, Gzip: opts.Gzip}
	if spec.Busybox, err = os.ReadFile(busybox); err != nil {
		return nil, err
	}
	if g.ModulePath != "" {
		if spec.Test, err = os.ReadFile(g.ModulePath); err != nil {
			return nil, err
		}
	}
	if g.Suite == SuiteDRM {
		if err := spec.addDRM(g); err != nil {
			return nil, err
		}
	}
	if g.Initrd, err = buildInitrd(cache, spec); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "guest: initrd %s in %.2fs; guest ready in %.1fs (kernel %s)\n",
		filepath.Base(g.Initrd), time.Since(t).Seconds(), time.Since(start).Seconds(), g.KernelRelease)
	used = append(used, g.Kernel, g.Initrd, g.ModulePath, busybox, g.DRMDriver, g.DRMTest) // "" is no cache entry
	used = append(used, g.DRMModules...)
	pruneGuestCache(ctx, cache, used, guestCacheMaxAge, progress)
	return g, nil
}

// pinGroup is one group of pinned guest packages that resolvePins handles: the kernel set or
// busybox-static.
type pinGroup struct {
	prefix   string // cache entry prefix of its tree: guest-kernel, guest-busybox
	layout   string // layout tag of the tree's cache key
	what     string // what a warning calls the set before describe's text ("kernel ")
	update   string // what to update when the pin is stale
	resolve  func(context.Context, pinLister, []GuestPackage) ([]GuestPackage, error)
	describe func([]GuestPackage) string
}

var (
	kernelPins = pinGroup{"guest-kernel", guestKernelLayout, "kernel ",
		"GuestKernelABI and guestPackages in images/kernel.go", resolveKernelPin, describeKernelSet}
	busyboxPins = pinGroup{"guest-busybox", guestBusyboxLayout, "",
		"guestPackages in images/kernel.go", resolveLatestPin, describePackages}
)

// pinResolution is the package set resolvePins chose for a pinned group.
type pinResolution struct {
	Packages []GuestPackage
	Warning  string // "" when the pin is used
	Record   string // the file recording the fallback; "" when the pin is used
}

// pinRecord is the content of a <prefix>-<pinned key>.resolved file.
type pinRecord struct {
	Pinned   []string       `json:"pinned"` // name=version suite
	Packages []GuestPackage `json:"packages"`
	Resolved time.Time      `json:"resolved"`
}

func pinItems(pkgs []GuestPackage) []string {
	items := make([]string, len(pkgs))
	for i, p := range pkgs {
		items[i] = p.String() + " " + p.Suite
	}
	return items
}

func pinSuites(pkgs []GuestPackage) string {
	var suites []string
	for _, p := range pkgs {
		if !containsString(suites, p.Suite) {
			suites = append(suites, p.Suite)
		}
	}
	return strings.Join(suites, ", ")
}

// fallbackWarning is the warning for using use instead of the pinned set.
func (g pinGroup) fallbackWarning(pinned, use []GuestPackage) string {
	return fmt.Sprintf("pinned %s%s is no longer served by %s; using %s — update %s",
		g.what, g.describe(pinned), pinSuites(pinned), g.describe(use), g.update)
}

// resolvePins chooses the package set to provision for a pinned group:
//   - the pinned set when its tree is cached (no network), or when the archive serves it;
//   - otherwise the set g.resolve finds in the archive now (the current kernel ABI, the
//     current busybox-static), with a warning on progress. The choice is recorded in
//     <cache>/<prefix>-<pinned key>.resolved; while that set's tree is cached, later calls
//     reuse it without network (and warn again), until the pin is updated.
//
// With strict the fallback is an error. open returns the lists of the pin's suite, updated;
// it is called only when the network is needed.
func resolvePins(ctx context.Context, cache string, g pinGroup, pinned []GuestPackage, strict bool,
	open func(context.Context) (pinLister, error), progress io.Writer) (*pinResolution, error) {
	if len(pinned) == 0 {
		return &pinResolution{}, nil
	}
	pinnedKey := packagesKey(g.layout, pinned)
	if _, ok := readTreeMarker(filepath.Join(cache, g.prefix+"-"+pinnedKey), pinnedKey); ok {
		return &pinResolution{Packages: pinned}, nil
	}
	record := filepath.Join(cache, g.prefix+"-"+pinnedKey+".resolved")
	if !strict {
		if use, ok := readPinRecord(cache, record, g, pinned); ok {
			w := g.fallbackWarning(pinned, use)
			fmt.Fprintf(progress, "%s: WARNING: %s (chosen earlier, %s)\n", g.prefix, w, record)
			return &pinResolution{Packages: use, Warning: w, Record: record}, nil
		}
	}
	l, err := open(ctx)
	if err != nil {
		return nil, err
	}
	use, err := g.resolve(ctx, l, pinned)
	if err != nil {
		return nil, err
	}
	if slices.Equal(use, pinned) {
		return &pinResolution{Packages: pinned}, nil
	}
	if strict {
		return nil, fmt.Errorf("images: pinned %s%s is no longer served by %s (it serves %s), and StrictPin / $VGPU_STRICT_PIN=1 forbids the fallback: update %s",
			g.what, g.describe(pinned), pinSuites(pinned), g.describe(use), g.update)
	}
	w := g.fallbackWarning(pinned, use)
	fmt.Fprintf(progress, "%s: WARNING: %s (set VGPU_STRICT_PIN=1 to fail instead)\n", g.prefix, w)
	b, _ := json.MarshalIndent(pinRecord{Pinned: pinItems(pinned), Packages: use, Resolved: time.Now().UTC()}, "", "  ")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(record, append(b, '\n')); err != nil {
		return nil, err
	}
	return &pinResolution{Packages: use, Warning: w, Record: record}, nil
}

// readPinRecord returns the set a record chose for pinned, if its tree is complete.
func readPinRecord(cache, record string, g pinGroup, pinned []GuestPackage) ([]GuestPackage, bool) {
	b, err := os.ReadFile(record)
	if err != nil {
		return nil, false
	}
	var r pinRecord
	if json.Unmarshal(b, &r) != nil || len(r.Packages) == 0 || !slices.Equal(r.Pinned, pinItems(pinned)) {
		return nil, false
	}
	key := packagesKey(g.layout, r.Packages)
	if _, ok := readTreeMarker(filepath.Join(cache, g.prefix+"-"+key), key); !ok {
		return nil, false
	}
	return r.Packages, true
}

// guestPinLister returns the open function of resolvePins: the private apt root of the pinned
// set's suites, updated (once a minute at most; the download reuses the lists).
func guestPinLister(cache string, mirrors guestMirrors, pinned []GuestPackage, progress io.Writer) func(context.Context) (pinLister, error) {
	return func(ctx context.Context) (pinLister, error) {
		if len(pinned) == 0 {
			return nil, errors.New("images: empty pinned set")
		}
		m, err := mirrors.forSuite(pinned[0].Suite)
		if err != nil {
			return nil, err
		}
		var suites []string
		for _, p := range pinned {
			if pm, err := mirrors.forSuite(p.Suite); err != nil {
				return nil, err
			} else if pm != m {
				return nil, fmt.Errorf("images: the pinned set %s spans two archives", describePackages(pinned))
			}
			if !containsString(suites, p.Suite) {
				suites = append(suites, p.Suite)
			}
		}
		a := guestApt(cache, m, suites, progress)
		if err := updateGuestApt(ctx, a); err != nil {
			return nil, err
		}
		return a, nil
	}
}

// guestCacheMaxAge: Guest removes guest-* cache entries that no call has used for this long
// (old pinned kernels, builds of old module sources, old initrds).
const guestCacheMaxAge = 30 * 24 * time.Hour

// guestEntry returns the top-level cache entry (guest-*) that path lies in, or "".
func guestEntry(cache, path string) string {
	rel, err := filepath.Rel(cache, path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return ""
	}
	top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	if !strings.HasPrefix(top, "guest-") {
		return ""
	}
	return top
}

// entryStamp is the file whose mtime says when a cache entry was last used.
func entryStamp(cache, name string) string {
	p := filepath.Join(cache, name)
	switch {
	case strings.HasPrefix(name, "guest-initrd-"), strings.HasSuffix(name, ".resolved"):
		return p
	case strings.HasPrefix(name, "guest-vmlinux-"):
		return filepath.Join(p, "vmlinux")
	}
	return filepath.Join(p, markerName)
}

// pruneGuestCache marks the entries holding used as used now and removes guest-* entries
// unused for longer than maxAge. Trees are removed under their lock, and only when nobody
// holds it; folders being built (.tmp-*) are left to the provisioners.
func pruneGuestCache(ctx context.Context, cache string, used []string, maxAge time.Duration, progress io.Writer) {
	now := time.Now()
	keep := map[string]bool{}
	for _, u := range used {
		if e := guestEntry(cache, u); e != "" && !keep[e] {
			keep[e] = true
			os.Chtimes(entryStamp(cache, e), now, now)
		}
	}
	all, _ := filepath.Glob(filepath.Join(cache, "guest-*"))
	for _, p := range all {
		name := filepath.Base(p)
		if keep[name] || strings.HasSuffix(name, ".lock") || strings.Contains(name, ".tmp-") {
			continue
		}
		st, err := os.Stat(entryStamp(cache, name))
		if err != nil || now.Sub(st.ModTime()) < maxAge {
			continue
		}
		note := func() {
			fmt.Fprintf(progress, "guest: removing %s (unused since %s)\n", p, st.ModTime().Format(time.DateOnly))
		}
		if strings.HasPrefix(name, "guest-initrd-") || strings.HasSuffix(name, ".resolved") {
			note()
			os.Remove(p) // content-addressed or a record, written by rename: nothing to lock
			continue
		}
		// The lock file stays: removing it would let a waiter and a newcomer lock two different
		// files.
		lctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		l, err := lockFile(lctx, p+".lock", nil)
		cancel()
		if err != nil {
			continue
		}
		note()
		os.RemoveAll(p)
		l.Unlock()
	}
}

// ownKernel fills g from a kernel of the user's own (GuestOptions.Kernel, HeadersDir,
// ModulesDir).
func ownKernel(ctx context.Context, cache string, opts GuestOptions, g *GuestImage, progress io.Writer) error {
	if opts.Kernel == "" {
		return errors.New("images: GuestOptions.HeadersDir without Kernel")
	}
	kernel, err := filepath.Abs(opts.Kernel)
	if err != nil {
		return err
	}
	if opts.HeadersDir != "" {
		if g.KernelRelease, err = headersRelease(opts.HeadersDir); err != nil {
			return err
		}
	}
	if g.Kernel, g.PVH, err = ownVmlinux(ctx, cache, kernel, progress); err != nil {
		return err
	}
	if opts.ModulesDir != "" {
		mods, err := findModules(opts.ModulesDir, VirtioModules)
		if err != nil {
			return err
		}
		for _, m := range VirtioModules {
			if mods[m] != "" {
				g.VirtioModules = append(g.VirtioModules, mods[m])
			}
		}
	}
	if len(g.VirtioModules) < len(VirtioModules) {
		fmt.Fprintf(progress, "guest: %d of %d virtio modules found; the others must be built into %s\n",
			len(g.VirtioModules), len(VirtioModules), kernel)
	}
	return nil
}

// ownVmlinux returns a kernel of the user's own as a PVH vmlinux: the file itself when it is
// one, else the vmlinux unpacked from it (cached in guest-vmlinux-<hash of the file>/). A
// bzImage that cannot be unpacked is returned as it is (pvh false): slower to boot, but fine.
func ownVmlinux(ctx context.Context, cache, kernel string, progress io.Writer) (string, bool, error) {
	b, err := os.ReadFile(kernel)
	if err != nil {
		return "", false, err
	}
	if bytes.HasPrefix(b, []byte(elf.ELFMAG)) {
		if _, err := PVHEntry(bytes.NewReader(b)); err != nil {
			return "", false, fmt.Errorf("images: %s: %w", kernel, err)
		}
		return kernel, true, nil
	}
	sum := sha256.Sum256(b)
	out := filepath.Join(cache, "guest-vmlinux-"+hex.EncodeToString(sum[:8]), "vmlinux")
	if _, err := os.Stat(out); err == nil {
		return out, true, nil
	}
	if err := ExtractVmlinux(ctx, kernel, out); err != nil {
		fmt.Fprintf(progress, "guest: booting %s as a bzImage: %v\n", kernel, err)
		return kernel, false, nil
	}
	return out, true, nil
}

// lockedWriter serialises writes to a Progress writer shared by goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// findModuleSrc finds the guest/ folder of the vgpu Go module that contains the working
// directory.
func findModuleSrc() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if modulePathOf(b) == "vgpu" {
				src := filepath.Join(dir, "guest")
				if _, err := os.Stat(filepath.Join(src, "Kbuild")); err == nil {
					return src, nil
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("images: no test module sources: set GuestOptions.ModuleSrc to the repository's guest/ folder (or Module to a built vgpu_test.ko)")
		}
		dir = parent
	}
}

func modulePathOf(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}
