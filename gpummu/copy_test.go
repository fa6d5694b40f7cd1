package gpummu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/l2"
)

// directMem adds l2.DirectCopier to memBacking; it declines where an access would fail.
type directMem struct {
	*memBacking
	copies atomic.Int64
}

func (m *directMem) CopyPhys(dst, src engine.PhysAddr, n uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ok := func(pa engine.PhysAddr, write bool) bool {
		mem := m.mem[pa.Domain]
		if pa.Addr > uint64(len(mem)) || n > uint64(len(mem))-pa.Addr {
			return false
		}
		return m.fail == nil || m.fail(pa.Domain, pa.Addr, int(n), write) == nil
	}
	if !ok(src, false) || !ok(dst, true) {
		return l2.ErrNotDirect
	}
	copy(m.mem[dst.Domain][dst.Addr:dst.Addr+n], m.mem[src.Domain][src.Addr:src.Addr+n])
	m.copies.Add(1)
	return nil
}

// newCopyWorld is newWorld over a backing that can copy directly (or not), with memory filled
// with a pattern.
func newCopyWorld(t *testing.T, direct bool) (*world, *directMem) {
	w := newWorld(t)
	for d := range 2 {
		for i := range w.mem.mem[d] {
			if d == int(engine.DomainSystem) && i >= sysTable && i < sysTable+gartPages*8 {
				continue // the GART table
			}
			w.mem.mem[d][i] = byte(i*7+i>>9) ^ byte(d*0x55)
		}
	}
	dm := &directMem{memBacking: w.mem}
	if direct {
		w.cache = l2.NewSize(dm, 256, nil)
		w.mmu.cache, w.mmu.b = w.cache, dm
	}
	return w, dm
}

