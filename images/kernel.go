package images

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// GuestPackage is one pinned Debian package of the guest and the suite that serves it.
type GuestPackage struct {
	Package
	Suite string // "bookworm" or "bookworm-security"
}

// GuestKernelABI is the ABI of the pinned guest kernels; the kernel release (uname -r, the
// vermagic of every module) is GuestKernelABI + "-" + the Debian flavour: "-cloud-amd64" for the
// cloud kernel that runs vgpu's KTAP suite, "-amd64" for the generic one (it has DRM, which the
// cloud kernel lacks) that runs the DRM suite (GuestKernelReleaseOf).
//
// guestPackages is the only place the guest's versions live: both flavours' image and headers,
// the -common headers and kbuild they share, and busybox-static (splitGuestPackages picks a
// flavour's set). The kernel sets come from bookworm-security, which carries newer kernels
// than bookworm between point releases and drops the old one at every kernel security update
// (about monthly). The pin stays the preferred set; when the archive no longer serves it,
// Guest falls back to the kernel the archive serves now (resolveKernelPin: the ABI the
// flavour's metapackage, linux-image-cloud-amd64 or linux-image-amd64, depends on) and says so
// on its progress writer, and likewise to the served busybox-static after a point release
// (resolveLatestPin); GuestOptions.StrictPin or $VGPU_STRICT_PIN=1 makes it fail instead.
// Update GuestKernelABI and the table together (TestGuestPinnedTable checks they agree). Cache
// keys are made from the versions actually used, so trees are never reused by mistake.
const GuestKernelABI = "6.1.0-57"

var guestPackages = []GuestPackage{
	{Package{"linux-image-6.1.0-57-cloud-amd64", "6.1.192-3"}, "bookworm-security"},
	{Package{"linux-headers-6.1.0-57-cloud-amd64", "6.1.192-3"}, "bookworm-security"},
	{Package{"linux-image-6.1.0-57-amd64", "6.1.192-3"}, "bookworm-security"},
	{Package{"linux-headers-6.1.0-57-amd64", "6.1.192-3"}, "bookworm-security"},
	{Package{"linux-headers-6.1.0-57-common", "6.1.192-3"}, "bookworm-security"},
	{Package{"linux-kbuild-6.1", "6.1.192-3"}, "bookworm-security"},
	{Package{"busybox-static", "1:1.35.0-4+deb12u1+b1"}, "bookworm"},
}

// GuestPackages returns a copy of the pinned guest package set (both kernel flavours).
func GuestPackages() []GuestPackage { return append([]GuestPackage(nil), guestPackages...) }

// The guest kernel flavours (GuestOptions.Flavour).
const (
	// FlavourCloud is Debian's cloud kernel (linux-image-*-cloud-amd64): small, fast to boot,
	// no DRM. vgpu's KTAP suite runs on it; it is the default.
	FlavourCloud = "cloud"
	// FlavourGeneric is Debian's generic kernel (linux-image-*-amd64): drm, drm_shmem_helper,
	// drm_buddy and gpu-sched as modules. The DRM suite runs on it.
	FlavourGeneric = "generic"
)

// Flavours lists the guest kernel flavours, the default first.
func Flavours() []string { return []string{FlavourCloud, FlavourGeneric} }

// DebianFlavour is the Debian flavour of a guest kernel flavour, the tail of its package names
// and of its release: "cloud-amd64" for "cloud" (and ""), "amd64" for "generic".
func DebianFlavour(flavour string) (string, error) {
	switch flavour {
	case "", FlavourCloud:
		return "cloud-amd64", nil
	case FlavourGeneric:
		return "amd64", nil
	}
	return "", fmt.Errorf("images: unknown guest kernel flavour %q (want %s)", flavour, strings.Join(Flavours(), " or "))
}

// GuestKernelRelease is the uname -r of the pinned cloud kernel.
func GuestKernelRelease() string { return GuestKernelReleaseOf(FlavourCloud) }

// GuestKernelReleaseOf is the uname -r of the pinned kernel of a flavour ("" when the flavour
// is unknown).
func GuestKernelReleaseOf(flavour string) string {
	deb, err := DebianFlavour(flavour)
	if err != nil {
		return ""
	}
	return GuestKernelABI + "-" + deb
}

// VirtioModules are the modules the guest needs for its results port, in load order (the
// kernel package ships no modules.dep; a wrong order fails with "unknown symbol"). Both
// flavours build them as modules.
var VirtioModules = []string{"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci", "virtio_console"}

// DRMModules are the generic kernel's modules vgpu_drm.ko needs (the DRM suite's initramfs
// carries them and what they depend on, in dependency order: KernelModules). dma-buf and
// sync_file are built into the kernel.
var DRMModules = []string{"drm", "drm_shmem_helper", "drm_buddy", "gpu_sched"}

// Layout tags mixed into the cache keys; bump one when the way its tree is built changes.
const (
	guestKernelLayout  = "guest-kernel-v2 amd64"
	guestBusyboxLayout = "guest-busybox-v1 amd64"
)

// packagesKey names the cache folder of a guest package set.
func packagesKey(layout string, pkgs []GuestPackage) string {
	items := make([]string, len(pkgs))
	for i, p := range pkgs {
		items[i] = p.String() + " " + p.Suite
	}
	return Key(layout, items)
}

