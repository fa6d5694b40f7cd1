package l2

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"
	"vgpu/engine"

	"vgpu/abi"
)

// A test case is a list of steps run against a fresh cache over a fresh memBacking; steps that
// carry a want check it, and a failing step names itself.
type step struct {
	kind  string // see run
	slot  int
	pa    engine.PhysAddr
	va    uint64
	data  []byte // write data, or expected read data
	op    Op
	r     *Range
	stats *statView
	err   error // expected error (errors.Is), for reads and writes
}

// statView is the part of Stats a step checks.
type statView struct {
	Lines, DirtyLines                             int
	Evictions, WriteBackErrors, FillErrors        uint64
	Discards, StaleReads, DirtyFences, Hits, Miss uint64
	Last                                          Event
}

func view(s Stats) statView {
	return statView{
		Lines: s.Lines, DirtyLines: s.DirtyLines, Evictions: s.Evictions,
		WriteBackErrors: s.WriteBackErrors, FillErrors: s.FillErrors, Discards: s.Discards,
		StaleReads: s.StaleReads, DirtyFences: s.DirtyFences, Hits: s.Hits, Miss: s.Misses,
		Last: s.LastEvent,
	}
}

func sys(a uint64) engine.PhysAddr  { return engine.PhysAddr{Domain: engine.DomainSystem, Addr: a} }
func vram(a uint64) engine.PhysAddr { return engine.PhysAddr{Domain: engine.DomainVRAM, Addr: a} }

func wr(slot int, pa engine.PhysAddr, data ...byte) step {
	return step{kind: "write", slot: slot, pa: pa, va: 0x1000 + pa.Addr, data: data}
}
func rd(slot int, pa engine.PhysAddr, want ...byte) step {
	return step{kind: "read", slot: slot, pa: pa, va: 0x1000 + pa.Addr, data: want}
}
func rdErr(pa engine.PhysAddr, n int, err error) step {
	return step{kind: "read", pa: pa, data: make([]byte, n), err: err}
}
func cpu(pa engine.PhysAddr, data ...byte) step { return step{kind: "cpu", pa: pa, data: data} }
func mem(pa engine.PhysAddr, want ...byte) step { return step{kind: "mem", pa: pa, data: want} }
func ru(pa engine.PhysAddr, want ...byte) step  { return step{kind: "ru", pa: pa, data: want} }
func wu(pa engine.PhysAddr, data ...byte) step  { return step{kind: "wu", pa: pa, data: data} }
func apply(op Op, r *Range) step                { return step{kind: "apply", op: op, r: r} }
func fence(slot int, va uint64) step            { return step{kind: "fence", slot: slot, va: va} }
func stats(v statView) step                     { return step{kind: "stats", stats: &v} }
func failWrites(d engine.Domain, line uint64) step {
	return step{kind: "failw", pa: engine.PhysAddr{Domain: d, Addr: line}}
}
func failReads(d engine.Domain, line uint64) step {
	return step{kind: "failr", pa: engine.PhysAddr{Domain: d, Addr: line}}
}
func strict(on bool) step {
	s := step{kind: "strict"}
	if on {
		s.slot = 1
	}
	return s
}
func bytesN(n int, v byte) []byte { return bytes.Repeat([]byte{v}, n) }

// errAny as a step's err accepts any non-nil error.
var errAny = errors.New("any error")

func errMatch(got, want error) bool {
	switch want {
	case nil:
		return got == nil
	case errAny:
		return got != nil
	}
	return errors.Is(got, want)
}

