package control

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
)

// Listen creates the control socket at path with owner-only permissions (see the package
// comment): bound in a private 0700 directory beside path, made 0600, renamed into place. A
// stale socket at path is replaced; a live one, or any other kind of file, is refused.
func Listen(path string) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("control: %s exists and is not a socket; refusing to replace it", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("control: %s is in use by a running server", path)
		}
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".vgpu-control-")
	if err != nil {
		return nil, fmt.Errorf("control: private directory for the socket: %w", err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	l.SetUnlinkOnClose(false) // the file moves to path; Server.Close removes it there
	if err := os.Chmod(tmp, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("control: %w", err)
	}
	// rename(2) replaces a stale socket at path atomically.
	if err := os.Rename(tmp, path); err != nil {
		l.Close()
		return nil, fmt.Errorf("control: moving the socket into place: %w", err)
	}
	return l, nil
}
