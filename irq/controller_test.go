package irq

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"math"
	"os"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/ratelog"
)

const nVectors = 16

// testFd is an eventfd handed to the controller (give) plus the test's own dup of it (peek),
// which shares the counter and stays open after the controller closes its copy.
type testFd struct {
	give, peek *os.File
}

// env is one scenario: a controller and named eventfds.
type env struct {
	t   *testing.T
	c   *Controller
	fds map[string]testFd
}

func newEnv(t *testing.T, vectors int) *env {
	e := &env{t: t, c: New(vectors, nil), fds: map[string]testFd{}}
	t.Cleanup(e.c.Close)
	return e
}

func newTestEventfd(t *testing.T) testFd {
	t.Helper()
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatalf("eventfd: %v", err)
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("dup: %v", err)
	}
	tf := testFd{give: os.NewFile(uintptr(fd), "give"), peek: os.NewFile(uintptr(dup), "peek")}
	t.Cleanup(func() { tf.peek.Close() })
	return tf
}

// fd creates a fresh eventfd under name and returns the file to hand to the controller.
func (e *env) fd(name string) *os.File {
	tf := newTestEventfd(e.t)
	e.fds[name] = tf
	return tf.give
}

// take reads and resets name's counter (0 when nothing was signalled).
func (e *env) take(name string) uint64 {
	e.t.Helper()
	return readCounter(e.t, e.fds[name].peek)
}

func readCounter(t *testing.T, f *os.File) uint64 {
	t.Helper()
	var buf [8]byte
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var rerr error
	rc.Control(func(fd uintptr) { n, rerr = unix.Read(int(fd), buf[:]) })
	if rerr == unix.EAGAIN {
		return 0
	}
	if rerr != nil || n != 8 {
		t.Fatalf("read eventfd: n=%d err=%v", n, rerr)
	}
	return binary.LittleEndian.Uint64(buf[:])
}

// step is one action or check of a scenario.
type step func(e *env)

func set(flags, index, start, count uint32, names ...string) step {
	return func(e *env) {
		e.t.Helper()
		r := Request{Flags: flags, Index: index, Start: start, Count: count}
		for _, n := range names {
			if n == "-" {
				r.Files = append(r.Files, nil)
			} else {
				r.Files = append(r.Files, e.fd(n))
			}
		}
		if err := e.c.Set(r); err != nil {
			e.t.Fatalf("Set(%+v): %v", r, err)
		}
	}
}

func setBools(flags, index, start uint32, bools ...bool) step {
	return func(e *env) {
		e.t.Helper()
		r := Request{Flags: flags, Index: index, Start: start, Count: uint32(len(bools)), Bools: bools}
		if err := e.c.Set(r); err != nil {
			e.t.Fatalf("Set(%+v): %v", r, err)
		}
	}
}

func trigger(vs ...int) step {
	return func(e *env) {
		e.t.Helper()
		for _, v := range vs {
			if err := e.c.TriggerMSIX(v); err != nil {
				e.t.Fatalf("TriggerMSIX(%d): %v", v, err)
			}
		}
	}
}

// signals checks how often each named eventfd was signalled since the last check.
func signals(want map[string]uint64) step {
	return func(e *env) {
		e.t.Helper()
		for name, w := range want {
			if got := e.take(name); got != w {
				e.t.Errorf("eventfd %q: unexpected signal count: got %d, want %d", name, got, w)
			}
		}
	}
}

// eventually waits for name to be signalled (asynchronous delivery from the resample goroutine).
func eventually(name string, want uint64) step {
	return func(e *env) {
		e.t.Helper()
		var got uint64
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if got += e.take(name); got >= want {
				break
			}
		}
		if got != want {
			e.t.Errorf("eventfd %q: unexpected signal count: got %d, want %d", name, got, want)
		}
	}
}

func pending(vs ...int) step {
	return func(e *env) {
		e.t.Helper()
		want := make([]byte, (nVectors+63)/64*8)
		for _, v := range vs {
			want[v/8] |= 1 << (v % 8)
		}
		got := make([]byte, len(want))
		e.c.ReadPBA(0, got)
		if !reflect.DeepEqual(got, want) {
			e.t.Errorf("unexpected PBA (-want +got):\n-%08b\n+%08b", want, got)
		}
		if st := e.c.Stats(); st.Pending != len(vs) {
			e.t.Errorf("unexpected Stats().Pending: got %d, want %d", st.Pending, len(vs))
		}
	}
}

func closed(names ...string) step {
	return func(e *env) {
		e.t.Helper()
		for _, n := range names {
			if !isClosed(e.fds[n].give) {
				e.t.Errorf("eventfd %q was not closed", n)
			}
		}
	}
}

func open(names ...string) step {
	return func(e *env) {
		e.t.Helper()
		for _, n := range names {
			if isClosed(e.fds[n].give) {
				e.t.Errorf("eventfd %q was closed", n)
			}
		}
	}
}

