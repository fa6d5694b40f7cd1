package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// guestKmodsLayout is mixed into the cache key of the guest kernel's whole module tree.
const guestKmodsLayout = "guest-kmods-v1"

// KernelModules returns the named modules of the guest kernel, for a RunPlan: each after the
// modules it depends on (modinfo depends=, recursively), dependencies marked, no module twice.
// Names use '_' or '-' alike. A module built into the kernel (modules.builtin) needs no loading
// and is left out. For the pinned Debian kernel the whole module tree (the initramfs carries
// only the virtio set) is provisioned on first use into guest-kmods-<key>/, from the same
// linux-image package; a kernel of your own needs GuestOptions.ModulesDir.
func (g *GuestImage) KernelModules(ctx context.Context, names []string, progress io.Writer) ([]PlanModule, error) {
	if progress == nil {
		progress = io.Discard
	}
	if g.kmods == nil {
		return nil, errors.New("images: the guest kernel's modules are not available (with your own kernel, give GuestOptions.ModulesDir / --modules)")
	}
	dir, err := g.kmods(ctx, progress)
	if err != nil {
		return nil, err
	}
	return resolveKernelModules(dir, names)
}

// resolveKernelModules finds names and their dependencies under dir (a lib/modules/<release>).
func resolveKernelModules(dir string, names []string) ([]PlanModule, error) {
	index := map[string]string{} // module name → path
	compressed := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "build" || d.Name() == "source" {
				return filepath.SkipDir
			}
			return nil
		}
		base := d.Name()
		if n, ok := strings.CutSuffix(base, ".ko"); ok {
			if _, dup := index[kmodName(n)]; !dup {
				index[kmodName(n)] = p
			}
			return nil
		}
		for _, ext := range []string{".ko.xz", ".ko.zst", ".ko.gz"} {
			if n, ok := strings.CutSuffix(base, ext); ok {
				compressed[kmodName(n)] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(dir, "modules.builtin")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if n, ok := strings.CutSuffix(filepath.Base(strings.TrimSpace(l)), ".ko"); ok {
				builtin[kmodName(n)] = true
			}
		}
	}
	var out []PlanModule
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, dep bool, chain []string) error
	visit = func(name string, dep bool, chain []string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("images: module dependency cycle: %s", strings.Join(append(chain, name), " → "))
		case 2:
			return nil
		}
		p, ok := index[name]
		if !ok {
			switch {
			case builtin[name]:
				state[name] = 2
				return nil
			case compressed[name]:
				return fmt.Errorf("images: %s is compressed in %s; busybox insmod needs plain .ko files", name, dir)
			case len(chain) > 0:
				return fmt.Errorf("images: %s needs %s, which is not in %s", chain[len(chain)-1], name, dir)
			}
			return fmt.Errorf("images: the guest kernel has no module %s (in %s)%s", name, dir, similarModules(index, name))
		}
		state[name] = 1
		info, err := ModuleInfo(p)
		if err != nil {
			return err
		}
		for _, d := range strings.Split(first(info["depends"]), ",") {
			if d = strings.TrimSpace(d); d != "" {
				if err := visit(kmodName(d), true, append(chain, name)); err != nil {
					return err
				}
			}
		}
		state[name] = 2
		out = append(out, PlanModule{Name: name, Path: p, Dependency: dep})
		return nil
	}
	for _, n := range names {
		if err := visit(kmodName(n), false, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// kmodName is the kernel's spelling of a module name ('-' and '_' are the same to it).
func kmodName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// similarModules suggests up to five module names containing name.
func similarModules(index map[string]string, name string) string {
	var s []string
	for n := range index {
		if strings.Contains(n, name) {
			s = append(s, n)
		}
	}
	if len(s) == 0 {
		return ""
	}
	sort.Strings(s)
	if len(s) > 5 {
		s = s[:5]
	}
	return "; similar: " + strings.Join(s, ", ")
}

// provisionKernelModules unpacks the whole lib/modules of the pinned kernel's linux-image
// package into <cache>/guest-kmods-<key>/ once, and returns its lib/modules/<release>.
func provisionKernelModules(ctx context.Context, cache string, pkgs []GuestPackage, mirrors guestMirrors, progress io.Writer) (string, error) {
	var img []GuestPackage
	release := ""
	for _, p := range pkgs {
		if r, ok := strings.CutPrefix(p.Name, "linux-image-"); ok {
			img, release = []GuestPackage{p}, r
		}
	}
	if img == nil {
		return "", errors.New("images: the guest package set has no linux-image-*")
	}
	key := packagesKey(guestKmodsLayout, img)
	final := filepath.Join(cache, "guest-kmods-"+key)
	modules := filepath.Join(final, "lib", "modules", release)
	if _, ok := readTreeMarker(final, key); ok {
		now := time.Now()
		os.Chtimes(filepath.Join(final, markerName), now, now) // in use: keep it from pruning
		return modules, nil
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Minute)
	defer cancel()
	l, err := lockFile(ctx, final+".lock", progress)
	if err != nil {
		return "", err
	}
	defer l.Unlock()
	if _, ok := readTreeMarker(final, key); ok {
		return modules, nil
	}
	if err := removeLeftovers(final, "guest-kmods", progress); err != nil {
		return "", err
	}
	start := time.Now()
	fmt.Fprintf(progress, "guest-kmods: provisioning the modules of %s into %s\n", img[0], final)
	tmp, err := os.MkdirTemp(cache, filepath.Base(final)+".tmp-")
	if err != nil {
		return "", err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	debs, err := downloadGuestPackages(ctx, cache, img, mirrors, filepath.Join(tmp, ".debs"), progress)
	if err != nil {
		return "", err
	}
	for _, d := range debs {
		if err := unpackFiltered(ctx, d, tmp, []string{"--wildcards", "./lib/modules/*"}); err != nil {
			return "", err
		}
	}
	if err := os.RemoveAll(filepath.Join(tmp, ".debs")); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(tmp, "lib", "modules", release)); err != nil {
		return "", fmt.Errorf("images: %s has no lib/modules/%s", img[0], release)
	}
	m := &treeMarker{Key: key, Packages: []string{img[0].String()}, Release: release, Created: time.Now().UTC(), Seconds: time.Since(start).Seconds()}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := writeFileAtomic(filepath.Join(tmp, markerName), append(b, '\n')); err != nil {
		return "", err
	}
	if err := syncDir(tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	done = true
	syncDir(cache)
	fmt.Fprintf(progress, "guest-kmods: ready in %.1fs\n", time.Since(start).Seconds())
	return modules, nil
}
