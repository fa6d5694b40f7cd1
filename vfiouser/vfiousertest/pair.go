package vfiousertest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/vfiouser"
)

// Socketpair returns the two ends of a connected unix stream socket pair.
func Socketpair() (*net.UnixConn, *net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	a, err := fileConn(fds[0])
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	b, err := fileConn(fds[1])
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, b, nil
}

// fileConn turns a socket fd into a *net.UnixConn, consuming the fd.
func fileConn(fd int) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), "socketpair")
	defer f.Close() // FileConn dups it
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("socketpair end is a %T", c)
	}
	return uc, nil
}

type pairConfig struct {
	server    []vfiouser.Option
	client    []Option
	negotiate bool
	log       *slog.Logger
}

// PairOption configures NewPair.
type PairOption func(*pairConfig)

// ServerOptions passes options to the server.
func ServerOptions(opts ...vfiouser.Option) PairOption {
	return func(p *pairConfig) { p.server = append(p.server, opts...) }
}

// ClientOptions passes options to the client.
func ClientOptions(opts ...Option) PairOption {
	return func(p *pairConfig) { p.client = append(p.client, opts...) }
}

// SkipNegotiate leaves the VERSION exchange to the test.
func SkipNegotiate() PairOption { return func(p *pairConfig) { p.negotiate = false } }

// WithLogger gives the server a logger instead of the test log.
func WithLogger(l *slog.Logger) PairOption { return func(p *pairConfig) { p.log = l } }

// NewPair connects a vfiouser.Server serving dev to a Client over a socketpair, negotiates
// (unless SkipNegotiate) and returns the client. Cleanup closes the client and checks that the
// server goroutine ended. The server logs to t.Log at warn level, or debug when the environment
// has VFIOUSER_TEST_LOG=debug.
func NewPair(t testing.TB, dev vfiouser.Device, opts ...PairOption) *Client {
	t.Helper()
	cfg := pairConfig{negotiate: true}
	for _, o := range opts {
		o(&cfg)
	}
	tl := &testLog{t: t}
	if cfg.log == nil {
		cfg.log = tl.logger()
	}
	sc, cc, err := Socketpair()
	if err != nil {
		t.Fatal(err)
	}
	srv := vfiouser.NewServer(dev, cfg.log, cfg.server...)
	ctx, cancel := context.WithCancel(context.Background())
	serverErr := make(chan error, 1)
	go func() { serverErr <- srv.ServeConn(ctx, sc) }()
	c, err := NewClient(cc, cfg.client...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c.serverErr = serverErr
	t.Cleanup(func() {
		c.Close()
		cancel()
		if _, ok := c.WaitServer(10 * time.Second); !ok {
			t.Error("vfiousertest: server did not stop")
		}
		tl.stop()
	})
	if cfg.negotiate {
		if _, err := c.Negotiate(); err != nil {
			t.Fatalf("vfiousertest: negotiate: %v", err)
		}
	}
	return c
}

// WaitServer waits for the server of a NewPair client to return from ServeConn and returns its
// result; ok is false on timeout. Later calls return the same result at once.
func (c *Client) WaitServer(timeout time.Duration) (err error, ok bool) {
	if c.serverErr == nil {
		return nil, false
	}
	select {
	case err := <-c.serverErr:
		c.serverErr <- err // keep it for later callers
		return err, true
	case <-time.After(timeout):
		return nil, false
	}
}

// testLog forwards slog output to t.Log until the test's cleanup stops it (logging into a
// finished test panics).
type testLog struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (l *testLog) logger() *slog.Logger {
	level := slog.LevelWarn
	if strings.EqualFold(os.Getenv("VFIOUSER_TEST_LOG"), "debug") {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: level}))
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}