func do(f func(c *Controller)) step { return func(e *env) { f(e.c) } }

// tableMask writes vector v's Mask Bit in the trapped MSI-X table.
func tableMask(v int, masked bool) step {
	return func(e *env) {
		e.t.Helper()
		if err := e.c.SetTableMask(v, masked); err != nil {
			e.t.Fatalf("SetTableMask(%d, %v): %v", v, masked, err)
		}
	}
}

// kick signals the test side of name, as KVM does with the resample eventfd.
func kick(name string) step {
	return func(e *env) {
		e.t.Helper()
		if _, err := e.fds[name].peek.Write(one[:]); err != nil {
			e.t.Fatalf("signal %q: %v", name, err)
		}
	}
}

func quiet(name string) step {
	return func(e *env) {
		e.t.Helper()
		time.Sleep(30 * time.Millisecond)
		if got := e.take(name); got != 0 {
			e.t.Errorf("eventfd %q: unexpected %d signals", name, got)
		}
	}
}

func isClosed(f *os.File) bool {
	_, err := f.Stat()
	return errors.Is(err, os.ErrClosed)
}

const (
	assignFds = DataEventfd | ActionTrigger // 0x24
	disable   = DataNone | ActionTrigger    // 0x21 with count 0; loopback with count > 0
	maskNone  = DataNone | ActionMask       // 0x09
	unmaskNo  = DataNone | ActionUnmask     // 0x11
	resample  = DataEventfd | ActionUnmask  // 0x14
)

func TestMSIX(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"assign and trigger", []step{
			set(assignFds, IndexMSIX, 0, 1, "a"),
			trigger(0), signals(map[string]uint64{"a": 1}),
			trigger(0, 0), signals(map[string]uint64{"a": 2}),
			pending(),
		}},
		{"assign a block, trigger one", []step{
			set(assignFds, IndexMSIX, 4, 3, "a", "b", "c"),
			trigger(6), signals(map[string]uint64{"a": 0, "b": 0, "c": 1}),
		}},
		{"QEMU NORESIZE re-creation", []step{
			set(assignFds, IndexMSIX, 0, 1, "a"),
			set(disable, IndexMSIX, 0, 0),
			closed("a"),
			trigger(0), pending(0),
			set(assignFds, IndexMSIX, 0, 3, "x", "y", "z"),
			signals(map[string]uint64{"a": 0, "x": 1, "y": 0}), pending(),
		}},
		{"QEMU resizable enable: count 1 with no fd", []step{
			set(assignFds, IndexMSIX, 0, 1),
			trigger(0), pending(0),
			set(assignFds, IndexMSIX, 0, 1, "a"),
			signals(map[string]uint64{"a": 1}), pending(),
		}},
		{"de-assign with zero fds", []step{
			set(assignFds, IndexMSIX, 0, 2, "a", "b"),
			set(assignFds, IndexMSIX, 0, 2),
			closed("a", "b"),
			trigger(1), signals(map[string]uint64{"b": 0}), pending(1),
		}},
		{"fewer fds than count de-assigns the rest", []step{
			set(assignFds, IndexMSIX, 0, 3, "a", "b", "c"),
			set(assignFds, IndexMSIX, 0, 3, "n"),
			closed("a", "b", "c"),
			trigger(0, 1, 2), signals(map[string]uint64{"n": 1}), pending(1, 2),
		}},
		{"nil entry de-assigns one vector", []step{
			set(assignFds, IndexMSIX, 0, 3, "a", "b", "c"),
			set(assignFds, IndexMSIX, 0, 3, "a2", "-", "c2"),
			closed("a", "b", "c"),
			trigger(0, 1, 2), signals(map[string]uint64{"a2": 1, "c2": 1}), pending(1),
		}},
		{"swap (QEMU masking) signals only the new fd", []step{
			set(assignFds, IndexMSIX, 3, 1, "kvm"),
			set(assignFds, IndexMSIX, 3, 1, "qemu"),
			closed("kvm"), open("qemu"),
			trigger(3), signals(map[string]uint64{"kvm": 0, "qemu": 1}),
		}},
		{"mask, pending, unmask delivers", []step{
			set(assignFds, IndexMSIX, 0, 2, "a", "b"),
			set(maskNone, IndexMSIX, 0, 1),
			trigger(0, 0, 1), signals(map[string]uint64{"a": 0, "b": 1}), pending(0),
			set(unmaskNo, IndexMSIX, 0, 1),
			signals(map[string]uint64{"a": 1}), pending(),
			trigger(0), signals(map[string]uint64{"a": 1}),
		}},
		{"mask by bool", []step{
			set(assignFds, IndexMSIX, 0, 2, "a", "b"),
			setBools(DataBool|ActionMask, IndexMSIX, 0, true, false),
			trigger(0, 1), signals(map[string]uint64{"a": 0, "b": 1}), pending(0),
			setBools(DataBool|ActionUnmask, IndexMSIX, 0, false, true),
			pending(0),
			setBools(DataBool|ActionUnmask, IndexMSIX, 0, true, false),
			signals(map[string]uint64{"a": 1}), pending(),
		}},
		{"masked vector stays pending when it gets an fd", []step{
			set(maskNone, IndexMSIX, 5, 1),
			trigger(5),
			set(assignFds, IndexMSIX, 5, 1, "a"),
			signals(map[string]uint64{"a": 0}), pending(5),
			set(unmaskNo, IndexMSIX, 5, 1),
			signals(map[string]uint64{"a": 1}), pending(),
		}},
		{"disable keeps masks and pending bits", []step{
			set(assignFds, IndexMSIX, 0, 1, "a"),
			set(maskNone, IndexMSIX, 0, 1), trigger(0),
			set(disable, IndexMSIX, 0, 0),
			set(assignFds, IndexMSIX, 0, 1, "b"),
			pending(0), signals(map[string]uint64{"b": 0}),
		}},
		{"loopback trigger by DATA_NONE and DATA_BOOL", []step{
			set(assignFds, IndexMSIX, 0, 3, "a", "b", "c"),
			set(disable, IndexMSIX, 1, 2),
			signals(map[string]uint64{"a": 0, "b": 1, "c": 1}),
			setBools(DataBool|ActionTrigger, IndexMSIX, 0, false, true, false),
			signals(map[string]uint64{"a": 0, "b": 1, "c": 0}),
			setBools(DataBool|ActionTrigger, IndexMSIX, 15, true), pending(15),
		}},
		{"reset clears pending and masks, keeps fds", []step{
			set(assignFds, IndexMSIX, 0, 1, "a"),
			set(maskNone, IndexMSIX, 0, 1), trigger(0, 7), pending(0, 7),
			do((*Controller).Reset), pending(),
			trigger(0), signals(map[string]uint64{"a": 1}), open("a"),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nVectors)
			for _, s := range tc.steps {
				s(e)
			}
		})
	}
}

