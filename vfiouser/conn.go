package vfiouser

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
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
	uc  *net.UnixConn
	raw syscall.RawConn

	// Read side, owned by the reading goroutine.
	rbuf     []byte
	rlo, rhi int    // unparsed bytes are rbuf[rlo:rhi]
	rpos     uint64 // stream offset of rbuf[rlo]
	roob     []byte
	rmsg     unix.Msghdr
	riov     unix.Iovec
	rn       int
	rerr     error
	recvFn   func(fd uintptr) bool

	// fdmu guards fdq against Close, which may run on another goroutine.
	fdmu   sync.Mutex
	fdq    []fdBatch
	closed bool

	// Write side.
	wmu    sync.Mutex
	whdr   [HeaderSize]byte
	wiov   [3]unix.Iovec
	wmsg   unix.Msghdr
	wn     int
	werr   error
	sendFn func(fd uintptr) bool
}

// NewConn wraps a connected unix stream socket. The Conn owns uc from then on.
func NewConn(uc *net.UnixConn) (*Conn, error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("vfio-user: raw conn: %w", err)
	}
	c := &Conn{
		uc:   uc,
		raw:  raw,
		rbuf: make([]byte, readBufSize),
		roob: make([]byte, unix.CmsgSpace(MaxMsgFDs*4)),
	}
	// Bound once so the per-call RawConn callbacks do not allocate closures.
	c.recvFn = c.recvOnce
	c.sendFn = c.sendOnce
	return c, nil
}

// Close closes the socket and every descriptor received but not yet handed out. It unblocks a
// concurrent ReadMessage or WriteMessage.
func (c *Conn) Close() error {
	c.fdmu.Lock()
	c.closed = true
	for _, b := range c.fdq {
		closeFDs(b.fds)
	}
	c.fdq = nil
	c.fdmu.Unlock()
	return c.uc.Close()
}

// SetReadDeadline bounds the blocking of ReadMessage (see net.Conn). A read that times out
// leaves the stream in an unknown state: treat it as the end of the connection.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.uc.SetReadDeadline(t) }

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
	c.fdmu.Lock()
	defer c.fdmu.Unlock()
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
	err := c.raw.Read(c.recvFn)
	c.riov.Base = nil // do not pin the caller's buffer
	if err == nil {
		err = c.rerr
	}
	if err != nil {
		return 0, err
	}
	if c.rn == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if c.rmsg.Controllen > 0 || c.rmsg.Flags&unix.MSG_CTRUNC != 0 {
		c.queueFDs(c.roob[:c.rmsg.Controllen], at+uint64(c.rn)-1, c.rmsg.Flags&unix.MSG_CTRUNC != 0)
	}
	return c.rn, nil
}

func (c *Conn) recvOnce(fd uintptr) bool {
	for {
		n, _, errno := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&c.rmsg)), unix.MSG_CMSG_CLOEXEC)
		switch errno {
		case 0:
			c.rn, c.rerr = int(n), nil
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // wait for the poller
		default:
			c.rn, c.rerr = 0, fmt.Errorf("vfio-user: recvmsg: %w", errno)
			return true
		}
	}
}

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
	h.Put(c.whdr[:])
	var bufs [3][]byte
	bufs[0] = c.whdr[:]
	copy(bufs[1:], parts)
	return c.sendAll(bufs[:1+len(parts)], total, fds)
}

// WriteRaw sends b exactly as given (it need not be a valid message), for tests that feed
// malformed input.
func (c *Conn) WriteRaw(b []byte, fds []int) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.sendAll([][]byte{b}, len(b), fds)
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
		err := c.raw.Write(c.sendFn)
		c.clearIovecs()
		if err == nil {
			err = c.werr
		}
		if err != nil {
			return err
		}
		sent += c.wn
		oob = nil // descriptors travel once, with the first chunk
	}
	return nil
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

func (c *Conn) sendOnce(fd uintptr) bool {
	for {
		n, _, errno := unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&c.wmsg)), unix.MSG_NOSIGNAL)
		switch errno {
		case 0:
			c.wn, c.werr = int(n), nil
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			c.wn, c.werr = 0, fmt.Errorf("vfio-user: sendmsg: %w", errno)
			return true
		}
	}
}
