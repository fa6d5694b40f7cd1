package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"vgpu/images"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// moduleArg is one --module NAME[=ARGS].
type moduleArg struct{ name, args string }

func parseModuleArg(s string) (moduleArg, error) {
	name, args, _ := strings.Cut(s, "=")
	name = strings.TrimSuffix(strings.TrimSpace(name), ".ko")
	if name == "" || strings.ContainsAny(name, " \t/") {
		return moduleArg{}, fmt.Errorf("--module %q: want NAME or NAME=ARGS (a module name, no path)", s)
	}
	return moduleArg{name: name, args: strings.TrimSpace(args)}, nil
}

// modName is how the kernel spells a module's name: '-' and '_' are the same to it.
func modName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// builtModule is a .ko of --module-src with its module name and the modules it needs
// (modinfo depends=, in the kernel's spelling).
type builtModule struct {
	name, path string
	depends    []string
}

func describeBuilt(kos []string) ([]builtModule, error) {
	var out []builtModule
	for _, k := range kos {
		info, err := images.ModuleInfo(k)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(filepath.Base(k), ".ko")
		if n := info["name"]; len(n) > 0 && n[0] != "" {
			name = n[0]
		}
		var deps []string
		var depends string
		if d := info["depends"]; len(d) > 0 {
			depends = d[0]
		}
		for _, d := range strings.Split(depends, ",") {
			if d = strings.TrimSpace(d); d != "" {
				deps = append(deps, modName(d))
			}
		}
		out = append(out, builtModule{name: modName(name), path: k, depends: deps})
	}
	return out, nil
}

// kernelModuleFunc resolves guest-kernel modules by name: each with its dependencies, in load
// order (dependencies first).
type kernelModuleFunc func(ctx context.Context, names []string) ([]images.PlanModule, error)

// planModules chooses the modules of a user run: with no --module every module --module-src
// built, in its Kbuild order; otherwise those named, in order, from --module-src's build or
// else from the guest kernel (with their dependencies, loaded first and marked as such). A
// built module's own dependencies on the guest kernel's modules (vgpu_drm.ko's on drm, say)
// are loaded before it the same way.
func planModules(ctx context.Context, built []builtModule, args []moduleArg, kernel kernelModuleFunc) ([]images.PlanModule, error) {
	var out []images.PlanModule
	have := map[string]bool{}
	add := func(m images.PlanModule) {
		if !have[m.Name] {
			have[m.Name] = true
			out = append(out, m)
		}
	}
	isBuilt := func(name string) bool {
		for _, b := range built {
			if b.name == name {
				return true
			}
		}
		return false
	}
	// kernelDeps adds the guest kernel's modules that b needs, before it.
	kernelDeps := func(b builtModule) error {
		for _, d := range b.depends {
			if isBuilt(d) || have[d] {
				continue // the user's own module: loaded in the order given
			}
			if kernel == nil {
				return fmt.Errorf("%s needs %s, which --module-src does not build, and the guest kernel's modules are not available", b.name, d)
			}
			mods, err := kernel(ctx, []string{d})
			if err != nil {
				return fmt.Errorf("%s needs %s: %w", b.name, d, err)
			}
			for _, m := range mods {
				m.Dependency, m.Args = true, ""
				add(m)
			}
		}
		return nil
	}
	if len(args) == 0 {
		for _, b := range built {
			if err := kernelDeps(b); err != nil {
				return nil, err
			}
			add(images.PlanModule{Name: b.name, Path: b.path})
		}
		return out, nil
	}
	for _, a := range args {
		want := modName(a.name)
		var found *builtModule
		for i := range built {
			if built[i].name == want || modName(strings.TrimSuffix(filepath.Base(built[i].path), ".ko")) == want {
				found = &built[i]
			}
		}
		if found != nil {
			if have[found.name] {
				return nil, fmt.Errorf("--module %s is given twice", a.name)
			}
			if err := kernelDeps(*found); err != nil {
				return nil, fmt.Errorf("--module %s: %w", a.name, err)
			}
			add(images.PlanModule{Name: found.name, Path: found.path, Args: a.args})
			continue
		}
		if kernel == nil {
			return nil, fmt.Errorf("--module %s: no such module in --module-src's build, and the guest kernel's modules are not available", a.name)
		}
		mods, err := kernel(ctx, []string{want})
		if err != nil {
			return nil, fmt.Errorf("--module %s: not built by --module-src; as a guest kernel module: %w", a.name, err)
		}
		if len(mods) == 0 || mods[len(mods)-1].Name != want {
			// Built into the kernel: there is nothing to load, and parameters go on the command line.
			if a.args != "" {
				return nil, fmt.Errorf("--module %s=%s: %s is built into the guest kernel; give its parameters as kernel parameters (--append %s.PARAM=VALUE)", a.name, a.args, want, want)
			}
			fmt.Fprintf(os.Stderr, "--module %s: built into the guest kernel, nothing to load\n", a.name)
			continue
		}
		for i, m := range mods {
			if i == len(mods)-1 {
				if have[m.Name] {
					return nil, fmt.Errorf("--module %s is given twice (or is a dependency of a module named before it)", a.name)
				}
				m.Args, m.Dependency = a.args, false
			} else {
				m.Dependency = true
			}
			add(m)
		}
	}
	return out, nil
}

