package vfiousertest

import (
	"encoding/binary"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/vfiouser"
)

// SetIRQs sends one DEVICE_SET_IRQS exactly as given (Argsz 0 is filled in). fds stay owned by
// the caller.
func (c *Client) SetIRQs(req vfiouser.IRQSetMsg, fds []int) error {
	if req.Argsz == 0 {
		req.Argsz = uint32(vfiouser.IRQSetHeadSize + len(req.Data))
	}
	return c.simple(vfiouser.CmdDeviceSetIRQs, fds, req.Append(nil))
}

// NewEventFD makes a non-blocking eventfd owned by the caller.
func NewEventFD() (int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, fmt.Errorf("eventfd: %w", err)
	}
	return fd, nil
}

// EnableMSIX assigns n fresh eventfds to MSI-X vectors 0..n-1, in messages of at most the
// server's max_msg_fds like QEMU. The eventfds belong to the client (closed by Close).
func (c *Client) EnableMSIX(n int) ([]int, error) {
	return c.EnableIRQs(vfiouser.IRQIndexMSIX, n)
}

// EnableIRQs assigns n fresh eventfds to vectors 0..n-1 of an IRQ index.
func (c *Client) EnableIRQs(index uint32, n int) ([]int, error) {
	fds := make([]int, 0, n)
	for range n {
		fd, err := NewEventFD()
		if err != nil {
			closeAll(fds)
			return nil, err
		}
		fds = append(fds, fd)
	}
	step := c.serverMaxFDs()
	for start := 0; start < n; start += step {
		chunk := fds[start:min(start+step, n)]
		req := vfiouser.IRQSetMsg{
			Flags: vfiouser.IRQSetDataEventfd | vfiouser.IRQSetActionTrigger,
			Index: index, Start: uint32(start), Count: uint32(len(chunk)),
		}
		if err := c.SetIRQs(req, chunk); err != nil {
			closeAll(fds)
			return nil, err
		}
	}
	c.mu.Lock()
	c.eventfds = append(c.eventfds, fds...)
	c.mu.Unlock()
	return fds, nil
}

// DisableIRQs sends QEMU's "DATA_NONE|TRIGGER, count 0" that turns a whole index off.
func (c *Client) DisableIRQs(index uint32) error {
	return c.SetIRQs(vfiouser.IRQSetMsg{
		Flags: vfiouser.IRQSetDataNone | vfiouser.IRQSetActionTrigger, Index: index,
	}, nil)
}

// WaitIRQ waits until the eventfd is signalled and returns (and clears) its counter.
func WaitIRQ(fd int, timeout time.Duration) (uint64, error) {
	deadline := time.Now().Add(timeout)
	for {
		var buf [8]byte
		n, err := unix.Read(fd, buf[:])
		if err == nil && n == 8 {
			return binary.NativeEndian.Uint64(buf[:]), nil
		}
		if err != nil && err != unix.EAGAIN && err != unix.EINTR {
			return 0, fmt.Errorf("eventfd read: %w", err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return 0, ErrTimeout
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, int(left.Milliseconds())+1); err != nil && err != unix.EINTR {
			return 0, fmt.Errorf("poll: %w", err)
		}
	}
}
