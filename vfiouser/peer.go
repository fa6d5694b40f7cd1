package vfiouser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"vgpu/ratelog"

	"golang.org/x/sys/unix"
)

// peer implements Peer for one connection: server→client DMA_READ/DMA_WRITE requests, matched
// to their replies by our own message ids.
type peer struct {
	conn    *Conn
	log     *slog.Logger
	rl      *ratelog.Limiter // stray replies are client-triggered
	timeout time.Duration
	maxXfer atomic.Int64 // the client's max_data_xfer_size, clipped to ours

	// ensureReader makes sure some goroutine reads the socket; called after every register,
	// since the usual reader may be busy executing a command that waits for this very reply.
	ensureReader func()

	mu       sync.Mutex
	nextID   uint16
	pending  map[uint16]*dmaCall
	npending atomic.Int32 // len(pending), readable without mu
	closed   bool
}

// dmaCall is one outstanding request. done is buffered so the reader never blocks on it.
type dmaCall struct {
	cmd  Command
	acc  DMAAccess
	buf  []byte // DMA_READ destination; written only by the reader, before done is signalled
	done chan error
}

func newPeer(conn *Conn, log *slog.Logger, timeout time.Duration, ensureReader func()) *peer {
	p := &peer{conn: conn, log: log, rl: ratelog.New(log, 0, 0), timeout: timeout, ensureReader: ensureReader,
		pending: make(map[uint16]*dmaCall)}
	p.maxXfer.Store(MaxDataXferSize)
	return p
}

// setMaxXfer records the client's limit; 0 (absent) keeps the protocol default.
func (p *peer) setMaxXfer(v uint64) {
	if v == 0 || v > MaxDataXferSize {
		v = MaxDataXferSize
	}
	p.maxXfer.Store(int64(v))
}

// DMARead reads guest memory at iova through the client.
func (p *peer) DMARead(iova uint64, b []byte) error { return p.transfer(CmdDMARead, iova, b) }

// DMAWrite writes guest memory at iova through the client.
func (p *peer) DMAWrite(iova uint64, b []byte) error { return p.transfer(CmdDMAWrite, iova, b) }

// transfer splits an access into requests no larger than the client accepts.
func (p *peer) transfer(cmd Command, iova uint64, b []byte) error {
	if len(b) > 0 && addOverflows(iova, uint64(len(b)-1)) {
		return fmt.Errorf("vfio-user: %v at %#x of %d bytes wraps: %w", cmd, iova, len(b), unix.EINVAL)
	}
	chunk := int(p.maxXfer.Load())
	for len(b) > 0 {
		n := min(len(b), chunk)
		if err := p.request(cmd, iova, b[:n]); err != nil {
			return err
		}
		iova += uint64(n)
		b = b[n:]
	}
	return nil
}

func (p *peer) request(cmd Command, iova uint64, b []byte) error {
	call := &dmaCall{cmd: cmd, acc: DMAAccess{Address: iova, Count: uint64(len(b))}, done: make(chan error, 1)}
	if cmd == CmdDMARead {
		call.buf = b
	}
	id, err := p.register(call)
	if err != nil {
		return err
	}
	p.ensureReader()
	head := call.acc.Append(make([]byte, 0, DMAAccessSize))
	h := Header{ID: id, Cmd: cmd, Flags: FlagTypeCommand}
	if p.log.Enabled(context.Background(), slog.LevelDebug) {
		p.log.Debug("vfio-user: send", "cmd", cmd, "id", id, "address", iova, "count", len(b))
	}
	if cmd == CmdDMARead {
		err = p.conn.WriteMessage(h, nil, head)
	} else {
		err = p.conn.WriteMessage(h, nil, head, b)
	}
	if err != nil {
		if p.forget(id, call) {
			return fmt.Errorf("vfio-user: %v at %#x: %w (%v)", cmd, iova, ErrDisconnected, err)
		}
		return <-call.done
	}
	t := time.NewTimer(p.timeout)
	defer t.Stop()
	select {
	case err := <-call.done:
		return err
	case <-t.C:
		if p.forget(id, call) {
			return fmt.Errorf("vfio-user: %v at %#x after %v: %w", cmd, iova, p.timeout, ErrTimeout)
		}
		// The reader took the call just now: its answer (and the copy into b) is imminent,
		// and b must not be returned to the caller before that copy is done.
		return <-call.done
	}
}

// register gives call a message id that no other outstanding request uses.
func (p *peer) register(call *dmaCall) (uint16, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, ErrDisconnected
	}
	if len(p.pending) > 0xffff {
		return 0, fmt.Errorf("vfio-user: every message id is in flight: %w", unix.EBUSY)
	}
	for {
		p.nextID++
		if _, busy := p.pending[p.nextID]; !busy {
			break
		}
	}
	p.pending[p.nextID] = call
	p.npending.Add(1)
	return p.nextID, nil
}

// forget removes call if it is still pending; false means the reader or shutdown owns it now.
func (p *peer) forget(id uint16, call *dmaCall) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending[id] != call {
		return false
	}
	delete(p.pending, id)
	p.npending.Add(-1)
	return true
}

// complete is called by the reader with every reply. Replies nobody waits for (late ones after
// a timeout, or QEMU's error replies to requests that asked for none) are logged and dropped.
func (p *peer) complete(m *Message) {
	p.mu.Lock()
	call := p.pending[m.ID]
	if call != nil && call.cmd == m.Cmd {
		delete(p.pending, m.ID)
		p.npending.Add(-1)
	} else {
		call = nil
	}
	p.mu.Unlock()
	if call == nil {
		p.rl.Warn("vfio-user-stray-reply", "vfio-user: dropping reply to no pending request",
			"cmd", m.Cmd, "id", m.ID, "size", m.Size, "error", m.Error)
		return
	}
	call.done <- call.finish(m)
}

// finish turns the reply into the caller's result, copying DMA_READ data into place.
func (c *dmaCall) finish(m *Message) error {
	if m.IsError() {
		errno := unix.Errno(m.Error)
		if errno == 0 {
			errno = unix.EIO
		}
		return fmt.Errorf("vfio-user: %v at %#x (%d bytes): %w", c.cmd, c.acc.Address, c.acc.Count, errno)
	}
	if c.cmd == CmdDMAWrite && len(m.Payload) == 0 {
		return nil // the reply head is informational
	}
	acc, data, err := DecodeDMAAccess(m.Payload)
	if err == nil && (acc != c.acc || (c.cmd == CmdDMARead && uint64(len(data)) != acc.Count)) {
		err = errors.New("reply does not match the request")
	}
	if err != nil {
		return fmt.Errorf("vfio-user: %v at %#x (%d bytes): bad reply: %v: %w", c.cmd, c.acc.Address, c.acc.Count, err, unix.EIO)
	}
	if c.cmd == CmdDMARead {
		copy(c.buf, data)
	}
	return nil
}

// outstanding reports whether any request waits for its reply.
func (p *peer) outstanding() bool { return p.npending.Load() > 0 }

// shutdown fails every pending request and refuses new ones.
func (p *peer) shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for id, call := range p.pending {
		delete(p.pending, id)
		p.npending.Add(-1)
		call.done <- fmt.Errorf("vfio-user: %v at %#x: %w", call.cmd, call.acc.Address, ErrDisconnected)
	}
}
