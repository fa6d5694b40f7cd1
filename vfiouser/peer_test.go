package vfiouser_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

// guestMem maps fresh guest memory at iova and returns it.
func guestMem(t *testing.T, c *vfiousertest.Client, iova uint64, size int, opt vfiousertest.MapOptions) *vfiousertest.GuestMemory {
	t.Helper()
	mem, err := vfiousertest.NewGuestMemory(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() }) // after the pair's cleanup (registered earlier) has run
	if err := c.DMAMap(iova, mem, 0, uint64(size), opt); err != nil {
		t.Fatal(err)
	}
	return mem
}

// TestPeerDMA moves data through DMA_READ/DMA_WRITE messages while the client keeps sending
// its own commands: replies on both sides must be matched to the right requests.
func TestPeerDMA(t *testing.T) {
	tests := []struct {
		name    string
		maxXfer uint64 // what the client advertises; 0 = QEMU's 1 MiB
		size    int
		wantMsg uint64 // DMA messages per direction
	}{
		{"qemu caps", 0, 2<<20 + 100, 3},
		{"4 KiB transfers", 4096, 10000, 3},
		{"small", 0, 4, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev, c := newPair(t, vfiousertest.SkipNegotiate())
			v := vfiouser.VersionMsg{JSON: []byte(vfiousertest.QEMUVersionJSON)}
			if tt.maxXfer != 0 {
				v.JSON = fmt.Appendf(nil, `{"capabilities":{"max_msg_fds":16,"max_data_xfer_size":%d}}`, tt.maxXfer)
			}
			if _, err := c.NegotiateWith(v); err != nil {
				t.Fatal(err)
			}
			peer := waitPeer(t, dev)
			const iova = 0x10_0000
			mem := guestMem(t, c, iova, 4<<20, vfiousertest.MapOptions{NoFD: true})

			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // client commands interleaved with the server's requests
				defer wg.Done()
				buf := make([]byte, 4)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := c.Read(regTrap, 0, buf); err != nil {
						t.Error(err)
						return
					}
				}
			}()

			want := make([]byte, tt.size)
			for i := range want {
				want[i] = byte(i*31 + 7)
			}
			wantErrno(t, peer.DMAWrite(iova+10, want), 0)
			if !bytes.Equal(mem.Bytes()[10:10+tt.size], want) {
				t.Fatal("guest memory differs from the DMA write")
			}
			got := make([]byte, tt.size)
			wantErrno(t, peer.DMARead(iova+10, got), 0)
			if !bytes.Equal(got, want) {
				t.Fatal("DMA read differs from guest memory")
			}
			close(stop)
			wg.Wait()
			if r, w := c.DMAStats(); r != tt.wantMsg || w != tt.wantMsg {
				t.Fatalf("unexpected DMA message counts (-want +got): -%d/%d +%d/%d", tt.wantMsg, tt.wantMsg, r, w)
			}
		})
	}
}

