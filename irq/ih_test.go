package irq

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/ratelog"
)

// GPU memory of the tests: one byte slice at GPU address ihMemBase. The wptr writeback slot
// sits below the ring; the ring starts at ihRingAddr and may be up to 256 KiB.
const (
	ihMemBase  = abi.GPU_FB_BASE
	ihWBAddr   = ihMemBase + 0x100
	ihRingAddr = ihMemBase + 0x1000
	ihMemSize  = 0x1000 + 256<<10 + 0x1000
	ihVector   = 5
	ihWBFill   = 0xDEADBEEF

	cntlEnable   = abi.REG_IH_RB_CNTL__RB_ENABLE_MASK
	cntlWB       = abi.REG_IH_RB_CNTL__WPTR_WRITEBACK_ENABLE_MASK
	cntlOverflow = abi.REG_IH_RB_CNTL__WPTR_OVERFLOW_ENABLE_MASK
	cntlIntr     = abi.REG_IH_RB_CNTL__ENABLE_INTR_MASK
	cntlClear    = abi.REG_IH_RB_CNTL__WPTR_OVERFLOW_CLEAR_MASK
)

var errUnmapped = errors.New("test memory: address not backed")

type ihWrite struct {
	va uint64
	n  int
}

// ihMem is real memory over a byte slice. hook (if set) runs first on every write, without the
// memory's lock; fail (if set) can refuse a write.
type ihMem struct {
	mu     sync.Mutex
	buf    []byte
	writes []ihWrite
	hook   func(va uint64, p []byte)
	fail   func(va uint64, n int) error
}

func newIHMem() *ihMem {
	m := &ihMem{buf: make([]byte, ihMemSize)}
	binary.LittleEndian.PutUint32(m.buf[ihWBAddr-ihMemBase:], ihWBFill)
	return m
}

