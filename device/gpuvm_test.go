package device

import (
	"encoding/binary"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// The GPUVM wiring end to end, through vfio-user: page tables the test writes into VRAM
// through BAR0, contexts and engines programmed by register, work submitted on rings.

const (
	vtTables = 0x10_0000 // page tables are allocated upwards from here
	vtIB     = 0x20_0000 // VRAM pages the tests map
	vtDataA  = 0x20_1000
	vtDataB  = 0x20_2000
	vaIB     = 0x0000_0070_0000_0000
	vaData   = 0x0000_0071_0000_0000
	vtPASID  = 0x42
)

// vmTables builds a 4-level page table for one context in the driver's VRAM window.
type vmTables struct {
	d    *driver
	root uint64
	next uint64
	dirs map[[2]uint64]uint64 // (table, index) → next table
}

// newVMTables allocates tables from VRAM offset at upwards.
func newVMTables(d *driver, at uint64) *vmTables {
	t := &vmTables{d: d, next: at, dirs: map[[2]uint64]uint64{}}
	t.root = t.alloc()
	return t
}

func (t *vmTables) alloc() uint64 {
	a := t.next
	t.next += abi.PTE_PAGE_SIZE
	clear(t.d.vram[a : a+abi.PTE_PAGE_SIZE])
	return a
}

func (t *vmTables) put(addr, v uint64) { binary.LittleEndian.PutUint64(t.d.vram[addr:], v) }

// mapPage makes va's PTE pte (a VRAM page with its flags).
func (t *vmTables) mapPage(va, pte uint64) {
	tab := t.root
	for l := 3; l > 0; l-- {
		i := va >> (12 + 9*l) & 511
		next, ok := t.dirs[[2]uint64{tab, i}]
		if !ok {
			next = t.alloc()
			t.dirs[[2]uint64{tab, i}] = next
			t.put(tab+8*i, next|abi.PDE_VALID_MASK)
		}
		tab = next
	}
	t.put(tab+8*(va>>12&511), pte)
}

// enableContext programs context vmid over t, with extra CNTL bits.
func (t *vmTables) enableContext(vmid int, extra uint32) {
	reg := func(r, v uint32) {
		t.d.r.setReg(abi.BLOCK_VM_CONTEXT_BASE+uint32(vmid)*abi.BLOCK_VM_CONTEXT_STRIDE+r, v)
	}
	reg(abi.REG_VM_CONTEXT_PAGE_TABLE_BASE_LO, uint32(t.root|abi.PDE_VALID_MASK))
	reg(abi.REG_VM_CONTEXT_PAGE_TABLE_BASE_HI, 0)
	reg(abi.REG_VM_CONTEXT_END_LO, 0xFFFFFFFF)
	reg(abi.REG_VM_CONTEXT_END_HI, 0xF)
	reg(abi.REG_VM_CONTEXT_CNTL, abi.REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK|3<<abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH__SHIFT|extra)
	t.d.r.setReg(abi.REG_VM_PASID_LUT_0+4*uint32(vmid), vtPASID)
}

const pteRWX = abi.PTE_VALID_MASK | abi.PTE_READABLE_MASK | abi.PTE_WRITEABLE_MASK | abi.PTE_EXECUTABLE_MASK

// writeIB puts packets at VRAM offset at and returns their size in dwords.
func (d *driver) writeIB(at uint64, pkts ...[]uint32) uint32 {
	n := uint32(0)
	for _, p := range pkts {
		for _, dw := range p {
			binary.LittleEndian.PutUint32(d.vram[at+4*uint64(n):], dw)
			n++
		}
	}
	return n
}

func bypassWrite(va uint64, v uint32) []uint32 {
	return pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_MEM, Addr: va, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, Data: []uint32{v}}.Encode()
}

func (d *driver) u32(off uint64) uint32 { return binary.LittleEndian.Uint32(d.vram[off:]) }

func (d *driver) state() uint32 {
	return d.hqdRead(abi.REG_HQD_STATUS) & abi.REG_HQD_STATUS__STATE_MASK
}

