package vfiouser

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"vgpu/ratelog"
	"vgpu/trace"

	"golang.org/x/sys/unix"
)

// maxPooledPayload keeps one huge message from pinning its buffer (in the pool, or as the
// reader's message) forever.
const maxPooledPayload = 64 << 10

// session is one client connection. Two roles move between goroutines (see doc.go):
//
//   - the reader role: exactly one goroutine reads the socket at a time;
//   - the executor role: exactly one goroutine runs commands (calls the Device) at a time, in
//     arrival order.
//
// Normally the goroutine that reads a command also executes it, with no hand-off. While it
// executes, the reader role is vacant; if a Peer request is (or becomes) outstanding, a new
// goroutine takes the reader role at once, so the reply is read whatever the executor waits for.
type session struct {
	dev   Device
	log   *slog.Logger
	rl    *ratelog.Limiter
	debug bool // debug logging, decided once per connection: the check is on every message
	conn  *Conn
	peer  *peer

	readerDone chan struct{} // the connection is gone; teardown is under way
	finished   chan struct{} // teardown complete, Disconnected returned
	gone       atomic.Bool   // set with readerDone; queued commands are dropped

	mu           sync.Mutex
	readerVacant bool       // nobody reads: the last reader is executing
	execBusy     bool       // a goroutine is executing commands
	queue        []*Message // commands read while another goroutine executes
	queueCond    sync.Cond  // signalled when the queue shrinks or the session dies
	readErr      error      // why reading stopped
	endErr       error      // why the executor ended the connection, if it did
	helpers      sync.WaitGroup

	pool sync.Pool // *Message

	// Executor-only state (guarded by the executor role).
	negotiated bool
	connected  bool       // Device.Connected was called
	info       DeviceInfo // the layout the client was told about
	out        []byte     // reply scratch buffer
	fast       fastReply  // the fast path's reply (fastread.go)

	trace *trace.Recorder // the timeline (trace.go; nil: off)
}

func newSession(s *Server, uc *net.UnixConn) (*session, error) {
	conn, err := NewBlockingConn(uc)
	if err != nil {
		return nil, err
	}
	ss := &session{
		dev:        s.dev,
		log:        s.log,
		rl:         s.rl,
		conn:       conn,
		readerDone: make(chan struct{}),
		finished:   make(chan struct{}),
		out:        make([]byte, 0, 4096),
	}
	ss.debug = s.log.Enabled(context.Background(), slog.LevelDebug)
	ss.peer = newPeer(conn, s.log, s.opts.peerTimeout, ss.ensureReader)
	ss.peer.rl = s.rl
	ss.trace = s.opts.trace
	ss.queueCond.L = &ss.mu
	ss.pool.New = func() any { return new(Message) }
	return ss, nil
}

// serve runs the connection to its end, then tears it down in the order the Device needs:
// pending Peer requests fail first (an engine blocked in one may be what Disconnected waits
// for), queued commands are dropped with their fds, and Disconnected runs last, once no other
// goroutine can call the Device.
func (ss *session) serve(ctx context.Context) error {
	defer closeOnCancel(ctx, ss.conn)()

	ss.readLoop()
	<-ss.readerDone   // this goroutine may have handed the reader role on
	ss.helpers.Wait() // every other reader/executor has stopped
	ss.dropQueue()    // commands that arrived too late to run
	if ss.connected {
		ss.dev.Disconnected()
	}

	ss.mu.Lock()
	readErr, endErr := ss.readErr, ss.endErr
	ss.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case endErr != nil:
		return endErr
	case errors.Is(readErr, io.EOF), errors.Is(readErr, net.ErrClosed):
		return nil
	}
	return readErr
}