func (m *ihMem) Write(va uint64, p []byte) error {
	m.mu.Lock()
	hook, fail := m.hook, m.fail
	m.mu.Unlock()
	if hook != nil {
		hook(va, p)
	}
	if fail != nil {
		if err := fail(va, len(p)); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if va < ihMemBase || va-ihMemBase+uint64(len(p)) > uint64(len(m.buf)) {
		return errUnmapped
	}
	copy(m.buf[va-ihMemBase:], p)
	m.writes = append(m.writes, ihWrite{va, len(p)})
	return nil
}

func (m *ihMem) setHook(f func(uint64, []byte))    { m.mu.Lock(); m.hook = f; m.mu.Unlock() }
func (m *ihMem) setFail(f func(uint64, int) error) { m.mu.Lock(); m.fail = f; m.mu.Unlock() }
func (m *ihMem) dword(va uint64) uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return binary.LittleEndian.Uint32(m.buf[va-ihMemBase:])
}
func (m *ihMem) wb() uint32     { return m.dword(ihWBAddr) }
func (m *ihMem) log() []ihWrite { m.mu.Lock(); defer m.mu.Unlock(); return slices.Clone(m.writes) }
func (m *ihMem) bytesAt(va uint64, n int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.buf[va-ihMemBase:][:n])
}
func (m *ihMem) entry(slot uint32) [8]uint32 {
	return decodeEntry(m.bytesAt(ihRingAddr+uint64(slot), 32))
}
func (m *ihMem) id(slot uint32) uint32 { return m.dword(ihRingAddr + uint64(slot) + 16) }
func decodeEntry(b []byte) (dw [8]uint32) {
	for i := range dw {
		dw[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return dw
}

// raiseRec records raised vectors.
type raiseRec struct {
	mu sync.Mutex
	vs []int
}

func (r *raiseRec) raise(v int) { r.mu.Lock(); r.vs = append(r.vs, v); r.mu.Unlock() }
func (r *raiseRec) n() int      { r.mu.Lock(); defer r.mu.Unlock(); return len(r.vs) }

type ihRig struct {
	h *IH
	m *ihMem
	r *raiseRec
}

// newRig programs a ring of 2^log2 dwords at ihRingAddr, writeback to ihWBAddr, vector ihVector,
// then writes RB_CNTL = size | cntl.
func newRig(t testing.TB, log2, cntl uint32) *ihRig {
	t.Helper()
	g := &ihRig{m: newIHMem(), r: &raiseRec{}}
	g.h = NewIH(g.m, g.r.raise, nil)
	g.program(log2, cntl)
	return g
}

func (g *ihRig) program(log2, cntl uint32) {
	h := g.h
	h.WriteReg(ihRBBaseLo, lo32(ihRingAddr))
	h.WriteReg(ihRBBaseHi, hi32(ihRingAddr))
	h.WriteReg(ihRBWptrAddrLo, lo32(ihWBAddr))
	h.WriteReg(ihRBWptrAddrHi, hi32(ihWBAddr))
	h.WriteReg(ihMSIXVector, ihVector)
	h.WriteReg(ihRBCntl, log2<<abi.REG_IH_RB_CNTL__RB_SIZE__SHIFT|cntl)
}

// push pushes entries tagged with ids (Data[0]).
func (g *ihRig) push(ids ...uint32) {
	for _, id := range ids {
		g.h.Push(engine.IV{Client: abi.IH_CLIENT_GRBM_CP, Source: abi.IH_SRC_CP_EOP, Data: [4]uint32{id}})
	}
}

func lo32(a uint64) uint32 { return uint32(a) }
func hi32(a uint64) uint32 { return uint32(a >> 32) }

func seq(from, to uint32) []uint32 {
	var s []uint32
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func (g *ihRig) wptr() uint32 { return g.h.ReadReg(ihRBWptr) }

func waitIdle(h *IH) {
	h.mu.Lock()
	for h.writing {
		h.idle.Wait()
	}
	h.mu.Unlock()
}

// gate makes the next ring write block until the returned release is called; started is
// closed when that write has begun.
func (g *ihRig) gate() (started <-chan struct{}, release func()) {
	s, r := make(chan struct{}), make(chan struct{})
	var once sync.Once
	g.m.setHook(func(va uint64, p []byte) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(s)
			<-r
		}
	})
	return s, func() { close(r) }
}

func TestIHEntryLayout(t *testing.T) {
	tests := []struct {
		name string
		iv   engine.IV
		ts   time.Duration
		want []byte
	}{
		{
			name: "cp eop compute me1 pipe1 queue1",
			iv:   engine.IV{Client: 0x14, Source: 181, RingID: 1<<2 | 1 | 1<<4, Data: [4]uint32{0x11223344, 0, 0, 0}},
			ts:   0x1234_5678_9ABC,
			want: []byte{
				0x14, 0xB5, 0x15, 0x00, // client 0x14, source 181, ring 0x15, vmid 0
				0xBC, 0x9A, 0x78, 0x56, // timestamp[31:0]
				0x34, 0x12, 0x00, 0x00, // timestamp[47:32]
				0x00, 0x00, 0x00, 0x00, // pasid 0, node 0
				0x44, 0x33, 0x22, 0x11,
				0x00, 0x00, 0x00, 0x00,
				0x00, 0x00, 0x00, 0x00,
				0x00, 0x00, 0x00, 0x00,
			},
		},
		{
			name: "vm fault, vmid keeps 4 bits, pasid, all data",
			iv:   engine.IV{Client: 0x0A, Source: 0, RingID: 0, VMID: 0x13, PASID: 0xBEEF, Data: [4]uint32{0xCAFEF00D, 0x0000_0025, 0xFFFFFFFF, 0x01020304}},
			ts:   0xFFFF_FFFF_FFFF,
			want: []byte{
				0x0A, 0x00, 0x00, 0x03,
				0xFF, 0xFF, 0xFF, 0xFF,
				0xFF, 0xFF, 0x00, 0x00,
				0xEF, 0xBE, 0x00, 0x00,
				0x0D, 0xF0, 0xFE, 0xCA,
				0x25, 0x00, 0x00, 0x00,
				0xFF, 0xFF, 0xFF, 0xFF,
				0x04, 0x03, 0x02, 0x01,
			},
		},
		{
			name: "all ones, timestamp beyond 48 bits wraps",
			iv:   engine.IV{Client: 0xFF, Source: 0xFF, RingID: 0xFF, VMID: 0xFF, PASID: 0xFFFF},
			ts:   1<<48 + 0x0000_0001_0000_0002,
			want: []byte{
				0xFF, 0xFF, 0xFF, 0x0F, // VMID_TYPE (bit 31) and reserved [30:28] stay 0
				0x02, 0x00, 0x00, 0x00,
				0x01, 0x00, 0x00, 0x00, // TIMESTAMP_SRC 0
				0xFF, 0xFF, 0x00, 0x00, // NODE_ID 0, PASID_SRC 0
				0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, 8, cntlEnable|cntlIntr)
			g.h.now = func() time.Duration { return tc.ts }
			g.h.Push(tc.iv)
			if got := g.m.bytesAt(ihRingAddr, 32); !bytes.Equal(got, tc.want) {
				t.Fatalf("entry\n got % x\nwant % x", got, tc.want)
			}
		})
	}
}

