package dma

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// newMemfd returns a memfd of size bytes whose byte i is pattern(seed, i). The test keeps this
// handle (closed at cleanup); hand the Space a dup from dupFile.
func newMemfd(t testing.TB, size int, seed byte) *os.File {
	t.Helper()
	f := newMemfdRaw(t, size, seed)
	t.Cleanup(func() { f.Close() })
	return f
}

// newMemfdRaw is newMemfd without the cleanup: the caller closes it.
func newMemfdRaw(t testing.TB, size int, seed byte) *os.File {
	t.Helper()
	fd, err := unix.MemfdCreate("dma-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatalf("memfd_create: %v", err)
	}
	f := os.NewFile(uintptr(fd), "dma-test")
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = pattern(seed, i)
	}
	if _, err := f.WriteAt(buf, 0); err != nil {
		t.Fatalf("fill memfd: %v", err)
	}
	return f
}

func pattern(seed byte, i int) byte { return byte(i*7+i>>8) ^ seed }

// dupFile returns a new *os.File on a dup of f, as the transport hands one to the device for
// every DMA_MAP.
func dupFile(t testing.TB, f *os.File) *os.File {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var nfd int
	var derr error
	if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		t.Fatal(err)
	}
	if derr != nil {
		t.Fatalf("dup: %v", derr)
	}
	return os.NewFile(uintptr(nfd), "dma-test-dup")
}

// reopen opens f again through /proc with the given flags (a new open file description).
func reopen(t testing.TB, f *os.File, flag int) *os.File {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var path string
	rc.Control(func(fd uintptr) { path = fmt.Sprintf("/proc/self/fd/%d", fd) })
	g, err := os.OpenFile(path, flag, 0)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	return g
}

func fileBytes(t testing.TB, f *os.File, off int64, n int) []byte {
	t.Helper()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatalf("pread: %v", err)
	}
	return buf
}

func isClosed(f *os.File) bool {
	_, err := f.Stat()
	return errors.Is(err, os.ErrClosed)
}

func fdCount(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// span is a test-side view of one live mapping.
type span struct {
	iova, last, offset uint64
	read, write, mmap  bool
}

func (s *Space) spans() []span {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []span
	for _, r := range s.regions {
		out = append(out, span{r.iova, r.last, r.offset, r.read, r.write, r.back != nil})
	}
	return out
}

// fakeClient stands in for the vfio-user client serving DMA_READ/DMA_WRITE: guest memory as
// seen through IOVAs [base, base+len(mem)), every call recorded.
type fakeClient struct {
	mu    sync.Mutex
	base  uint64
	mem   []byte
	calls []call
	err   error  // returned by every call when set
	hook  func() // run inside every call, without fakeClient.mu held
}

type call struct {
	write bool
	iova  uint64
	n     int
}

func (c *fakeClient) DMARead(iova uint64, p []byte) error  { return c.do(false, iova, p) }
func (c *fakeClient) DMAWrite(iova uint64, p []byte) error { return c.do(true, iova, p) }

func (c *fakeClient) do(write bool, iova uint64, p []byte) error {
	// Recorded before the hook runs: a hook that cuts the device off makes the access return
	// at once, and the call in flight must still be seen.
	c.mu.Lock()
	c.calls = append(c.calls, call{write, iova, len(p)})
	c.mu.Unlock()
	if c.hook != nil {
		c.hook()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if iova < c.base || iova-c.base+uint64(len(p)) > uint64(len(c.mem)) {
		return syscall.ENODEV // what QEMU answers for an unassigned address
	}
	off := iova - c.base
	if write {
		copy(c.mem[off:], p)
	} else {
		copy(p, c.mem[off:])
	}
	return nil
}

func (c *fakeClient) recorded() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]call(nil), c.calls...)
}
