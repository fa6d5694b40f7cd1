package vfiouser_test

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

// connPair returns a blocking Conn (the server's kind) and a poller Conn (the client's) on the
// two ends of a socketpair.
func connPair(t *testing.T) (blocking, polled *vfiouser.Conn) {
	t.Helper()
	a, b, err := vfiousertest.Socketpair()
	if err != nil {
		t.Fatal(err)
	}
	if blocking, err = vfiouser.NewBlockingConn(a); err != nil {
		t.Fatal(err)
	}
	if polled, err = vfiouser.NewConn(b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blocking.Close(); polled.Close() })
	return blocking, polled
}

// TestConnMessages sends messages of every shape both ways between a blocking and a poller
// Conn: small ones (one send(2)), ones with descriptors and big ones (sendmsg, split writes,
// reads straight into the payload); each must arrive whole, with its descriptors.
func TestConnMessages(t *testing.T) {
	big := make([]byte, vfiouser.MaxDataXferSize) // beyond the read buffer and the socket buffer
	for i := range big {
		big[i] = byte(i * 7)
	}
	tests := []struct {
		name  string
		parts [][]byte
		nfds  int
	}{
		{"header only", nil, 0},
		{"register reply", [][]byte{make([]byte, 16), {1, 2, 3, 4}}, 0},
		{"largest copied", [][]byte{bytes.Repeat([]byte{9}, 256-16)}, 0},
		{"just beyond", [][]byte{bytes.Repeat([]byte{8}, 256-15)}, 0},
		{"small with fds", [][]byte{{5, 6}}, 2},
		{"two parts", [][]byte{{1}, bytes.Repeat([]byte{2}, 300)}, 0},
		{"big", [][]byte{big[:16], big[16:]}, 1},
	}
	blocking, polled := connPair(t)
	for _, dir := range []struct {
		name     string
		from, to *vfiouser.Conn
	}{{"blocking to polled", blocking, polled}, {"polled to blocking", polled, blocking}} {
		for i, tt := range tests {
			t.Run(dir.name+"/"+tt.name, func(t *testing.T) {
				fds := newFDs(t, tt.nfds)
				want := bytes.Join(tt.parts, nil)
				h := vfiouser.Header{ID: uint16(i), Cmd: vfiouser.CmdRegionRead, Flags: vfiouser.FlagTypeReply}
				sent := make(chan error, 1)
				go func() { sent <- dir.from.WriteMessage(h, fds, tt.parts...) }()
				var m vfiouser.Message
				if err := dir.to.ReadMessage(&m); err != nil {
					t.Fatal(err)
				}
				defer m.CloseFDs()
				if err := <-sent; err != nil {
					t.Fatal(err)
				}
				h.Size = uint32(vfiouser.HeaderSize + len(want))
				if m.Header != h || !bytes.Equal(m.Payload, want) || len(m.FDs) != tt.nfds {
					t.Fatalf("unexpected message (-want +got):\n-%+v %d bytes %d fds\n+%+v %d bytes %d fds",
						h, len(want), tt.nfds, m.Header, len(m.Payload), len(m.FDs))
				}
			})
		}
	}
}

// TestBlockingConnClose: a read deadline times a read out; Close wakes a reader blocked in
// recvmsg and a writer blocked in a full socket, both with net.ErrClosed, and leaves no
// descriptor behind.
func TestBlockingConnClose(t *testing.T) {
	before := openFDs(t)
	a, b, err := vfiousertest.Socketpair()
	if err != nil {
		t.Fatal(err)
	}
	c, err := vfiouser.NewBlockingConn(a)
	if err != nil {
		t.Fatal(err)
	}
	// A read deadline is a receive timeout: the read fails with os.ErrDeadlineExceeded.
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	timedOut := make(chan error, 1)
	go func() {
		var m vfiouser.Message
		timedOut <- c.ReadMessage(&m)
	}()
	select {
	case err := <-timedOut:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("unexpected error (-want +got):\n-%v\n+%v", os.ErrDeadlineExceeded, err)
		}
	case <-time.After(waitLong):
		t.Fatal("read with a deadline still blocked")
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		var m vfiouser.Message
		read <- c.ReadMessage(&m)
	}()
	write := make(chan error, 1)
	go func() { // the peer never reads: this blocks once the socket buffer is full
		p := make([]byte, 1<<20)
		for {
			if err := c.WriteMessage(vfiouser.Header{Cmd: vfiouser.CmdDMAWrite}, nil, p); err != nil {
				write <- err
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond) // let both block
	c.Close()
	for name, ch := range map[string]chan error{"reader": read, "writer": write} {
		select {
		case err := <-ch:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("%s: unexpected error (-want +got):\n-%v\n+%v", name, net.ErrClosed, err)
			}
		case <-time.After(waitLong):
			t.Fatalf("%s still blocked after Close", name)
		}
	}
	var m vfiouser.Message
	if err := c.ReadMessage(&m); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read after Close: unexpected error (-want +got):\n-%v\n+%v", net.ErrClosed, err)
	}
	if err := c.WriteMessage(vfiouser.Header{}, nil); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after Close: unexpected error (-want +got):\n-%v\n+%v", net.ErrClosed, err)
	}
	// The peer sees the end of the stream after what was written.
	b.SetReadDeadline(time.Now().Add(waitLong))
	for buf := make([]byte, 1<<20); ; {
		if _, err := b.Read(buf); err != nil {
			break
		}
	}
	b.Close()
	waitFDs(t, before)
}