func TestIHWptrWriteback(t *testing.T) {
	tests := []struct {
		name string
		cntl uint32
		wb   bool
	}{
		{"writeback on", cntlEnable | cntlWB | cntlIntr, true},
		{"writeback off", cntlEnable | cntlIntr, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, 8, tc.cntl)
			for k := uint32(1); k <= 3; k++ {
				g.push(k)
				if got := g.wptr(); got != 32*k {
					t.Fatalf("RB_WPTR = %#x, want %#x", got, 32*k)
				}
				want := uint32(ihWBFill)
				if tc.wb {
					want = 32 * k
				}
				if got := g.m.wb(); got != want {
					t.Fatalf("writeback slot = %#x, want %#x", got, want)
				}
			}
			// Each push: the entry, then (if enabled) the wptr, then the interrupt.
			var want []ihWrite
			for k := range 3 {
				want = append(want, ihWrite{ihRingAddr + uint64(32*k), 32})
				if tc.wb {
					want = append(want, ihWrite{ihWBAddr, 4})
				}
			}
			if got := g.m.log(); !slices.Equal(got, want) {
				t.Fatalf("writes %v, want %v", got, want)
			}
			if g.r.n() != 3 {
				t.Fatalf("raised %d times, want 3", g.r.n())
			}
		})
	}
}

// TestIHWriteOrder checks that the wptr is written back only after the entry and the interrupt
// comes after both, by looking at memory from inside raise.
func TestIHWriteOrder(t *testing.T) {
	m := newIHMem()
	var h *IH
	var seen []string
	h = NewIH(m, func(v int) {
		seen = append(seen, fmt.Sprintf("raise %d wb=%#x id=%d", v, m.wb(), m.id(h.ReadReg(ihRBWptr)-32)))
	}, nil)
	g := &ihRig{h: h, m: m}
	g.program(8, cntlEnable|cntlWB|cntlIntr)
	g.push(7, 8)
	want := []string{"raise 5 wb=0x20 id=7", "raise 5 wb=0x40 id=8"}
	if !slices.Equal(seen, want) {
		t.Fatalf("got %q, want %q", seen, want)
	}
}

func TestIHWrapAround(t *testing.T) {
	g := newRig(t, 8, cntlEnable|cntlWB|cntlIntr) // 1 KiB: 32 slots, 31 usable
	const size = 1024
	next, rptr := uint32(0), uint32(0)
	for round := range 30 {
		n := uint32(1 + round%7)
		g.push(seq(next, next+n)...)
		wptr := g.m.wb()
		// The driver consumes everything between rptr and the written-back wptr.
		for rptr != wptr {
			if id := g.m.id(rptr); id != next {
				t.Fatalf("round %d: slot %#x holds id %d, want %d", round, rptr, id, next)
			}
			next++
			rptr = (rptr + 32) % size
		}
		g.h.WriteReg(ihRBRptr, rptr)
	}
	st := g.h.Stats()
	if st.Entries != uint64(next) || st.Dropped != 0 || next < 3*size/32 {
		t.Fatalf("stats %+v after %d entries (want at least 3 laps)", st, next)
	}
	if got := g.wptr(); got != next*32%size {
		t.Fatalf("RB_WPTR %#x, want %#x", got, next*32%size)
	}
}

