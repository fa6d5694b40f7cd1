package gpummu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/l2"
)

// The test world: 1 MiB of system memory and of VRAM, a GART of gartPages pages at gartStart
// whose table is in system memory at sysTable, with the entries of stdPTEs.
const (
	sysSize   = 1 << 20
	vramSize  = 1 << 20
	gartStart = 0x1_0000_0000
	gartPages = 16
	sysTable  = 0x10000
	fb        = abi.GPU_FB_BASE

	rw = abi.PTE_VALID_MASK | abi.PTE_READABLE_MASK | abi.PTE_WRITEABLE_MASK
	uc = abi.PTE_MTYPE_UC << abi.PTE_MTYPE__SHIFT
)

func sysPTE(addr, flags uint64) uint64  { return addr | abi.PTE_SYSTEM_MASK | flags }
func vramPTE(addr, flags uint64) uint64 { return addr | flags }

func sys(a uint64) engine.PhysAddr  { return engine.PhysAddr{Domain: engine.DomainSystem, Addr: a} }
func vram(a uint64) engine.PhysAddr { return engine.PhysAddr{Domain: engine.DomainVRAM, Addr: a} }

func page(i int) uint64 { return gartStart + uint64(i)*PageSize }

// stdPTEs maps GART page i to: 0 system RW, 1 VRAM RW, 2 invalid, 3 read-only, 4 write-only,
// 5 system UC, 6 past the end of VRAM, 7 unmapped system address, 8 VRAM UC, 9 R/W without
// VALID, 10.. system RW at 0x30000 + i pages.
func stdPTEs() []uint64 {
	ptes := []uint64{
		sysPTE(0x20000, rw),
		vramPTE(0x3000, rw),
		0,
		sysPTE(0x21000, abi.PTE_VALID_MASK|abi.PTE_READABLE_MASK),
		sysPTE(0x22000, abi.PTE_VALID_MASK|abi.PTE_WRITEABLE_MASK),
		sysPTE(0x23000, rw|uc),
		vramPTE(vramSize, rw),
		sysPTE(0xFFFF_FFFF_F000, rw),
		vramPTE(0x4000, rw|uc),
		sysPTE(0x24000, abi.PTE_READABLE_MASK|abi.PTE_WRITEABLE_MASK),
	}
	for i := len(ptes); i < gartPages; i++ {
		ptes = append(ptes, sysPTE(0x30000+uint64(i)*PageSize, rw))
	}
	return ptes
}

type world struct {
	mem   *memBacking
	cache *l2.Cache
	mmu   *MMU
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{mem: newMem(sysSize, vramSize)}
	w.cache = l2.NewSize(w.mem, 256, nil)
	w.mmu = New(w.cache, w.mem, vramSize, nil)
	for i, pte := range stdPTEs() {
		w.mem.putPTE(engine.DomainSystem, sysTable, i, pte)
	}
	w.program(gartStart, page(gartPages)-1, sysTable|abi.PTE_VALID_MASK|abi.PTE_SYSTEM_MASK, true)
	t.Cleanup(func() {
		if v := w.mem.violationList(); len(v) > 0 {
			t.Errorf("backing accesses out of bounds: %q", v)
		}
	})
	return w
}

func (w *world) reg(r uint32) uint32 { return w.mmu.ReadReg(r - abi.BLOCK_GMC_BASE) }
func (w *world) setReg(r, v uint32)  { w.mmu.WriteReg(r-abi.BLOCK_GMC_BASE, v) }
func (w *world) set64(lo, hi uint32, v uint64) {
	w.setReg(lo, uint32(v))
	w.setReg(hi, uint32(v>>32))
}

func (w *world) program(start, end, pde uint64, enable bool) {
	w.set64(abi.REG_GMC_GART_START_LO, abi.REG_GMC_GART_START_HI, start)
	w.set64(abi.REG_GMC_GART_END_LO, abi.REG_GMC_GART_END_HI, end)
	w.set64(abi.REG_GMC_GART_TABLE_LO, abi.REG_GMC_GART_TABLE_HI, pde)
	cntl := uint32(0)
	if enable {
		cntl = abi.REG_GMC_GART_CNTL__ENABLE_MASK
	}
	w.setReg(abi.REG_GMC_GART_CNTL, cntl)
}

func (w *world) faultLatch() (status uint32, addr uint64) {
	return w.reg(abi.REG_GMC_VM_FAULT_STATUS),
		uint64(w.reg(abi.REG_GMC_VM_FAULT_ADDR_HI))<<32 | uint64(w.reg(abi.REG_GMC_VM_FAULT_ADDR_LO))
}

func status(reason uint32, write bool, vmid, slot int) uint32 {
	s := abi.REG_GMC_VM_FAULT_STATUS__VALID_MASK | reason<<abi.REG_GMC_VM_FAULT_STATUS__REASON__SHIFT |
		uint32(vmid)<<abi.REG_GMC_VM_FAULT_STATUS__VMID__SHIFT | uint32(slot)<<abi.REG_GMC_VM_FAULT_STATUS__SLOT__SHIFT
	if write {
		s |= abi.REG_GMC_VM_FAULT_STATUS__WRITE_MASK
	}
	return s
}