// GuestKernelKey names the folder guest-kernel-<key> of a package set.
func GuestKernelKey(pkgs []GuestPackage) string { return packagesKey(guestKernelLayout, pkgs) }

// splitGuestPackages returns a flavour's kernel set out of pkgs (its linux-image and
// linux-headers, and the -common headers and kbuild every flavour shares, in table order) and
// busybox-static. An unknown flavour gives no kernel set.
func splitGuestPackages(pkgs []GuestPackage, flavour string) (kernel, busybox []GuestPackage) {
	deb, err := DebianFlavour(flavour)
	for _, p := range pkgs {
		switch tag := packageFlavour(p.Name); {
		case p.Name == "busybox-static":
			busybox = append(busybox, p)
		case err != nil:
		case tag == "" || tag == "common" || tag == deb:
			kernel = append(kernel, p)
		}
	}
	return kernel, busybox
}

// kernelPackageRE splits the name of a per-ABI kernel package, linux-image-<abi>-<flavour> or
// linux-headers-<abi>-<flavour> ("common" for the shared headers).
var kernelPackageRE = regexp.MustCompile(`^linux-(?:image|headers)-[0-9]+\.[0-9]+\.[0-9]+-[0-9]+-([a-z0-9][a-z0-9-]*)$`)

// packageFlavour is the Debian flavour a kernel package is built for ("cloud-amd64", "amd64",
// "common"), or "" for a package every flavour shares (linux-kbuild-*).
func packageFlavour(name string) string {
	if m := kernelPackageRE.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return ""
}

// pinLister is what resolving a pin needs from the private lists of the pin's suite: *Apt, or
// a fake with canned apt-cache output in tests.
type pinLister interface {
	// Versions lists the versions served of a package, highest first (apt-cache madison).
	Versions(ctx context.Context, name string) ([]string, error)
	// Show returns the index record of name=version (apt-cache show); "" when not served.
	Show(ctx context.Context, name, version string) (string, error)
}

// kernelImageRE splits the name of a Debian kernel image package, linux-image-<abi>-<flavour>
// (linux-image-6.1.0-57-cloud-amd64: abi 6.1.0-57, flavour cloud-amd64).
var kernelImageRE = regexp.MustCompile(`^linux-image-([0-9]+\.[0-9]+\.[0-9]+-[0-9]+)-([a-z0-9][a-z0-9-]*)$`)

// kernelSetABI returns the ABI, flavour and version of the linux-image-* package of a kernel set.
func kernelSetABI(pkgs []GuestPackage) (abi, flavour, version string, err error) {
	for _, p := range pkgs {
		if m := kernelImageRE.FindStringSubmatch(p.Name); m != nil {
			return m[1], m[2], p.Version, nil
		}
	}
	return "", "", "", errors.New("images: the guest kernel set has no linux-image-<abi>-<flavour> package")
}

// describeKernelSet names a kernel set for people: "6.1.0-57 (6.1.192-3)".
func describeKernelSet(pkgs []GuestPackage) string {
	abi, _, version, err := kernelSetABI(pkgs)
	if err != nil {
		return fmt.Sprint(pkgs)
	}
	return abi + " (" + version + ")"
}

// describePackages names a package set for people: "busybox-static 1:1.35.0-4+deb12u1+b1".
func describePackages(pkgs []GuestPackage) string {
	s := make([]string, len(pkgs))
	for i, p := range pkgs {
		s[i] = p.Name + " " + p.Version
	}
	return strings.Join(s, ", ")
}

// kbuildPackage is the name of the kbuild package of a kernel ABI: linux-kbuild-<major>.<minor>.
func kbuildPackage(abi string) string {
	f := strings.SplitN(abi, ".", 3)
	return "linux-kbuild-" + f[0] + "." + f[1]
}

// unservedPins returns the packages of pkgs whose version the lists do not serve, each as
// "name=version (served: ...)".
func unservedPins(ctx context.Context, l pinLister, pkgs []GuestPackage) ([]string, error) {
	var gone []string
	for _, p := range pkgs {
		vs, err := l.Versions(ctx, p.Name)
		if err != nil {
			return nil, err
		}
		if !containsString(vs, p.Version) {
			served := strings.Join(vs, ", ")
			if served == "" {
				served = "nothing"
			}
			gone = append(gone, fmt.Sprintf("%s (served: %s)", p.Package, served))
		}
	}
	return gone, nil
}

// rebaseKernelSet moves a kernel set from ABI from to ABI to at version: every package named
// after the ABI (linux-image-, linux-headers-<abi>-...) is renamed, linux-kbuild-<major.minor>
// follows the ABI, and all take version (one source upload builds them all).
func rebaseKernelSet(pkgs []GuestPackage, from, to, version string) []GuestPackage {
	out := make([]GuestPackage, len(pkgs))
	for i, p := range pkgs {
		switch {
		case p.Name == kbuildPackage(from):
			p.Name = kbuildPackage(to)
		case strings.Contains(p.Name, "-"+from+"-"):
			p.Name = strings.Replace(p.Name, "-"+from+"-", "-"+to+"-", 1)
		}
		p.Version = version
		out[i] = p
	}
	return out
}

