package vfiouser

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// readBufSize is the receive buffer. Messages up to this size are parsed in place (several per
// recvmsg when the peer pipelines); larger ones are read straight into the message buffer.
const readBufSize = 64 << 10

// Message is one received message. The Conn reuses Payload's capacity when the same Message is
// passed to ReadMessage again. FDs are raw descriptors owned by the holder of the Message.
type Message struct {
	Header
	Payload []byte
	FDs     []int
	// FDsTruncated reports that the kernel dropped descriptors (MSG_CTRUNC): the sender passed
	// more than MaxMsgFDs. The ones that did arrive are in FDs.
	FDsTruncated bool
}

// CloseFDs closes every descriptor of m and forgets them.
func (m *Message) CloseFDs() {
	closeFDs(m.FDs)
	m.FDs = m.FDs[:0]
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// fdBatch is the descriptors one recvmsg returned. last is the stream offset of the last byte
// that recvmsg returned: Linux stops a stream read right after the segment that carried
// descriptors, and a sender attaches them to the first segment of their message, so they
// belong to the message containing that byte. This is what lets us read ahead past message
// boundaries and still hand every descriptor to the right message.
type fdBatch struct {
	last      uint64
	fds       []int
	truncated bool
}

// Conn frames vfio-user messages over a unix stream socket, with descriptor passing.
// ReadMessage must be called from one goroutine at a time; WriteMessage from any number (one
// mutex keeps messages whole on the wire).
type Conn struct {
	// Exactly one of these: the poller's view of the socket (NewConn), or the bare
	// descriptor of a blocking Conn (NewBlockingConn).
	uc  *net.UnixConn
	raw syscall.RawConn
	sfd *sockFD

	// Read side, owned by the reading goroutine.
	rbuf     []byte
	rlo, rhi int    // unparsed bytes are rbuf[rlo:rhi]
	rpos     uint64 // stream offset of rbuf[rlo]
	roob     []byte
	rmsg     unix.Msghdr
	riov     unix.Iovec
	rn       int
	rerr     unix.Errno
	recvFn   func(fd uintptr) bool
	rbatches int         // fd batches this reader queued and not yet claimed: 0 spares claimFDs the lock
	ryield   atomic.Bool // see yieldBeforeBlocking
	rsched   [1]metrics.Sample
	rtimeout atomic.Int64 // a blocking Conn's receive timeout in ns (SetReadDeadline); 0: none
	rposted  bool         // the last message read was a posted command (see recvOnce)

	// fdmu guards fdq against Close, which may run on another goroutine.
	fdmu   sync.Mutex
	fdq    []fdBatch
	closed bool

	// Write side, guarded by wmu. A message without descriptors of up to smallWrite bytes is
	// copied into wsmall and sent with one send(2); others go out with sendmsg and iovecs.
	wmu      sync.Mutex
	whdr     [HeaderSize]byte
	wiov     [3]unix.Iovec
	wmsg     unix.Msghdr
	wsmall   [smallWrite]byte
	wbuf     []byte // what sendtoOnce sends
	wn       int
	werr     unix.Errno
	sendFn   func(fd uintptr) bool
	sendtoFn func(fd uintptr) bool
}

// smallWrite is the largest message WriteMessage copies into one buffer: send(2) of one buffer
// costs less than sendmsg(2) of a header and payload iovecs, and copying a few hundred bytes
// costs less than the difference. Replies to register accesses are all far below it.
const smallWrite = 256

// NewConn wraps a connected unix stream socket. The Conn owns uc from then on. Reads and
// writes wait in the runtime's poller, so they honour SetReadDeadline.
func NewConn(uc *net.UnixConn) (*Conn, error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("vfio-user: raw conn: %w", err)
	}
	c := newConn()
	c.uc, c.raw = uc, raw
	return c, nil
}

