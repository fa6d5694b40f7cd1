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
	"path"
	"path/filepath"
	"strings"
	"time"
)

// guestProgLayout is mixed into the cache key of a guest program build; bump it when the build
// (its flags, its environment) changes.
const guestProgLayout = "guest-prog-v1 linux/amd64 cgo=0 trimpath"

// DRMTestPackage is the import path of the DRM suite's userspace program, built into the DRM
// initramfs as /bin/vgpu-drmtest.
const DRMTestPackage = "vgpu/guest/drmtest"

// goProgEnv is the environment of go list and go build for a guest program: a static
// linux/amd64 binary, whatever the host.
func goProgEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		switch k {
		case "CGO_ENABLED", "GOOS", "GOARCH", "GOAMD64", "GOFLAGS":
			continue
		}
		env = append(env, e)
	}
	// -mod=readonly: the build must not rewrite the checkout's go.mod; -buildvcs=false: a
	// worktree's VCS state is no input of the program (and not part of its key).
	return append(env, "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOAMD64=v1", "GOFLAGS=-mod=readonly -buildvcs=false")
}

// goPackage is what GoProgramKey reads of one package from go list -deps -json.
type goPackage struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles    []string
	SFiles     []string
	EmbedFiles []string
	Module     *struct {
		Path    string
		Version string
		Main    bool
		Sum     string
		Replace *struct {
			Path    string
			Version string
			Sum     string
		}
	}
	Error *struct{ Err string }
}

// goCommand runs the go tool in dir with the guest program environment and returns stdout.
func goCommand(ctx context.Context, dir string, args ...string) ([]byte, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return nil, errors.New("images: the go tool is not in PATH: it builds the guest's userspace program")
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = goProgEnv()
	cmd.WaitDelay = 5 * time.Second
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("images: go %s in %s: %w\n%s", strings.Join(args, " "), dir, err, lastLines(stderr.String(), 40))
	}
	return out.Bytes(), nil
}

// GoProgramKey is the cache key of a static linux/amd64 build of pkg in the Go module at root:
// the go tool's version, every file the build compiles or embeds of each package pkg imports
// from modules on disk (the main module, and modules replaced by a folder) by name and
// content, and the path, version and checksum of each other module. The same program from the
// same sources gives the same key, wherever the checkout is.
func GoProgramKey(ctx context.Context, root, pkg string) (string, error) {
	ver, err := goCommand(ctx, root, "env", "GOVERSION")
	if err != nil {
		return "", err
	}
	out, err := goCommand(ctx, root, "list", "-deps", "-json=ImportPath,Dir,Standard,GoFiles,SFiles,EmbedFiles,Module,Error", pkg)
	if err != nil {
		return "", err
	}
	items := []string{"go " + strings.TrimSpace(string(ver)), "main " + pkg}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			return "", fmt.Errorf("images: go list %s: %w", pkg, err)
		}
		if p.Error != nil {
			return "", fmt.Errorf("images: go list %s: %s: %s", pkg, p.ImportPath, p.Error.Err)
		}
		if p.Standard {
			continue // the go version covers it
		}
		m := p.Module
		switch {
		case m == nil:
			return "", fmt.Errorf("images: go list %s: %s belongs to no module", pkg, p.ImportPath)
		case !m.Main && (m.Replace == nil || m.Replace.Version != ""):
			// From the module cache: its version and checksum name its content.
			v, sum := m.Version, m.Sum
			if m.Replace != nil {
				v, sum = m.Replace.Path+"@"+m.Replace.Version, m.Replace.Sum
			}
			items = append(items, "module "+m.Path+" "+v+" "+sum)
			continue
		}
		files := append(append(append([]string(nil), p.GoFiles...), p.SFiles...), p.EmbedFiles...)
		for _, f := range files {
			sum, err := fileSHA256(filepath.Join(p.Dir, filepath.FromSlash(f)))
			if err != nil {
				return "", err
			}
			items = append(items, "src "+p.ImportPath+" "+f+" "+sum)
		}
	}
	return Key(guestProgLayout, items), nil
}

// progMarker is written last into a program build folder.
type progMarker struct {
	Key     string    `json:"key"`
	Package string    `json:"package"`
	Binary  string    `json:"binary"`
	Created time.Time `json:"created"`
	Seconds float64   `json:"build_seconds"`
}

// BuildGoProgram builds pkg (an import path, or a ./relative package of root) of the Go module
// at root as a static linux/amd64 binary for the guest (CGO_ENABLED=0, -trimpath) into
// <cache>/guest-prog-<key>/<name> (key: GoProgramKey) and returns its path; a second call with
// the same sources returns the cached binary without running the compiler.
func BuildGoProgram(ctx context.Context, root, pkg, name, cache string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	if name == "" || strings.ContainsAny(name, "/\\") {
		return "", fmt.Errorf("images: bad program name %q", name)
	}
	var err error
	if root, err = filepath.Abs(root); err != nil {
		return "", err
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Minute)
	defer cancel()
	key, err := GoProgramKey(ctx, root, pkg)
	if err != nil {
		return "", err
	}
	final := filepath.Join(cache, "guest-prog-"+key)
	if p, ok := loadProgBuild(final, key); ok {
		return p, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	l, err := lockFile(ctx, final+".lock", progress)
	if err != nil {
		return "", err
	}
	defer l.Unlock()
	if p, ok := loadProgBuild(final, key); ok {
		return p, nil
	}
	if err := removeLeftovers(final, "guest-prog", progress); err != nil {
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
	start := time.Now()
	fmt.Fprintf(progress, "guest-prog: building %s (static linux/amd64) in %s\n", pkg, root)
	bin := filepath.Join(tmp, name)
	if _, err := goCommand(ctx, root, "build", "-trimpath", "-o", bin, pkg); err != nil {
		return "", err
	}
	if err := checkStaticELF(bin); err != nil {
		return "", err
	}
	m := progMarker{Key: key, Package: pkg, Binary: name, Created: time.Now().UTC(), Seconds: time.Since(start).Seconds()}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := writeFileAtomic(filepath.Join(tmp, markerName), append(b, '\n')); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	done = true
	fmt.Fprintf(progress, "guest-prog: built %s in %.1fs\n", name, m.Seconds)
	return filepath.Join(final, name), nil
}

func loadProgBuild(dir, key string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, markerName))
	if err != nil {
		return "", false
	}
	var m progMarker
	if json.Unmarshal(b, &m) != nil || m.Key != key || m.Binary == "" || path.Base(m.Binary) != m.Binary {
		return "", false
	}
	p := filepath.Join(dir, m.Binary)
	if _, err := os.Stat(p); err != nil {
		return "", false
	}
	return p, true
}

// findModuleRoot returns the folder of the vgpu Go module (its go.mod) that contains the
// working directory.
func findModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePathOf(b) == "vgpu" {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("images: not inside a vgpu checkout: the DRM suite builds its userspace program from the repository (set GuestOptions.GoModule, or run from the checkout)")
		}
		dir = parent
	}
}