func TestIHOverflow(t *testing.T) {
	tests := []struct {
		name     string
		overflow bool
		batched  bool // entries 1.. arrive while entry 0 is being written: multi-entry runs
		rptr     uint32
	}{
		{"drop when full", false, false, 0},
		{"drop when full, batched", false, true, 0},
		{"drop when full, rptr mid-ring", false, false, 0x240},
		{"overwrite oldest", true, false, 0},
		{"overwrite oldest, batched", true, true, 0},
		{"overwrite oldest, rptr mid-ring", true, false, 0x240},
	}
	const slots, pushed = 32, 40
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cntl := uint32(cntlEnable | cntlWB | cntlIntr)
			if tc.overflow {
				cntl |= cntlOverflow
			}
			g := newRig(t, 8, cntl)
			// Start from an empty ring at rptr = wptr = start: push, and let the driver consume.
			start := tc.rptr
			g.push(seq(1000, 1000+start/32)...)
			g.h.WriteReg(ihRBRptr, start)
			if g.wptr() != start {
				t.Fatalf("setup: wptr %#x", g.wptr())
			}
			base := g.h.Stats()
			if tc.batched {
				started, release := g.gate()
				done := make(chan struct{})
				go func() { g.push(0); close(done) }()
				<-started
				g.push(seq(1, pushed)...)
				release()
				<-done
				waitIdle(g.h)
			} else {
				g.push(seq(0, pushed)...)
			}
			st := g.h.Stats()
			entries, dropped := st.Entries-base.Entries, st.Dropped-base.Dropped
			wptr := g.wptr()
			if !tc.overflow {
				if entries != slots-1 || dropped != pushed-(slots-1) || st.Overflows != 0 {
					t.Fatalf("entries %d dropped %d overflows %d, want %d, %d, 0", entries, dropped, st.Overflows, slots-1, pushed-(slots-1))
				}
				want := (start + (slots-1)*32) % (slots * 32)
				if wptr != want || g.m.wb() != want {
					t.Fatalf("RB_WPTR %#x writeback %#x, want %#x without RB_OVERFLOW", wptr, g.m.wb(), want)
				}
				for i := range uint32(slots - 1) {
					if id := g.m.id((start + 32*i) % (slots * 32)); id != i {
						t.Fatalf("slot %d holds %d", i, id)
					}
				}
				return
			}
			if entries != pushed || dropped != 0 || st.Overflows != pushed-(slots-1) {
				t.Fatalf("entries %d dropped %d overflows %d, want %d, 0, %d", entries, dropped, st.Overflows, pushed, pushed-(slots-1))
			}
			want := (start+pushed*32)%(slots*32) | abi.REG_IH_RB_WPTR__RB_OVERFLOW_MASK
			if wptr != want || g.m.wb() != want {
				t.Fatalf("RB_WPTR %#x writeback %#x, want %#x", wptr, g.m.wb(), want)
			}
			// The newest 32 entries are in the ring; the oldest were overwritten.
			for i := uint32(pushed - slots); i < pushed; i++ {
				if id := g.m.id((start + 32*i) % (slots * 32)); id != i {
					t.Fatalf("entry %d: slot holds %d", i, id)
				}
			}
		})
	}
}

func TestIHOverflowClear(t *testing.T) {
	cntl := uint32(8<<1 | cntlEnable | cntlWB | cntlIntr | cntlOverflow)
	g := newRig(t, 8, cntl&^(8<<1))
	g.push(seq(0, 32)...)
	if g.wptr()&abi.REG_IH_RB_WPTR__RB_OVERFLOW_MASK == 0 {
		t.Fatalf("RB_WPTR %#x: no overflow after 32 entries in 31 slots", g.wptr())
	}
	// amdgpu pulses the clear bit: write 1 then 0.
	g.h.WriteReg(ihRBCntl, cntl|cntlClear)
	if got := g.h.ReadReg(ihRBCntl); got != cntl {
		t.Fatalf("RB_CNTL reads %#x after clear, want %#x (clear is an action)", got, cntl)
	}
	g.h.WriteReg(ihRBCntl, cntl)
	if got := g.wptr(); got != 0 {
		t.Fatalf("RB_WPTR %#x after clear, want 0", got)
	}
	// The driver resumes at wptr+32 and catches up; the next entry is written back without the flag.
	g.h.WriteReg(ihRBRptr, 0)
	g.push(99)
	if g.wptr() != 32 || g.m.wb() != 32 {
		t.Fatalf("RB_WPTR %#x writeback %#x, want 0x20", g.wptr(), g.m.wb())
	}
}

func TestIHRptrRearm(t *testing.T) {
	tests := []struct {
		name   string
		cntl   uint32
		pushes int
		rptr   uint32
		viaDB  bool
		raises int // after the rptr write
	}{
		{"entries remain", cntlEnable | cntlIntr, 3, 32, false, 4},
		{"entries remain, doorbell", cntlEnable | cntlIntr, 3, 64, true, 4},
		{"all consumed", cntlEnable | cntlIntr, 3, 96, false, 3},
		{"all consumed, doorbell", cntlEnable | cntlIntr, 3, 96, true, 3},
		{"empty ring", cntlEnable | cntlIntr, 0, 0, false, 0},
		{"interrupts off", cntlEnable, 3, 32, false, 0},
		{"rptr beyond ring is masked", cntlEnable | cntlIntr, 3, 1024 + 96, false, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, 8, tc.cntl)
			g.push(seq(0, uint32(tc.pushes))...)
			if tc.viaDB {
				g.h.SetRPTR(tc.rptr)
			} else {
				g.h.WriteReg(ihRBRptr, tc.rptr)
			}
			if n := g.r.n(); n != tc.raises {
				t.Fatalf("raised %d times, want %d", n, tc.raises)
			}
			for _, v := range g.r.vs {
				if v != ihVector {
					t.Fatalf("raised vector %d, want %d", v, ihVector)
				}
			}
			if got := g.h.ReadReg(ihRBRptr); got != tc.rptr%1024 {
				t.Fatalf("RB_RPTR reads %#x", got)
			}
		})
	}
}