// metapackageTarget reads the kernel a flavour's metapackage record (apt-cache show
// linux-image-<flavour>) depends on: linux-image-<abi>-<flavour> and the version it requires
// ("" when the dependency carries no "(= version)").
func metapackageTarget(record, flavour string) (abi, version string, ok bool) {
	for _, dep := range controlList(controlField(record, "Depends")) {
		for _, alt := range strings.Split(dep, "|") {
			name, rel, _ := strings.Cut(strings.TrimSpace(alt), "(")
			name, _, _ = strings.Cut(strings.TrimSpace(name), ":")
			m := kernelImageRE.FindStringSubmatch(name)
			if m == nil || m[2] != flavour {
				continue
			}
			rel = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rel), ")"))
			if v, ok := strings.CutPrefix(rel, "="); ok {
				version = strings.TrimSpace(v)
			}
			return m[1], version, true
		}
	}
	return "", "", false
}

// controlField returns the value of field in the first deb822 stanza of record, continuation
// lines joined with spaces; "" when absent.
func controlField(record, field string) string {
	var val []string
	in := false
	for _, line := range strings.Split(strings.ReplaceAll(record, "\r\n", "\n"), "\n") {
		if line == "" && (in || len(val) > 0) {
			break
		}
		if in && (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) {
			val = append(val, strings.TrimSpace(line))
			continue
		}
		in = false
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), field) {
			in = true
			val = append(val, strings.TrimSpace(v))
		}
	}
	return strings.Join(val, " ")
}

// controlList splits a relationship field at its commas.
func controlList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// resolveKernelPin returns the kernel set to provision for the pinned set: pinned itself when
// the lists serve every package at its pinned version; otherwise the set of the kernel the
// archive serves now: the ABI and version the flavour's metapackage (linux-image-cloud-amd64)
// depends on, with every package of the set served at that version. The metapackage's versions
// are tried highest first; it is an error when none names a complete set.
func resolveKernelPin(ctx context.Context, l pinLister, pinned []GuestPackage) ([]GuestPackage, error) {
	abi, flavour, _, err := kernelSetABI(pinned)
	if err != nil {
		return nil, err
	}
	gone, err := unservedPins(ctx, l, pinned)
	if err != nil || len(gone) == 0 {
		return pinned, err
	}
	meta := "linux-image-" + flavour
	metaVersions, err := l.Versions(ctx, meta)
	if err != nil {
		return nil, err
	}
	var tried []string
	for _, mv := range metaVersions {
		record, err := l.Show(ctx, meta, mv)
		if err != nil {
			return nil, err
		}
		newABI, version, ok := metapackageTarget(record, flavour)
		if !ok {
			tried = append(tried, fmt.Sprintf("%s=%s names no linux-image-*-%s", meta, mv, flavour))
			continue
		}
		versions := []string{version}
		if version == "" {
			if versions, err = l.Versions(ctx, "linux-image-"+newABI+"-"+flavour); err != nil {
				return nil, err
			}
			if len(versions) == 0 {
				tried = append(tried, fmt.Sprintf("%s=%s → linux-image-%s-%s, which is not served", meta, mv, newABI, flavour))
			}
		}
		for _, v := range versions {
			set := rebaseKernelSet(pinned, abi, newABI, v)
			missing, err := unservedPins(ctx, l, set)
			if err != nil {
				return nil, err
			}
			if len(missing) == 0 {
				return set, nil
			}
			tried = append(tried, fmt.Sprintf("%s=%s → %s, but %s", meta, mv, describeKernelSet(set), strings.Join(missing, "; ")))
		}
	}
	if len(metaVersions) == 0 {
		tried = append(tried, "the lists have no "+meta)
	}
	return nil, fmt.Errorf("images: pinned kernel %s is no longer served (%s) and no complete current kernel set was found: %s",
		describeKernelSet(pinned), strings.Join(gone, "; "), strings.Join(tried, "; "))
}

// resolveLatestPin returns pinned with each package the lists no longer serve at its pinned
// version moved to the highest version they serve (busybox-static after a point release). It is
// an error when a package is not served at all.
func resolveLatestPin(ctx context.Context, l pinLister, pinned []GuestPackage) ([]GuestPackage, error) {
	out := append([]GuestPackage(nil), pinned...)
	for i, p := range out {
		vs, err := l.Versions(ctx, p.Name)
		if err != nil {
			return nil, err
		}
		if containsString(vs, p.Version) {
			continue
		}
		if len(vs) == 0 {
			return nil, fmt.Errorf("images: pinned %s is no longer served, and no version of %s is", p.Package, p.Name)
		}
		out[i].Version = vs[0]
	}
	return out, nil
}

// KernelTree is an unpacked pinned kernel: image, modules, headers (KDIR) and kbuild in one
// root, plus the vmlinux extracted from the image.
type KernelTree struct {
	Root     string
	Release  string            // uname -r, e.g. 6.1.0-57-cloud-amd64
	Vmlinux  string            // uncompressed ELF with the PVH entry note
	BzImage  string            // /boot/vmlinuz-<release>
	KDir     string            // usr/src/linux-headers-<release>: make -C KDir M=... modules
	Modules  map[string]string // VirtioModules name → .ko path
	Packages []string          // name=version
}

// treeMarker is written last into a provisioned guest tree (kernel or busybox).
type treeMarker struct {
	Key      string    `json:"key"`
	Packages []string  `json:"packages"`
	Release  string    `json:"release,omitempty"`
	Created  time.Time `json:"created"`
	Seconds  float64   `json:"provision_seconds"`
}