func (d *driver) halted(t *testing.T, code uint32) {
	t.Helper()
	eventually(t, "queue halted", func() bool { return d.state() == abi.HQD_STATE_HALTED })
	if got := d.hqdRead(abi.REG_HQD_STATUS) & abi.REG_HQD_STATUS__ERROR_MASK >> abi.REG_HQD_STATUS__ERROR__SHIFT; got != code {
		t.Fatalf("halted with %s, want %s", abi.NameOf("CP_ERROR_", uint64(got)), abi.NameOf("CP_ERROR_", uint64(code)))
	}
}

func statusField(st, mask, shift uint32) uint32 { return st & mask >> shift }

const vtIH = 0x4_0000 // a 16 KiB IH ring in VRAM

func (d *driver) setupIH() {
	clear(d.vram[vtIH : vtIH+16<<10])
	ih := uint64(abi.GPU_FB_BASE + vtIH)
	d.r.setReg(abi.REG_IH_RB_BASE_LO, uint32(ih))
	d.r.setReg(abi.REG_IH_RB_BASE_HI, uint32(ih>>32))
	d.r.setReg(abi.REG_IH_RB_CNTL, 12<<abi.REG_IH_RB_CNTL__RB_SIZE__SHIFT|abi.REG_IH_RB_CNTL__RB_ENABLE_MASK|
		abi.REG_IH_RB_CNTL__WPTR_OVERFLOW_ENABLE_MASK)
}

type ivEntry struct {
	client, source, vmid uint32
	pasid                uint32
	data                 [4]uint32
}

// vmFaultIVs returns the VM-fault IVs the IH wrote so far.
func (d *driver) vmFaultIVs() []ivEntry {
	var out []ivEntry
	n := int(d.r.reg(abi.REG_IH_ENTRIES))
	for i := range min(n, 16<<10/abi.IH_ENTRY_BYTES) {
		e := d.vram[vtIH+i*abi.IH_ENTRY_BYTES:]
		dw := func(k int) uint32 { return binary.LittleEndian.Uint32(e[4*k:]) }
		iv := ivEntry{client: dw(0) & 0xFF, source: dw(0) >> 8 & 0xFF, vmid: dw(0) >> 24 & 0xF, pasid: dw(3) & 0xFFFF,
			data: [4]uint32{dw(4), dw(5), dw(6), dw(7)}}
		if iv.client == abi.IH_CLIENT_GFX && iv.source == abi.IH_SRC_VM_FAULT {
			out = append(out, iv)
		}
	}
	return out
}

// faultAddr decodes an IV's address as amdgpu's gmc_v11_0_process_interrupt does.
func (iv ivEntry) faultAddr() uint64 { return uint64(iv.data[0])<<12 | uint64(iv.data[1]&0xF)<<44 }

