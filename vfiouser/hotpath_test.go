package vfiouser

import (
	"encoding/binary"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// regDevice is the least a Device can be: one 4 KiB trapped region of registers.
type regDevice struct{ regs [4096]byte }

func (d *regDevice) Info() DeviceInfo {
	return DeviceInfo{Flags: DeviceFlagPCI, Regions: []RegionInfo{{Flags: RegionFlagRead | RegionFlagWrite, Size: 4096}}}
}
func (d *regDevice) RegionRead(_ uint32, off uint64, p []byte) error {
	copy(p, d.regs[off:])
	return nil
}
func (d *regDevice) RegionWrite(_ uint32, off uint64, p []byte) error {
	copy(d.regs[off:], p)
	return nil
}
func (d *regDevice) DMAMap(DMAMapping) error             { return nil }
func (d *regDevice) DMAUnmap(uint64, uint64, bool) error { return nil }
func (d *regDevice) SetIRQs(SetIRQs) error               { return nil }
func (d *regDevice) Reset() error                        { return nil }
func (d *regDevice) Connected(Peer)                      {}
func (d *regDevice) Disconnected()                       {}

// rawPair is a socketpair: the server end as a *net.UnixConn, the client end as a raw fd.
func rawPair(tb testing.TB) (*net.UnixConn, int) {
	tb.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "server")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(fds[1]) })
	return c.(*net.UnixConn), fds[1]
}

func readRequest(id uint16, off uint64) []byte {
	req := Header{ID: id, Cmd: CmdRegionRead, Size: HeaderSize + RegionAccessSize}.Append(nil)
	return RegionAccess{Offset: off, Count: 4}.Append(req)
}

// BenchmarkHotPath is the server's own cost for a trapped 4-byte REGION_READ without any
// scheduling in the way: one goroutine writes the request into a socketpair, has the session
// read, execute and answer it exactly as its read loop does, and reads the reply. Beside it, in
// alternating batches, the same four system calls done bare (write; recvmsg with room for
// descriptors; sendmsg of header and payload; read). over-ns is the difference: the server's
// code, its locks and the runtime's system call bookkeeping per message.
func BenchmarkHotPath(b *testing.B) {
	dev := &regDevice{}
	binary.LittleEndian.PutUint32(dev.regs[0x40:], 0x55504756)
	srv := NewServer(dev, slog.New(slog.DiscardHandler))
	sc, cfd := rawPair(b)
	ss, err := newSession(srv, sc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ss.conn.Close() })
	ss.negotiated, ss.connected, ss.info = true, true, dev.Info() // as after VERSION
	req, reply := readRequest(7, 0x40), make([]byte, 64)
	m := new(Message)
	session := func() {
		if _, err := unix.Write(cfd, req); err != nil {
			b.Fatal(err)
		}
		if err := ss.conn.ReadMessage(m); err != nil {
			b.Fatal(err)
		}
		if !ss.startExec(m) || !ss.execLoop(m) {
			b.Fatal("the session gave up a role it should keep")
		}
		if n, err := unix.Read(cfd, reply); err != nil || n != 36 || binary.LittleEndian.Uint32(reply[32:]) != 0x55504756 {
			b.Fatalf("reply of %d bytes (%v): % x", n, err, reply[:n])
		}
	}

	// Raw descriptors: a socket registered with the runtime's poller would wake it on every
	// message, which the session's blocking socket does not do either.
	bfds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(bfds[0]); unix.Close(bfds[1]) })
	bfd, bc := bfds[0], bfds[1]
	rbuf, oob, out := make([]byte, readBufSize), make([]byte, unix.CmsgSpace(MaxMsgFDs*4)), make([]byte, 36)
	copy(out, req)
	var rmsg, wmsg unix.Msghdr
	var riov unix.Iovec
	var wiov [2]unix.Iovec
	bare := func() {
		if _, err := unix.Write(bc, req); err != nil {
			b.Fatal(err)
		}
		riov.Base, riov.Len = &rbuf[0], uint64(len(rbuf))
		rmsg.Iov, rmsg.Iovlen, rmsg.Control, rmsg.Controllen = &riov, 1, &oob[0], uint64(len(oob))
		if n, _, e := unix.RawSyscall(unix.SYS_RECVMSG, uintptr(bfd), uintptr(unsafe.Pointer(&rmsg)), unix.MSG_CMSG_CLOEXEC); e != 0 || n != uintptr(len(req)) {
			b.Fatalf("recvmsg: %d %v", n, e)
		}
		wiov[0].Base, wiov[0].Len = &out[0], HeaderSize
		wiov[1].Base, wiov[1].Len = &out[HeaderSize], uint64(len(out)-HeaderSize)
		wmsg.Iov, wmsg.Iovlen = &wiov[0], 2
		if _, _, e := unix.RawSyscall(unix.SYS_SENDMSG, uintptr(bfd), uintptr(unsafe.Pointer(&wmsg)), unix.MSG_NOSIGNAL); e != 0 {
			b.Fatal(e)
		}
		if n, err := unix.Read(bc, reply); err != nil || n != 36 {
			b.Fatalf("reply of %d bytes (%v)", n, err)
		}
	}

	// Both are timed in CPU time of this thread, not wall time (on a loaded machine the wall
	// clock mostly measures other processes), in alternating batches whose medians are
	// reported: a batch that other processes' cache traffic slowed down does not move them.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const batch = 200
	var sessions, bares, overs []float64
	rounds := 0
	b.ReportAllocs()
	for b.Loop() {
		rounds++
		if rounds%batch != 0 {
			continue
		}
		start := threadCPU(b)
		for range batch {
			bare()
		}
		mid := threadCPU(b)
		for range batch {
			session()
		}
		end := threadCPU(b)
		sessions = append(sessions, float64(end-mid)/batch)
		bares = append(bares, float64(mid-start)/batch)
		overs = append(overs, float64(end-mid-(mid-start))/batch)
	}
	if len(overs) > 0 {
		b.ReportMetric(median(sessions), "session-ns")
		b.ReportMetric(median(bares), "bare-ns")
		b.ReportMetric(median(overs), "over-ns")
	}
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// threadCPU is the CPU time the calling thread has run. CLOCK_THREAD_CPUTIME_ID brings a
// running thread's figure up to date when read (schedstat would lag by up to a tick).
func threadCPU(tb testing.TB) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ts.Nano())
}