func readTreeMarker(root, key string) (*treeMarker, bool) {
	b, err := os.ReadFile(filepath.Join(root, markerName))
	if err != nil {
		return nil, false
	}
	var m treeMarker
	if json.Unmarshal(b, &m) != nil || m.Key != key {
		return nil, false
	}
	return &m, true
}

func kernelTreeAt(root, release string, pkgs []string) (*KernelTree, error) {
	k := &KernelTree{
		Root:     root,
		Release:  release,
		Vmlinux:  filepath.Join(root, "vmlinux"),
		BzImage:  filepath.Join(root, "boot", "vmlinuz-"+release),
		KDir:     filepath.Join(root, "usr", "src", "linux-headers-"+release),
		Packages: pkgs,
	}
	for _, f := range []string{k.Vmlinux, filepath.Join(k.KDir, "Makefile")} {
		if _, err := os.Stat(f); err != nil {
			return nil, err
		}
	}
	mods, err := findModules(filepath.Join(root, "lib", "modules", release), VirtioModules)
	if err != nil {
		return nil, err
	}
	for _, m := range VirtioModules {
		if mods[m] == "" {
			return nil, fmt.Errorf("images: kernel %s has no %s.ko", release, m)
		}
	}
	k.Modules = mods
	return k, nil
}