// A kernel ring runs an IB in VMID 1 (the IB's VMID field): the IB is fetched and its packets
// access memory through VMID 1's page tables; a non-executable IB page halts the queue with
// the fault named in VM_FAULT_STATUS.
func TestKernelRingRunsIBInProcessVMID(t *testing.T) {
	dev := newSharedDevice(t)
	d := attach(t, dev, 0, true)
	vt := newVMTables(d, vtTables)
	vt.mapPage(vaIB, vtIB|pteRWX)
	vt.mapPage(vaData, vtDataA|pteRWX)
	vt.enableContext(1, 0)
	n := d.writeIB(vtIB, bypassWrite(vaData+8, 0xC0FFEE))
	d.startQueue()
	d.submit(pm4.IndirectBuffer{Addr: vaIB, Size: n, VMID: 1}.Encode(), bypassWrite(abi.GPU_FB_BASE+ltFence, 1))
	eventually(t, "fence", func() bool { return d.fence() == 1 })
	if got := d.u32(vtDataA + 8); got != 0xC0FFEE {
		t.Fatalf("VMID 1's page holds %#x", got)
	}

	vt.mapPage(vaIB+0x1000, (vtIB)|abi.PTE_VALID_MASK|abi.PTE_READABLE_MASK) // not executable
	d.submit(pm4.IndirectBuffer{Addr: vaIB + 0x1000, Size: n, VMID: 1}.Encode())
	d.halted(t, abi.CP_ERROR_TRANSLATION)
	st := d.r.reg(abi.REG_VM_FAULT_STATUS)
	if statusField(st, abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS_MASK, abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS__SHIFT) != abi.VM_PERM_EXECUTE ||
		statusField(st, abi.REG_VM_FAULT_STATUS__CID_MASK, abi.REG_VM_FAULT_STATUS__CID__SHIFT) != abi.VM_CID_CPF ||
		statusField(st, abi.REG_VM_FAULT_STATUS__VMID_MASK, abi.REG_VM_FAULT_STATUS__VMID__SHIFT) != 1 {
		t.Errorf("VM_FAULT_STATUS %#x", st)
	}
	if lo := d.r.reg(abi.REG_VM_FAULT_ADDR_LO); lo != uint32((vaIB+0x1000)>>12) {
		t.Errorf("VM_FAULT_ADDR_LO %#x", lo)
	}
}

// A queue whose HQD_VMID is 1 runs entirely in that address space: ring, rptr report and
// packet data. Its packets cannot reach registers.
func TestProcessQueue(t *testing.T) {
	dev := newSharedDevice(t)
	d := attach(t, dev, 0, true)
	vt := newVMTables(d, vtTables)
	var vaRing, vaRptr uint64 = 0x0000_0060_0000_0000, 0x0000_0060_0001_0000
	for i := uint64(0); i < 4; i++ {
		vt.mapPage(vaRing+i<<12, (ltRing+i<<12)|pteRWX)
	}
	vt.mapPage(vaRptr, ltRptr|pteRWX)
	vt.mapPage(vaData, vtDataA|pteRWX)
	vt.enableContext(2, 0)
	clear(d.vram[ltRing : ltRing+4*ltRingDw])
	d.hqd(abi.REG_HQD_PQ_BASE_LO, uint32(vaRing))
	d.hqd(abi.REG_HQD_PQ_BASE_HI, uint32(vaRing>>32))
	d.hqd(abi.REG_HQD_PQ_CONTROL, 9)
	d.hqd(abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO, uint32(vaRptr))
	d.hqd(abi.REG_HQD_PQ_RPTR_REPORT_ADDR_HI, uint32(vaRptr>>32))
	d.hqd(abi.REG_HQD_PQ_DOORBELL_CONTROL, 2*ltDoorbell<<abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT|
		abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK)
	d.hqd(abi.REG_HQD_VMID, 2)
	d.hqd(abi.REG_HQD_ACTIVE, 1)
	d.wptr = 0
	d.submit(bypassWrite(vaData, 7), bypassWrite(vaData+4, 8))
	eventually(t, "data", func() bool { return d.u32(vtDataA+4) == 8 })
	eventually(t, "rptr report", func() bool { return d.u32(ltRptr) == uint32(d.wptr) })
	d.submit(pm4.WriteReg(abi.REG_SCRATCH_0/4, 1))
	d.halted(t, abi.CP_ERROR_BAD_REGISTER)
	if d.r.reg(abi.REG_SCRATCH_0) != 0 {
		t.Error("a process queue wrote a register")
	}
}