func run(t *testing.T, c *Cache, m *memBacking, steps []step) {
	t.Helper()
	for i, s := range steps {
		where := fmt.Sprintf("step %d (%s %v)", i, s.kind, s.pa)
		switch s.kind {
		case "write":
			if err := c.Write(s.slot, s.pa, s.va, s.data); !errMatch(err, s.err) {
				t.Fatalf("%s: unexpected error %v, want %v", where, err, s.err)
			}
		case "read":
			got := make([]byte, len(s.data))
			if err := c.Read(s.slot, s.pa, s.va, got); !errMatch(err, s.err) {
				t.Fatalf("%s: unexpected error %v, want %v", where, err, s.err)
			}
			if s.err == nil && !bytes.Equal(got, s.data) {
				t.Fatalf("%s: read % x, want % x", where, got, s.data)
			}
		case "ru":
			got := make([]byte, len(s.data))
			if err := c.ReadUncached(s.pa, got); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if !bytes.Equal(got, s.data) {
				t.Fatalf("%s: read % x, want % x", where, got, s.data)
			}
		case "wu":
			if err := c.WriteUncached(s.pa, s.data); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		case "cpu":
			m.cpuWrite(s.pa.Domain, s.pa.Addr, s.data)
		case "mem":
			if got := m.cpuRead(s.pa.Domain, s.pa.Addr, len(s.data)); !bytes.Equal(got, s.data) {
				t.Fatalf("%s: memory holds % x, want % x", where, got, s.data)
			}
		case "apply":
			_ = c.Apply(s.op, s.r)
		case "fence":
			c.FenceCheck(s.slot, s.va)
		case "strict":
			c.SetStrict(s.slot != 0)
		case "stats":
			if got := view(c.Stats()); got != *s.stats {
				t.Fatalf("%s: unexpected stats\n got %+v\nwant %+v", where, got, *s.stats)
			}
		case "failw", "failr":
			write, d, line := s.kind == "failw", s.pa.Domain, s.pa.Addr
			m.fail = func(fd engine.Domain, addr uint64, n int, w bool) error {
				if w == write && fd == d && addr&^lineMask == line {
					return errTestFault
				}
				return nil
			}
		default:
			t.Fatalf("%s: unknown step", where)
		}
	}
}

// fillPattern gives memory recognisable contents: byte i of each domain is i*7+base.
func fillPattern(m *memBacking) {
	for d := range m.mem {
		for i := range m.mem[d] {
			m.mem[d][i] = byte(i*7) + byte(d)*0x80
		}
	}
}

func pat(d engine.Domain, addr uint64, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = byte((int(addr)+i)*7) + byte(d)*0x80
	}
	return out
}