// NewBlockingConn wraps a connected unix stream socket in blocking mode: ReadMessage waits
// inside recvmsg, WriteMessage inside its send, and the socket is not registered with the
// runtime's poller at all. The Conn owns uc from then on (it keeps a duplicate of its
// descriptor and closes uc). Read deadlines are receive timeouts (see SetReadDeadline).
//
// Why: through the poller a message costs a recvmsg that fails with EAGAIN, an epoll_wait and a
// scheduler round before the recvmsg that returns it — and every message wakes whichever idle
// thread sleeps in epoll_wait, even when a reader is already waiting. A blocking socket costs the
// one recvmsg, as a C server's does; on the machines vgpu runs on, where a system call costs
// most of a microsecond, that was most of what a trapped MMIO access cost beyond the socket
// itself. The price is an OS thread per goroutine blocked in the socket (the runtime runs
// other goroutines on other threads meanwhile). Close shuts the socket down, which wakes a
// blocked recvmsg (end of stream) or send (EPIPE).
func NewBlockingConn(uc *net.UnixConn) (*Conn, error) {
	defer uc.Close() // after the dup: closing it takes the socket out of the poller
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("vfio-user: raw conn: %w", err)
	}
	fd, derr := -1, error(nil)
	if err := raw.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, fmt.Errorf("vfio-user: raw conn: %w", err)
	}
	if derr != nil {
		return nil, fmt.Errorf("vfio-user: dup socket: %w", derr)
	}
	// The duplicate shares the open file description, whose O_NONBLOCK the net package set.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("vfio-user: blocking mode: %w", err)
	}
	c := newConn()
	c.sfd = &sockFD{fd: fd}
	return c, nil
}

func newConn() *Conn {
	c := &Conn{
		rbuf: make([]byte, readBufSize),
		roob: make([]byte, unix.CmsgSpace(MaxMsgFDs*4)),
	}
	// Bound once so the per-call RawConn callbacks do not allocate closures.
	c.recvFn = c.recvOnce
	c.sendFn = c.sendOnce
	c.sendtoFn = c.sendtoOnce
	c.rsched[0].Name = "/sched/goroutines/runnable:goroutines"
	return c
}

// Close closes the socket and every descriptor received but not yet handed out. It unblocks a
// concurrent ReadMessage or WriteMessage, which then fail with net.ErrClosed.
func (c *Conn) Close() error {
	c.fdmu.Lock()
	c.closed = true
	for _, b := range c.fdq {
		closeFDs(b.fds)
	}
	c.fdq = nil
	c.fdmu.Unlock()
	if c.sfd != nil {
		c.sfd.close()
		return nil
	}
	return c.uc.Close()
}

// isClosed reports whether Close was called; errors after it are reported as net.ErrClosed.
func (c *Conn) isClosed() bool {
	c.fdmu.Lock()
	defer c.fdmu.Unlock()
	return c.closed
}

// SetReadDeadline bounds the blocking of ReadMessage (see net.Conn). A read that times out
// fails with os.ErrDeadlineExceeded and leaves the stream in an unknown state: treat it as the
// end of the connection. A blocking Conn has no poller to keep an absolute deadline: it keeps
// the time left as a receive timeout, which bounds each wait inside ReadMessage (each poll(2)
// it sleeps in) rather than all of them together; the zero time removes it.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.sfd == nil {
		return c.uc.SetReadDeadline(t)
	}
	var left time.Duration
	if !t.IsZero() {
		left = max(time.Until(t), time.Microsecond) // a timeout of zero would mean none
	}
	if !c.sfd.acquire() {
		return net.ErrClosed
	}
	c.sfd.release()
	c.rtimeout.Store(left.Nanoseconds())
	return nil
}

