package control

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"
)

// Client is one connection to a control socket. Calls are serialised on it.
type Client struct {
	mu sync.Mutex
	c  net.Conn
	r  *bufio.Reader
}

// DialTimeout bounds connecting to the socket.
const DialTimeout = 5 * time.Second

// Dial connects to the control socket at path.
func Dial(path string) (*Client, error) {
	c, err := net.DialTimeout("unix", path, DialTimeout)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	return &Client{c: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// Call runs cmd with args (marshalled as JSON; nil for none) and decodes the result into out
// (nil: discard). A failed command is an *Error with the server's code.
func (c *Client) Call(cmd string, args, out any) error {
	req := Request{Cmd: cmd}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return fmt.Errorf("control: arguments of %q: %w", cmd, err)
		}
		req.Args = b
	}
	line, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.c.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("control: sending %q: %w", cmd, err)
	}
	reply, err := readLine(c.r, MaxResponse)
	if err != nil {
		return fmt.Errorf("control: reply to %q: %w", cmd, err)
	}
	var resp Response
	if err := json.Unmarshal(reply, &resp); err != nil {
		return fmt.Errorf("control: reply to %q: %w", cmd, err)
	}
	if resp.Error != nil {
		return resp.Error
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Result, out); err != nil {
		return fmt.Errorf("control: result of %q: %w", cmd, err)
	}
	return nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.c.Close() }