func TestCache(t *testing.T) {
	A, B, C := uint64(0x000), uint64(0x080), uint64(0x100)
	rangeA := &Range{engine.DomainSystem, A, LineBytes}
	tests := []struct {
		name     string
		capacity int
		steps    []step
	}{
		{"miss fills the line, then hits", 8, []step{
			rd(0, sys(A+4), pat(0, A+4, 4)...),
			rd(0, sys(A+100), pat(0, A+100, 4)...),
			stats(statView{Lines: 1, Hits: 1, Miss: 1}),
		}},
		{"a write reaches memory only on write-back", 8, []step{
			wr(1, sys(A+8), 1, 2, 3, 4),
			mem(sys(A+8), pat(0, A+8, 4)...),
			rd(2, sys(A+8), 1, 2, 3, 4),
			stats(statView{Lines: 1, DirtyLines: 1, Hits: 1, Miss: 1}),
			apply(OpWriteBack, nil),
			mem(sys(A+8), 1, 2, 3, 4),
			stats(statView{Lines: 1, Hits: 1, Miss: 1}),
		}},
		{"write-allocate keeps the rest of the line", 8, []step{
			wr(1, sys(A+8), 9, 9),
			apply(OpWriteBack, nil),
			mem(sys(A), append(append(pat(0, A, 8), 9, 9), pat(0, A+10, 118)...)...),
		}},
		{"write-back writes only dirty bytes", 8, []step{
			wr(1, sys(A), 1, 1, 1, 1),
			cpu(sys(A+8), 5, 5, 5, 5),
			apply(OpWriteBack, nil),
			mem(sys(A), append(append([]byte{1, 1, 1, 1}, pat(0, A+4, 4)...), 5, 5, 5, 5)...),
		}},
		{"invalidate writes dirty lines back before dropping them", 8, []step{
			wr(1, vram(B), 7, 7),
			apply(OpInvalidate, nil),
			mem(vram(B), 7, 7),
			stats(statView{Miss: 1}),
		}},
		{"discard drops dirty data", 8, []step{
			wr(1, sys(A), 7, 7),
			apply(OpDiscard, nil),
			mem(sys(A), pat(0, A, 2)...),
			rd(1, sys(A), pat(0, A, 2)...),
			stats(statView{Lines: 1, Discards: 1, Miss: 2}),
		}},
		{"write-back plus invalidate", 8, []step{
			wr(1, sys(A), 7),
			apply(OpWriteBackInvalidate, nil),
			mem(sys(A), 7),
			stats(statView{Miss: 1}),
		}},
		{"range ops touch only their lines", 8, []step{
			wr(1, sys(A), 1), wr(1, sys(B), 2), wr(1, vram(A), 3),
			apply(OpWriteBack, rangeA),
			mem(sys(A), 1), mem(sys(B), pat(0, B, 1)...), mem(vram(A), pat(1, A, 1)...),
			apply(OpDiscard, &Range{engine.DomainSystem, B + 127, 1}),
			mem(sys(B), pat(0, B, 1)...),
			stats(statView{Lines: 2, DirtyLines: 1, Discards: 1, Miss: 3}),
		}},
		{"range ops find lines by scanning when the range is large", 2, []step{
			wr(1, sys(C), 1), wr(1, vram(C), 2),
			apply(OpInvalidate, &Range{engine.DomainSystem, 0, 1 << 40}),
			mem(sys(C), 1), mem(vram(C), pat(1, C, 1)...),
			stats(statView{Lines: 1, DirtyLines: 1, Miss: 2}),
		}},
		{"range running past the end of the address space", 8, []step{
			wr(1, sys(A), 1),
			apply(OpWriteBack, &Range{engine.DomainSystem, math.MaxUint64 - 10, math.MaxUint64}),
			apply(OpWriteBack, &Range{engine.DomainSystem, 0, 0}),
			apply(OpWriteBack, &Range{engine.Domain(9), 0, 100}),
			stats(statView{Lines: 1, DirtyLines: 1, Miss: 1}),
		}},
		{"a CPU write stays hidden until invalidate", 8, []step{
			rd(0, sys(A), pat(0, A, 2)...),
			cpu(sys(A), 0xEE, 0xEE),
			rd(0, sys(A), pat(0, A, 2)...),
			apply(OpInvalidate, rangeA),
			rd(0, sys(A), 0xEE, 0xEE),
		}},
		{"strict: stale read reported, stale data still returned", 8, []step{
			strict(true),
			rd(3, sys(A+16), pat(0, A+16, 4)...),
			cpu(sys(A+17), 0xEE),
			rd(3, sys(A+16), pat(0, A+16, 4)...),
			stats(statView{Lines: 1, StaleReads: 1, Hits: 1, Miss: 1,
				Last: Event{abi.L2_EVENT_STALE_READ, 3, 0x1000 + A + 16}}),
		}},
		{"strict: changes outside the bytes read are not reported", 8, []step{
			strict(true),
			rd(3, sys(A), pat(0, A, 4)...),
			cpu(sys(A+64), 0xEE),
			rd(3, sys(A), pat(0, A, 4)...),
			stats(statView{Lines: 1, Hits: 1, Miss: 1}),
		}},
		{"strict: dirty bytes are newer than memory by design", 8, []step{
			strict(true),
			wr(3, sys(A), 1, 2),
			cpu(sys(A), 0xEE, 0xEE),
			rd(3, sys(A), 1, 2),
			stats(statView{Lines: 1, DirtyLines: 1, Hits: 1, Miss: 1}),
		}},
		{"no stale report without strict mode", 8, []step{
			rd(3, sys(A), pat(0, A, 4)...),
			cpu(sys(A), 0xEE),
			rd(3, sys(A), pat(0, A, 4)...),
			stats(statView{Lines: 1, Hits: 1, Miss: 1}),
		}},
		{"strict: fence while the queue's lines are dirty", 8, []step{
			strict(true),
			wr(3, sys(A), 1),
			fence(4, 0x9000),
			stats(statView{Lines: 1, DirtyLines: 1, Miss: 1}),
			fence(3, 0x9000),
			stats(statView{Lines: 1, DirtyLines: 1, DirtyFences: 1, Miss: 1,
				Last: Event{abi.L2_EVENT_DIRTY_FENCE, 3, 0x9000}}),
			apply(OpWriteBack, nil),
			fence(3, 0x9008),
			stats(statView{Lines: 1, DirtyFences: 1, Miss: 1,
				Last: Event{abi.L2_EVENT_DIRTY_FENCE, 3, 0x9000}}),
		}},
		{"strict: every writer of a shared line is accountable", 8, []step{
			strict(true),
			wr(1, sys(A), 1), wr(2, sys(A+4), 2),
			fence(1, 0x9000),
			stats(statView{Lines: 1, DirtyLines: 1, DirtyFences: 1, Hits: 1, Miss: 1,
				Last: Event{abi.L2_EVENT_DIRTY_FENCE, 1, 0x9000}}),
		}},
		{"fence checks are off without strict mode", 8, []step{
			wr(3, sys(A), 1),
			fence(3, 0x9000),
			stats(statView{Lines: 1, DirtyLines: 1, Miss: 1}),
		}},
		{"least recently used line is evicted", 2, []step{
			rd(0, sys(A), pat(0, A, 1)...),
			rd(0, sys(B), pat(0, B, 1)...),
			rd(0, sys(A), pat(0, A, 1)...), // A is now the most recent
			cpu(sys(A), 0xAA), cpu(sys(B), 0xBB),
			rd(0, sys(C), pat(0, C, 1)...), // evicts B
			rd(0, sys(A), pat(0, A, 1)...), // still cached: old data
			rd(0, sys(B), 0xBB),            // refilled
			stats(statView{Lines: 2, Evictions: 2, Hits: 2, Miss: 4}),
		}},
		{"eviction writes the dirty victim back", 1, []step{
			wr(1, vram(A), 0x11),
			rd(1, vram(B), pat(1, B, 1)...),
			mem(vram(A), 0x11),
			stats(statView{Lines: 1, Evictions: 1, Miss: 2}),
		}},
		{"line straddling the end of memory is served uncached", 8, []step{
			rd(0, vram(0x382), pat(1, 0x382, 4)...), // VRAM is 1000 bytes: line 0x380 is not whole
			wr(0, vram(0x384), 9),
			mem(vram(0x384), 9),
			rdErr(vram(0x3E6), 4, errAny), // the bytes themselves run past the end
			stats(statView{FillErrors: 3, Miss: 3}),
		}},
		{"fill failure with the bytes themselves unreadable", 8, []step{
			failReads(engine.DomainSystem, B),
			rdErr(sys(B+4), 4, errTestFault),
			rd(0, sys(A), pat(0, A, 1)...),
			stats(statView{Lines: 1, FillErrors: 1, Miss: 2}),
		}},
		{"failed write-back drops the line and counts it", 8, []step{
			wr(1, sys(B), 5),
			failWrites(engine.DomainSystem, B),
			apply(OpWriteBack, nil),
			mem(sys(B), pat(0, B, 1)...),
			stats(statView{WriteBackErrors: 1, Miss: 1}),
		}},
		{"failed eviction write-back loses only that line", 1, []step{
			wr(1, sys(A), 5),
			failWrites(engine.DomainSystem, A),
			wr(1, sys(B), 6),
			apply(OpWriteBack, nil),
			mem(sys(A), pat(0, A, 1)...), mem(sys(B), 6),
			stats(statView{Lines: 1, Evictions: 1, WriteBackErrors: 1, Miss: 2}),
		}},
		{"uncached read sees dirty bytes and fresh memory", 8, []step{
			wr(1, sys(A), 1, 1),
			cpu(sys(A+2), 0xCC),
			ru(sys(A), 1, 1, 0xCC),
			rd(1, sys(A+2), pat(0, A+2, 1)...), // the cached copy is still stale
		}},
		{"uncached write updates a resident line and cleans its bytes", 8, []step{
			strict(true),
			wr(1, sys(A), 1, 1),
			wu(sys(A), 2, 2, 2),
			rd(1, sys(A), 2, 2, 2),
			mem(sys(A), 2, 2, 2),
			stats(statView{Lines: 1, Hits: 1, Miss: 1}),
			fence(1, 0),
			stats(statView{Lines: 1, Hits: 1, Miss: 1}),
		}},
		{"uncached access does not allocate", 8, []step{
			wu(vram(A), 3), ru(vram(A), 3),
			stats(statView{}),
		}},
		{"access spanning lines", 8, []step{
			wr(1, sys(A+120), bytesN(140, 0x5A)...),
			rd(1, sys(A+120), bytesN(140, 0x5A)...),
			stats(statView{Lines: 3, DirtyLines: 3, Hits: 3, Miss: 3}),
			apply(OpWriteBack, &Range{engine.DomainSystem, A + 200, 1}),
			stats(statView{Lines: 3, DirtyLines: 2, Hits: 3, Miss: 3}),
		}},
		{"bad domain and wrapping access are refused", 8, []step{
			{kind: "read", pa: engine.PhysAddr{Domain: engine.Domain(2), Addr: 0}, data: make([]byte, 1), err: ErrDomain},
			{kind: "write", pa: sys(math.MaxUint64 - 2), data: make([]byte, 4), err: ErrAddressOverflow},
			rd(0, sys(A), []byte{}...),
			stats(statView{}),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMem(1024, 1000)
			fillPattern(m)
			c := NewSize(m, tt.capacity, nil)
			run(t, c, m, tt.steps)
		})
	}
}