// A retry fault parks the queue without halting; the driver maps the page, invalidates
// through an engine, acknowledges the CAM entry, and the write completes; a fault that is
// never resolved ends with a dequeue reset.
func TestRetryFaultParksAndReplays(t *testing.T) {
	dev := newSharedDevice(t)
	d := attach(t, dev, 0, true)
	vt := newVMTables(d, vtTables)
	vt.mapPage(vaIB, vtIB|pteRWX)
	vt.enableContext(1, abi.REG_VM_CONTEXT_CNTL__RETRY_PERMISSION_OR_INVALID_PAGE_FAULT_MASK)
	n := d.writeIB(vtIB, bypassWrite(vaData, 0x5EED))
	d.setupIH()
	d.startQueue()
	d.submit(pm4.IndirectBuffer{Addr: vaIB, Size: n, VMID: 1}.Encode(), bypassWrite(abi.GPU_FB_BASE+ltFence, 1))
	eventually(t, "queue waiting on the fault", func() bool {
		return d.state() == abi.HQD_STATE_WAITING && d.r.reg(abi.REG_VM_RETRY_CAM_STATUS)&abi.REG_VM_RETRY_CAM_STATUS__USED_MASK == 1
	})
	if d.fence() != 0 || d.r.reg(abi.REG_VM_FAULT_STATUS) != 0 || d.r.reg(abi.REG_VM_RETRY_FAULTS) != 1 {
		t.Fatalf("fence %d, status %#x, retry IVs %d", d.fence(), d.r.reg(abi.REG_VM_FAULT_STATUS), d.r.reg(abi.REG_VM_RETRY_FAULTS))
	}
	eventually(t, "retry-fault IV", func() bool { return len(d.vmFaultIVs()) > 0 })
	ivs := d.vmFaultIVs()
	if len(ivs) != 1 || ivs[0].faultAddr() != vaData || ivs[0].vmid != 1 || ivs[0].pasid != vtPASID ||
		ivs[0].data[1]&(abi.VM_IV_DW5_RETRY_MASK|abi.VM_IV_DW5_WRITE_MASK) != abi.VM_IV_DW5_RETRY_MASK|abi.VM_IV_DW5_WRITE_MASK ||
		ivs[0].data[2] != 0 {
		t.Fatalf("retry-fault IVs %+v", ivs)
	}
	vt.mapPage(vaData, vtDataA|pteRWX)
	eng := func(r uint32) uint32 { return abi.BLOCK_VM_INV_ENG_BASE + 4*abi.BLOCK_VM_INV_ENG_STRIDE + r }
	d.r.setReg(eng(abi.REG_VM_INV_ENG_REQ), 1<<1|0xF<<abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PTES__SHIFT)
	if ack := d.r.reg(eng(abi.REG_VM_INV_ENG_ACK)); ack&2 == 0 {
		t.Fatalf("ACK %#x", ack)
	}
	d.r.setReg(abi.REG_VM_RETRY_CAM_ACK, 0) // the first entry
	eventually(t, "fence after the replay", func() bool { return d.fence() == 1 })
	if got := d.u32(vtDataA); got != 0x5EED {
		t.Fatalf("replayed write: %#x", got)
	}

	// Unresolved: the queue waits until it is reset.
	n = d.writeIB(vtIB, bypassWrite(vaData+0x10_0000, 1))
	d.submit(pm4.IndirectBuffer{Addr: vaIB, Size: n, VMID: 1}.Encode())
	eventually(t, "second wait", func() bool { return d.state() == abi.HQD_STATE_WAITING })
	d.hqd(abi.REG_HQD_DEQUEUE_REQUEST, abi.HQD_DEQUEUE_RESET)
	eventually(t, "reset ends the wait", func() bool { return d.hqdRead(abi.REG_HQD_ACTIVE) == 0 })
}

