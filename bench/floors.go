package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/abi"
	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

// Baselines ("floors"): the least each measured path can cost in this design, done by a
// trivial stand-in in the same run. Each fails loudly when it cannot be set up or when its
// stand-in sees anything but what it expects: a floor that quietly measured nothing would
// make the device look good.

// irqTimeout bounds every wait for an interrupt (device or floor).
const irqTimeout = 5 * time.Second

// The socket floors use blocking sockets and plain system calls (one read and one write per
// message and side, no runtime poller), as the vfio-user server and the Go client do. Through
// the poller, an in-process ping-pong can hand a message from one goroutine to the other on one
// thread without an OS wake-up (about 7 µs a round trip here, against about 10 µs blocking):
// a shortcut no client in another process has, so too cheap to be this design's floor.

// blockingPair is a connected unix stream socketpair in blocking mode.
func blockingPair() (a, b int, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, fmt.Errorf("socketpair: %w", err)
	}
	return fds[0], fds[1], nil
}

// readFull reads exactly len(p) bytes (a stream socket may return a message in pieces).
func readFull(fd int, p []byte) error {
	for len(p) > 0 {
		n, err := unix.Read(fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n == 0:
			return io.EOF
		}
		p = p[n:]
	}
	return nil
}

// writeAll writes all of p.
func writeAll(fd int, p []byte) error {
	for len(p) > 0 {
		n, err := unix.Write(fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// unixEcho ping-pongs a 32-byte request and a 36-byte reply (a REGION_READ of 4 bytes and
// its answer) over a socketpair.
type unixEcho struct {
	a, c int
	done chan error
}

func newUnixEcho() (*unixEcho, error) {
	a, c, err := blockingPair()
	if err != nil {
		return nil, err
	}
	e := &unixEcho{a: a, c: c, done: make(chan error, 1)}
	go func() {
		buf := make([]byte, 64)
		for {
			if err := readFull(c, buf[:32]); err != nil {
				e.done <- err
				return
			}
			if err := writeAll(c, buf[:36]); err != nil {
				e.done <- err
				return
			}
		}
	}()
	return e, nil
}

func (e *unixEcho) op(n int, _ Clock) error {
	buf := make([]byte, 64)
	for range n {
		if err := writeAll(e.a, buf[:32]); err != nil {
			return fmt.Errorf("echo: %w", err)
		}
		if err := readFull(e.a, buf[:36]); err != nil {
			return fmt.Errorf("echo: %w", err)
		}
	}
	return nil
}

// Close ends the echo: its reader sees the end of the stream and exits before its descriptor
// is closed (a number closed under a blocked reader could be reused by another file).
func (e *unixEcho) Close() {
	unix.Close(e.a)
	<-e.done
	unix.Close(e.c)
}

// trapFloor is a trapped doorbell's floor: a trivial server receives the client's REGION_WRITE
// of the doorbell, replies, and signals an eventfd the client waits on — the device's
// sequence (worker receives, kicks the queue, replies; the queue fences and signals) with
// nothing in between. The client is the same vfiousertest client the device is driven with.
type trapFloor struct {
	c    *vfiousertest.Client
	srv  int // the server's blocking socket
	efd  int
	seq  uint64
	done chan struct{}
	err  atomic.Pointer[error] // why the server stopped
}

func newTrapFloor() (*trapFloor, error) {
	cfd, sfd, err := blockingPair()
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(cfd), "trap floor client")
	conn, err := net.FileConn(f) // the client makes its own blocking descriptor of it
	f.Close()
	if err != nil {
		unix.Close(sfd)
		return nil, err
	}
	cc, ok := conn.(*net.UnixConn)
	if !ok {
		conn.Close()
		unix.Close(sfd)
		return nil, fmt.Errorf("socketpair end is a %T", conn)
	}
	efd, err := vfiousertest.NewEventFD()
	if err != nil {
		cc.Close()
		unix.Close(sfd)
		return nil, err
	}
	c, err := vfiousertest.NewClient(cc) // owns cc
	if err != nil {
		unix.Close(sfd)
		unix.Close(efd)
		return nil, err
	}
	t := &trapFloor{c: c, srv: sfd, efd: efd, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		err := t.serve()
		t.err.Store(&err)
		unix.Shutdown(sfd, unix.SHUT_RDWR) // the client sees the end at once
	}()
	return t, nil
}

// errNotDoorbell: the floor's server received something other than the doorbell write.
var errNotDoorbell = errors.New("trap floor: not the expected doorbell write")

// serve answers doorbell writes until the client goes away or sends anything else.
func (f *trapFloor) serve() error {
	const size = vfiouser.HeaderSize + vfiouser.RegionAccessSize + 8
	var buf [4 * size]byte
	var reply [vfiouser.HeaderSize + vfiouser.RegionAccessSize]byte
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	have := 0
	for want := uint64(1); ; want++ {
		for have < size {
			n, err := unix.Read(f.srv, buf[have:])
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if n == 0 {
				return io.EOF
			}
			have += n
		}
		h, _ := vfiouser.DecodeHeader(buf[:])
		if h.Cmd != vfiouser.CmdRegionWrite || !h.IsCommand() || h.NoReply() || h.Size != size {
			return fmt.Errorf("%w: header %+v", errNotDoorbell, h)
		}
		a, data, _ := vfiouser.DecodeRegionAccess(buf[vfiouser.HeaderSize:size])
		if a.Region != abi.BAR_DOORBELL || a.Offset != 8*doorbellQW || a.Count != 8 {
			return fmt.Errorf("%w: %v", errNotDoorbell, a)
		}
		if v := binary.LittleEndian.Uint64(data); v != want {
			return fmt.Errorf("%w: value %d, want %d", errNotDoorbell, v, want)
		}
		vfiouser.Header{ID: h.ID, Cmd: h.Cmd, Size: uint32(len(reply)), Flags: vfiouser.FlagTypeReply}.Put(reply[:])
		copy(reply[vfiouser.HeaderSize:], buf[vfiouser.HeaderSize:])
		if err := writeAll(f.srv, reply[:]); err != nil {
			return err
		}
		if _, err := unix.Write(f.efd, one); err != nil {
			return fmt.Errorf("trap floor: eventfd: %w", err)
		}
		have = copy(buf[:], buf[size:have])
	}
}

func (f *trapFloor) op(n int, _ Clock) error {
	var b [8]byte
	for range n {
		f.seq++
		binary.LittleEndian.PutUint64(b[:], f.seq)
		if err := f.c.Write(abi.BAR_DOORBELL, 8*doorbellQW, b[:]); err != nil {
			return f.why(err)
		}
		if _, err := vfiousertest.WaitIRQ(f.efd, irqTimeout); err != nil {
			return f.why(fmt.Errorf("doorbell %d: eventfd: %w", f.seq, err))
		}
	}
	return nil
}

// why adds the server's reason, if it stopped, to a client error.
func (f *trapFloor) why(err error) error {
	select {
	case <-f.done:
		return fmt.Errorf("%w (server: %w)", err, *f.err.Load())
	case <-time.After(100 * time.Millisecond):
		return err
	}
}

func (f *trapFloor) Close() {
	f.c.Close()
	<-f.done
	unix.Close(f.srv)
	unix.Close(f.efd)
}

// pollFloor is a polled doorbell's floor: a goroutine spins on a doorbell slot the way the
// device's poller does (scan, yield, scan) and signals an eventfd when the value changes; the
// client stores the value and waits on the eventfd — the device's sequence without the queue
// and the fence. The poller runs only while the floor is measured, so it does not take a core
// from the device's figure.
type pollFloor struct {
	slot atomic.Uint64
	seq  uint64
	efd  int
}

func newPollFloor() (*pollFloor, error) {
	efd, err := vfiousertest.NewEventFD()
	if err != nil {
		return nil, err
	}
	return &pollFloor{efd: efd}, nil
}

func (f *pollFloor) op(n int, c Clock) error {
	var stop atomic.Bool
	done := make(chan error, 1)
	seen := f.slot.Load()
	go func() {
		one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
		for !stop.Load() {
			if v := f.slot.Load(); v != seen {
				seen = v
				if _, err := unix.Write(f.efd, one); err != nil {
					done <- fmt.Errorf("poll floor: eventfd: %w", err)
					return
				}
			}
			runtime.Gosched()
		}
		done <- nil
	}()
	var err error
	for range n {
		f.seq++
		f.slot.Store(f.seq)
		if _, err = vfiousertest.WaitIRQ(f.efd, irqTimeout); err != nil {
			err = fmt.Errorf("doorbell %d: eventfd: %w", f.seq, err)
			break
		}
	}
	c.StopTimer()
	stop.Store(true)
	if perr := <-done; perr != nil {
		err = perr
	}
	c.StartTimer()
	return err
}

func (f *pollFloor) Close() { unix.Close(f.efd) }
