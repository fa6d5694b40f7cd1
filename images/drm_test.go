package images

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testDRMSpec is testInitrdSpec with the DRM suite.
func testDRMSpec() *initrdSpec {
	s := testInitrdSpec(false)
	s.Test = nil
	s.Suite = SuiteDRM
	s.DRM = []initrdFile{{Name: "drm", Data: []byte("drm")}, {Name: "gpu_sched", Data: []byte("sched")}}
	s.Driver = []byte("vgpu_drm")
	s.Program = []byte("\x7fELF program")
	return s
}

func TestDRMInitrdLayout(t *testing.T) {
	var b bytes.Buffer
	if err := testDRMSpec().write(&b); err != nil {
		t.Fatal(err)
	}
	entries := map[string]cpioEntry{}
	var order []string
	for _, e := range readCPIO(t, b.Bytes()) {
		entries[e.Name] = e
		order = append(order, e.Name)
	}
	for _, c := range []struct {
		name string
		mode uint32
		data string
	}{
		{suiteInitrdFile, 0o100644, "drm\n"},
		{drmInitrdDir, 0o40755, ""},
		{drmInitrdDir + "/drm.ko", 0o100644, "drm"},
		{drmInitrdDir + "/gpu_sched.ko", 0o100644, "sched"},
		{drmInitrdDir + "/load.order", 0o100644, "drm\ngpu_sched\n"},
		{drmInitrdDriver, 0o100644, "vgpu_drm"},
		{drmInitrdProgram, 0o100755, "\x7fELF program"},
		{"lib/modules/load.order", 0o100644, "virtio_ring\nvirtio\n"},
	} {
		e, ok := entries[c.name]
		if !ok || e.Mode != c.mode || string(e.Data) != c.data {
			t.Errorf("%s: %v mode %o data %q; want mode %o data %q", c.name, ok, e.Mode, e.Data, c.mode, c.data)
		}
	}
	if _, ok := entries["lib/modules/vgpu_test.ko"]; ok {
		t.Errorf("the DRM initramfs carries vgpu_test.ko")
	}
	// The paths init.sh reads are the ones written.
	for _, p := range []string{suiteInitrdFile, drmInitrdDir + "/load.order", drmInitrdDriver, drmInitrdProgram} {
		if !bytes.Contains(initScript, []byte("/"+p)) && !bytes.Contains(initScript, []byte(filepath.Dir("/"+p))) {
			t.Errorf("init.sh does not read /%s", p)
		}
	}
	// The KTAP suite's initramfs has no suite file: /init runs vgpu_test.
	b.Reset()
	testInitrdSpec(false).write(&b)
	for _, e := range readCPIO(t, b.Bytes()) {
		if e.Name == suiteInitrdFile || strings.HasPrefix(e.Name, drmInitrdDir) {
			t.Errorf("the KTAP initramfs has %s", e.Name)
		}
	}
	base := testDRMSpec().key()
	if base == testInitrdSpec(false).key() {
		t.Errorf("the DRM and KTAP initrds share a key")
	}
	for name, mut := range map[string]func(*initrdSpec){
		"drm module data":  func(s *initrdSpec) { s.DRM[0].Data = []byte("drm2") },
		"drm module order": func(s *initrdSpec) { s.DRM[0], s.DRM[1] = s.DRM[1], s.DRM[0] },
		"drm module added": func(s *initrdSpec) { s.DRM = append(s.DRM, initrdFile{Name: "drm_buddy", Data: []byte("b")}) },
		"driver":           func(s *initrdSpec) { s.Driver = []byte("vgpu_drm v2") },
		"program":          func(s *initrdSpec) { s.Program = []byte("\x7fELF program v2") },
	} {
		s := testDRMSpec()
		mut(s)
		if s.key() == base {
			t.Errorf("%s: initrd key unchanged", name)
		}
	}
}

