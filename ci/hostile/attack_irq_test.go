package hostile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/abi"
	"vgpu/pm4"
	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

// hostileFDs are descriptors that are not eventfds, made by the client and passed as if they
// were. full is the write end of a pipe whose buffer is full, left blocking: a server that
// writes to it without care blocks forever.
type hostileFDs struct {
	pipeR, pipeW, fullR, full, memfd, null, sock, dir int
	all                                               []int
}

func newHostileFDs() (*hostileFDs, error) {
	h := &hostileFDs{}
	var p, f [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	if err := unix.Pipe2(f[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	h.pipeR, h.pipeW, h.fullR, h.full = p[0], p[1], f[0], f[1]
	h.all = append(h.all, p[0], p[1], f[0], f[1])
	junk := make([]byte, 4096)
	for {
		if _, err := unix.Write(h.full, junk); err != nil {
			break // EAGAIN: the pipe buffer is full
		}
	}
	if err := unix.SetNonblock(h.full, false); err != nil {
		return nil, err
	}
	var err error
	if h.memfd, err = unix.MemfdCreate("not-an-eventfd", unix.MFD_CLOEXEC); err != nil {
		return nil, err
	}
	h.all = append(h.all, h.memfd)
	if h.null, err = unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		return nil, err
	}
	h.all = append(h.all, h.null)
	s, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	h.sock = s[0]
	h.all = append(h.all, s[0], s[1])
	if h.dir, err = unix.Open(os.TempDir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return nil, err
	}
	h.all = append(h.all, h.dir)
	return h, nil
}

func (h *hostileFDs) close() {
	for _, fd := range h.all {
		unix.Close(fd)
	}
}

// drainFull empties the full pipe, releasing a server blocked writing to it.
func (h *hostileFDs) drainFull() {
	buf := make([]byte, 1<<16)
	for {
		if _, err := unix.Read(h.fullR, buf); err != nil {
			return
		}
	}
}

// raiseAll raises every MSI-X vector (and a few that do not exist) with SELFTEST_IRQ, and
// one through the IH from an engine (a fence with an interrupt on slot 1).
func raiseAll(d *driver, q *queue) error {
	for v := uint32(0); v < msixCount+2; v++ {
		if err := d.setReg(abi.REG_SELFTEST_IRQ, v); err != nil {
			return fmt.Errorf("SELFTEST_IRQ %d: %w", v, err)
		}
	}
	if err := q.submit(pm4.ReleaseMem{DataSel: pm4.DataNone, IntSel: pm4.IntSend}.Encode()); err != nil {
		return fmt.Errorf("fence doorbell: %w", err)
	}
	return nil
}

// attackIRQGarbage writes garbage over the trapped MSI-X table and PBA, then sends SET_IRQS
// requests a broken or hostile QEMU could send — descriptors that are not eventfds (pipes, a
// memfd, /dev/null, a socket, a directory), nonsense flags, indexes, ranges and sizes — each
// followed by raising every interrupt, from the worker and from an engine. The server must
// answer each request and keep answering register reads; a full, blocking pipe must not wedge
// it (that case runs last: if it wedges, the pipe is drained to let the suite go on).
func attackIRQGarbage(t *testing.T, e *env) {
	d, r := e.d, e.rng
	h, err := newHostileFDs()
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	// The MSI-X page: random dwords, qwords and odd shapes; every read must be answered.
	p := &poster{d: d}
	for off := uint32(abi.REGS_MSIX_TABLE_OFFSET); off < abi.REGS_SIZE; off += 4 {
		if err := p.reg(off, garbage(r)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 300; i++ {
		off := uint64(abi.REGS_MSIX_TABLE_OFFSET + r.IntN(abi.REGS_SIZE-abi.REGS_MSIX_TABLE_OFFSET))
		n := []int{1, 2, 8, 16}[r.IntN(4)]
		if err := d.c.Write(abi.BAR_REGS, off, make([]byte, n)); err != nil && !isReply(err) {
			t.Fatalf("MSI-X page write of %d bytes at %#x: %v", n, off, err)
		}
	}
	if err := p.sync(); err != nil {
		t.Fatal(err)
	}
	for off := uint32(abi.REGS_MSIX_TABLE_OFFSET); off < abi.REGS_SIZE; off += 64 {
		if _, err := d.reg(off); err != nil {
			t.Fatalf("MSI-X page read at %#x: %v", off, err)
		}
	}

	q, err := d.startQueue(1, queueOpts{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := vfiousertest.NewEventFD()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ev)
	trigger := vfiouser.IRQSetDataEventfd | vfiouser.IRQSetActionTrigger
	type req struct {
		name  string
		m     vfiouser.IRQSetMsg
		fds   []int
		setup func() error
	}
	eventfds := func(idx, start uint32, fds ...int) vfiouser.IRQSetMsg {
		return vfiouser.IRQSetMsg{Flags: uint32(trigger), Index: idx, Start: start, Count: uint32(len(fds))}
	}
	one := func(name string, idx, start uint32, fd int) req {
		return req{name: name, m: eventfds(idx, start, fd), fds: []int{fd}}
	}
	same16 := make([]int, msixCount)
	for i := range same16 {
		same16[i] = ev
	}
	reqs := []req{
		one("pipe read end as an MSI-X eventfd", vfiouser.IRQIndexMSIX, 0, h.pipeR),
		one("pipe write end as an MSI-X eventfd", vfiouser.IRQIndexMSIX, 2, h.pipeW),
		one("memfd as an MSI-X eventfd", vfiouser.IRQIndexMSIX, 3, h.memfd),
		one("/dev/null as an MSI-X eventfd", vfiouser.IRQIndexMSIX, 4, h.null),
		one("socket as an MSI-X eventfd", vfiouser.IRQIndexMSIX, 5, h.sock),
		one("directory as an MSI-X eventfd", vfiouser.IRQIndexMSIX, 6, h.dir),
		{name: "one eventfd for every vector", m: eventfds(vfiouser.IRQIndexMSIX, 0, same16...), fds: same16},
		one("pipe as the ERR eventfd", vfiouser.IRQIndexErr, 0, h.pipeW),
		one("memfd as the REQ eventfd", vfiouser.IRQIndexReq, 0, h.memfd),
		one("pipe as the MSI eventfd (MSI is not offered)", vfiouser.IRQIndexMSI, 0, h.pipeW),
		{name: "INTx trigger a pipe, resample a pipe's read end, MSI-X off", setup: func() error {
			if err := d.c.SetIRQs(eventfds(vfiouser.IRQIndexINTx, 0, h.pipeW), []int{h.pipeW}); err != nil && !isReply(err) {
				return err
			}
			return d.cfgWrite(d.caps[0x11]+2, 2, 0) // MSI-X off: SELFTEST_IRQ asserts INTx
		}, m: vfiouser.IRQSetMsg{Flags: vfiouser.IRQSetDataEventfd | vfiouser.IRQSetActionUnmask, Index: vfiouser.IRQIndexINTx, Count: 1}, fds: []int{h.pipeR}},
		{name: "INTx resample a directory", m: vfiouser.IRQSetMsg{Flags: vfiouser.IRQSetDataEventfd | vfiouser.IRQSetActionUnmask, Index: vfiouser.IRQIndexINTx, Count: 1}, fds: []int{h.dir}},
		{name: "vectors past the table", m: vfiouser.IRQSetMsg{Flags: uint32(trigger), Index: vfiouser.IRQIndexMSIX, Start: msixCount - 1, Count: 3}, fds: []int{ev, ev, ev}},
		{name: "start+count wrapping 2^32", m: vfiouser.IRQSetMsg{Flags: vfiouser.IRQSetDataNone | vfiouser.IRQSetActionTrigger, Index: vfiouser.IRQIndexMSIX, Start: 0xFFFFFFF0, Count: 0x20}},
		{name: "loopback trigger of 2^32-1 vectors", m: vfiouser.IRQSetMsg{Flags: vfiouser.IRQSetDataNone | vfiouser.IRQSetActionTrigger, Index: vfiouser.IRQIndexMSIX, Count: 0xFFFFFFFF}},
		{name: "DATA_BOOL shorter than count", m: vfiouser.IRQSetMsg{Flags: vfiouser.IRQSetDataBool | vfiouser.IRQSetActionTrigger, Index: vfiouser.IRQIndexMSIX, Count: 16, Data: []byte{1, 1, 1}}},
		{name: "DATA_BOOL with values other than 0 and 1", m: vfiouser.IRQSetMsg{Flags: vfiouser.IRQSetDataBool | vfiouser.IRQSetActionMask, Index: vfiouser.IRQIndexMSIX, Count: 4, Data: []byte{2, 0xFF, 7, 1}}},
		{name: "more fds than count", m: vfiouser.IRQSetMsg{Flags: uint32(trigger), Index: vfiouser.IRQIndexMSIX, Count: 1}, fds: []int{ev, ev, ev, ev}},
		{name: "fds with DATA_NONE", m: vfiouser.IRQSetMsg{Flags: vfiouser.IRQSetDataNone | vfiouser.IRQSetActionTrigger, Index: vfiouser.IRQIndexMSIX, Count: 2}, fds: []int{ev, ev}},
		{name: "every data and action flag at once", m: vfiouser.IRQSetMsg{Flags: 0x3F, Index: vfiouser.IRQIndexMSIX, Count: 1}, fds: []int{ev}},
		{name: "no flags", m: vfiouser.IRQSetMsg{Index: vfiouser.IRQIndexMSIX, Count: 1}},
		{name: "argsz smaller than the header", m: vfiouser.IRQSetMsg{Argsz: 4, Flags: uint32(trigger), Index: vfiouser.IRQIndexMSIX, Count: 1}, fds: []int{ev}},
		{name: "argsz larger than the message", m: vfiouser.IRQSetMsg{Argsz: 1 << 20, Flags: vfiouser.IRQSetDataBool | vfiouser.IRQSetActionTrigger, Index: vfiouser.IRQIndexMSIX, Count: 1, Data: []byte{1}}},
		{name: "an index that does not exist", m: vfiouser.IRQSetMsg{Flags: uint32(trigger), Index: 9, Count: 1}, fds: []int{ev}},
		{name: "index 2^32-1", m: vfiouser.IRQSetMsg{Flags: vfiouser.IRQSetDataNone | vfiouser.IRQSetActionTrigger, Index: 0xFFFFFFFF, Count: 1}},
		{name: "MSI-X back to eventfds", setup: func() error { return d.cfgWrite(d.caps[0x11]+2, 2, 1<<15) },
			m: eventfds(vfiouser.IRQIndexMSIX, 0, same16...), fds: same16},
	}
	// Random requests: any flags, index, range, up to four fds of any kind.
	kinds := []int{ev, h.pipeR, h.pipeW, h.memfd, h.null, h.sock, h.dir}
	for i := 0; i < 200; i++ {
		m := vfiouser.IRQSetMsg{Flags: garbage(r) & 0x3F, Index: uint32(r.IntN(6)), Start: garbage(r) % 40, Count: garbage(r) % 40}
		if r.IntN(8) == 0 {
			m.Start, m.Count = garbage(r), garbage(r)
		}
		if m.Flags&vfiouser.IRQSetDataBool != 0 {
			m.Data = make([]byte, r.IntN(48))
			for j := range m.Data {
				m.Data[j] = byte(r.IntN(3))
			}
		}
		var fds []int
		for j := r.IntN(5); j > 0; j-- {
			fds = append(fds, kinds[r.IntN(len(kinds))])
		}
		reqs = append(reqs, req{name: fmt.Sprintf("random request %d (flags %#x index %d start %#x count %#x, %d fds)", i, m.Flags, m.Index, m.Start, m.Count, len(fds)), m: m, fds: fds})
	}
	refused := 0
	for _, rq := range reqs {
		if rq.setup != nil {
			if err := rq.setup(); err != nil {
				t.Fatalf("%s: setup: %v", rq.name, err)
			}
		}
		if err := d.c.SetIRQs(rq.m, rq.fds); err != nil {
			if !isReply(err) {
				t.Fatalf("%s: SET_IRQS broke the connection: %v", rq.name, err)
			}
			refused++
		}
		if err := raiseAll(d, q); err != nil {
			t.Fatalf("%s: raising every interrupt afterwards: %v", rq.name, err)
		}
	}
	t.Logf("%d SET_IRQS requests, %d refused with an error reply", len(reqs), refused)
	drainEventfd(ev)
	unix.Read(h.pipeR, make([]byte, 1<<16))

	// Last: vector 1's eventfd replaced by descriptors that block a writer — an eventfd whose
	// counter is full and a full pipe, both left blocking — with vector 1 unmasked and MSI-X
	// on. The server must not wait on them.
	fullEv, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fullEv)
	var max [8]byte
	binary.LittleEndian.PutUint64(max[:], 0xFFFFFFFFFFFFFFFE)
	if _, err := unix.Write(fullEv, max[:]); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		fd    int
		drain func()
	}{
		{"an eventfd whose counter is full", fullEv, func() { unix.Read(fullEv, max[:]) }},
		{"a full pipe", h.full, h.drainFull},
	} {
		if e.d == nil {
			if e.d, err = redial(e.srv.socket); err != nil {
				t.Fatalf("reconnecting: %v", err)
			}
			if err := e.d.attach(e.mem); err != nil {
				t.Fatal(err)
			}
			if err := e.d.bringUp(); err != nil {
				t.Fatal(err)
			}
		}
		d := e.d
		if err := d.cfgWrite(d.caps[0x11]+2, 2, 1<<15); err != nil {
			t.Fatal(err)
		}
		if err := d.c.SetIRQs(vfiouser.IRQSetMsg{Flags: vfiouser.IRQSetDataNone | vfiouser.IRQSetActionUnmask, Index: vfiouser.IRQIndexMSIX, Count: msixCount}, nil); err != nil {
			t.Fatalf("unmasking every vector: %v", err)
		}
		if err := d.c.SetIRQs(eventfds(vfiouser.IRQIndexMSIX, 1, c.fd), []int{c.fd}); err != nil {
			if !isReply(err) {
				t.Fatalf("SET_IRQS with %s as vector 1: %v", c.name, err)
			}
			t.Logf("SET_IRQS with %s as vector 1 refused: %v", c.name, err)
			continue // refusing what is not a usable eventfd is a good answer
		}
		done := make(chan error, 1)
		go func() {
			err := d.setReg(abi.REG_SELFTEST_IRQ, 1)
			if err == nil {
				_, err = d.alive()
			}
			done <- err
		}()
		var ferr error
		select {
		case ferr = <-done:
		case <-time.After(livenessTimeout + time.Second):
			ferr = errors.New("no answer")
		}
		if ferr != nil {
			t.Errorf("with %s (blocking) as vector 1's eventfd, raising vector 1 (SELFTEST_IRQ=1) and reading a register were not answered within %v (%v): the server blocks writing to the client's fd; releasing it", c.name, livenessTimeout, ferr)
			c.drain()
			d.close()
			e.d = nil
		}
	}
	if e.d == nil { // leave a working client for the suite's checks
		if e.d, err = redial(e.srv.socket); err == nil {
			err = e.d.attach(e.mem)
		}
		if err != nil {
			t.Fatalf("reconnecting: %v", err)
		}
	}
}

func isReply(err error) bool {
	var re *vfiousertest.ReplyError
	return errors.As(err, &re)
}
