package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeArchive is a pinLister over canned apt-cache output: madison is the output of
// "apt-cache madison <every package>", show the output of "apt-cache show <every package>"
// (stanzas separated by blank lines).
type fakeArchive struct {
	madison string
	show    string
	calls   []string
}

func (f *fakeArchive) Versions(ctx context.Context, name string) ([]string, error) {
	f.calls = append(f.calls, "madison "+name)
	return parseMadison(f.madison, name), nil
}

func (f *fakeArchive) Show(ctx context.Context, name, version string) (string, error) {
	f.calls = append(f.calls, "show "+name+"="+version)
	for _, st := range strings.Split(f.show, "\n\n") {
		if controlField(st, "Package") == name && controlField(st, "Version") == version {
			return st + "\n", nil
		}
	}
	return "", nil // apt-cache show name=unknown-version prints nothing and exits 0
}

// madisonLines renders apt-cache madison lines for the security archive: "name=version ...".
func madisonLines(pkgs ...string) string {
	var b strings.Builder
	for _, p := range pkgs {
		n, v, _ := strings.Cut(p, "=")
		fmt.Fprintf(&b, "%s | %s | http://mirror.example/debian-security bookworm-security/main amd64 Packages\n", n, v)
	}
	return b.String()
}

// kernelLines returns the madison lines of the four packages of a cloud kernel set.
func kernelLines(abi, version string) []string {
	return []string{
		"linux-image-" + abi + "-cloud-amd64=" + version,
		"linux-headers-" + abi + "-cloud-amd64=" + version,
		"linux-headers-" + abi + "-common=" + version,
		kbuildPackage(abi) + "=" + version,
	}
}

// metaStanza is apt-cache show linux-image-cloud-amd64 as the archive prints it.
func metaStanza(version, depends string) string {
	return "Package: linux-image-cloud-amd64\nSource: linux-signed-amd64 (" + strings.Replace(version, "-", "+", 1) + ")\n" +
		"Version: " + version + "\nInstalled-Size: 13\nMaintainer: Debian Kernel Team <kernel-team@lists.example>\n" +
		"Architecture: amd64\nDepends: " + depends + "\nDescription: Linux for x86-64 cloud (meta-package)\n" +
		"Description-md5: 2b3fd7ba0f8b5e3b7d1e0b0d0a6c1d3e\nSection: kernel\nPriority: optional\n" +
		"Filename: pool/updates/main/l/linux-signed-amd64/linux-image-cloud-amd64_" + version + "_amd64.deb\nSize: 1480\n"
}

// testKernelPin is a pinned kernel set like guestPackages' one.
func testKernelPin(abi, version string) []GuestPackage {
	var out []GuestPackage
	for _, l := range kernelLines(abi, version) {
		n, v, _ := strings.Cut(l, "=")
		out = append(out, GuestPackage{Package{n, v}, "bookworm-security"})
	}
	return out
}

func TestParseMadison(t *testing.T) {
	out := "linux-image-cloud-amd64 |  6.1.192-3 | http://mirror.example/debian-security bookworm-security/main amd64 Packages\n" +
		"linux-image-cloud-amd64-dbg |  6.1.192-3 | http://mirror.example/debian-security bookworm-security/main amd64 Packages\n" +
		"linux-image-cloud-amd64 |  6.1.176-1 | http://mirror.example/debian bookworm/main amd64 Packages\n" +
		"N: Unable to locate package nothing\n"
	if got := parseMadison(out, "linux-image-cloud-amd64"); !slices.Equal(got, []string{"6.1.192-3", "6.1.176-1"}) {
		t.Errorf("parseMadison = %q", got)
	}
	if got := parseMadison(out, "nothing"); got != nil {
		t.Errorf("parseMadison(nothing) = %q", got)
	}
}

