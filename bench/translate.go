package bench

import (
	"encoding/binary"
	"errors"
	"fmt"

	"vgpu/abi"
	"vgpu/engine"
	"vgpu/gpuvm"
)

// The GPUVM translation scenarios measure gpuvm.VM.Translate in a process VMID over page
// tables in an in-memory VRAM image (the device's table path is a memory copy too): with
// every translation a TLB hit, beside a Go map lookup of the page (the floor of any hashed
// TLB); and with every translation a full 4-level walk (4096 addresses spread over the
// root's 512 entries defeat both the TLB and the PDE cache; checked: 4 table reads each),
// beside the 4 dependent entry reads alone through the same reader.

// tableMemory is the VRAM image: the scenarios' gpuvm.TableReader.
type tableMemory struct{ vram []byte }

var errTableRange = errors.New("bench: table read outside VRAM")

func (m *tableMemory) ReadPTE(pa engine.PhysAddr, p []byte) error {
	if pa.Domain != engine.DomainVRAM || pa.Addr >= uint64(len(m.vram)) || uint64(len(m.vram))-pa.Addr < uint64(len(p)) {
		return errTableRange
	}
	copy(p, m.vram[pa.Addr:])
	return nil
}

func (m *tableMemory) put(addr, v uint64) { binary.LittleEndian.PutUint64(m.vram[addr:], v) }

// ptBuilder allocates 4 KiB tables upwards from next and fills in the path to a page.
type ptBuilder struct {
	m          *tableMemory
	root, next uint64
	dirs       map[[2]uint64]uint64
}

func newPTBuilder(m *tableMemory, at uint64) *ptBuilder {
	b := &ptBuilder{m: m, next: at, dirs: map[[2]uint64]uint64{}}
	b.root = b.alloc()
	return b
}

func (b *ptBuilder) alloc() uint64 {
	a := b.next
	b.next += abi.PTE_PAGE_SIZE
	return a
}

// table returns the table of level l on va's path (3: the root), creating PDEs down to it.
func (b *ptBuilder) table(l int, va uint64) uint64 {
	tab := b.root
	for lv := 3; lv > l; lv-- {
		k := [2]uint64{tab, va >> (12 + 9*uint(lv)) & 511}
		next, ok := b.dirs[k]
		if !ok {
			next = b.alloc()
			b.dirs[k] = next
			b.m.put(tab+8*k[1], next|abi.PDE_VALID_MASK)
		}
		tab = next
	}
	return tab
}

func (b *ptBuilder) mapPage(va, pte uint64) { b.m.put(b.table(0, va)+8*(va>>12&511), pte) }

const (
	trVRAM   = 1 << 20
	trTables = 0x8_0000
	trData   = 0x1000
	trRW     = abi.PTE_VALID_MASK | abi.PTE_READABLE_MASK | abi.PTE_WRITEABLE_MASK
	trVA     = 0x0000_1234_5600_0000
	trSlot   = 1
)

// newTranslationVM returns a VM whose context 1 walks b's tables.
func newTranslationVM(m *tableMemory, b *ptBuilder) *gpuvm.VM {
	v := gpuvm.New(gpuvm.Config{Tables: m, VRAMSize: uint64(len(m.vram))})
	ctx := func(r, val uint32) { v.WriteContext(1, r, val) }
	ctx(abi.REG_VM_CONTEXT_PAGE_TABLE_BASE_LO, uint32(b.root|abi.PDE_VALID_MASK))
	ctx(abi.REG_VM_CONTEXT_END_LO, 0xFFFFFFFF)
	ctx(abi.REG_VM_CONTEXT_END_HI, 0xF)
	ctx(abi.REG_VM_CONTEXT_CNTL, abi.REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK|3<<abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH__SHIFT)
	return v
}

var trAccess = engine.Access{VMID: 1, Slot: trSlot, Client: abi.VM_CID_CPC}