// ReadMessage reads the next whole message into m, reusing m.Payload's storage. Any error ends
// the stream: io.EOF when the peer closed between messages, io.ErrUnexpectedEOF inside one,
// ErrFraming for an impossible size, net.ErrClosed after Close. m.FDs must be empty on entry
// (the caller closes or takes them after each message).
func (c *Conn) ReadMessage(m *Message) error {
	m.FDs = m.FDs[:0]
	m.FDsTruncated = false
	if err := c.fillAtLeast(HeaderSize); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) && c.rhi == c.rlo {
			err = io.EOF
		}
		return c.fail(err)
	}
	h, _ := DecodeHeader(c.rbuf[c.rlo:c.rhi])
	if err := h.CheckFraming(); err != nil {
		return c.fail(err)
	}
	m.Header = h
	c.rposted = h.IsCommand() && h.NoReply()
	start := c.rpos
	n := int(h.Size) - HeaderSize
	m.Payload = grow(m.Payload, n)
	if int(h.Size) <= len(c.rbuf) {
		if err := c.fillAtLeast(int(h.Size)); err != nil {
			return c.fail(err)
		}
		copy(m.Payload, c.rbuf[c.rlo+HeaderSize:])
		c.consume(int(h.Size))
	} else if err := c.readLarge(m.Payload); err != nil {
		return c.fail(err)
	}
	c.claimFDs(m, start, start+uint64(h.Size))
	return nil
}

// grow returns b resized to n bytes, reallocating only when its capacity is short.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// fail closes every queued descriptor (the stream is over, nobody will claim them).
func (c *Conn) fail(err error) error {
	c.fdmu.Lock()
	for _, b := range c.fdq {
		closeFDs(b.fds)
	}
	c.fdq = nil
	c.rbatches = 0
	c.fdmu.Unlock()
	return err
}

// fillAtLeast reads until rbuf holds n unparsed bytes (n ≤ len(rbuf)).
func (c *Conn) fillAtLeast(n int) error {
	if c.rhi-c.rlo >= n {
		return nil
	}
	if c.rlo+n > len(c.rbuf) { // not enough room after rlo: slide the tail down
		c.rhi = copy(c.rbuf, c.rbuf[c.rlo:c.rhi])
		c.rlo = 0
	}
	for c.rhi-c.rlo < n {
		got, err := c.recv(c.rbuf[c.rhi:], c.rpos+uint64(c.rhi-c.rlo))
		if err != nil {
			return err
		}
		c.rhi += got
	}
	return nil
}

func (c *Conn) consume(n int) {
	c.rlo += n
	c.rpos += uint64(n)
	if c.rlo == c.rhi {
		c.rlo, c.rhi = 0, 0
	}
}

// readLarge fills p (a payload bigger than rbuf) with what is buffered, then reads the rest
// straight from the socket. It never reads past the end of this message.
func (c *Conn) readLarge(p []byte) error {
	have := copy(p, c.rbuf[c.rlo+HeaderSize:c.rhi])
	c.consume(HeaderSize + have)
	for have < len(p) {
		got, err := c.recv(p[have:], c.rpos)
		if err != nil {
			return err
		}
		have += got
		c.rpos += uint64(got)
	}
	return nil
}

// claimFDs moves the queued descriptors that belong to the message [start, end) into m.
func (c *Conn) claimFDs(m *Message, start, end uint64) {
	if c.rbatches == 0 {
		return // nearly every message: none queued
	}
	c.fdmu.Lock()
	defer func() {
		c.rbatches = len(c.fdq)
		c.fdmu.Unlock()
	}()
	i := 0
	for ; i < len(c.fdq) && c.fdq[i].last < end; i++ {
		b := c.fdq[i]
		if b.last < start { // cannot happen: earlier messages claimed theirs
			closeFDs(b.fds)
			continue
		}
		m.FDs = append(m.FDs, b.fds...)
		m.FDsTruncated = m.FDsTruncated || b.truncated
	}
	c.fdq = c.fdq[:copy(c.fdq, c.fdq[i:])]
}