func TestMetapackageTarget(t *testing.T) {
	for _, tt := range []struct {
		depends, flavour string
		abi, version     string
		ok               bool
	}{
		{"linux-image-6.1.0-57-cloud-amd64 (= 6.1.192-3)", "cloud-amd64", "6.1.0-57", "6.1.192-3", true},
		{"linux-image-6.1.0-58-cloud-amd64", "cloud-amd64", "6.1.0-58", "", true},
		{"linux-image-6.1.0-58-cloud-amd64:amd64 (=6.1.194-1)", "cloud-amd64", "6.1.0-58", "6.1.194-1", true},
		{"kmod, linux-base (>= 4.3~), linux-image-6.12.0-9-cloud-amd64 (= 6.12.43-1) | linux-image-6.1.0-58-cloud-amd64", "cloud-amd64", "6.12.0-9", "6.12.43-1", true},
		{"linux-image-6.1.0-58-amd64 (= 6.1.194-1)", "cloud-amd64", "", "", false},
		{"linux-image-6.1.0-58-cloud-amd64-dbg (= 6.1.194-1)", "cloud-amd64", "", "", false},
		{"", "cloud-amd64", "", "", false},
	} {
		abi, v, ok := metapackageTarget(metaStanza("6.1.194-1", tt.depends), tt.flavour)
		if abi != tt.abi || v != tt.version || ok != tt.ok {
			t.Errorf("metapackageTarget(%q) = %q %q %v, want %q %q %v", tt.depends, abi, v, ok, tt.abi, tt.version, tt.ok)
		}
	}
	// Continuation lines belong to the field; the next stanza does not.
	rec := "Package: x\nDepends: a,\n b (= 1),\n\tc\nVersion: 1\n\nPackage: y\nDepends: z\n"
	if got := controlField(rec, "Depends"); got != "a, b (= 1), c" {
		t.Errorf("controlField = %q", got)
	}
	if got := controlList(controlField(rec, "depends")); !slices.Equal(got, []string{"a", "b (= 1)", "c"}) {
		t.Errorf("controlList = %q", got)
	}
	if got := controlField(rec, "Recommends"); got != "" {
		t.Errorf("absent field = %q", got)
	}
}

func TestRebaseKernelSet(t *testing.T) {
	pin := testKernelPin("6.1.0-57", "6.1.192-3")
	got := rebaseKernelSet(pin, "6.1.0-57", "6.1.0-60", "6.1.200-1")
	if want := testKernelPin("6.1.0-60", "6.1.200-1"); !slices.Equal(got, want) {
		t.Errorf("rebase:\n got %v\nwant %v", got, want)
	}
	if got := rebaseKernelSet(pin, "6.1.0-57", "6.12.0-3", "6.12.9-1"); got[3].Name != "linux-kbuild-6.12" || got[2].Name != "linux-headers-6.12.0-3-common" {
		t.Errorf("rebase to another series: %v", got)
	}
	if pin[0].Name != "linux-image-6.1.0-57-cloud-amd64" {
		t.Errorf("rebase changed its argument: %v", pin)
	}
}