func TestCopy(t *testing.T) {
	bypass := engine.Access{Slot: 2, Bypass: true}
	cached := engine.Access{Slot: 2}
	tests := []struct {
		name     string
		a        engine.Access
		dst, src uint64
		n        uint64
		setup    func(w *world)
		direct   int64  // direct copies expected (with a direct backing)
		reason   uint32 // expected fault reason; 0: success
	}{
		{name: "fb-to-fb", a: bypass, dst: fb + 0x80000, src: fb + 0x10000, n: 64 << 10, direct: 1},
		{name: "fb-to-fb-unaligned", a: bypass, dst: fb + 0x80003, src: fb + 0x10ffd, n: 10000, direct: 1},
		{name: "gart-contiguous-to-fb", a: bypass, dst: fb + 0x80000, src: page(10) + 100, n: 5*PageSize + 50, direct: 1},
		{name: "fb-to-gart-contiguous", a: bypass, dst: page(10), src: fb + 0x1000, n: 6 * PageSize, direct: 1},
		{name: "gart-mixed-pages", a: bypass, dst: fb + 0x80000, src: page(0), n: 2 * PageSize, direct: 2},
		{name: "cached-policy-slow", a: cached, dst: fb + 0x80000, src: page(10), n: 3 * PageSize},
		{name: "uc-pages-without-bypass", a: cached, dst: page(8), src: page(5), n: PageSize, direct: 1},
		{name: "uc-to-cached-page-slow", a: cached, dst: page(10), src: page(5), n: PageSize},
		{name: "read-only-source", a: bypass, dst: fb + 0x80000, src: page(3), n: PageSize, direct: 1},
		{name: "read-only-destination", a: bypass, dst: page(3), src: fb, n: 16, reason: abi.VM_FAULT_NO_WRITE},
		{name: "write-only-source", a: bypass, dst: fb, src: page(4), n: 16, reason: abi.VM_FAULT_NO_READ},
		{name: "write-only-destination", a: bypass, dst: page(4), src: fb, n: PageSize, direct: 1},
		{name: "invalid-source-page-later", a: bypass, dst: fb + 0x80000, src: page(1), n: 2 * PageSize, direct: 1, reason: abi.VM_FAULT_INVALID_PTE},
		{name: "invalid-destination", a: bypass, dst: page(9), src: fb, n: 16, reason: abi.VM_FAULT_INVALID_PTE},
		{name: "outside-gart", a: bypass, dst: fb, src: page(gartPages), n: 16, reason: abi.VM_FAULT_OUTSIDE},
		{name: "vmid-1", a: engine.Access{VMID: 1, Bypass: true}, dst: fb, src: fb + 0x1000, n: 16, reason: abi.VM_FAULT_OUTSIDE},
		{name: "beyond-vram", a: bypass, dst: fb, src: page(6), n: 16, reason: abi.VM_FAULT_BACKING},
		{name: "fb-runs-past-vram-end", a: bypass, dst: fb + vramSize - 8, src: fb, n: 16, direct: 1, reason: abi.VM_FAULT_OUTSIDE},
		{name: "unmapped-system", a: bypass, dst: fb, src: page(7), n: 16, reason: abi.VM_FAULT_BACKING},
		{name: "backing-refuses", a: bypass, dst: fb, src: page(10), n: 16, reason: abi.VM_FAULT_BACKING, setup: func(w *world) {
			w.mem.fail = func(d engine.Domain, addr uint64, n int, write bool) error {
				if d == engine.DomainSystem && addr >= 0x30000 {
					return errTestFault // Bus Master off, say
				}
				return nil
			}
		}},
		{name: "dirty-line-in-source", a: bypass, dst: fb + 0x80000, src: fb + 0x10000, n: 8192, setup: func(w *world) {
			w.mmu.Write(cached, fb+0x10f00, marker)
		}},
		{name: "dirty-line-in-gart-source", a: bypass, dst: fb + 0x80000, src: page(10), n: 3 * PageSize, setup: func(w *world) {
			w.mmu.Write(cached, page(11)+5, marker)
		}},
		{name: "clean-line-in-destination", a: bypass, dst: fb + 0x80000, src: fb + 0x10000, n: 8192, setup: func(w *world) {
			w.mmu.Read(cached, fb+0x81000, make([]byte, 4))
		}},
		{name: "dirty-line-in-destination", a: bypass, dst: fb + 0x80000, src: fb + 0x10000, n: 8192, setup: func(w *world) {
			w.mmu.Write(cached, fb+0x80010, marker)
		}},
		{name: "line-elsewhere", a: bypass, dst: fb + 0x80000, src: fb + 0x10000, n: 8192, direct: 1, setup: func(w *world) {
			w.mmu.Write(cached, fb+0x40000, marker)
		}},
	}
	for _, tc := range tests {
		for _, direct := range []bool{true, false} {
			name := tc.name
			if !direct {
				name += "/no-direct-backing"
			}
			t.Run(name, func(t *testing.T) {
				w, dm := newCopyWorld(t, direct)
				ref, _ := newCopyWorld(t, direct)
				if tc.setup != nil {
					tc.setup(w)
					tc.setup(ref)
				}
				var wakes atomic.Int64
				w.mmu.SetOnWrite(func() { wakes.Add(1) })
				err := w.mmu.Copy(tc.a, tc.dst, tc.src, tc.n)

				// Reference: Read into a buffer, then Write.
				buf := make([]byte, tc.n)
				rerr := ref.mmu.Read(tc.a, tc.src, buf)
				if rerr == nil {
					rerr = ref.mmu.Write(tc.a, tc.dst, buf)
				}
				if got, want := faultReason(err), faultReason(rerr); (err == nil) != (rerr == nil) || err != nil && got != want {
					t.Fatalf("Copy: %v; Read+Write: %v", err, rerr)
				}
				if tc.reason != 0 && faultReason(err) != tc.reason {
					t.Fatalf("Copy: %v, want reason %d", err, tc.reason)
				}
				if s, rs := w.reg(abi.REG_GMC_VM_FAULT_STATUS), ref.reg(abi.REG_GMC_VM_FAULT_STATUS); s != rs {
					t.Errorf("fault status %#x, Read+Write latched %#x", s, rs)
				}
				if tc.reason == 0 && err != nil {
					t.Fatalf("Copy: %v", err)
				}
				wantDirect := tc.direct
				if !direct {
					wantDirect = 0
				}
				if got := dm.copies.Load(); got != wantDirect {
					t.Errorf("%d direct copies, want %d", got, wantDirect)
				}
				if err != nil {
					return // partial results differ (Copy moves the bytes before the fault)
				}
				if wakes.Load() != 1 {
					t.Errorf("OnWrite called %d times, want 1", wakes.Load())
				}
				// Same memory and the same view through the cache, cached and uncached.
				w.cache.Apply(l2.OpWriteBack, nil)
				ref.cache.Apply(l2.OpWriteBack, nil)
				for d := range 2 {
					if !bytes.Equal(w.mem.mem[d], ref.mem.mem[d]) {
						t.Fatalf("domain %d memory differs from Read+Write", d)
					}
				}
				got, want := make([]byte, tc.n), make([]byte, tc.n)
				if w.mmu.Read(cached, tc.dst, got) != nil {
					return // not readable (write-only page)
				}
				ref.mmu.Read(cached, tc.dst, want)
				if !bytes.Equal(got, want) || !bytes.Equal(got, buf) {
					t.Fatal("cached view of the destination differs")
				}
			})
		}
	}
}

