package gpummu

import (
	"encoding/binary"
	"errors"
	"testing"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/gpuvm"
	"vgpu/l2"
)

const (
	fuzzMem     = 192 << 10 // bytes of system memory; VRAM is one of fuzzVRAM
	fuzzEntries = 32        // table entries taken from the input
	fuzzOps     = 64
	fuzzMaxLen  = 9000 // longest access: crosses up to three pages
)

var fuzzVRAM = []uint64{0, PageSize, 64<<10 + 100, 128 << 10}

// FuzzGART builds a GPU memory world from its input — VRAM size, GMC register values, GART
// table location and contents — then runs a sequence of reads, writes, cache operations,
// register writes and table changes. It asserts: no panic, every operation ends, every error
// is a *Fault with a defined reason or an *AccessError and is latched, and every Backing
// access is well formed and in bounds (VRAM: inside the VRAM given to New; system: below 2^48;
// the test Backing records violations).
func FuzzGART(f *testing.F) {
	// Input layout: 7 config bytes (VRAM size, table place, GART pages hi/lo, GART_CNTL, start
	// choice, entries from input), then 8 bytes per input entry, then 4 bytes per operation
	// (op, a1, a2, a3; see the loop).
	ops := [][4]byte{
		{0, 1, 0, 10}, {1, 0x11, 4, 20}, {1, 2, 3, 5}, {0, 0, 1, 2}, {0, 2, 2, 7},
		{2, 1, 1, 40}, {2, 5, 3, 1}, {1, 0x19, 4, 7}, {5, 0x61, 2, 0}, {0, 1, 8, 0},
		{4, 0, 1, 1}, {0, 1, 8, 0}, {0, 1, 0xFF, 1}, {0, 3, 5, 5}, {3, 0x08, 0, 0},
		{0, 1, 12, 0}, {2, 9, 7, 0}, {1, 0x21, 30, 200}, {2, 0x31, 6, 255},
	}
	f.Add(fuzzSeed([7]byte{3, 0x03, 0, 32, 1, 0, 0}, nil, ops))
	f.Add(fuzzSeed([7]byte{2, 0x02, 0, 4, 1, 0, 3}, [][8]byte{
		{0x63, 0x10}, {0x00, 0x20}, {0x23, 0x30}, // valid system RW, invalid, read-only
	}, ops))
	f.Add(fuzzSeed([7]byte{0x81, 0x05, 0, 8, 1, 0, 2}, [][8]byte{
		{0x61, 0x00, 0, 0, 0, 0, 0x03, 0}, {0x63, 0xF0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0x80},
	}, ops))
	f.Add(fuzzSeed([7]byte{1, 0x01, 0, 0, 1, 0, 0}, nil, ops))       // END < START
	f.Add(fuzzSeed([7]byte{0, 0x01, 0, 16, 1, 2, 0}, nil, ops))      // GART at the frame buffer, no VRAM
	f.Add(fuzzSeed([7]byte{3, 0x31, 0xFF, 0xFF, 1, 3, 0}, nil, ops)) // near 2^48, PDE invalid
	f.Add(fuzzSeed([7]byte{3, 0x03, 0x40, 0x00, 0, 0, 0}, nil, ops)) // GART disabled
	vmOps := append([][4]byte{{0, 0xF1, 0xFF, 1}, {1, 0x09, 0xFF, 2}, {2, 0x05, 0xFF, 3}, {0, 0x12, 0xFF, 15}}, ops...)
	f.Add(fuzzSeed([7]byte{0x43, 0x03, 0, 32, 0x21, 0, 0}, nil, vmOps))                                  // VMIDs 1..15 through gpuvm
	f.Add(fuzzSeed([7]byte{0x42, 0x02, 0, 4, 0xFF, 1, 2}, [][8]byte{{0x63, 0x10}, {0x00, 0x20}}, vmOps)) // retry and default-page policies
	f.Fuzz(func(t *testing.T, data []byte) {
		at := func(i int) byte {
			if i < len(data) {
				return data[i]
			}
			return 0
		}
		vramSize := fuzzVRAM[at(0)%byte(len(fuzzVRAM))]
		mem := newMem(fuzzMem, int(vramSize))
		cache := l2.NewSize(mem, 8, nil)
		cache.SetStrict(at(0)&0x80 != 0)
		m := New(cache, mem, vramSize, nil)
		var vm *gpuvm.VM
		if at(0)&0x40 != 0 { // VMIDs 1..15 through gpuvm: flat (depth 0) contexts over the GART table
			vm = gpuvm.New(gpuvm.Config{Tables: tableReader{mem}, VRAMSize: vramSize})
			m.SetVM(vm)
		}
		reg := func(r uint32, v uint32) { m.WriteReg(r-abi.BLOCK_GMC_BASE, v) }
		set64 := func(lo, hi uint32, v uint64) { reg(lo, uint32(v)); reg(hi, uint32(v>>32)) }

		// Table: in system memory or VRAM, at one of the first pages.
		tableSys := at(1)&1 != 0
		tableAddr := uint64(at(1)>>1&7) * PageSize
		pde := tableAddr
		if at(1)&0x30 != 0x30 {
			pde |= abi.PTE_VALID_MASK
		}
		if tableSys {
			pde |= abi.PTE_SYSTEM_MASK
		}
		pages := uint64(binary.BigEndian.Uint16([]byte{at(2), at(3)}))
		starts := []uint64{0x1_0000_0000, 0, abi.GPU_FB_BASE, 1<<48 - 16*PageSize}
		start := starts[at(5)%4]
		set64(abi.REG_GMC_GART_START_LO, abi.REG_GMC_GART_START_HI, start)
		set64(abi.REG_GMC_GART_END_LO, abi.REG_GMC_GART_END_HI, start+pages*PageSize-1)
		set64(abi.REG_GMC_GART_TABLE_LO, abi.REG_GMC_GART_TABLE_HI, pde)
		reg(abi.REG_GMC_GART_CNTL, uint32(at(4)))
		if vm != nil {
			for id := 1; id < gpuvm.NumVMIDs; id++ {
				ctx := func(r, v uint32) { vm.WriteContext(id, r, v) }
				ctx(abi.REG_VM_CONTEXT_PAGE_TABLE_BASE_LO, uint32(pde))
				ctx(abi.REG_VM_CONTEXT_START_LO, uint32(start>>12))
				ctx(abi.REG_VM_CONTEXT_START_HI, uint32(start>>44))
				end := (start + pages*PageSize - 1) >> 12
				ctx(abi.REG_VM_CONTEXT_END_LO, uint32(end))
				ctx(abi.REG_VM_CONTEXT_END_HI, uint32(end>>32))
				ctx(abi.REG_VM_CONTEXT_CNTL, abi.REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK|
					uint32(at(4))<<7&0x7FFF80) // retry and policy bits from the input
			}
		}

		// Entries: at(6) of them from the input (raw, but with the top bit clear the address
		// is pulled into memory); the rest valid, readable and writeable, alternating system
		// and VRAM pages, every fourth one UC.
		d := engine.DomainVRAM
		if tableSys {
			d = engine.DomainSystem
		}
		fromInput := int(at(6)) % (fuzzEntries + 1)
		pos := 7
		for i := range fuzzEntries {
			pte := uint64(i%24)*PageSize | rw
			if i%2 == 0 {
				pte |= abi.PTE_SYSTEM_MASK
			}
			if i%4 == 3 {
				pte |= uc
			}
			if i < fromInput {
				var raw [8]byte
				for j := range raw {
					raw[j] = at(pos + j)
				}
				pos += 8
				pte = binary.LittleEndian.Uint64(raw[:])
				if pte>>63 == 0 {
					pte = pte&^abi.PTE_ADDRESS_MASK | pte&0x3F000
				}
			}
			if a := tableAddr + uint64(i)*8; a+8 <= uint64(len(mem.mem[d])) {
				binary.LittleEndian.PutUint64(mem.mem[d][a:], pte)
			}
		}

		checkErr := func(op int, err error) {
			if err == nil {
				return
			}
			var fault *Fault
			var ae *AccessError
			var vf *gpuvm.Fault
			var rf *gpuvm.RetryFault
			if errors.As(err, &rf) {
				return // waits for the driver; nothing latched
			}
			if errors.As(err, &vf) {
				if vm.ReadReg(abi.REG_VM_FAULT_STATUS-abi.BLOCK_VM_BASE) == 0 {
					t.Fatalf("op %d: gpuvm fault %v not latched", op, err)
				}
				return
			}
			switch {
			case errors.As(err, &fault):
				if fault.Reason == abi.VM_FAULT_NONE || fault.Reason > abi.VM_FAULT_GART_DISABLED || fault.Reason == abi.VM_FAULT_BACKING {
					t.Fatalf("op %d: fault with reason %d", op, fault.Reason)
				}
			case errors.As(err, &ae):
			default:
				t.Fatalf("op %d: error of unexpected type %T: %v", op, err, err)
			}
			if m.ReadReg(regVMFaultStatus)&abi.REG_GMC_VM_FAULT_STATUS__VALID_MASK == 0 {
				t.Fatalf("op %d: error %v not latched", op, err)
			}
		}

		buf := make([]byte, fuzzMaxLen)
		for n := 0; n < fuzzOps && pos+4 <= len(data); n, pos = n+1, pos+4 {
			op, a1, a2, a3 := data[pos]%6, data[pos+1], data[pos+2], data[pos+3]
			var va uint64
			switch a1 % 4 {
			case 0:
				va = abi.GPU_FB_BASE + uint64(a2)<<10 + uint64(a3)
			case 1:
				va = start + uint64(a2)<<10 + uint64(a3)
			case 2:
				va = start + uint64(a2)<<12 - uint64(a3%8) // just before a page boundary
			case 3:
				va = uint64(a2)<<40 | uint64(a3)<<20 | uint64(a1)
			}
			length := 1 + int(a3)*37%fuzzMaxLen
			acc := engine.Access{Slot: int(a1 >> 4), Bypass: a1&8 != 0}
			if a2 == 0xFF {
				acc.VMID = int(a3)
			}
			switch op {
			case 0:
				checkErr(n, m.Read(acc, va, buf[:length]))
			case 1:
				checkErr(n, m.Write(acc, va, buf[:length]))
			case 2:
				size := uint64(a3) * PageSize / 4
				if a1&4 != 0 {
					size = uint64(a2) << 30 // large: whole GART, whole-cache fallback
				}
				checkErr(n, m.CacheOp(acc, engine.CacheOp(a2%4+1), va, size))
			case 3:
				reg(uint32(a1%0x40)&^3+abi.BLOCK_GMC_BASE, uint32(a2)<<24|uint32(a3)<<8|uint32(a1))
			case 4:
				reg(abi.REG_GMC_VM_INVALIDATE, uint32(a2))
				if a3&1 != 0 {
					reg(abi.REG_GMC_VM_FAULT_CNTL, abi.REG_GMC_VM_FAULT_CNTL__CLEAR_MASK)
				}
			case 5: // the CPU rewrites an entry (no invalidation)
				if a := tableAddr + uint64(a2%fuzzEntries)*8; a+8 <= uint64(len(mem.mem[d])) {
					mem.cpuWrite(d, a, []byte{a1, a3, 0x03, 0, 0, 0, 0, 0})
				}
			}
			_ = m.ReadReg(uint32(a1%0x40) &^ 3)
		}
		_ = m.CacheOp(engine.Access{}, engine.CacheWBInv, 0, engine.CacheAll)
		if v := mem.violationList(); len(v) > 0 {
			t.Fatalf("backing accesses out of bounds: %q", v)
		}
	})
}

func fuzzSeed(cfg [7]byte, entries [][8]byte, ops [][4]byte) []byte {
	cfg[6] = byte(len(entries))
	out := append([]byte(nil), cfg[:]...)
	for _, e := range entries {
		out = append(out, e[:]...)
	}
	for _, o := range ops {
		out = append(out, o[:]...)
	}
	return out
}

// tableReader is gpuvm's view of the fuzz memory: page-table reads straight from it.
type tableReader struct{ m *memBacking }

func (r tableReader) ReadPTE(pa engine.PhysAddr, p []byte) error {
	return r.m.ReadPhys(pa.Domain, pa.Addr, p)
}