func TestResolveKernelPin(t *testing.T) {
	pin := testKernelPin("6.1.0-57", "6.1.192-3")
	meta := func(v, dep string) string { return metaStanza(v, dep) }
	tests := []struct {
		name    string
		madison []string
		show    []string
		want    []GuestPackage // nil: pin
		wantErr string
	}{{
		name:    "pin served",
		madison: append(kernelLines("6.1.0-57", "6.1.192-3"), "linux-image-cloud-amd64=6.1.192-3"),
		show:    []string{meta("6.1.192-3", "linux-image-6.1.0-57-cloud-amd64 (= 6.1.192-3)")},
	}, {
		name: "new ABI",
		madison: append(kernelLines("6.1.0-58", "6.1.194-1"), "linux-image-cloud-amd64=6.1.194-1",
			"linux-image-6.1.0-57-cloud-amd64=6.1.192-2"),
		show: []string{meta("6.1.194-1", "linux-image-6.1.0-58-cloud-amd64 (= 6.1.194-1)")},
		want: testKernelPin("6.1.0-58", "6.1.194-1"),
	}, {
		name:    "same ABI, new upload",
		madison: append(kernelLines("6.1.0-57", "6.1.192-4"), "linux-image-cloud-amd64=6.1.192-4"),
		show:    []string{meta("6.1.192-4", "linux-image-6.1.0-57-cloud-amd64 (= 6.1.192-4)")},
		want:    testKernelPin("6.1.0-57", "6.1.192-4"),
	}, {
		name: "only one package gone",
		madison: []string{"linux-image-6.1.0-57-cloud-amd64=6.1.192-3", "linux-headers-6.1.0-57-cloud-amd64=6.1.192-3",
			"linux-headers-6.1.0-57-common=6.1.192-3", "linux-kbuild-6.1=6.1.194-1",
			"linux-image-6.1.0-58-cloud-amd64=6.1.194-1", "linux-headers-6.1.0-58-cloud-amd64=6.1.194-1",
			"linux-headers-6.1.0-58-common=6.1.194-1", "linux-image-cloud-amd64=6.1.194-1"},
		show: []string{meta("6.1.194-1", "linux-image-6.1.0-58-cloud-amd64 (= 6.1.194-1)")},
		want: testKernelPin("6.1.0-58", "6.1.194-1"),
	}, {
		name: "newest incomplete (mirror mid-sync), older complete",
		madison: append(kernelLines("6.1.0-58", "6.1.194-1")[:1], append(kernelLines("6.1.0-57", "6.1.192-4"),
			"linux-image-cloud-amd64=6.1.194-1", "linux-image-cloud-amd64=6.1.192-4")...),
		show: []string{meta("6.1.194-1", "linux-image-6.1.0-58-cloud-amd64 (= 6.1.194-1)"),
			meta("6.1.192-4", "linux-image-6.1.0-57-cloud-amd64 (= 6.1.192-4)")},
		want: testKernelPin("6.1.0-57", "6.1.192-4"),
	}, {
		name:    "metapackage without a version",
		madison: append(kernelLines("6.1.0-58", "6.1.194-1"), "linux-image-cloud-amd64=6.1.194-1"),
		show:    []string{meta("6.1.194-1", "linux-image-6.1.0-58-cloud-amd64")},
		want:    testKernelPin("6.1.0-58", "6.1.194-1"),
	}, {
		name:    "no metapackage",
		madison: kernelLines("6.1.0-58", "6.1.194-1"),
		wantErr: "the lists have no linux-image-cloud-amd64",
	}, {
		name:    "metapackage names another flavour",
		madison: append(kernelLines("6.1.0-58", "6.1.194-1"), "linux-image-cloud-amd64=6.1.194-1"),
		show:    []string{meta("6.1.194-1", "linux-image-6.1.0-58-amd64 (= 6.1.194-1)")},
		wantErr: "names no linux-image-*-cloud-amd64",
	}, {
		name:    "new set incomplete",
		madison: append(kernelLines("6.1.0-58", "6.1.194-1")[:3], "linux-image-cloud-amd64=6.1.194-1"),
		show:    []string{meta("6.1.194-1", "linux-image-6.1.0-58-cloud-amd64 (= 6.1.194-1)")},
		wantErr: "but linux-kbuild-6.1=6.1.194-1 (served: nothing)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeArchive{madison: madisonLines(tt.madison...), show: strings.Join(tt.show, "\n")}
			got, err := resolveKernelPin(t.Context(), f, pin)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) ||
					!strings.Contains(err.Error(), "pinned kernel 6.1.0-57 (6.1.192-3) is no longer served") {
					t.Fatalf("err = %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want == nil {
				want = pin
			}
			if !slices.Equal(got, want) {
				t.Errorf("got  %v\nwant %v", got, want)
			}
			if tt.want == nil && len(f.calls) != len(pin) {
				t.Errorf("a served pin needs %d look-ups, made %v", len(pin), f.calls)
			}
			if tt.want != nil && GuestKernelKey(got) == GuestKernelKey(pin) {
				t.Errorf("the fallback has the pin's cache key")
			}
		})
	}
	if _, err := resolveKernelPin(t.Context(), &fakeArchive{}, []GuestPackage{{Package{"busybox-static", "1"}, "bookworm"}}); err == nil {
		t.Errorf("a set without linux-image-* resolved")
	}
}