func TestIHDisabled(t *testing.T) {
	g := newRig(t, 8, cntlWB|cntlIntr) // RB_ENABLE clear
	g.push(1, 2)
	if st := g.h.Stats(); st.Dropped != 2 || st.Entries != 0 {
		t.Fatalf("stats %+v", st)
	}
	if g.h.ReadReg(ihDropped) != 2 || len(g.m.log()) != 0 || g.r.n() != 0 {
		t.Fatalf("DROPPED %d, writes %v, raises %d", g.h.ReadReg(ihDropped), g.m.log(), g.r.n())
	}

	// Enable, use, disable: both pointers return to 0 and nothing more is written.
	g.h.WriteReg(ihRBCntl, 8<<1|cntlEnable|cntlWB|cntlIntr)
	g.push(3, 4, 5)
	g.h.WriteReg(ihRBRptr, 32)
	g.h.WriteReg(ihRBCntl, 8<<1|cntlWB|cntlIntr)
	if g.wptr() != 0 || g.h.ReadReg(ihRBRptr) != 0 {
		t.Fatalf("after disable RB_WPTR %#x RB_RPTR %#x", g.wptr(), g.h.ReadReg(ihRBRptr))
	}
	writes := len(g.m.log())
	g.push(6)
	if len(g.m.log()) != writes || g.h.ReadReg(ihDropped) != 3 || g.h.ReadReg(ihEntries) != 3 {
		t.Fatalf("disabled ring: writes %d→%d DROPPED %d ENTRIES %d", writes, len(g.m.log()), g.h.ReadReg(ihDropped), g.h.ReadReg(ihEntries))
	}
}

func TestIHConcurrentPush(t *testing.T) {
	const goroutines, each = 16, 400 // 6400 entries < 8191 usable slots
	g := newRig(t, 16, cntlEnable|cntlWB|cntlIntr)
	// Calling back into the IH from the memory write and from raise deadlocks if the IH holds
	// its lock there.
	g.m.setHook(func(uint64, []byte) { g.h.ReadReg(ihRBWptr) })
	g.h.raise = func(v int) { g.h.ReadReg(ihRBRptr); g.r.raise(v) }

	stop := make(chan struct{})
	var regs sync.WaitGroup
	regs.Go(func() { // the worker: register traffic meanwhile
		for {
			select {
			case <-stop:
				return
			default:
			}
			g.h.ReadReg(ihRBWptr)
			g.h.WriteReg(ihMSIXVector, ihVector)
			g.h.SetRPTR(0)
			g.h.Stats()
		}
	})
	var wg sync.WaitGroup
	for gi := range uint32(goroutines) {
		wg.Go(func() {
			for i := range uint32(each) {
				g.h.Push(engine.IV{Client: abi.IH_CLIENT_GRBM_CP, Source: abi.IH_SRC_CP_EOP, RingID: uint8(gi), Data: [4]uint32{gi<<16 | i}})
			}
		})
	}
	wg.Wait()
	waitIdle(g.h) // a writer past its budget may have handed off
	close(stop)
	regs.Wait()

	const n = goroutines * each
	if st := g.h.Stats(); st.Entries != n || st.Dropped != 0 || st.Pending != 0 {
		t.Fatalf("stats %+v, want %d entries", st, n)
	}
	if g.wptr() != n*32 || g.m.wb() != n*32 {
		t.Fatalf("RB_WPTR %#x writeback %#x, want %#x", g.wptr(), g.m.wb(), n*32)
	}
	seen := make(map[uint32]bool, n)
	last := make([]int64, goroutines)
	for i := range last {
		last[i] = -1
	}
	var lastTS uint64
	for s := uint32(0); s < n; s++ {
		e := g.m.entry(32 * s)
		id := e[4]
		gi, i := id>>16, int64(id&0xFFFF)
		if seen[id] || gi >= goroutines || uint32(e[0]>>16&0xFF) != gi {
			t.Fatalf("slot %d: bad or duplicate entry %#x (dw0 %#x)", s, id, e[0])
		}
		seen[id] = true
		if i <= last[gi] {
			t.Fatalf("slot %d: goroutine %d entry %d after %d (push order lost)", s, gi, i, last[gi])
		}
		last[gi] = i
		ts := uint64(e[2]&0xFFFF)<<32 | uint64(e[1])
		if ts < lastTS {
			t.Fatalf("slot %d: timestamp %d before %d", s, ts, lastTS)
		}
		lastTS = ts
	}
	if g.r.n() == 0 {
		t.Fatal("never raised")
	}
}