// TestMSIXTableMask: the Mask Bits of the trapped MSI-X table, combined with the SET_IRQS mask.
func TestMSIXTableMask(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"QEMU never writes the table: its power-on masks do not count", []step{
			set(assignFds, IndexMSIX, 0, 1, "a"),
			trigger(0), signals(map[string]uint64{"a": 1}), pending(),
		}},
		{"unmasking one vector through the table: the others stay masked", []step{
			set(assignFds, IndexMSIX, 0, 2, "a", "b"),
			tableMask(0, false),
			trigger(0, 1), signals(map[string]uint64{"a": 1, "b": 0}), pending(1),
			tableMask(1, false), signals(map[string]uint64{"b": 1}), pending(),
		}},
		{"masked in the table: pends; unmask delivers once and clears", []step{
			set(assignFds, IndexMSIX, 0, 1, "a"),
			tableMask(0, false), tableMask(0, true),
			trigger(0, 0), signals(map[string]uint64{"a": 0}), pending(0),
			tableMask(0, true), signals(map[string]uint64{"a": 0}), pending(0),
			tableMask(0, false), signals(map[string]uint64{"a": 1}), pending(),
			tableMask(0, false), signals(map[string]uint64{"a": 0}),
		}},
		{"both masks must be clear", []step{
			set(assignFds, IndexMSIX, 0, 1, "a"),
			tableMask(0, false), set(maskNone, IndexMSIX, 0, 1),
			trigger(0), pending(0),
			tableMask(0, false), signals(map[string]uint64{"a": 0}), pending(0),
			tableMask(0, true), set(unmaskNo, IndexMSIX, 0, 1), signals(map[string]uint64{"a": 0}), pending(0),
			tableMask(0, false), signals(map[string]uint64{"a": 1}), pending(),
		}},
		{"unmasked without an eventfd: pends until one comes", []step{
			tableMask(4, false), trigger(4), pending(4),
			set(assignFds, IndexMSIX, 4, 1, "a"), signals(map[string]uint64{"a": 1}), pending(),
		}},
		{"a new eventfd does not bypass the table mask", []step{
			tableMask(0, false), tableMask(4, true), trigger(4),
			set(assignFds, IndexMSIX, 4, 1, "a"), signals(map[string]uint64{"a": 0}), pending(4),
		}},
		{"reset re-masks every vector; the table still counts", []step{
			set(assignFds, IndexMSIX, 0, 1, "a"),
			tableMask(0, false), do((*Controller).Reset),
			trigger(0), signals(map[string]uint64{"a": 0}), pending(0),
			tableMask(0, false), signals(map[string]uint64{"a": 1}), pending(),
		}},
		{"the next client has not used the table", []step{
			tableMask(0, false), tableMask(1, true), do((*Controller).Close),
			set(assignFds, IndexMSIX, 1, 1, "b"),
			trigger(1), signals(map[string]uint64{"b": 1}), pending(),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nVectors)
			for _, s := range tc.steps {
				s(e)
			}
		})
	}
	c := New(nVectors, nil)
	for _, v := range []int{-1, nVectors, math.MaxInt} {
		if err := c.SetTableMask(v, false); !errors.Is(err, ErrNoVector) {
			t.Errorf("SetTableMask(%d): got %v, want ErrNoVector", v, err)
		}
	}
	if st := c.Stats(); st.NoVector != 3 || st.TableInUse || st.TableMasked != nVectors {
		t.Errorf("after refused SetTableMask: unexpected Stats %+v", st)
	}
}