func TestResolveLatestPin(t *testing.T) {
	pin := []GuestPackage{{Package{"busybox-static", "1:1.35.0-4+deb12u1+b1"}, "bookworm"}}
	for _, tt := range []struct {
		name, madison string
		want          string // version; "" → error
	}{
		{"served", "busybox-static | 1:1.35.0-4+deb12u1+b1 | http://mirror.example/debian bookworm/main amd64 Packages\n", "1:1.35.0-4+deb12u1+b1"},
		{"point release", "busybox-static | 1:1.35.0-4+deb12u2 | http://mirror.example/debian bookworm/main amd64 Packages\n" +
			"busybox-static | 1:1.35.0-4+deb12u1 | http://mirror.example/debian bookworm/main amd64 Packages\n", "1:1.35.0-4+deb12u2"},
		{"gone", "busybox | 1:1.35.0-4+deb12u2 | http://mirror.example/debian bookworm/main amd64 Packages\n", ""},
	} {
		got, err := resolveLatestPin(t.Context(), &fakeArchive{madison: tt.madison}, pin)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%s: resolved to %v", tt.name, got)
		case tt.want != "" && (err != nil || len(got) != 1 || got[0].Version != tt.want || got[0].Name != "busybox-static" || got[0].Suite != "bookworm"):
			t.Errorf("%s: %v %v, want version %s", tt.name, got, err, tt.want)
		}
	}
	if pin[0].Version != "1:1.35.0-4+deb12u1+b1" {
		t.Errorf("resolveLatestPin changed its argument")
	}
}