func TestIHMemoryFailure(t *testing.T) {
	ringFails := func(va uint64, n int) error {
		if va >= ihRingAddr {
			return errUnmapped
		}
		return nil
	}
	wbFails := func(va uint64, n int) error {
		if va == ihWBAddr {
			return errUnmapped
		}
		return nil
	}
	tests := []struct {
		name        string
		fail        func(uint64, int) error
		base        uint64
		wantEntries uint64
		wantDropped uint64
		wantWErr    uint64
		wantWBErr   uint64
		wantWptr    uint32
		wantRaises  int
	}{
		{"ring write fails", ringFails, ihRingAddr, 0, 1, 1, 0, 0, 0},
		{"ring not backed", nil, 0x4000_0000, 0, 1, 1, 0, 0, 0},
		{"writeback fails", wbFails, ihRingAddr, 1, 0, 0, 1, 32, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logBuf bytes.Buffer
			g := newRig(t, 8, 0)
			g.h.SetLimiter(ratelog.New(slog.New(slog.NewTextHandler(&logBuf, nil)), time.Second, 1))
			g.h.WriteReg(ihRBBaseLo, lo32(tc.base))
			g.h.WriteReg(ihRBBaseHi, hi32(tc.base))
			g.h.WriteReg(ihRBCntl, 8<<1|cntlEnable|cntlWB|cntlIntr)
			g.m.setFail(tc.fail)
			g.push(1)
			st := g.h.Stats()
			if st.Entries != tc.wantEntries || st.Dropped != tc.wantDropped || st.WriteErrors != tc.wantWErr || st.WritebackErrors != tc.wantWBErr {
				t.Fatalf("stats %+v", st)
			}
			if g.wptr() != tc.wantWptr || g.r.n() != tc.wantRaises {
				t.Fatalf("RB_WPTR %#x raises %d", g.wptr(), g.r.n())
			}
			if !bytes.Contains(logBuf.Bytes(), []byte("ih: ")) {
				t.Fatalf("failure not logged: %q", logBuf.String())
			}
			// Many more failures are logged once (rate limit).
			g.push(seq(2, 50)...)
			if lines := bytes.Count(logBuf.Bytes(), []byte("\n")); lines != 1 {
				t.Fatalf("%d log lines, want 1:\n%s", lines, logBuf.String())
			}
			// Once memory works again, the next entry lands where the failed one would have.
			if tc.wantEntries == 0 {
				g.m.setFail(nil)
				g.h.WriteReg(ihRBBaseLo, lo32(ihRingAddr))
				g.h.WriteReg(ihRBBaseHi, hi32(ihRingAddr))
				g.push(77)
				if g.wptr() != 32 || g.m.id(0) != 77 || g.m.wb() != 32 || g.r.n() != 1 {
					t.Fatalf("after recovery RB_WPTR %#x slot0 %d wb %#x raises %d", g.wptr(), g.m.id(0), g.m.wb(), g.r.n())
				}
			}
		})
	}
}

// TestIHReconfiguredDuringWrite moves or resets the ring while an entry is being written: the
// entry must not be published into the new ring.
func TestIHReconfiguredDuringWrite(t *testing.T) {
	tests := []struct {
		name        string
		change      func(h *IH)
		wantDropped uint64
		wantCntl    uint32
	}{
		{"base moved", func(h *IH) { h.WriteReg(ihRBBaseLo, lo32(ihRingAddr+0x1000)) }, 1, 8<<1 | cntlEnable | cntlWB | cntlIntr},
		{"size changed", func(h *IH) { h.WriteReg(ihRBCntl, 9<<1|cntlEnable|cntlWB|cntlIntr) }, 1, 9<<1 | cntlEnable | cntlWB | cntlIntr},
		{"disabled and enabled again", func(h *IH) {
			h.WriteReg(ihRBCntl, 8<<1)
			h.WriteReg(ihRBCntl, 8<<1|cntlEnable|cntlWB|cntlIntr)
		}, 1, 8<<1 | cntlEnable | cntlWB | cntlIntr},
		{"reset", func(h *IH) { h.Reset() }, 0, 8 << 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, 8, cntlEnable|cntlWB|cntlIntr)
			started, release := g.gate()
			done := make(chan struct{})
			go func() { g.push(1); close(done) }()
			<-started
			tc.change(g.h)
			release()
			<-done
			if st := g.h.Stats(); st.Entries != 0 || st.Dropped != tc.wantDropped {
				t.Fatalf("stats %+v", st)
			}
			if g.wptr() != 0 || g.m.wb() != ihWBFill || g.r.n() != 0 || g.h.ReadReg(ihRBCntl) != tc.wantCntl {
				t.Fatalf("RB_WPTR %#x writeback %#x raises %d RB_CNTL %#x", g.wptr(), g.m.wb(), g.r.n(), g.h.ReadReg(ihRBCntl))
			}
		})
	}
}

