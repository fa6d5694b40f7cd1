package images

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// DebianKeyring is the keyring every private sources.list line is signed-by. Bookworm's
// debian-archive-keyring already holds the bookworm and trixie archive keys.
const DebianKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// Source is one line of a private sources.list: a suite and its components.
type Source struct {
	Suite      string
	Components []string
}

// Ready-made source sets.
var (
	// TrixieBackports is where the pinned QEMU comes from (trixie's own libraries plus the
	// backported QEMU and SeaBIOS).
	TrixieBackports = []Source{{"trixie", []string{"main"}}, {"trixie-backports", []string{"main"}}}
	// Bookworm matches the host (guest kernels, headers, busybox).
	Bookworm = []Source{{"bookworm", []string{"main"}}}
)

// Apt drives apt-get against a private root: its own sources.list, lists, cache and an empty
// dpkg status, so it never looks at or changes the host's package state. Signatures are always
// checked (every line is signed-by DebianKeyring; never trusted=yes).
//
// Fields are read when a method runs; set them before the first call. Update, Download and
// Versions serialise on a lock file in Dir, so several processes may share one Apt folder.
type Apt struct {
	Dir      string    // private root; created on first use
	Mirror   string    // the Debian archive's URI (NewApt: "" → HostMirror())
	Sources  []Source  // suites to list
	Keyring  string    // "" → DebianKeyring
	Arch     string    // "" → amd64
	Progress io.Writer // apt's output lines and our own notes; nil → discarded
}

// NewApt returns an Apt for mirror ("" → HostMirror(), which fails when the host names no
// Debian archive) whose root lives in cache under a name derived from the mirror and the
// sources, so different archives or suite sets never share (or clobber) lists.
func NewApt(cache, mirror string, sources []Source, progress io.Writer) (*Apt, error) {
	if mirror == "" {
		var err error
		if mirror, err = HostMirror(); err != nil {
			return nil, err
		}
	}
	return newAptRoot(cache, mirror, sources, progress), nil
}

// newAptRoot is NewApt for a mirror already chosen.
func newAptRoot(cache, mirror string, sources []Source, progress io.Writer) *Apt {
	a := &Apt{Mirror: strings.TrimRight(mirror, "/"), Sources: sources, Progress: progress}
	var items []string
	for _, s := range sources {
		items = append(items, s.Suite+" "+strings.Join(s.Components, " "))
	}
	items = append(items, "mirror "+a.mirror())
	a.Dir = filepath.Join(cache, "apt-"+Key("apt-root", items))
	return a
}

func (a *Apt) mirror() string { return strings.TrimRight(a.Mirror, "/") }

func (a *Apt) arch() string {
	if a.Arch != "" {
		return a.Arch
	}
	return "amd64"
}

func (a *Apt) keyring() string {
	if a.Keyring != "" {
		return a.Keyring
	}
	return DebianKeyring
}

func (a *Apt) progress() io.Writer {
	if a.Progress == nil {
		return io.Discard
	}
	return a.Progress
}

// SourcesList renders the private sources.list.
func (a *Apt) SourcesList() string {
	keyring := a.keyring()
	var b strings.Builder
	for _, s := range a.Sources {
		fmt.Fprintf(&b, "deb [arch=%s signed-by=%s] %s %s %s\n", a.arch(), keyring, a.mirror(), s.Suite, strings.Join(s.Components, " "))
	}
	return b.String()
}

// aptConf is read with -c after the host's configuration. It moves every apt folder into the
// private root, and drops host hooks that would run on update (appstream refresh, PackageKit),
// the DEP-11 metadata (5 MB we never use) and Docker-image tweaks that make every apt run
// slow. Host settings such as proxies still apply.
func (a *Apt) aptConf() string {
	q := func(s string) string { return `"` + s + `"` }
	return strings.Join([]string{
		`Dir::Etc ` + q(filepath.Join(a.Dir, "etc")) + `;`,
		`Dir::State ` + q(filepath.Join(a.Dir, "state")) + `;`,
		`Dir::Cache ` + q(filepath.Join(a.Dir, "cache")) + `;`,
		`Dir::State::status "/dev/null";`,
		`Dir::Log ` + q(filepath.Join(a.Dir, "log")) + `;`,
		`APT::Architecture ` + q(a.arch()) + `;`,
		`#clear APT::Architectures;`,
		`APT::Architectures { ` + q(a.arch()) + `; };`,
		`#clear APT::Update::Post-Invoke-Success;`,
		`#clear APT::Update::Post-Invoke;`,
		`#clear APT::Update::Pre-Invoke;`,
		`Acquire::IndexTargets::deb::DEP-11::DefaultEnabled "false";`,
		`Acquire::Languages "none";`,
		// Docker-style hosts keep lists gzipped and disable the binary cache, so every apt run
		// re-parses ~60 MB of lists (seconds of CPU each time). Keep both in the private root.
		`Acquire::GzipIndexes "false";`,
		`Dir::Cache::pkgcache "pkgcache.bin";`,
		`Dir::Cache::srcpkgcache "srcpkgcache.bin";`,
		`APT::Get::AllowUnauthenticated "false";`,
		`Acquire::AllowInsecureRepositories "false";`,
		``,
	}, "\n")
}

