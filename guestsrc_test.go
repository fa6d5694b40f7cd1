package vgpu

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// moduleFiles lists the module sources under dir: Kbuild, Makefile, and the .c and .h files
// (not kbuild's generated *.mod.c), relative and slash-separated. A subfolder with a Kbuild of
// its own (the DRM driver) or Go files (the DRM suite's program) is another part of the guest,
// not vgpu_test.ko's sources, and is left out, as the embedding leaves it out.
func moduleFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && ownPart(p) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		base := d.Name()
		ext := filepath.Ext(base)
		if base == "Kbuild" || base == "Makefile" || (ext == ".c" || ext == ".h") && !strings.HasSuffix(base, ".mod.c") {
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// ownPart reports whether folder p is a separate part of the guest: its own Kbuild, or Go.
func ownPart(p string) bool {
	if _, err := os.Stat(filepath.Join(p, "Kbuild")); err == nil {
		return true
	}
	gos, _ := filepath.Glob(filepath.Join(p, "*.go"))
	return len(gos) > 0
}

// TestGuestSourcesMatchCheckout checks the binary carries exactly the checked-in module sources:
// every file, byte for byte, and nothing else.
func TestGuestSourcesMatchCheckout(t *testing.T) {
	dir, err := WriteGuestSources(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want, got := moduleFiles(t, "guest"), moduleFiles(t, dir)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("embedded module sources %q, checkout has %q", got, want)
	}
	for _, f := range []string{"Kbuild", "Makefile", "main.c", "include/vgpu_abi.h"} {
		if !containsFile(want, f) {
			t.Errorf("the checkout's guest/ has no %s", f)
		}
	}
	for _, f := range want {
		a, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join("guest", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from the checkout", f)
		}
	}
}

func containsFile(files []string, f string) bool {
	for _, g := range files {
		if g == f {
			return true
		}
	}
	return false
}
