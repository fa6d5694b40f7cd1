package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// start serves s on a fresh socket and closes it at the test's end.
func start(t *testing.T, s *Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.ctl")
	if err := s.Start(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return path
}

func dial(t *testing.T, path string) *Client {
	t.Helper()
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func echoServer() *Server {
	s := NewServer(nil)
	s.Handle("echo", func(args json.RawMessage) (any, error) {
		var a struct{ N int }
		if err := DecodeArgs(args, &a); err != nil {
			return nil, err
		}
		return a, nil
	})
	s.Handle("fail", func(json.RawMessage) (any, error) { return nil, errors.New("it broke") })
	s.Handle("named", func(json.RawMessage) (any, error) { return nil, Errorf("no-such-queue", "queue 9") })
	s.Handle("panic", func(json.RawMessage) (any, error) { panic("boom") })
	return s
}

func TestPermissions(t *testing.T) {
	path := start(t, echoServer())
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket of 0600", fi.Mode())
	}
	// No private directory left beside it.
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want the socket only", len(ents))
	}
}

func TestListenRefuses(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("keep"), 0o644)
	if _, err := Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep" {
		t.Fatal("the file was replaced")
	}
	live := start(t, echoServer())
	if _, err := Listen(live); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("Listen over a live socket: %v", err)
	}
	// A stale socket (its server gone without removing it) is replaced.
	stale := filepath.Join(dir, "stale")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	l2, err := Listen(stale)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l2.Close()
}

func TestCalls(t *testing.T) {
	c := dial(t, start(t, echoServer()))
	for _, tc := range []struct {
		cmd  string
		args any
		want string // result JSON, or the error code
		code bool
	}{
		{cmd: "echo", args: map[string]int{"N": 7}, want: `{"N":7}`},
		{cmd: "echo", want: `{"N":0}`},
		{cmd: "echo", args: map[string]int{"M": 1}, want: CodeBadArgs, code: true},
		{cmd: "nope", want: CodeUnknownCommand, code: true},
		{cmd: "fail", want: CodeFailed, code: true},
		{cmd: "named", want: "no-such-queue", code: true},
		{cmd: "panic", want: CodeFailed, code: true},
		{cmd: "help", want: `["echo","fail","help","named","panic"]`},
	} {
		var out json.RawMessage
		err := c.Call(tc.cmd, tc.args, &out)
		if tc.code {
			var ce *Error
			if !errors.As(err, &ce) || ce.Code != tc.want {
				t.Errorf("%s: error %v, want code %s", tc.cmd, err, tc.want)
			}
			if !errors.Is(err, &Error{Code: tc.want}) {
				t.Errorf("%s: errors.Is by code fails", tc.cmd)
			}
			continue
		}
		if err != nil || string(out) != tc.want {
			t.Errorf("%s: %s, %v; want %s", tc.cmd, out, err, tc.want)
		}
	}
}

// rawCall sends one raw line and reads one response line.
func rawCall(t *testing.T, path, line string) (Response, error) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Write([]byte(line)) // an oversized request may never be read whole
	var r Response
	b, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(b, &r)
}

func TestBadRequests(t *testing.T) {
	path := start(t, echoServer())
	for _, tc := range []struct {
		name, line, code string
	}{
		{"not json", "hello\n", CodeBadRequest},
		{"no cmd", "{}\n", CodeBadRequest},
		{"unknown field", `{"cmd":"echo","x":1}` + "\n", CodeBadRequest},
		{"two values", `{"cmd":"echo"} {"cmd":"echo"}` + "\n", CodeBadRequest},
		{"long name", `{"cmd":"` + strings.Repeat("a", MaxCommandName+1) + `"}` + "\n", CodeBadRequest},
		{"oversized", `{"cmd":"echo","args":"` + strings.Repeat("a", MaxRequest) + `"}` + "\n", CodeTooLarge},
		{"oversized without newline", strings.Repeat("a", 2*MaxRequest), CodeTooLarge},
	} {
		r, err := rawCall(t, path, tc.line)
		if err != nil || r.Error == nil || r.Error.Code != tc.code {
			t.Errorf("%s: %+v %v, want code %s", tc.name, r.Error, err, tc.code)
		}
	}
	// A request of exactly MaxRequest bytes with its newline is served.
	pad := MaxRequest - len(`{"cmd":"echo","args":{"N":1}}`) - 1
	r, err := rawCall(t, path, `{"cmd":"echo","args":{"N":1}}`+strings.Repeat(" ", pad)+"\n")
	if err != nil || r.Error != nil || string(r.Result) != `{"N":1}` {
		t.Errorf("request of MaxRequest bytes: %+v %v", r, err)
	}
}

func TestConcurrentClients(t *testing.T) {
	s := NewServer(nil)
	var mu sync.Mutex
	total := 0
	s.Handle("add", func(args json.RawMessage) (any, error) {
		var n int
		if err := DecodeArgs(args, &n); err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		total += n
		return n * 2, nil
	})
	path := start(t, s)
	const clients, calls = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Dial(path)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for j := range calls {
				var got int
				if err := c.Call("add", i*calls+j, &got); err != nil || got != 2*(i*calls+j) {
					errs <- fmt.Errorf("client %d call %d: %d %v", i, j, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := clients * calls
	if want := n * (n - 1) / 2; total != want {
		t.Errorf("sum %d, want %d", total, want)
	}
}

func TestTooManyClients(t *testing.T) {
	path := start(t, echoServer())
	var held []*Client
	for range MaxClients {
		c := dial(t, path)
		if err := c.Call("echo", nil, nil); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	c := dial(t, path)
	if err := c.Call("echo", nil, nil); !errors.Is(err, &Error{Code: CodeBusy}) {
		t.Fatalf("client %d: %v, want %s", MaxClients+1, err, CodeBusy)
	}
	held[0].Close()
	// The slot frees once the server sees the close.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dial(t, path)
		err := c.Call("echo", nil, nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot never freed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestShutdownWithClientConnected(t *testing.T) {
	s := echoServer()
	release := make(chan struct{})
	entered := make(chan struct{})
	s.Handle("slow", func(json.RawMessage) (any, error) {
		close(entered)
		<-release
		return "done", nil
	})
	path := filepath.Join(t.TempDir(), "c.ctl")
	served := make(chan error, 1)
	go func() { served <- s.ListenAndServe(path) }()
	var idle *Client
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c, err := Dial(path)
		if err == nil {
			idle = c
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	defer idle.Close()
	if err := idle.Call("echo", nil, nil); err != nil {
		t.Fatal(err)
	}
	busy := dial(t, path)
	slow := make(chan error, 1)
	var got string
	go func() { slow <- busy.Call("slow", nil, &got) }()
	<-entered

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a handler was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-served; !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve returned %v, want ErrClosed", err)
	}
	// The idle client sees its connection closed; the socket file is gone.
	if err := idle.Call("echo", nil, nil); err == nil {
		t.Fatal("call after Close succeeded")
	}
	<-slow // the slow call's reply may or may not have been written before the close
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestHandleRegistration(t *testing.T) {
	s := NewServer(nil)
	for _, tc := range []struct {
		name string
		fn   Handler
	}{
		{"help", func(json.RawMessage) (any, error) { return nil, nil }}, // built in
		{"", func(json.RawMessage) (any, error) { return nil, nil }},
		{strings.Repeat("x", MaxCommandName+1), func(json.RawMessage) (any, error) { return nil, nil }},
		{"nil", nil},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handle(%.10q) did not panic", tc.name)
				}
			}()
			s.Handle(tc.name, tc.fn)
		}()
	}
}