func TestIHBacklogAndHandOff(t *testing.T) {
	g := newRig(t, 8, cntlEnable|cntlWB|cntlIntr)
	g.h.pend = make([][ihEntryBytes]byte, 4)
	g.h.budget = 1 // the first writer hands off after entry 0
	started, release := g.gate()
	done := make(chan struct{})
	go func() { g.push(0); close(done) }()
	<-started
	g.push(1, 2, 3, 4) // they wait in the backlog
	fifth := make(chan struct{})
	go func() { g.push(5); close(fifth) }() // finds the backlog full and waits
	for g.h.Stats().Stalls == 0 {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-fifth:
		t.Fatal("Push returned with the backlog full")
	default:
	}
	if st := g.h.Stats(); st.Pending != 4 || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
	release()
	<-done
	<-fifth
	waitIdle(g.h)
	if st := g.h.Stats(); st.Entries != 6 || st.Dropped != 0 || st.Pending != 0 || st.Stalls != 1 {
		t.Fatalf("stats %+v", st)
	}
	for i, want := range []uint32{0, 1, 2, 3, 4, 5} {
		if id := g.m.id(uint32(32 * i)); id != want {
			t.Fatalf("slot %d holds %d, want %d", i, id, want)
		}
	}
	if g.m.wb() != 6*32 {
		t.Fatalf("writeback %#x", g.m.wb())
	}
}

func TestIHRegisters(t *testing.T) {
	tests := []struct {
		off, write, read uint32
	}{
		{ihRBBaseLo, 0x12345678, 0x12345600},
		{ihRBBaseHi, 0xFFFFFFFF, 0xFFFF},
		{ihRBWptrAddrLo, 0x1007, 0x1004},
		{ihRBWptrAddrHi, 0x12345678, 0x5678},
		{ihDoorbellRptr, 0xFFFFFFFF, 0x13FFFFFF},
		{ihMSIXVector, 9, 9},
		{ihRBCntl, 0xFFFFFFFF, 0x00030121},                     // RB_SIZE 31 → 16; clear bit not stored
		{ihRBCntl, 3<<1 | cntlEnable, 8<<1 | cntlEnable},       // RB_SIZE 3 → 8
		{ihRBCntl, 12<<1 | cntlOverflow, 12<<1 | cntlOverflow}, // in range
		{ihRBRptr, 0x12345, 0x344},                             // masked to the 1 KiB ring, dword granular
		{ihRBWptr, 0x100, 0},                                   // read-only
		{ihEntries, 5, 0},
		{ihDropped, 5, 0},
		{0x80, 1, 0}, // unclaimed
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%#x=%#x", tc.off, tc.write), func(t *testing.T) {
			var logBuf bytes.Buffer
			h := NewIH(newIHMem(), func(int) {}, slog.New(slog.NewTextHandler(&logBuf, nil)))
			h.WriteReg(tc.off, tc.write)
			if got := h.ReadReg(tc.off); got != tc.read {
				t.Fatalf("reads %#x, want %#x", got, tc.read)
			}
			clamped := tc.off == ihRBCntl && tc.write>>1&0x1F != tc.read>>1&0x1F
			if logged := bytes.Contains(logBuf.Bytes(), []byte("RB_SIZE")); logged != clamped {
				t.Fatalf("clamp logged %v, want %v: %q", logged, clamped, logBuf.String())
			}
		})
	}
	h := NewIH(newIHMem(), func(int) {}, nil)
	if dw, on := h.DoorbellRPTR(); dw != 0 || on {
		t.Fatalf("DoorbellRPTR after reset = %d, %v", dw, on)
	}
	h.WriteReg(ihDoorbellRptr, abi.REG_IH_DOORBELL_RPTR__ENABLE_MASK|0x1234)
	if dw, on := h.DoorbellRPTR(); dw != 0x1234 || !on {
		t.Fatalf("DoorbellRPTR = %#x, %v", dw, on)
	}
}

func TestIHReset(t *testing.T) {
	g := newRig(t, 10, cntlEnable|cntlWB|cntlIntr|cntlOverflow)
	g.h.WriteReg(ihDoorbellRptr, 0x10000010)
	g.push(seq(0, 300)...)
	g.h.WriteReg(ihRBRptr, 64)
	g.h.Reset()
	want := map[uint32]uint32{ihRBCntl: IHMinRingLog2 << 1}
	for off := uint32(0); off < abi.BLOCK_IH_SIZE; off += 4 {
		if got := g.h.ReadReg(off); got != want[off] {
			t.Errorf("register %#x reads %#x after reset, want %#x", off, got, want[off])
		}
	}
	if st := g.h.Stats(); st != (IHStats{}) {
		t.Errorf("stats after reset %+v", st)
	}
	// Reprogrammed, it starts from slot 0 with a fresh clock.
	g.program(8, cntlEnable|cntlWB|cntlIntr)
	g.push(1)
	if g.wptr() != 32 || g.m.id(0) != 1 || g.h.ReadReg(ihEntries) != 1 {
		t.Fatalf("after reset RB_WPTR %#x slot0 %d ENTRIES %d", g.wptr(), g.m.id(0), g.h.ReadReg(ihEntries))
	}
}