func TestTriggerMSIXOutOfRange(t *testing.T) {
	c := New(nVectors, nil)
	for _, v := range []int{-1, nVectors, math.MaxInt} {
		if err := c.TriggerMSIX(v); !errors.Is(err, ErrNoVector) {
			t.Errorf("TriggerMSIX(%d): got %v, want ErrNoVector", v, err)
		}
	}
	if st := c.Stats(); st.NoVector != 3 || st.Pending != 0 {
		t.Errorf("unexpected Stats %+v", st)
	}
}

func TestInvalidRequests(t *testing.T) {
	tests := []struct {
		name  string
		req   Request
		files int
	}{
		{"MSI has no vectors", Request{Flags: assignFds, Index: IndexMSI, Count: 1}, 1},
		{"MSI disable", Request{Flags: disable, Index: IndexMSI}, 0},
		{"no such index", Request{Flags: assignFds, Index: 5, Count: 1}, 1},
		{"MSI-X range past the table", Request{Flags: assignFds, Index: IndexMSIX, Start: nVectors - 1, Count: 2}, 2},
		{"MSI-X start past the table", Request{Flags: assignFds, Index: IndexMSIX, Start: nVectors, Count: 0}, 0},
		{"start+count overflows", Request{Flags: assignFds, Index: IndexMSIX, Start: math.MaxUint32, Count: 2}, 1},
		{"two data types", Request{Flags: DataEventfd | DataNone | ActionTrigger, Index: IndexMSIX, Count: 1}, 1},
		{"two actions", Request{Flags: DataEventfd | ActionTrigger | ActionUnmask, Index: IndexINTx, Count: 1}, 1},
		{"no action", Request{Flags: DataEventfd, Index: IndexMSIX, Count: 1}, 1},
		{"unknown flag bit", Request{Flags: assignFds | 1<<6, Index: IndexMSIX, Count: 1}, 1},
		{"MASK with EVENTFD on MSI-X", Request{Flags: DataEventfd | ActionMask, Index: IndexMSIX, Count: 1}, 1},
		{"UNMASK with EVENTFD on MSI-X", Request{Flags: resample, Index: IndexMSIX, Count: 1}, 1},
		{"MASK with EVENTFD on INTx", Request{Flags: DataEventfd | ActionMask, Index: IndexINTx, Count: 1}, 1},
		{"more fds than count", Request{Flags: assignFds, Index: IndexMSIX, Count: 1}, 2},
		{"fds with DATA_NONE", Request{Flags: disable, Index: IndexMSIX, Count: 1}, 1},
		{"bools count mismatch", Request{Flags: DataBool | ActionTrigger, Index: IndexMSIX, Count: 2, Bools: []bool{true}}, 0},
		{"bools without DATA_BOOL", Request{Flags: disable, Index: IndexMSIX, Count: 1, Bools: []bool{true}}, 0},
		{"INTx eventfd with count 0", Request{Flags: assignFds, Index: IndexINTx, Count: 0}, 0},
		{"INTx count 2", Request{Flags: assignFds, Index: IndexINTx, Count: 2}, 2},
		{"ERR mask", Request{Flags: maskNone, Index: IndexErr, Count: 1}, 0},
		{"REQ unmask eventfd", Request{Flags: resample, Index: IndexReq, Count: 1}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nVectors)
			// Prior state that a refused request must not disturb.
			set(assignFds, IndexMSIX, 0, 1, "keep")(e)
			set(assignFds, IndexINTx, 0, 1, "intx")(e)
			req := tc.req
			var names []string
			for i := 0; i < tc.files; i++ {
				name := string(rune('a' + i))
				names = append(names, name)
				req.Files = append(req.Files, e.fd(name))
			}
			err := e.c.Set(req)
			if !errors.Is(err, syscall.EINVAL) {
				t.Fatalf("unexpected error: got %v, want EINVAL", err)
			}
			closed(names...)(e)
			open("keep", "intx")(e)
			trigger(0)(e)
			signals(map[string]uint64{"keep": 1})(e)
		})
	}
}