// TestPeerDMAConcurrent runs several engines' requests at once.
func TestPeerDMAConcurrent(t *testing.T) {
	dev, c := newPair(t)
	peer := waitPeer(t, dev)
	mem := guestMem(t, c, 0, 1<<20, vfiousertest.MapOptions{NoFD: true})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base := uint64(g) * 4096
			for i := range 50 {
				want := []byte(fmt.Sprintf("engine %d write %d", g, i))
				if err := peer.DMAWrite(base, want); err != nil {
					t.Error(err)
					return
				}
				got := make([]byte, len(want))
				if err := peer.DMARead(base, got); err != nil || !bytes.Equal(got, want) {
					t.Errorf("engine %d: read %q, %v; want %q", g, got, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	_ = mem
}

func TestPeerDMAErrors(t *testing.T) {
	dev, c := newPair(t)
	peer := waitPeer(t, dev)
	guestMem(t, c, 0x1000, 0x1000, vfiousertest.MapOptions{NoFD: true, ReadOnly: true})
	b := make([]byte, 16)
	wantErrno(t, peer.DMARead(0x9000, b), unix.ENODEV)  // unmapped
	wantErrno(t, peer.DMARead(0x1ff8, b), unix.ENODEV)  // straddles the end of the map
	wantErrno(t, peer.DMAWrite(0x1000, b), unix.EPERM)  // read-only map
	wantErrno(t, peer.DMARead(1<<64-8, b), unix.EINVAL) // wraps: refused before sending
	wantErrno(t, peer.DMARead(0x1000, b), 0)            // still fine
	wantErrno(t, peer.DMARead(0x1000, nil), 0)          // nothing to do
	wantErrno(t, c.DMAUnmap(0x1000, 0x1000), 0)         //
	wantErrno(t, peer.DMARead(0x1000, b), unix.ENODEV)  // gone from the client's view
	if r, w := c.DMAStats(); r != 1 || w != 0 {
		t.Fatalf("unexpected served counts %d/%d", r, w)
	}
}

// TestPeerReplies answers the server's requests by hand: error replies, malformed replies,
// late replies after a timeout and replies nobody asked for.
func TestPeerReplies(t *testing.T) {
	dev, c := newPair(t,
		vfiousertest.ClientOptions(vfiousertest.WithoutDMAService()),
		vfiousertest.ServerOptions(vfiouser.WithPeerTimeout(200*time.Millisecond)))
	peer := waitPeer(t, dev)

	start := func(read bool) chan error {
		done := make(chan error, 1)
		go func() {
			b := make([]byte, 8)
			if read {
				done <- peer.DMARead(0x2000, b)
			} else {
				done <- peer.DMAWrite(0x2000, b)
			}
		}()
		return done
	}
	next := func() *vfiouser.Message {
		t.Helper()
		m, err := c.Recv(waitLong)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	// Error reply → the errno.
	done := start(true)
	req := next()
	if req.Cmd != vfiouser.CmdDMARead || req.IsReply() || !bytes.Equal(req.Payload, le64(le64(nil, 0x2000), 8)) {
		t.Fatalf("unexpected request %+v %x", req.Header, req.Payload)
	}
	c.Reply(req, unix.EFAULT, nil)
	wantErrno(t, <-done, unix.EFAULT)

	// Reply with the wrong count → EIO.
	done = start(true)
	req = next()
	c.Reply(req, 0, le64(le64(nil, 0x2000), 4))
	wantErrno(t, <-done, unix.EIO)

	// Good DMA_WRITE reply.
	done = start(false)
	req = next()
	if req.Cmd != vfiouser.CmdDMAWrite || len(req.Payload) != 24 {
		t.Fatalf("unexpected request %+v", req.Header)
	}
	c.Reply(req, 0, req.Payload[:16])
	wantErrno(t, <-done, 0)

	// No reply → timeout; the late reply is dropped and the connection lives on.
	done = start(true)
	req = next()
	if err := <-done; !errors.Is(err, vfiouser.ErrTimeout) {
		t.Fatalf("unexpected error (-want +got):\n-%v\n+%v", vfiouser.ErrTimeout, err)
	}
	c.Reply(req, 0, append(le64(le64(nil, 0x2000), 8), make([]byte, 8)...))
	// A reply to nothing at all, with an fd that must be closed.
	fds := newFDs(t, 1)
	before := openFDs(t)
	c.Send(vfiouser.Header{ID: 0xbeef, Cmd: vfiouser.CmdDMARead, Flags: vfiouser.FlagTypeReply | vfiouser.FlagError, Error: 5}, nil, fds)
	if err := c.Sync(); err != nil {
		t.Fatalf("connection broken by stray replies: %v", err)
	}
	waitFDs(t, before)
}

// TestPeerDisconnect checks that a pending request fails at once when the client goes away,
// and that the Peer stays dead afterwards.
func TestPeerDisconnect(t *testing.T) {
	dev, c := newPair(t, vfiousertest.ClientOptions(vfiousertest.WithoutDMAService()))
	peer := waitPeer(t, dev)
	done := make(chan error, 1)
	go func() { done <- peer.DMARead(0, make([]byte, 8)) }()
	if _, err := c.Recv(waitLong); err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, vfiouser.ErrDisconnected) {
			t.Fatalf("unexpected error (-want +got):\n-%v\n+%v", vfiouser.ErrDisconnected, err)
		}
	case <-time.After(waitLong):
		t.Fatal("pending DMA request not failed on disconnect")
	}
	if err := peer.DMAWrite(0, []byte{1}); !errors.Is(err, vfiouser.ErrDisconnected) {
		t.Fatalf("Peer after disconnect: %v", err)
	}
	select {
	case <-dev.disconnectCh:
	case <-time.After(waitLong):
		t.Fatal("Disconnected not called")
	}
}

// TestExecutorWaitsOnPeer covers a Device call that cannot finish before a DMA reply arrives
// (an unmap waiting for an engine's in-flight message DMA, or, against the contract, a Device
// method calling the Peer itself). The reply must still be read: the reader role moves to a
// helper goroutine while the command executes.
func TestExecutorWaitsOnPeer(t *testing.T) {
	for _, tt := range []struct {
		name     string
		inDevice bool // the DMA starts inside DMAUnmap rather than before the command
	}{{"in flight before", false}, {"started inside", true}} {
		t.Run(tt.name, func(t *testing.T) {
			dev, c := newPair(t, vfiousertest.ClientOptions(vfiousertest.WithoutDMAService()))
			peer := waitPeer(t, dev)
			var engineErr error
			engineDone := make(chan struct{})
			engine := func() {
				engineErr = peer.DMARead(0x3000, make([]byte, 8))
				close(engineDone)
			}
			dev.mu.Lock()
			dev.unmapHook = func() {
				if tt.inDevice {
					engine()
				}
				<-engineDone // the unmap waits for the DMA to finish
			}
			dev.mu.Unlock()
			recvReq := func() *vfiouser.Message {
				req, err := c.Recv(waitLong)
				if err != nil {
					t.Fatal(err)
				}
				if req.Cmd != vfiouser.CmdDMARead {
					t.Fatalf("unexpected message %+v", req.Header)
				}
				return req
			}
			reply := append(le64(le64(nil, 0x3000), 8), make([]byte, 8)...)

			var req *vfiouser.Message
			if !tt.inDevice {
				go engine()
				req = recvReq() // pending before the command starts
			}
			id := c.NextID()
			if err := c.Send(vfiouser.Header{ID: id, Cmd: vfiouser.CmdDMAUnmap}, dmaUnmapPayload(24, 0, 0x3000, 0x1000), nil); err != nil {
				t.Fatal(err)
			}
			if tt.inDevice {
				req = recvReq() // sent from inside the command
			} else {
				time.Sleep(20 * time.Millisecond) // let the executor block in DMAUnmap
			}
			c.Reply(req, 0, reply)
			m, err := c.Recv(waitLong)
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != id || m.IsError() {
				t.Fatalf("unexpected unmap reply %+v", m.Header)
			}
			<-engineDone
			wantErrno(t, engineErr, 0)
		})
	}
}