// prepare creates the private tree and writes sources.list and apt.conf.
func (a *Apt) prepare() error {
	if a.Dir == "" {
		return errors.New("images: Apt.Dir is empty")
	}
	if len(a.Sources) == 0 {
		return errors.New("images: Apt has no sources")
	}
	if a.mirror() == "" {
		return errors.New("images: Apt.Mirror is empty")
	}
	for _, d := range []string{"etc/apt.conf.d", "etc/preferences.d", "etc/sources.list.d", "etc/trusted.gpg.d",
		"state/lists/partial", "cache/archives/partial", "log"} {
		if err := os.MkdirAll(filepath.Join(a.Dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := writeFileAtomic(filepath.Join(a.Dir, "etc", "sources.list"), []byte(a.SourcesList())); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(a.Dir, "apt.conf"), []byte(a.aptConf()))
}

// lock serialises apt runs on this root. apt-get takes its own locks too, but fails at once
// instead of waiting when they are held.
func (a *Apt) lock(ctx context.Context) (*fileLock, error) {
	if err := os.MkdirAll(a.Dir, 0o755); err != nil {
		return nil, err
	}
	return lockFile(ctx, filepath.Join(a.Dir, "vgpu.lock"), a.progress())
}

// Update fetches and verifies the package lists (apt-get update). It fails when a release file
// is not signed by the keyring or a list cannot be fetched.
func (a *Apt) Update(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Minute)
	defer cancel()
	l, err := a.lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock()
	if err := a.prepare(); err != nil {
		return err
	}
	start := time.Now()
	var suites []string
	for _, s := range a.Sources {
		suites = append(suites, s.Suite+"/"+strings.Join(s.Components, ","))
	}
	fmt.Fprintf(a.progress(), "apt update: %s %s (signed-by %s)\n", a.mirror(), strings.Join(suites, " "), a.keyring())
	// --error-on=any: a failed index download is an error, not a warning with exit code 0.
	if _, err := a.run(ctx, "apt-get", "", "update", "--error-on=any"); err != nil {
		return err
	}
	fmt.Fprintf(a.progress(), "apt update: done in %.1fs\n", time.Since(start).Seconds())
	return nil
}

// Download fetches the given packages into dir (created if needed) and returns the paths of
// the .deb files, in the order of pkgs. Every entry must be "name=version": the private root
// carries no pins, so without an explicit version apt would pick the highest version of any
// listed suite. apt checks each file against the signed index.
func (a *Apt) Download(ctx context.Context, pkgs []string, dir string) ([]string, error) {
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Minute)
	defer cancel()
	for _, p := range pkgs {
		if n, v, ok := strings.Cut(p, "="); !ok || n == "" || v == "" {
			return nil, fmt.Errorf("images: Download(%q): want name=version", p)
		}
	}
	if len(pkgs) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l, err := a.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	if err := a.prepare(); err != nil {
		return nil, err
	}
	start := time.Now()
	fmt.Fprintf(a.progress(), "apt download: %d packages into %s\n", len(pkgs), dir)
	if _, err := a.run(ctx, "apt-get", dir, append([]string{"download"}, pkgs...)...); err != nil {
		return nil, err
	}
	var paths []string
	var total int64
	for _, p := range pkgs {
		name, version, _ := strings.Cut(p, "=")
		path, err := findDeb(dir, name, version)
		if err != nil {
			return nil, err
		}
		if fi, err := os.Stat(path); err == nil {
			total += fi.Size()
		}
		paths = append(paths, path)
	}
	fmt.Fprintf(a.progress(), "apt download: %d packages, %.1f MB in %.1fs\n", len(paths), float64(total)/1e6, time.Since(start).Seconds())
	return paths, nil
}

// Versions lists the versions of a package the private lists offer (apt-cache madison), highest
// first. Update must have run.
func (a *Apt) Versions(ctx context.Context, name string) ([]string, error) {
	out, err := a.query(ctx, "madison", name)
	if err != nil {
		return nil, err
	}
	return parseMadison(out, name), nil
}

