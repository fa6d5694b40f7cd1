package dma

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"

	"golang.org/x/sys/unix"
)

// fileKey identifies a backing file independently of the descriptor it arrived on: every
// DMA_MAP carries a fresh dup of the client's fd, but they all name the same inode.
type fileKey struct{ dev, ino uint64 }

// backing is one backing file, mmapped whole, shared by every region whose fd names the same
// inode. refs counts those regions; the mmap and the kept descriptor go with the last one.
// All fields are guarded by Space.mu (write lock to change, read lock to use mem).
type backing struct {
	key      fileKey
	file     *os.File
	mem      []byte
	writable bool
	refs     int
}

// fileInfo is what Map learns about a mapping's fd before taking the lock.
type fileInfo struct {
	key  fileKey
	size int64
}

// statFile returns the identity and size of f, or an error saying why f cannot be mmapped
// (then the mapping falls back to message DMA).
func statFile(f *os.File) (fileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return fileInfo{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileInfo{}, errors.New("no stat information")
	}
	if !fi.Mode().IsRegular() {
		// Only regular files (memfd, tmpfs, hugetlbfs) have a size we can check the map
		// against; anything else is served through messages.
		return fileInfo{}, fmt.Errorf("not a regular file (mode %v)", fi.Mode())
	}
	return fileInfo{key: fileKey{dev: uint64(st.Dev), ino: uint64(st.Ino)}, size: fi.Size()}, nil
}

// mmapWhole maps all of f shared, read-write when the descriptor allows it, else read-only.
// It does not take ownership of f.
func mmapWhole(f *os.File, size int64) (mem []byte, writable bool, err error) {
	if size <= 0 || uint64(size) > math.MaxInt {
		return nil, false, fmt.Errorf("cannot mmap a file of %d bytes", size)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, false, err
	}
	var merr error
	cerr := rc.Control(func(fd uintptr) {
		// fd came from the client; never call f.Fd(), which would switch the shared open file
		// description to blocking mode under the client's feet.
		mem, merr = unix.Mmap(int(fd), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		writable = true
		if merr == unix.EACCES || merr == unix.EPERM {
			// O_RDONLY descriptor, or a write-sealed memfd.
			mem, merr = unix.Mmap(int(fd), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
			writable = false
		}
	})
	if cerr != nil {
		return nil, false, cerr
	}
	if merr != nil {
		return nil, false, merr
	}
	return mem, writable, nil
}

// acquire returns the backing for the file f names, with one more reference, making sure its
// view covers [0, end) and is writable when needWrite. It always takes ownership of f: f is
// either kept as the backing's descriptor or closed. A nil result means the mapping cannot be
// served through mmap and must use message DMA. Called with s.mu held for writing, so no access
// is in flight and an existing mmap may be replaced.
func (s *Space) acquire(fi fileInfo, f *os.File, end uint64, needWrite bool) *backing {
	b := s.backings[fi.key]
	usable := func(b *backing) bool {
		return uint64(len(b.mem)) >= end && (b.writable || !needWrite)
	}
	if b != nil && usable(b) {
		f.Close() // the common vIOMMU case: another dup of a file we already map
		b.refs++
		return b
	}
	mem, writable, err := mmapWhole(f, fi.size)
	if err != nil {
		f.Close()
		s.rl.Warn("dma-mmap-failed", "dma: cannot mmap backing file, serving the mapping through messages",
			"err", err, "size", fi.size)
		return nil
	}
	switch {
	case b == nil:
		b = &backing{key: fi.key, file: f, mem: mem, writable: writable}
		s.backings[fi.key] = b
	case len(mem) >= len(b.mem) && (writable || !b.writable):
		// The file grew, or this descriptor allows writes where the first did not: switch every
		// region of this file to the better view.
		unix.Munmap(b.mem)
		b.file.Close()
		b.file, b.mem, b.writable = f, mem, writable
	default:
		unix.Munmap(mem)
		f.Close()
	}
	if !usable(b) {
		s.rl.Warn("dma-backing-short", "dma: backing file is read-only or too short for the mapping, serving it through messages",
			"writable", b.writable, "mapped", len(b.mem), "need", end)
		if b.refs == 0 {
			s.free(b)
		}
		return nil
	}
	b.refs++
	return b
}

// release drops one reference to b, unmapping and closing it with the last.
// Called with s.mu held for writing.
func (s *Space) release(b *backing) {
	if b == nil {
		return
	}
	b.refs--
	if b.refs == 0 {
		s.free(b)
	}
}

func (s *Space) free(b *backing) {
	if err := unix.Munmap(b.mem); err != nil {
		s.log.Warn("dma: munmap of backing file failed", "err", err)
	}
	b.file.Close()
	b.mem = nil
	delete(s.backings, b.key)
}

// errBackingFault is reported when copying through an mmap faulted (SIGBUS): the client
// shrank the file under us, or a hugetlbfs pool ran dry.
var errBackingFault = errors.New("backing memory fault")

// copyMapped copies src to dst where one of them is mmapped client memory. A fault on the
// mapped side becomes an error instead of killing the process.
func copyMapped(dst, src []byte) (err error) {
	defer recoverBackingFault(debug.SetPanicOnFault(true), &err)
	copy(dst, src)
	return nil
}

// streamMapped is copyMapped for the engines' direct copies: streamCopy.
func streamMapped(dst, src []byte) (err error) {
	defer recoverBackingFault(debug.SetPanicOnFault(true), &err)
	streamCopy(dst, src)
	return nil
}

// recoverBackingFault, deferred, restores the goroutine's panic-on-fault setting and turns a
// memory fault into errBackingFault; any other panic goes on.
func recoverBackingFault(old bool, err *error) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		if re, ok := r.(runtime.Error); ok {
			if _, ok := re.(interface{ Addr() uintptr }); ok {
				*err = errBackingFault
				return
			}
		}
		panic(r)
	}
}
