package vfiouser_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

const waitLong = 5 * time.Second

// newPair returns a test device served to a negotiated client.
func newPair(t *testing.T, opts ...vfiousertest.PairOption) (*testDevice, *vfiousertest.Client) {
	t.Helper()
	dev := newTestDevice(t)
	return dev, vfiousertest.NewPair(t, dev, opts...)
}

// waitPeer waits for Connected (it runs on the worker just after the VERSION reply is sent).
func waitPeer(t *testing.T, dev *testDevice) vfiouser.Peer {
	t.Helper()
	select {
	case p := <-dev.connectedCh:
		return p
	case <-time.After(waitLong):
		t.Fatal("Connected not called")
	}
	return nil
}

// wantErrno checks that err is nil (want 0) or wraps want.
func wantErrno(t *testing.T, err error, want unix.Errno) {
	t.Helper()
	if want == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("unexpected error (-want +got):\n-%v\n+%v", want, err)
	}
}

// wantDisconnect waits for the server to drop the client.
func wantDisconnect(t *testing.T, c *vfiousertest.Client) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(waitLong):
		t.Fatal("server did not close the connection")
	}
}

// wantNoReply checks that nothing arrives for a while, then that the connection still works.
func wantNoReply(t *testing.T, c *vfiousertest.Client) {
	t.Helper()
	if m, err := c.Recv(100 * time.Millisecond); err == nil {
		t.Fatalf("unexpected reply: %+v", m.Header)
	}
	if err := c.Sync(); err != nil {
		t.Fatalf("connection broken: %v", err)
	}
}

// fdSet maps each open descriptor of the process to what it refers to.
type fdSet map[string]string

func openFDs(t testing.TB) fdSet {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	set := fdSet{}
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil { // the directory's own descriptor is gone by now
			set[e.Name()] = target
		}
	}
	return set
}

// waitFDs polls until the process has as many descriptors as before (closing may finish on
// server goroutines), and names the ones that differ when it gives up.
func waitFDs(t testing.TB, before fdSet) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		now := openFDs(t)
		if len(now) == len(before) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("unexpected fd count (-want +got): -%d +%d\nonly before: %v\nonly now: %v",
				len(before), len(now), before.minus(now), now.minus(before))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// minus lists the descriptors of s that o lacks (or that refer to something else in o).
func (s fdSet) minus(o fdSet) map[string]string {
	d := map[string]string{}
	for fd, target := range s {
		if o[fd] != target {
			d[fd] = target
		}
	}
	return d
}

// newFDs makes n eventfds and closes them at cleanup.
func newFDs(t testing.TB, n int) []int {
	t.Helper()
	fds := make([]int, n)
	for i := range fds {
		fd, err := vfiousertest.NewEventFD()
		if err != nil {
			t.Fatal(err)
		}
		fds[i] = fd
	}
	t.Cleanup(func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	return fds
}

// call sends one command and releases nothing: tests inspect the reply.
func call(c *vfiousertest.Client, cmd vfiouser.Command, payload []byte, fds ...int) (*vfiouser.Message, error) {
	return c.Call(cmd, fds, payload)
}

func u32(v uint32) []byte { return le32(nil, v) }

func le32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

func le64(b []byte, v uint64) []byte { return le32(le32(b, uint32(v)), uint32(v>>32)) }
