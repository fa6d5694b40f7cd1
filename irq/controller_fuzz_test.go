package irq

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const (
	fuzzVectors = 16
	fuzzOpSize  = 8
	// fuzzMaxOps bounds the operations of one input (the rest is ignored): the fuzzer minimizes
	// every new input with a search quadratic in its length and fuzzes nothing meanwhile.
	fuzzMaxOps = 32
)

// fuzzFd is an eventfd the fuzz input hands to the controller: give is the controller's copy,
// peek a dup sharing its counter, want the signals the model expects it to have received.
type fuzzFd struct {
	give *os.File
	peek int
	want uint64
}

// fuzzModel is the specification of the controller's interrupt state (docs of package irq).
type fuzzModel struct {
	msix [fuzzVectors]struct {
		fd                                 *fuzzFd
		clientMasked, tableMasked, pending bool
	}
	tableInUse                 bool
	trigger, errFd, reqFd      *fuzzFd
	asserted, intxMasked       bool
	delivered                  [fuzzVectors]uint64
	intxN, errN, reqN, dropped uint64
	noVector, refused          uint64
}

func newFuzzModel() *fuzzModel {
	m := &fuzzModel{}
	for k := range m.msix {
		m.msix[k].tableMasked = true
	}
	return m
}

func (m *fuzzModel) deliverable(k int) bool {
	v := &m.msix[k]
	return v.fd != nil && !v.clientMasked && !(m.tableInUse && v.tableMasked)
}

func (m *fuzzModel) raise(k int) {
	if !m.deliverable(k) {
		m.msix[k].pending = true
		return
	}
	m.msix[k].fd.want++
	m.delivered[k]++
}

func (m *fuzzModel) release(k int) {
	if m.msix[k].pending && m.deliverable(k) {
		m.msix[k].pending = false
		m.msix[k].fd.want++
		m.delivered[k]++
	}
}

func (m *fuzzModel) signalINTx() {
	if m.trigger != nil {
		m.trigger.want++
		m.intxN++
	}
}

func (m *fuzzModel) signalSimple(fd *fuzzFd, n *uint64) {
	if fd == nil {
		m.dropped++
		return
	}
	fd.want++
	*n++
}

// set applies a request the controller accepted.
func (m *fuzzModel) set(r Request, files []*fuzzFd) {
	data, action := r.Flags&DataTypeMask, r.Flags&ActionTypeMask
	selected := func(k int) bool { return data == DataNone || data == DataBool && r.Bools[k] }
	file := func(k int) *fuzzFd {
		if k < len(files) {
			return files[k]
		}
		return nil
	}
	switch r.Index {
	case IndexMSIX:
		if action == ActionTrigger && data == DataNone && r.Count == 0 {
			for k := range m.msix {
				m.msix[k].fd = nil
			}
			return
		}
		for k := 0; k < int(r.Count); k++ {
			n := int(r.Start) + k
			switch {
			case action == ActionTrigger && data == DataEventfd:
				m.msix[n].fd = file(k)
				m.release(n)
			case !selected(k):
			case action == ActionTrigger:
				m.raise(n)
			case action == ActionMask:
				m.msix[n].clientMasked = true
			case action == ActionUnmask:
				m.msix[n].clientMasked = false
				m.release(n)
			}
		}
	case IndexINTx:
		switch {
		case action == ActionTrigger && data == DataEventfd:
			m.trigger = file(0)
			if m.asserted && !m.intxMasked {
				m.signalINTx()
			}
		case action == ActionTrigger && data == DataNone && r.Count == 0:
			m.trigger = nil
		case action == ActionUnmask && data == DataEventfd: // resample: consumed, never kicked here
		case r.Count == 0 || !selected(0):
		case action == ActionTrigger:
			if !m.intxMasked {
				m.signalINTx()
			}
		case action == ActionMask:
			m.intxMasked = true
		case action == ActionUnmask:
			m.intxMasked = false
			if m.asserted {
				m.signalINTx()
			}
		}
	case IndexErr, IndexReq:
		slot, n := &m.errFd, &m.errN
		if r.Index == IndexReq {
			slot, n = &m.reqFd, &m.reqN
		}
		switch {
		case data == DataEventfd:
			*slot = file(0)
		case data == DataNone && r.Count == 0:
			*slot = nil
		case r.Count == 1 && selected(0):
			m.signalSimple(*slot, n)
		}
	}
}

