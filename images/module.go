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
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// guestModuleLayout is mixed into the module cache key; bump it when the build changes.
const guestModuleLayout = "guest-module-v2"

// isModuleSource tells which files of a module folder take part in the build (and in its
// cache key): Kbuild, Makefile and C/assembler sources and headers. Build outputs, editor
// files and dot-folders are left out.
func isModuleSource(rel string) bool {
	base := filepath.Base(rel)
	if base == "Kbuild" || base == "Makefile" {
		return true
	}
	switch filepath.Ext(base) {
	case ".c", ".h", ".S":
		return !strings.HasSuffix(base, ".mod.c")
	}
	return false
}

// moduleSources lists the source files under dir (relative, slash-separated, sorted).
func moduleSources(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if rel != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if rel != "." && (isModuleDir(p) || isGoPackageDir(p)) {
				// Another module (guest/drm in guest/), built on its own, or a Go program's
				// folder (guest/drmtest, with the C headers it mirrors): not this module's.
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && isModuleSource(rel) {
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !containsString(files, "Kbuild") && !containsString(files, "Makefile") {
		return nil, fmt.Errorf("images: %s has no Kbuild or Makefile: not a kernel module folder", dir)
	}
	sort.Strings(files)
	return files, nil
}

// isModuleDir reports whether dir holds a module of its own (a Kbuild file).
func isModuleDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "Kbuild"))
	return err == nil
}

// isGoPackageDir reports whether dir holds Go files.
func isGoPackageDir(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	return len(m) > 0
}

// moduleTree is what a module build copies into its folder: the module's own folder and what
// of its parent folder it includes from (guest/drm: ccflags -I$(src)/../include -I$(src)/..,
// for guest/include/vgpu_abi.h and guest/pm4.h). Without siblings the module's files lie at the
// top of the build folder, as they always have; with them the build folder stands for the
// parent: the module keeps its folder's name (drm/), the siblings theirs, and make runs in the
// module's.
type moduleTree struct {
	src string // the module's folder
	// siblings name what of the parent folder to copy: a folder (copied whole, e.g. "include")
	// or a pattern of the parent's own files (e.g. "*.h").
	siblings []string
}

// parentIncludeRE finds what a Kbuild or Makefile includes from the parent folder:
// $(src)/.. and $(src)/../include (also $(srctree)-free spellings with $(M)).
var parentIncludeRE = regexp.MustCompile(`\$[({](?:src|M|CURDIR)[)}]/\.\.(/[A-Za-z0-9_.-]+)?`)

// cIncludeRE finds #include "../dir/file.h" in a C source.
var cIncludeRE = regexp.MustCompile(`(?m)^\s*#\s*include\s+"\.\./([A-Za-z0-9_.-]+)/`)

