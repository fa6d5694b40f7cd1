package vfiouser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
	"vgpu/ratelog"
	"vgpu/trace"

	"golang.org/x/sys/unix"
)

// DefaultPeerTimeout bounds how long a Peer request waits for the client's reply. It matches
// QEMU's own x-msg-timeout default.
const DefaultPeerTimeout = 5 * time.Second

// commandQueueDepth is how many commands a reader may queue behind a command that is still
// executing before it stops reading. Commands queue only while a Peer request is outstanding
// (otherwise the reader executes them itself), and QEMU waits for most replies anyway.
const commandQueueDepth = 256

type options struct {
	peerTimeout time.Duration
	trace       *trace.Recorder // the timeline (trace.go; nil: off)
}

// Option configures a Server.
type Option func(*options)

// WithPeerTimeout sets how long Peer.DMARead/DMAWrite wait for each reply.
func WithPeerTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.peerTimeout = d
		}
	}
}

// Server serves one Device to one vfio-user client at a time.
type Server struct {
	dev  Device
	log  *slog.Logger
	opts options
	// rl rate-limits what a client can make the server log at will (failed commands, stray
	// replies, refused connections).
	rl *ratelog.Limiter

	mu     sync.Mutex
	active *session
}

// NewServer returns a server for dev. A nil logger discards everything.
func NewServer(dev Device, log *slog.Logger, opts ...Option) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{dev: dev, log: log, rl: ratelog.New(log, 0, 0), opts: options{peerTimeout: DefaultPeerTimeout}}
	for _, o := range opts {
		o(&s.opts)
	}
	return s
}

// Serve accepts clients on l until ctx is done, serving one at a time. A client that connects
// while another is being served is closed at once (QEMU attaches a device exactly once). When a
// client goes away the Device gets Disconnected and the next client (a restarted QEMU) is
// accepted. Serve closes l and returns ctx.Err() after the current client's teardown, or the
// accept error that stopped it.
func (s *Server) Serve(ctx context.Context, l *net.UnixListener) error {
	defer closeOnCancel(ctx, l)()
	defer l.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		uc, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if isTransientAccept(err) {
				s.log.Warn("vfio-user: accept failed, retrying", "err", err)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return fmt.Errorf("vfio-user: accept: %w", err)
		}
		ss, err := s.claim(uc)
		if err != nil {
			s.rl.Warn("vfio-user-refused", "vfio-user: refusing client", "reason", err)
			uc.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(ctx, ss)
		}()
	}
}

// isTransientAccept reports accept errors that go away by themselves (fd exhaustion, a client
// that hung up before we accepted).
func isTransientAccept(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) ||
		errors.Is(err, unix.ECONNABORTED) || errors.Is(err, unix.ENOBUFS)
}

// ServeConn serves one already connected client until it disconnects or ctx is done. It returns
// nil when the client closed the connection, ctx.Err() on cancellation, ErrBusy (after closing
// uc) when another client is being served, and otherwise the error that ended the connection
// (a broken framing, a failed negotiation).
func (s *Server) ServeConn(ctx context.Context, uc *net.UnixConn) error {
	ss, err := s.claim(uc)
	if err != nil {
		uc.Close()
		return err
	}
	return s.run(ctx, ss)
}

// claim makes a session for uc the active one. If the active session's connection is already
// gone but its teardown is still running, claim waits for the teardown instead of refusing:
// a restarted client must not lose a race against our own cleanup.
func (s *Server) claim(uc *net.UnixConn) (*session, error) {
	for {
		s.mu.Lock()
		cur := s.active
		if cur == nil {
			ss, err := newSession(s, uc)
			if err == nil {
				s.active = ss
			}
			s.mu.Unlock()
			return ss, err
		}
		s.mu.Unlock()
		select {
		case <-cur.readerDone:
			<-cur.finished
		default:
			return nil, ErrBusy
		}
	}
}

func (s *Server) run(ctx context.Context, ss *session) error {
	defer s.release(ss)
	s.log.Info("vfio-user: client connected")
	err := ss.serve(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("vfio-user: client connection ended", "err", err)
	} else {
		s.log.Info("vfio-user: client disconnected")
	}
	return err
}

// closeOnCancel closes c when ctx is cancelled. The returned function must run before the
// caller returns: if the close already started it waits for it, because only the first Close
// of a net.Conn waits for the descriptor to be really closed — returning early would leave it
// open behind our back for a moment.
func closeOnCancel(ctx context.Context, c io.Closer) (wait func()) {
	closed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.Close()
		close(closed)
	})
	return func() {
		if !stop() {
			<-closed
		}
	}
}

func (s *Server) release(ss *session) {
	s.mu.Lock()
	if s.active == ss {
		s.active = nil
	}
	s.mu.Unlock()
	close(ss.finished)
}