func TestInitScriptDRM(t *testing.T) {
	// The report lines cmd/vgpu judges (drmInitProblems) and what the program gets.
	for _, s := range []string{"/etc/vgpu-suite", "drm_suite", "/lib/modules/drm", "load.order", "/lib/modules/vgpu_drm.ko",
		"mount -t debugfs debugfs /sys/kernel/debug", "/dev/dri/renderD128", "/bin/vgpu-drmtest $vgpu_test_args --iommu-mode",
		"intel_iommu=on", "kmod $m rc=", "drm-kmods rc=", "drm-insmod rc=", "render-node=", "drmtest rc=", "drm-rmmod rc=",
		"rmmod vgpu_drm", "vgpu_drmtest_wait", "irqs-after-rmmod="} {
		if !bytes.Contains(initScript, []byte(s)) {
			t.Errorf("init.sh lacks %q", s)
		}
	}
	for _, a := range []string{"kill", "wait", "tail", "head"} {
		if a != "wait" && !containsString(initApplets, a) {
			t.Errorf("applet %s has no symlink", a)
		}
	}
	// The DRM path, run by a host shell with the guest's commands replaced by stand-ins that
	// log what they were asked: the order of the modules, the program's arguments, the report.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.MkdirAll(filepath.Join(root, "lib/modules/drm"), 0o755)
	os.MkdirAll(filepath.Join(root, "run"), 0o755)
	os.WriteFile(filepath.Join(root, "lib/modules/drm/load.order"), []byte("drm\ndrm_buddy\n"), 0o644)
	os.WriteFile(filepath.Join(root, "lib/modules/vgpu_drm.ko"), nil, 0o644)
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	stub := func(name, body string) {
		os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755)
	}
	log := filepath.Join(dir, "log")
	stub("insmod", `echo "insmod $*" >>`+log)
	stub("rmmod", `echo "rmmod $*" >>`+log)
	stub("mount", `echo "mount $*" >>`+log)
	stub("vgpu-drmtest", `echo "drmtest $*" >>`+log+`; printf 'KTAP version 1\n1..1\nok 1 x'; echo oops >&2; exit 3`)
	os.MkdirAll(filepath.Join(root, "bin"), 0o755)
	os.Rename(filepath.Join(bin, "vgpu-drmtest"), filepath.Join(root, "bin", "vgpu-drmtest"))
	// The render node, as a plain file the stand-in's test finds.
	os.MkdirAll(filepath.Join(root, "dev/dri"), 0o755)
	os.WriteFile(filepath.Join(root, "dev/dri/renderD128"), nil, 0o644)
	// The function under test, with its guest paths moved under root.
	script := string(initScript)
	start := strings.Index(script, "drm_suite() {")
	end := strings.Index(script[start:], "\n}\n") + start + 3
	body := script[start:end]
	for _, p := range []string{"/lib/modules", "/run/", "/bin/vgpu-drmtest", "/proc/cmdline", "/proc/mounts", "/proc/modules", "/proc/interrupts", "/dev/dri/renderD128"} {
		body = strings.ReplaceAll(body, p, root+p)
	}
	body = strings.ReplaceAll(body, "[ -c "+root+"/dev/dri/renderD128 ]", "[ -e "+root+"/dev/dri/renderD128 ]")
	helpers := script[strings.Index(script, "say() {"):strings.Index(script, "WAIT=${vgpu_wait")]
	os.MkdirAll(filepath.Join(root, "proc"), 0o755)
	os.WriteFile(filepath.Join(root, "proc/cmdline"), []byte("console=ttyS0 intel_iommu=on quiet\n"), 0o644)
	os.WriteFile(filepath.Join(root, "proc/mounts"), []byte("devtmpfs /dev devtmpfs rw 0 0\n"), 0o644)
	os.WriteFile(filepath.Join(root, "proc/modules"), []byte("vgpu_drm 16384 0 - Live 0x0\n"), 0o644)
	os.WriteFile(filepath.Join(root, "proc/interrupts"), []byte("  24: 1 PCI-MSIX vgpu_drm\n"), 0o644)
	report := filepath.Join(dir, "report")
	prog := "P='" + InitPrefix + "'\nREPORT=" + report + "\nWAIT=5\n" +
		"now() { date +%s; }\n" + helpers + body + "drm_suite\n"
	cmd := exec.CommandContext(context.Background(), sh, "-c", prog)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "vgpu_test_args=--tests a,b", "vgpu_drmtest_wait=20"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("drm_suite: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(log)
	wantLog := "insmod " + root + "/lib/modules/drm/drm.ko\ninsmod " + root + "/lib/modules/drm/drm_buddy.ko\n" +
		"mount -t debugfs debugfs /sys/kernel/debug\ninsmod " + root + "/lib/modules/vgpu_drm.ko\n" +
		"drmtest --tests a,b --iommu-mode on\nrmmod vgpu_drm\n"
	if string(got) != wantLog {
		t.Errorf("commands:\n%s\nwant:\n%s", got, wantLog)
	}
	rep, _ := os.ReadFile(report)
	wantReport := []string{"kmod drm rc=0", "kmod drm_buddy rc=0", "drm-kmods rc=0", "drm-insmod rc=0", "render-node=" + root + "/dev/dri/renderD128",
		"KTAP version 1\n1..1\nok 1 x\n", "note: vgpu-drmtest: oops", "drmtest rc=3", "drm-rmmod rc=0", "irqs-after-rmmod=1"}
	rest := string(rep)
	for _, w := range wantReport {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("report lacks %q (in order):\n%s", w, rep)
		}
		rest = rest[i+len(w):]
	}
}