func faultReason(err error) uint32 {
	var f *Fault
	if errors.As(err, &f) {
		return f.Reason
	}
	var ae *AccessError
	if errors.As(err, &ae) {
		return abi.VM_FAULT_BACKING
	}
	return math.MaxUint32
}

var marker = []byte{0xDE, 0xAD, 0xBE, 0xEF}

func TestTranslate(t *testing.T) {
	tests := []struct {
		name   string
		va     uint64
		write  bool
		vmid   int
		pa     engine.PhysAddr // where the access lands, when it succeeds
		reason uint32          // VM_FAULT_NONE, a fault reason, or VM_FAULT_BACKING for an *AccessError
		cause  error           // AccessError cause, when checked
	}{
		{name: "frame buffer start", va: fb, pa: vram(0)},
		{name: "frame buffer last word", va: fb + vramSize - 4, write: true, pa: vram(vramSize - 4)},
		{name: "frame buffer end", va: fb + vramSize, reason: abi.VM_FAULT_OUTSIDE},
		{name: "below the frame buffer", va: fb - 4, reason: abi.VM_FAULT_OUTSIDE},
		{name: "address zero", va: 0, reason: abi.VM_FAULT_OUTSIDE},
		{name: "GART system page", va: page(0) + 0x10, write: true, pa: sys(0x20010)},
		{name: "GART VRAM page", va: page(1) + 8, pa: vram(0x3008)},
		{name: "invalid PTE", va: page(2), reason: abi.VM_FAULT_INVALID_PTE},
		{name: "PTE without VALID", va: page(9), write: true, reason: abi.VM_FAULT_INVALID_PTE},
		{name: "read of a read-only page", va: page(3) + 4, pa: sys(0x21004)},
		{name: "write to a read-only page", va: page(3), write: true, reason: abi.VM_FAULT_NO_WRITE},
		{name: "read of a write-only page", va: page(4), reason: abi.VM_FAULT_NO_READ},
		{name: "write to a write-only page", va: page(4), write: true, pa: sys(0x22000)},
		{name: "UC system page", va: page(5) + 0xFFC, pa: sys(0x23FFC)},
		{name: "UC VRAM page", va: page(8), write: true, pa: vram(0x4000)},
		{name: "PTE past the end of VRAM", va: page(6), write: true, reason: abi.VM_FAULT_BACKING, cause: ErrBeyondVRAM},
		{name: "PTE to an unmapped DMA address", va: page(7), reason: abi.VM_FAULT_BACKING},
		{name: "last GART page", va: page(gartPages-1) + 0xFFC, pa: sys(0x30000 + (gartPages-1)*PageSize + 0xFFC)},
		{name: "past the GART end", va: page(gartPages), reason: abi.VM_FAULT_OUTSIDE},
		{name: "before the GART start", va: gartStart - 4, write: true, reason: abi.VM_FAULT_OUTSIDE},
		{name: "beyond 48 bits", va: 1 << 48, reason: abi.VM_FAULT_OUTSIDE},
		{name: "top of the 64-bit space", va: math.MaxUint64 - 3, write: true, reason: abi.VM_FAULT_OUTSIDE},
		{name: "VMID 1 has no apertures", va: page(0), vmid: 1, reason: abi.VM_FAULT_OUTSIDE},
		{name: "VMID out of range", va: fb, vmid: 99, reason: abi.VM_FAULT_OUTSIDE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			a := engine.Access{VMID: tt.vmid, Slot: 3, Bypass: true}
			var err error
			if tt.write {
				err = w.mmu.Write(a, tt.va, marker)
			} else {
				if tt.reason == abi.VM_FAULT_NONE {
					w.mem.cpuWrite(tt.pa.Domain, tt.pa.Addr, marker)
				}
				got := make([]byte, len(marker))
				err = w.mmu.Read(a, tt.va, got)
				if err == nil && !bytes.Equal(got, marker) {
					t.Fatalf("read % x, want % x from %v", got, marker, tt.pa)
				}
			}
			if tt.reason == abi.VM_FAULT_NONE {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if got := w.mem.cpuRead(tt.pa.Domain, tt.pa.Addr, len(marker)); !bytes.Equal(got, marker) {
					t.Fatalf("memory at %v holds % x, want % x", tt.pa, got, marker)
				}
				if s, _ := w.faultLatch(); s != 0 {
					t.Fatalf("fault latched (%#x) for a good access", s)
				}
				return
			}
			if got := faultReason(err); got != tt.reason {
				t.Fatalf("error %v: reason %d, want %d (%s)", err, got, tt.reason, ReasonString(tt.reason))
			}
			if tt.cause != nil && !errors.Is(err, tt.cause) {
				t.Fatalf("error %v does not wrap %v", err, tt.cause)
			}
			s, addr := w.faultLatch()
			if want := status(tt.reason, tt.write, tt.vmid&0xF, 3); s != want || addr != tt.va {
				t.Fatalf("latched status %#x addr %#x, want %#x addr %#x", s, addr, want, tt.va)
			}
		})
	}
}