// provisionTree builds <cache>/<prefix>-<key> once: verified download of pkgs, dpkg -x into a
// temporary folder, finish(tmp) for the package-specific work, a marker, an atomic
// rename. Concurrent callers wait on <final>.lock; leftovers of interrupted runs are removed.
func provisionTree(ctx context.Context, cache, prefix, key string, pkgs []GuestPackage, mirrors guestMirrors,
	progress io.Writer, finish func(tmp string) (release string, err error)) (string, *treeMarker, error) {
	final := filepath.Join(cache, prefix+"-"+key)
	if m, ok := readTreeMarker(final, key); ok {
		return final, m, nil
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", nil, err
	}
	l, err := lockFile(ctx, final+".lock", progress)
	if err != nil {
		return "", nil, err
	}
	defer l.Unlock()
	if m, ok := readTreeMarker(final, key); ok {
		return final, m, nil
	}
	if err := removeLeftovers(final, prefix, progress); err != nil {
		return "", nil, err
	}
	start := time.Now()
	fmt.Fprintf(progress, "%s: provisioning %d Debian packages into %s\n", prefix, len(pkgs), final)
	tmp, err := os.MkdirTemp(cache, filepath.Base(final)+".tmp-")
	if err != nil {
		return "", nil, err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	debs, err := downloadGuestPackages(ctx, cache, pkgs, mirrors, filepath.Join(tmp, ".debs"), progress)
	if err != nil {
		return "", nil, err
	}
	t := time.Now()
	if err := unpackGuestDebs(ctx, debs, tmp, progress); err != nil {
		return "", nil, err
	}
	fmt.Fprintf(progress, "%s: unpacked %d packages in %.1fs\n", prefix, len(debs), time.Since(t).Seconds())
	if err := os.RemoveAll(filepath.Join(tmp, ".debs")); err != nil {
		return "", nil, err
	}
	release, err := finish(tmp)
	if err != nil {
		return "", nil, err
	}
	names := make([]string, len(pkgs))
	for i, p := range pkgs {
		names[i] = p.String()
	}
	m := &treeMarker{Key: key, Packages: names, Release: release, Created: time.Now().UTC(), Seconds: time.Since(start).Seconds()}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := writeFileAtomic(filepath.Join(tmp, markerName), append(b, '\n')); err != nil {
		return "", nil, err
	}
	if err := syncDir(tmp); err != nil {
		return "", nil, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", nil, err
	}
	done = true
	syncDir(cache)
	fmt.Fprintf(progress, "%s: ready in %.1fs\n", prefix, time.Since(start).Seconds())
	return final, m, nil
}

// otherArches are the arch/ folders of linux-headers-*-common that an x86 module build never
// reads: a third of the package's ~10,000 files, and creating files is what makes unpacking
// slow here (about 1 ms of system time per file on these hosts).
var otherArches = []string{"alpha", "arc", "arm", "arm64", "csky", "hexagon", "ia64", "loongarch", "m68k",
	"microblaze", "mips", "nios2", "openrisc", "parisc", "powerpc", "riscv", "s390", "sh", "sparc", "um", "xtensa"}

// tarFilter returns the GNU tar member selection for a guest package whose data we only need
// in part, or nil to unpack it whole: linux-headers-*-common without the other architectures'
// headers, and linux-image-* with /boot and only the modules the initramfs carries (0.2 of
// its 91 MB of modules).
func tarFilter(deb string) []string {
	n := filepath.Base(deb)
	switch {
	case strings.HasPrefix(n, "linux-headers-") && strings.Contains(n, "-common_"):
		// "*" must not match "/": only usr/src/<package>/arch/<arch> goes.
		args := []string{"--anchored", "--no-wildcards-match-slash"}
		for _, a := range otherArches {
			args = append(args, "--exclude=./usr/src/*/arch/"+a)
		}
		return args
	case strings.HasPrefix(n, "linux-image-"):
		args := []string{"--wildcards", "./boot/*", "./lib/modules/*/modules.*"}
		for _, m := range VirtioModules {
			args = append(args, "./lib/modules/*/"+m+".ko")
		}
		return args
	}
	return nil
}

// unpackGuestDebs unpacks debs into root: the packages tarFilter knows through
// dpkg-deb --fsys-tarfile | tar -x (selected members only), beside dpkg-deb -x of the rest.
func unpackGuestDebs(ctx context.Context, debs []string, root string, progress io.Writer) error {
	var filtered, rest []string
	for _, d := range debs {
		if tarFilter(d) != nil {
			filtered = append(filtered, d)
		} else {
			rest = append(rest, d)
		}
	}
	if _, err := exec.LookPath("tar"); err != nil {
		return unpackDebs(ctx, debs, root, progress)
	}
	errc := make(chan error, len(filtered)+1)
	go func() { errc <- unpackDebs(ctx, rest, root, progress) }()
	for _, d := range filtered {
		go func() {
			err := unpackFiltered(ctx, d, root, tarFilter(d))
			if err == nil {
				fmt.Fprintf(progress, "  unpacked %s (in part)\n", filepath.Base(d))
			}
			errc <- err
		}()
	}
	var errs []error
	for range len(filtered) + 1 {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}

func unpackFiltered(ctx context.Context, deb, root string, filter []string) error {
	tar := exec.CommandContext(ctx, "tar", append([]string{"-x", "-f", "-", "-C", root}, filter...)...)
	tar.WaitDelay = 5 * time.Second
	dpkg := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	var dpkgOut, out bytes.Buffer
	dpkg.Stderr = &dpkgOut
	tar.Stdout, tar.Stderr = &out, &out
	pipe, err := dpkg.StdoutPipe()
	if err == nil {
		tar.Stdin = pipe
		if err = dpkg.Start(); err == nil {
			err = tar.Run()
			pipe.Close() // a tar that failed early must not leave dpkg-deb blocked on a full pipe
			if werr := dpkg.Wait(); err == nil {
				err = werr
			}
		}
	}
	if err != nil {
		return fmt.Errorf("unpacking %s: %w: %s", filepath.Base(deb), err, strings.TrimSpace(dpkgOut.String()+out.String()))
	}
	return nil
}

// provisionKernel returns the pinned kernel tree, provisioning it on first use.
func provisionKernel(ctx context.Context, cache string, pkgs []GuestPackage, mirrors guestMirrors, progress io.Writer) (*KernelTree, error) {
	release := ""
	for _, p := range pkgs {
		if r, ok := strings.CutPrefix(p.Name, "linux-image-"); ok {
			release = r
		}
	}
	if release == "" {
		return nil, errors.New("images: the guest package set has no linux-image-*")
	}
	abi, _, _, err := kernelSetABI(pkgs)
	if err != nil {
		return nil, err
	}
	root, m, err := provisionTree(ctx, cache, "guest-kernel", GuestKernelKey(pkgs), pkgs, mirrors, progress,
		func(tmp string) (string, error) {
			kdir := filepath.Join(tmp, "usr", "src", "linux-headers-"+release)
			if err := fixHeadersMakefile(filepath.Join(kdir, "Makefile")); err != nil {
				return "", err
			}
			if r, err := headersRelease(kdir); err != nil || r != release {
				return "", fmt.Errorf("images: headers in %s are for %q (%v), want %s", kdir, r, err, release)
			}
			if _, err := os.Stat(filepath.Join(tmp, "usr", "src", "linux-headers-"+abi+"-common", "Makefile")); err != nil {
				return "", fmt.Errorf("images: headers -common missing: %w", err)
			}
			t := time.Now()
			vmlinuz := filepath.Join(tmp, "boot", "vmlinuz-"+release)
			if err := ExtractVmlinux(ctx, vmlinuz, filepath.Join(tmp, "vmlinux")); err != nil {
				return "", err
			}
			fmt.Fprintf(progress, "guest-kernel: extracted vmlinux (PVH) from %s in %.1fs\n", filepath.Base(vmlinuz), time.Since(t).Seconds())
			kt, err := kernelTreeAt(tmp, release, nil)
			if err != nil {
				return "", err
			}
			// Of the ~90 MB of modules the initramfs needs only the virtio console set.
			return release, pruneModules(filepath.Join(tmp, "lib", "modules", release), kt.Modules)
		})
	if err != nil {
		return nil, err
	}
	return kernelTreeAt(root, m.Release, m.Packages)
}

// pruneModules removes every module file under dir except keep (name → path).
func pruneModules(dir string, keep map[string]string) error {
	kept := map[string]bool{}
	for _, p := range keep {
		kept[p] = true
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.Contains(d.Name(), ".ko") && !kept[p] {
			return os.Remove(p)
		}
		return nil
	})
}

// provisionBusybox returns the path of the pinned static busybox.
func provisionBusybox(ctx context.Context, cache string, pkgs []GuestPackage, mirrors guestMirrors, progress io.Writer) (string, error) {
	root, _, err := provisionTree(ctx, cache, "guest-busybox", packagesKey(guestBusyboxLayout, pkgs), pkgs, mirrors, progress,
		func(tmp string) (string, error) {
			bb := filepath.Join(tmp, "bin", "busybox")
			if err := checkStaticELF(bb); err != nil {
				return "", err
			}
			// Nothing else of the package is needed.
			return "", nil
		})
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "busybox"), nil
}

func checkStaticELF(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("images: %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("images: %s is dynamically linked", path)
		}
	}
	return nil
}