// parentIncludes returns what the module in src includes from its parent folder, as
// moduleTree siblings: "*.h" for the parent itself ($(src)/..), a folder name for
// $(src)/../dir or #include "../dir/...". Only what exists is returned.
func parentIncludes(src string) ([]string, error) {
	files, err := moduleSources(src)
	if err != nil {
		return nil, err
	}
	parent := filepath.Dir(src)
	var out []string
	addDir := func(d string) {
		if st, err := os.Stat(filepath.Join(parent, d)); err == nil && st.IsDir() && !containsString(out, d) && d != filepath.Base(src) {
			out = append(out, d)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		base := path.Base(f)
		if base == "Kbuild" || base == "Makefile" {
			for _, m := range parentIncludeRE.FindAllStringSubmatch(string(b), -1) {
				if m[1] == "" {
					if !containsString(out, "*.h") {
						out = append(out, "*.h")
					}
				} else {
					addDir(strings.TrimPrefix(m[1], "/"))
				}
			}
			continue
		}
		for _, m := range cIncludeRE.FindAllStringSubmatch(string(b), -1) {
			addDir(m[1])
		}
	}
	sort.Strings(out)
	return out, nil
}

// files lists the tree's source files relative to the build folder, each with its path on the
// host.
func (m moduleTree) files() (rel, host []string, err error) {
	own, err := moduleSources(m.src)
	if err != nil {
		return nil, nil, err
	}
	prefix := ""
	if len(m.siblings) > 0 {
		prefix = filepath.Base(m.src) + "/"
	}
	for _, f := range own {
		rel = append(rel, prefix+f)
		host = append(host, filepath.Join(m.src, filepath.FromSlash(f)))
	}
	for _, s := range m.siblings {
		if strings.ContainsAny(s, "*?[") {
			matches, err := filepath.Glob(filepath.Join(filepath.Dir(m.src), s))
			if err != nil {
				return nil, nil, err
			}
			sort.Strings(matches)
			for _, p := range matches {
				if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && isModuleSource(filepath.Base(p)) {
					rel = append(rel, filepath.Base(p))
					host = append(host, p)
				}
			}
			continue
		}
		dir := filepath.Join(filepath.Dir(m.src), s)
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != dir && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			r, _ := filepath.Rel(dir, p)
			if d.Type().IsRegular() && isModuleSource(r) {
				rel = append(rel, s+"/"+filepath.ToSlash(r))
				host = append(host, p)
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("images: the module in %s includes from %s: %w", m.src, dir, err)
		}
	}
	return rel, host, nil
}

// makeDir is the folder of the build folder that make builds (M=).
func (m moduleTree) makeDir(build string) string {
	if len(m.siblings) == 0 {
		return build
	}
	return filepath.Join(build, filepath.Base(m.src))
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ModuleKey is the cache key of a module build: the module's sources (names and contents) and
// the kernel it is built for (release, Module.symvers and .config of KDIR). The same sources
// for the same kernel give the same key, wherever the folders are.
func ModuleKey(kdir, srcDir string) (string, error) { return moduleTree{src: srcDir}.key(kdir) }

func (m moduleTree) key(kdir string) (string, error) {
	rel, host, err := m.files()
	if err != nil {
		return "", err
	}
	release, err := headersRelease(kdir)
	if err != nil {
		return "", err
	}
	items := []string{"release " + release}
	for i, f := range rel {
		sum, err := fileSHA256(host[i])
		if err != nil {
			return "", err
		}
		items = append(items, "src "+f+" "+sum)
	}
	for _, f := range []string{"Module.symvers", ".config"} {
		if sum, err := fileSHA256(filepath.Join(kdir, f)); err == nil {
			items = append(items, "kdir "+f+" "+sum)
		}
	}
	return Key(guestModuleLayout, items), nil
}

// moduleMarker is written last into a module build folder.
type moduleMarker struct {
	Key    string `json:"key"`
	Module string `json:"module"` // file name of the .ko in the folder
	// Modules are all the .ko files the build made, in the Kbuild's order (modules.order);
	// markers written before it existed lack it (loadModuleBuild then lists the folder).
	Modules  []string  `json:"modules,omitempty"`
	VerMagic string    `json:"vermagic"`
	Created  time.Time `json:"created"`
	Seconds  float64   `json:"build_seconds"`
}

// BuildModule builds the out-of-tree kernel module in srcDir against kdir (a configured kernel
// tree or an unpacked headers folder) and returns the path of the .ko. The sources are copied
// into <cacheDir>/guest-module-<key> (key: ModuleKey) and built there with
// "make -C <kdir> M=<folder> modules", so srcDir stays clean and a second call with the same
// sources and kernel returns the cached module without running make. The build is bounded by
// ctx (5 minutes when ctx has no deadline); a failed build returns make's output.
func BuildModule(ctx context.Context, kdir, srcDir, cacheDir string) (string, error) {
	return buildModule(ctx, kdir, srcDir, cacheDir, nil)
}

// BuildModules is BuildModule for a folder whose Kbuild makes several modules: it returns
// every .ko the build made, in the Kbuild's order (the modules.order that make writes). The
// build and its cache entry are the same as BuildModule's.
func BuildModules(ctx context.Context, kdir, srcDir, cacheDir string, progress io.Writer) ([]string, error) {
	ko, err := buildModule(ctx, kdir, srcDir, cacheDir, progress)
	if err != nil {
		return nil, err
	}
	// The build folder: the main module may lie in a subfolder of it.
	dir := filepath.Dir(ko)
	for {
		if _, err := os.Stat(filepath.Join(dir, markerName)); err == nil || filepath.Dir(dir) == dir {
			break
		}
		dir = filepath.Dir(dir)
	}
	m, ok := readModuleMarker(dir)
	if !ok {
		return nil, fmt.Errorf("images: the module build in %s has no marker", dir)
	}
	names := m.Modules
	if len(names) == 0 {
		names = builtModules(dir)
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(dir, filepath.FromSlash(n))
	}
	return paths, nil
}

// builtModules lists the .ko files of a build folder (relative, slash-separated): those
// modules.order names first, in its order, then any others (a Kbuild may build into
// subfolders) by name. modules.order names them by absolute path for an M= build, relative
// for others, and by .o in older kernels.
func builtModules(dir string) []string {
	var names []string
	seen := map[string]bool{}
	add := func(rel string) {
		rel = filepath.ToSlash(rel)
		if seen[rel] || !strings.HasSuffix(rel, ".ko") || strings.HasPrefix(rel, "../") {
			return
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel))); err == nil {
			names = append(names, rel)
			seen[rel] = true
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "modules.order")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			l = strings.TrimSpace(l)
			if l == "" {
				continue
			}
			if n, ok := strings.CutSuffix(l, ".o"); ok {
				l = n + ".ko"
			}
			if filepath.IsAbs(l) {
				if rel, err := filepath.Rel(dir, l); err == nil && !strings.HasPrefix(rel, "..") {
					add(rel)
				} else {
					add(filepath.Base(l)) // built in a folder since renamed
				}
				continue
			}
			add(l)
		}
	}
	var rest []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".ko") {
			if rel, err := filepath.Rel(dir, p); err == nil {
				rest = append(rest, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	sort.Strings(rest)
	for _, r := range rest {
		add(r)
	}
	return names
}

// BuildModuleWith is BuildModule for a module that includes from its parent folder (siblings:
// folders beside its own such as "include", or patterns of the parent's files such as "*.h";
// guest/drm includes guest/include/vgpu_abi.h and guest/pm4.h): they are copied with it and
// are part of the cache key. What its Kbuild and sources say they include from the parent
// (parentIncludes) is copied too. It returns the .ko named want (e.g. "vgpu_drm.ko"), or the
// first one the build made when want is "" or not among them.
func BuildModuleWith(ctx context.Context, kdir, srcDir string, siblings []string, want, cacheDir string, progress io.Writer) (string, error) {
	found, err := parentIncludes(srcDir)
	if err != nil {
		return "", err
	}
	for _, s := range siblings {
		if !containsString(found, s) {
			found = append(found, s)
		}
	}
	sort.Strings(found)
	return buildModuleTree(ctx, kdir, moduleTree{src: srcDir, siblings: found}, want, cacheDir, progress)
}

// buildModule builds BuildModule's and BuildModules' folder, with what it includes from its
// parent (parentIncludes: nothing for guest/, whose build folder is laid out as it always was).
func buildModule(ctx context.Context, kdir, srcDir, cache string, progress io.Writer) (string, error) {
	return BuildModuleWith(ctx, kdir, srcDir, nil, "vgpu_test.ko", cache, progress)
}

func buildModuleTree(ctx context.Context, kdir string, tree moduleTree, want, cache string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	var err error
	if kdir, err = filepath.Abs(kdir); err != nil {
		return "", err
	}
	if tree.src, err = filepath.Abs(tree.src); err != nil {
		return "", err
	}
	srcDir := tree.src
	key, err := tree.key(kdir)
	if err != nil {
		return "", err
	}
	release, _ := headersRelease(kdir)
	final := filepath.Join(cache, "guest-module-"+key)
	if p, ok := loadModuleBuild(final, key); ok {
		return p, nil
	}
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	l, err := lockFile(ctx, final+".lock", progress)
	if err != nil {
		return "", err
	}
	defer l.Unlock()
	if p, ok := loadModuleBuild(final, key); ok {
		return p, nil
	}
	if err := removeLeftovers(final, "guest-module", progress); err != nil {
		return "", err
	}
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
	files, hostFiles, err := tree.files()
	if err != nil {
		return "", err
	}
	for i, f := range files {
		b, err := os.ReadFile(hostFiles[i])
		if err != nil {
			return "", err
		}
		dst := filepath.Join(tmp, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return "", err
		}
	}

	start := time.Now()
	mdir := tree.makeDir(tmp)
	fmt.Fprintf(progress, "module: building %s for %s (make -C %s M=%s modules)\n", filepath.Base(srcDir), release, kdir, mdir)
	if _, err := exec.LookPath("make"); err != nil {
		return "", errors.New("images: make not found: install make and gcc (apt-get install make gcc-12)")
	}
	// __FILE__ (in WARN_ON and BUG reports) relative to the module folder: "mydrv.c:65", not
	// the path of a build folder that is renamed when the build is done.
	cmd := exec.CommandContext(ctx, "make", "-C", kdir, "M="+mdir, "KCFLAGS=-fmacro-prefix-map="+mdir+"/=", "modules")
	cmd.Env = moduleBuildEnv()
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", fmt.Errorf("images: building the module in %s against %s failed: %w%s\n%s",
			srcDir, kdir, err, compilerHint(kdir), lastLines(out.String(), 80))
	}
	var all []string
	for _, n := range builtModules(mdir) {
		rel, _ := filepath.Rel(tmp, filepath.Join(mdir, filepath.FromSlash(n)))
		all = append(all, filepath.ToSlash(rel))
	}
	if len(all) == 0 {
		return "", fmt.Errorf("images: make produced no .ko in %s:\n%s", mdir, lastLines(out.String(), 40))
	}
	ko := filepath.Join(tmp, filepath.FromSlash(all[0]))
	for _, n := range all {
		if want != "" && path.Base(n) == want {
			ko = filepath.Join(tmp, filepath.FromSlash(n))
			break
		}
	}
	var vermagic string
	for _, n := range all {
		info, err := ModuleInfo(filepath.Join(tmp, filepath.FromSlash(n)))
		if err != nil {
			return "", err
		}
		vm := first(info["vermagic"])
		if release != "" && !strings.HasPrefix(vm, release+" ") {
			return "", fmt.Errorf("images: %s has vermagic %q, want kernel %s", n, vm, release)
		}
		if filepath.Join(tmp, filepath.FromSlash(n)) == ko {
			vermagic = vm
		}
	}
	m := moduleMarker{Key: key, Module: filepath.ToSlash(strings.TrimPrefix(ko, tmp+string(filepath.Separator))), Modules: all, VerMagic: vermagic, Created: time.Now().UTC(), Seconds: time.Since(start).Seconds()}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := writeFileAtomic(filepath.Join(tmp, markerName), append(b, '\n')); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	done = true
	fmt.Fprintf(progress, "module: built %s (vermagic %s) in %.1fs\n", m.Module, vermagic, m.Seconds)
	return filepath.Join(final, m.Module), nil
}

