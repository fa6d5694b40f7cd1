package irq

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// eventfd is one client-provided eventfd we signal. The raw conn is kept so signalling never
// calls (*os.File).Fd, which would switch the open file description — shared with the client —
// to blocking mode.
type eventfd struct {
	f      *os.File
	rc     syscall.RawConn
	failed bool // a signal has failed once (logged once, then only counted)
}

func newEventfd(f *os.File) (*eventfd, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &eventfd{f: f, rc: rc}, nil
}

// one is the 8-byte little-endian 1 that an eventfd write adds to the counter.
var one = [8]byte{1}

// signal adds 1 to the eventfd counter. A full counter (EAGAIN) already means "pending" to
// the reader, so it counts as delivered.
func (e *eventfd) signal() error {
	var werr error
	err := e.rc.Write(func(fd uintptr) bool {
		_, werr = unix.Write(int(fd), one[:])
		return true // never wait for writability: a full counter is not worth blocking for
	})
	if err != nil {
		return err
	}
	if werr == unix.EAGAIN {
		return nil
	}
	return werr
}

// resampler waits on the INTx resample eventfd (KVM signals it when the guest EOIs the line)
// and asks the controller to re-assert.
type resampler struct {
	f    *os.File
	done chan struct{}
}

// newResampler takes ownership of f. It re-wraps a non-blocking dup of the descriptor so that
// reads go through the runtime poller and Close wakes a blocked reader.
func newResampler(f *os.File) (*resampler, error) {
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	nfd, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("dup resample fd: %w", derr)
	}
	// O_NONBLOCK lives on the open file description, shared with the client; QEMU creates its
	// event notifiers non-blocking anyway.
	if err := unix.SetNonblock(nfd, true); err != nil {
		unix.Close(nfd)
		return nil, fmt.Errorf("set resample fd non-blocking: %w", err)
	}
	return &resampler{f: os.NewFile(uintptr(nfd), "intx-resample"), done: make(chan struct{})}, nil
}

// run reads the resample eventfd until it is closed, calling fire for every signal.
func (r *resampler) run(fire func(*resampler), onError func(error)) {
	defer close(r.done)
	var buf [8]byte
	for {
		if _, err := r.f.Read(buf[:]); err != nil {
			if !errors.Is(err, os.ErrClosed) {
				onError(err)
			}
			return
		}
		fire(r)
	}
}

// stop closes the descriptor and waits for run to return. It must not be called with the
// controller's lock held: run may be waiting for it.
func (r *resampler) stop() {
	r.f.Close()
	<-r.done
}