// fakeTree makes a cache entry look provisioned (its marker).
func fakeTree(t *testing.T, cache string, g pinGroup, pkgs []GuestPackage) string {
	t.Helper()
	key := packagesKey(g.layout, pkgs)
	dir := filepath.Join(cache, g.prefix+"-"+key)
	os.MkdirAll(dir, 0o755)
	b, _ := json.Marshal(treeMarker{Key: key})
	if err := os.WriteFile(filepath.Join(dir, markerName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestResolvePins(t *testing.T) {
	pin := testKernelPin("6.1.0-57", "6.1.192-3")
	next := testKernelPin("6.1.0-58", "6.1.194-1")
	stale := &fakeArchive{
		madison: madisonLines(append(kernelLines("6.1.0-58", "6.1.194-1"), "linux-image-cloud-amd64=6.1.194-1")...),
		show:    metaStanza("6.1.194-1", "linux-image-6.1.0-58-cloud-amd64 (= 6.1.194-1)"),
	}
	served := &fakeArchive{madison: madisonLines(kernelLines("6.1.0-57", "6.1.192-3")...)}
	opens := 0
	open := func(l pinLister) func(context.Context) (pinLister, error) {
		return func(context.Context) (pinLister, error) {
			opens++
			if l == nil {
				return nil, errors.New("offline")
			}
			return l, nil
		}
	}
	const warning = "pinned kernel 6.1.0-57 (6.1.192-3) is no longer served by bookworm-security; using 6.1.0-58 (6.1.194-1) — update GuestKernelABI and guestPackages in images/kernel.go"
	ctx := t.Context()

	t.Run("pin cached", func(t *testing.T) {
		cache := t.TempDir()
		fakeTree(t, cache, kernelPins, pin)
		opens = 0
		r, err := resolvePins(ctx, cache, kernelPins, pin, false, open(nil), &lineLogger{t: t})
		if err != nil || !slices.Equal(r.Packages, pin) || r.Warning != "" || opens != 0 {
			t.Errorf("%+v %v, %d opens", r, err, opens)
		}
	})
	t.Run("pin served", func(t *testing.T) {
		cache := t.TempDir()
		var out bytes.Buffer
		for _, strict := range []bool{false, true} {
			r, err := resolvePins(ctx, cache, kernelPins, pin, strict, open(served), &out)
			if err != nil || !slices.Equal(r.Packages, pin) || r.Warning != "" || r.Record != "" {
				t.Errorf("strict %v: %+v %v", strict, r, err)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(cache, "*")); out.Len() != 0 || len(left) != 0 {
			t.Errorf("output %q, files %v", out.String(), left)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		cache := t.TempDir()
		var out bytes.Buffer
		r, err := resolvePins(ctx, cache, kernelPins, pin, false, open(stale), &out)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.Packages, next) || r.Warning != warning {
			t.Errorf("%+v", r)
		}
		if !strings.Contains(out.String(), "guest-kernel: WARNING: "+warning+" (set VGPU_STRICT_PIN=1 to fail instead)\n") {
			t.Errorf("progress: %q", out.String())
		}
		if want := filepath.Join(cache, "guest-kernel-"+GuestKernelKey(pin)+".resolved"); r.Record != want {
			t.Errorf("record %s, want %s", r.Record, want)
		}
		if _, err := os.Stat(r.Record); err != nil {
			t.Fatal(err)
		}

		// The chosen tree is not there yet: an offline call cannot reuse the record.
		if _, err := resolvePins(ctx, cache, kernelPins, pin, false, open(nil), &out); err == nil || err.Error() != "offline" {
			t.Errorf("record without its tree: %v", err)
		}
		// Once the tree is provisioned, later calls reuse it without network, and warn again.
		fakeTree(t, cache, kernelPins, next)
		out.Reset()
		opens = 0
		r2, err := resolvePins(ctx, cache, kernelPins, pin, false, open(nil), &out)
		if err != nil || !slices.Equal(r2.Packages, next) || r2.Warning != warning || r2.Record != r.Record || opens != 0 {
			t.Errorf("reuse: %+v %v, %d opens", r2, err, opens)
		}
		if !strings.Contains(out.String(), "WARNING: "+warning) {
			t.Errorf("reuse progress: %q", out.String())
		}
		// Strict ignores the record and fails.
		_, err = resolvePins(ctx, cache, kernelPins, pin, true, open(stale), &out)
		if err == nil || !strings.Contains(err.Error(), "pinned kernel 6.1.0-57 (6.1.192-3) is no longer served by bookworm-security (it serves 6.1.0-58 (6.1.194-1)), and StrictPin / $VGPU_STRICT_PIN=1 forbids the fallback") {
			t.Errorf("strict: %v", err)
		}
		// Another pin does not see this record.
		other := testKernelPin("6.1.0-56", "6.1.190-1")
		opens = 0
		if r, err := resolvePins(ctx, cache, kernelPins, other, false, open(stale), &out); err != nil || !slices.Equal(r.Packages, next) || opens != 1 {
			t.Errorf("other pin: %+v %v %d", r, err, opens)
		}
	})
	t.Run("strict", func(t *testing.T) {
		cache := t.TempDir()
		if _, err := resolvePins(ctx, cache, kernelPins, pin, true, open(stale), &lineLogger{t: t}); err == nil || !strings.Contains(err.Error(), "update GuestKernelABI") {
			t.Errorf("strict: %v", err)
		}
		if left, _ := filepath.Glob(filepath.Join(cache, "*")); len(left) != 0 {
			t.Errorf("strict left %v", left)
		}
	})
	t.Run("busybox", func(t *testing.T) {
		cache := t.TempDir()
		bb := []GuestPackage{{Package{"busybox-static", "1:1.35.0-4+deb12u1+b1"}, "bookworm"}}
		a := &fakeArchive{madison: "busybox-static | 1:1.35.0-4+deb12u2 | http://mirror.example/debian bookworm/main amd64 Packages\n"}
		var out bytes.Buffer
		r, err := resolvePins(ctx, cache, busyboxPins, bb, false, open(a), &out)
		if err != nil || r.Packages[0].Version != "1:1.35.0-4+deb12u2" {
			t.Fatalf("%+v %v", r, err)
		}
		want := "guest-busybox: WARNING: pinned busybox-static 1:1.35.0-4+deb12u1+b1 is no longer served by bookworm; using busybox-static 1:1.35.0-4+deb12u2 — update guestPackages in images/kernel.go"
		if !strings.Contains(out.String(), want) {
			t.Errorf("progress %q", out.String())
		}
		if packagesKey(guestBusyboxLayout, r.Packages) == packagesKey(guestBusyboxLayout, bb) {
			t.Errorf("same key")
		}
	})
}

// TestResolveGuestPinnedTable resolves the real table against an archive that serves it, and
// against one that has moved on.
func TestResolveGuestPinnedTable(t *testing.T) {
	kernel, busybox := splitGuestPackages(guestPackages, FlavourCloud)
	abi, flavour, version, err := kernelSetABI(kernel)
	if err != nil || abi != GuestKernelABI || flavour != "cloud-amd64" {
		t.Fatalf("kernelSetABI = %q %q %q %v", abi, flavour, version, err)
	}
	var lines []string
	for _, p := range guestPackages {
		lines = append(lines, p.String())
	}
	f := &fakeArchive{madison: madisonLines(lines...)}
	if got, err := resolveKernelPin(t.Context(), f, kernel); err != nil || !slices.Equal(got, kernel) {
		t.Errorf("served table: %v %v", got, err)
	}
	if got, err := resolveLatestPin(t.Context(), f, busybox); err != nil || !slices.Equal(got, busybox) {
		t.Errorf("served busybox: %v %v", got, err)
	}
	f = &fakeArchive{
		madison: madisonLines(append(kernelLines("6.1.0-99", "6.1.250-1"), "linux-image-cloud-amd64=6.1.250-1")...),
		show:    metaStanza("6.1.250-1", "linux-image-6.1.0-99-cloud-amd64 (= 6.1.250-1)"),
	}
	got, err := resolveKernelPin(t.Context(), f, kernel)
	if err != nil {
		t.Fatal(err)
	}
	if describeKernelSet(got) != "6.1.0-99 (6.1.250-1)" || describeKernelSet(kernel) != GuestKernelABI+" ("+version+")" {
		t.Errorf("%s → %s", describeKernelSet(kernel), describeKernelSet(got))
	}
	for i, p := range got {
		if p.Suite != kernel[i].Suite || strings.Contains(p.Name, GuestKernelABI) {
			t.Errorf("%v", p)
		}
	}
}

func TestStrictPinEnv(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true, "yes": true} {
		t.Setenv("VGPU_STRICT_PIN", v)
		if got := strictPinEnv(); got != want {
			t.Errorf("VGPU_STRICT_PIN=%q: %v", v, got)
		}
	}
}

func TestPruneKeepsUsedPinRecords(t *testing.T) {
	cache := t.TempDir()
	old := time.Now().Add(-40 * 24 * time.Hour)
	for _, n := range []string{"guest-kernel-a.resolved", "guest-kernel-b.resolved"} {
		p := filepath.Join(cache, n)
		os.WriteFile(p, []byte("{}"), 0o644)
		os.Chtimes(p, old, old)
	}
	pruneGuestCache(t.Context(), cache, []string{filepath.Join(cache, "guest-kernel-a.resolved")}, 30*24*time.Hour, &lineLogger{t: t})
	if st, err := os.Stat(filepath.Join(cache, "guest-kernel-a.resolved")); err != nil || time.Since(st.ModTime()) > time.Minute {
		t.Errorf("used record: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "guest-kernel-b.resolved")); err == nil {
		t.Errorf("unused record kept")
	}
}