func TestGARTConfiguration(t *testing.T) {
	validSys := uint64(sysTable | abi.PTE_VALID_MASK | abi.PTE_SYSTEM_MASK)
	tests := []struct {
		name   string
		setup  func(w *world)
		va     uint64
		pa     engine.PhysAddr
		reason uint32
	}{
		{name: "table in VRAM", setup: func(w *world) {
			w.mem.putPTE(engine.DomainVRAM, 0x8000, 0, vramPTE(0x9000, rw))
			w.mem.putPTE(engine.DomainVRAM, 0x8000, 1, sysPTE(0x40000, rw))
			w.program(gartStart, page(2)-1, 0x8000|abi.PTE_VALID_MASK, true)
		}, va: page(1) + 0x20, pa: sys(0x40020)},
		{name: "table in VRAM, VRAM page", setup: func(w *world) {
			w.mem.putPTE(engine.DomainVRAM, 0x8000, 0, vramPTE(0x9000, rw))
			w.program(gartStart, page(2)-1, 0x8000|abi.PTE_VALID_MASK, true)
		}, va: page(0) + 0x20, pa: vram(0x9020)},
		{name: "GART disabled", setup: func(w *world) {
			w.setReg(abi.REG_GMC_GART_CNTL, 0)
		}, va: page(0), reason: abi.VM_FAULT_GART_DISABLED},
		{name: "end before start: no GART aperture", setup: func(w *world) {
			w.program(gartStart, gartStart-1, validSys, true)
		}, va: gartStart, reason: abi.VM_FAULT_OUTSIDE},
		{name: "frame buffer works without GART", setup: func(w *world) {
			w.program(gartStart, 0, 0, false)
		}, va: fb + 0x100, pa: vram(0x100)},
		{name: "table PDE not valid", setup: func(w *world) {
			w.program(gartStart, page(gartPages)-1, sysTable|abi.PTE_SYSTEM_MASK, true)
		}, va: page(0), reason: abi.VM_FAULT_TABLE},
		{name: "table in VRAM runs past its end", setup: func(w *world) {
			w.program(gartStart, page(1024)-1, (vramSize-PageSize)|abi.PTE_VALID_MASK, true)
		}, va: page(512), reason: abi.VM_FAULT_TABLE},
		{name: "table at an unmapped DMA address", setup: func(w *world) {
			w.program(gartStart, page(gartPages)-1, 0x7000_0000_0000|abi.PTE_VALID_MASK|abi.PTE_SYSTEM_MASK, true)
		}, va: page(0), reason: abi.VM_FAULT_TABLE},
		{name: "table read fails", setup: func(w *world) {
			w.mem.fail = func(d engine.Domain, addr uint64, n int, write bool) error {
				if addr >= sysTable && addr < sysTable+PageSize {
					return errTestFault
				}
				return nil
			}
		}, va: page(0), reason: abi.VM_FAULT_TABLE},
		{name: "unaligned START is a page number", setup: func(w *world) {
			w.program(gartStart+0x123, page(gartPages)-1, validSys, true)
		}, va: page(0) + 4, pa: sys(0x20004)},
		{name: "END inside the last page includes it", setup: func(w *world) {
			w.program(gartStart, page(10)+1, validSys, true)
		}, va: page(10) + 0xF00, pa: sys(0x30000 + 10*PageSize + 0xF00)},
		{name: "huge aperture is cut to MaxGARTPages", setup: func(w *world) {
			w.program(0, 1<<47, validSys, true)
		}, va: MaxGARTPages * PageSize, reason: abi.VM_FAULT_OUTSIDE},
		{name: "frame buffer wins where the apertures overlap", setup: func(w *world) {
			w.program(fb, fb+page(gartPages)-1, validSys, true)
		}, va: fb + 0x10, pa: vram(0x10)},
		{name: "START and END above 48 bits are masked", setup: func(w *world) {
			w.program(0xFFFF_0000_0000_0000|gartStart, 0xFFFF_0000_0000_0000|(page(gartPages)-1), validSys, true)
		}, va: page(0), pa: sys(0x20000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			tt.setup(w)
			a := engine.Access{Slot: 1, Bypass: true}
			if tt.reason == abi.VM_FAULT_NONE {
				w.mem.cpuWrite(tt.pa.Domain, tt.pa.Addr, marker)
			}
			got := make([]byte, len(marker))
			err := w.mmu.Read(a, tt.va, got)
			if tt.reason == abi.VM_FAULT_NONE {
				if err != nil || !bytes.Equal(got, marker) {
					t.Fatalf("read % x, %v; want % x from %v", got, err, marker, tt.pa)
				}
				return
			}
			if r := faultReason(err); r != tt.reason {
				t.Fatalf("error %v: reason %d, want %d", err, r, tt.reason)
			}
		})
	}
}

