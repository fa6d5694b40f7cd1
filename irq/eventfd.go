package irq

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// eventfd is one client-provided eventfd we signal. The raw conn is kept so signalling never
// calls (*os.File).Fd, which would switch the open file description — shared with the client —
// to blocking mode.
type eventfd struct {
	f  *os.File
	rc syscall.RawConn
}

// eventfdLink is what /proc/self/fd/N links to for an eventfd (fs/eventfd.c names its anonymous
// inode "[eventfd]").
const eventfdLink = "anon_inode:[eventfd]"

// errNotEventfd is wrapped by newEventfd's refusal of any other kind of descriptor.
var errNotEventfd = errors.New("not an eventfd")

// newEventfd checks that f is an eventfd and makes it non-blocking. Anything else — a pipe, a
// socket, a regular file, another anonymous inode — is refused: writing 8 bytes to it means
// something else entirely, and a full pipe would block the writer. O_NONBLOCK lives on the
// open file description the client shares; QEMU creates its event notifiers non-blocking
// anyway, and an eventfd's readers (KVM's irqfd, poll) do not care.
func newEventfd(f *os.File) (*eventfd, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		if cerr = checkEventfd(int(fd)); cerr == nil {
			cerr = unix.SetNonblock(int(fd), true)
		}
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	return &eventfd{f: f, rc: rc}, nil
}

// checkEventfd reads what the descriptor is from /proc: the descriptor number is ours (it came
// with the message), so the answer cannot change under us.
func checkEventfd(fd int) error {
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return fmt.Errorf("cannot tell what descriptor %d is: %w", fd, err)
	}
	if link != eventfdLink {
		return fmt.Errorf("%w: %s", errNotEventfd, link)
	}
	return nil
}

// one is the 8-byte little-endian 1 that an eventfd write adds to the counter.
var one = [8]byte{1}

// errClosed: the eventfd was closed (replaced by SET_IRQS, or the client went) before the write.
var errClosed = errors.New("irq: eventfd closed")

// signal adds 1 to the eventfd counter. It never blocks: the descriptor is non-blocking, so a
// full counter returns EAGAIN (the reader already sees the interrupt pending).
func (e *eventfd) signal() error {
	var werr error
	err := e.rc.Write(func(fd uintptr) bool {
		_, werr = unix.Write(int(fd), one[:])
		return true // never wait for writability
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errClosed, err)
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
// reads go through the runtime poller and Close wakes a blocked reader. Like a trigger, it
// must be an eventfd: reading anything else would mean nothing.
func newResampler(f *os.File) (*resampler, error) {
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	nfd, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) {
		if derr = checkEventfd(int(fd)); derr != nil {
			return
		}
		if nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0); derr != nil {
			derr = fmt.Errorf("dup: %w", derr)
		}
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
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