// recv does one recvmsg into p. at is the stream offset p[0] will have. Descriptors that come
// with the bytes are queued for claimFDs.
func (c *Conn) recv(p []byte, at uint64) (int, error) {
	c.riov.Base = &p[0]
	c.riov.SetLen(len(p))
	c.rmsg.Iov = &c.riov
	c.rmsg.SetIovlen(1)
	c.rmsg.Control = &c.roob[0]
	c.rmsg.SetControllen(len(c.roob))
	c.rmsg.Flags = 0
	var err error
	if c.sfd == nil {
		err = c.raw.Read(c.recvFn)
	} else if !c.sfd.acquire() {
		err = net.ErrClosed
	} else {
		if !c.recvOnce(uintptr(c.sfd.fd)) {
			err = os.ErrDeadlineExceeded // the receive timeout of SetReadDeadline expired
		}
		c.sfd.release()
	}
	c.riov.Base = nil // do not pin the caller's buffer
	if err == nil && c.rerr != 0 {
		err = fmt.Errorf("vfio-user: recvmsg: %w", c.rerr)
	}
	if err == nil && c.rn == 0 {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		if c.isClosed() { // our own Close (a blocking Conn's shutdown reads as end of stream)
			err = net.ErrClosed
		}
		return 0, err
	}
	if c.rmsg.Controllen > 0 || c.rmsg.Flags&unix.MSG_CTRUNC != 0 {
		c.queueFDs(c.roob[:c.rmsg.Controllen], at+uint64(c.rn)-1, c.rmsg.Flags&unix.MSG_CTRUNC != 0)
	}
	return c.rn, nil
}

// recvOnce is one recvmsg into c.rmsg (a field of the heap-allocated Conn, so the address
// handed to the kernel stays valid).
//
// A blocking Conn that answered (or is waiting for an answer to) what it read last never
// sleeps inside recvmsg: it waits in poll(2) for POLLIN, then reads without waiting (see
// waitReadable for why). After a posted command (NO_REPLY: the writes QEMU streams) there is
// nothing of ours for the peer to read, so it sleeps in recvmsg itself, one system call.
func (c *Conn) recvOnce(fd uintptr) bool {
	args := [6]uintptr{fd, uintptr(unsafe.Pointer(&c.rmsg)), unix.MSG_CMSG_CLOEXEC}
	var done bool
	if c.sfd == nil {
		c.rn, c.rerr, done = sockCall(unix.SYS_RECVMSG, args, 2, false, false)
		return done
	}
	// After a command that may have made goroutines runnable (see yieldBeforeBlocking), a
	// read without waiting comes first, as commands of that kind (posted writes, DMA replies)
	// often stream; and before blocking, what was made runnable runs. The flag is loaded
	// first: it is rarely set on the register-read path, where a swap would cost an atomic
	// on every message.
	if c.ryield.Load() {
		if c.rn, c.rerr, done = sockCall(unix.SYS_RECVMSG, args, 2, false, true); done {
			return true
		}
		if c.ryield.Swap(false) && c.runnable() {
			runtime.Gosched()
		}
	}
	if c.rposted {
		c.rn, c.rerr, done = sockCall(unix.SYS_RECVMSG, args, 2, true, false)
		return done
	}
	for {
		if ok, errno := c.waitReadable(fd); errno != 0 {
			c.rn, c.rerr = 0, errno
			return true
		} else if !ok {
			return false // the receive timeout of SetReadDeadline expired
		}
		if c.rn, c.rerr, done = sockCall(unix.SYS_RECVMSG, args, 2, false, true); done {
			return true
		}
	}
}

// waitReadable sleeps in ppoll(2) until the socket has bytes (or an end) to read, for at most
// the receive timeout of SetReadDeadline. ok is false when that expired.
//
// Why poll and not a blocking recvmsg: a thread asleep inside recvmsg waits on the socket's
// wait queue with no filter, so it is woken by every event there — including the write space
// the client's socket gets back each time the client reads one of our replies. With both ends
// on one CPU, the scheduler then often lets the sleeper run at once: it finds nothing, sleeps
// again, and the round trip paid two context switches for nothing. A poll waiter is woken for
// the events it asked for only (POLLIN), so the server runs when the request is there, and the
// client's send is the wake-up that lets the scheduler run the server before the client sleeps.
// Polling first costs a system call even when the request is there already; trying a read
// without waiting first costs one whenever it is not, which on one CPU is the more common case
// (measured with the C client: the server found its next request waiting on ~40% of round
// trips, and the client slept twice in a round trip more often with the try first).
func (c *Conn) waitReadable(fd uintptr) (ok bool, errno unix.Errno) {
	pfd := unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	var ts *unix.Timespec
	if d := c.rtimeout.Load(); d > 0 {
		t := unix.NsecToTimespec(d)
		ts = &t
	}
	for {
		n, _, e := unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(ts)), 0, 0, 0)
		switch e {
		case 0:
			return n > 0, 0
		case unix.EINTR:
			continue // the time already waited is not taken off: bounds each wait, as documented
		default:
			return false, e
		}
	}
}

