package images

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// RunPlan is a user run (`vgpu run --module/--run/--add`): the modules /init loads, in order,
// the commands it runs after them and the files it finds in the initramfs. With a plan /init
// does not look for vgpu_test.ko; see init.sh for the lines it reports.
type RunPlan struct {
	Modules  []PlanModule
	Commands []string // each run with busybox sh, from /, stdin /dev/null
	Files    []PlanFile
}

// PlanModule is one module to load.
type PlanModule struct {
	Name string // the module's name (modinfo name, what rmmod and /proc/modules use)
	Path string // the .ko on the host
	Args string // module parameters, e.g. "warn=1 name=\"a b\""
	// Dependency marks a module loaded because a module named on the command line needs it.
	Dependency bool
}

// PlanFile puts Host (a file or a folder, copied recursively) at Guest (an absolute path) in
// the initramfs. Permission bits are kept, so executables stay executable.
type PlanFile struct {
	Host, Guest string
}

// Where the plan lives in the guest.
const (
	PlanDir        = "/etc/vgpu-run"
	planModulesDir = "lib/modules/user"
)

// ParsePlanFile reads a --add argument: HOST or HOST:GUEST. Without GUEST the file goes to
// /<base name of HOST>.
func ParsePlanFile(arg string) (PlanFile, error) {
	host, guest, ok := strings.Cut(arg, ":")
	if host == "" {
		return PlanFile{}, fmt.Errorf("--add %q: no host path", arg)
	}
	if !ok || guest == "" {
		guest = "/" + filepath.Base(host)
	}
	if !strings.HasPrefix(guest, "/") {
		return PlanFile{}, fmt.Errorf("--add %q: the guest path must be absolute", arg)
	}
	if path.Clean(guest) == "/" {
		return PlanFile{}, fmt.Errorf("--add %q: the guest path must name a file or folder, not /", arg)
	}
	return PlanFile{Host: host, Guest: path.Clean(guest)}, nil
}

// baseDirs are the folders the base initramfs has (initrdSpec.write); the overlay must not
// write them again, because the kernel applies a folder entry's mode to an existing folder.
var baseDirs = map[string]bool{"bin": true, "dev": true, "etc": true, "lib": true, "lib/modules": true,
	"proc": true, "root": true, "run": true, "sys": true, "tmp": true}

// reservedGuest are paths --add must not replace: /init and the plan itself.
func reservedGuest(name string) bool {
	name = strings.TrimPrefix(name, "/")
	pd := strings.TrimPrefix(PlanDir, "/")
	return name == "init" || name == pd || strings.HasPrefix(name, pd+"/") ||
		name == planModulesDir || strings.HasPrefix(name, planModulesDir+"/")
}

// WritePlanInitrd writes to dst the base initramfs followed by a second cpio archive with the
// plan (the kernel unpacks concatenated archives in order, so the second adds to the first).
// The base archive stays as it is in the cache and can be shared by many plans.
func WritePlanInitrd(dst, base string, plan *RunPlan) error {
	if plan == nil {
		return errors.New("images: no plan")
	}
	var overlay bytes.Buffer
	if err := writePlan(&overlay, plan); err != nil {
		return err
	}
	in, err := os.Open(base)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, in)
	if err == nil && n%4 != 0 {
		// The next archive's header must be 4-aligned; our archives always are.
		err = fmt.Errorf("images: %s is %d bytes, not a multiple of 4", base, n)
	}
	if err == nil {
		_, err = out.Write(overlay.Bytes())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// writePlan renders the plan's archive: the modules under lib/modules/user, etc/vgpu-run/
// (plan, modules, run/NNN) and the added files.
func writePlan(w io.Writer, plan *RunPlan) error {
	c := NewCPIOWriter(w)
	dirs := map[string]bool{}
	mkdirs := func(name string) {
		var parents []string
		for d := path.Dir(name); d != "." && d != "/" && d != ""; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			d := parents[i]
			if !baseDirs[d] && !dirs[d] {
				c.Dir(d, 0o755)
			}
			dirs[d] = true
		}
	}
	var mods strings.Builder
	seen := map[string]bool{}
	for _, m := range plan.Modules {
		if m.Name == "" || strings.ContainsAny(m.Name, " \t\n/") {
			return fmt.Errorf("images: bad module name %q", m.Name)
		}
		if strings.ContainsAny(m.Args, "\n\r") {
			return fmt.Errorf("images: module %s: parameters must be one line", m.Name)
		}
		if seen[m.Name] {
			return fmt.Errorf("images: module %s is listed twice", m.Name)
		}
		seen[m.Name] = true
		b, err := os.ReadFile(m.Path)
		if err != nil {
			return err
		}
		name := planModulesDir + "/" + m.Name + ".ko"
		mkdirs(name)
		c.File(name, 0o644, b)
		fmt.Fprintf(&mods, "%s /%s %s\n", m.Name, name, strings.TrimSpace(m.Args))
	}
	for _, f := range plan.Files {
		if reservedGuest(f.Guest) {
			return fmt.Errorf("images: --add %s:%s would replace a file /init needs", f.Host, f.Guest)
		}
		if err := addHostPath(c, mkdirs, dirs, f.Host, strings.TrimPrefix(path.Clean(f.Guest), "/")); err != nil {
			return err
		}
	}
	pd := strings.TrimPrefix(PlanDir, "/")
	mkdirs(pd + "/run/x")
	var desc strings.Builder
	desc.WriteString("# vgpu run plan: modules (name, path, parameters), then commands\n")
	desc.WriteString(mods.String())
	for i, cmd := range plan.Commands {
		name := fmt.Sprintf("%s/run/%03d", pd, i+1)
		c.File(name, 0o644, []byte(cmd+"\n"))
		fmt.Fprintf(&desc, "run %d: %s\n", i+1, strings.ReplaceAll(cmd, "\n", "\\n"))
	}
	c.File(pd+"/modules", 0o644, []byte(mods.String()))
	c.File(pd+"/plan", 0o644, []byte(desc.String()))
	return c.Close()
}

// addHostPath adds a host file, symlink or folder (recursively, in name order) at name.
func addHostPath(c *CPIOWriter, mkdirs func(string), dirs map[string]bool, host, name string) error {
	st, err := os.Lstat(host)
	if err != nil {
		return fmt.Errorf("images: --add: %w", err)
	}
	mkdirs(name)
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(host)
		if err != nil {
			return err
		}
		return c.Symlink(name, target)
	case st.IsDir():
		if !baseDirs[name] && !dirs[name] {
			c.Dir(name, st.Mode().Perm())
		}
		dirs[name] = true
		ents, err := os.ReadDir(host)
		if err != nil {
			return err
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		for _, e := range ents {
			if err := addHostPath(c, mkdirs, dirs, filepath.Join(host, e.Name()), name+"/"+e.Name()); err != nil {
				return err
			}
		}
		return nil
	case st.Mode().IsRegular():
		b, err := os.ReadFile(host)
		if err != nil {
			return err
		}
		return c.File(name, st.Mode(), b)
	}
	return fmt.Errorf("images: --add %s: not a file, folder or symlink", host)
}
