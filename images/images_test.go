package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestQEMUCacheKey(t *testing.T) {
	base := QEMUPackages()
	k := QEMUCacheKey(base)
	if len(k) != 16 || strings.Trim(k, "0123456789abcdef") != "" {
		t.Fatalf("key %q: want 16 hex digits", k)
	}
	if k2 := QEMUCacheKey(QEMUPackages()); k2 != k {
		t.Fatalf("key not stable: %s then %s", k, k2)
	}
	// Order does not matter.
	rev := QEMUPackages()
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if QEMUCacheKey(rev) != k {
		t.Errorf("key depends on the order of the list")
	}
	// Any change of the list changes the key.
	changed := QEMUPackages()
	changed[0].Version = "1:11.1.4+ds-1~bpo13+1"
	added := append(QEMUPackages(), Package{"ipxe-qemu", "1.21.1+git-20220113.fbbdc3926-1"})
	removed := QEMUPackages()[1:]
	renamed := QEMUPackages()
	renamed[3].Name += "x"
	for name, pk := range map[string][]Package{"version": changed, "added": added, "removed": removed, "renamed": renamed} {
		if QEMUCacheKey(pk) == k {
			t.Errorf("%s: key unchanged", name)
		}
	}
	// The digest of a fixed list must not drift between releases of this code (it names folders
	// in users' caches).
	if got, want := QEMUCacheKey([]Package{{"a", "1"}, {"b", "2"}}), Key(qemuLayout, []string{"a=1", "b=2"}); got != want {
		t.Errorf("QEMUCacheKey = %s, want %s", got, want)
	}
	if Key("x", []string{"a"}) == Key("y", []string{"a"}) {
		t.Errorf("Key ignores kind")
	}
}

func TestPinnedTable(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range qemuPackages {
		if p.Name == "" || p.Version == "" || strings.ContainsAny(p.Name+p.Version, " =") {
			t.Errorf("bad entry %+v", p)
		}
		if seen[p.Name] {
			t.Errorf("duplicate %s", p.Name)
		}
		seen[p.Name] = true
	}
	for _, must := range []string{"qemu-system-x86", "qemu-system-data", "seabios", "libc6"} {
		if !seen[must] {
			t.Errorf("pinned set lacks %s", must)
		}
	}
	if len(qemuPackages) != 48 {
		t.Errorf("pinned set has %d packages, the reference set has 48", len(qemuPackages))
	}
}

func TestVersion(t *testing.T) {
	tests := []struct {
		out     string
		want    string
		wantErr bool // version too old or unparsable
	}{
		{"QEMU emulator version 11.1.3 (Debian 1:11.1.3+ds-1~bpo13+1)\nCopyright (c) 2003-2025 Fabrice Bellard and the QEMU Project developers\n", "11.1.3", false},
		{"QEMU emulator version 10.1.0\n", "10.1.0", false},
		{"QEMU emulator version 10.1\n", "10.1.0", false},
		{"QEMU emulator version 10.0.13 (Debian 1:10.0.13+ds-0+deb13u1)\n", "10.0.13", true},
		{"QEMU emulator version 7.2.19 (Debian 1:7.2+dfsg-7+deb12u18)\n", "7.2.19", true},
		{"QEMU emulator version 9.2.50 (v9.2.0-1234-gdeadbeef)\n", "9.2.50", true},
		{"QEMU emulator version 12.0.0\n", "12.0.0", false},
		{"QEMU emulator version 10.10.0\n", "10.10.0", false},
		{"qemu-system-x86_64: command not found\n", "", true},
		{"", "", true},
	}
	for _, tt := range tests {
		v, err := CheckVersion(tt.out)
		if (err != nil) != tt.wantErr {
			t.Errorf("CheckVersion(%q) err = %v, wantErr %v", firstLine(tt.out), err, tt.wantErr)
		}
		if tt.want != "" && v.String() != tt.want {
			t.Errorf("CheckVersion(%q) = %s, want %s", firstLine(tt.out), v, tt.want)
		}
	}
	v, _ := ParseVersion(tests[0].out)
	if v.Text != "QEMU emulator version 11.1.3 (Debian 1:11.1.3+ds-1~bpo13+1)" {
		t.Errorf("Text = %q", v.Text)
	}
	for _, c := range []struct {
		a, b Version
		want bool
	}{
		{Version{Major: 10, Minor: 1}, MinQEMU, true},
		{Version{Major: 10, Minor: 0, Micro: 99}, MinQEMU, false},
		{Version{Major: 11}, MinQEMU, true},
		{Version{Major: 9, Minor: 9}, MinQEMU, false},
	} {
		if got := c.a.AtLeast(c.b); got != c.want {
			t.Errorf("%v.AtLeast(%v) = %v", c.a, c.b, got)
		}
	}
	if !hasVfioUser("name \"vfio-pci\", bus PCI, desc \"VFIO-based PCI device assignment\"\nname \"vfio-user-pci\", bus PCI, desc \"VFIO over socket PCI device assignment\"\n") {
		t.Errorf("hasVfioUser misses the device")
	}
	if hasVfioUser("name \"vfio-pci\", bus PCI\nname \"vfio-pci-nohotplug\", bus PCI\n") {
		t.Errorf("hasVfioUser matches vfio-pci")
	}
}