func TestApplyReportsWriteBackFailure(t *testing.T) {
	m := newMem(1024, 1024)
	c := NewSize(m, 8, nil)
	if err := c.Write(1, sys(0x100), 0, []byte{1}); err != nil {
		t.Fatal(err)
	}
	m.fail = func(engine.Domain, uint64, int, bool) error { return errTestFault }
	err := c.Apply(OpInvalidate, nil)
	var wb *WriteBackError
	if !errors.As(err, &wb) || !errors.Is(err, errTestFault) || wb.PA != sys(0x100) {
		t.Fatalf("unexpected error %v, want a *WriteBackError at sys:0x100 wrapping the fault", err)
	}
	if s := c.Stats(); s.Lines != 0 || s.DirtyLines != 0 || s.WriteBackErrors != 1 {
		t.Fatalf("unexpected stats %+v", s)
	}
}

// TestEvictionIsDeterministic runs the same access sequence on two caches and expects the
// same memory traffic, in the same order, and the same resident lines.
func TestEvictionIsDeterministic(t *testing.T) {
	trace := func() ([]string, []key) {
		m := newMem(64<<10, 64<<10)
		m.keep = true
		c := NewSize(m, 16, nil)
		x := uint32(12345)
		for i := 0; i < 5000; i++ {
			x = x*1103515245 + 12345
			d := engine.Domain(x >> 31 & 1)
			addr := uint64(x>>8) % (64<<10 - 8)
			switch x >> 4 % 8 {
			case 0, 1, 2:
				_ = c.Read(int(x%4), engine.PhysAddr{Domain: d, Addr: addr}, addr, make([]byte, 8))
			case 3, 4, 5:
				_ = c.Write(int(x%4), engine.PhysAddr{Domain: d, Addr: addr}, addr, []byte{byte(i), byte(i >> 8)})
			case 6:
				_ = c.Apply(Op(x>>12%7+1), &Range{d, addr, uint64(x>>20) % 4096})
			case 7:
				_ = c.WriteUncached(engine.PhysAddr{Domain: d, Addr: addr}, []byte{byte(i)})
			}
		}
		var keys []key
		for l := c.lru.next; l != &c.lru; l = l.next {
			keys = append(keys, l.key)
		}
		return m.takeOps(), keys
	}
	ops1, keys1 := trace()
	ops2, keys2 := trace()
	if !slices.Equal(ops1, ops2) || !slices.Equal(keys1, keys2) {
		t.Fatalf("two runs of the same sequence differ (%d vs %d memory accesses)", len(ops1), len(ops2))
	}
	if len(keys1) != 16 {
		t.Fatalf("resident lines %d, want a full cache of 16", len(keys1))
	}
}