// runnable reports whether any goroutine waits for a processor. Reading the scheduler gauge
// costs ~0.1 µs; yielding when nothing waits would cost far more (runtime.Gosched wakes an idle
// thread, which then takes this goroutine to another CPU: a register read right after a write
// measured ~3 µs slower). A runtime without the gauge always yields.
func (c *Conn) runnable() bool {
	metrics.Read(c.rsched[:])
	v := c.rsched[0].Value
	return v.Kind() != metrics.KindUint64 || v.Uint64() > 0
}

// yieldBeforeBlocking asks the next read of a blocking Conn to let runnable goroutines run
// before it blocks, if it has to. Call it after doing something that may have woken goroutines
// (a Device method starting an engine, a reply handed to a waiting caller): those are queued
// on the current goroutine's processor, and a thread blocked in recvmsg keeps its processor,
// so they would wait until the runtime's monitor takes it away (20 µs to 10 ms later) or the
// next message arrives. A Conn on the poller needs none of this: parking in the poller runs them.
func (c *Conn) yieldBeforeBlocking() { c.ryield.Store(true) }

// queueFDs records the descriptors of one recvmsg. When the Conn is already closed they are
// closed at once, so a concurrent Close never leaks them.
func (c *Conn) queueFDs(oob []byte, last uint64, truncated bool) {
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob); err == nil {
		for i := range msgs {
			if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	c.fdmu.Lock()
	defer c.fdmu.Unlock()
	if c.closed {
		closeFDs(fds)
		return
	}
	c.fdq = append(c.fdq, fdBatch{last: last, fds: fds, truncated: truncated})
	c.rbatches = len(c.fdq)
}

// WriteMessage sends one message: h (Size is filled in) followed by the concatenation of parts,
// with fds attached to the first bytes. Partial writes are continued; descriptors go only with
// the first chunk. The caller keeps ownership of fds (the kernel duplicates them).
func (c *Conn) WriteMessage(h Header, fds []int, parts ...[]byte) error {
	total := HeaderSize
	for _, p := range parts {
		total += len(p)
	}
	if len(parts) > len(c.wiov)-1 {
		return fmt.Errorf("vfio-user: %d payload parts, at most %d", len(parts), len(c.wiov)-1)
	}
	h.Size = uint32(total)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(fds) == 0 && total <= smallWrite {
		b := c.wsmall[:total]
		h.Put(b)
		off := HeaderSize
		for _, p := range parts {
			off += copy(b[off:], p)
		}
		return c.sendBuf(b)
	}
	h.Put(c.whdr[:])
	var bufs [3][]byte
	bufs[0] = c.whdr[:]
	copy(bufs[1:], parts)
	return c.sendAll(bufs[:1+len(parts)], total, fds)
}

// writeSmall sends b, a whole encoded message without descriptors of at most smallWrite bytes,
// as WriteMessage would, without copying it.
func (c *Conn) writeSmall(b []byte) error {
	c.wmu.Lock()
	err := c.sendBuf(b)
	c.wmu.Unlock()
	return err
}

// WriteRaw sends b exactly as given (it need not be a valid message), for tests that feed
// malformed input.
func (c *Conn) WriteRaw(b []byte, fds []int) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.sendAll([][]byte{b}, len(b), fds)
}

