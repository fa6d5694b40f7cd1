package images

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func skipWithoutQEMU(t *testing.T) {
	t.Helper()
	if os.Getenv("VGPU_SKIP_QEMU") == "1" {
		t.Skip("VGPU_SKIP_QEMU=1")
	}
	if testing.Short() {
		t.Skip("downloads ~41 MB and boots VMs; skipped with -short")
	}
}

// TestGuestEndToEnd provisions the guest into an empty cache (two callers at once), checks the
// artefacts, reuses them with an unreachable mirror, rebuilds after a module source change, and
// boots the result under QEMU (no vgpu device attached: the module must report that, and /init
// must end cleanly either way).
func TestGuestEndToEnd(t *testing.T) {
	skipWithoutQEMU(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cache := t.TempDir()
	src := repoGuestDir(t)

	start := time.Now()
	var wg sync.WaitGroup
	res := make([]*GuestImage, 2)
	errs := make([]error, 2)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = Guest(ctx, GuestOptions{CacheDir: cache, ModuleSrc: src,
				Progress: &lineLogger{t: t, prefix: []string{"[a] ", "[b] "}[i]}})
		}()
	}
	wg.Wait()
	cold := time.Since(start)
	for i := range errs {
		if errs[i] != nil {
			t.Fatalf("Guest #%d: %v", i, errs[i])
		}
	}
	g := res[0]
	t.Logf("cold: %.1fs: %+v", cold.Seconds(), *g)
	if res[1].Kernel != g.Kernel || res[1].Initrd != g.Initrd || res[1].ModulePath != g.ModulePath {
		t.Errorf("two callers got different guests:\n%+v\n%+v", *g, *res[1])
	}
	checkGuest(t, g)
	left, _ := filepath.Glob(filepath.Join(cache, "*.tmp-*"))
	if len(left) != 0 {
		t.Errorf("leftovers: %v", left)
	}

	// The private lists serve the kernel versions used (Apt.Versions is apt-cache madison): the
	// pinned ones, or those of the fallback when the archive has moved on.
	mirrors := guestMirrors{} // the host's archives
	pinnedKernel, pinnedBusybox := splitGuestPackages(GuestPackages(), FlavourCloud)
	used := usedKernelSet(t, g, pinnedKernel)
	if len(g.Fallbacks) != 0 {
		t.Logf("the archive no longer serves a pin: %q", g.Fallbacks)
	} else if !slices.Equal(used, pinnedKernel) {
		t.Errorf("no fallback, but the kernel set used is %v", used)
	}
	for _, p := range append(used, pinnedBusybox...) {
		m, err := mirrors.forSuite(p.Suite)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := guestApt(cache, m, []string{p.Suite}, nil).Versions(ctx, p.Name)
		switch {
		case err != nil:
			t.Errorf("%s from %s: %v", p.Package, p.Suite, err)
		case !containsString(vs, p.Version) && (p.Name != "busybox-static" || len(g.Fallbacks) == 0):
			t.Errorf("%s from %s: served %v", p.Package, p.Suite, vs)
		default:
			t.Logf("%s: %s serves %v", p.Name, p.Suite, vs)
		}
	}

	// Warm: nothing downloaded (the mirrors are unreachable), nothing rebuilt.
	start = time.Now()
	warm, err := Guest(ctx, GuestOptions{CacheDir: cache, ModuleSrc: src, Mirror: "http://127.0.0.1:9/debian",
		SecurityMirror: "http://127.0.0.1:9/debian-security", Progress: &lineLogger{t: t, prefix: "[warm] "}})
	if err != nil {
		t.Fatalf("warm: %v", err)
	}
	t.Logf("warm: %v", time.Since(start))
	if warm.Kernel != g.Kernel || warm.Initrd != g.Initrd || warm.ModulePath != g.ModulePath {
		t.Errorf("warm call returned other files:\n%+v\n%+v", *warm, *g)
	}

	// A changed module source builds a new module and a new initrd; the kernel stays.
	changed := copyDir(t, src)
	f, err := os.OpenFile(filepath.Join(changed, "main.c"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "/* changed by %s */\n", t.Name())
	f.Close()
	start = time.Now()
	g2, err := Guest(ctx, GuestOptions{CacheDir: cache, ModuleSrc: changed, Progress: &lineLogger{t: t, prefix: "[changed] "}})
	if err != nil {
		t.Fatalf("changed source: %v", err)
	}
	t.Logf("after a source change: %.1fs", time.Since(start).Seconds())
	if g2.ModulePath == g.ModulePath || g2.Initrd == g.Initrd || g2.Kernel != g.Kernel {
		t.Errorf("source change: module %s → %s, initrd %s → %s", g.ModulePath, g2.ModulePath, g.Initrd, g2.Initrd)
	}
	// BuildModule alone reuses the build.
	start = time.Now()
	if p, err := BuildModule(ctx, g.KDir, src, cache); err != nil || p != g.ModulePath {
		t.Errorf("BuildModule: %s %v, want %s", p, err, g.ModulePath)
	}
	t.Logf("BuildModule (cached): %v", time.Since(start))

	// Bring your own kernel: the extracted vmlinux, the headers and the module folder of the
	// pinned one; the module build and the busybox tree are reused.
	kt, err := kernelTreeAt(filepath.Dir(g.Kernel), g.KernelRelease, nil)
	if err != nil {
		t.Fatal(err)
	}
	own, err := Guest(ctx, GuestOptions{CacheDir: cache, ModuleSrc: src, Kernel: kt.BzImage, HeadersDir: kt.KDir,
		ModulesDir: filepath.Join(kt.Root, "lib", "modules"), Progress: &lineLogger{t: t, prefix: "[own] "}})
	if err != nil {
		t.Fatalf("own kernel: %v", err)
	}
	if !own.PVH || own.ModulePath != g.ModulePath || own.Initrd != g.Initrd || own.Kernel == kt.BzImage {
		t.Errorf("own kernel: %+v", *own)
	}

	// provisionKernel takes a set as it is: a version the archive no longer serves fails with
	// what it serves instead.
	kern := append([]GuestPackage(nil), used...)
	kern[0].Version = "6.1.0-0"
	_, err = provisionKernel(ctx, cache, kern, mirrors, &lineLogger{t: t, prefix: "[stale] "})
	if err == nil || !strings.Contains(err.Error(), kern[0].Name+"=6.1.0-0 (served: "+used[0].Version) {
		t.Errorf("stale set: %v", err)
	} else {
		t.Logf("stale set: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(cache, "guest-kernel-"+GuestKernelKey(kern)+"*")); len(left) != 1 {
		t.Errorf("after a failed provisioning want only the lock file, have %v", left)
	}

	// Guest falls back from stale pins to what the archive serves now, here the sets already
	// provisioned, so nothing is downloaded again.
	t.Run("stale-pins", func(t *testing.T) { checkStalePins(t, ctx, cache, src, g, used) })

	// Boot it.
	qemu, err := QEMU(ctx, QEMUOptions{Progress: &lineLogger{t: t, prefix: "[qemu] "}})
	if err != nil {
		t.Fatalf("QEMU: %v", err)
	}
	t.Run("boot", func(t *testing.T) {
		r := bootGuest(t, ctx, qemu, g.Kernel, g.Initrd, g.Cmdline(""), "")
		checkReport(t, r.results, "0", true)
		checkReport(t, r.console, "0", true)
		if !strings.Contains(r.results, "no unbound device") {
			t.Errorf("the module did not report the missing device:\n%s", r.results)
		}
	})
	t.Run("bad-args-gzip-keep", func(t *testing.T) {
		gz, err := Guest(ctx, GuestOptions{CacheDir: cache, ModuleSrc: src, Gzip: true})
		if err != nil {
			t.Fatal(err)
		}
		if gz.Initrd == g.Initrd || !strings.HasSuffix(gz.Initrd, ".cpio.gz") {
			t.Errorf("gzip initrd %s", gz.Initrd)
		}
		for _, p := range []string{g.Initrd, gz.Initrd} {
			st, _ := os.Stat(p)
			t.Logf("initrd %s: %.2f MB", filepath.Base(p), float64(st.Size())/1e6)
		}
		// An unknown test case makes insmod fail; /init must still report and end, then keep the
		// console shell because of vgpu_keep=1.
		r := bootGuest(t, ctx, qemu, gz.Kernel, gz.Initrd, gz.Cmdline("tests=no_such_case", "vgpu_keep=1"),
			"echo keep-shell-$((6*7)); poweroff -f\n")
		checkReport(t, r.results, "", false)
		if strings.Contains(r.results, "insmod rc=0") || !strings.Contains(r.results, "no_such_case") {
			t.Errorf("bad tests= not reported:\n%s", r.results)
		}
		if !strings.Contains(r.console, "keep-shell-42") {
			t.Errorf("no shell on the console with vgpu_keep=1:\n%s", r.console)
		}
	})
}

// usedKernelSet returns the kernel set a guest was provisioned from (GuestImage.Packages) with
// the suites of the pinned set.
func usedKernelSet(t *testing.T, g *GuestImage, pinned []GuestPackage) []GuestPackage {
	t.Helper()
	if len(g.Packages) != len(pinned) {
		t.Fatalf("guest packages %v, pinned %v", g.Packages, pinned)
	}
	var used []GuestPackage
	for i, p := range g.Packages {
		n, v, _ := strings.Cut(p, "=")
		used = append(used, GuestPackage{Package{n, v}, pinned[i].Suite})
	}
	return used
}

// checkStalePins runs Guest with pins the archive no longer serves (the pinned names at
// versions that never existed): it must use the sets the archive serves (those g used), warn,
// work offline afterwards, and fail with StrictPin.
func checkStalePins(t *testing.T, ctx context.Context, cache, src string, g *GuestImage, used []GuestPackage) {
	saved := guestPackages
	t.Cleanup(func() { guestPackages = saved })
	stale := GuestPackages()
	for i := range stale {
		stale[i].Version += "~stale"
	}
	guestPackages = stale
	kern, bb := splitGuestPackages(stale, FlavourCloud)

	// The resolution alone, against the real lists.
	mirrors := guestMirrors{} // the host's archives
	l, err := guestPinLister(cache, mirrors, kern, &lineLogger{t: t, prefix: "[lists] "})(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := resolveKernelPin(ctx, l, kern); err != nil || !slices.Equal(got, used) {
		t.Errorf("resolveKernelPin(stale) = %v %v, want %v", got, err, used)
	}

	var out bytes.Buffer
	s, err := Guest(ctx, GuestOptions{CacheDir: cache, ModuleSrc: src, Progress: io.MultiWriter(&out, &lineLogger{t: t, prefix: "[stale-pins] "})})
	if err != nil {
		t.Fatalf("stale pins: %v", err)
	}
	if s.Kernel != g.Kernel || s.Initrd != g.Initrd || !slices.Equal(s.Packages, g.Packages) || len(s.Fallbacks) != 2 {
		t.Errorf("stale pins gave\n%+v\nwant the guest\n%+v", *s, *g)
	}
	want := fmt.Sprintf("guest-kernel: WARNING: pinned kernel %s is no longer served by %s; using %s — update GuestKernelABI and guestPackages in images/kernel.go",
		describeKernelSet(kern), kern[0].Suite, describeKernelSet(used))
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "guest-busybox: WARNING: pinned busybox-static "+bb[0].Version+" is no longer served") {
		t.Errorf("no warnings like %q in\n%s", want, out.String())
	}
	if strings.Contains(out.String(), "Debian packages into") {
		t.Errorf("the fallback provisioned again:\n%s", out.String())
	}

	// Offline: the recorded choice is reused.
	off, err := Guest(ctx, GuestOptions{CacheDir: cache, ModuleSrc: src, Mirror: "http://127.0.0.1:9/debian",
		SecurityMirror: "http://127.0.0.1:9/debian-security", Progress: &lineLogger{t: t, prefix: "[stale-offline] "}})
	if err != nil || off.Kernel != g.Kernel || off.Initrd != g.Initrd || len(off.Fallbacks) != 2 {
		t.Errorf("stale pins offline: %v %+v", err, off)
	}

	// Strict: an error naming the pin and what to do.
	_, err = Guest(ctx, GuestOptions{CacheDir: cache, ModuleSrc: src, StrictPin: true, Progress: &lineLogger{t: t, prefix: "[strict] "}})
	if err == nil || !strings.Contains(err.Error(), "forbids the fallback") {
		t.Errorf("StrictPin with stale pins: %v", err)
	} else {
		t.Logf("strict: %v", err)
	}
	t.Setenv("VGPU_STRICT_PIN", "1")
	if _, err = Guest(ctx, GuestOptions{CacheDir: cache, ModuleSrc: src}); err == nil {
		t.Errorf("VGPU_STRICT_PIN=1 with stale pins: no error")
	}
}

// checkGuest checks the artefacts of a provisioned guest.
func checkGuest(t *testing.T, g *GuestImage) {
	t.Helper()
	release := GuestKernelRelease()
	if len(g.Fallbacks) != 0 {
		kernel, _ := splitGuestPackages(GuestPackages(), FlavourCloud)
		abi, flavour, _, err := kernelSetABI(usedKernelSet(t, g, kernel))
		if err != nil {
			t.Fatal(err)
		}
		release = abi + "-" + flavour
	}
	if g.KernelRelease != release || !g.PVH || g.CmdlineBase != GuestCmdlineBase {
		t.Errorf("guest %+v", *g)
	}
	f, err := os.Open(g.Kernel)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := PVHEntry(f)
	f.Close()
	if err != nil {
		t.Errorf("vmlinux: %v", err)
	}
	st, _ := os.Stat(g.Kernel)
	t.Logf("vmlinux %.1f MB, PVH entry %#x", float64(st.Size())/1e6, entry)
	info, err := ModuleInfo(g.ModulePath)
	if err != nil {
		t.Fatal(err)
	}
	if vm := first(info["vermagic"]); !strings.HasPrefix(vm, release+" SMP ") {
		t.Errorf("vermagic %q", vm)
	}
	if first(info["name"]) != "vgpu_test" || first(info["license"]) != "GPL" {
		t.Errorf("modinfo %v", info)
	}
	t.Logf("module vermagic %q, parms %v", first(info["vermagic"]), info["parm"])
	if len(g.VirtioModules) != len(VirtioModules) {
		t.Errorf("virtio modules %v", g.VirtioModules)
	}
	for i, p := range g.VirtioModules {
		if filepath.Base(p) != VirtioModules[i]+".ko" {
			t.Errorf("virtio module %d: %s", i, p)
		}
		if info, err := ModuleInfo(p); err != nil || !strings.HasPrefix(first(info["vermagic"]), release+" ") {
			t.Errorf("%s: %v %v", p, info["vermagic"], err)
		}
	}
	// The initrd holds what /init needs.
	b, err := os.ReadFile(g.Initrd)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		zr, _ := gzip.NewReader(bytes.NewReader(b))
		b, _ = io.ReadAll(zr)
	}
	names := map[string]cpioEntry{}
	for _, e := range readCPIO(t, b) {
		names[e.Name] = e
	}
	ko, _ := os.ReadFile(g.ModulePath)
	if e := names["lib/modules/vgpu_test.ko"]; !bytes.Equal(e.Data, ko) {
		t.Errorf("initrd module differs from %s", g.ModulePath)
	}
	if e := names["init"]; e.Mode != 0o100755 || !bytes.Equal(e.Data, initScript) {
		t.Errorf("/init mode %o", e.Mode)
	}
	if e := names["lib/modules/load.order"]; string(e.Data) != strings.Join(VirtioModules, "\n")+"\n" {
		t.Errorf("load.order %q", e.Data)
	}
	if checkStaticELF(filepath.Join(t.TempDir(), "x")) == nil {
		t.Errorf("checkStaticELF accepts a missing file")
	}
}