// readLoop runs while this goroutine holds the reader role. It returns when reading fails, or
// after executing commands when another goroutine has taken the reader role meanwhile. The
// message it reads into is reused for the next one unless it was queued for another executor.
func (ss *session) readLoop() {
	var m *Message
	for {
		if m == nil {
			m = ss.getMsg()
		}
		if err := ss.conn.ReadMessage(m); err != nil {
			ss.putMsg(m)
			ss.readFailed(err)
			return
		}
		if ss.debug {
			ss.log.Debug("vfio-user: recv", "cmd", m.Cmd, "id", m.ID, "size", m.Size,
				"flags", m.Flags, "fds", len(m.FDs))
		}
		if m.IsReply() {
			ss.peer.complete(m)
			ss.conn.yieldBeforeBlocking() // the caller waiting for this reply is runnable now
			m.CloseFDs()                  // replies to DMA requests never carry fds
			trimPayload(m)
			continue
		}
		if !ss.startExec(m) {
			m = nil // queued behind the command another goroutine is running: no longer ours
			continue
		}
		if !ss.execLoop(m) {
			ss.putMsg(m)
			return
		}
		trimPayload(m)
	}
}

// startExec makes the calling reader the executor of m, leaving the reader role vacant (or
// handing it to a helper when a Peer reply is awaited). If another goroutine is executing, m
// is queued behind it instead and false is returned.
//
// The queue is bounded: a client that floods commands while the executor is busy stops being
// read until there is room. While this reader waits for room the executor may drain the whole
// queue and give up its role, so after every wait both conditions are looked at again: a
// command appended to the queue with no executor left would wait, unanswered, for whatever
// command came next (and then run after it).
func (ss *session) startExec(m *Message) bool {
	ss.mu.Lock()
	for ss.execBusy && len(ss.queue) >= commandQueueDepth && !ss.gone.Load() {
		if h := queueWaitHook.waiting; h != nil {
			h()
		}
		ss.queueCond.Wait()
		if h := queueWaitHook.woke; h != nil {
			ss.mu.Unlock()
			h(ss.executing)
			ss.mu.Lock()
		}
	}
	if ss.execBusy {
		ss.queue = append(ss.queue, m)
		ss.mu.Unlock()
		return false
	}
	ss.execBusy = true
	ss.readerVacant = true
	spawn := ss.peer.outstanding() && ss.takeVacancyLocked()
	ss.mu.Unlock()
	if spawn {
		go ss.helperReader()
	}
	return true
}

// queueWaitHook is set by tests only, to force the interleaving that once lost a command: a
// reader waiting for room in the command queue while the executor drains all of it. waiting
// runs (with the session lock held; it must not block) each time a reader is about to wait for
// room; woke runs without the lock each time it woke up, and may hold it there until the
// executor is gone (executing reports whether one is running).
var queueWaitHook struct {
	waiting func()
	woke    func(executing func() bool)
}

// executing reports whether a goroutine holds the executor role.
func (ss *session) executing() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.execBusy
}

// ensureReader is called by the Peer after it registered a request: if nobody reads the
// socket (the reader is executing a command), a helper must, or the reply would wait for the
// command — which may itself be waiting for that reply.
func (ss *session) ensureReader() {
	ss.mu.Lock()
	spawn := ss.takeVacancyLocked()
	ss.mu.Unlock()
	if spawn {
		go ss.helperReader()
	}
}

// takeVacancyLocked claims a vacant reader role for a new helper goroutine.
func (ss *session) takeVacancyLocked() bool {
	if !ss.readerVacant || ss.gone.Load() {
		return false
	}
	ss.readerVacant = false
	ss.helpers.Add(1)
	return true
}

func (ss *session) helperReader() {
	defer ss.helpers.Done()
	ss.readLoop()
}

// execLoop runs m, then whatever other readers queued meanwhile, then gives up the executor
// role and takes the reader role back if it is still vacant, all in one critical section. It
// reports whether the caller holds the reader role again (else a helper reads, and the caller
// leaves). m stays the caller's; queued messages go back to the pool.
func (ss *session) execLoop(m *Message) bool {
	first := m
	for {
		if !ss.gone.Load() {
			ss.handle(m)
		}
		m.CloseFDs() // whatever the handler did not take
		if m != first {
			ss.putMsg(m)
		}

		ss.mu.Lock()
		if len(ss.queue) == 0 {
			ss.execBusy = false
			reclaimed := ss.readerVacant
			ss.readerVacant = false
			ss.mu.Unlock()
			return reclaimed
		}
		m = ss.queue[0]
		ss.queue[0] = nil
		ss.queue = ss.queue[1:]
		ss.queueCond.Signal()
		ss.mu.Unlock()
	}
}

