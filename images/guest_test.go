package images

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpioEntry is one parsed newc entry.
type cpioEntry struct {
	Name         string
	Ino, Mode    uint32
	NLink        uint32
	UID, GID     uint32
	Mtime        uint32
	RMaj, RMin   uint32
	Data         []byte
	HeaderOffset int
}

// readCPIO parses a newc archive up to its trailer, checking magic, alignment and padding.
func readCPIO(t *testing.T, b []byte) []cpioEntry {
	t.Helper()
	var out []cpioEntry
	off := 0
	for {
		if off%4 != 0 {
			t.Fatalf("entry at %d not 4-aligned", off)
		}
		if off+110 > len(b) {
			t.Fatalf("truncated header at %d", off)
		}
		h := b[off : off+110]
		if string(h[:6]) != "070701" {
			t.Fatalf("bad magic %q at %d", h[:6], off)
		}
		f := make([]uint32, 13)
		for i := range f {
			v, err := strconv.ParseUint(string(h[6+8*i:14+8*i]), 16, 32)
			if err != nil {
				t.Fatalf("field %d at %d: %v", i, off, err)
			}
			f[i] = uint32(v)
		}
		namesize, filesize := int(f[11]), int(f[6])
		nameEnd := off + 110 + namesize
		if nameEnd > len(b) || b[nameEnd-1] != 0 {
			t.Fatalf("name at %d not NUL-terminated", off)
		}
		e := cpioEntry{Name: string(b[off+110 : nameEnd-1]), Ino: f[0], Mode: f[1], UID: f[2], GID: f[3], NLink: f[4],
			Mtime: f[5], RMaj: f[9], RMin: f[10], HeaderOffset: off}
		if f[12] != 0 {
			t.Errorf("%s: check field %d", e.Name, f[12])
		}
		dataStart := nameEnd + pad4(nameEnd)
		if !allZero(b[nameEnd:dataStart]) {
			t.Errorf("%s: non-zero name padding", e.Name)
		}
		if dataStart+filesize > len(b) {
			t.Fatalf("%s: data truncated", e.Name)
		}
		e.Data = b[dataStart : dataStart+filesize]
		end := dataStart + filesize
		next := end + pad4(end)
		if next > len(b) || !allZero(b[end:next]) {
			t.Fatalf("%s: bad data padding", e.Name)
		}
		off = next
		if e.Name == cpioTrailer {
			if off != len(b) {
				t.Errorf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out = append(out, e)
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func TestCPIOWriter(t *testing.T) {
	type op struct {
		kind   string // dir file link char
		name   string
		perm   os.FileMode
		data   string
		target string
		maj    uint32
		min    uint32
	}
	tests := []struct {
		name string
		ops  []op
		want []cpioEntry // Name, Mode, NLink, RMaj, RMin, Data
	}{
		{"empty", nil, nil},
		{"dir", []op{{kind: "dir", name: "bin", perm: 0o755}},
			[]cpioEntry{{Name: "bin", Mode: 0o40755, NLink: 2}}},
		{"leading slash and sticky tmp", []op{{kind: "dir", name: "/tmp", perm: 0o1777}},
			[]cpioEntry{{Name: "tmp", Mode: 0o40777, NLink: 2}}},
		{"files of every padding", []op{
			{kind: "file", name: "a", perm: 0o644, data: ""},
			{kind: "file", name: "bb", perm: 0o644, data: "1"},
			{kind: "file", name: "ccc", perm: 0o600, data: "12"},
			{kind: "file", name: "dddd", perm: 0o755, data: "123"},
			{kind: "file", name: "init", perm: 0o755, data: "1234"},
			{kind: "file", name: "dir/x", perm: 0o750, data: "12345"},
		}, []cpioEntry{
			{Name: "a", Mode: 0o100644, NLink: 1, Data: []byte("")},
			{Name: "bb", Mode: 0o100644, NLink: 1, Data: []byte("1")},
			{Name: "ccc", Mode: 0o100600, NLink: 1, Data: []byte("12")},
			{Name: "dddd", Mode: 0o100755, NLink: 1, Data: []byte("123")},
			{Name: "init", Mode: 0o100755, NLink: 1, Data: []byte("1234")},
			{Name: "dir/x", Mode: 0o100750, NLink: 1, Data: []byte("12345")},
		}},
		{"symlink", []op{{kind: "link", name: "bin/sh", target: "busybox"}},
			[]cpioEntry{{Name: "bin/sh", Mode: 0o120777, NLink: 1, Data: []byte("busybox")}}},
		{"devices", []op{
			{kind: "char", name: "dev/console", perm: 0o600, maj: 5, min: 1},
			{kind: "char", name: "dev/null", perm: 0o666, maj: 1, min: 3},
		}, []cpioEntry{
			{Name: "dev/console", Mode: 0o20600, NLink: 1, RMaj: 5, RMin: 1},
			{Name: "dev/null", Mode: 0o20666, NLink: 1, RMaj: 1, RMin: 3},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			w := NewCPIOWriter(&b)
			for _, o := range tt.ops {
				var err error
				switch o.kind {
				case "dir":
					err = w.Dir(o.name, o.perm)
				case "file":
					err = w.File(o.name, o.perm, []byte(o.data))
				case "link":
					err = w.Symlink(o.name, o.target)
				case "char":
					err = w.CharDev(o.name, o.perm, o.maj, o.min)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got := readCPIO(t, b.Bytes())
			if len(got) != len(tt.want) {
				t.Fatalf("%d entries, want %d: %+v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Name != w.Name || g.Mode != w.Mode || g.NLink != w.NLink || g.RMaj != w.RMaj || g.RMin != w.RMin ||
					!bytes.Equal(g.Data, w.Data) {
					t.Errorf("entry %d = %+v, want %+v", i, g, w)
				}
				if g.UID != 0 || g.GID != 0 || g.Mtime != 0 {
					t.Errorf("%s: uid/gid/mtime %d/%d/%d, want 0", g.Name, g.UID, g.GID, g.Mtime)
				}
			}
			// Inode numbers are distinct and non-zero.
			seen := map[uint32]bool{}
			for _, g := range got {
				if g.Ino == 0 || seen[g.Ino] {
					t.Errorf("%s: inode %d", g.Name, g.Ino)
				}
				seen[g.Ino] = true
			}
		})
	}

	// Errors stick, bad names are rejected, writing after Close fails.
	var b bytes.Buffer
	w := NewCPIOWriter(&b)
	if err := w.File("/", 0o644, nil); err == nil {
		t.Errorf("empty name accepted")
	}
	if err := w.Dir("ok", 0o755); err == nil {
		t.Errorf("error did not stick")
	}
	w = NewCPIOWriter(&b)
	if err := w.File(cpioTrailer, 0o644, nil); err == nil {
		t.Errorf("trailer name accepted")
	}
	w = NewCPIOWriter(io.Discard)
	w.Close()
	if err := w.Dir("x", 0o755); err == nil {
		t.Errorf("write after Close accepted")
	}
}

// testInitrdSpec is a small spec with fake contents.
func testInitrdSpec(gz bool) *initrdSpec {
	return &initrdSpec{
		Busybox: []byte("\x7fELF fake busybox"),
		Init:    initScript,
		Modules: []initrdFile{{Name: "virtio_ring", Data: []byte("ring")}, {Name: "virtio", Data: []byte("virtio")}},
		Test:    []byte("test module"),
		Gzip:    gz,
	}
}

func TestInitrdLayout(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			spec := testInitrdSpec(gz)
			var b bytes.Buffer
			if err := spec.write(&b); err != nil {
				t.Fatal(err)
			}
			raw := b.Bytes()
			if gz {
				zr, err := gzip.NewReader(&b)
				if err != nil {
					t.Fatal(err)
				}
				if raw, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			entries := map[string]cpioEntry{}
			var order []string
			for _, e := range readCPIO(t, raw) {
				entries[e.Name] = e
				order = append(order, e.Name)
			}
			check := func(name string, mode uint32, data string) {
				t.Helper()
				e, ok := entries[name]
				if !ok {
					t.Errorf("no %s in %v", name, order)
					return
				}
				if e.Mode != mode {
					t.Errorf("%s: mode %o, want %o", name, e.Mode, mode)
				}
				if data != "" && string(e.Data) != data {
					t.Errorf("%s: data %q, want %q", name, e.Data, data)
				}
			}
			check("init", 0o100755, string(initScript))
			check("bin/busybox", 0o100755, "\x7fELF fake busybox")
			check("bin/sh", 0o120777, "busybox")
			check("bin/insmod", 0o120777, "busybox")
			check("bin/poweroff", 0o120777, "busybox")
			check("lib/modules/virtio_ring.ko", 0o100644, "ring")
			check("lib/modules/virtio.ko", 0o100644, "virtio")
			check("lib/modules/load.order", 0o100644, "virtio_ring\nvirtio\n")
			check("lib/modules/vgpu_test.ko", 0o100644, "test module")
			check("dev/console", 0o20600, "")
			check("dev/null", 0o20666, "")
			check("proc", 0o40755, "")
			if e := entries["dev/console"]; e.RMaj != 5 || e.RMin != 1 {
				t.Errorf("console %d,%d", e.RMaj, e.RMin)
			}
			// Parents come before their contents (the kernel does not create folders).
			pos := map[string]int{}
			for i, n := range order {
				pos[n] = i
			}
			for n, i := range pos {
				if d := filepath.Dir(n); d != "." {
					if j, ok := pos[d]; !ok || j >= i {
						t.Errorf("%s before its folder %s", n, d)
					}
				}
			}
			// Same spec, same bytes.
			var b2 bytes.Buffer
			spec.write(&b2)
			var b3 bytes.Buffer
			spec.write(&b3)
			if !bytes.Equal(b2.Bytes(), b3.Bytes()) {
				t.Errorf("output not deterministic")
			}
			// busybox's cpio, where there is one, agrees.
			if bb, err := exec.LookPath("busybox"); err == nil && !gz {
				out, err := exec.Command("sh", "-c", `"$1" cpio -t <"$2"`, "sh", bb, writeTemp(t, raw)).CombinedOutput()
				if err != nil {
					t.Errorf("busybox cpio -t: %v %s", err, out)
				} else if !strings.Contains(string(out), "lib/modules/vgpu_test.ko") {
					t.Errorf("busybox cpio -t: %s", out)
				}
			}
		})
	}
}

func writeTemp(t *testing.T, b []byte) string {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInitrdKeyAndCache(t *testing.T) {
	base := testInitrdSpec(false).key()
	if base != testInitrdSpec(false).key() {
		t.Fatal("key not stable")
	}
	for name, mut := range map[string]func(*initrdSpec){
		"gzip":         func(s *initrdSpec) { s.Gzip = true },
		"init":         func(s *initrdSpec) { s.Init = append(append([]byte(nil), s.Init...), '\n') },
		"busybox":      func(s *initrdSpec) { s.Busybox = []byte("other") },
		"test module":  func(s *initrdSpec) { s.Test = []byte("test module v2") },
		"no module":    func(s *initrdSpec) { s.Test = nil },
		"module data":  func(s *initrdSpec) { s.Modules[1].Data = []byte("virtio2") },
		"module order": func(s *initrdSpec) { s.Modules[0], s.Modules[1] = s.Modules[1], s.Modules[0] },
		"module added": func(s *initrdSpec) { s.Modules = append(s.Modules, initrdFile{Name: "virtio_pci", Data: []byte("p")}) },
	} {
		s := testInitrdSpec(false)
		mut(s)
		if s.key() == base {
			t.Errorf("%s: initrd key unchanged", name)
		}
	}
	cache := t.TempDir()
	p1, err := buildInitrd(cache, testInitrdSpec(false))
	if err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(p1)
	p2, err := buildInitrd(cache, testInitrdSpec(false))
	if err != nil || p2 != p1 {
		t.Fatalf("second build: %s %v (first %s)", p2, err, p1)
	}
	if st2, _ := os.Stat(p2); !st2.ModTime().Equal(st1.ModTime()) {
		t.Errorf("cached initrd rewritten")
	}
	pz, err := buildInitrd(cache, testInitrdSpec(true))
	if err != nil || pz == p1 || !strings.HasSuffix(pz, ".cpio.gz") || !strings.HasSuffix(p1, ".cpio") {
		t.Errorf("gzip initrd %s (plain %s): %v", pz, p1, err)
	}
}

func TestInitScript(t *testing.T) {
	if !bytes.HasPrefix(initScript, []byte("#!/bin/sh\n")) {
		t.Errorf("init.sh must start with #!/bin/sh")
	}
	for _, s := range []string{ResultsPortName, InitEnd[len(InitPrefix)-2:], "insmod rc=", "rmmod rc=", "irqs-after-rmmod=",
		"vgpu_test_args", "vgpu_keep", "poweroff -f", "/sys/class/virtio-ports/vport", "lib/modules/load.order"} {
		if !bytes.Contains(initScript, []byte(s)) {
			t.Errorf("init.sh lacks %q", s)
		}
	}
	if !strings.HasPrefix(InitEnd, InitPrefix) || !bytes.Contains(initScript, []byte(`P='`+InitPrefix+`'`)) {
		t.Errorf("init.sh prefix differs from InitPrefix %q", InitPrefix)
	}
	if !bytes.Contains(initScript, []byte(ModuleDone)) {
		t.Errorf("init.sh does not wait for %q", ModuleDone)
	}
	for _, a := range []string{"sh", "mount", "insmod", "rmmod", "cat", "grep", "sed", "dmesg", "poweroff", "sleep", "timeout", "setsid", "cttyhack", "mv"} {
		if !containsString(initApplets, a) {
			t.Errorf("applet %s has no symlink", a)
		}
	}
	for _, sh := range []string{"sh", "busybox"} {
		p, err := exec.LookPath(sh)
		if err != nil {
			continue
		}
		args := []string{"-n", writeTemp(t, initScript)}
		if sh == "busybox" {
			args = append([]string{"sh"}, args...)
		}
		if out, err := exec.Command(p, args...).CombinedOutput(); err != nil {
			t.Errorf("%s -n init.sh: %v %s", sh, err, out)
		}
	}
}

func TestFindLZ4Legacy(t *testing.T) {
	m := LZ4LegacyMagic
	tests := []struct {
		name string
		b    []byte
		want int
	}{
		{"empty", nil, -1},
		{"only magic", m, 0},
		{"after setup", append(bytes.Repeat([]byte{0x90}, 0x52cc), append(m, 0x11, 0xc1)...), 0x52cc},
		{"first of two", append(append([]byte("ab"), m...), m...), 2},
		{"partial magic", []byte{0x02, 0x21, 0x4c, 0x00, 0x02, 0x21}, -1},
		{"truncated at end", []byte{0, 0, 0x02, 0x21, 0x4c}, -1},
		{"frame magic is not legacy", []byte{0x04, 0x22, 0x4d, 0x18}, -1},
	}
	for _, tt := range tests {
		if got := findLZ4Legacy(tt.b); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

// fakeKernelELF is a minimal ELF64 executable whose one PT_NOTE segment holds the given notes.
func fakeKernelELF(notes ...[]byte) []byte {
	var note []byte
	for _, n := range notes {
		note = append(note, n...)
	}
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	binary.Write(&b, le, struct {
		Type, Machine              uint16
		Version                    uint32
		Entry, Phoff, Shoff        uint64
		Flags                      uint32
		Ehsize, Phentsize, Phnum   uint16
		Shentsize, Shnum, Shstrndx uint16
	}{2, 62, 1, 0x1000000, 64, 0, 0, 64, 56, 1, 64, 0, 0})
	binary.Write(&b, le, struct {
		Type, Flags                          uint32
		Off, Vaddr, Paddr, Filesz, Memsz, Al uint64
	}{4, 4, 120, 0, 0, uint64(len(note)), uint64(len(note)), 4})
	b.Write(note)
	return b.Bytes()
}

func elfNote(name string, typ uint32, desc []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, []uint32{uint32(len(name) + 1), uint32(len(desc)), typ})
	b.WriteString(name)
	b.WriteByte(0)
	b.Write(make([]byte, pad4(len(name)+1)))
	b.Write(desc)
	b.Write(make([]byte, pad4(len(desc))))
	return b.Bytes()
}

func TestPVHEntry(t *testing.T) {
	entry := []byte{0x30, 0x12, 0x00, 0x01} // 0x01001230
	tests := []struct {
		name    string
		b       []byte
		want    uint64
		wantErr bool
	}{
		{"pvh", fakeKernelELF(elfNote("Xen", 6, []byte("linux\x00")), elfNote("Xen", 0x12, entry)), 0x01001230, false},
		{"pvh 64-bit desc", fakeKernelELF(elfNote("Xen", 0x12, []byte{1, 0, 0, 0, 0, 0, 0, 0})), 1, false},
		{"xen notes without pvh", fakeKernelELF(elfNote("Xen", 6, []byte("linux\x00")), elfNote("Xen", 3, make([]byte, 8))), 0, true},
		{"type 0x12 from another owner", fakeKernelELF(elfNote("GNU", 0x12, entry)), 0, true},
		{"no notes", fakeKernelELF(), 0, true},
		{"not elf", []byte("MZ\x00\x00 this is a bzImage"), 0, true},
		{"truncated note", fakeKernelELF(elfNote("Xen", 0x12, entry)[:14]), 0, true},
	}
	for _, tt := range tests {
		got, err := PVHEntry(bytes.NewReader(tt.b))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: %#x, %v; want %#x, err %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// fakeBzImage wraps payload the way arch/x86/boot does: setup sectors with a "HdrS" header
// whose payload_offset/length locate it after the setup.
func fakeBzImage(payload []byte) []byte {
	const setupSects = 3
	b := make([]byte, (setupSects+1)*512+100)
	b[0x1f1] = setupSects
	copy(b[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(b[0x206:], 0x20f)
	binary.LittleEndian.PutUint32(b[0x248:], 100) // payload_offset
	binary.LittleEndian.PutUint32(b[0x24c:], uint32(len(payload)))
	b = append(b, payload...)
	return append(b, bytes.Repeat([]byte{0xee}, 300)...) // whatever follows the payload
}

func TestExtractVmlinux(t *testing.T) {
	ctx := t.Context()
	kernel := fakeKernelELF(elfNote("Xen", 0x12, []byte{0, 0x10, 0, 1}))
	kernel = append(kernel, bytes.Repeat([]byte("kernel text "), 5000)...)
	size := binary.LittleEndian.AppendUint32(nil, uint32(len(kernel)))

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(kernel)
	zw.Close()

	cases := map[string][]byte{
		"gzip":         fakeBzImage(gz.Bytes()),
		"already elf":  kernel,
		"no header":    append([]byte("garbage"), gz.Bytes()...),
		"wrong format": fakeBzImage([]byte("BZh91AY&SY not supported")),
	}
	wantErr := map[string]bool{"no header": true, "wrong format": true}
	if _, err := exec.LookPath("lz4"); err == nil {
		lz, err := exec.Command("sh", "-c", `lz4 -l -c1 <"$1"`, "sh", writeTemp(t, kernel)).Output()
		if err != nil {
			t.Fatalf("lz4 -l: %v", err)
		}
		if !bytes.HasPrefix(lz, LZ4LegacyMagic) {
			t.Fatalf("lz4 -l wrote % x", lz[:4])
		}
		cases["lz4"] = fakeBzImage(append(append([]byte(nil), lz...), size...))
		// Without a setup header the frame is found by its magic; lz4 complains about the bytes
		// after the frame but the ELF is complete.
		cases["lz4 by magic"] = append(append([]byte("no header here"), lz...), bytes.Repeat([]byte{0xee}, 300)...)
		bad := append(append([]byte(nil), lz...), binary.LittleEndian.AppendUint32(nil, uint32(len(kernel)+1))...)
		cases["lz4 wrong size"] = fakeBzImage(bad)
		wantErr["lz4 wrong size"] = true
	} else {
		t.Log("no lz4 tool: lz4 cases skipped")
	}
	for name, img := range cases {
		out := filepath.Join(t.TempDir(), "vmlinux")
		err := ExtractVmlinux(ctx, writeTemp(t, img), out)
		if (err != nil) != wantErr[name] {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if err != nil {
			t.Logf("%s: %v", name, err)
			continue
		}
		got, _ := os.ReadFile(out)
		if !bytes.Equal(got, kernel) {
			t.Errorf("%s: extracted %d bytes, want the %d-byte kernel", name, len(got), len(kernel))
		}
	}
	t.Run("no lz4 tool", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		img := fakeBzImage(append(append([]byte(nil), LZ4LegacyMagic...), 0, 0, 0, 0, 1, 2, 3, 4))
		err := ExtractVmlinux(ctx, writeTemp(t, img), filepath.Join(t.TempDir(), "vmlinux"))
		if err == nil || !strings.Contains(err.Error(), "apt-get install lz4") {
			t.Errorf("want an install hint, got %v", err)
		}
	})
}

func TestFixHeadersMakefile(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{"debian", "include /usr/src/linux-headers-6.1.0-57-common/Makefile\n", "include ../linux-headers-6.1.0-57-common/Makefile\n", false},
		{"no newline", "include /usr/src/linux-headers-6.1.0-57-common/Makefile", "include ../linux-headers-6.1.0-57-common/Makefile", false},
		{"already fixed", "include ../linux-headers-6.1.0-57-common/Makefile\n", "include ../linux-headers-6.1.0-57-common/Makefile\n", false},
		{"fixed by sed to a root", "include /root/.cache/vgpu/k/usr/src/linux-headers-6.1.0-50-common/Makefile\n", "include ../linux-headers-6.1.0-50-common/Makefile\n", false},
		{"with comments", "# generated\ninclude /usr/src/linux-headers-6.12.38+deb13-common/Makefile\n", "# generated\ninclude ../linux-headers-6.12.38+deb13-common/Makefile\n", false},
		{"not a headers makefile", "obj-m := x.o\n", "", true},
		{"empty", "", "", true},
	}
	for _, tt := range tests {
		p := writeTemp(t, []byte(tt.in))
		err := fixHeadersMakefile(p)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		got, _ := os.ReadFile(p)
		if !tt.wantErr && string(got) != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
		if tt.wantErr && string(got) != tt.in {
			t.Errorf("%s: file changed on error", tt.name)
		}
	}
}

// fakeKDir is a headers folder with just what the module key reads.
func fakeKDir(t *testing.T, release, symvers string) string {
	d := t.TempDir()
	os.MkdirAll(filepath.Join(d, "include", "generated"), 0o755)
	os.WriteFile(filepath.Join(d, "include", "generated", "utsrelease.h"), []byte(`#define UTS_RELEASE "`+release+`"`+"\n"), 0o644)
	os.WriteFile(filepath.Join(d, "Module.symvers"), []byte(symvers), 0o644)
	return d
}

func fakeModuleSrc(t *testing.T) string {
	d := t.TempDir()
	for name, data := range map[string]string{
		"Kbuild":             "obj-m := vgpu_test.o\n",
		"Makefile":           "all:\n",
		"vgpu_test.c":        "int x;\n",
		"include/vgpu_abi.h": "#define A 1\n",
		"README.md":          "docs\n",
		"vgpu_test.o":        "object",
		".git/config":        "x",
		"vgpu_test.mod.c":    "generated",
	} {
		p := filepath.Join(d, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(data), 0o644)
	}
	return d
}

func TestModuleKey(t *testing.T) {
	kdir := fakeKDir(t, "6.1.0-57-cloud-amd64", "0x1234 printk vmlinux EXPORT_SYMBOL\n")
	src := fakeModuleSrc(t)
	files, err := moduleSources(src)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(files, " "); got != "Kbuild Makefile include/vgpu_abi.h vgpu_test.c" {
		t.Errorf("sources: %s", got)
	}
	base, err := ModuleKey(kdir, src)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := ModuleKey(kdir, src); k != base {
		t.Fatal("module key not stable")
	}
	// Same contents elsewhere: same key.
	src2 := fakeModuleSrc(t)
	kdir2 := fakeKDir(t, "6.1.0-57-cloud-amd64", "0x1234 printk vmlinux EXPORT_SYMBOL\n")
	if k, _ := ModuleKey(kdir2, src2); k != base {
		t.Errorf("key depends on the folder paths")
	}
	// Files that are not sources do not count.
	os.WriteFile(filepath.Join(src2, "README.md"), []byte("changed"), 0o644)
	os.WriteFile(filepath.Join(src2, "vgpu_test.ko"), []byte("built"), 0o644)
	if k, _ := ModuleKey(kdir, src2); k != base {
		t.Errorf("key changed with a non-source file")
	}
	for name, mut := range map[string]func(src, kdir string){
		"c source": func(src, _ string) { os.WriteFile(filepath.Join(src, "vgpu_test.c"), []byte("int y;\n"), 0o644) },
		"header": func(src, _ string) {
			os.WriteFile(filepath.Join(src, "include/vgpu_abi.h"), []byte("#define A 2\n"), 0o644)
		},
		"Kbuild":     func(src, _ string) { os.WriteFile(filepath.Join(src, "Kbuild"), []byte("obj-m := other.o\n"), 0o644) },
		"new source": func(src, _ string) { os.WriteFile(filepath.Join(src, "extra.c"), []byte(""), 0o644) },
		"renamed":    func(src, _ string) { os.Rename(filepath.Join(src, "vgpu_test.c"), filepath.Join(src, "vgpu.c")) },
		"kernel abi": func(_, kdir string) {
			os.WriteFile(filepath.Join(kdir, "include/generated/utsrelease.h"), []byte(`#define UTS_RELEASE "6.1.0-58-cloud-amd64"`), 0o644)
		},
		"symvers": func(_, kdir string) {
			os.WriteFile(filepath.Join(kdir, "Module.symvers"), []byte("0x5678 printk\n"), 0o644)
		},
		"kdir config": func(_, kdir string) { os.WriteFile(filepath.Join(kdir, ".config"), []byte("CONFIG_X=y\n"), 0o644) },
	} {
		s, k := fakeModuleSrc(t), fakeKDir(t, "6.1.0-57-cloud-amd64", "0x1234 printk vmlinux EXPORT_SYMBOL\n")
		mut(s, k)
		if got, err := ModuleKey(k, s); err != nil || got == base {
			t.Errorf("%s: key %s unchanged (%v)", name, got, err)
		}
	}
	if _, err := ModuleKey(kdir, t.TempDir()); err == nil {
		t.Errorf("a folder without Kbuild/Makefile has a key")
	}
	if _, err := ModuleKey(t.TempDir(), src); err == nil {
		t.Errorf("a KDIR without a release has a key")
	}
}

func TestGuestPinnedTable(t *testing.T) {
	keys := map[string]string{}
	kbuild := "linux-kbuild-" + strings.Join(strings.SplitN(GuestKernelABI, ".", 3)[:2], ".")
	for _, tc := range []struct{ flavour, deb string }{{FlavourCloud, "cloud-amd64"}, {FlavourGeneric, "amd64"}, {"", "cloud-amd64"}} {
		kernel, busybox := splitGuestPackages(guestPackages, tc.flavour)
		if len(busybox) != 1 || len(kernel) != 4 {
			t.Fatalf("%q: kernel set %v, busybox %v", tc.flavour, kernel, busybox)
		}
		rel := GuestKernelReleaseOf(tc.flavour)
		if rel != GuestKernelABI+"-"+tc.deb {
			t.Errorf("%q: release %s", tc.flavour, rel)
		}
		abi, flavour, _, err := kernelSetABI(kernel)
		if err != nil || abi != GuestKernelABI || flavour != tc.deb {
			t.Errorf("%q: kernelSetABI = %s %s %v", tc.flavour, abi, flavour, err)
		}
		want := map[string]bool{"linux-image-" + rel: true, "linux-headers-" + rel: true,
			"linux-headers-" + GuestKernelABI + "-common": true, kbuild: true}
		version := kernel[0].Version
		if !strings.HasPrefix(kernel[0].Name, "linux-image-") {
			t.Errorf("%q: the set starts with %s, not its image", tc.flavour, kernel[0].Name)
		}
		for _, p := range kernel {
			if !want[p.Name] {
				t.Errorf("%s does not belong to ABI %s, flavour %s", p.Name, GuestKernelABI, tc.deb)
			}
			delete(want, p.Name)
			if p.Version != version {
				t.Errorf("%s: version %s, the image is %s", p.Name, p.Version, version)
			}
			if p.Suite != "bookworm-security" && p.Suite != "bookworm" {
				t.Errorf("%s: suite %s", p.Name, p.Suite)
			}
			if p.Suite != kernel[0].Suite {
				t.Errorf("%s: suite %s, the image is in %s (a fallback resolves the set in one suite)", p.Name, p.Suite, kernel[0].Suite)
			}
		}
		if len(want) != 0 {
			t.Errorf("%q: missing from the kernel set: %v", tc.flavour, want)
		}
		keys[GuestKernelKey(kernel)] = tc.deb
	}
	// One tree per flavour, and the cloud set's key is the one it had before the generic
	// kernel joined the table (users' caches keep their tree).
	if len(keys) != 2 {
		t.Errorf("kernel keys per flavour: %v", keys)
	}
	cloud, _ := splitGuestPackages(guestPackages, FlavourCloud)
	if got := GuestKernelKey(cloud); got != "e171151749a99e89" {
		t.Errorf("cloud kernel key %s, was e171151749a99e89", got)
	}
	if k, b := splitGuestPackages(guestPackages, "rt"); len(k) != 0 || len(b) != 1 {
		t.Errorf("unknown flavour: kernel %v", k)
	}
	for _, p := range guestPackages {
		if p.Name == "" || p.Version == "" || strings.ContainsAny(p.Name+p.Version, " =") {
			t.Errorf("bad entry %+v", p)
		}
	}
}

func TestFlavours(t *testing.T) {
	for _, tc := range []struct {
		opts           GuestOptions
		suite, flavour string // "" → error
	}{
		{GuestOptions{}, SuiteKTAP, FlavourCloud},
		{GuestOptions{Suite: SuiteKTAP}, SuiteKTAP, FlavourCloud},
		{GuestOptions{Suite: SuiteDRM}, SuiteDRM, FlavourGeneric},
		{GuestOptions{Flavour: FlavourGeneric}, SuiteKTAP, FlavourGeneric},
		{GuestOptions{Suite: SuiteKTAP, Flavour: FlavourGeneric}, SuiteKTAP, FlavourGeneric},
		{GuestOptions{Suite: SuiteDRM, Flavour: FlavourGeneric}, SuiteDRM, FlavourGeneric},
		{GuestOptions{Suite: SuiteDRM, Flavour: FlavourCloud}, "", ""}, // no DRM in the cloud kernel
		{GuestOptions{Suite: SuiteDRM, Flavour: FlavourCloud, Kernel: "own"}, SuiteDRM, FlavourCloud},
		{GuestOptions{NoTestModule: true}, SuiteKTAP, FlavourCloud},
		{GuestOptions{NoTestModule: true, Flavour: FlavourGeneric}, SuiteKTAP, FlavourGeneric},
		{GuestOptions{Flavour: "rt"}, "", ""},
		{GuestOptions{Suite: "kunit"}, "", ""},
	} {
		suite, flavour, err := suiteFlavour(tc.opts)
		if tc.suite == "" {
			if err == nil {
				t.Errorf("%+v: %s %s, want an error", tc.opts, suite, flavour)
			}
			continue
		}
		if err != nil || suite != tc.suite || flavour != tc.flavour {
			t.Errorf("%+v: %q %q %v, want %q %q", tc.opts, suite, flavour, err, tc.suite, tc.flavour)
		}
	}
	for f, want := range map[string]string{"": "cloud-amd64", "cloud": "cloud-amd64", "generic": "amd64", "amd64": ""} {
		got, err := DebianFlavour(f)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("DebianFlavour(%q) = %q %v", f, got, err)
		}
	}
	for name, want := range map[string]string{"linux-image-6.1.0-57-amd64": "amd64", "linux-headers-6.1.0-57-cloud-amd64": "cloud-amd64",
		"linux-headers-6.1.0-57-common": "common", "linux-kbuild-6.1": "", "busybox-static": ""} {
		if got := packageFlavour(name); got != want {
			t.Errorf("packageFlavour(%s) = %q, want %q", name, got, want)
		}
	}
	if SuiteFlavour(SuiteDRM) != FlavourGeneric || SuiteFlavour(SuiteKTAP) != FlavourCloud {
		t.Errorf("SuiteFlavour")
	}
}

func TestGuestKeys(t *testing.T) {
	base := GuestKernelKey(GuestPackages())
	if len(base) != 16 || base != GuestKernelKey(GuestPackages()) {
		t.Fatalf("key %q not stable", base)
	}
	for name, mut := range map[string]func([]GuestPackage) []GuestPackage{
		"version": func(p []GuestPackage) []GuestPackage { p[0].Version = "6.1.193-1"; return p },
		"suite":   func(p []GuestPackage) []GuestPackage { p[0].Suite = "bookworm"; return p },
		"name":    func(p []GuestPackage) []GuestPackage { p[1].Name += "x"; return p },
		"removed": func(p []GuestPackage) []GuestPackage { return p[1:] },
	} {
		if GuestKernelKey(mut(GuestPackages())) == base {
			t.Errorf("%s: key unchanged", name)
		}
	}
	if packagesKey(guestBusyboxLayout, GuestPackages()) == base {
		t.Errorf("busybox and kernel trees share keys")
	}
	// The key of a fixed list must not drift (it names folders in users' caches).
	if got, want := GuestKernelKey([]GuestPackage{{Package{"a", "1"}, "s"}}), Key(guestKernelLayout, []string{"a=1 s"}); got != want {
		t.Errorf("GuestKernelKey = %s, want %s", got, want)
	}
}

func TestSecurityMirror(t *testing.T) {
	deb822 := "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n\n" +
		"Types: deb\n# snapshot\nURIs: http://mirror.example/debian-security/\nSuites: bookworm-security\nComponents: main\n"
	if got := securityFromDeb822(deb822); got != "http://mirror.example/debian-security" {
		t.Errorf("deb822: %q", got)
	}
	if got := securityFromDeb822("Types: deb\nURIs: http://x/debian\nSuites: bookworm\n"); got != "" {
		t.Errorf("no security stanza: %q", got)
	}
	list := "deb http://ftp.mirror.example/debian bookworm main\ndeb [signed-by=/k.gpg] https://sec.mirror.example/debian-security/ bookworm-security main\n"
	if got := securityFromSourcesList(list); got != "https://sec.mirror.example/debian-security" {
		t.Errorf("sources.list: %q", got)
	}
	// A third-party "-security" suite is not Debian's.
	if got := securityFromSourcesList("deb http://other.example/repo tools-security main\n"); got != "" {
		t.Errorf("third-party security suite: %q", got)
	}
	hostApt(t, map[string]string{"sources.list": "deb http://mirror.example/debian bookworm main\n"})
	if got, err := HostSecurityMirror(); err == nil || !strings.Contains(err.Error(), SecurityMirrorEnv) ||
		!strings.Contains(err.Error(), "--debian-security-mirror") {
		t.Errorf("host without a security archive: %q, %v; want an error naming $%s and the flag", got, err, SecurityMirrorEnv)
	}
	t.Setenv(SecurityMirrorEnv, "http://override.example/ds/")
	if got, err := HostSecurityMirror(); err != nil || got != "http://override.example/ds" {
		t.Errorf("override: %q, %v", got, err)
	}
	m := guestMirrors{Main: "http://m.example/debian", Security: "http://m.example/debian-security/"}
	for suite, want := range map[string]string{"bookworm-security": "http://m.example/debian-security", "bookworm": m.Main, "bookworm-updates": m.Main} {
		if got, err := m.forSuite(suite); err != nil || got != want {
			t.Errorf("forSuite(%s) = %q, %v; want %q", suite, got, err, want)
		}
	}
	a := guestApt("/c", "http://m.example/debian-security", []string{"bookworm-security"}, nil)
	b := guestApt("/c", m.Main, []string{"bookworm"}, nil)
	if a.Dir == b.Dir || a.Mirror != "http://m.example/debian-security" || !strings.Contains(a.SourcesList(), "http://m.example/debian-security bookworm-security main") {
		t.Errorf("apt roots %s %s:\n%s", a.Dir, b.Dir, a.SourcesList())
	}
	// Empty fields are resolved from the host only when a suite needs them.
	t.Setenv(SecurityMirrorEnv, "")
	if _, err := (guestMirrors{Main: m.Main}).forSuite("bookworm"); err != nil {
		t.Errorf("main suite with no security archive: %v", err)
	}
	if _, err := (guestMirrors{Main: m.Main}).forSuite("bookworm-security"); err == nil {
		t.Errorf("security suite with no security archive anywhere: no error")
	}
}

func TestModinfoAndCmdline(t *testing.T) {
	info := parseModinfo([]byte("license=GPL\x00vermagic=6.1.0-57-cloud-amd64 SMP preempt mod_unload modversions \x00parm=tests:x\x00parm=vendor:y\x00\x00name=vgpu_test\x00"))
	if first(info["vermagic"]) != "6.1.0-57-cloud-amd64 SMP preempt mod_unload modversions " || len(info["parm"]) != 2 || first(info["name"]) != "vgpu_test" {
		t.Errorf("modinfo %v", info)
	}
	g := &GuestImage{CmdlineBase: GuestCmdlineBase}
	if got := g.Cmdline(""); got != "console=ttyS0 panic=-1 quiet no_timer_check" {
		t.Errorf("%q", got)
	}
	if got := g.Cmdline(" tests=dma,msix timeout_ms=5000 ", "intel_iommu=on", "vgpu_keep=1"); got !=
		`console=ttyS0 panic=-1 quiet no_timer_check intel_iommu=on vgpu_keep=1 vgpu_test_args="tests=dma,msix timeout_ms=5000"` {
		t.Errorf("%q", got)
	}
	if got := modulePathOf([]byte("// x\nmodule vgpu\n\ngo 1.26\n")); got != "vgpu" {
		t.Errorf("modulePathOf %q", got)
	}
}

func TestPruneGuestCache(t *testing.T) {
	cache := t.TempDir()
	old := time.Now().Add(-40 * 24 * time.Hour)
	mk := func(name string, dir bool, age time.Time) {
		p := filepath.Join(cache, name)
		stamp := p
		if dir {
			os.MkdirAll(p, 0o755)
			stamp = filepath.Join(p, markerName)
			if strings.HasPrefix(name, "guest-vmlinux-") {
				stamp = filepath.Join(p, "vmlinux")
			}
		}
		os.WriteFile(stamp, []byte("x"), 0o644)
		os.Chtimes(stamp, age, age)
	}
	mk("guest-kernel-old", true, old)
	mk("guest-kernel-used", true, old) // old, but used by this call
	mk("guest-kernel-new", true, time.Now())
	mk("guest-module-old", true, old)
	mk("guest-module-locked", true, old)
	mk("guest-initrd-old.cpio", false, old)
	mk("guest-initrd-used.cpio", false, old)
	mk("guest-vmlinux-old", true, old)
	mk("guest-kernel-x.tmp-1", true, old)
	mk("qemu-old", true, old)
	os.MkdirAll(filepath.Join(cache, "guest-kernel-nomarker"), 0o755)
	l, err := lockFile(t.Context(), filepath.Join(cache, "guest-module-locked.lock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	pruneGuestCache(t.Context(), cache, []string{
		filepath.Join(cache, "guest-kernel-used", "vmlinux"),
		filepath.Join(cache, "guest-initrd-used.cpio"),
		"/elsewhere/vmlinux",
	}, 30*24*time.Hour, &lineLogger{t: t})
	for name, want := range map[string]bool{
		"guest-kernel-old": false, "guest-kernel-used": true, "guest-kernel-new": true, "guest-module-old": false,
		"guest-module-locked": true, "guest-initrd-old.cpio": false, "guest-initrd-used.cpio": true,
		"guest-vmlinux-old": false, "guest-kernel-x.tmp-1": true, "qemu-old": true, "guest-kernel-nomarker": true,
	} {
		_, err := os.Stat(filepath.Join(cache, name))
		if got := err == nil; got != want {
			t.Errorf("%s: exists %v, want %v", name, got, want)
		}
	}
	if st, err := os.Stat(filepath.Join(cache, "guest-kernel-used", markerName)); err != nil || time.Since(st.ModTime()) > time.Minute {
		t.Errorf("used entry not touched: %v", err)
	}
}

// fakeDeb builds a .deb named name_1_all.deb holding files (path → content) with dpkg-deb -b.
func fakeDeb(t *testing.T, dir, name string, files []string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), name)
	os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755)
	os.WriteFile(filepath.Join(root, "DEBIAN", "control"), []byte("Package: "+name+"\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n"), 0o644)
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(f), 0o644)
	}
	deb := filepath.Join(dir, name+"_1_all.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "-b", root, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -b: %v %s", err, out)
	}
	return deb
}

func TestUnpackGuestDebs(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("no dpkg-deb")
	}
	if tarFilter("x/linux-kbuild-6.1_6.1.192-3_amd64.deb") != nil || tarFilter("busybox-static_1_amd64.deb") != nil ||
		tarFilter("linux-headers-6.1.0-57-cloud-amd64_6.1.192-3_amd64.deb") != nil {
		t.Errorf("packages unpacked in part that should be whole")
	}
	debs := t.TempDir()
	mods := "lib/modules/6.1.0-9-cloud-amd64/"
	image := []string{"boot/vmlinuz-6.1.0-9-cloud-amd64", "boot/config-6.1.0-9-cloud-amd64", mods + "modules.order",
		mods + "kernel/drivers/net/virtio_net.ko", mods + "kernel/fs/fuse/virtiofs.ko", mods + "kernel/drivers/char/virtio_console.ko"}
	for _, m := range VirtioModules[:len(VirtioModules)-1] {
		image = append(image, mods+"kernel/drivers/virtio/"+m+".ko")
	}
	common := []string{"usr/src/linux-headers-6.1.0-9-common/Makefile", "usr/src/linux-headers-6.1.0-9-common/arch/x86/include/asm/io.h",
		"usr/src/linux-headers-6.1.0-9-common/arch/mips/include/asm/io.h", "usr/src/linux-headers-6.1.0-9-common/arch/arm64/Makefile",
		"usr/src/linux-headers-6.1.0-9-common/include/linux/pci.h", "usr/src/linux-headers-6.1.0-9-common/include/arch/mips/x.h"}
	whole := []string{"usr/lib/linux-kbuild-6.1/scripts/Makefile.build"}
	list := []string{
		fakeDeb(t, debs, "linux-image-6.1.0-9-cloud-amd64", image),
		fakeDeb(t, debs, "linux-headers-6.1.0-9-common", common),
		fakeDeb(t, debs, "linux-kbuild-6.1", whole),
	}
	root := t.TempDir()
	if err := unpackGuestDebs(t.Context(), list, root, &lineLogger{t: t}); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return nil
	})
	has := map[string]bool{}
	for _, g := range got {
		has[g] = true
	}
	for _, f := range append(append(append([]string{}, image...), common...), whole...) {
		want := true
		switch {
		case strings.Contains(f, "/arch/mips/") && !strings.Contains(f, "include/arch"), strings.Contains(f, "/arch/arm64/"),
			strings.HasSuffix(f, "virtio_net.ko"), strings.HasSuffix(f, "virtiofs.ko"):
			want = false
		}
		if has[f] != want {
			t.Errorf("%s: unpacked %v, want %v", f, has[f], want)
		}
	}
	// A package whose data is not what the filter expects fails loudly.
	bad := fakeDeb(t, debs, "linux-image-6.1.0-10-cloud-amd64", []string{"boot/vmlinuz-6.1.0-10-cloud-amd64"})
	if err := unpackGuestDebs(t.Context(), []string{bad}, t.TempDir(), io.Discard); err == nil {
		t.Errorf("an image without the virtio modules unpacked without error")
	} else {
		t.Logf("as expected: %v", err)
	}
}
