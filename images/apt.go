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

// DefaultMirror is used when the host names no Debian mirror.
const DefaultMirror = "http://deb.debian.org/debian"

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
	Mirror   string    // "" → HostMirror()
	Sources  []Source  // suites to list
	Keyring  string    // "" → DebianKeyring
	Arch     string    // "" → amd64
	Progress io.Writer // apt's output lines and our own notes; nil → discarded
}

// NewApt returns an Apt whose root lives in cache under a name derived from the mirror and the
// sources, so different suite sets never share (or clobber) lists.
func NewApt(cache string, sources []Source, progress io.Writer) *Apt {
	a := &Apt{Sources: sources, Progress: progress}
	var items []string
	for _, s := range sources {
		items = append(items, s.Suite+" "+strings.Join(s.Components, " "))
	}
	items = append(items, "mirror "+a.mirror())
	a.Dir = filepath.Join(cache, "apt-"+Key("apt-root", items))
	return a
}

func (a *Apt) mirror() string {
	if a.Mirror != "" {
		return strings.TrimRight(a.Mirror, "/")
	}
	return HostMirror()
}

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

// HostMirror returns the Debian archive URI the host uses: the URIs: field of the deb822 stanza
// in /etc/apt/sources.list.d/debian.sources that is not the security archive, else the first such
// deb line of /etc/apt/sources.list, else DefaultMirror. $VGPU_DEBIAN_MIRROR overrides all.
func HostMirror() string {
	if m := os.Getenv("VGPU_DEBIAN_MIRROR"); m != "" {
		return strings.TrimRight(m, "/")
	}
	if b, err := os.ReadFile("/etc/apt/sources.list.d/debian.sources"); err == nil {
		if m := mirrorFromDeb822(string(b)); m != "" {
			return m
		}
	}
	if b, err := os.ReadFile("/etc/apt/sources.list"); err == nil {
		if m := mirrorFromSourcesList(string(b)); m != "" {
			return m
		}
	}
	return DefaultMirror
}

func isMainArchive(uri string) bool { return isHTTP(uri) && !strings.Contains(uri, "security") }

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

// isMainEntry: the main archive, not a security one.
func isMainEntry(e aptEntry) bool {
	return isMainArchive(e.URI) && !strings.Contains(e.Suite, "security")
}

// isSecurityEntry: a "<suite>-security" archive.
func isSecurityEntry(e aptEntry) bool {
	return isHTTP(e.URI) && strings.HasSuffix(e.Suite, "-security")
}

// mirrorFromDeb822 picks the first URI of a "Types: deb" stanza that is not a security archive.
func mirrorFromDeb822(text string) string { return firstURI(parseDeb822(text), isMainEntry) }

// mirrorFromSourcesList picks the URI of the first one-line "deb" entry that is not a security
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
