// Package browser drives a real headless Chromium for tests: it starts Debian's chromium with
// --remote-debugging-pipe and speaks the Chrome DevTools Protocol over that pipe (the browser
// reads commands on its fd 3 and writes replies and events on its fd 4, each message one JSON
// object ended by a NUL byte). One Browser has one page: Navigate, Evaluate, Screenshot, and
// Problems (uncaught exceptions, console errors and browser log errors seen so far).
//
// Every call is bounded by its context, and Close always kills the browser's whole process
// group and removes its temporary profile. Standard library only.
package browser

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultPath is where Debian's chromium package puts the browser.
const DefaultPath = "/usr/bin/chromium"

// PathEnv names another browser binary to use instead of DefaultPath.
const PathEnv = "VGPU_CHROMIUM"

// ErrNoBrowser is Find's error when no Chromium is installed.
var ErrNoBrowser = errors.New("browser: no chromium (apt-get install chromium, or set " + PathEnv + ")")

// ErrClosed is a call's error after the browser exited or was closed.
var ErrClosed = errors.New("browser: the browser exited")

// maxMessage bounds one message from the browser (a screenshot is the largest).
const maxMessage = 64 << 20

// Find returns the browser binary: $VGPU_CHROMIUM, else DefaultPath.
func Find() (string, error) {
	p := os.Getenv(PathEnv)
	if p == "" {
		p = DefaultPath
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s", ErrNoBrowser, p)
	}
	return p, nil
}

// Options shape the browser.
type Options struct {
	Path          string // browser binary (default: Find)
	Width, Height int    // the page's viewport in CSS pixels (default 1200×700)
}

// Browser is one running headless Chromium with one page attached.
type Browser struct {
	cmd     *exec.Cmd
	toB     *os.File // our end of the browser's fd 3
	profile string
	stderr  *tailBuffer
	session string // the page's flat session id

	writeMu sync.Mutex
	mu      sync.Mutex
	nextID  int64
	waiting map[int64]chan message
	events  []message
	eventCh chan struct{} // closed and replaced when an event arrives
	done    chan struct{} // closed when the reader stops (the browser exited)
	readErr error
}

