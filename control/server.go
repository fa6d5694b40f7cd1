package control

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"sync"
	"time"
)

// Handler runs one command. args are the request's raw arguments (nil if none; DecodeArgs
// decodes them); the result is marshalled as JSON. It may be called concurrently.
type Handler func(args json.RawMessage) (any, error)

// MaxClients bounds the connections served at once: each has a goroutine and a buffer, and
// the socket is for a developer's few tools, not for a crowd.
const MaxClients = 16

// Server serves registered commands on a control socket.
type Server struct {
	log *slog.Logger

	mu       sync.Mutex
	handlers map[string]Handler
	conns    map[net.Conn]struct{}
	l        net.Listener
	path     string // removed by Close when Serve was given a socket Listen created
	closed   bool
	wg       sync.WaitGroup
}

// NewServer returns a server with the built-in "help" command (the command names).
func NewServer(log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{log: log, handlers: map[string]Handler{}, conns: map[net.Conn]struct{}{}}
	s.Handle("help", func(json.RawMessage) (any, error) { return s.Commands(), nil })
	return s
}

// Handle registers a command. Registering a name twice, an empty name or one longer than
// MaxCommandName is a programming error and panics (as http.ServeMux does). Commands may be
// added while the server runs.
func (s *Server) Handle(name string, fn Handler) {
	if name == "" || len(name) > MaxCommandName || fn == nil {
		panic(fmt.Sprintf("control: bad registration of command %q", name))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.handlers[name]; dup {
		panic(fmt.Sprintf("control: command %q registered twice", name))
	}
	s.handlers[name] = fn
}

// Commands lists the registered command names, sorted.
func (s *Server) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.handlers))
	for n := range s.handlers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ListenAndServe creates the socket at path (Listen) and serves it until Close; Close also
// removes the socket file.
func (s *Server) ListenAndServe(path string) error {
	l, err := Listen(path)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.path = path
	s.mu.Unlock()
	return s.Serve(l)
}

// Start is ListenAndServe in the background: it returns once the socket exists (or failed to).
func (s *Server) Start(path string) error {
	l, err := Listen(path)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.path = path
	s.mu.Unlock()
	go s.Serve(l)
	return nil
}

// ErrClosed is what Serve returns after Close.
var ErrClosed = errors.New("control: server closed")

// Serve accepts connections on l until Close. It returns ErrClosed after Close, or the
// accept error that stopped it.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return ErrClosed
	}
	s.l = l
	s.wg.Add(1) // the accept loop itself: Close waits for it
	s.mu.Unlock()
	defer s.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrClosed
			}
			return err
		}
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			c.Close()
			return ErrClosed
		case len(s.conns) >= MaxClients:
			s.mu.Unlock()
			s.refuse(c)
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// refusing bounds the goroutines that turn away connections over MaxClients.
var refusing = make(chan struct{}, MaxClients)

// refuse answers a connection over MaxClients with a busy error after its first request, so
// the client reads the reply to what it sent (a reply written and the connection closed
// before the request arrives would reach it as a broken pipe). The wait is short and the
// refusals in progress bounded; past the bound the connection is just closed.
func (s *Server) refuse(c net.Conn) {
	select {
	case refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-refusing }()
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		r := bufio.NewReaderSize(io.LimitReader(c, MaxRequest), 4096)
		for {
			if _, prefix, err := r.ReadLine(); err != nil || !prefix {
				break
			}
		}
		writeResponse(c, Response{Error: Errorf(CodeBusy, "%d clients connected, at most %d", MaxClients, MaxClients)})
	}()
}

// Close stops the server: no new connections, every connection closed, and it returns when
// their goroutines have (a running handler finishes first). The socket file Listen made is
// removed. Safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	var err error
	if s.l != nil {
		err = s.l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	path := s.path
	s.mu.Unlock()
	s.wg.Wait()
	if path != "" {
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}

func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReaderSize(c, 4096)
	for {
		line, err := readLine(r, MaxRequest)
		if errors.Is(err, errLineTooLong) {
			writeResponse(c, Response{Error: Errorf(CodeTooLarge, "request longer than %d bytes", MaxRequest)})
			return
		}
		if err != nil {
			return // EOF, or Close closed the connection
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if writeResponse(c, s.call(line)) != nil {
			return
		}
	}
}

// call decodes and runs one request; it never panics the server: a handler's panic is its
// request's error.
func (s *Server) call(line []byte) (resp Response) {
	req, rerr := decodeRequest(line)
	if rerr != nil {
		return Response{Error: rerr}
	}
	s.mu.Lock()
	fn, ok := s.handlers[req.Cmd]
	closed := s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return Response{Error: Errorf(CodeShutdown, "the server is closing")}
	case !ok:
		return Response{Error: Errorf(CodeUnknownCommand, "no command %q (try \"help\")", req.Cmd)}
	}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("control command panicked", "cmd", req.Cmd, "panic", p)
			resp = Response{Error: Errorf(CodeFailed, "command %q panicked: %v", req.Cmd, p)}
		}
	}()
	v, err := fn(req.Args)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			return Response{Error: ce}
		}
		return Response{Error: Errorf(CodeFailed, "%v", err)}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Response{Error: Errorf(CodeFailed, "result of %q: %v", req.Cmd, err)}
	}
	return Response{Result: b}
}

func writeResponse(w io.Writer, r Response) error {
	b, err := json.Marshal(r)
	if err != nil {
		b, _ = json.Marshal(Response{Error: Errorf(CodeFailed, "response: %v", err)})
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

var errLineTooLong = errors.New("control: line too long")

// readLine reads up to and without the next newline, at most max bytes with it.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > max {
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}