type bootResult struct {
	results, console string
	wall             time.Duration
}

// bootGuest boots kernel+initrd under TCG with a virtio-serial port named results and returns
// what arrived on it and on the console. stdin, if not empty, is typed on the console once /init
// offers its shell.
func bootGuest(t *testing.T, ctx context.Context, q *QEMUInstall, kernel, initrd, cmdline, stdin string) bootResult {
	t.Helper()
	dir, err := os.MkdirTemp("", "vgpu-boot-") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "res.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	results := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			results <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		results <- string(b)
	}()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := q.Command(ctx, "-machine", "q35,accel=tcg", "-m", "512M", "-smp", "1", "-display", "none", "-vga", "none",
		"-monitor", "none", "-serial", "stdio", "-no-reboot", "-nic", "none",
		"-device", "virtio-serial-pci", "-chardev", "socket,id=res,path="+sock,
		"-device", "virtserialport,chardev=res,name="+ResultsPortName,
		"-kernel", kernel, "-initrd", initrd, "-append", cmdline)
	cmd.WaitDelay = 5 * time.Second
	var console bytes.Buffer
	var mu sync.Mutex
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		sc := bufio.NewScanner(pr)
		typed := false
		for sc.Scan() {
			mu.Lock()
			console.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if stdin != "" && !typed && strings.Contains(sc.Text(), "vgpu_keep=1: shell") {
				typed = true
				time.Sleep(500 * time.Millisecond) // let the shell start
				io.WriteString(in, stdin)
			}
		}
	}()
	err = cmd.Wait()
	pw.Close()
	<-scanDone
	wall := time.Since(start)
	if err != nil {
		t.Errorf("qemu: %v (stderr %s)", err, stderr.String())
	}
	var r bootResult
	select {
	case r.results = <-results:
	case <-time.After(5 * time.Second):
		t.Errorf("no results connection")
	}
	r.console = console.String()
	r.wall = wall
	t.Logf("boot %q: %.1fs wall; results port %d bytes", cmdline, wall.Seconds(), len(r.results))
	t.Logf("results:\n%s", r.results)
	if t.Failed() {
		t.Logf("console:\n%s", r.console)
	}
	return r
}