func TestMirror(t *testing.T) {
	deb822 := `Types: deb
# http://snapshot.mirror.example/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`
	if got := mirrorFromDeb822(deb822); got != "http://mirror.example/debian" {
		t.Errorf("deb822: %q", got)
	}
	secFirst := "Types: deb\nURIs: http://security.mirror.example/debian-security\nSuites: bookworm-security\n\nTypes: deb-src deb\nURIs: https://mirror.example/debian/\nSuites: bookworm\n"
	if got := mirrorFromDeb822(secFirst); got != "https://mirror.example/debian" {
		t.Errorf("deb822 security first: %q", got)
	}
	if got := mirrorFromDeb822("Types: deb-src\nURIs: http://x/debian\nSuites: bookworm\n"); got != "" {
		t.Errorf("deb-src only: %q", got)
	}
	if got := mirrorFromDeb822("Types: deb\nEnabled: no\nURIs: http://x/debian\nSuites: bookworm\n"); got != "" {
		t.Errorf("disabled stanza: %q", got)
	}
	list := `# comment
deb-src http://src.mirror.example/debian bookworm main
deb http://security.mirror.example/debian-security bookworm-security main
deb https://tools.example/apt cloud-tools-bookworm main
deb [arch=amd64 signed-by=/k.gpg] http://ftp.mirror.example/debian/ bookworm main contrib
`
	if got := mirrorFromSourcesList(list); got != "http://ftp.mirror.example/debian" {
		t.Errorf("sources.list: %q", got)
	}
	for suite, want := range map[string]bool{"bookworm": true, "trixie-backports": true, "stable-updates": true,
		"bookworm-security": false, "nodistro": false, "cloud-tools-bookworm": false, "jammy": false} {
		if got := isMainEntry(aptEntry{"http://mirror.example/debian", suite}); got != want {
			t.Errorf("isMainEntry(%s) = %v", suite, got)
		}
	}
}

// hostApt points the host's apt configuration at a folder holding files (paths relative to
// /etc/apt) and clears the environment overrides, for the rest of the test.
func hostApt(t *testing.T, files map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := aptEtc
	aptEtc = dir
	t.Cleanup(func() { aptEtc = old })
	t.Setenv(MirrorEnv, "")
	t.Setenv(SecurityMirrorEnv, "")
}