// INVALIDATE_TLBS by PASID from the ring ends a stale translation that strict mode named.
func TestInvalidateTLBsPacket(t *testing.T) {
	dev := newSharedDevice(t)
	d := attach(t, dev, 0, true)
	vt := newVMTables(d, vtTables)
	vt.mapPage(vaIB, vtIB|pteRWX)
	vt.mapPage(vaData, vtDataA|pteRWX)
	vt.enableContext(3, 0)
	d.r.setReg(abi.REG_VM_STRICT_CNTL, 1)
	n := d.writeIB(vtIB, bypassWrite(vaData, 1))
	d.startQueue()
	ib := pm4.IndirectBuffer{Addr: vaIB, Size: n, VMID: 3}.Encode()
	d.submit(ib, bypassWrite(abi.GPU_FB_BASE+ltFence, 1))
	eventually(t, "first write", func() bool { return d.fence() == 1 && d.u32(vtDataA) == 1 })

	vt.mapPage(vaData, vtDataB|pteRWX) // no invalidation: the TLB keeps page A
	d.writeIB(vtIB, bypassWrite(vaData, 2))
	d.submit(ib, bypassWrite(abi.GPU_FB_BASE+ltFence, 2))
	eventually(t, "stale write", func() bool { return d.fence() == 2 })
	if a, b := d.u32(vtDataA), d.u32(vtDataB); a != 2 || b != 0 {
		t.Fatalf("without invalidation: A %d, B %d (want the stale page A written)", a, b)
	}
	if uses := d.r.reg(abi.REG_VM_STALE_USES); uses == 0 {
		t.Error("strict mode did not name the stale use")
	}
	if ev := d.r.reg(abi.REG_VM_STALE_EVENT); ev&abi.REG_VM_STALE_EVENT__SLOT_MASK != ltSlot ||
		statusField(ev, abi.REG_VM_STALE_EVENT__VMID_MASK, abi.REG_VM_STALE_EVENT__VMID__SHIFT) != 3 {
		t.Errorf("STALE_EVENT %#x", ev)
	}
	d.writeIB(vtIB, bypassWrite(vaData, 3))
	d.submit(pm4.Packet(abi.PM4_IT_INVALIDATE_TLBS, 1|1<<abi.PM4_INVALIDATE_TLBS_ALL_HUB__SHIFT|vtPASID<<abi.PM4_INVALIDATE_TLBS_PASID__SHIFT),
		ib, bypassWrite(abi.GPU_FB_BASE+ltFence, 3))
	eventually(t, "write after INVALIDATE_TLBS", func() bool { return d.fence() == 3 })
	if b := d.u32(vtDataB); b != 3 {
		t.Fatalf("after INVALIDATE_TLBS page B holds %d", b)
	}
}

// A VMID-0 fault is latched in the AMD-format VM_FAULT_STATUS too.
func TestKernelFaultInVMLatch(t *testing.T) {
	dev := newSharedDevice(t)
	d := attach(t, dev, 0, true)
	d.setupIH()
	d.startQueue()
	d.submit(bypassWrite(0x0000_0200_0000_0000, 1)) // in no aperture
	d.halted(t, abi.CP_ERROR_TRANSLATION)
	eventually(t, "VM-fault IV", func() bool { return len(d.vmFaultIVs()) == 1 })
	if iv := d.vmFaultIVs()[0]; iv.faultAddr() != 0x200_0000_0000 || iv.vmid != 0 || iv.data[1]&abi.VM_IV_DW5_WRITE_MASK == 0 {
		t.Errorf("VM-fault IV %+v", iv)
	}
	st := d.r.reg(abi.REG_VM_FAULT_STATUS)
	if st&abi.REG_VM_FAULT_STATUS__MAPPING_ERROR_MASK == 0 || st&abi.REG_VM_FAULT_STATUS__VMID_MASK != 0 ||
		statusField(st, abi.REG_VM_FAULT_STATUS__CID_MASK, abi.REG_VM_FAULT_STATUS__CID__SHIFT) != abi.VM_CID_CPC ||
		st&abi.REG_VM_FAULT_STATUS__RW_MASK == 0 {
		t.Errorf("VM_FAULT_STATUS %#x", st)
	}
	if d.r.reg(abi.REG_VM_FAULT_ADDR_LO) != 0x200_0000_0000>>12 {
		t.Errorf("VM_FAULT_ADDR_LO %#x", d.r.reg(abi.REG_VM_FAULT_ADDR_LO))
	}
}

