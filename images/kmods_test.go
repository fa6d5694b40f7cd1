package images

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeKO is a minimal relocatable ELF64 whose only content is a .modinfo section.
func fakeKO(modinfo string) []byte {
	shstr := []byte("\x00.modinfo\x00.shstrtab\x00")
	info := []byte(strings.ReplaceAll(modinfo, " ", "\x00") + "\x00")
	const ehsize, shentsize = 64, 64
	infoOff := uint64(ehsize)
	strOff := infoOff + uint64(len(info))
	shOff := (strOff + uint64(len(shstr)) + 7) &^ 7
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0})
	b.Write(make([]byte, 8))
	binary.Write(&b, le, uint16(1))  // ET_REL
	binary.Write(&b, le, uint16(62)) // x86-64
	binary.Write(&b, le, uint32(1))
	binary.Write(&b, le, uint64(0)) // entry
	binary.Write(&b, le, uint64(0)) // phoff
	binary.Write(&b, le, shOff)
	binary.Write(&b, le, uint32(0))
	for _, v := range []uint16{ehsize, 0, 0, shentsize, 3, 2} {
		binary.Write(&b, le, v)
	}
	b.Write(info)
	b.Write(shstr)
	b.Write(make([]byte, int(shOff)-b.Len()))
	sh := func(name, typ uint32, off, size uint64) {
		binary.Write(&b, le, name)
		binary.Write(&b, le, typ)
		binary.Write(&b, le, uint64(0)) // flags
		binary.Write(&b, le, uint64(0)) // addr
		binary.Write(&b, le, off)
		binary.Write(&b, le, size)
		binary.Write(&b, le, uint32(0))
		binary.Write(&b, le, uint32(0))
		binary.Write(&b, le, uint64(1))
		binary.Write(&b, le, uint64(0))
	}
	sh(0, 0, 0, 0)
	sh(1, 1, infoOff, uint64(len(info)))  // .modinfo, PROGBITS
	sh(10, 3, strOff, uint64(len(shstr))) // .shstrtab, STRTAB
	return b.Bytes()
}

func TestResolveKernelModules(t *testing.T) {
	dir := t.TempDir()
	put := func(rel, modinfo string) {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, fakeKO(modinfo), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("kernel/drivers/gpu/drm/drm_kms_helper.ko", "name=drm_kms_helper depends=drm,i2c-algo-bit")
	put("kernel/drivers/gpu/drm/drm.ko", "name=drm depends=")
	put("kernel/drivers/i2c/algos/i2c-algo-bit.ko", "name=i2c_algo_bit depends=")
	put("kernel/drivers/gpu/drm/ttm/ttm.ko", "name=ttm depends=drm")
	put("kernel/x/needs_missing.ko", "name=needs_missing depends=gone")
	put("kernel/x/cyc_a.ko", "name=cyc_a depends=cyc_b")
	put("kernel/x/cyc_b.ko", "name=cyc_b depends=cyc_a")
	os.WriteFile(filepath.Join(dir, "kernel/x/packed.ko.xz"), []byte("xz"), 0o644)
	os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/drivers/i2c/i2c-core.ko\n"), 0o644)
	if info, err := ModuleInfo(filepath.Join(dir, "kernel/drivers/gpu/drm/drm_kms_helper.ko")); err != nil || first(info["depends"]) != "drm,i2c-algo-bit" {
		t.Fatalf("fake module's modinfo: %v %v", info, err)
	}
	names := func(ms []PlanModule) string {
		var s []string
		for _, m := range ms {
			if m.Dependency {
				s = append(s, m.Name+"(dep)")
			} else {
				s = append(s, m.Name)
			}
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		ask  []string
		want string // "" → error
	}{
		{[]string{"drm-kms-helper"}, "drm(dep) i2c_algo_bit(dep) drm_kms_helper"},
		{[]string{"drm_kms_helper", "ttm"}, "drm(dep) i2c_algo_bit(dep) drm_kms_helper ttm"},
		{[]string{"drm", "ttm"}, "drm ttm"},
		{[]string{"i2c_core"}, ""}, // built in: nothing to load
		{[]string{"nosuch"}, "ERR"},
		{[]string{"needs_missing"}, "ERR"},
		{[]string{"cyc_a"}, "ERR"},
		{[]string{"packed"}, "ERR"},
	} {
		got, err := resolveKernelModules(dir, tc.ask)
		if tc.want == "ERR" {
			if err == nil {
				t.Errorf("%q: %s, want an error", tc.ask, names(got))
			} else {
				t.Logf("%q: %v", tc.ask, err)
			}
			continue
		}
		if err != nil || names(got) != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.ask, names(got), err, tc.want)
		}
	}
}
