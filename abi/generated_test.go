package abi_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"vgpu/abi"
	"vgpu/abi/internal/gen"
)

// TestGeneratedFilesAreCurrent fails when spec.go changed without `go generate ./abi`.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	goSrc, err := gen.Go()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{
		"zz_generated.go":             goSrc,
		"../guest/include/vgpu_abi.h": gen.C(),
	} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `go generate ./abi`", path)
		}
	}
}

// TestHeaderCompiles checks the header is valid C for the guest compiler, when one is present.
func TestHeaderCompiles(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc on this machine")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "t.c")
	inc, _ := filepath.Abs("../guest/include")
	code := "#include \"vgpu_abi.h\"\n_Static_assert(VGPU_ID_MAGIC_VALUE == 0x55504756, \"magic\");\n" +
		"_Static_assert(VGPU_REG_SCRATCH_0 == 0x30100, \"scratch\");\n_Static_assert(VGPU_HQD_REG(1, VGPU_REG_HQD_ACTIVE) == 0x1100, \"hqd\");\nint x;\n"
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cc, "-std=gnu11", "-Wall", "-Werror", "-fsyntax-only", "-I", inc, src).CombinedOutput()
	if err != nil {
		t.Fatalf("header does not compile: %v\n%s", err, out)
	}
}

// TestBlocksAreWellFormed checks the spec itself: blocks in order, aligned, not overlapping, and
// every register inside its block.
func TestBlocksAreWellFormed(t *testing.T) {
	var end uint32
	for _, b := range abi.Blocks {
		if b.Base%4 != 0 || b.Size%4 != 0 || b.Size == 0 {
			t.Errorf("block %s: base %#x size %#x not dword-aligned", b.Name, b.Base, b.Size)
		}
		if b.Base < end {
			t.Errorf("block %s at %#x overlaps the previous block (ends %#x)", b.Name, b.Base, end)
		}
		if b.Count > 1 && b.Stride*b.Count != b.Size {
			t.Errorf("block %s: %d instances of %#x bytes do not make its size %#x", b.Name, b.Count, b.Stride, b.Size)
		}
		end = b.Base + b.Size
		if end > abi.REGS_MSIX_TABLE_OFFSET {
			t.Errorf("block %s reaches into the MSI-X page", b.Name)
		}
		seen := map[uint32]bool{}
		for _, r := range b.Registers {
			limit := b.Size
			if b.Count > 1 {
				limit = b.Stride
			}
			if r.Offset%4 != 0 || r.Offset+4 > limit {
				t.Errorf("register %s_%s at %#x outside block or unaligned", b.Name, r.Name, r.Offset)
			}
			if seen[r.Offset] {
				t.Errorf("register %s_%s: offset %#x used twice", b.Name, r.Name, r.Offset)
			}
			seen[r.Offset] = true
			var used uint64
			for _, f := range r.Fields {
				m := ((uint64(1) << f.Width) - 1) << f.Shift
				if f.Width == 0 || f.Shift+f.Width > 32 || used&m != 0 {
					t.Errorf("field %s_%s.%s overlaps or exceeds 32 bits", b.Name, r.Name, f.Name)
				}
				used |= m
			}
		}
	}
}
