package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Package is one Debian package at an exact version.
type Package struct {
	Name    string
	Version string
}

// String returns the name=version form apt-get download takes.
func (p Package) String() string { return p.Name + "=" + p.Version }

// qemuPackages is the pinned QEMU set: qemu-system-x86 from trixie-backports, the shared
// libraries its binary links against (the ldd closure, trixie's glibc included) and the
// firmware (qemu-system-data for linuxboot/pvh/kvmvapic/qboot, seabios for bios-256k.bin).
// It deliberately omits qemu-system-common (helpers, loadable modules), ipxe-qemu (NIC ROMs;
// VMs run with -nic none) and the GUI/audio part of apt's dependency closure.
//
// This table is the only place the versions live; its hash names the cache folder, so any
// change here provisions a fresh tree.
var qemuPackages = []Package{
	{"qemu-system-x86", "1:11.1.3+ds-2~bpo13+1"},
	{"qemu-system-data", "1:11.1.3+ds-2~bpo13+1"},
	{"seabios", "1.17.0-1~bpo13+1"},
	{"libaio1t64", "0.3.113-8+b1"},
	{"libatomic1", "14.2.0-19"},
	{"libblkid1", "2.41.5-0+deb13u1"},
	{"libbpf1", "1:1.5.0-3"},
	{"libc6", "2.41-12+deb13u5"},
	{"libcap2", "1:2.75-10+deb13u1+b3"},
	{"libcapstone5", "5.0.7-1~deb13u1"},
	{"libdaxctl1", "81-1"},
	{"libelf1t64", "0.196-1~bpo13+2"},
	{"libfdt1", "1.7.2-2+b1"},
	{"libffi8", "3.4.8-2"},
	{"libfuse3-4", "3.17.2-3"},
	{"libglib2.0-0t64", "2.84.4-3~deb13u5"},
	{"libgmp10", "2:6.3.0+dfsg-3"},
	{"libgnutls30t64", "3.8.9-3+deb13u4"},
	{"libhogweed6t64", "3.10.1-1"},
	{"libibverbs1", "56.1-1"},
	{"libidn2-0", "2.3.8-2"},
	{"libjpeg62-turbo", "1:2.1.5-4"},
	{"libkmod2", "34.2-2"},
	{"libmount1", "2.41.5-0+deb13u1"},
	{"libndctl6", "81-1"},
	{"libnettle8t64", "3.10.1-1"},
	{"libnl-3-200", "3.7.0-2"},
	{"libnl-route-3-200", "3.7.0-2"},
	{"libnuma1", "2.0.19-1"},
	{"libp11-kit0", "0.25.5-3"},
	{"libpcre2-8-0", "10.46-1~deb13u3"},
	{"libpixman-1-0", "0.44.0-3"},
	{"libpmem1", "1.13.1-1.1+b1"},
	{"libpng16-16t64", "1.6.48-1+deb13u6"},
	{"librdmacm1t64", "56.1-1"},
	{"libsasl2-2", "2.1.28+dfsg1-9"},
	{"libseccomp2", "2.6.0-2"},
	{"libselinux1", "3.8.1-1"},
	{"libslirp0", "4.8.0-1+deb13u1"},
	{"libssl3t64", "3.5.9-1~deb13u1"},
	{"libtasn1-6", "4.20.0-2+deb13u1"},
	{"libudev1", "257.13-1~deb13u1"},
	{"libunistring5", "1.3-2"},
	{"liburing2", "2.9-1"},
	{"libuuid1", "2.41.5-0+deb13u1"},
	{"libvdeplug2t64", "4.0.1-5.1+b1"},
	{"libzstd1", "1.5.7+dfsg-1"},
	{"zlib1g", "1:1.3.dfsg+really1.3.1-1+deb13u1"},
}

// QEMUPackages returns a copy of the pinned QEMU package set.
func QEMUPackages() []Package { return append([]Package(nil), qemuPackages...) }

// qemuLayout is mixed into the cache key; bump it when the way the tree is built changes.
const qemuLayout = "qemu-tree-v1 amd64"

// QEMUCacheKey names the cache folder of a package set (qemu-<key>).
func QEMUCacheKey(pkgs []Package) string {
	items := make([]string, len(pkgs))
	for i, p := range pkgs {
		items[i] = p.String()
	}
	return Key(qemuLayout, items)
}

// MinQEMU is the oldest QEMU with the vfio-user-pci client.
var MinQEMU = Version{Major: 10, Minor: 1}

