package vfiouser_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"vgpu/vfiouser/vfiousertest"
)

func benchPair(b *testing.B) *vfiousertest.Client {
	dev := newTestDevice(b)
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