func TestFaultLatch(t *testing.T) {
	w := newWorld(t)
	a := engine.Access{Slot: 5}
	_ = w.mmu.Write(a, page(2)+8, marker) // invalid PTE: latched
	first := status(abi.VM_FAULT_INVALID_PTE, true, 0, 5)
	if s, addr := w.faultLatch(); s != first || addr != page(2)+8 {
		t.Fatalf("first fault: status %#x addr %#x, want %#x %#x", s, addr, first, page(2)+8)
	}
	_ = w.mmu.Read(engine.Access{Slot: 6}, 0x1234, marker) // outside: MORE only
	if s, addr := w.faultLatch(); s != first|abi.REG_GMC_VM_FAULT_STATUS__MORE_MASK || addr != page(2)+8 {
		t.Fatalf("second fault: status %#x addr %#x, want the first with MORE", s, addr)
	}
	w.setReg(abi.REG_GMC_VM_FAULT_CNTL, 0) // no CLEAR bit: nothing
	if s, _ := w.faultLatch(); s == 0 {
		t.Fatalf("VM_FAULT_CNTL without CLEAR cleared the latch")
	}
	w.setReg(abi.REG_GMC_VM_FAULT_CNTL, abi.REG_GMC_VM_FAULT_CNTL__CLEAR_MASK)
	if s, addr := w.faultLatch(); s != 0 || addr != 0 {
		t.Fatalf("after CLEAR: status %#x addr %#x", s, addr)
	}
	_ = w.mmu.Read(engine.Access{Slot: 7}, page(7), marker) // backing refused: latched as BACKING
	if s, addr := w.faultLatch(); s != status(abi.VM_FAULT_BACKING, false, 0, 7) || addr != page(7) {
		t.Fatalf("access error: status %#x addr %#x", s, addr)
	}
	if st := w.mmu.Stats(); st.Faults != 2 || st.AccessErrors != 1 {
		t.Fatalf("unexpected stats %+v", st)
	}
}

func TestTLBKeepsTranslationsUntilInvalidated(t *testing.T) {
	w := newWorld(t)
	a := engine.Access{Bypass: true}
	w.mem.cpuWrite(engine.DomainSystem, 0x20000, []byte{1})
	w.mem.cpuWrite(engine.DomainSystem, 0x25000, []byte{2})
	w.mem.cpuWrite(engine.DomainSystem, 0x26000, []byte{3})
	read := func() byte {
		t.Helper()
		b := make([]byte, 1)
		if err := w.mmu.Read(a, page(0), b); err != nil {
			t.Fatal(err)
		}
		return b[0]
	}
	steps := []struct {
		name string
		do   func()
		want byte
	}{
		{"first use fills the TLB", func() {}, 1},
		{"PTE changed without invalidation: old page", func() {
			w.mem.putPTE(engine.DomainSystem, sysTable, 0, sysPTE(0x25000, rw))
		}, 1},
		{"invalidating another VMID changes nothing", func() { w.setReg(abi.REG_GMC_VM_INVALIDATE, 1<<1) }, 1},
		{"VM_INVALIDATE of VMID 0: new page", func() { w.setReg(abi.REG_GMC_VM_INVALIDATE, 1<<0) }, 2},
		{"PTE changed again", func() { w.mem.putPTE(engine.DomainSystem, sysTable, 0, sysPTE(0x26000, rw)) }, 2},
		{"a GART register write drops translations", func() {
			w.setReg(abi.REG_GMC_GART_CNTL, abi.REG_GMC_GART_CNTL__ENABLE_MASK)
		}, 3},
		{"permissions come from the cached entry too", func() {
			w.mem.putPTE(engine.DomainSystem, sysTable, 0, sysPTE(0x26000, abi.PTE_VALID_MASK))
		}, 3},
	}
	for _, s := range steps {
		s.do()
		if got := read(); got != s.want {
			t.Fatalf("%s: read %d, want %d", s.name, got, s.want)
		}
	}
	// An invalid entry is not cached: fixing it works without an invalidation.
	if err := w.mmu.Read(a, page(2), make([]byte, 1)); faultReason(err) != abi.VM_FAULT_INVALID_PTE {
		t.Fatalf("invalid PTE: %v", err)
	}
	w.mem.putPTE(engine.DomainSystem, sysTable, 2, sysPTE(0x26000, rw))
	if err := w.mmu.Read(a, page(2), make([]byte, 1)); err != nil {
		t.Fatalf("fixed PTE: %v", err)
	}
	if st := w.mmu.Stats(); st.TLBHits != 4 || st.TLBMisses != 5 || st.TLBEntries != 2 {
		t.Fatalf("unexpected stats %+v", st)
	}
}

