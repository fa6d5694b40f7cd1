// Package vgpu holds what the vgpu binary carries of the repository itself: the guest test
// module's sources, so `vgpu run` can build the module for the guest kernel from anywhere, not
// only from a checkout. (Go allows no Go files beside C files, so this lives at the root.)
package vgpu

import (
	"embed"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed guest/Kbuild guest/Makefile guest/*.c guest/*.h guest/include/*.h
var guestSources embed.FS

// WriteGuestSources writes the module sources (Kbuild, Makefile, the .c and .h files, include/) into
// dir and returns dir, ready for `make -C $KDIR M=dir`.
func WriteGuestSources(dir string) (string, error) {
	sub, err := fs.Sub(guestSources, "guest")
	if err != nil {
		return "", err
	}
	err = fs.WalkDir(sub, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, path)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := fs.ReadFile(sub, path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	return dir, err
}