func readModuleMarker(dir string) (*moduleMarker, bool) {
	b, err := os.ReadFile(filepath.Join(dir, markerName))
	if err != nil {
		return nil, false
	}
	var m moduleMarker
	if json.Unmarshal(b, &m) != nil {
		return nil, false
	}
	return &m, true
}

func loadModuleBuild(dir, key string) (string, bool) {
	m, ok := readModuleMarker(dir)
	if !ok || m.Key != key || m.Module == "" {
		return "", false
	}
	p := filepath.Join(dir, m.Module)
	if _, err := os.Stat(p); err != nil {
		return "", false
	}
	return p, true
}

// moduleBuildEnv is the environment of make: the caller's, in the C locale, without the
// variables of an enclosing make (jobserver file descriptors we do not pass on).
func moduleBuildEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		switch k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "LC_ALL":
			continue
		}
		env = append(env, e)
	}
	return append(env, "LC_ALL=C")
}

// compilerHint names the compiler a Debian headers folder wants when it is not installed.
func compilerHint(kdir string) string {
	b, err := os.ReadFile(filepath.Join(kdir, ".kernelvariables"))
	if err != nil {
		return ""
	}
	for _, cc := range []string{"gcc-12", "gcc-13", "gcc-14", "gcc-11"} {
		if bytes.Contains(b, []byte(cc)) {
			if _, err := exec.LookPath(cc); err != nil {
				return fmt.Sprintf(" (the kernel headers use %s, which is not installed: apt-get install %s)", cc, cc)
			}
		}
	}
	return ""
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// ModuleInfo reads a kernel module's .modinfo section (what modinfo prints): key=value strings
// separated by NULs, e.g. vermagic, name, license, parm, alias, depends.
func ModuleInfo(path string) (map[string][]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("images: %s: %w", path, err)
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, fmt.Errorf("images: %s has no .modinfo section", path)
	}
	b, err := s.Data()
	if err != nil {
		return nil, err
	}
	return parseModinfo(b), nil
}

func parseModinfo(b []byte) map[string][]string {
	info := map[string][]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok && k != "" {
			info[k] = append(info[k], v)
		}
	}
	return info
}