// Version is a QEMU version as printed by --version.
type Version struct {
	Major, Minor, Micro int
	Text                string // the whole first line, e.g. "QEMU emulator version 11.1.3 (Debian 1:11.1.3+ds-1~bpo13+1)"
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Micro) }

// AtLeast reports whether v >= o (Text is ignored).
func (v Version) AtLeast(o Version) bool {
	if v.Major != o.Major {
		return v.Major > o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor > o.Minor
	}
	return v.Micro >= o.Micro
}

var versionRE = regexp.MustCompile(`QEMU emulator version (\d+)\.(\d+)(?:\.(\d+))?`)

// ParseVersion reads the output of qemu-system-* --version.
func ParseVersion(out string) (Version, error) {
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		return Version{}, fmt.Errorf("images: no QEMU version in %q", firstLine(out))
	}
	var v Version
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		v.Micro, _ = strconv.Atoi(m[3])
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, m[0]) {
			v.Text = strings.TrimSpace(line)
			break
		}
	}
	return v, nil
}

// CheckVersion tells whether --version output names a QEMU new enough for vgpu.
func CheckVersion(out string) (Version, error) {
	v, err := ParseVersion(out)
	if err != nil {
		return v, err
	}
	if !v.AtLeast(MinQEMU) {
		return v, fmt.Errorf("images: QEMU %s is older than %d.%d (no vfio-user-pci)", v, MinQEMU.Major, MinQEMU.Minor)
	}
	return v, nil
}

// hasVfioUser tells whether `-device help` output lists the vfio-user-pci device.
func hasVfioUser(deviceHelp string) bool {
	return strings.Contains(deviceHelp, `name "vfio-user-pci"`)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// QEMUOptions tunes QEMU.
type QEMUOptions struct {
	CacheDir string    // "" → CacheDir()
	Progress io.Writer // provisioning progress; nil → discarded
	// NoSystem ignores qemu-system-x86_64 in PATH and always uses the pinned Debian build.
	NoSystem bool
	// Mirror is the Debian archive ("" → HostMirror(): $VGPU_DEBIAN_MIRROR or the host's apt
	// sources), consulted only when QEMU must be downloaded. It is not part of the cache key.
	Mirror string
}

// QEMUInstall is a runnable qemu-system-x86_64.
type QEMUInstall struct {
	// Root is the unpacked package tree; "" for a system binary.
	Root string
	// Binary is the qemu-system-x86_64 executable.
	Binary string
	// Loader and LibDir run a provisioned binary with its own glibc ("" for a system binary).
	Loader, LibDir string
	// FirmwareDirs are passed as -L (QEMU data and SeaBIOS); nil for a system binary, which
	// knows its own.
	FirmwareDirs []string
	// System is true when Binary came from PATH.
	System bool

	version Version
}

// Version returns the QEMU version.
func (q *QEMUInstall) Version() Version { return q.version }

// Command returns a command that runs QEMU with args. A provisioned tree is started through
// its own dynamic loader with its own library folder (trixie's glibc is newer than the host's)
// and with -L for its firmware folders, because QEMU looks for firmware next to
// /proc/self/exe, which is the loader here.
func (q *QEMUInstall) Command(ctx context.Context, args ...string) *exec.Cmd {
	if q.Loader == "" {
		return exec.CommandContext(ctx, q.Binary, args...)
	}
	argv := []string{"--library-path", q.LibDir, q.Binary}
	for _, d := range q.FirmwareDirs {
		argv = append(argv, "-L", d)
	}
	return exec.CommandContext(ctx, q.Loader, append(argv, args...)...)
}

// probe runs QEMU with args under a short timeout and returns its combined output.
func (q *QEMUInstall) probe(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := q.Command(ctx, args...)
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", q.Binary, strings.Join(args, " "), err, firstLine(string(out)))
	}
	return string(out), nil
}

// check verifies the binary's version and that it has vfio-user-pci.
func (q *QEMUInstall) check(ctx context.Context) error {
	out, err := q.probe(ctx, "--version")
	if err != nil {
		return err
	}
	v, err := CheckVersion(out)
	if err != nil {
		return err
	}
	q.version = v
	help, err := q.probe(ctx, "-machine", "none", "-device", "help")
	if err != nil {
		return err
	}
	if !hasVfioUser(help) {
		return fmt.Errorf("images: %s (%s) has no vfio-user-pci device", q.Binary, v)
	}
	return nil
}

// marker is written last into a provisioned tree; its presence means the tree is complete.
type marker struct {
	Key       string    `json:"key"`
	Packages  []string  `json:"packages"`
	Version   string    `json:"version"`
	Created   time.Time `json:"created"`
	Seconds   float64   `json:"provision_seconds"`
	Installer string    `json:"installer"`
}

