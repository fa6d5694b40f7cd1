package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// CacheDir returns the folder that holds everything images provisions: $VGPU_CACHE if set,
// else $XDG_CACHE_HOME/vgpu, else ~/.cache/vgpu. It does not create the folder.
func CacheDir() (string, error) {
	if d := os.Getenv("VGPU_CACHE"); d != "" {
		return filepath.Abs(d)
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "vgpu"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("images: no cache folder: set VGPU_CACHE (%w)", err)
	}
	return filepath.Join(home, ".cache", "vgpu"), nil
}

// Key returns a short, stable digest of a list of strings that names a cache entry. The order
// of the list does not matter; kind separates namespaces (two lists that are equal but used
// for different things get different keys).
func Key(kind string, items []string) string {
	s := append([]string(nil), items...)
	sort.Strings(s)
	h := sha256.New()
	io.WriteString(h, kind)
	io.WriteString(h, "\x00")
	for _, it := range s {
		io.WriteString(h, it)
		io.WriteString(h, "\n")
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// fileLock is an exclusive flock(2) on a file. flock locks belong to the open file
// description, so two lockers in one process exclude each other just like two processes do,
// and the kernel drops the lock when the holder dies.
type fileLock struct{ f *os.File }

// lockFile takes an exclusive lock on path (created if needed), waiting until ctx is done.
// It says once on progress that it is waiting, so a second process does not look hung.
func lockFile(ctx context.Context, path string, progress io.Writer) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	said := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &fileLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !said && progress != nil {
			fmt.Fprintf(progress, "waiting for lock %s (another vgpu process is provisioning)\n", path)
			said = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (l *fileLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	err := l.f.Close()
	l.f = nil
	return err
}

// withDefaultTimeout bounds ctx by d when it has no deadline of its own.
func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// tail keeps the last n lines written to it (for error messages of child processes).
type tail struct {
	n     int
	lines []string
}

func (t *tail) add(line string) {
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

func (t *tail) String() string { return strings.Join(t.lines, "\n") }

// removeLeftovers deletes what an interrupted provisioning left of final (its temporary trees,
// and final itself when its marker did not validate); the caller holds final's lock, so nobody
// else is writing them. Each removal is reported on progress under who.
func removeLeftovers(final, who string, progress io.Writer) error {
	stale, _ := filepath.Glob(final + ".tmp-*")
	if _, err := os.Stat(final); err == nil {
		stale = append(stale, final)
	}
	for _, s := range stale {
		fmt.Fprintf(progress, "%s: removing leftover %s\n", who, s)
		if err := os.RemoveAll(s); err != nil {
			return err
		}
	}
	return nil
}