// guestMirrors are the archive URIs: Main serves bookworm, Security serves bookworm-security.
// An empty one is taken from the host when a suite needs it (HostMirror, HostSecurityMirror), so
// a guest that is already cached needs no mirror at all.
type guestMirrors struct{ Main, Security string }

func (m guestMirrors) forSuite(suite string) (string, error) {
	if strings.HasSuffix(suite, "-security") {
		if m.Security == "" {
			return HostSecurityMirror()
		}
		return strings.TrimRight(m.Security, "/"), nil
	}
	if m.Main == "" {
		return HostMirror()
	}
	return strings.TrimRight(m.Main, "/"), nil
}

// guestApt returns the private apt root for one mirror and its suites (main components).
func guestApt(cache, mirror string, suites []string, progress io.Writer) *Apt {
	var sources []Source
	for _, s := range suites {
		sources = append(sources, Source{s, []string{"main"}})
	}
	return newAptRoot(cache, mirror, sources, progress)
}

// guestAptUpdates records, per private root (by Dir), when this process last updated it; its
// mutex makes a second caller wait for an update under way and then skip its own.
var guestAptUpdates struct {
	sync.Mutex
	dirs map[string]*guestAptUpdate
}

type guestAptUpdate struct {
	sync.Mutex
	at time.Time
}

// updateGuestApt runs a.Update unless this process updated the same root less than a minute
// ago (and its lists are still there): resolving the pins updates the lists just before the
// download would, and concurrent Guest calls need one update, not one each.
func updateGuestApt(ctx context.Context, a *Apt) error {
	guestAptUpdates.Lock()
	if guestAptUpdates.dirs == nil {
		guestAptUpdates.dirs = map[string]*guestAptUpdate{}
	}
	u := guestAptUpdates.dirs[a.Dir]
	if u == nil {
		u = &guestAptUpdate{}
		guestAptUpdates.dirs[a.Dir] = u
	}
	guestAptUpdates.Unlock()
	u.Lock()
	defer u.Unlock()
	if time.Since(u.at) < time.Minute {
		if _, err := os.Stat(filepath.Join(a.Dir, "cache", "pkgcache.bin")); err == nil {
			return nil
		}
	}
	start := time.Now()
	if err := a.Update(ctx); err != nil {
		return err
	}
	u.at = start
	return nil
}

// downloadGuestPackages fetches pkgs, grouped by mirror (the security archive has its own URI),
// each group through its own verified private apt root; the updates run in parallel.
func downloadGuestPackages(ctx context.Context, cache string, pkgs []GuestPackage, mirrors guestMirrors, dir string, progress io.Writer) ([]string, error) {
	type group struct {
		apt    *Apt
		suites []string
		pkgs   []GuestPackage
	}
	var groups []*group
	byMirror := map[string]*group{}
	for _, p := range pkgs {
		m, err := mirrors.forSuite(p.Suite)
		if err != nil {
			return nil, err
		}
		g := byMirror[m]
		if g == nil {
			g = &group{}
			byMirror[m] = g
			groups = append(groups, g)
		}
		if !containsString(g.suites, p.Suite) {
			g.suites = append(g.suites, p.Suite)
		}
		g.pkgs = append(g.pkgs, p)
	}
	errs := make(chan error, len(groups))
	for m, g := range byMirror {
		g.apt = guestApt(cache, m, g.suites, progress)
		go func() { errs <- updateGuestApt(ctx, g.apt) }()
	}
	var uerr []error
	for range groups {
		uerr = append(uerr, <-errs)
	}
	if err := errors.Join(uerr...); err != nil {
		return nil, err
	}
	var debs []string
	for _, g := range groups {
		names := make([]string, len(g.pkgs))
		for i, p := range g.pkgs {
			names[i] = p.String()
		}
		d, err := g.apt.Download(ctx, names, dir)
		if err != nil {
			return nil, hintGuestMissing(ctx, g.apt, g.pkgs, err)
		}
		debs = append(debs, d...)
	}
	return debs, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hintGuestMissing adds to a download error which pinned versions the archive no longer
// serves, and what it serves instead; for a kernel package it also names the newest kernel
// ABI on offer.
func hintGuestMissing(ctx context.Context, apt *Apt, pkgs []GuestPackage, err error) error {
	gone, verr := unservedPins(ctx, apt, pkgs)
	if verr != nil || len(gone) == 0 {
		return err
	}
	hint := ""
	if _, flavour, _, ferr := kernelSetABI(pkgs); ferr == nil {
		meta := "linux-image-" + flavour
		if vs, verr := apt.Versions(ctx, meta); verr == nil && len(vs) > 0 {
			hint = fmt.Sprintf("; the archive's %s is %s (apt-cache show it for the ABI)", meta, vs[0])
		}
	}
	return fmt.Errorf("%w\nimages: pinned guest versions no longer in the archive, update GuestKernelABI and guestPackages: %s%s",
		err, strings.Join(gone, "; "), hint)
}

func securityFromDeb822(text string) string { return firstURI(parseDeb822(text), isSecurityEntry) }

func securityFromSourcesList(text string) string {
	return firstURI(parseSourcesList(text), isSecurityEntry)
}

// includeRE matches the one line of a Debian flavour headers Makefile,
// "include /usr/src/linux-headers-<abi>-common/Makefile".
var includeRE = regexp.MustCompile(`(?m)^include[ \t]+\S*/(linux-headers-[^/\s]+)/Makefile[ \t]*$`)

// fixHeadersMakefile points the flavour headers Makefile at the -common headers unpacked beside
// it. Debian's file includes /usr/src/linux-headers-<abi>-common/Makefile, an absolute path
// that only exists when the package is installed. The include becomes relative
// ("../linux-headers-<abi>-common/Makefile"): make -C <KDIR> runs in KDIR, so it resolves in
// the private root wherever the cache folder lives. Idempotent.
func fixHeadersMakefile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fixed, err := fixHeadersInclude(b)
	if err != nil {
		return fmt.Errorf("images: %s: %w", path, err)
	}
	if bytes.Equal(fixed, b) {
		return nil
	}
	return os.WriteFile(path, fixed, 0o644)
}