const markerName = ".vgpu-complete"

func treeInstall(root string) *QEMUInstall {
	lib := filepath.Join(root, "usr", "lib", "x86_64-linux-gnu")
	return &QEMUInstall{
		Root:         root,
		Binary:       filepath.Join(root, "usr", "bin", "qemu-system-x86_64"),
		Loader:       filepath.Join(lib, "ld-linux-x86-64.so.2"),
		LibDir:       lib,
		FirmwareDirs: []string{filepath.Join(root, "usr", "share", "qemu"), filepath.Join(root, "usr", "share", "seabios")},
	}
}

// loadTree returns the install in root if its marker says it is complete.
func loadTree(root, key string) (*QEMUInstall, bool) {
	b, err := os.ReadFile(filepath.Join(root, markerName))
	if err != nil {
		return nil, false
	}
	var m marker
	if json.Unmarshal(b, &m) != nil || m.Key != key {
		return nil, false
	}
	q := treeInstall(root)
	for _, f := range []string{q.Binary, q.Loader} {
		if _, err := os.Stat(f); err != nil {
			return nil, false
		}
	}
	v, err := ParseVersion(m.Version)
	if err != nil {
		return nil, false
	}
	q.version = v
	return q, true
}

// QEMU returns a QEMU that vgpu can use. A qemu-system-x86_64 in PATH is used when its version
// is at least MinQEMU and it lists vfio-user-pci (unless opts.NoSystem). Otherwise the pinned
// Debian set is provisioned once into <cache>/qemu-<key>: verified download, dpkg -x of each
// package, a check run of the binary, then an atomic rename. Later calls find the tree and use
// no network. Concurrent callers (processes or goroutines) wait on a lock file.
func QEMU(ctx context.Context, opts QEMUOptions) (*QEMUInstall, error) {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	if !opts.NoSystem {
		if path, err := exec.LookPath("qemu-system-x86_64"); err == nil {
			q := &QEMUInstall{Binary: path, System: true}
			if err := q.check(ctx); err == nil {
				fmt.Fprintf(progress, "qemu: using %s (%s)\n", path, q.version.Text)
				return q, nil
			} else {
				fmt.Fprintf(progress, "qemu: not using %s: %v\n", path, err)
			}
		}
	}
	cache := opts.CacheDir
	if cache == "" {
		var err error
		if cache, err = CacheDir(); err != nil {
			return nil, err
		}
	}
	return provisionQEMU(ctx, cache, qemuPackages, opts.Mirror, progress)
}

func provisionQEMU(ctx context.Context, cache string, pkgs []Package, mirror string, progress io.Writer) (*QEMUInstall, error) {
	key := QEMUCacheKey(pkgs)
	final := filepath.Join(cache, "qemu-"+key)
	if q, ok := loadTree(final, key); ok {
		return q, nil
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	l, err := lockFile(ctx, final+".lock", progress)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	// Someone else may have finished while we waited.
	if q, ok := loadTree(final, key); ok {
		return q, nil
	}
	// Whatever is left is from an interrupted run (we hold the lock): start over.
	if err := removeLeftovers(final, "qemu", progress); err != nil {
		return nil, err
	}

	start := time.Now()
	fmt.Fprintf(progress, "qemu: provisioning %d Debian packages (%s) into %s\n", len(pkgs), pkgs[0], final)
	tmp, err := os.MkdirTemp(cache, filepath.Base(final)+".tmp-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()

	apt, err := NewApt(cache, mirror, TrixieBackports, progress)
	if err != nil {
		return nil, err
	}
	if err := apt.Update(ctx); err != nil {
		return nil, err
	}
	names := make([]string, len(pkgs))
	for i, p := range pkgs {
		names[i] = p.String()
	}
	debDir := filepath.Join(tmp, ".debs")
	debs, err := apt.Download(ctx, names, debDir)
	if err != nil {
		// The archive replaces a package when Debian rebuilds it (a new Debian revision of the
		// same upstream version, e.g. a backport's -1~bpo13+1 becoming -2~bpo13+1, a glibc
		// security update): take the served revision of the pinned upstream version, with a
		// warning, rather than fail on a fresh machine. Anything else is an error.
		use, warn := sameUpstream(ctx, apt, pkgs)
		if use == nil {
			return nil, hintMissing(ctx, apt, pkgs, err)
		}
		fmt.Fprintf(progress, "qemu: WARNING: %s\n", warn)
		for i, p := range use {
			names[i] = p.String()
		}
		if debs, err = apt.Download(ctx, names, debDir); err != nil {
			return nil, hintMissing(ctx, apt, use, err)
		}
	}
	t := time.Now()
	if err := unpackDebs(ctx, debs, tmp, progress); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "qemu: unpacked %d packages in %.1fs\n", len(debs), time.Since(t).Seconds())
	if err := os.RemoveAll(debDir); err != nil {
		return nil, err
	}

	q := treeInstall(tmp)
	if err := q.check(ctx); err != nil {
		return nil, fmt.Errorf("images: provisioned QEMU does not work: %w", err)
	}
	m := marker{Key: key, Packages: names, Version: q.version.Text, Created: time.Now().UTC(),
		Seconds: time.Since(start).Seconds(), Installer: "vgpu/images"}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := writeFileAtomic(filepath.Join(tmp, markerName), append(b, '\n')); err != nil {
		return nil, err
	}
	if err := syncDir(tmp); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return nil, err
	}
	ok = true
	syncDir(cache)
	q = treeInstall(final)
	q.version = m.versionOf()
	fmt.Fprintf(progress, "qemu: %s ready in %.1fs\n", q.version.Text, time.Since(start).Seconds())
	return q, nil
}