func TestINTx(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"level: signal on the rising edge only", []step{
			set(assignFds, IndexINTx, 0, 1, "t"),
			do((*Controller).AssertINTx), signals(map[string]uint64{"t": 1}),
			do((*Controller).AssertINTx), signals(map[string]uint64{"t": 0}),
			do((*Controller).DeassertINTx), signals(map[string]uint64{"t": 0}),
			do((*Controller).AssertINTx), signals(map[string]uint64{"t": 1}),
		}},
		{"resample re-asserts while the line is high", []step{
			set(assignFds, IndexINTx, 0, 1, "t"),
			set(resample, IndexINTx, 0, 1, "r"),
			do((*Controller).AssertINTx), signals(map[string]uint64{"t": 1}),
			kick("r"), eventually("t", 1),
			kick("r"), eventually("t", 1),
			do((*Controller).DeassertINTx),
			kick("r"), quiet("t"),
		}},
		{"replacing the resample fd closes the old one", []step{
			set(assignFds, IndexINTx, 0, 1, "t"),
			set(resample, IndexINTx, 0, 1, "r1"),
			set(resample, IndexINTx, 0, 1, "r2"),
			closed("r1", "r2"), // the controller keeps only a non-blocking dup of r2
			do((*Controller).AssertINTx), signals(map[string]uint64{"t": 1}),
			kick("r1"), quiet("t"),
			kick("r2"), eventually("t", 1),
			set(resample, IndexINTx, 0, 1),
			kick("r2"), quiet("t"),
		}},
		{"mask and unmask commands", []step{
			set(assignFds, IndexINTx, 0, 1, "t"),
			set(maskNone, IndexINTx, 0, 1),
			do((*Controller).AssertINTx), signals(map[string]uint64{"t": 0}),
			set(unmaskNo, IndexINTx, 0, 1), signals(map[string]uint64{"t": 1}),
			set(unmaskNo, IndexINTx, 0, 1), signals(map[string]uint64{"t": 1}),
			do((*Controller).DeassertINTx),
			set(unmaskNo, IndexINTx, 0, 1), signals(map[string]uint64{"t": 0}),
		}},
		{"masked line ignores resample", []step{
			set(assignFds, IndexINTx, 0, 1, "t"),
			set(resample, IndexINTx, 0, 1, "r"),
			do((*Controller).AssertINTx), signals(map[string]uint64{"t": 1}),
			setBools(DataBool|ActionMask, IndexINTx, 0, true),
			kick("r"), quiet("t"),
		}},
		{"assigning a trigger fd while asserted signals it", []step{
			do((*Controller).AssertINTx),
			set(assignFds, IndexINTx, 0, 1, "t"), signals(map[string]uint64{"t": 1}),
		}},
		{"loopback trigger", []step{
			set(assignFds, IndexINTx, 0, 1, "t"),
			set(disable, IndexINTx, 0, 1), signals(map[string]uint64{"t": 1}),
			setBools(DataBool|ActionTrigger, IndexINTx, 0, false), signals(map[string]uint64{"t": 0}),
		}},
		{"QEMU teardown before MSI-X closes trigger and resample", []step{
			set(assignFds, IndexINTx, 0, 1, "t"),
			set(resample, IndexINTx, 0, 1, "r"),
			set(maskNone, IndexINTx, 0, 1),
			set(unmaskNo, IndexINTx, 0, 1),
			set(disable, IndexINTx, 0, 0),
			closed("t", "r"),
			do((*Controller).AssertINTx), kick("r"), quiet("t"),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nVectors)
			for _, s := range tc.steps {
				s(e)
			}
		})
	}
}

func TestErrAndReq(t *testing.T) {
	e := newEnv(t, nVectors)
	e.c.RaiseError()
	if st := e.c.Stats(); st.Dropped != 1 || st.ErrSignals != 0 {
		t.Errorf("RaiseError without an eventfd: unexpected Stats %+v", st)
	}
	set(assignFds, IndexErr, 0, 1, "err")(e)
	set(assignFds, IndexReq, 0, 1, "req")(e)
	e.c.RaiseError()
	signals(map[string]uint64{"err": 1, "req": 0})(e)
	set(disable, IndexErr, 0, 1)(e) // loopback
	set(disable, IndexReq, 0, 1)(e)
	signals(map[string]uint64{"err": 1, "req": 1})(e)
	set(assignFds, IndexErr, 0, 1, "err2")(e)
	closed("err")(e)
	e.c.RaiseError()
	signals(map[string]uint64{"err": 0, "err2": 1})(e)
	set(disable, IndexErr, 0, 0)(e)
	closed("err2")(e)
	if st := e.c.Stats(); st.ErrSignals != 3 {
		t.Errorf("unexpected ErrSignals: %d", st.ErrSignals)
	}
}