func TestRegisters(t *testing.T) {
	m := newMem(1024, 1024)
	c := NewSize(m, 8, nil)
	reg := func(r uint32) uint32 { return c.ReadReg(r - abi.BLOCK_L2_BASE) }
	set := func(r, v uint32) { c.WriteReg(r-abi.BLOCK_L2_BASE, v) }

	set(abi.REG_L2_CNTL, abi.REG_L2_CNTL__STRICT_MASK)
	_ = c.Read(5, sys(0), 0x0000_1234_5678_9000, make([]byte, 4))
	m.cpuWrite(engine.DomainSystem, 0, []byte{1})
	_ = c.Read(5, sys(0), 0x0000_1234_5678_9000, make([]byte, 4))
	_ = c.Write(6, sys(0x80), 0, []byte{1})
	want := map[uint32]uint32{
		abi.REG_L2_CNTL:          abi.REG_L2_CNTL__STRICT_MASK,
		abi.REG_L2_STALE_READS:   1,
		abi.REG_L2_DIRTY_FENCES:  0,
		abi.REG_L2_LAST_EVENT:    abi.L2_EVENT_STALE_READ | 5<<abi.REG_L2_LAST_EVENT__SLOT__SHIFT,
		abi.REG_L2_LAST_ADDR_LO:  0x5678_9000,
		abi.REG_L2_LAST_ADDR_HI:  0x1234,
		abi.REG_L2_LINES:         2,
		abi.REG_L2_DIRTY_LINES:   1,
		abi.REG_L2_CONTROL:       0,
		abi.BLOCK_L2_BASE + 0xFC: 0,
	}
	for r, w := range want {
		if got := reg(r); got != w {
			t.Errorf("register %s (%#x) = %#x, want %#x", abi.RegisterNames[r], r, got, w)
		}
	}
	// L2_CONTROL runs asynchronously: poll L2_STATUS.BUSY as a driver does.
	waitIdle := func(done uint32) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for reg(abi.REG_L2_STATUS)&abi.REG_L2_STATUS__BUSY_MASK != 0 || reg(abi.REG_L2_CONTROL_DONE) < done {
			if time.Now().After(deadline) {
				t.Fatalf("L2_STATUS stays busy (%#x, done %d)", reg(abi.REG_L2_STATUS), reg(abi.REG_L2_CONTROL_DONE))
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	set(abi.REG_L2_CONTROL, abi.REG_L2_CONTROL__WB_MASK)
	waitIdle(1)
	if reg(abi.REG_L2_DIRTY_LINES) != 0 || reg(abi.REG_L2_LINES) != 2 || m.cpuRead(engine.DomainSystem, 0x80, 1)[0] != 1 {
		t.Errorf("L2_CONTROL.WB: lines %d dirty %d", reg(abi.REG_L2_LINES), reg(abi.REG_L2_DIRTY_LINES))
	}
	set(abi.REG_L2_CONTROL, abi.REG_L2_CONTROL__WB_MASK|abi.REG_L2_CONTROL__INV_MASK)
	waitIdle(2)
	if reg(abi.REG_L2_STATUS) != 0 {
		t.Errorf("L2_STATUS %#x after a clean pass", reg(abi.REG_L2_STATUS))
	}
	if reg(abi.REG_L2_LINES) != 0 {
		t.Errorf("L2_CONTROL.INV left %d lines", reg(abi.REG_L2_LINES))
	}
	set(abi.REG_L2_CNTL, 0)
	if c.Strict() {
		t.Errorf("strict mode still on")
	}
	c.Reset()
	if reg(abi.REG_L2_STALE_READS) != 0 || reg(abi.REG_L2_LAST_EVENT) != 0 {
		t.Errorf("Reset kept the strict-mode counters")
	}
}

func TestResetDropsWithoutWriteBack(t *testing.T) {
	m := newMem(1024, 1024)
	c := NewSize(m, 8, nil)
	_ = c.Write(1, sys(0), 0, []byte{9})
	c.Reset()
	if got := m.cpuRead(engine.DomainSystem, 0, 1)[0]; got != 0 {
		t.Fatalf("Reset wrote back dirty data")
	}
	if s := c.Stats(); s.Lines != 0 || s.DirtyLines != 0 || c.DirtyLinesOf(1) != 0 {
		t.Fatalf("unexpected stats after Reset: %+v", s)
	}
	// The cache works normally afterwards.
	_ = c.Write(1, sys(0), 0, []byte{7})
	c.WriteBack(nil)
	if got := m.cpuRead(engine.DomainSystem, 0, 1)[0]; got != 7 {
		t.Fatalf("memory holds %d after write-back, want 7", got)
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{
		0: "none", OpWriteBack: "WB", OpInvalidate: "INV", OpDiscard: "DISCARD",
		OpWriteBackInvalidate: "WB+INV", OpWriteBack | OpDiscard | 0x80: "WB+DISCARD+?",
	} {
		if got := op.String(); got != want {
			t.Errorf("Op(%#x).String() = %q, want %q", uint8(op), got, want)
		}
	}
}

// TestConcurrentQueues runs queue-like goroutines, each writing and reading back its own
// region through a small cache (so evictions interleave), while others write back,
// invalidate, fence-check and read registers. Run with -race. At the end every region's last
// data must be in memory after a write-back.
func TestConcurrentQueues(t *testing.T) {
	const (
		queues  = 8
		region  = 2048
		rounds  = 300
		maxLine = 16
	)
	m := newMem(queues*region, queues*region)
	c := NewSize(m, maxLine, nil)
	c.SetStrict(true)
	var wg sync.WaitGroup
	final := make([][]byte, queues)
	for q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := engine.Domain(q % 2)
			base := uint64(q * region)
			cur := make([]byte, region)
			for i := range rounds {
				off := uint64(i*37) % (region - 64)
				chunk := bytesN(1+i%63, byte(q*16+i))
				if err := c.Write(q, engine.PhysAddr{Domain: d, Addr: base + off}, off, chunk); err != nil {
					t.Error(err)
					return
				}
				copy(cur[off:], chunk)
				got := make([]byte, 64)
				if err := c.Read(q, engine.PhysAddr{Domain: d, Addr: base + off}, off, got); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(got, cur[off:off+64]) {
					t.Errorf("queue %d round %d: read back % x, want % x", q, i, got, cur[off:off+64])
					return
				}
				switch i % 50 {
				case 10:
					c.WriteBack(&Range{d, base, region})
				case 20:
					c.Invalidate(nil)
				case 30:
					c.FenceCheck(q, 0)
				case 40:
					_ = c.ReadUncached(engine.PhysAddr{Domain: d, Addr: base + off}, got)
					if !bytes.Equal(got, cur[off:off+64]) {
						t.Errorf("queue %d round %d: uncached read % x, want % x", q, i, got, cur[off:off+64])
						return
					}
				}
				_ = c.ReadReg(regLines)
				_ = c.Stats()
			}
			final[q] = cur
		}()
	}
	wg.Wait()
	c.WriteBack(nil)
	for q := range queues {
		if final[q] == nil {
			continue
		}
		// Bytes a queue never wrote are still 0 in memory and in cur.
		if got := m.cpuRead(engine.Domain(q%2), uint64(q*region), region); !bytes.Equal(got, final[q]) {
			t.Errorf("queue %d: memory differs from its writes after write-back", q)
		}
	}
	if s := c.Stats(); s.DirtyLines != 0 || s.Lines > maxLine || s.StaleReads != 0 {
		t.Errorf("unexpected final stats %+v", s)
	}
}
