package vfiouser

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// sockFD is the descriptor of a blocking Conn, used by the reader, the writers and Close
// without the runtime's poller or an os.File around it (whose locks cost about a tenth of a
// trapped MMIO access's own CPU time). Its one guarantee is the one os.File gives: the number
// is not closed — and so cannot be reused for another file — while a system call may still
// use it.
//
// state counts users in units of 2 and has bit 0 set once closing began. A user that finds
// the bit set backs out without touching fd; the last user out of a closing descriptor
// closes it.
type sockFD struct {
	fd     int
	state  atomic.Int64
	closed atomic.Bool // close(2) was called
}

// acquire registers a user; false means the descriptor is closing and must not be used.
func (s *sockFD) acquire() bool {
	if s.state.Add(2)&1 != 0 {
		s.release()
		return false
	}
	return true
}

func (s *sockFD) release() {
	if s.state.Add(-2) == 1 && s.closed.CompareAndSwap(false, true) {
		unix.Close(s.fd)
	}
}

// close shuts the socket down, which wakes a user blocked in recvmsg (end of stream) or in a
// send (EPIPE), and leaves the close(2) to the last user. It holds a reference itself while
// shutting down, so the number stays its socket's. Only the first call does anything.
func (s *sockFD) close() {
	s.state.Add(2)
	if s.state.Or(1)&1 == 0 {
		unix.Shutdown(s.fd, unix.SHUT_RDWR)
	}
	s.release()
}

// sockCall runs one recvmsg, sendmsg or sendto (trap) with arguments args, whose flags are
// args[flagArg]. done is false when a non-blocking socket must wait for the poller.
//
// With tryRaw it first tries without waiting (MSG_DONTWAIT) and without the runtime's system
// call bookkeeping (RawSyscall, fine for a call that cannot block). That suits sends, which all
// but never find the socket buffer full, and a blocking Conn's receives, which run only after
// poll(2) said there is something to read (Conn.recvOnce). Only a call that can block goes
// through Syscall, so the runtime can run other goroutines meanwhile.
func sockCall(trap uintptr, args [6]uintptr, flagArg int, blocking, tryRaw bool) (n int, errno unix.Errno, done bool) {
	for {
		r, e := uintptr(0), unix.EAGAIN
		if tryRaw || !blocking {
			a := args
			a[flagArg] |= unix.MSG_DONTWAIT
			r, _, e = unix.RawSyscall6(trap, a[0], a[1], a[2], a[3], a[4], a[5])
		}
		if e == unix.EAGAIN && blocking {
			r, _, e = unix.Syscall6(trap, args[0], args[1], args[2], args[3], args[4], args[5])
		}
		switch e {
		case 0:
			return int(r), 0, true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, 0, false
		default:
			return 0, e, true
		}
	}
}