// FuzzIHRegisters drives the IH with arbitrary register writes, pushes, rptr moves, resets and
// failing memory. It must not panic, must write only 32-byte-aligned entries inside
// [base, base+size) or the 4-byte wptr writeback, and must account for every push.
func FuzzIHRegisters(f *testing.F) {
	f.Add([]byte{0, 0, 0x03, 0x01, 0x00, 0x00, 4, 4, 4, 5, 0x20, 0, 0, 0})
	f.Add([]byte{1, 0, 0x00, 0x10, 0x00, 0x00, 0, 0, 0x11, 0x03, 0x01, 0x00, 4, 4, 4, 4, 6, 4, 7, 4})
	f.Add([]byte{0, 5, 0x00, 0x01, 0x00, 0x00, 0, 0, 0x01, 0x01, 0x03, 0x80, 4, 8, 4, 4, 0, 0, 0x01, 0x00, 0x00, 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		var h *IH
		var failing bool
		var bad string
		mem := fuzzMem(func(va uint64, p []byte) error {
			base := uint64(h.ReadReg(ihRBBaseHi))<<32 | uint64(h.ReadReg(ihRBBaseLo))
			size := uint64(4) << (h.ReadReg(ihRBCntl) >> 1 & 0x1F)
			wb := uint64(h.ReadReg(ihRBWptrAddrHi))<<32 | uint64(h.ReadReg(ihRBWptrAddrLo))
			inRing := va >= base && va+uint64(len(p)) <= base+size && (va-base)%32 == 0 && len(p)%32 == 0 && len(p) > 0
			isWB := va == wb && len(p) == 4
			if !inRing && !isWB && bad == "" {
				bad = fmt.Sprintf("write of %d bytes at %#x: ring [%#x, %#x), writeback %#x", len(p), va, base, base+size, wb)
			}
			if failing {
				return errUnmapped
			}
			return nil
		})
		h = NewIH(mem, func(int) { h.ReadReg(ihRBRptr) }, nil)
		var pushes uint64
		regs := []uint32{ihRBCntl, ihRBBaseLo, ihRBBaseHi, ihRBRptr, ihRBWptr, ihRBWptrAddrLo, ihRBWptrAddrHi, ihDoorbellRptr, ihMSIXVector, ihEntries, ihDropped, 0x2C}
		for len(data) > 0 {
			op := data[0]
			data = data[1:]
			arg := func() uint32 {
				var b [4]byte
				n := copy(b[:], data)
				data = data[n:]
				return binary.LittleEndian.Uint32(b[:])
			}
			switch op % 8 {
			case 0, 1:
				off := regs[int(op/8)%len(regs)]
				h.WriteReg(off, arg())
			case 2:
				h.SetRPTR(arg())
			case 3:
				failing = !failing
			case 4, 5:
				n := int(op/8)%40 + 1
				for i := range n {
					h.Push(engine.IV{Client: op, Source: uint8(i), VMID: op, PASID: uint16(pushes), Data: [4]uint32{uint32(pushes)}})
					pushes++
				}
			case 6:
				h.Reset()
				pushes = 0
			case 7:
				h.ReadReg(uint32(op) * 4)
			}
			if bad != "" {
				t.Fatal(bad)
			}
			size := uint32(4) << (h.ReadReg(ihRBCntl) >> 1 & 0x1F)
			if size < 1<<10 || size > 256<<10 {
				t.Fatalf("ring size %d", size)
			}
			wptr := h.ReadReg(ihRBWptr) &^ abi.REG_IH_RB_WPTR__RB_OVERFLOW_MASK
			if wptr >= size || wptr%32 != 0 || h.ReadReg(ihRBRptr) >= size {
				t.Fatalf("RB_WPTR %#x RB_RPTR %#x with ring size %#x", wptr, h.ReadReg(ihRBRptr), size)
			}
			if st := h.Stats(); st.Entries+st.Dropped != pushes || st.Pending != 0 {
				t.Fatalf("stats %+v after %d pushes", st, pushes)
			}
		}
	})
}

type fuzzMem func(va uint64, p []byte) error

func (f fuzzMem) Write(va uint64, p []byte) error { return f(va, p) }