// TranslateTLBHit is Translate with every translation a TLB hit.
func TranslateTLBHit() Scenario {
	return Scenario{
		Name: "GPUVM translation, TLB hit", Unit: "translations/s", PerOp: 1,
		Baseline: "Go map lookup of the page",
		Note:     "64 pages in turn, VMID 1, 4-level tables",
		Setup: func() (Pair, error) {
			m := &tableMemory{vram: make([]byte, trVRAM)}
			b := newPTBuilder(m, trTables)
			vas := make([]uint64, 64)
			want := make([]uint64, 64)
			tlb := map[uint64]uint64{}
			for i := range vas {
				vas[i] = trVA + uint64(i)<<12 + 0x40
				want[i] = trData + uint64(i)<<12 + 0x40
				b.mapPage(vas[i], (want[i]&^0xFFF)|trRW)
				tlb[vas[i]>>12] = want[i] &^ 0xFFF
			}
			v := newTranslationVM(m, b)
			dev := func(n int, _ Clock) error {
				for i := range n {
					k := i % len(vas)
					t, err := v.Translate(trAccess, vas[k], false)
					if err != nil || t.PA.Addr != want[k] {
						return fmt.Errorf("translation of %#x: %v %v", vas[k], t.PA, err)
					}
				}
				if s := v.Stats(); s.TLBMisses > uint64(len(vas)) {
					return fmt.Errorf("%d TLB misses: not TLB hits", s.TLBMisses)
				}
				return nil
			}
			base := func(n int, _ Clock) error {
				for i := range n {
					k := i % len(vas)
					pa, ok := tlb[vas[k]>>12]
					if !ok || pa+vas[k]&0xFFF != want[k] {
						return fmt.Errorf("map lookup of %#x", vas[k])
					}
				}
				return nil
			}
			return Pair{Dev: dev, Base: base, Close: func() {}}, nil
		},
	}
}

// TranslateWalk is Translate with every translation a full 4-level walk.
func TranslateWalk() Scenario {
	return Scenario{
		Name: "GPUVM translation, 4-level walk", Unit: "translations/s", PerOp: 1,
		Baseline: "the walk's 4 entry reads alone",
		Note:     "4096 addresses defeat the TLB and the PDE cache",
		Setup: func() (Pair, error) {
			m := &tableMemory{vram: make([]byte, trVRAM)}
			b := newPTBuilder(m, trTables)
			const subs = 8
			for s := range subs { // under root entry 0; every root entry shares its PDB1
				b.mapPage(uint64(s)<<30, (trData+uint64(s)<<12)|trRW)
			}
			pdb1 := b.dirs[[2]uint64{b.root, 0}]
			for r := range 512 {
				m.put(b.root+8*uint64(r), pdb1|abi.PDE_VALID_MASK)
			}
			var vas, want []uint64
			for s := range subs {
				for r := range 512 {
					va := uint64(r)<<39 | uint64(s)<<30 | 0x80
					if r >= 256 {
						va |= 0xFFFF_0000_0000_0000 // the upper half, sign-extended
					}
					vas, want = append(vas, va), append(want, trData+uint64(s)<<12+0x80)
				}
			}
			v := newTranslationVM(m, b)
			for _, va := range vas { // fill and thrash the caches once
				if _, err := v.Translate(trAccess, va, false); err != nil {
					return Pair{}, err
				}
			}
			next := 0 // the cycle goes on across calls: a restart would find the last call's entries
			dev := func(n int, _ Clock) error {
				before := v.Stats()
				for range n {
					k := next
					next = (next + 1) % len(vas)
					t, err := v.Translate(trAccess, vas[k], false)
					if err != nil || t.PA.Addr != want[k] {
						return fmt.Errorf("translation of %#x: %v %v", vas[k], t.PA, err)
					}
				}
				if s := v.Stats(); s.TableReads-before.TableReads != 4*uint64(n) {
					return fmt.Errorf("%d table reads for %d translations: not full walks", s.TableReads-before.TableReads, n)
				}
				return nil
			}
			nextBase := 0
			base := func(n int, _ Clock) error {
				var buf [8]byte
				for range n {
					k := nextBase
					nextBase = (nextBase + 1) % len(vas)
					va := vas[k] & (1<<48 - 1)
					pde := b.root | abi.PDE_VALID_MASK
					for l := 3; l >= 0; l-- {
						at := engine.PhysAddr{Domain: engine.DomainVRAM, Addr: pde&abi.PDE_TABLE_ADDRESS_MASK + 8*(va>>(12+9*uint(l))&511)}
						if err := m.ReadPTE(at, buf[:]); err != nil {
							return err
						}
						pde = binary.LittleEndian.Uint64(buf[:])
					}
					if pde&abi.PTE_ADDRESS_MASK+va&0xFFF != want[k] {
						return fmt.Errorf("walk of %#x", vas[k])
					}
				}
				return nil
			}
			return Pair{Dev: dev, Base: base, Close: func() {}}, nil
		},
	}
}