func fdCount(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestCloseClosesEverything(t *testing.T) {
	e := newEnv(t, nVectors)
	baseline := fdCount(t)
	set(assignFds, IndexMSIX, 0, 4, "v0", "v1", "v2", "v3")(e)
	set(assignFds, IndexINTx, 0, 1, "t")(e)
	set(resample, IndexINTx, 0, 1, "r")(e)
	set(assignFds, IndexErr, 0, 1, "err")(e)
	set(assignFds, IndexReq, 0, 1, "req")(e)
	// 8 eventfds, each with a test-side dup, one of them re-dup'ed by the controller and the
	// original closed: 16 fds.
	if got := fdCount(t) - baseline; got != 16 {
		t.Errorf("unexpected fd count before Close: %d over baseline, want 16", got)
	}
	e.c.Close()
	closed("v0", "v1", "v2", "v3", "t", "r", "err", "req")(e)
	if got := fdCount(t) - baseline; got != 8 {
		t.Errorf("unexpected fd count after Close: %d over baseline, want the 8 test dups", got)
	}
	// Device state survives; the controller stays usable.
	trigger(1)(e)
	pending(1)(e)
	set(assignFds, IndexMSIX, 1, 1, "again")(e)
	signals(map[string]uint64{"again": 1})(e)
}

func TestPBALayout(t *testing.T) {
	c := New(70, nil)
	for _, v := range []int{0, 9, 63, 64, 69} {
		c.TriggerMSIX(v) // no eventfds: all pend
	}
	tests := []struct {
		off  uint64
		n    int
		want []byte
	}{
		{0, 16, []byte{0x01, 0x02, 0, 0, 0, 0, 0, 0x80, 0x21, 0, 0, 0, 0, 0, 0, 0}},
		{8, 8, []byte{0x21, 0, 0, 0, 0, 0, 0, 0}},
		{7, 2, []byte{0x80, 0x21}},
		{16, 8, make([]byte, 8)},
		{math.MaxUint64 - 3, 8, make([]byte, 8)},
	}
	for _, tc := range tests {
		got := make([]byte, tc.n)
		for i := range got {
			got[i] = 0xee
		}
		c.ReadPBA(tc.off, got)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ReadPBA(%#x, %d): unexpected bytes (-want +got):\n-%x\n+%x", tc.off, tc.n, tc.want, got)
		}
	}
}

// newBlockingEventfd is an eventfd as a careless client would make it: blocking.
func newBlockingEventfd(t *testing.T) testFd {
	t.Helper()
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatalf("eventfd: %v", err)
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("dup: %v", err)
	}
	tf := testFd{give: os.NewFile(uintptr(fd), "give"), peek: os.NewFile(uintptr(dup), "peek")}
	t.Cleanup(func() { tf.peek.Close() })
	return tf
}

// within fails the test if f does not return in time (a blocked write would hang the device).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s blocked", what)
	}
}

// TestSaturatedEventfd: a client's eventfd whose counter is at its maximum (the next write would
// block) costs nothing: the descriptor was made non-blocking when it was registered, the signal
// is coalesced (EAGAIN: the reader sees it pending anyway) and counted.
func TestSaturatedEventfd(t *testing.T) {
	tests := []struct {
		name   string
		index  uint32
		raise  func(c *Controller)
		counts func(st Stats) uint64
	}{
		{"MSI-X", IndexMSIX, func(c *Controller) { c.TriggerMSIX(0) }, func(st Stats) uint64 { return st.Delivered[0] }},
		{"INTx", IndexINTx, func(c *Controller) { c.DeassertINTx(); c.AssertINTx() }, func(st Stats) uint64 { return st.INTxSignals }},
		{"ERR", IndexErr, (*Controller).RaiseError, func(st Stats) uint64 { return st.ErrSignals }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(nVectors, nil)
			defer c.Close()
			tf := newBlockingEventfd(t)
			if err := c.Set(Request{Flags: assignFds, Index: tc.index, Count: 1, Files: []*os.File{tf.give}}); err != nil {
				t.Fatal(err)
			}
			if fl, err := unix.FcntlInt(tf.peek.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK == 0 {
				t.Errorf("registered eventfd flags %#x (%v): want O_NONBLOCK", fl, err)
			}
			var max [8]byte
			binary.LittleEndian.PutUint64(max[:], math.MaxUint64-1)
			if _, err := unix.Write(int(tf.peek.Fd()), max[:]); err != nil {
				t.Fatal(err)
			}
			within(t, "signalling a saturated eventfd", func() { tc.raise(c) })
			st := c.Stats()
			if st.Saturated != 1 || tc.counts(st) != 0 || st.Dropped != 0 || st.Pending != 0 {
				t.Errorf("saturated: unexpected Stats %+v", st)
			}
			if got := readCounter(t, tf.peek); got != math.MaxUint64-1 {
				t.Errorf("counter = %#x", got)
			}
			tc.raise(c) // the reader drained it: signals count again
			if st := c.Stats(); st.Saturated != 1 || tc.counts(st) != 1 {
				t.Errorf("after draining: unexpected Stats %+v", st)
			}
		})
	}
}

