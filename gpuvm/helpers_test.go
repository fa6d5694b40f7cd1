package gpuvm

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"vgpu/abi"
	"vgpu/engine"
)

// mem is a real in-memory page-table image: VRAM, and system memory as 4 KiB pages mapped
// by DMA address (an unmapped one refuses the read, as dma.Space does).
type mem struct {
	mu    sync.Mutex
	vram  []byte
	sys   map[uint64][]byte
	reads atomic.Int64
	bad   atomic.Int64 // reads the walker should never have made (out of bounds, misshapen)
}

var errUnmapped = errors.New("test: unmapped DMA address")

func newMem(vramSize int) *mem { return &mem{vram: make([]byte, vramSize), sys: map[uint64][]byte{}} }

func (m *mem) ReadPTE(pa engine.PhysAddr, p []byte) error {
	m.reads.Add(1)
	if len(p) != 8 || pa.Addr%8 != 0 {
		m.bad.Add(1)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if pa.Domain == engine.DomainVRAM {
		if pa.Addr >= uint64(len(m.vram)) || uint64(len(m.vram))-pa.Addr < uint64(len(p)) {
			m.bad.Add(1)
			return errors.New("test: beyond VRAM")
		}
		copy(p, m.vram[pa.Addr:])
		return nil
	}
	pg, ok := m.sys[pa.Addr>>12]
	if !ok {
		return errUnmapped
	}
	copy(p, pg[pa.Addr&pageMask:])
	return nil
}

func (m *mem) put(pa engine.PhysAddr, v uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pa.Domain == engine.DomainVRAM {
		binary.LittleEndian.PutUint64(m.vram[pa.Addr:], v)
		return
	}
	pg, ok := m.sys[pa.Addr>>12]
	if !ok {
		pg = make([]byte, pageSize)
		m.sys[pa.Addr>>12] = pg
	}
	binary.LittleEndian.PutUint64(pg[pa.Addr&pageMask:], v)
}

// tables builds a 4-level (depth 3, block size 0) page table in VRAM, allocating 4 KiB
// tables from the top of VRAM downwards (data pages are low addresses).
type tables struct {
	m    *mem
	next uint64
	root uint64 // VRAM offset of the PDB2
	// dirs maps (level, table offset, index) → the table the entry points to.
	dirs map[[3]uint64]uint64
}

func newTables(m *mem) *tables {
	t := &tables{m: m, next: uint64(len(m.vram)), dirs: map[[3]uint64]uint64{}}
	t.root = t.alloc()
	return t
}

func (t *tables) alloc() uint64 {
	t.next -= pageSize
	return t.next
}

func vram(a uint64) engine.PhysAddr { return engine.PhysAddr{Domain: engine.DomainVRAM, Addr: a} }

func idx(l int, va uint64) uint64 { return va >> (12 + 9*uint(l)) & 511 }

// dir returns the table of level l (3 = root) on va's path, creating PDEs down to it.
func (t *tables) dir(l int, va uint64) uint64 {
	tab := t.root
	for lv := 3; lv > l; lv-- {
		k := [3]uint64{uint64(lv), tab, idx(lv, va)}
		next, ok := t.dirs[k]
		if !ok {
			next = t.alloc()
			t.dirs[k] = next
			t.m.put(vram(tab+idx(lv, va)*8), next|abi.PDE_VALID_MASK)
		}
		tab = next
	}
	return tab
}

// set writes the entry of level l for va (0: the PTE; 1, 2: a huge-page or any entry).
func (t *tables) set(l int, va, entry uint64) {
	t.m.put(vram(t.dir(l, va)+idx(l, va)*8), entry)
}

// entryAddr is where the entry of level l for va lives.
func (t *tables) entryAddr(l int, va uint64) engine.PhysAddr {
	return vram(t.dir(l, va) + idx(l, va)*8)
}

const rw = abi.PTE_VALID_MASK | abi.PTE_READABLE_MASK | abi.PTE_WRITEABLE_MASK

// policy bits amdgpu programs into contexts 1..15 (every ENABLE_DEFAULT clear here: halts).
const allInterrupts = abi.REG_VM_CONTEXT_CNTL__RANGE_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK |
	abi.REG_VM_CONTEXT_CNTL__PDE0_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK |
	abi.REG_VM_CONTEXT_CNTL__VALID_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK |
	abi.REG_VM_CONTEXT_CNTL__READ_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK |
	abi.REG_VM_CONTEXT_CNTL__WRITE_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK |
	abi.REG_VM_CONTEXT_CNTL__EXECUTE_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK

const allDefaults = abi.REG_VM_CONTEXT_CNTL__RANGE_PROTECTION_FAULT_ENABLE_DEFAULT_MASK |
	abi.REG_VM_CONTEXT_CNTL__PDE0_PROTECTION_FAULT_ENABLE_DEFAULT_MASK |
	abi.REG_VM_CONTEXT_CNTL__VALID_PROTECTION_FAULT_ENABLE_DEFAULT_MASK |
	abi.REG_VM_CONTEXT_CNTL__READ_PROTECTION_FAULT_ENABLE_DEFAULT_MASK |
	abi.REG_VM_CONTEXT_CNTL__WRITE_PROTECTION_FAULT_ENABLE_DEFAULT_MASK |
	abi.REG_VM_CONTEXT_CNTL__EXECUTE_PROTECTION_FAULT_ENABLE_DEFAULT_MASK

func cntl(extra uint32) uint32 {
	return abi.REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK | 3<<abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH__SHIFT | allInterrupts | extra
}

// world is a VM over a page-table image, with its IVs collected.
type world struct {
	t   *testing.T
	m   *mem
	tab *tables
	vm  *VM
	mu  sync.Mutex
	ivs []engine.IV
}

const testVRAM = 8 << 20

func newWorld(t *testing.T) *world {
	w := &world{t: t, m: newMem(testVRAM)}
	w.tab = newTables(w.m)
	w.vm = New(Config{Tables: w.m, VRAMSize: testVRAM})
	w.vm.SetIVSink(func(iv engine.IV) {
		w.mu.Lock()
		w.ivs = append(w.ivs, iv)
		w.mu.Unlock()
	})
	return w
}

// enable programs context vmid over the world's tables: 48-bit range, root in VRAM.
func (w *world) enable(vmid int, c uint32) {
	w.setRoot(vmid, w.tab.root|abi.PDE_VALID_MASK)
	w.vm.WriteContext(vmid, ctxEndLo, 0xFFFFFFFF)
	w.vm.WriteContext(vmid, ctxEndHi, 0xF)
	w.vm.WriteContext(vmid, ctxCntl, c)
}

func (w *world) setRoot(vmid int, pde uint64) {
	w.vm.WriteContext(vmid, ctxBaseLo, uint32(pde))
	w.vm.WriteContext(vmid, ctxBaseHi, uint32(pde>>32))
}

func (w *world) takeIVs() []engine.IV {
	w.mu.Lock()
	defer w.mu.Unlock()
	ivs := w.ivs
	w.ivs = nil
	return ivs
}

// flush invalidates vmid through engine 0 as amdgpu does (every level), checking the ACK.
func (w *world) flush(vmid int) {
	w.t.Helper()
	req := uint32(1)<<vmid | reqAny
	w.vm.WriteEngine(0, engReq, req)
	if ack := w.vm.ReadEngine(0, engAck); ack&(1<<vmid) == 0 {
		w.t.Fatalf("ACK %#x lacks vmid %d after REQ %#x", ack, vmid, req)
	}
}

func acc(vmid int) engine.Access {
	return engine.Access{VMID: vmid, Slot: 3, Client: abi.VM_CID_CPC}
}

// ivAddr decodes a fault IV's address as amdgpu's gmc_v11_0_process_interrupt does.
func ivAddr(iv engine.IV) uint64 {
	return uint64(iv.Data[0])<<12 | uint64(iv.Data[1]&0xf)<<44
}