func TestCopyNoCache(t *testing.T) {
	w, dm := newCopyWorld(t, true)
	m := New(nil, dm, vramSize, nil)
	w.mmu = m
	w.program(gartStart, page(gartPages)-1, sysTable|abi.PTE_VALID_MASK|abi.PTE_SYSTEM_MASK, true)
	if err := m.Copy(engine.Access{}, fb+0x80000, page(10), 2*PageSize); err != nil {
		t.Fatal(err)
	}
	if dm.copies.Load() != 1 || !bytes.Equal(dm.mem[engine.DomainVRAM][0x80000:0x82000], dm.mem[engine.DomainSystem][0x3a000:0x3c000]) {
		t.Fatal("cacheless copy did not take the direct path or copied wrong data")
	}
}

// TestCopyTLB: a copy fills the TLB for short runs and uses it; a GART change is seen.
func TestCopyTLB(t *testing.T) {
	w, _ := newCopyWorld(t, true)
	a := engine.Access{Bypass: true}
	if err := w.mmu.Copy(a, fb+0x80000, page(10), 4*PageSize); err != nil {
		t.Fatal(err)
	}
	before := w.mmu.Stats()
	if err := w.mmu.Copy(a, fb+0x80000, page(10), 4*PageSize); err != nil {
		t.Fatal(err)
	}
	after := w.mmu.Stats()
	if after.TLBMisses != before.TLBMisses || after.TLBHits != before.TLBHits+4 {
		t.Errorf("second copy: %d misses %d hits, want 0 and 4", after.TLBMisses-before.TLBMisses, after.TLBHits-before.TLBHits)
	}
	// Retarget page 11 to read-only without invalidating: the TLB still allows the write...
	w.mem.putPTE(engine.DomainSystem, sysTable, 11, sysPTE(0x3b000, abi.PTE_VALID_MASK|abi.PTE_READABLE_MASK))
	if err := w.mmu.Copy(a, page(10), fb, 2*PageSize); err != nil {
		t.Fatalf("stale TLB entry: %v", err)
	}
	// ...until VM_INVALIDATE.
	w.setReg(abi.REG_GMC_VM_INVALIDATE, 1)
	if err := w.mmu.Copy(a, page(10), fb, 2*PageSize); faultReason(err) != abi.VM_FAULT_NO_WRITE {
		t.Fatalf("after invalidate: %v, want NO_WRITE", err)
	}
}

