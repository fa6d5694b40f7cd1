package images

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// CPIOWriter writes a cpio archive in the "newc" format (magic 070701), the one the kernel
// unpacks as an initramfs (Documentation/driver-api/early-userspace/buffer-format.rst). Entries
// get inode numbers in order, uid/gid 0 and mtime 0, so the same calls give the same bytes.
// Names are relative ("bin/sh"; a leading "/" is dropped). Parent folders must be written before
// their contents. Errors stick: after the first one every call returns it.
type CPIOWriter struct {
	w   io.Writer
	ino uint32
	err error
}

// NewCPIOWriter returns a writer that appends entries to w. Call Close to add the trailer.
func NewCPIOWriter(w io.Writer) *CPIOWriter { return &CPIOWriter{w: w, ino: 1} }

// File modes of newc entries (the st_mode bits, as in <sys/stat.h>).
const (
	cpioDir     = 0o040000
	cpioFile    = 0o100000
	cpioSymlink = 0o120000
	cpioCharDev = 0o020000
	cpioTrailer = "TRAILER!!!"
)

// Dir adds a folder.
func (c *CPIOWriter) Dir(name string, perm os.FileMode) error {
	return c.entry(name, cpioDir|uint32(perm.Perm()), 2, 0, 0, nil)
}

// File adds a regular file with the given permission bits (e.g. 0o755 for /init).
func (c *CPIOWriter) File(name string, perm os.FileMode, data []byte) error {
	return c.entry(name, cpioFile|uint32(perm&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky)), 1, 0, 0, data)
}

// Symlink adds a symbolic link name → target.
func (c *CPIOWriter) Symlink(name, target string) error {
	return c.entry(name, cpioSymlink|0o777, 1, 0, 0, []byte(target))
}

// CharDev adds a character device node, e.g. dev/console (5, 1).
func (c *CPIOWriter) CharDev(name string, perm os.FileMode, major, minor uint32) error {
	return c.entry(name, cpioCharDev|uint32(perm.Perm()), 1, major, minor, nil)
}

// Close writes the trailer entry. It does not close the underlying writer.
func (c *CPIOWriter) Close() error {
	if c.err != nil {
		return c.err
	}
	c.ino = 0
	err := c.raw(cpioTrailer, 0, 1, 0, 0, nil)
	if err == nil {
		c.err = errors.New("images: cpio archive closed")
	}
	return err
}

func (c *CPIOWriter) entry(name string, mode, nlink, rmajor, rminor uint32, data []byte) error {
	if c.err != nil {
		return c.err
	}
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if name == "" || name == cpioTrailer {
		c.err = fmt.Errorf("images: cpio: bad entry name %q", name)
		return c.err
	}
	return c.raw(name, mode, nlink, rmajor, rminor, data)
}

// raw writes one header, the NUL-terminated name padded to 4 bytes, then the data padded to 4.
func (c *CPIOWriter) raw(name string, mode, nlink, rmajor, rminor uint32, data []byte) error {
	if uint64(len(data)) > 0xffffffff {
		c.err = fmt.Errorf("images: cpio: %s is larger than 4 GiB", name)
		return c.err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rmajor, rminor, len(name)+1, 0)
	if c.ino != 0 {
		c.ino++
	}
	b.WriteString(name)
	b.WriteByte(0)
	b.Write(make([]byte, pad4(b.Len())))
	if _, err := c.w.Write(b.Bytes()); err != nil {
		c.err = err
		return err
	}
	if len(data) > 0 {
		if _, err := c.w.Write(data); err != nil {
			c.err = err
			return err
		}
		if _, err := c.w.Write(make([]byte, pad4(len(data)))); err != nil {
			c.err = err
			return err
		}
	}
	return nil
}

// pad4 is the number of zero bytes that bring n to a multiple of 4 (110-byte headers make every
// entry start 4-aligned as long as names and data are padded).
func pad4(n int) int { return (4 - n%4) % 4 }

// initScript is /init: see init.sh for what it does and the lines it reports.
//
//go:embed init.sh
var initScript []byte

// InitScript returns the /init the initramfs runs (a POSIX sh script for busybox).
func InitScript() []byte { return append([]byte(nil), initScript...) }

// Markers that /init writes, on the results port and on the console, after the module's KTAP
// block. The last line of a run is always InitEnd, also when the module or the device is
// missing.
const (
	// ResultsPortName is the virtio-serial port name /init looks for
	// (-device virtserialport,name=results).
	ResultsPortName = "results"
	// InitEnd ends every run.
	InitEnd = "# vgpu-init: end"
	// InitPrefix starts every line /init adds itself ("# vgpu-init: insmod rc=0", "rmmod rc=0",
	// "irqs-after-rmmod=0", notes).
	InitPrefix = "# vgpu-init: "
	// ModuleDone is the line vgpu_test.ko prints last ("# vgpu_test: done pass=.. fail=.. skip=..").
	ModuleDone = "# vgpu_test: done"
)

// initApplets are the busybox applets /init and an interactive shell use; each gets a
// /bin/<name> → busybox symlink (with vgpu_keep=1 /init installs all of them).
var initApplets = []string{
	"sh", "ash", "mount", "umount", "insmod", "rmmod", "lsmod", "modinfo", "cat", "grep", "sed", "awk",
	"dmesg", "poweroff", "reboot", "sleep", "usleep", "echo", "printf", "ls", "mkdir", "ln", "rm", "head",
	"tail", "wc", "tr", "cut", "test", "[", "timeout", "kill", "setsid", "cttyhack", "uptime", "basename",
	"readlink", "stat", "cp", "mv", "xxd", "hexdump", "devmem", "ps", "true", "false", "env",
}

