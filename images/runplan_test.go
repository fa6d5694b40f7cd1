package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParsePlanFile(t *testing.T) {
	for _, tc := range []struct {
		arg, host, guest string
		bad              bool
	}{
		{"test.sh", "test.sh", "/test.sh", false},
		{"out/t:/usr/bin/t", "out/t", "/usr/bin/t", false},
		{"fw.bin:/lib/firmware/x/../fw.bin", "fw.bin", "/lib/firmware/fw.bin", false},
		{"a:", "a", "/a", false},
		{":/x", "", "", true},
		{"a:rel/x", "", "", true},
		{"a:/", "", "", true},
	} {
		f, err := ParsePlanFile(tc.arg)
		if tc.bad {
			if err == nil {
				t.Errorf("ParsePlanFile(%q) = %+v, want an error", tc.arg, f)
			}
			continue
		}
		if err != nil || f.Host != tc.host || f.Guest != tc.guest {
			t.Errorf("ParsePlanFile(%q) = %+v, %v; want %s → %s", tc.arg, f, err, tc.host, tc.guest)
		}
	}
}

// TestPlanInitrd checks the second archive: the plan files /init reads, the modules, the added
// files with their modes, parents created but not the base folders (whose modes would change),
// and the base archive kept byte for byte in front.
func TestPlanInitrd(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, s string, mode os.FileMode) string {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ko := write("build/mydrv.ko", "ELF-module", 0o644)
	script := write("t/test.sh", "#!/bin/sh\necho ok\n", 0o755)
	write("tree/a.txt", "a", 0o644)
	write("tree/sub/b.bin", "b", 0o600)
	var base strings.Builder
	c := NewCPIOWriter(&base)
	c.Dir("etc", 0o755)
	c.File("init", 0o755, []byte("#!/bin/sh\n"))
	c.Close()
	basePath := write("base.cpio", base.String(), 0o644)

	plan := &RunPlan{
		Modules:  []PlanModule{{Name: "mydrv", Path: ko, Args: " warn=1 name=\"a b\" "}},
		Commands: []string{"sh /test.sh", "echo two\necho lines"},
		Files: []PlanFile{{Host: script, Guest: "/test.sh"}, {Host: filepath.Join(dir, "tree"), Guest: "/opt/tree"},
			{Host: ko, Guest: "/lib/firmware/x.bin"}},
	}
	dst := filepath.Join(dir, "out.cpio")
	if err := WritePlanInitrd(dst, basePath, plan); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(dst)
	if !strings.HasPrefix(string(b), base.String()) {
		t.Fatal("the base archive is not kept in front")
	}
	ents := readCPIO(t, b[len(base.String()):])
	got := map[string]cpioEntry{}
	var order []string
	for _, e := range ents {
		got[e.Name] = e
		order = append(order, e.Name)
	}
	want := map[string]struct {
		mode uint32
		data string
	}{
		"lib/modules/user":          {0o040755, ""},
		"lib/modules/user/mydrv.ko": {0o100644, "ELF-module"},
		"test.sh":                   {0o100755, "#!/bin/sh\necho ok\n"},
		"opt":                       {0o040755, ""},
		"opt/tree/a.txt":            {0o100644, "a"},
		"opt/tree/sub/b.bin":        {0o100600, "b"},
		"lib/firmware/x.bin":        {0o100644, "ELF-module"},
		"etc/vgpu-run/run/001":      {0o100644, "sh /test.sh\n"},
		"etc/vgpu-run/run/002":      {0o100644, "echo two\necho lines\n"},
		"etc/vgpu-run/modules":      {0o100644, "mydrv /lib/modules/user/mydrv.ko warn=1 name=\"a b\"\n"},
	}
	for name, w := range want {
		e, ok := got[name]
		if !ok {
			t.Errorf("no %s in %q", name, order)
			continue
		}
		if e.Mode != w.mode || (w.mode&0o100000 != 0 && string(e.Data) != w.data) {
			t.Errorf("%s: mode %o data %q, want %o %q", name, e.Mode, e.Data, w.mode, w.data)
		}
	}
	if p := string(got["etc/vgpu-run/plan"].Data); !strings.Contains(p, "run 2: echo two\\necho lines") {
		t.Errorf("plan description %q", p)
	}
	for _, d := range []string{"etc", "lib", "lib/modules"} {
		if _, ok := got[d]; ok {
			t.Errorf("the overlay rewrites base folder %s", d)
		}
	}
	// Parents before their contents.
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	for n := range got {
		if d := filepath.Dir(n); d != "." {
			if i, ok := pos[d]; ok && i > pos[n] {
				t.Errorf("%s comes before its folder %s", n, d)
			}
		}
	}

	for _, bad := range []*RunPlan{
		{Files: []PlanFile{{Host: script, Guest: "/init"}}},
		{Files: []PlanFile{{Host: script, Guest: "/etc/vgpu-run/modules"}}},
		{Modules: []PlanModule{{Name: "a b", Path: ko}}},
		{Modules: []PlanModule{{Name: "m", Path: ko, Args: "x=1\ny=2"}}},
		{Modules: []PlanModule{{Name: "m", Path: ko}, {Name: "m", Path: ko}}},
		{Files: []PlanFile{{Host: filepath.Join(dir, "absent"), Guest: "/x"}}},
	} {
		if err := WritePlanInitrd(filepath.Join(dir, "bad.cpio"), basePath, bad); err == nil {
			t.Errorf("plan %+v accepted", bad)
		}
	}
}

func TestBuiltModules(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b.ko", "a.ko", "sub/c.ko", "sub/deep/d.ko", "x.o", "e.ko"} {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, nil, 0o644)
	}
	// An M= build names absolute paths; a renamed folder's entries fall back to the base name;
	// older kernels name objects; e.ko is not listed and comes last.
	order := filepath.Join(dir, "b.ko") + "\n" + filepath.Join(dir, "sub/c.ko") + "\n/gone/tmp-1/a.ko\nsub/deep/d.o\nmissing.ko\n"
	os.WriteFile(filepath.Join(dir, "modules.order"), []byte(order), 0o644)
	if got := strings.Join(builtModules(dir), " "); got != "b.ko sub/c.ko a.ko sub/deep/d.ko e.ko" {
		t.Errorf("builtModules = %q", got)
	}
	os.Remove(filepath.Join(dir, "modules.order"))
	if got := strings.Join(builtModules(dir), " "); got != "a.ko b.ko e.ko sub/c.ko sub/deep/d.ko" {
		t.Errorf("without modules.order: %q", got)
	}
}