func TestTLBIsBounded(t *testing.T) {
	w := newWorld(t)
	const pages = MaxTLBEntries + 1
	table := uint64(0x80000) // 64 KiB of PTEs, all to one page
	for i := range pages {
		w.mem.putPTE(engine.DomainSystem, table, i, sysPTE(0x20000, rw))
	}
	w.program(gartStart, page(pages)-1, table|abi.PTE_VALID_MASK|abi.PTE_SYSTEM_MASK, true)
	a := engine.Access{Bypass: true}
	for i := range pages {
		if err := w.mmu.Read(a, page(i), make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.mmu.Stats().TLBEntries; n != MaxTLBEntries {
		t.Fatalf("TLB holds %d entries, want %d", n, MaxTLBEntries)
	}
	// Page 0 was replaced (first in, first out); page 1 is still cached.
	w.mem.cpuWrite(engine.DomainSystem, 0x27000, []byte{7})
	w.mem.putPTE(engine.DomainSystem, table, 0, sysPTE(0x27000, rw))
	w.mem.putPTE(engine.DomainSystem, table, 1, sysPTE(0x27000, rw))
	b := make([]byte, 1)
	if _ = w.mmu.Read(a, page(1), b); b[0] != 0 {
		t.Fatalf("page 1 was re-read from the table")
	}
	if _ = w.mmu.Read(a, page(0), b); b[0] != 7 {
		t.Fatalf("page 0 still translated by the TLB")
	}
}

func TestCachePolicy(t *testing.T) {
	tests := []struct {
		name    string
		va      uint64
		bypass  bool
		pa      engine.PhysAddr
		inCache bool // the write is not in memory until a write-back
	}{
		{name: "cached GART page", va: page(0), pa: sys(0x20000), inCache: true},
		{name: "cached frame buffer", va: fb + 0x5000, pa: vram(0x5000), inCache: true},
		{name: "UC system page", va: page(5), pa: sys(0x23000)},
		{name: "UC VRAM page", va: page(8) + 0x40, pa: vram(0x4040)},
		{name: "bypass access to a cached page", va: page(0), bypass: true, pa: sys(0x20000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			a := engine.Access{Slot: 2, Bypass: tt.bypass}
			if err := w.mmu.Write(a, tt.va, marker); err != nil {
				t.Fatal(err)
			}
			inMem := bytes.Equal(w.mem.cpuRead(tt.pa.Domain, tt.pa.Addr, 4), marker)
			if inMem == tt.inCache {
				t.Fatalf("write in memory: %v, want %v", inMem, !tt.inCache)
			}
			if lines := w.cache.Stats().Lines; (lines > 0) != tt.inCache {
				t.Fatalf("%d lines resident", lines)
			}
			if err := w.mmu.CacheOp(a, engine.CacheWB, tt.va, 4); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.mem.cpuRead(tt.pa.Domain, tt.pa.Addr, 4), marker) {
				t.Fatalf("write not in memory after a write-back")
			}
			// A CPU write stays hidden from cached reads until the range is invalidated.
			w.mem.cpuWrite(tt.pa.Domain, tt.pa.Addr, []byte{9})
			got := make([]byte, 1)
			_ = w.mmu.Read(a, tt.va, got)
			if (got[0] != 9) != tt.inCache {
				t.Fatalf("read %d after a CPU write of 9", got[0])
			}
			if err := w.mmu.CacheOp(a, engine.CacheInv, tt.va, 1); err != nil {
				t.Fatal(err)
			}
			if _ = w.mmu.Read(a, tt.va, got); got[0] != 9 {
				t.Fatalf("read %d after invalidate, want 9", got[0])
			}
		})
	}
}

func TestPageCrossing(t *testing.T) {
	w := newWorld(t)
	var hooks atomic.Int32
	w.mmu.SetOnWrite(func() { hooks.Add(1) })
	a := engine.Access{Slot: 1}

	// System page 0 into VRAM page 1.
	data := bytes.Repeat([]byte{0x5A}, 24)
	if err := w.mmu.Write(a, page(1)-8, data); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 24)
	if err := w.mmu.Read(a, page(1)-8, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back % x, %v", got, err)
	}
	_ = w.mmu.CacheOp(a, engine.CacheWB, 0, 0)
	if !bytes.Equal(w.mem.cpuRead(engine.DomainSystem, 0x20FF8, 8), data[:8]) ||
		!bytes.Equal(w.mem.cpuRead(engine.DomainVRAM, 0x3000, 16), data[8:]) {
		t.Fatalf("the pieces did not land on both pages")
	}

	// VRAM page 1 into invalid page 2: the first piece is written, the fault names page 2.
	err := w.mmu.Write(a, page(2)-4, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	var f *Fault
	if !errors.As(err, &f) || f.VA != page(2) || f.Reason != abi.VM_FAULT_INVALID_PTE || !f.Write {
		t.Fatalf("unexpected error %v", err)
	}
	_ = w.mmu.CacheOp(a, engine.CacheWB, 0, engine.CacheAll)
	if got := w.mem.cpuRead(engine.DomainVRAM, 0x3FFC, 4); !bytes.Equal(got, []byte{1, 2, 3, 4}) {
		t.Fatalf("first piece % x", got)
	}
	if n := hooks.Load(); n != 2 {
		t.Fatalf("OnWrite called %d times, want 2", n)
	}

	// A write that fails on its first page writes nothing and does not call the hook.
	_ = w.mmu.Write(a, page(2), []byte{1})
	// Reads do not call it.
	_ = w.mmu.Read(a, page(0), got)
	if n := hooks.Load(); n != 2 {
		t.Fatalf("OnWrite called %d times, want 2", n)
	}
	w.mmu.SetOnWrite(nil)
	_ = w.mmu.Write(a, page(0), []byte{1})

	// Reads running off the end of an aperture.
	for _, tc := range []struct {
		va, faultAt uint64
	}{
		{fb + vramSize - 2, fb + vramSize},
		{page(gartPages) - 2, page(gartPages)},
	} {
		err := w.mmu.Read(a, tc.va, make([]byte, 4))
		if !errors.As(err, &f) || f.VA != tc.faultAt || f.Reason != abi.VM_FAULT_OUTSIDE {
			t.Errorf("read at %#x: %v, want an outside fault at %#x", tc.va, err, tc.faultAt)
		}
	}
	// A long access spanning many pages of the frame buffer.
	big := bytes.Repeat([]byte{0x77}, 5*PageSize+100)
	if err := w.mmu.Write(engine.Access{Bypass: true}, fb+50, big); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.mem.cpuRead(engine.DomainVRAM, 50, len(big)), big) {
		t.Fatalf("long write not in VRAM")
	}
}