// Show returns the index record of name=version in the private lists (apt-cache show: a deb822
// stanza with Depends, Source, ...). Update must have run.
func (a *Apt) Show(ctx context.Context, name, version string) (string, error) {
	return a.query(ctx, "show", name+"="+version)
}

// query runs apt-cache on the private lists and returns its output.
func (a *Apt) query(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := withDefaultTimeout(ctx, time.Minute)
	defer cancel()
	l, err := a.lock(ctx)
	if err != nil {
		return "", err
	}
	defer l.Unlock()
	if err := a.prepare(); err != nil {
		return "", err
	}
	return a.run(ctx, "apt-cache", "", args...)
}

// parseMadison returns the versions of name in apt-cache madison output
// ("name | version | source"), in the order listed.
func parseMadison(out, name string) []string {
	var vs []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "|")
		if len(f) >= 3 && strings.TrimSpace(f[0]) == name {
			vs = append(vs, strings.TrimSpace(f[1]))
		}
	}
	return vs
}

// DebFileName is the file name apt-get download gives a package: the epoch colon is escaped as
// %3a.
func DebFileName(name, version, arch string) string {
	return name + "_" + strings.ReplaceAll(version, ":", "%3a") + "_" + arch + ".deb"
}

func findDeb(dir, name, version string) (string, error) {
	for _, arch := range []string{"amd64", "all"} {
		p := filepath.Join(dir, DebFileName(name, version, arch))
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("images: apt-get download did not produce %s=%s in %s", name, version, dir)
}

// run runs an apt tool with the private configuration. Its output is streamed line by line to
// Progress (and returned for apt-cache); on failure the error carries the last lines.
func (a *Apt) run(ctx context.Context, tool, dir string, args ...string) (string, error) {
	argv := []string{"-c", filepath.Join(a.Dir, "apt.conf"), "-q"}
	if os.Geteuid() == 0 {
		// As root apt drops to _apt for downloads; _apt cannot write into a private root under
		// /root, so stay root (the files are still verified against the signed lists).
		argv = append(argv, "-o", "APT::Sandbox::User=root")
	}
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, tool, argv...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	cmd.WaitDelay = 5 * time.Second
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", err
	}
	cmd.Stdout = pw
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return "", fmt.Errorf("images: %s: %w", tool, err)
	}
	pw.Close()
	var all strings.Builder
	last := tail{n: 15}
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if tool == "apt-cache" {
			all.WriteString(line)
			all.WriteByte('\n')
		} else {
			fmt.Fprintf(a.progress(), "  %s\n", line)
		}
		last.add(line)
	}
	pr.Close()
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", fmt.Errorf("images: %s %s: %w\n%s", tool, args[0], err, last.String())
	}
	return all.String(), nil
}

// aptEtc is the host's apt configuration folder (a variable for tests).
var aptEtc = "/etc/apt"

// MirrorEnv and SecurityMirrorEnv name the environment variables that choose the Debian
// archives instead of the host's apt sources.
const (
	MirrorEnv         = "VGPU_DEBIAN_MIRROR"
	SecurityMirrorEnv = "VGPU_DEBIAN_SECURITY_MIRROR"
)

// HostMirror returns the URI of the Debian archive to fetch from: $VGPU_DEBIAN_MIRROR, else
// the first Debian main-archive entry (a Debian suite that is not -security) of the host's apt
// sources (sources.list, then sources.list.d/*.list and *.sources in apt's order). There is no
// built-in default: without either it fails with an error naming both.
func HostMirror() (string, error) {
	if m := os.Getenv(MirrorEnv); m != "" {
		return strings.TrimRight(m, "/"), nil
	}
	if m := firstURI(hostAptEntries(), isMainEntry); m != "" {
		return m, nil
	}
	return "", fmt.Errorf("images: no Debian mirror: the host's apt sources (%s) list no Debian archive; "+
		"set $%s or --debian-mirror to one (e.g. http://mirror.example/debian)", aptSourcesDescription(), MirrorEnv)
}

// HostSecurityMirror returns the URI of the Debian security archive: $VGPU_DEBIAN_SECURITY_MIRROR,
// else the first "<suite>-security" entry of the host's apt sources, else an error naming both.
func HostSecurityMirror() (string, error) {
	if m := os.Getenv(SecurityMirrorEnv); m != "" {
		return strings.TrimRight(m, "/"), nil
	}
	if m := firstURI(hostAptEntries(), isSecurityEntry); m != "" {
		return m, nil
	}
	return "", fmt.Errorf("images: no Debian security mirror: the host's apt sources (%s) list no <suite>-security archive; "+
		"set $%s or --debian-security-mirror to one (e.g. http://mirror.example/debian-security)", aptSourcesDescription(), SecurityMirrorEnv)
}