// TestNotAnEventfdIsRefused: SET_IRQS with any descriptor but an eventfd is refused with EINVAL
// (the transport's error reply), the descriptor is closed and nothing changes. A full pipe
// registered as a trigger used to block the device on its first interrupt.
func TestNotAnEventfdIsRefused(t *testing.T) {
	fullPipe := func(t *testing.T) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		fd := int(w.Fd()) // once: Fd makes the file blocking again
		unix.SetNonblock(fd, true)
		for {
			if _, err := unix.Write(fd, make([]byte, 4096)); err != nil {
				break
			}
		}
		unix.SetNonblock(fd, false) // as a client would hand it over: blocking
		return w
	}
	kinds := []struct {
		name string
		make func(t *testing.T) *os.File
	}{
		{"full pipe", fullPipe},
		{"pipe read end", func(t *testing.T) *os.File {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Close() })
			return r
		}},
		{"/dev/null", func(t *testing.T) *os.File {
			f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}},
		{"socket", func(t *testing.T) *os.File {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fds[1]) })
			return os.NewFile(uintptr(fds[0]), "socket")
		}},
		{"timerfd (another anonymous inode)", func(t *testing.T) *os.File {
			fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			return os.NewFile(uintptr(fd), "timerfd")
		}},
		{"memfd", func(t *testing.T) *os.File {
			fd, err := unix.MemfdCreate("x", unix.MFD_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			return os.NewFile(uintptr(fd), "memfd")
		}},
	}
	uses := []struct {
		name  string
		flags uint32
		index uint32
		start uint32
	}{
		{"MSI-X trigger", assignFds, IndexMSIX, 1},
		{"INTx trigger", assignFds, IndexINTx, 0},
		{"INTx resample", resample, IndexINTx, 0},
		{"ERR", assignFds, IndexErr, 0},
	}
	for _, k := range kinds {
		for _, u := range uses {
			t.Run(k.name+"/"+u.name, func(t *testing.T) {
				e := newEnv(t, nVectors)
				set(assignFds, IndexMSIX, 0, 1, "keep")(e)
				set(assignFds, IndexINTx, 0, 1, "intx")(e)
				f := k.make(t)
				var err error
				within(t, "SET_IRQS", func() {
					err = e.c.Set(Request{Flags: u.flags, Index: u.index, Start: u.start, Count: 1, Files: []*os.File{f}})
				})
				if !errors.Is(err, syscall.EINVAL) || !errors.Is(err, errNotEventfd) {
					t.Fatalf("Set: got %v, want EINVAL: not an eventfd", err)
				}
				if !isClosed(f) {
					t.Error("the refused descriptor was not closed")
				}
				if st := e.c.Stats(); st.Refused != 1 {
					t.Errorf("Refused = %d, want 1", st.Refused)
				}
				open("keep", "intx")(e)
				within(t, "raising interrupts", func() {
					e.c.TriggerMSIX(1)
					e.c.AssertINTx()
					e.c.RaiseError()
				})
				trigger(0)(e)
				signals(map[string]uint64{"keep": 1, "intx": 1})(e)
				pending(1)(e)
			})
		}
	}
}

// TestSignalOutsideTheLock: a signal is decided under the lock and written after it; when SET_IRQS
// or a disconnect replaces and closes the eventfd in between, the interrupt follows the vector
// to its new eventfd, or pends when it has none or is masked — it is never written to a
// recycled descriptor and never lost.
func TestSignalOutsideTheLock(t *testing.T) {
	tests := []struct {
		name    string
		between []step
		want    map[string]uint64
		pending []int
	}{
		{"eventfd replaced", []step{set(assignFds, IndexMSIX, 2, 1, "new")}, map[string]uint64{"old": 0, "new": 1}, nil},
		{"eventfd removed", []step{set(assignFds, IndexMSIX, 2, 1)}, map[string]uint64{"old": 0}, []int{2}},
		{"replaced and masked", []step{set(assignFds, IndexMSIX, 2, 1, "new"), set(maskNone, IndexMSIX, 2, 1)}, map[string]uint64{"old": 0, "new": 0}, []int{2}},
		{"replaced and table-masked", []step{
			set(assignFds, IndexMSIX, 2, 1, "new"), tableMask(3, false), tableMask(2, true),
		}, map[string]uint64{"old": 0, "new": 0}, []int{2}},
		{"client gone", []step{do((*Controller).Close)}, map[string]uint64{"old": 0}, []int{2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nVectors)
			set(assignFds, IndexMSIX, 2, 1, "old")(e)
			e.c.mu.Lock()
			s, ok := e.c.triggerLocked(2)
			e.c.mu.Unlock()
			if !ok {
				t.Fatal("vector 2 not deliverable")
			}
			for _, st := range tc.between {
				st(e)
			}
			within(t, "send", func() { e.c.send(s) })
			signals(tc.want)(e)
			pending(tc.pending...)(e)
			if st := e.c.Stats(); st.Dropped != 0 {
				t.Errorf("Dropped = %d", st.Dropped)
			}
		})
	}
}