func fixHeadersInclude(b []byte) ([]byte, error) {
	if !includeRE.Match(b) {
		return nil, fmt.Errorf("no \"include .../linux-headers-*/Makefile\" line in %q", b)
	}
	return includeRE.ReplaceAll(b, []byte("include ../$1/Makefile")), nil
}

// headersRelease reads the kernel release a headers folder (KDIR) builds for: UTS_RELEASE from
// include/generated/utsrelease.h (include/config/kernel.release holds the upstream version in
// Debian's headers packages, not uname -r).
func headersRelease(kdir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(kdir, "include", "generated", "utsrelease.h"))
	if err == nil {
		if m := regexp.MustCompile(`UTS_RELEASE\s+"([^"]+)"`).FindSubmatch(b); m != nil {
			return string(m[1]), nil
		}
	}
	b, err2 := os.ReadFile(filepath.Join(kdir, "include", "config", "kernel.release"))
	if err2 != nil {
		return "", fmt.Errorf("images: %s is not a configured kernel or headers folder: %v", kdir, errors.Join(err, err2))
	}
	return strings.TrimSpace(string(b)), nil
}

// findModules looks for name.ko (or name with '-' for '_') under dir, for each name. Compressed
// modules (.ko.xz, .ko.zst, .ko.gz) are an error: busybox insmod loads plain files only.
func findModules(dir string, names []string) (map[string]string, error) {
	want := map[string]string{}
	for _, n := range names {
		want[n] = n
		want[strings.ReplaceAll(n, "_", "-")] = n
	}
	found := map[string]string{}
	var compressed []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		base := d.Name()
		for _, ext := range []string{".ko.xz", ".ko.zst", ".ko.gz"} {
			if n, ok := want[strings.TrimSuffix(base, ext)]; ok && strings.HasSuffix(base, ext) {
				compressed = append(compressed, n)
			}
		}
		if n, ok := want[strings.TrimSuffix(base, ".ko")]; ok && strings.HasSuffix(base, ".ko") && found[n] == "" {
			found[n] = p
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, n := range compressed {
		if found[n] == "" {
			return nil, fmt.Errorf("images: %s is compressed in %s; busybox insmod needs plain .ko files (decompress them first)", n, dir)
		}
	}
	return found, nil
}

// Compressed payload formats of a bzImage (arch/x86/boot/compressed), by magic.
var kernelCompressions = []struct {
	name  string
	magic []byte
	tool  []string // decompressor reading stdin, writing stdout; nil → Go's gzip
	pkg   string   // Debian package of the tool
	// sized: the build appended the little-endian uncompressed size (size_append), which the
	// tool must not see.
	sized bool
}{
	{"lz4", []byte{0x02, 0x21, 0x4c, 0x18}, []string{"lz4", "-dc"}, "lz4", true},
	{"gzip", []byte{0x1f, 0x8b, 0x08}, nil, "", false},
	{"xz", []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}, []string{"xz", "-dc", "--single-stream"}, "xz-utils", true},
	{"zstd", []byte{0x28, 0xb5, 0x2f, 0xfd}, []string{"zstd", "-dc"}, "zstd", true},
}

// LZ4LegacyMagic starts the LZ4 "legacy" frame the kernel's lz4 compression writes (lz4 -l).
var LZ4LegacyMagic = []byte{0x02, 0x21, 0x4c, 0x18}

// findLZ4Legacy returns the offset of the first LZ4 legacy frame magic in b, or -1.
func findLZ4Legacy(b []byte) int { return bytes.Index(b, LZ4LegacyMagic) }

// bzPayload locates the compressed kernel inside a bzImage from its setup header (boot protocol
// 2.08+: payload_offset and payload_length, relative to the protected-mode code after the
// setup sectors). ok is false when b has no such header.
func bzPayload(b []byte) (off, n int, ok bool) {
	if len(b) < 0x250 || string(b[0x202:0x206]) != "HdrS" || binary.LittleEndian.Uint16(b[0x206:]) < 0x208 {
		return 0, 0, false
	}
	setup := int(b[0x1f1])
	if setup == 0 {
		setup = 4
	}
	off = (setup+1)*512 + int(binary.LittleEndian.Uint32(b[0x248:]))
	n = int(binary.LittleEndian.Uint32(b[0x24c:]))
	if n <= 0 || off < 0 || off+n > len(b) {
		return 0, 0, false
	}
	return off, n, true
}