// sendBuf writes all of b (at most smallWrite bytes, in memory that outlives the call: c.wsmall
// or a session's reply buffer) with send(2). Called with wmu.
func (c *Conn) sendBuf(b []byte) error {
	if c.sfd == nil {
		for len(b) > 0 {
			c.wbuf = b
			if err := c.write(c.sendtoFn); err != nil {
				return err
			}
			b = b[c.wn:]
		}
		return nil
	}
	// The blocking Conn's hot path, kept flat: a reply to a register access ends here.
	if !c.sfd.acquire() {
		return net.ErrClosed
	}
	defer c.sfd.release()
	for len(b) > 0 {
		n, errno, _ := sockCall(unix.SYS_SENDTO,
			[6]uintptr{uintptr(c.sfd.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), unix.MSG_NOSIGNAL}, 3, true, true)
		if errno != 0 {
			if c.isClosed() {
				return net.ErrClosed
			}
			return fmt.Errorf("vfio-user: send: %w", errno)
		}
		b = b[n:]
	}
	return nil
}

// sendAll writes every byte of bufs with as many sendmsg calls as it takes. Called with wmu.
func (c *Conn) sendAll(bufs [][]byte, total int, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	sent := 0
	for sent < total {
		n := c.setIovecs(bufs, sent)
		c.wmsg.Iov = &c.wiov[0]
		c.wmsg.SetIovlen(n)
		c.wmsg.Control, c.wmsg.Controllen = nil, 0
		if oob != nil {
			c.wmsg.Control = &oob[0]
			c.wmsg.SetControllen(len(oob))
		}
		err := c.write(c.sendFn)
		c.clearIovecs()
		if err != nil {
			return err
		}
		sent += c.wn
		oob = nil // descriptors travel once, with the first chunk
	}
	return nil
}

// write runs one send callback (sendOnce or sendtoOnce) on the socket, through the poller or
// on the bare descriptor. Called with wmu.
func (c *Conn) write(f func(fd uintptr) bool) error {
	var err error
	if c.sfd == nil {
		err = c.raw.Write(f)
	} else if !c.sfd.acquire() {
		err = net.ErrClosed
	} else {
		f(uintptr(c.sfd.fd))
		c.sfd.release()
	}
	if err == nil && c.werr != 0 {
		err = fmt.Errorf("vfio-user: send: %w", c.werr)
	}
	if err != nil && c.isClosed() {
		err = net.ErrClosed
	}
	return err
}

// setIovecs points the iovecs at bufs, skipping the first skip bytes; it returns their count.
func (c *Conn) setIovecs(bufs [][]byte, skip int) int {
	n := 0
	for _, b := range bufs {
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		b = b[skip:]
		skip = 0
		c.wiov[n].Base = &b[0]
		c.wiov[n].SetLen(len(b))
		n++
	}
	return n
}

func (c *Conn) clearIovecs() {
	for i := range c.wiov {
		c.wiov[i].Base = nil
	}
	c.wmsg.Control = nil
}

// sendOnce is one sendmsg of c.wmsg; sendtoOnce one send(2) of c.wbuf (inside c.wsmall). Both
// hand the kernel addresses inside the heap-allocated Conn, which stay valid. sendtoOnce
// serves the poller's Conn only; a blocking Conn's sendBuf calls send(2) itself.
func (c *Conn) sendOnce(fd uintptr) bool {
	var done bool
	c.wn, c.werr, done = sockCall(unix.SYS_SENDMSG,
		[6]uintptr{fd, uintptr(unsafe.Pointer(&c.wmsg)), unix.MSG_NOSIGNAL}, 2, c.sfd != nil, true)
	return done
}

func (c *Conn) sendtoOnce(fd uintptr) bool {
	var done bool
	c.wn, c.werr, done = sockCall(unix.SYS_SENDTO,
		[6]uintptr{fd, uintptr(unsafe.Pointer(&c.wbuf[0])), uintptr(len(c.wbuf)), unix.MSG_NOSIGNAL}, 3, c.sfd != nil, true)
	return done
}