func TestParentIncludes(t *testing.T) {
	parent := t.TempDir()
	put := func(rel, data string) {
		p := filepath.Join(parent, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("pm4.h", "/* pm4 */")
	put("ktap.c", "int x;")
	put("include/abi.h", "/* abi */")
	put("include/sub/more.h", "/* more */")
	put("other/x.h", "/* x */")
	put("drm/Kbuild", "obj-m := d.o\nccflags-y := -I$(src)/../include -I$(src)/..\n")
	put("drm/d.c", "#include \"../other/x.h\"\n#include \"pm4.h\"\n")
	put("drm/uapi/u.h", "/* uapi */")
	put("plain/Kbuild", "obj-m := p.o\n")
	put("plain/p.c", "#include \"local.h\"\n")
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"drm", []string{"*.h", "include", "other"}},
		{"plain", nil},
	} {
		got, err := parentIncludes(filepath.Join(parent, tc.dir))
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.dir, got, err, tc.want)
		}
	}
	tree := moduleTree{src: filepath.Join(parent, "drm"), siblings: []string{"*.h", "include"}}
	rel, _, err := tree.files()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"drm/Kbuild", "drm/d.c", "drm/uapi/u.h", "pm4.h", "include/abi.h", "include/sub/more.h"}; !slices.Equal(rel, want) {
		t.Errorf("files %v, want %v", rel, want)
	}
	if tree.makeDir("/b") != "/b/drm" || (moduleTree{src: "/x/guest"}).makeDir("/b") != "/b" {
		t.Errorf("makeDir")
	}
	// The parent's module does not take in its nested one, nor a Go program's folder.
	put("Kbuild", "obj-m := k.o\n")
	put("prog/main.go", "package main\n")
	put("prog/c/include/drm.h", "/* mirrored */")
	own, err := moduleSources(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range own {
		if strings.HasPrefix(f, "drm/") || strings.HasPrefix(f, "plain/") || strings.HasPrefix(f, "prog/") {
			t.Errorf("guest/'s sources include the nested module's %s", f)
		}
	}
	if !containsString(own, "include/abi.h") || !containsString(own, "pm4.h") {
		t.Errorf("parent sources %v", own)
	}
	// A sibling's change changes the key.
	kdir := fakeKDir(t, "6.1.0-57-amd64", "syms")
	k1, err := tree.key(kdir)
	if err != nil {
		t.Fatal(err)
	}
	put("include/abi.h", "/* abi v2 */")
	k2, _ := tree.key(kdir)
	put("pm4.h", "/* pm4 v2 */")
	k3, _ := tree.key(kdir)
	put("ktap.c", "int y;") // not a header of the parent: not the module's
	k4, _ := tree.key(kdir)
	if k1 == k2 || k2 == k3 || k3 != k4 {
		t.Errorf("keys %s %s %s %s", k1, k2, k3, k4)
	}
}

