package vfiouser_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

func benchPair(b *testing.B) *vfiousertest.Client {
	dev := newTestDevice(b)
	dev.quiet = true
	return vfiousertest.NewPair(b, dev, vfiousertest.WithLogger(slog.New(slog.DiscardHandler)))
}

// BenchmarkRegionRead is one 4-byte trapped REGION_READ round trip through the Go client:
// the cost of every guest MMIO read that is not mmapped.
func BenchmarkRegionRead(b *testing.B) {
	c := benchPair(b)
	buf := make([]byte, 4)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Read(regTrap, 0, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegionReadBackgroundReader is the same with the client's background reader running
// (as after a DMAMap): every reply is handed from that reader to the waiting caller, the way
// QEMU's iothread hands replies to a vCPU thread.
func BenchmarkRegionReadBackgroundReader(b *testing.B) {
	dev := newTestDevice(b)
	c := vfiousertest.NewPair(b, dev, vfiousertest.WithLogger(slog.New(slog.DiscardHandler)),
		vfiousertest.ClientOptions(vfiousertest.WithBackgroundReader()))
	buf := make([]byte, 4)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Read(regTrap, 0, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPostedWrite is QEMU's posted MMIO write: a 4-byte REGION_WRITE with NO_REPLY. The
// client does not wait, so this is the server's throughput for them (the socket buffer
// throttles the client to it); one round trip at the end makes sure all of them ran.
func BenchmarkPostedWrite(b *testing.B) {
	c := benchPair(b)
	buf := make([]byte, 4)
	var i uint32
	b.ReportAllocs()
	for b.Loop() {
		i++
		binary.LittleEndian.PutUint32(buf, i)
		if err := c.PostWrite(regTrap, 8, buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Read(regTrap, 8, buf); err != nil {
		b.Fatal(err)
	}
	if got := binary.LittleEndian.Uint32(buf); got != i {
		b.Fatalf("register reads %d after %d posted writes", got, i)
	}
}

// BenchmarkPeerDMA is the server's DMA_READ and DMA_WRITE of guest memory the client shared
// without an fd: one request and its reply per transfer, the way an engine reaches such memory.
func BenchmarkPeerDMA(b *testing.B) {
	for _, size := range []int{64, 4096, 64 << 10} {
		for _, write := range []bool{false, true} {
			name := fmt.Sprintf("read/%d", size)
			if write {
				name = fmt.Sprintf("write/%d", size)
			}
			b.Run(name, func(b *testing.B) { benchPeerDMA(b, size, write) })
		}
	}
}

func benchPeerDMA(b *testing.B, size int, write bool) {
	dev := newTestDevice(b)
	dev.quiet = true
	c := vfiousertest.NewPair(b, dev, vfiousertest.WithLogger(slog.New(slog.DiscardHandler)))
	var peer vfiouser.Peer
	select {
	case peer = <-dev.connectedCh:
	case <-time.After(waitLong):
		b.Fatal("Connected not called")
	}
	const iova = 0x10_0000
	mem, err := vfiousertest.NewGuestMemory(1 << 20)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mem.Close() })
	if err := c.DMAMap(iova, mem, 0, 1<<20, vfiousertest.MapOptions{NoFD: true}); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i*13 + 1)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if write {
			err = peer.DMAWrite(iova, buf)
		} else {
			err = peer.DMARead(iova, buf)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if write && !bytes.Equal(mem.Bytes()[:size], buf) {
		b.Fatal("guest memory differs from what was DMA-written")
	}
	if !write && !bytes.Equal(buf, mem.Bytes()[:size]) {
		b.Fatal("DMA read differs from guest memory")
	}
}

// BenchmarkUnixEcho is the floor: a 16-byte request and a 16-byte answer over a socketpair,
// with an echo goroutine on the other end.
func BenchmarkUnixEcho(b *testing.B) {
	ping := startEcho(b)
	b.ReportAllocs()
	for b.Loop() {
		ping()
	}
}

// BenchmarkRegionReadVsEcho measures both in alternating batches (so machine noise hits both
// alike) and reports how many echo round trips one REGION_READ costs.
func BenchmarkRegionReadVsEcho(b *testing.B) {
	c := benchPair(b)
	ping := startEcho(b)
	buf := make([]byte, 4)
	const batch = 1000
	var tRead, tEcho time.Duration
	n := 0
	for b.Loop() {
		n++
		if n%batch != 0 {
			continue
		}
		start := time.Now()
		for range batch {
			ping()
		}
		tEcho += time.Since(start)
		start = time.Now()
		for range batch {
			if err := c.Read(regTrap, 0, buf); err != nil {
				b.Fatal(err)
			}
		}
		tRead += time.Since(start)
	}
	if tEcho > 0 {
		b.ReportMetric(float64(tRead)/float64(tEcho), "read/echo")
		rounds := float64(n / batch * batch)
		b.ReportMetric(float64(tRead.Nanoseconds())/rounds, "read-ns")
		b.ReportMetric(float64(tEcho.Nanoseconds())/rounds, "echo-ns")
	}
}

// startEcho starts an echo goroutine on one end of a socketpair and returns one round trip
// on the other end.
func startEcho(b *testing.B) func() {
	a, e, err := vfiousertest.Socketpair()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close(); e.Close() })
	go func() {
		buf := make([]byte, 16)
		for {
			if _, err := io.ReadFull(e, buf); err != nil {
				return
			}
			if _, err := e.Write(buf); err != nil {
				return
			}
		}
	}()
	req, resp := make([]byte, 16), make([]byte, 16)
	return func() {
		if _, err := a.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(a, resp); err != nil {
			b.Fatal(err)
		}
	}
}