func TestCacheOp(t *testing.T) {
	// Dirty data at four places; each row applies one CacheOp and says which reached memory.
	type spot struct {
		va uint64
		pa engine.PhysAddr
	}
	spots := map[string]spot{
		"p0":  {page(0) + 0x100, sys(0x20100)},
		"p1":  {page(1) + 0x200, vram(0x3200)},
		"p10": {page(10), sys(0x30000 + 10*PageSize)},
		"fb":  {fb + 0x5000, vram(0x5000)},
	}
	tests := []struct {
		name    string
		vmid    int
		op      engine.CacheOp
		va      uint64
		size    uint64
		written []string // spots in memory afterwards
		lost    []string // spots whose data is gone (discard)
		err     error
	}{
		{name: "one page", op: engine.CacheWB, va: page(0), size: PageSize, written: []string{"p0"}},
		{name: "one byte", op: engine.CacheWB, va: page(0) + 0x17F, size: 1, written: []string{"p0"}},
		{name: "a byte of the next line only", op: engine.CacheWB, va: page(0) + 0x180, size: 1},
		{name: "two pages, two domains", op: engine.CacheWB, va: page(0), size: 2 * PageSize, written: []string{"p0", "p1"}},
		{name: "across invalid pages", op: engine.CacheWB, va: page(1), size: 10 * PageSize, written: []string{"p1", "p10"}},
		{name: "size 0 is everything", op: engine.CacheWB, va: 0x1234, written: []string{"p0", "p1", "p10", "fb"}},
		{name: "CacheAll is everything", op: engine.CacheWB, va: page(3), size: engine.CacheAll, written: []string{"p0", "p1", "p10", "fb"}},
		// The cache is physically tagged: the frame buffer covers all of VRAM, including the
		// VRAM page that GART page 1 maps.
		{name: "frame buffer range", op: engine.CacheWB, va: fb, size: vramSize, written: []string{"fb", "p1"}},
		{name: "part of the frame buffer", op: engine.CacheWB, va: fb + 0x4000, size: 0x2000, written: []string{"fb"}},
		{name: "invalidate writes back", op: engine.CacheInv, va: page(1) + 0x200, size: 4, written: []string{"p1"}},
		{name: "discard loses the data", op: engine.CacheDiscard, va: page(0), size: 8 * PageSize, lost: []string{"p0", "p1"}},
		{name: "discard of everything", op: engine.CacheDiscard, va: page(0), lost: []string{"p0", "p1", "p10", "fb"}},
		{name: "write back and invalidate", op: engine.CacheWBInv, va: fb, size: 1 << 40, written: []string{"fb", "p1"}},
		{name: "outside the apertures", op: engine.CacheWB, va: 0x1000, size: 0x10000},
		{name: "VMID 1 translates nothing", vmid: 1, op: engine.CacheWB, va: page(0), size: PageSize},
		{name: "range running past 48 bits", op: engine.CacheWB, va: 1<<48 - 8, size: 1 << 50},
		{name: "range starting past 48 bits", op: engine.CacheDiscard, va: 1 << 60, size: PageSize},
		{name: "not an operation", op: 0, va: page(0), size: PageSize, err: ErrCacheOp},
		{name: "past the last operation", op: engine.CacheDiscard + 1, va: page(0), err: ErrCacheOp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			a := engine.Access{Slot: 4}
			for _, s := range spots {
				if err := w.mmu.Write(a, s.va, marker); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.mmu.CacheOp(engine.Access{VMID: tt.vmid, Slot: 4}, tt.op, tt.va, tt.size); !errors.Is(err, tt.err) {
				t.Fatalf("CacheOp: %v, want %v", err, tt.err)
			}
			for name, s := range spots {
				inMem := bytes.Equal(w.mem.cpuRead(s.pa.Domain, s.pa.Addr, 4), marker)
				if want := contains(tt.written, name); inMem != want {
					t.Errorf("%s: in memory %v, want %v", name, inMem, want)
				}
			}
			_ = w.mmu.CacheOp(a, engine.CacheWB, 0, 0)
			for name, s := range spots {
				inMem := bytes.Equal(w.mem.cpuRead(s.pa.Domain, s.pa.Addr, 4), marker)
				if want := !contains(tt.lost, name); inMem != want {
					t.Errorf("%s after a full write-back: in memory %v, want %v", name, inMem, want)
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCacheOpLargeGARTRange(t *testing.T) {
	w := newWorld(t)
	// A 1 GiB GART: a discard of all of it is too many pages to translate one by one, so it
	// acts on the whole cache as write-back+invalidate: nothing is lost.
	w.program(gartStart, gartStart+1<<30-1, sysTable|abi.PTE_VALID_MASK|abi.PTE_SYSTEM_MASK, true)
	a := engine.Access{Slot: 1}
	_ = w.mmu.Write(a, page(0), marker)
	_ = w.mmu.Write(a, fb, marker)
	if err := w.mmu.CacheOp(a, engine.CacheDiscard, gartStart, 1<<30); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.mem.cpuRead(engine.DomainSystem, 0x20000, 4), marker) ||
		!bytes.Equal(w.mem.cpuRead(engine.DomainVRAM, 0, 4), marker) {
		t.Fatalf("data lost")
	}
	if s := w.cache.Stats(); s.Lines != 0 {
		t.Fatalf("%d lines left", s.Lines)
	}
	if st := w.mmu.Stats(); st.TLBMisses > 2 {
		t.Fatalf("translated %d pages", st.TLBMisses)
	}
}

func TestCacheOpWriteBackFailure(t *testing.T) {
	w := newWorld(t)
	a := engine.Access{Slot: 9}
	_ = w.mmu.Write(a, page(0)+0x40, marker)
	w.mem.fail = func(d engine.Domain, addr uint64, n int, write bool) error {
		if write {
			return errTestFault
		}
		return nil
	}
	err := w.mmu.CacheOp(a, engine.CacheWB, page(0), PageSize)
	var ae *AccessError
	if !errors.As(err, &ae) || !errors.Is(err, errTestFault) || ae.VA != page(0)+0x40 || ae.PA != sys(0x20040) || !ae.Write {
		t.Fatalf("unexpected error %v (%+v)", err, ae)
	}
	if s, addr := w.faultLatch(); s != status(abi.VM_FAULT_BACKING, true, 0, 9) || addr != page(0)+0x40 {
		t.Fatalf("latched %#x at %#x", s, addr)
	}
}

func TestRegisters(t *testing.T) {
	w := newWorld(t)
	w.set64(abi.REG_GMC_GART_TABLE_LO, abi.REG_GMC_GART_TABLE_HI, 0x0000_1234_5678_9003)
	w.setReg(abi.REG_GMC_GART_CNTL, 0xFFFF_FFFF)
	w.setReg(abi.REG_GMC_FB_BASE_LO, 0x1234) // read-only
	w.setReg(abi.BLOCK_GMC_BASE+0xFC, 0x1234)
	want := map[uint32]uint32{
		abi.REG_GMC_FB_BASE_LO:       uint32(abi.GPU_FB_BASE & 0xFFFF_FFFF),
		abi.REG_GMC_FB_BASE_HI:       uint32(abi.GPU_FB_BASE >> 32),
		abi.REG_GMC_GART_CNTL:        abi.REG_GMC_GART_CNTL__ENABLE_MASK,
		abi.REG_GMC_GART_START_LO:    gartStart & 0xFFFF_FFFF,
		abi.REG_GMC_GART_START_HI:    gartStart >> 32,
		abi.REG_GMC_GART_END_LO:      uint32(page(gartPages) - 1),
		abi.REG_GMC_GART_END_HI:      uint32((page(gartPages) - 1) >> 32),
		abi.REG_GMC_GART_TABLE_LO:    0x5678_9003,
		abi.REG_GMC_GART_TABLE_HI:    0x1234,
		abi.REG_GMC_VM_FAULT_STATUS:  0,
		abi.REG_GMC_VM_FAULT_ADDR_LO: 0,
		abi.REG_GMC_VM_FAULT_ADDR_HI: 0,
		abi.REG_GMC_VM_FAULT_CNTL:    0,
		abi.REG_GMC_VM_INVALIDATE:    0,
		abi.BLOCK_GMC_BASE + 0xFC:    0,
		abi.BLOCK_GMC_BASE + 0x1001:  0,
	}
	for r, v := range want {
		if got := w.reg(r); got != v {
			t.Errorf("%s (%#x) = %#x, want %#x", abi.RegisterNames[r], r, got, v)
		}
	}
	_ = w.mmu.Read(engine.Access{}, 0, make([]byte, 1))
	w.mmu.Reset()
	for _, r := range []uint32{abi.REG_GMC_GART_CNTL, abi.REG_GMC_GART_START_LO, abi.REG_GMC_GART_END_LO,
		abi.REG_GMC_GART_TABLE_LO, abi.REG_GMC_VM_FAULT_STATUS, abi.REG_GMC_VM_FAULT_ADDR_LO} {
		if got := w.reg(r); got != 0 {
			t.Errorf("after Reset %s = %#x", abi.RegisterNames[r], got)
		}
	}
	if got := w.reg(abi.REG_GMC_FB_BASE_HI); got != uint32(abi.GPU_FB_BASE>>32) {
		t.Errorf("after Reset FB_BASE_HI = %#x", got)
	}
	if err := w.mmu.Read(engine.Access{}, page(0), make([]byte, 1)); faultReason(err) != abi.VM_FAULT_OUTSIDE {
		t.Errorf("GART still translates after Reset: %v", err)
	}
	if st := w.mmu.Stats(); st.TLBEntries != 0 {
		t.Errorf("TLB entries after Reset: %d", st.TLBEntries)
	}
}

func TestWithoutCache(t *testing.T) {
	m := newMem(sysSize, vramSize)
	mmu := New(nil, m, vramSize+123, nil) // rounded down to whole pages
	if err := mmu.Write(engine.Access{}, fb+vramSize-4, marker); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.cpuRead(engine.DomainVRAM, vramSize-4, 4), marker) {
		t.Fatalf("uncached write not in memory")
	}
	if err := mmu.Read(engine.Access{}, fb+vramSize, make([]byte, 1)); faultReason(err) != abi.VM_FAULT_OUTSIDE {
		t.Fatalf("read past the rounded VRAM size: %v", err)
	}
	if err := mmu.CacheOp(engine.Access{}, engine.CacheDiscard, 0, 0); err != nil {
		t.Fatal(err)
	}
	mmu.FenceCheck(0, 0)
}

// TestConcurrentAccess has queue goroutines write and read back their own pages (GART and
// frame buffer, cached and bypass) while the worker invalidates, rewrites GART registers with
// the same values, clears faults and reads registers. Run with -race.
func TestConcurrentAccess(t *testing.T) {
	w := newWorld(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var writes atomic.Int64
	w.mmu.SetOnWrite(func() { writes.Add(1) })
	wg.Add(1)
	go func() { // the server's worker
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			switch i % 4 {
			case 0:
				w.setReg(abi.REG_GMC_VM_INVALIDATE, 1)
			case 1:
				w.set64(abi.REG_GMC_GART_START_LO, abi.REG_GMC_GART_START_HI, gartStart)
			case 2:
				w.setReg(abi.REG_GMC_VM_FAULT_CNTL, abi.REG_GMC_VM_FAULT_CNTL__CLEAR_MASK)
			case 3:
				_ = w.reg(abi.REG_GMC_VM_FAULT_STATUS)
				_ = w.mmu.Stats()
			}
		}
	}()
	vas := []uint64{page(0), page(1), page(10), page(11), fb + 0x10000, fb + 0x20000, page(12), fb + 0x30000}
	var qg sync.WaitGroup
	for q, base := range vas {
		qg.Add(1)
		go func() {
			defer qg.Done()
			a := engine.Access{Slot: q, Bypass: q%3 == 0}
			for i := range 200 {
				off := uint64(i*52) % (PageSize - 64)
				data := bytes.Repeat([]byte{byte(q*31 + i)}, 1+i%60)
				if err := w.mmu.Write(a, base+off, data); err != nil {
					t.Error(err)
					return
				}
				got := make([]byte, len(data))
				if err := w.mmu.Read(a, base+off, got); err != nil || !bytes.Equal(got, data) {
					t.Errorf("queue %d: read % x, %v; want % x", q, got, err, data)
					return
				}
				if i%40 == 0 {
					_ = w.mmu.CacheOp(a, engine.CacheWBInv, base, PageSize)
				}
				_ = w.mmu.Read(a, page(2), got) // faults, concurrently with CLEAR
			}
		}()
	}
	qg.Wait()
	close(stop)
	wg.Wait()
	if writes.Load() != int64(len(vas))*200 {
		t.Fatalf("OnWrite called %d times", writes.Load())
	}
}

func TestReasonString(t *testing.T) {
	for r := uint32(0); r <= abi.VM_FAULT_GART_DISABLED; r++ {
		if s := ReasonString(r); s == "" || s[0] == 'r' {
			t.Errorf("reason %d has no name: %q", r, s)
		}
	}
	if s := ReasonString(99); s != "reason 99" {
		t.Errorf("ReasonString(99) = %q", s)
	}
	f := &Fault{VA: 0x1000, Slot: 2, Write: true, Reason: abi.VM_FAULT_NO_WRITE}
	ae := &AccessError{Err: errTestFault}
	if f.Error() == "" || ae.Error() == "" {
		t.Errorf("empty error text")
	}
	// The command processor tells the two apart through this method, also when wrapped.
	var tf interface{ TranslationFault() bool }
	if !errors.As(fmt.Errorf("x: %w", f), &tf) || !tf.TranslationFault() {
		t.Errorf("a wrapped *Fault is not a translation fault")
	}
	if !errors.As(fmt.Errorf("x: %w", ae), &tf) || tf.TranslationFault() {
		t.Errorf("a wrapped *AccessError is a translation fault")
	}
}