func TestHostMirror(t *testing.T) {
	// Third-party repositories and disabled files first: the Debian archive is still found,
	// in sources.list.d as apt reads it.
	hostApt(t, map[string]string{
		"sources.list":                      "# empty\n",
		"sources.list.d/a-tools.list":       "deb https://tools.example/apt cloud-tools-bookworm main\n",
		"sources.list.d/b-node.sources":     "Types: deb\nURIs: https://node.example/node_20.x\nSuites: nodistro\nComponents: main\n",
		"sources.list.d/c.sources.disabled": "Types: deb\nURIs: http://disabled.example/debian\nSuites: bookworm\n",
		"sources.list.d/debian.sources":     "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n\nTypes: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n",
		"sources.list.d/zz-later.list":      "deb http://later.mirror.example/debian bookworm main\n",
	})
	if got, err := HostMirror(); err != nil || got != "http://mirror.example/debian" {
		t.Errorf("HostMirror = %q, %v", got, err)
	}
	if got, err := HostSecurityMirror(); err != nil || got != "http://mirror.example/debian-security" {
		t.Errorf("HostSecurityMirror = %q, %v", got, err)
	}
	if _, err := NewApt(t.TempDir(), "", Bookworm, nil); err != nil {
		t.Errorf("NewApt from the host: %v", err)
	}

	// sources.list comes before sources.list.d.
	hostApt(t, map[string]string{
		"sources.list":                  "deb http://first.mirror.example/debian trixie main\n",
		"sources.list.d/debian.sources": "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n",
	})
	if got, err := HostMirror(); err != nil || got != "http://first.mirror.example/debian" {
		t.Errorf("HostMirror = %q, %v", got, err)
	}

	// No Debian archive anywhere: a clear error naming the variable and the flag, no default.
	hostApt(t, map[string]string{"sources.list.d/node.sources": "Types: deb\nURIs: https://node.example/x\nSuites: nodistro\n"})
	got, err := HostMirror()
	if err == nil || !strings.Contains(err.Error(), MirrorEnv) || !strings.Contains(err.Error(), "--debian-mirror") {
		t.Errorf("HostMirror without a Debian archive = %q, %v; want an error naming $%s and --debian-mirror", got, err, MirrorEnv)
	}
	if _, err := NewApt(t.TempDir(), "", Bookworm, nil); err == nil {
		t.Errorf("NewApt without a mirror: no error")
	}
	if err := (&Apt{Dir: t.TempDir(), Sources: Bookworm}).prepare(); err == nil {
		t.Errorf("Apt without a mirror prepared")
	}
	t.Setenv(MirrorEnv, "http://override.example/debian/")
	if got, err := HostMirror(); err != nil || got != "http://override.example/debian" {
		t.Errorf("override: %q, %v", got, err)
	}
}

func TestSourcesListAndConf(t *testing.T) {
	a, err := NewApt("/c", "http://m.example/debian/", TrixieBackports, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://m.example/debian trixie main\n" +
		"deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://m.example/debian trixie-backports main\n"
	if got := a.SourcesList(); got != want {
		t.Errorf("sources.list:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(a.SourcesList(), "trusted") || strings.Contains(a.aptConf(), "trusted=yes") {
		t.Errorf("never trust unsigned repositories")
	}
	conf := a.aptConf()
	for _, s := range []string{`Dir::State::status "/dev/null";`, `Dir::Etc "` + a.Dir + `/etc";`, `APT::Architecture "amd64";`} {
		if !strings.Contains(conf, s) {
			t.Errorf("apt.conf lacks %s:\n%s", s, conf)
		}
	}
	b, err := NewApt("/c", "http://m.example/debian", Bookworm, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Dir == a.Dir || filepath.Dir(b.Dir) != "/c" {
		t.Errorf("apt roots: %s vs %s", a.Dir, b.Dir)
	}
	if c, _ := NewApt("/c", "http://other.example/debian", TrixieBackports, nil); c.Dir == a.Dir {
		t.Errorf("two mirrors share the apt root %s", a.Dir)
	}
	if got := DebFileName("libgmp10", "2:6.3.0+dfsg-3", "amd64"); got != "libgmp10_2%3a6.3.0+dfsg-3_amd64.deb" {
		t.Errorf("DebFileName = %s", got)
	}
}

func TestCacheDir(t *testing.T) {
	t.Setenv("VGPU_CACHE", "/tmp/vc")
	t.Setenv("XDG_CACHE_HOME", "/tmp/xdg")
	if d, _ := CacheDir(); d != "/tmp/vc" {
		t.Errorf("VGPU_CACHE: %s", d)
	}
	t.Setenv("VGPU_CACHE", "")
	if d, _ := CacheDir(); d != "/tmp/xdg/vgpu" {
		t.Errorf("XDG_CACHE_HOME: %s", d)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if d, _ := CacheDir(); d != "/home/u/.cache/vgpu" {
		t.Errorf("HOME: %s", d)
	}
}

func TestUpstreamVersion(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1:11.1.3+ds-2~bpo13+1", "1:11.1.3+ds"},
		{"2.41-12+deb13u5", "2.41"},
		{"1:2.75-10+deb13u1+b3", "1:2.75"},
		{"81-1", "81"},
		{"1.0", "1.0"},               // native: no revision
		{"1:2.3-rc1-4", "1:2.3-rc1"}, // only the last hyphen starts the revision
	} {
		if got := upstreamVersion(tc.in); got != tc.want {
			t.Errorf("upstreamVersion(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