// readFailed ends the connection: it wakes everything that waits on it and fails every
// pending Peer request. Only the reader-role holder reads, so this runs once.
func (ss *session) readFailed(err error) {
	if errors.Is(err, ErrFraming) {
		ss.log.Warn("vfio-user: dropping connection", "err", err)
	}
	ss.gone.Store(true)
	ss.conn.Close()
	ss.peer.shutdown()
	ss.mu.Lock()
	ss.readErr = err
	ss.queueCond.Broadcast()
	ss.mu.Unlock()
	close(ss.readerDone)
}

func (ss *session) dropQueue() {
	ss.mu.Lock()
	q := ss.queue
	ss.queue = nil
	ss.mu.Unlock()
	for _, m := range q {
		m.CloseFDs()
		ss.putMsg(m)
	}
}

// handle runs one command and answers it.
func (ss *session) handle(m *Message) {
	if ss.handleFast(m) {
		return // a register read (fastread.go): no yield, as below
	}
	reply, fds, err := ss.tracedDispatch(m)
	defer closeFDs(fds)
	if err != nil {
		ss.failed(m, err)
		return
	}
	if !m.NoReply() {
		ss.send(Header{ID: m.ID, Cmd: m.Cmd, Flags: FlagTypeReply}, reply, fds)
	}
	if ss.negotiated && !ss.connected {
		// After the VERSION reply, so no DMA request of the device can overtake it.
		ss.connected = true
		ss.dev.Connected(ss.peer)
	}
	if m.Cmd != CmdRegionRead {
		// Writes ring doorbells and start engines; maps, IRQ changes and resets wake or
		// stop them. A register read is assumed not to: it is the hot path.
		ss.conn.yieldBeforeBlocking()
	}
}

// failed answers a command that failed with err: a logged line (rate-limited), the error
// reply, and the end of the connection when the failure is fatal.
func (ss *session) failed(m *Message, err error) {
	ss.rl.Warn("vfio-user-command-failed", "vfio-user: command failed", "cmd", m.Cmd, "id", m.ID, "size", m.Size, "err", err)
	ss.sendError(m.Header, errnoFor(err))
	var fe *fatalError
	if errors.As(err, &fe) {
		ss.end(err)
	}
}

func (ss *session) send(h Header, payload []byte, fds []int) {
	if ss.debug {
		ss.log.Debug("vfio-user: send", "cmd", h.Cmd, "id", h.ID, "size", HeaderSize+len(payload),
			"flags", h.Flags, "error", h.Error, "fds", len(fds))
	}
	if err := ss.conn.WriteMessage(h, fds, payload); err != nil {
		ss.log.Debug("vfio-user: write failed", "cmd", h.Cmd, "id", h.ID, "err", err)
		ss.conn.Close() // the reader notices and tears the session down
	}
}

// sendError answers with a header-only error reply. It is sent even for NO_REPLY commands: QEMU
// does the same for our failed posted DMA writes, and a header-only reply cannot desynchronise
// its stream.
func (ss *session) sendError(req Header, errno unix.Errno) {
	ss.send(Header{ID: req.ID, Cmd: req.Cmd, Flags: FlagTypeReply | FlagError, Error: uint32(errno)}, nil, nil)
}

// fatalError marks a failure after which the connection cannot go on (negotiation).
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

func fatal(err error) error { return &fatalError{err} }

// end closes the connection from the executor side, remembering why.
func (ss *session) end(err error) {
	ss.mu.Lock()
	if ss.endErr == nil {
		ss.endErr = err
	}
	ss.mu.Unlock()
	ss.conn.Close()
}

func (ss *session) getMsg() *Message { return ss.pool.Get().(*Message) }

func (ss *session) putMsg(m *Message) {
	trimPayload(m)
	m.FDs = m.FDs[:0]
	ss.pool.Put(m)
}

// trimPayload drops a huge payload buffer, so one big message does not pin it for good.
func trimPayload(m *Message) {
	if cap(m.Payload) > maxPooledPayload {
		m.Payload = nil
	}
}