// TestGoProgram builds a program of a small module of its own: the key covers the module's
// packages the program imports (not its tests, not other packages), the binary is static, and a
// second build is the cached one.
func TestGoProgram(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool")
	}
	ctx := t.Context()
	root := t.TempDir()
	put := func(rel, data string) {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("go.mod", "module vgpu\n\ngo 1.21\n")
	put("lib/lib.go", "package lib\n\nconst Answer = 42\n")
	put("lib/lib_test.go", "package lib\n")
	put("other/other.go", "package other\n")
	put("prog/main.go", "package main\n\nimport (\n\t\"fmt\"\n\t\"vgpu/lib\"\n)\n\nfunc main() { fmt.Println(lib.Answer) }\n")
	key := func() string {
		k, err := GoProgramKey(ctx, root, "vgpu/prog")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k1 := key()
	put("lib/lib_test.go", "package lib\n\n// changed\n")
	put("other/other.go", "package other\n\n// changed\n")
	if k := key(); k != k1 {
		t.Errorf("a test file or an unimported package changed the key")
	}
	put("lib/lib.go", "package lib\n\nconst Answer = 43\n")
	k2 := key()
	if k2 == k1 {
		t.Errorf("an imported package's change kept the key")
	}
	cache := t.TempDir()
	var progress bytes.Buffer
	bin, err := BuildGoProgram(ctx, root, "./prog", "prog", cache, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(filepath.Dir(bin)) != "guest-prog-"+k2 && !strings.Contains(bin, "guest-prog-") {
		t.Errorf("binary at %s", bin)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	if f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC {
		t.Errorf("binary: %v %v", f.Machine, f.Type)
	}
	f.Close()
	if err := checkStaticELF(bin); err != nil {
		t.Error(err)
	}
	if out, err := exec.Command(bin).Output(); err != nil || string(out) != "43\n" {
		t.Errorf("running it: %q %v", out, err)
	}
	progress.Reset()
	again, err := BuildGoProgram(ctx, root, "./prog", "prog", cache, &progress)
	if err != nil || again != bin || strings.Contains(progress.String(), "building") {
		t.Errorf("second build: %s %v (%q)", again, err, progress.String())
	}
	if _, err := BuildGoProgram(ctx, root, "./nosuch", "prog", cache, nil); err == nil {
		t.Errorf("a missing package built")
	}
	if _, err := BuildGoProgram(ctx, root, "./prog", "a/b", cache, nil); err == nil {
		t.Errorf("a program name with a slash accepted")
	}
}

func TestDRMSuiteSources(t *testing.T) {
	root, err := findModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	_, kerr := os.Stat(filepath.Join(root, "guest", "drm", "Kbuild"))
	progs, _ := filepath.Glob(filepath.Join(root, "guest", "drmtest", "*.go"))
	want := kerr == nil && len(progs) > 0
	if err := DRMSuiteSources(); (err == nil) != want {
		t.Errorf("DRMSuiteSources() = %v; driver %v, program files %d", err, kerr, len(progs))
	}
	t.Chdir(t.TempDir())
	if err := DRMSuiteSources(); err == nil || !strings.Contains(err.Error(), "not inside a vgpu checkout") {
		t.Errorf("outside a checkout: %v", err)
	}
}