// initrdFile is one file placed into the initramfs.
type initrdFile struct {
	Name string // path inside the archive, e.g. "lib/modules/virtio.ko"
	Mode os.FileMode
	Data []byte
}

// initrdSpec is everything the initramfs holds; its hash is the cache key.
type initrdSpec struct {
	Busybox []byte
	Init    []byte
	// Modules are loaded in this order before the test module; names without ".ko".
	Modules []initrdFile
	// Test is vgpu_test.ko (may be nil: /init then reports a missing module).
	Test []byte
	Gzip bool

	// Suite is SuiteDRM for the DRM suite ("" for the KTAP suite): /etc/vgpu-suite says so to
	// /init, which then loads DRM (the kernel's DRM modules, in order) and Driver
	// (vgpu_drm.ko) and runs Program (/bin/vgpu-drmtest).
	Suite           string
	DRM             []initrdFile
	Driver, Program []byte
}

// initrdLayout is mixed into the initrd cache key; bump it when writeInitrd changes.
const initrdLayout = "guest-initrd-v1"

// key hashes every byte and name the archive will hold.
func (s *initrdSpec) key() string {
	sum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	items := []string{
		"busybox " + sum(s.Busybox),
		"init " + sum(s.Init),
		"test " + sum(s.Test),
		fmt.Sprintf("gzip %v", s.Gzip),
		"applets " + strings.Join(initApplets, ","),
	}
	order := make([]string, len(s.Modules))
	for i, m := range s.Modules {
		order[i] = m.Name
		items = append(items, "module "+m.Name+" "+sum(m.Data))
	}
	items = append(items, "order "+strings.Join(order, ","))
	if s.Suite != "" {
		drm := make([]string, len(s.DRM))
		for i, m := range s.DRM {
			drm[i] = m.Name
			items = append(items, "drm-module "+m.Name+" "+sum(m.Data))
		}
		items = append(items, "suite "+s.Suite, "drm-order "+strings.Join(drm, ","),
			"driver "+sum(s.Driver), "program "+sum(s.Program))
	}
	return Key(initrdLayout, items)
}

// write renders the archive (gzip-compressed when s.Gzip).
func (s *initrdSpec) write(w io.Writer) error {
	var zw *gzip.Writer
	if s.Gzip {
		var err error
		// BestSpeed: most of the archive is busybox and modules; level 9 saves ~5 % for 3× the time.
		if zw, err = gzip.NewWriterLevel(w, gzip.BestSpeed); err != nil {
			return err
		}
		w = zw
	}
	c := NewCPIOWriter(w)
	for _, d := range []string{"bin", "dev", "etc", "lib", "lib/modules", "proc", "root", "run", "sys", "tmp"} {
		perm := os.FileMode(0o755)
		if d == "tmp" {
			perm = 0o1777
		}
		c.Dir(d, perm)
	}
	// The kernel opens /dev/console for init's stdio before /init can mount devtmpfs.
	c.CharDev("dev/console", 0o600, 5, 1)
	c.CharDev("dev/null", 0o666, 1, 3)
	c.File("bin/busybox", 0o755, s.Busybox)
	for _, a := range initApplets {
		c.Symlink("bin/"+a, "busybox")
	}
	var order strings.Builder
	for _, m := range s.Modules {
		c.File("lib/modules/"+m.Name+".ko", 0o644, m.Data)
		order.WriteString(m.Name + "\n")
	}
	c.File("lib/modules/load.order", 0o644, []byte(order.String()))
	if s.Test != nil {
		c.File("lib/modules/vgpu_test.ko", 0o644, s.Test)
	}
	if s.Suite != "" {
		c.File(suiteInitrdFile, 0o644, []byte(s.Suite+"\n"))
		c.Dir(drmInitrdDir, 0o755)
		var drm strings.Builder
		for _, m := range s.DRM {
			c.File(drmInitrdDir+"/"+m.Name+".ko", 0o644, m.Data)
			drm.WriteString(m.Name + "\n")
		}
		c.File(drmInitrdDir+"/load.order", 0o644, []byte(drm.String()))
		if s.Driver != nil {
			c.File(drmInitrdDriver, 0o644, s.Driver)
		}
		if s.Program != nil {
			c.File(drmInitrdProgram, 0o755, s.Program)
		}
	}
	c.File("init", 0o755, s.Init)
	if err := c.Close(); err != nil {
		return err
	}
	if zw != nil {
		return zw.Close()
	}
	return nil
}

// buildInitrd writes the initramfs for spec into cache as guest-initrd-<key>.cpio[.gz] unless
// it is there already, and returns its path.
func buildInitrd(cache string, spec *initrdSpec) (string, error) {
	name := "guest-initrd-" + spec.key() + ".cpio"
	if spec.Gzip {
		name += ".gz"
	}
	p := filepath.Join(cache, name)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	var b bytes.Buffer
	if err := spec.write(&b); err != nil {
		return "", err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	// Content-addressed: a concurrent writer produces the same bytes, and the rename is atomic.
	if err := writeFileAtomic(p, b.Bytes()); err != nil {
		return "", err
	}
	return p, nil
}