func aptSourcesDescription() string {
	return filepath.Join(aptEtc, "sources.list") + ", " + filepath.Join(aptEtc, "sources.list.d") + "/*.list and *.sources"
}

// hostAptEntries lists the "deb" entries of the host's apt sources in the order apt reads
// them: sources.list, then the files of sources.list.d by name (only *.list and *.sources, as
// apt ignores the rest, e.g. *.disabled).
func hostAptEntries() []aptEntry {
	var out []aptEntry
	if b, err := os.ReadFile(filepath.Join(aptEtc, "sources.list")); err == nil {
		out = append(out, parseSourcesList(string(b))...)
	}
	dir := filepath.Join(aptEtc, "sources.list.d")
	files, _ := os.ReadDir(dir) // sorted by name; a missing folder lists nothing
	for _, f := range files {
		name := f.Name()
		if f.IsDir() || !strings.HasSuffix(name, ".list") && !strings.HasSuffix(name, ".sources") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		if strings.HasSuffix(name, ".sources") {
			out = append(out, parseDeb822(string(b))...)
		} else {
			out = append(out, parseSourcesList(string(b))...)
		}
	}
	return out
}

// aptEntry is one (archive URI, suite) pair of an apt sources file.
type aptEntry struct{ URI, Suite string }

// parseDeb822 lists the entries of the enabled "Types: deb" stanzas of a deb822 sources file.
func parseDeb822(text string) []aptEntry {
	var out []aptEntry
	for _, stanza := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(line, "#") || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
				continue
			}
			if k, v, ok := strings.Cut(line, ":"); ok {
				fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
		if !strings.Contains(" "+fields["types"]+" ", " deb ") || strings.EqualFold(fields["enabled"], "no") {
			continue
		}
		for _, uri := range strings.Fields(fields["uris"]) {
			for _, suite := range strings.Fields(fields["suites"]) {
				out = append(out, aptEntry{uri, suite})
			}
		}
	}
	return out
}

// parseSourcesList lists the one-line "deb" entries of a sources.list, skipping [options].
func parseSourcesList(text string) []aptEntry {
	var out []aptEntry
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			f = f[1:]
		}
		if len(f) >= 2 {
			out = append(out, aptEntry{f[0], f[1]})
		}
	}
	return out
}

// firstURI is the URI of the first entry match accepts, without a trailing slash.
func firstURI(entries []aptEntry, match func(aptEntry) bool) string {
	for _, e := range entries {
		if match(e) {
			return strings.TrimRight(e.URI, "/")
		}
	}
	return ""
}

func isHTTP(uri string) bool {
	return strings.HasPrefix(uri, "http://") || strings.HasPrefix(uri, "https://")
}

// debianReleases are the code names and aliases of Debian releases: an apt suite made of one
// of them (and a suffix such as -updates) is Debian's archive, not a third-party repository.
var debianReleases = []string{"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
	"oldoldstable", "oldstable", "stable", "testing", "unstable", "experimental"}

// debianSuite splits a suite into a Debian release and its suffix ("bookworm-updates" →
// "bookworm", "-updates"); ok is false for a suite of another distribution or repository.
func debianSuite(suite string) (release, suffix string, ok bool) {
	release, rest, _ := strings.Cut(suite, "-")
	for _, r := range debianReleases {
		if r == release {
			if rest != "" {
				rest = "-" + rest
			}
			return release, rest, true
		}
	}
	return "", "", false
}

// isMainEntry: Debian's main archive (a release, -updates, -backports, -proposed-updates), not
// a security one.
func isMainEntry(e aptEntry) bool {
	_, suffix, ok := debianSuite(e.Suite)
	switch {
	case !ok || !isHTTP(e.URI) || strings.Contains(e.URI, "security"):
		return false
	case suffix == "", suffix == "-updates", suffix == "-backports", suffix == "-backports-sloppy", suffix == "-proposed-updates":
		return true
	}
	return false
}

// isSecurityEntry: a Debian "<release>-security" archive.
func isSecurityEntry(e aptEntry) bool {
	_, suffix, ok := debianSuite(e.Suite)
	return ok && suffix == "-security" && isHTTP(e.URI)
}

// mirrorFromDeb822 picks the first URI of a "Types: deb" stanza of Debian's main archive.
func mirrorFromDeb822(text string) string { return firstURI(parseDeb822(text), isMainEntry) }

// mirrorFromSourcesList picks the URI of the first one-line "deb" entry of Debian's main
// archive.
func mirrorFromSourcesList(text string) string { return firstURI(parseSourcesList(text), isMainEntry) }

// writeFileAtomic writes data to a temporary file beside path and renames it into place.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}