func (m marker) versionOf() Version {
	v, _ := ParseVersion(m.Version)
	return v
}

// sameUpstream returns pkgs with each version the archive no longer serves replaced by a
// served version of the same upstream release (only the Debian revision differs), and a
// warning naming the replacements; nil when some pinned upstream version is not served at all
// (or the archive cannot be asked).
func sameUpstream(ctx context.Context, apt *Apt, pkgs []Package) ([]Package, string) {
	use := append([]Package(nil), pkgs...)
	var changed []string
	for i, p := range pkgs {
		vs, err := apt.Versions(ctx, p.Name)
		if err != nil {
			return nil, ""
		}
		if slices.Contains(vs, p.Version) {
			continue
		}
		found := false
		for _, v := range vs { // madison lists the newest first
			if upstreamVersion(v) == upstreamVersion(p.Version) {
				use[i].Version, found = v, true
				changed = append(changed, fmt.Sprintf("%s → %s", p, v))
				break
			}
		}
		if !found {
			return nil, ""
		}
	}
	if len(changed) == 0 {
		return nil, ""
	}
	return use, "pinned versions are no longer served; using the same upstream release's current Debian revision: " +
		strings.Join(changed, ", ") + " — update qemuPackages in images/qemu.go"
}

// upstreamVersion is a Debian version without its Debian revision ("1:11.1.3+ds-2~bpo13+1"
// → "1:11.1.3+ds"); a native version is its own upstream version.
func upstreamVersion(v string) string {
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		return v[:i]
	}
	return v
}

// hintMissing adds to a download error which pinned versions the archive no longer serves,
// and what it serves instead.
func hintMissing(ctx context.Context, apt *Apt, pkgs []Package, err error) error {
	var gone []string
	for _, p := range pkgs {
		vs, verr := apt.Versions(ctx, p.Name)
		if verr != nil {
			return err
		}
		found := false
		for _, v := range vs {
			found = found || v == p.Version
		}
		if !found {
			gone = append(gone, fmt.Sprintf("%s (served: %s)", p, strings.Join(vs, ", ")))
		}
	}
	if len(gone) == 0 {
		return err
	}
	return fmt.Errorf("%w\nimages: pinned versions no longer in the archive, update qemuPackages: %s", err, strings.Join(gone, "; "))
}

// unpackDebs runs dpkg-deb -x for each package into root, a few at a time. The packages never
// ship the same file, and tar tolerates directories that another extraction just created.
func unpackDebs(ctx context.Context, debs []string, root string, progress io.Writer) error {
	workers := min(runtime.NumCPU(), 4)
	jobs := make(chan string)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for deb := range jobs {
				cmd := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, root)
				cmd.WaitDelay = 5 * time.Second
				var out bytes.Buffer
				cmd.Stdout = &out
				cmd.Stderr = &out
				err := cmd.Run()
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("dpkg-deb -x %s: %w: %s", filepath.Base(deb), err, strings.TrimSpace(out.String())))
				} else {
					fmt.Fprintf(progress, "  unpacked %s\n", filepath.Base(deb))
				}
				mu.Unlock()
			}
		}()
	}
	for _, d := range debs {
		select {
		case jobs <- d:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.Join(errs...)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
