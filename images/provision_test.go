package images

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineLogger sends each complete line written to it to t.Log.
type lineLogger struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.t.Log(l.prefix + string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

// TestProvisionQEMU provisions the pinned set into an empty cache (two callers at once, one of
// which must wait for the other), then reuses it with an unreachable mirror to show that no
// network is used.
func TestProvisionQEMU(t *testing.T) {
	if os.Getenv("VGPU_SKIP_QEMU") == "1" {
		t.Skip("VGPU_SKIP_QEMU=1")
	}
	if testing.Short() {
		t.Skip("downloads ~27 MB; skipped with -short")
	}
	cache := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	start := time.Now()
	var wg sync.WaitGroup
	res := make([]*QEMUInstall, 2)
	errs := make([]error, 2)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = QEMU(ctx, QEMUOptions{CacheDir: cache, NoSystem: true,
				Progress: &lineLogger{t: t, prefix: []string{"[a] ", "[b] "}[i]}})
		}()
	}
	wg.Wait()
	cold := time.Since(start)
	for i := range res {
		if errs[i] != nil {
			t.Fatalf("QEMU #%d: %v", i, errs[i])
		}
	}
	q := res[0]
	t.Logf("provisioning from an empty cache took %.1fs: %s", cold.Seconds(), q.Version().Text)
	if res[1].Root != q.Root {
		t.Errorf("two roots: %s, %s", q.Root, res[1].Root)
	}
	if got := q.Version().String(); got != "11.1.3" {
		t.Errorf("version %s", got)
	}
	if want := filepath.Join(cache, "qemu-"+QEMUCacheKey(qemuPackages)); q.Root != want {
		t.Errorf("root %s, want %s", q.Root, want)
	}
	left, _ := filepath.Glob(filepath.Join(cache, "qemu-*.tmp-*"))
	debs, _ := filepath.Glob(filepath.Join(q.Root, ".debs"))
	if len(left)+len(debs) != 0 {
		t.Errorf("leftovers: %v %v", left, debs)
	}
	for _, f := range []string{"usr/share/seabios/bios-256k.bin", "usr/share/qemu/pvh.bin", "usr/share/qemu/linuxboot_dma.bin"} {
		if _, err := os.Stat(filepath.Join(q.Root, f)); err != nil {
			t.Errorf("firmware: %v", err)
		}
	}

	// Warm: no network (the mirror is unreachable) and fast.
	start = time.Now()
	q2, err := QEMU(ctx, QEMUOptions{CacheDir: cache, NoSystem: true, Mirror: "http://127.0.0.1:9/debian"})
	if err != nil {
		t.Fatalf("warm QEMU: %v", err)
	}
	t.Logf("warm call took %v", time.Since(start))
	if q2.Root != q.Root || q2.Version() != q.Version() {
		t.Errorf("warm call returned %+v", q2)
	}
	out, err := q2.Command(ctx, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "11.1.3") {
		t.Errorf("--version: %v %s", err, out)
	}

	// An interrupted run (a temp folder, a tree without marker) is cleaned up and redone.
	if err := os.Remove(filepath.Join(q.Root, markerName)); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(q.Root+".tmp-crashed/usr", 0o755)
	start = time.Now()
	q3, err := QEMU(ctx, QEMUOptions{CacheDir: cache, NoSystem: true, Progress: &lineLogger{t: t, prefix: "[redo] "}})
	if err != nil {
		t.Fatalf("redo: %v", err)
	}
	t.Logf("redo after an interrupted run took %.1fs", time.Since(start).Seconds())
	if _, err := os.Stat(q.Root + ".tmp-crashed"); !os.IsNotExist(err) {
		t.Errorf("stale temp folder kept: %v", err)
	}
	if _, ok := loadTree(q3.Root, QEMUCacheKey(qemuPackages)); !ok {
		t.Errorf("redo did not complete the tree")
	}

	// A pinned version the archive no longer serves fails with a hint naming what it serves.
	bogus := []Package{{"seabios", "0.0.1-1"}, {"libc6", "2.41-12+deb13u5"}}
	_, err = provisionQEMU(ctx, cache, bogus, "", &lineLogger{t: t, prefix: "[bogus] "})
	if err == nil || !strings.Contains(err.Error(), "seabios=0.0.1-1 (served: 1.17.0-1~bpo13+1") {
		t.Errorf("bogus pin: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(cache, "qemu-"+QEMUCacheKey(bogus)+"*")); len(left) != 1 {
		t.Errorf("after a failed provisioning want only the lock file, have %v", left)
	}
}

// TestAptVerifiesSignatures points the private root at a keyring without the trixie keys:
// update must fail instead of accepting unsigned lists.
func TestAptVerifiesSignatures(t *testing.T) {
	if os.Getenv("VGPU_SKIP_QEMU") == "1" || testing.Short() {
		t.Skip("network test")
	}
	const wrong = "/usr/share/keyrings/debian-archive-bullseye-automatic.gpg"
	if _, err := os.Stat(wrong); err != nil {
		t.Skip(err)
	}
	mirror, err := HostMirror()
	if err != nil {
		t.Fatal(err)
	}
	a := &Apt{Dir: t.TempDir(), Mirror: mirror, Sources: []Source{{"trixie-backports", []string{"main"}}}, Keyring: wrong,
		Progress: &lineLogger{t: t}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = a.Update(ctx)
	if err == nil {
		t.Fatal("update with the wrong keyring succeeded")
	}
	if !strings.Contains(err.Error(), "NO_PUBKEY") && !strings.Contains(err.Error(), "not signed") {
		t.Errorf("unexpected error: %v", err)
	}
	t.Logf("rejected as expected: %v", err)
	if _, err := a.Download(ctx, []string{"seabios"}, t.TempDir()); err == nil || !strings.Contains(err.Error(), "name=version") {
		t.Errorf("Download without a version: %v", err)
	}
}

// TestProvisionQEMURevisionFallback: a pin whose Debian revision the archive no longer serves
// is replaced by the served revision of the same upstream release (with a warning); a pin of
// an upstream release the archive does not serve at all still fails, naming what is served.
func TestProvisionQEMURevisionFallback(t *testing.T) {
	if os.Getenv("VGPU_SKIP_QEMU") == "1" {
		t.Skip("VGPU_SKIP_QEMU=1")
	}
	if testing.Short() {
		t.Skip("downloads ~27 MB; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	withVersion := func(name, version string) []Package {
		pkgs := QEMUPackages()
		for i := range pkgs {
			if pkgs[i].Name == name {
				pkgs[i].Version = version
			}
		}
		return pkgs
	}
	served := upstreamVersion(QEMUPackages()[1].Version) // qemu-system-data's upstream release

	var progress bytes.Buffer
	q, err := provisionQEMU(ctx, t.TempDir(), withVersion("qemu-system-data", served+"-0~never1"), "", &progress)
	if err != nil {
		t.Fatalf("a revision the archive does not serve: %v", err)
	}
	if !strings.Contains(progress.String(), "WARNING") || !strings.Contains(progress.String(), "0~never1 →") {
		t.Errorf("no warning naming the replacement:\n%s", progress.String())
	}
	if q.Version().Major != 11 {
		t.Errorf("provisioned %q", q.Version().Text)
	}

	_, err = provisionQEMU(ctx, t.TempDir(), withVersion("qemu-system-data", "1:0.1+ds-1"), "", io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no longer in the archive") {
		t.Errorf("an upstream release the archive does not serve: err %v", err)
	}
}