// mustRefuse lists what makes a request invalid whatever the state (docs of Set): the
// controller must refuse it.
func mustRefuse(r Request, notEventfd bool) bool {
	data, action := r.Flags&DataTypeMask, r.Flags&ActionTypeMask
	n := uint64(map[uint32]uint32{IndexINTx: 1, IndexMSIX: fuzzVectors, IndexErr: 1, IndexReq: 1}[r.Index])
	return r.Flags&^(DataTypeMask|ActionTypeMask) != 0 ||
		bits.OnesCount32(data) != 1 || bits.OnesCount32(action) != 1 ||
		n == 0 || uint64(r.Start) >= n || uint64(r.Start)+uint64(r.Count) > n ||
		n == 1 && r.Count != 1 && !(data == DataNone && action == ActionTrigger) ||
		data == DataEventfd && action == ActionMask ||
		data == DataEventfd && action == ActionUnmask && r.Index != IndexINTx ||
		action != ActionTrigger && (r.Index == IndexErr || r.Index == IndexReq) ||
		notEventfd ||
		data == DataBool && len(r.Bools) != int(r.Count) || data != DataBool && len(r.Bools) != 0 ||
		data != DataEventfd && len(r.Files) != 0 || data == DataEventfd && len(r.Files) > int(r.Count)
}

// ctlSnapshot is the controller's state, to check that a refused request changed nothing.
type ctlSnapshot struct {
	msix       [fuzzVectors]vector
	tableInUse bool
	intx       intx
	errFd      *eventfd
	reqFd      *eventfd
}

func snapshot(c *Controller) (s ctlSnapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	copy(s.msix[:], c.msix)
	s.tableInUse, s.intx, s.errFd, s.reqFd = c.tableInUse, c.intx, c.errFd, c.reqFd
	return s
}