// userModeReason says why a run is a user run, or "" for vgpu's own suite: any of --module,
// --run, --add, or a --module-src whose build has no vgpu_test.ko.
func userModeReason(mods []moduleArg, runs, adds []string, moduleSrc string, built []builtModule) string {
	switch {
	case len(mods) > 0:
		return "--module"
	case len(runs) > 0:
		return "--run"
	case len(adds) > 0:
		return "--add"
	case moduleSrc != "":
		for _, b := range built {
			if b.name == "vgpu_test" {
				return ""
			}
		}
		return "--module-src builds no vgpu_test.ko"
	}
	return ""
}

func writeLines(w io.Writer, indent string, lines []string) {
	for _, l := range lines {
		fmt.Fprintf(w, "%s%s\n", indent, l)
	}
}

// kernelModules resolves modules of the guest image's kernel (provisioning its module tree on
// first use).
func kernelModules(img *images.GuestImage) kernelModuleFunc {
	return func(ctx context.Context, names []string) ([]images.PlanModule, error) {
		return img.KernelModules(ctx, names, os.Stderr)
	}
}

// userPlan decides whether this is a user run and prepares it: the image without vgpu_test,
// the modules of --module-src built against its kernel, and the plan. It returns a nil plan
// (and no image) for vgpu's own suite; user says why a run is a user run.
func userPlan(ctx context.Context, opts images.GuestOptions, moduleSrc string, mods []moduleArg, runs []string,
	files []images.PlanFile) (img *images.GuestImage, plan *images.RunPlan, user string, err error) {
	var adds []string
	for _, f := range files {
		adds = append(adds, f.Host)
	}
	if moduleSrc == "" && userModeReason(mods, runs, adds, "", nil) == "" {
		return nil, nil, "", nil
	}
	opts.NoTestModule = true
	base, err := images.Guest(ctx, opts)
	if err != nil {
		return nil, nil, "", err
	}
	var built []builtModule
	if moduleSrc != "" {
		if base.KDir == "" {
			return nil, nil, "", errors.New("--module-src needs the guest kernel's headers (--headers with --kernel)")
		}
		cache := opts.CacheDir
		if cache == "" {
			if cache, err = images.CacheDir(); err != nil {
				return nil, nil, "", err
			}
		}
		kos, err := images.BuildModules(ctx, base.KDir, moduleSrc, cache, opts.Progress)
		if err != nil {
			return nil, nil, "", err
		}
		if built, err = describeBuilt(kos); err != nil {
			return nil, nil, "", err
		}
	}
	if user = userModeReason(mods, runs, adds, moduleSrc, built); user == "" {
		return nil, nil, "", nil // --module-src builds vgpu_test: the suite, from those sources
	}
	pm, err := planModules(ctx, built, mods, kernelModules(base))
	if err != nil {
		return nil, nil, "", err
	}
	return base, &images.RunPlan{Modules: pm, Commands: runs, Files: files}, user, nil
}