// TestGuestTriggeredLogsAreLimited: what a guest or client can repeat at will is logged within
// the limiter's budget and counted in full.
func TestGuestTriggeredLogsAreLimited(t *testing.T) {
	var logBuf bytes.Buffer
	lim := ratelog.New(slog.New(slog.NewTextHandler(&logBuf, nil)), time.Hour, 2)
	e := newEnv(t, nVectors)
	e.c.SetLimiter(lim)
	set(assignFds, IndexMSIX, 0, 1, "full")(e)
	var max [8]byte
	binary.LittleEndian.PutUint64(max[:], math.MaxUint64-1)
	if _, err := e.fds["full"].peek.Write(max[:]); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for range n {
		e.c.TriggerMSIX(nVectors + 3)                                         // no such vector
		e.c.SetTableMask(-1, false)                                           // no such vector
		e.c.Set(Request{Flags: assignFds | 1<<7, Index: IndexMSIX, Count: 1}) // refused
		e.c.TriggerMSIX(0)                                                    // saturated
		e.c.Set(Request{Flags: disable, Index: IndexErr, Count: 1})           // no ERR eventfd
	}
	st := e.c.Stats()
	if st.NoVector != 2*n || st.Refused != n || st.Saturated != n || st.Dropped != n {
		t.Errorf("unexpected Stats %+v", st)
	}
	want := map[string]uint64{logKeyNoVector: 2*n - 2, logKeyRefused: n - 2, logKeySaturated: n - 2, logKeyNoErrFd: n - 2}
	for _, c := range lim.Counts() {
		if c.Logged != 2 || c.Suppressed != want[c.Key] {
			t.Errorf("limiter %s: logged %d suppressed %d, want 2 and %d", c.Key, c.Logged, c.Suppressed, want[c.Key])
		}
		delete(want, c.Key)
	}
	if len(want) != 0 {
		t.Errorf("keys never logged: %v", want)
	}
	if lines := bytes.Count(logBuf.Bytes(), []byte("\n")); lines != 8 {
		t.Errorf("%d log lines, want 8:\n%s", lines, logBuf.String())
	}
}

func TestNewBounds(t *testing.T) {
	for _, n := range []int{0, -1, MaxMSIXVectors + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d) did not panic", n)
				}
			}()
			New(n, nil)
		}()
	}
	if c := New(MaxMSIXVectors, nil); len(c.Stats().Delivered) != MaxMSIXVectors {
		t.Errorf("New(%d): wrong vector count", MaxMSIXVectors)
	}
}

// TestConcurrent runs triggers from several goroutines while the "server worker" swaps
// eventfds, masks and disables, as QEMU does while the guest reprograms MSI-X. Run with -race.
// Invariant: every signal counted in Stats reached some eventfd.
func TestConcurrent(t *testing.T) {
	e := newEnv(t, nVectors)
	var (
		mu    sync.Mutex
		peeks []*os.File
	)
	newFds := func(n int) []*os.File {
		var give []*os.File
		mu.Lock()
		defer mu.Unlock()
		for i := 0; i < n; i++ {
			tf := newTestEventfd(t)
			give = append(give, tf.give)
			peeks = append(peeks, tf.peek)
		}
		return give
	}
	if err := e.c.Set(Request{Flags: assignFds, Index: IndexMSIX, Count: nVectors, Files: newFds(nVectors)}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Set(Request{Flags: assignFds, Index: IndexINTx, Count: 1, Files: newFds(1)}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Set(Request{Flags: resample, Index: IndexINTx, Count: 1, Files: newFds(1)}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				e.c.TriggerMSIX(i % nVectors)
				if i%7 == 0 {
					e.c.AssertINTx()
					e.c.DeassertINTx()
				}
				if i%13 == 0 {
					buf := make([]byte, 8)
					e.c.ReadPBA(0, buf)
					_ = e.c.Stats()
				}
			}
		}()
	}
	for i := 0; i < 300; i++ {
		k := uint32(i % nVectors)
		var r Request
		switch i % 6 {
		case 0:
			r = Request{Flags: assignFds, Index: IndexMSIX, Start: k, Count: 1, Files: newFds(1)}
		case 1:
			r = Request{Flags: maskNone, Index: IndexMSIX, Start: k, Count: 1}
		case 2:
			r = Request{Flags: unmaskNo, Index: IndexMSIX, Start: k, Count: 1}
		case 3:
			r = Request{Flags: disable, Index: IndexMSIX}
		case 4:
			r = Request{Flags: assignFds, Index: IndexMSIX, Count: nVectors, Files: newFds(nVectors)}
		case 5:
			r = Request{Flags: resample, Index: IndexINTx, Count: 1, Files: newFds(1)}
		}
		if err := e.c.Set(r); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			e.c.Reset()
		}
	}
	close(stop)
	wg.Wait()
	st := e.c.Stats()
	e.c.Close()
	var want, got uint64
	for _, d := range st.Delivered {
		want += d
	}
	want += st.INTxSignals
	for _, p := range peeks {
		got += readCounter(t, p)
	}
	if got != want || st.Dropped != 0 {
		t.Errorf("signals counted %d (dropped %d), eventfds saw %d", want, st.Dropped, got)
	}
}