// checkReport checks the lines /init writes after the KTAP block.
func checkReport(t *testing.T, out, insmodRC string, wantKTAP bool) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	end := -1
	for i, l := range lines {
		if strings.TrimRight(l, "\r") == InitEnd {
			end = i
		}
	}
	if end < 0 {
		t.Errorf("no %q line in:\n%s", InitEnd, out)
		return
	}
	report := strings.Join(lines[:end+1], "\n")
	for _, want := range []string{InitPrefix + "rmmod rc=", InitPrefix + "irqs-after-rmmod=0", InitPrefix + "tainted="} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if insmodRC != "" && !strings.Contains(report, InitPrefix+"insmod rc="+insmodRC+"\n") {
		t.Errorf("report lacks insmod rc=%s", insmodRC)
	}
	if wantKTAP {
		k := strings.Index(report, "KTAP version 1")
		d := strings.Index(report, ModuleDone)
		if k < 0 || d < k {
			t.Errorf("no KTAP block ending in %q", ModuleDone)
		}
		if strings.Contains(report, InitPrefix+"kernel-warnings=") && !strings.Contains(report, InitPrefix+"kernel-warnings=0") {
			t.Errorf("kernel warnings in the guest log")
		}
	}
}

// repoGuestDir is the repository's guest/ folder (the test module's sources).
func repoGuestDir(t *testing.T) string {
	src, err := findModuleSrc()
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func copyDir(t *testing.T, src string) string {
	dst := t.TempDir()
	out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput()
	if err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return dst
}