type message struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *protocolError  `json:"error,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
}

type protocolError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *protocolError) Error() string { return fmt.Sprintf("code %d: %s", e.Code, e.Message) }

// Start launches the browser, opens a blank page and attaches to it with the Page, Runtime and
// Log domains enabled and the viewport set. On any error the browser is already gone.
func Start(ctx context.Context, o Options) (b *Browser, err error) {
	if o.Path == "" {
		if o.Path, err = Find(); err != nil {
			return nil, err
		}
	}
	if o.Width <= 0 || o.Height <= 0 {
		o.Width, o.Height = 1200, 700
	}
	profile, err := os.MkdirTemp("", "vgpu-chromium-")
	if err != nil {
		return nil, err
	}
	// fd 3: the browser reads our commands; fd 4: it writes replies and events.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(profile)
		return nil, err
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		os.RemoveAll(profile)
		return nil, err
	}
	b = &Browser{toB: cmdW, profile: profile, stderr: &tailBuffer{max: 16 << 10},
		waiting: map[int64]chan message{}, eventCh: make(chan struct{}), done: make(chan struct{})}
	b.cmd = exec.Command(o.Path,
		"--headless=new", "--remote-debugging-pipe", "--no-sandbox",
		"--user-data-dir="+profile,
		"--disable-gpu", "--disable-dev-shm-usage", "--disable-extensions", "--disable-sync",
		"--disable-background-networking", "--disable-component-update", "--disable-default-apps",
		"--no-first-run", "--no-default-browser-check", "--mute-audio", "--hide-scrollbars",
		fmt.Sprintf("--window-size=%d,%d", o.Width, o.Height),
		"about:blank")
	b.cmd.ExtraFiles = []*os.File{cmdR, evW}
	b.cmd.Stdout = b.stderr
	b.cmd.Stderr = b.stderr
	// Its own process group, so Close can kill the renderer and helper processes too; and
	// killed if this process dies first.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = b.cmd.Start()
	cmdR.Close()
	evW.Close()
	if err != nil {
		evR.Close()
		cmdW.Close()
		os.RemoveAll(profile)
		return nil, fmt.Errorf("browser: start %s: %w", o.Path, err)
	}
	go b.read(evR)
	defer func() {
		if err != nil {
			b.Close()
			err = fmt.Errorf("%w\nbrowser output:\n%s", err, b.stderr.String())
			b = nil
		}
	}()

	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return b, err
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		return b, err
	}
	b.session = att.SessionID
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		if err := b.Call(ctx, m, nil, nil); err != nil {
			return b, err
		}
	}
	if err := b.Call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": o.Width, "height": o.Height, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return b, err
	}
	return b, nil
}

// read delivers the browser's messages until its fd 4 closes.
func (b *Browser) read(r *os.File) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<16)
	var err error
	for {
		var raw []byte
		raw, err = readMessage(br)
		if err != nil {
			break
		}
		var m message
		if err = json.Unmarshal(raw, &m); err != nil {
			err = fmt.Errorf("browser: bad message %.200q: %w", raw, err)
			break
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.waiting[m.ID]; ok {
				delete(b.waiting, m.ID)
				ch <- m // buffered
			}
		} else if m.Method != "" {
			b.events = append(b.events, m)
			close(b.eventCh)
			b.eventCh = make(chan struct{})
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	b.readErr = err
	b.mu.Unlock()
	close(b.done)
}

// readMessage reads one NUL-terminated message of at most maxMessage bytes.
func readMessage(br *bufio.Reader) ([]byte, error) {
	var msg []byte
	for {
		chunk, err := br.ReadSlice(0)
		msg = append(msg, chunk...)
		if len(msg) > maxMessage {
			return nil, fmt.Errorf("browser: message over %d bytes", maxMessage)
		}
		if err == nil {
			return msg[:len(msg)-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// Call sends a command to the page and decodes its result into result (nil: ignore it).
func (b *Browser) Call(ctx context.Context, method string, params, result any) error {
	return b.call(ctx, b.session, method, params, result)
}

func (b *Browser) call(ctx context.Context, session, method string, params, result any) error {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan message, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.waiting, id)
		b.mu.Unlock()
	}()
	req := map[string]any{"id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	if session != "" {
		req["sessionId"] = session
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return err
	}
	b.writeMu.Lock()
	_, err = b.toB.Write(append(raw, 0))
	b.writeMu.Unlock()
	if err != nil {
		return fmt.Errorf("browser: %s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("browser: %s: %w", method, m.Error)
		}
		if result != nil {
			if err := json.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("browser: %s result: %w", method, err)
			}
		}
		return nil
	case <-b.done:
		return fmt.Errorf("browser: %s: %w", method, ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("browser: %s: %w", method, ctx.Err())
	}
}

// waitEvent waits for an event of the page named method that arrived at or after index from
// of the event list, and returns the index after it.
func (b *Browser) waitEvent(ctx context.Context, method string, from int) (int, error) {
	for {
		b.mu.Lock()
		for i := from; i < len(b.events); i++ {
			if e := b.events[i]; e.Method == method && e.SessionID == b.session {
				b.mu.Unlock()
				return i + 1, nil
			}
		}
		from = len(b.events)
		ch := b.eventCh
		b.mu.Unlock()
		select {
		case <-ch:
		case <-b.done:
			return from, fmt.Errorf("browser: waiting for %s: %w", method, ErrClosed)
		case <-ctx.Done():
			return from, fmt.Errorf("browser: waiting for %s: %w", method, ctx.Err())
		}
	}
}

// Navigate loads url in the page and waits for its load event.
func (b *Browser) Navigate(ctx context.Context, url string) error {
	b.mu.Lock()
	from := len(b.events)
	b.mu.Unlock()
	var res struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.Call(ctx, "Page.navigate", map[string]any{"url": url}, &res); err != nil {
		return err
	}
	if res.ErrorText != "" {
		return fmt.Errorf("browser: navigate to %s: %s", url, res.ErrorText)
	}
	_, err := b.waitEvent(ctx, "Page.loadEventFired", from)
	return err
}

// Evaluate runs a JavaScript expression in the page and decodes its value (JSON-serialisable)
// into out. An exception thrown by the expression is an error.
func (b *Browser) Evaluate(ctx context.Context, expr string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := b.Call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res); err != nil {
		return err
	}
	if d := res.ExceptionDetails; d != nil {
		return fmt.Errorf("browser: evaluate %.80q: %s %s", expr, d.Text, d.Exception.Description)
	}
	if out == nil {
		return nil
	}
	if len(res.Result.Value) == 0 {
		return fmt.Errorf("browser: evaluate %.80q: no value", expr)
	}
	return json.Unmarshal(res.Result.Value, out)
}

// Screenshot captures the viewport as a PNG.
func (b *Browser) Screenshot(ctx context.Context) ([]byte, error) {
	var res struct {
		Data string `json:"data"`
	}
	if err := b.Call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &res); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(res.Data)
}

// Problems lists what the page reported as going wrong so far: uncaught exceptions
// (Runtime.exceptionThrown), console.error and console.assert calls (Runtime.consoleAPICalled),
// and error entries of the browser's log (Log.entryAdded: failed loads, CSP violations ...).
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, e := range b.events {
		if e.SessionID != b.session {
			continue
		}
		switch e.Method {
		case "Runtime.exceptionThrown":
			var p struct {
				Details struct {
					Text       string `json:"text"`
					LineNumber int    `json:"lineNumber"`
					Exception  struct {
						Description string `json:"description"`
					} `json:"exception"`
				} `json:"exceptionDetails"`
			}
			json.Unmarshal(e.Params, &p)
			out = append(out, fmt.Sprintf("exception at line %d: %s %s", p.Details.LineNumber+1, p.Details.Text, p.Details.Exception.Description))
		case "Runtime.consoleAPICalled":
			var p struct {
				Type string `json:"type"`
				Args []struct {
					Value       any    `json:"value"`
					Description string `json:"description"`
				} `json:"args"`
			}
			json.Unmarshal(e.Params, &p)
			if p.Type != "error" && p.Type != "assert" {
				continue
			}
			var parts []string
			for _, a := range p.Args {
				if a.Value != nil {
					parts = append(parts, fmt.Sprint(a.Value))
				} else {
					parts = append(parts, a.Description)
				}
			}
			out = append(out, "console."+p.Type+": "+strings.Join(parts, " "))
		case "Log.entryAdded":
			var p struct {
				Entry struct {
					Level  string `json:"level"`
					Source string `json:"source"`
					Text   string `json:"text"`
					URL    string `json:"url"`
				} `json:"entry"`
			}
			json.Unmarshal(e.Params, &p)
			if p.Entry.Level == "error" {
				out = append(out, fmt.Sprintf("log (%s): %s %s", p.Entry.Source, p.Entry.Text, p.Entry.URL))
			}
		}
	}
	return out
}

// Close kills the browser's process group, waits for it (bounded) and removes its profile.
// It is safe to call more than once.
func (b *Browser) Close() error {
	if b.cmd == nil || b.cmd.Process == nil {
		return nil
	}
	pid := b.cmd.Process.Pid
	// Ask politely first: Browser.close makes Chromium exit and flush its profile.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	b.call(ctx, "", "Browser.close", nil, nil)
	cancel()
	syscall.Kill(-pid, syscall.SIGKILL) // the group: renderers and helpers too
	waited := make(chan error, 1)
	go func() { waited <- b.cmd.Wait() }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
	}
	b.toB.Close()
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
	}
	b.cmd = nil
	return os.RemoveAll(b.profile)
}

// Output is the end of the browser's own stdout and stderr (for a failure message).
func (b *Browser) Output() string { return b.stderr.String() }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if t.b.Len() > t.max {
		t.b.Next(t.b.Len() - t.max)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