// TestCopyConcurrent runs copies (the one-copy fast path and the L2 path) against cached
// writers and cache maintenance on neighbouring lines, and checks what each does: every copy's
// whole result, read back both through the L2 and around it, and every cached write, none
// lost to a concurrent write-back or invalidate. Outcomes do not depend on the interleaving,
// so the test is exact under -race too.
func TestCopyConcurrent(t *testing.T) {
	const (
		rounds   = 100
		copySize = 4 * PageSize
		d1, d2   = fb + 0x80000, fb + 0x90000 // copy destinations
		wBase    = fb + 0xa0000               // the writer's lines
		wLines   = 64
		wWords   = 8 // dwords written per line
		lineSize = 128
		opBase   = fb + 0x80000 // cache operations cover d1, d2 and the writer's lines
		opSize   = 0x30000
	)
	w, dm := newCopyWorld(t, true)
	s1 := w.mem.cpuRead(engine.DomainSystem, 0x3a000, copySize) // page(10): system RW, contiguous
	s2 := w.mem.cpuRead(engine.DomainVRAM, 0x10000, copySize)
	inverted := func(p []byte) []byte {
		q := make([]byte, len(p))
		for i := range p {
			q[i] = ^p[i]
		}
		return q
	}
	bypass, cached := engine.Access{Slot: 1, Bypass: true}, engine.Access{Slot: 1}

	var wg sync.WaitGroup
	var failed atomic.Bool
	fail := func(format string, args ...any) {
		failed.Store(true)
		t.Errorf(format, args...)
	}
	check := func(what string, a engine.Access, va uint64, want []byte) bool {
		got := make([]byte, len(want))
		if err := w.mmu.Read(a, va, got); err != nil {
			fail("%s: read back: %v", what, err)
			return false
		}
		if i := firstDiff(got, want); i >= 0 {
			fail("%s: byte %#x reads %#x, want %#x", what, i, got[i], want[i])
			return false
		}
		return true
	}
	workers := []func(){
		// Bypass copies from the GART into VRAM. Even rounds start with no line in the
		// destination (bypass poison, bypass check), so they take the one-copy path; odd
		// rounds poison through the L2 (dirty lines in the destination), so they take the L2
		// path unless a concurrent invalidate dropped those lines first.
		func() {
			poison := inverted(s1)
			for i := range rounds {
				a := bypass
				if i%2 == 1 {
					a = cached
				}
				if err := w.mmu.Write(a, d1, poison); err != nil {
					fail("copier 1 round %d: poison: %v", i, err)
					return
				}
				if err := w.mmu.Copy(bypass, d1, page(10), copySize); err != nil {
					fail("copier 1 round %d: %v", i, err)
					return
				}
				if !check(fmt.Sprintf("copier 1 round %d", i), a, d1, s1) {
					return
				}
				if i%2 == 1 {
					// Drop the lines the check allocated, so the next round is direct again.
					if err := w.mmu.CacheOp(engine.Access{}, engine.CacheWBInv, d1, copySize); err != nil {
						fail("copier 1 round %d: flush: %v", i, err)
						return
					}
				}
			}
		},
		// Cached copies VRAM → VRAM, always through the L2.
		func() {
			poison := inverted(s2)
			a := engine.Access{Slot: 2}
			for i := range rounds {
				if err := w.mmu.Write(a, d2, poison); err != nil {
					fail("copier 2 round %d: poison: %v", i, err)
					return
				}
				if err := w.mmu.Copy(a, d2, fb+0x10000, copySize); err != nil {
					fail("copier 2 round %d: %v", i, err)
					return
				}
				if !check(fmt.Sprintf("copier 2 round %d", i), a, d2, s2) {
					return
				}
			}
		},
		// Cached writes, each to its own dword, each read back at once.
		func() {
			a := engine.Access{Slot: 3}
			for i := range wLines * wWords {
				var v [4]byte
				binary.LittleEndian.PutUint32(v[:], uint32(i+1))
				va := wBase + uint64(i%wLines)*lineSize + uint64(i/wLines)*4
				if err := w.mmu.Write(a, va, v[:]); err != nil {
					fail("writer %d: %v", i, err)
					return
				}
				if !check(fmt.Sprintf("writer %d", i), a, va, v[:]) {
					return
				}
			}
		},
	}
	stop := make(chan struct{})
	var ops atomic.Int64
	opsDone := make(chan struct{})
	go func() {
		defer close(opsDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			op := engine.CacheWB
			if i%2 == 1 {
				op = engine.CacheWBInv
			}
			if err := w.mmu.CacheOp(engine.Access{}, op, opBase, opSize); err != nil {
				fail("cache op %v: %v", op, err)
				return
			}
			ops.Add(1)
		}
	}()
	for _, f := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	wg.Wait()
	close(stop)
	<-opsDone
	if failed.Load() {
		return
	}
	if ops.Load() == 0 {
		t.Fatal("no cache operation ran during the copies")
	}
	// Even rounds always copy directly; an odd round may too when a concurrent invalidate
	// dropped its poisoned lines first.
	if got := dm.copies.Load(); got < rounds/2 || got > rounds {
		t.Errorf("%d one-copy copies, want %d..%d (every even round of copier 1, maybe odd ones)", got, rounds/2, rounds)
	}
	// Memory itself, once every dirty line is written back, holds every result.
	if err := w.mmu.CacheOp(engine.Access{}, engine.CacheWB, opBase, opSize); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		what string
		addr uint64
		want []byte
	}{{"copier 1 destination", d1 - fb, s1}, {"copier 2 destination", d2 - fb, s2}} {
		if i := firstDiff(w.mem.cpuRead(engine.DomainVRAM, m.addr, len(m.want)), m.want); i >= 0 {
			t.Errorf("%s in memory differs at byte %#x", m.what, i)
		}
	}
	for i := range wLines * wWords {
		off := wBase - fb + uint64(i%wLines)*lineSize + uint64(i/wLines)*4
		if got := binary.LittleEndian.Uint32(w.mem.cpuRead(engine.DomainVRAM, off, 4)); got != uint32(i+1) {
			t.Errorf("write %d lost: memory at %#x holds %#x, want %#x", i, off, got, i+1)
		}
	}
}

// firstDiff is the index of the first byte where a and b (of equal length) differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
