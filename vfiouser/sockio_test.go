package vfiouser

import (
	"testing"

	"golang.org/x/sys/unix"
)

// fdOpen reports whether fd is an open descriptor.
func fdOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}

// TestSockFD checks the one promise of sockFD: the descriptor is closed exactly when closing has
// begun and the last user has left, never while a user holds it, and no user gets it after.
func TestSockFD(t *testing.T) {
	tests := []struct {
		name  string
		users int // acquired before close
	}{
		{"no users", 0},
		{"one user", 1},
		{"three users", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fds[1])
			s := &sockFD{fd: fds[0]}
			for range tt.users {
				if !s.acquire() {
					t.Fatal("acquire failed before close")
				}
			}
			s.close()
			s.close() // idempotent
			if s.acquire() {
				t.Fatal("acquire succeeded after close")
			}
			// The peer sees the shutdown at once, even while users hold the descriptor.
			var b [1]byte
			if n, err := unix.Read(fds[1], b[:]); n != 0 || err != nil {
				t.Fatalf("peer read after shutdown: %d, %v (want end of stream)", n, err)
			}
			for i := range tt.users {
				if !fdOpen(s.fd) {
					t.Fatalf("descriptor closed with %d users left", tt.users-i)
				}
				s.release()
			}
			if fdOpen(s.fd) {
				t.Fatal("descriptor still open after the last user left")
			}
		})
	}
}
