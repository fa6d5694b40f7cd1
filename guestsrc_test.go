package vgpu

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGuestSourcesMatchCheckout checks the binary carries exactly the checked-in module sources.
func TestGuestSourcesMatchCheckout(t *testing.T) {
	dir, err := WriteGuestSources(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"Kbuild", "Makefile", "vgpu_test.c", "include/vgpu_abi.h"} {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("guest", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the checkout", f)
		}
	}
}