// Queues of eight VMIDs run at once, each an IB at the same VA in its own address space,
// while the driver keeps invalidating every VMID through an engine: each VMID's writes land
// in its own page only. Run with -race: the device's real MMU, gpuvm and L2 under concurrent
// queues.
func TestConcurrentProcessVMIDs(t *testing.T) {
	const (
		vmids    = 8
		rounds   = 20
		perIB    = 16
		ringsAt  = 0x5_0000 // a 4 KiB ring per slot
		fencesAt = 0x6_0000
		pagesAt  = 0x30_0000
		ibsAt    = 0x38_0000
	)
	dev := newSharedDevice(t)
	d := attach(t, dev, 0, true)
	for v := 1; v <= vmids; v++ {
		vt := newVMTables(d, vtTables+uint64(v)*0x1_0000)
		ib, page := uint64(ibsAt+v*0x1000), uint64(pagesAt+v*0x1000)
		vt.mapPage(vaIB, ib|pteRWX)
		vt.mapPage(vaData, page|pteRWX)
		vt.enableContext(v, 0)
		var pkts [][]uint32
		for i := range perIB {
			pkts = append(pkts, bypassWrite(vaData+4*uint64(i), uint32(v)<<16|uint32(i)))
		}
		n := d.writeIB(ib, pkts...)
		slot := uint32(v)
		ring := uint64(ringsAt + v*0x1000)
		clear(d.vram[ring : ring+0x1000])
		hqd := func(r, val uint32) { d.r.setReg(abi.BLOCK_HQD_BASE+slot*abi.BLOCK_HQD_STRIDE+r, val) }
		hqd(abi.REG_HQD_PQ_BASE_LO, uint32(abi.GPU_FB_BASE+ring))
		hqd(abi.REG_HQD_PQ_BASE_HI, uint32((abi.GPU_FB_BASE+ring)>>32))
		hqd(abi.REG_HQD_PQ_CONTROL, 9)
		hqd(abi.REG_HQD_ACTIVE, 1)
		wptr := uint64(0)
		for r := range rounds {
			for _, dw := range append(pm4.IndirectBuffer{Addr: vaIB, Size: n, VMID: uint32(v)}.Encode(),
				bypassWrite(abi.GPU_FB_BASE+fencesAt+4*uint64(v), uint32(r+1))...) {
				binary.LittleEndian.PutUint32(d.vram[ring+4*(wptr%1024):], dw)
				wptr++
			}
		}
		hqd(abi.REG_HQD_PQ_WPTR_LO, uint32(wptr)) // kick: every queue now runs its rounds
	}
	eng := func(r uint32) uint32 { return abi.BLOCK_VM_INV_ENG_BASE + 7*abi.BLOCK_VM_INV_ENG_STRIDE + r }
	done := func() bool {
		for v := 1; v <= vmids; v++ {
			if d.u32(fencesAt+4*uint64(v)) != rounds {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(10 * time.Second) // a liveness bound, not a speed assertion
	for !done() {                                // the driver invalidates every VMID all the while
		if time.Now().After(deadline) {
			t.Fatal("the queues' fences were not written in 10 s")
		}
		d.r.setReg(eng(abi.REG_VM_INV_ENG_REQ), 0x1FE|0xF<<abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PTES__SHIFT)
		for v := 1; v <= vmids; v++ {
			if st := d.r.reg(abi.BLOCK_HQD_BASE + uint32(v)*abi.BLOCK_HQD_STRIDE + abi.REG_HQD_STATUS); st&abi.REG_HQD_STATUS__STATE_MASK == abi.HQD_STATE_HALTED {
				t.Fatalf("slot %d halted: %#x", v, st)
			}
		}
	}
	for v := 1; v <= vmids; v++ {
		for i := range perIB {
			if got := d.u32(uint64(pagesAt + v*0x1000 + 4*i)); got != uint32(v)<<16|uint32(i) {
				t.Fatalf("VMID %d's page, dword %d: %#x", v, i, got)
			}
		}
	}
	if d.r.reg(abi.REG_VM_FAULTS) != 0 {
		t.Errorf("%d faults", d.r.reg(abi.REG_VM_FAULTS))
	}
}