// ExtractVmlinux writes the uncompressed ELF kernel inside a bzImage to out (atomically) and
// checks that it has the PVH entry note QEMU needs to boot it directly. The cloud kernels are
// LZ4-compressed and need the lz4 tool (Debian package lz4); gzip is decoded in Go; xz and zstd
// use the xz and zstd tools. A file that already is an ELF kernel is copied.
func ExtractVmlinux(ctx context.Context, bzImage, out string) error {
	b, err := os.ReadFile(bzImage)
	if err != nil {
		return err
	}
	var elfData []byte
	if bytes.HasPrefix(b, []byte(elf.ELFMAG)) {
		elfData = b
	} else {
		elfData, err = decompressKernel(ctx, b)
		if err != nil {
			return fmt.Errorf("images: %s: %w", bzImage, err)
		}
	}
	if _, err := PVHEntry(bytes.NewReader(elfData)); err != nil {
		return fmt.Errorf("images: kernel from %s: %w", bzImage, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return writeFileAtomic(out, elfData)
}

func decompressKernel(ctx context.Context, b []byte) ([]byte, error) {
	off, n, hdr := bzPayload(b)
	if !hdr {
		// No usable setup header: find the LZ4 frame by its magic; lz4 stops at the frame's end.
		i := findLZ4Legacy(b)
		if i < 0 {
			return nil, errors.New("not a bzImage (no setup header) and no LZ4 frame found")
		}
		off, n = i, len(b)-i
	}
	payload := b[off : off+n]
	for _, c := range kernelCompressions {
		if !bytes.HasPrefix(payload, c.magic) {
			continue
		}
		var size uint32
		if c.sized && hdr && len(payload) > 4 {
			size = binary.LittleEndian.Uint32(payload[len(payload)-4:])
			payload = payload[:len(payload)-4]
		}
		var out []byte
		var err error
		if c.tool == nil {
			var zr *gzip.Reader
			if zr, err = gzip.NewReader(bytes.NewReader(payload)); err == nil {
				zr.Multistream(false)
				out, err = io.ReadAll(zr)
			}
		} else {
			out, err = runDecompressor(ctx, c.tool, c.pkg, payload)
			if err != nil && !hdr && bytes.HasPrefix(out, []byte(elf.ELFMAG)) {
				// Without the header we fed the tool the rest of the file: lz4 decodes the frame,
				// then complains about what follows it.
				err = nil
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s payload at %#x: %w", c.name, off, err)
		}
		if size != 0 && uint32(len(out)) != size {
			return nil, fmt.Errorf("%s payload: decompressed %d bytes, the image says %d", c.name, len(out), size)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown compression of the payload at %#x (% x)", off, payload[:min(len(payload), 8)])
}

func runDecompressor(ctx context.Context, tool []string, pkg string, in []byte) ([]byte, error) {
	if _, err := exec.LookPath(tool[0]); err != nil {
		return nil, fmt.Errorf("%s not found: install it (apt-get install %s)", tool[0], pkg)
	}
	ctx, cancel := withDefaultTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool[0], tool[1:]...)
	cmd.Stdin = bytes.NewReader(in)
	var out, stderr bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s: %w: %s", strings.Join(tool, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out.Bytes(), nil
}

// xenNotePHYS32Entry is XEN_ELFNOTE_PHYS32_ENTRY: the 32-bit PVH entry point. QEMU boots an ELF
// kernel directly (through pvh.bin) only when it has this note.
const xenNotePHYS32Entry = 0x12

// PVHEntry returns the PVH entry point of an ELF kernel: the Xen ELF note of type 0x12, found
// in the PT_NOTE segments (or SHT_NOTE sections).
func PVHEntry(r io.ReaderAt) (uint64, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return 0, fmt.Errorf("not an ELF kernel: %w", err)
	}
	defer f.Close()
	var blobs [][]byte
	for _, p := range f.Progs {
		if p.Type == elf.PT_NOTE {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return 0, err
			}
			blobs = append(blobs, b)
		}
	}
	if len(blobs) == 0 {
		for _, s := range f.Sections {
			if s.Type == elf.SHT_NOTE {
				if b, err := s.Data(); err == nil {
					blobs = append(blobs, b)
				}
			}
		}
	}
	for _, b := range blobs {
		if v, ok := findXenNote(b, f.ByteOrder, xenNotePHYS32Entry); ok {
			return v, nil
		}
	}
	return 0, errors.New("no PVH entry (Xen ELF note 0x12): QEMU cannot boot it directly (kernel built without CONFIG_PVH?)")
}

// findXenNote walks ELF notes (namesz, descsz, type, name, desc; 4-byte aligned) for a "Xen"
// note of the given type and returns its descriptor as a number.
func findXenNote(b []byte, bo binary.ByteOrder, typ uint32) (uint64, bool) {
	al := func(n uint32) int { return int((n + 3) &^ 3) }
	for len(b) >= 12 {
		namesz, descsz, t := bo.Uint32(b), bo.Uint32(b[4:]), bo.Uint32(b[8:])
		b = b[12:]
		if al(namesz) > len(b) {
			return 0, false
		}
		name := strings.TrimRight(string(b[:namesz]), "\x00")
		b = b[al(namesz):]
		if al(descsz) > len(b) {
			return 0, false
		}
		desc := b[:descsz]
		b = b[al(descsz):]
		if name == "Xen" && t == typ {
			switch len(desc) {
			case 4:
				return uint64(bo.Uint32(desc)), true
			case 8:
				return bo.Uint64(desc), true
			}
			return 0, true
		}
	}
	return 0, false
}