// FuzzSetIRQs sends garbage SET_IRQS requests — random flags, indexes, starts and counts (also
// past the table and at the 32-bit limit), bools that do not match, descriptors that are not
// eventfds — mixed with MSI-X triggers, table Mask Bit writes, INTx levels, ERR, resets and
// client disconnects, and checks the controller against a model of its specification:
// requests the docs call invalid are refused with EINVAL, change nothing and close their
// descriptors; accepted ones do what the model does; every eventfd received exactly the
// signals the model sent it, and the counters say so; the PBA matches the model's pending
// bits; no descriptor is leaked (one is open exactly while the controller holds it).
//
// Input: 8-byte operations; the first byte selects the operation (see the switch).
func FuzzSetIRQs(f *testing.F) {
	op := func(b ...byte) []byte { return append(b, make([]byte, fuzzOpSize-len(b))...) }
	cat := func(ops ...[]byte) (out []byte) {
		for _, o := range ops {
			out = append(out, o...)
		}
		return out
	}
	// flags byte: data = b%3 (none, bool, eventfd), action = b/3%3 (mask, unmask, trigger);
	// b >= 0x80 is raw garbage.
	const assign, disable, mask, unmask, loop = 2 + 3*2, 0 + 3*2, 0, 3, 0 + 3*2
	f.Add(cat(op(0, assign, IndexMSIX, 0, 4, 4, 0), op(4, 3), op(4, 1)))
	f.Add(cat(op(0, assign, IndexMSIX, 0, 2, 2, 0), op(5, 0, 0), op(4, 0), op(4, 1), op(5, 1, 0), op(7), op(4, 1)))
	f.Add(cat(op(0, mask, IndexMSIX, 3, 1), op(4, 3), op(0, assign, IndexMSIX, 3, 1, 1), op(0, unmask, IndexMSIX, 3, 1)))
	f.Add(cat(op(0, assign, IndexINTx, 0, 1, 1), op(6, 0), op(0, 2+3*1, IndexINTx, 0, 1, 1), op(6, 1), op(6, 0)))
	f.Add(cat(op(0, assign, IndexErr, 0, 1, 1, 3), op(0, assign, IndexMSIX, 0, 1, 1, 3), op(6, 2)))
	f.Add(cat(op(0, disable, IndexMSIX, 0, 0), op(0, loop, IndexReq, 0, 1), op(8), op(9, 0, 8)))
	f.Add(cat(op(0, 0x80|0x41, 5, 255, 255, 4, 0xff, 0xff)))
	f.Add(cat(op(0, 1+3*2, IndexMSIX, 0, 3, 0x20, 0, 0b101)))
	f.Add(cat(op(0, assign, IndexMSIX, 0, 3, 3), op(0, 1+3*0, IndexMSIX, 0, 3, 0, 0, 0b101), op(4, 0), op(4, 1), op(4, 2)))

	c := New(fuzzVectors, nil)
	defer c.Close()
	f.Fuzz(func(t *testing.T, in []byte) {
		// Reset between inputs: a client leaves, the device resets.
		c.Close()
		c.Reset()
		base := c.Stats()
		m := newFuzzModel()
		var fds []*fuzzFd
		defer func() {
			for _, fd := range fds {
				unix.Close(fd.peek)
			}
		}()
		newFd := func() *fuzzFd {
			efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
			if err != nil {
				t.Fatal(err)
			}
			peek, err := unix.FcntlInt(uintptr(efd), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			fd := &fuzzFd{give: os.NewFile(uintptr(efd), "fuzz-eventfd"), peek: peek}
			fds = append(fds, fd)
			return fd
		}
		for ops := 0; len(in) >= fuzzOpSize && ops < fuzzMaxOps; in, ops = in[fuzzOpSize:], ops+1 {
			b := in[:fuzzOpSize]
			switch b[0] % 10 {
			case 0, 1, 2, 3:
				r, files, notEventfd := fuzzRequest(t, b, newFd)
				before := snapshot(c)
				refuse := mustRefuse(r, notEventfd)
				err := c.Set(r)
				if err != nil {
					if !errors.Is(err, syscall.EINVAL) {
						t.Fatalf("Set(%+v) = %v, want EINVAL", r, err)
					}
					if snapshot(c) != before {
						t.Fatalf("refused Set(%+v) changed the state", r)
					}
					for _, f := range r.Files {
						if f != nil && !isClosed(f) {
							t.Fatalf("refused Set(%+v) left a descriptor open", r)
						}
					}
					m.refused++
					continue
				}
				if refuse {
					t.Fatalf("invalid Set(%+v) accepted", r)
				}
				m.set(r, files)
			case 4:
				v := int(int8(b[1])) % (fuzzVectors + 4)
				err := c.TriggerMSIX(v)
				if v < 0 || v >= fuzzVectors {
					if !errors.Is(err, ErrNoVector) {
						t.Fatalf("TriggerMSIX(%d) = %v, want ErrNoVector", v, err)
					}
					m.noVector++
					continue
				}
				if err != nil {
					t.Fatalf("TriggerMSIX(%d) = %v", v, err)
				}
				m.raise(v)
			case 5:
				v, masked := int(int8(b[1]))%(fuzzVectors+4), b[2]&1 != 0
				err := c.SetTableMask(v, masked)
				if v < 0 || v >= fuzzVectors {
					if !errors.Is(err, ErrNoVector) {
						t.Fatalf("SetTableMask(%d) = %v, want ErrNoVector", v, err)
					}
					m.noVector++
					continue
				}
				if err != nil {
					t.Fatalf("SetTableMask(%d) = %v", v, err)
				}
				m.msix[v].tableMasked = masked
				if !masked {
					m.tableInUse = true
					m.release(v)
				}
			case 6:
				switch b[1] % 3 {
				case 0:
					c.AssertINTx()
					if !m.asserted {
						m.asserted = true
						if !m.intxMasked {
							m.signalINTx()
						}
					}
				case 1:
					c.DeassertINTx()
					m.asserted = false
				case 2:
					c.RaiseError()
					m.signalSimple(m.errFd, &m.errN)
				}
			case 7:
				c.Reset()
				for k := range m.msix {
					m.msix[k].pending, m.msix[k].clientMasked, m.msix[k].tableMasked = false, false, true
				}
				m.asserted, m.intxMasked = false, false
			case 8:
				c.Close()
				for k := range m.msix {
					m.msix[k].fd = nil
				}
				m.tableInUse = false
				m.trigger, m.errFd, m.reqFd = nil, nil, nil
			case 9:
				off, n := uint64(b[1]%12), int(b[2]%10)
				got := make([]byte, n)
				c.ReadPBA(off, got)
				for i := range got {
					var want byte
					for bit := 0; bit < 8; bit++ {
						if k := 8*(int(off)+i) + bit; k < fuzzVectors && m.msix[k].pending {
							want |= 1 << bit
						}
					}
					if got[i] != want {
						t.Fatalf("ReadPBA(%d, %d) byte %d = %08b, want %08b", off, n, i, got[i], want)
					}
				}
			}
		}
		checkFuzzModel(t, c, m, base, fds)
	})
}

// fuzzRequest decodes one SET_IRQS operation: b[1] flags, b[2] index (mod 6), b[3] start and
// b[4] count (mod fuzzVectors+2; 255 is the 32-bit maximum), b[5] descriptors (mod 5; bit 5
// adds a bool too many, bit 6 bools without DATA_BOOL), b[6] their kinds (2 bits each:
// eventfd, eventfd, nil, pipe), b[7] bool values.
func fuzzRequest(t *testing.T, b []byte, newFd func() *fuzzFd) (r Request, files []*fuzzFd, notEventfd bool) {
	data := [...]uint32{DataNone, DataBool, DataEventfd}
	action := [...]uint32{ActionMask, ActionUnmask, ActionTrigger}
	if b[1] >= 0x80 {
		r.Flags = uint32(b[1]&0x7f) | uint32(b[7])<<24
	} else {
		r.Flags = data[b[1]%3] | action[b[1]/3%3]
	}
	r.Index = uint32(b[2] % 6)
	wide := func(x byte) uint32 {
		if x == 255 {
			return math.MaxUint32
		}
		return uint32(x) % (fuzzVectors + 2)
	}
	r.Start, r.Count = wide(b[3]), wide(b[4])
	if r.Flags&DataBool != 0 || b[5]&0x40 != 0 {
		n := int(min(r.Count, 64))
		if b[5]&0x20 != 0 {
			n++
		}
		for i := 0; i < n; i++ {
			r.Bools = append(r.Bools, b[7]>>(i%8)&1 != 0)
		}
	}
	for i := 0; i < int(b[5]&0x7)%5; i++ {
		switch b[6] >> (2 * i) & 3 {
		case 0, 1:
			fd := newFd()
			r.Files = append(r.Files, fd.give)
			files = append(files, fd)
		case 2:
			r.Files = append(r.Files, nil)
			files = append(files, nil)
		case 3:
			rd, wr, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			rd.Close()
			r.Files = append(r.Files, wr)
			files = append(files, nil)
			notEventfd = true
		}
	}
	return r, files, notEventfd
}

func checkFuzzModel(t *testing.T, c *Controller, m *fuzzModel, base Stats, fds []*fuzzFd) {
	t.Helper()
	held := map[*fuzzFd]bool{m.trigger: true, m.errFd: true, m.reqFd: true}
	for k := range m.msix {
		held[m.msix[k].fd] = true
	}
	for i, fd := range fds {
		var buf [8]byte
		var got uint64
		if n, err := unix.Read(fd.peek, buf[:]); err == nil && n == 8 {
			got = binary.LittleEndian.Uint64(buf[:])
		} else if err != unix.EAGAIN {
			t.Fatalf("eventfd %d: read: %v", i, err)
		}
		if got != fd.want {
			t.Fatalf("eventfd %d: %d signals, want %d", i, got, fd.want)
		}
		if open := !isClosed(fd.give); open != held[fd] {
			t.Fatalf("eventfd %d: open %v, held by the controller %v", i, open, held[fd])
		}
	}
	st := c.Stats()
	pending, tableMasked := 0, 0
	for k := range m.msix {
		if d := st.Delivered[k] - base.Delivered[k]; d != m.delivered[k] {
			t.Fatalf("Delivered[%d] = %d, want %d", k, d, m.delivered[k])
		}
		if m.msix[k].pending {
			pending++
		}
		if m.msix[k].tableMasked {
			tableMasked++
		}
	}
	type pair struct {
		name      string
		got, want uint64
	}
	for _, p := range []pair{
		{"INTxSignals", st.INTxSignals - base.INTxSignals, m.intxN},
		{"ErrSignals", st.ErrSignals - base.ErrSignals, m.errN},
		{"ReqSignals", st.ReqSignals - base.ReqSignals, m.reqN},
		{"Dropped", st.Dropped - base.Dropped, m.dropped},
		{"NoVector", st.NoVector - base.NoVector, m.noVector},
		{"Refused", st.Refused - base.Refused, m.refused},
		{"Saturated", st.Saturated - base.Saturated, 0},
		{"Retargeted", st.Retargeted - base.Retargeted, 0},
		{"Pending", uint64(st.Pending), uint64(pending)},
		{"TableMasked", uint64(st.TableMasked), uint64(tableMasked)},
	} {
		if p.got != p.want {
			t.Fatalf("Stats.%s = %d, want %d", p.name, p.got, p.want)
		}
	}
	if st.TableInUse != m.tableInUse {
		t.Fatalf("Stats.TableInUse = %v, want %v", st.TableInUse, m.tableInUse)
	}
}
