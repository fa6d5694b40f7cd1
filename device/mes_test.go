package device

import (
	"encoding/binary"
	"testing"

	"vgpu/abi"
	"vgpu/pm4"
)

// The scheduler end to end through vfio-user: the API ring, MQD and gang context in VRAM, a
// user queue in a process address space that MES binds to a VMID itself, its doorbell in
// BAR2, and the protected fence on a page the process maps read-only.

const (
	mtRing   = 0x50000 // MES API ring, 1024 dwords
	mtFence  = 0x52000 // ring fence + per-frame status slots
	mtMQD    = 0x53000
	mtGang   = 0x54000
	mtProc   = 0x55000
	mtShadow = 0x56000
	mtQRing  = 0x57000 // the user queue's ring (VRAM), mapped at vaQRing
	mtQFence = 0x58000 // the protected fence page
	mtDB     = 10      // the user queue's 64-bit doorbell (dword 20)

	vaQRing  = 0x0000_0050_0000_0000
	vaQFence = 0x0000_0050_0010_0000
)

type mesDriver struct {
	*driver
	wptr, seq uint64
	qwptr     uint64
}

func (m *mesDriver) fb(off uint64) uint64 { return abi.GPU_FB_BASE + off }

func (m *mesDriver) put64(off, v uint64) { binary.LittleEndian.PutUint64(m.vram[off:], v) }
func (m *mesDriver) get64(off uint64) uint64 {
	return binary.LittleEndian.Uint64(m.vram[off:])
}

// frame sends one API frame and the trailing QUERY_SCHEDULER_STATUS; true if it succeeded.
func (m *mesDriver) frame(op uint32, statusDW uint64, fields map[uint64]uint32) bool {
	m.t.Helper()
	put := func(f []uint32) {
		for i, v := range f {
			binary.LittleEndian.PutUint32(m.vram[mtRing+4*((m.wptr+uint64(i))%1024):], v)
		}
		m.wptr += abi.MES_API_FRAME_DWORDS
	}
	hdr := func(op uint32) uint32 {
		return abi.MES_API_TYPE_SCHEDULER | op<<abi.MES_API_HEADER_OPCODE__SHIFT | abi.MES_API_FRAME_DWORDS<<abi.MES_API_HEADER_DWSIZE__SHIFT
	}
	f := make([]uint32, abi.MES_API_FRAME_DWORDS)
	f[0] = hdr(op)
	for dw, v := range fields {
		f[dw] = v
	}
	slot := uint64(mtFence + 0x100)
	m.put64(slot, 0)
	f[statusDW], f[statusDW+1], f[statusDW+2] = uint32(m.fb(slot)), uint32(m.fb(slot)>>32), 1
	put(f)
	m.seq++
	q := make([]uint32, abi.MES_API_FRAME_DWORDS)
	q[0] = hdr(abi.MES_SCH_API_QUERY_SCHEDULER_STATUS)
	q[abi.MES_QUERY_DW_API_STATUS], q[abi.MES_QUERY_DW_API_STATUS+1] = uint32(m.fb(mtFence)), uint32(m.fb(mtFence)>>32)
	q[abi.MES_QUERY_DW_API_STATUS+2] = uint32(m.seq)
	put(q)
	m.r.setReg(abi.REG_MES_RING_WPTR_LO, uint32(m.wptr))
	m.r.setReg(abi.REG_MES_RING_WPTR_HI, 0)
	eventually(m.t, "MES ring fence", func() bool { return m.get64(mtFence) >= m.seq })
	return m.get64(slot) != 0
}

// userSubmit writes packets into the user queue's ring, its wptr shadow, then its doorbell.
func (m *mesDriver) userSubmit(pkts ...[]uint32) {
	for _, p := range pkts {
		for _, dw := range p {
			binary.LittleEndian.PutUint32(m.vram[mtQRing+4*(m.qwptr%1024):], dw)
			m.qwptr++
		}
	}
	m.put64(mtShadow, m.qwptr)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], m.qwptr)
	if err := m.r.c.Write(abi.BAR_DOORBELL, 8*mtDB, b[:]); err != nil {
		m.t.Fatal(err)
	}
}

func lo(v uint64) uint32 { return uint32(v) }
func hi(v uint64) uint32 { return uint32(v >> 32) }

// TestMESUserQueueWithProtectedFence: a user queue added through MES runs in the process
// address space MES bound to a VMID; PROTECTED_FENCE_SIGNAL advances a fence the process can
// only read, with an EOP IV naming the doorbell; an ordinary write there faults and the queue
// halts, which MES reports and keeps off the hardware.
func TestMESUserQueueWithProtectedFence(t *testing.T) {
	dev := newSharedDevice(t)
	m := &mesDriver{driver: attach(t, dev, 0, true)}
	m.setupIH()
	vt := newVMTables(m.driver, vtTables)
	for i := uint64(0); i < 4; i++ {
		vt.mapPage(vaQRing+i<<12, (mtQRing+i<<12)|pteRWX)
	}
	vt.mapPage(vaData, vtDataA|pteRWX)
	vt.mapPage(vaQFence, mtQFence|abi.PTE_VALID_MASK|abi.PTE_READABLE_MASK) // read-only
	clear(m.vram[mtRing : mtRing+4096])
	clear(m.vram[mtMQD : mtMQD+0x1000])
	clear(m.vram[mtQRing : mtQRing+0x4000])
	m.r.setReg(abi.REG_MES_RING_BASE_LO, lo(m.fb(mtRing)))
	m.r.setReg(abi.REG_MES_RING_BASE_HI, hi(m.fb(mtRing)))
	m.r.setReg(abi.REG_MES_RING_CONTROL, 9)
	m.r.setReg(abi.REG_MES_RING_ACTIVE, 1)
	if !m.frame(abi.MES_SCH_API_SET_HW_RSRC, abi.MES_SET_HW_RSRC_DW_API_STATUS, map[uint64]uint32{
		abi.MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB: 0xFF00, abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK + 1: 0x3,
	}) {
		t.Fatalf("SET_HW_RESOURCES failed: %#x", m.r.reg(abi.REG_MES_LAST_ERROR))
	}
	mqd := func(dw uint64, v uint32) { binary.LittleEndian.PutUint32(m.vram[mtMQD+4*dw:], v) }
	mqd(abi.MES_MQD_DW_HEADER, abi.MES_MQD_HEADER)
	mqd(abi.MES_MQD_DW_CP_HQD_PQ_BASE_LO, lo(vaQRing>>8))
	mqd(abi.MES_MQD_DW_CP_HQD_PQ_BASE_HI, hi(vaQRing>>8))
	mqd(abi.MES_MQD_DW_CP_HQD_PQ_CONTROL, 9)
	mqd(abi.MES_MQD_DW_FENCE_ADDRESS_LO, lo(vaQFence))
	mqd(abi.MES_MQD_DW_FENCE_ADDRESS_HI, hi(vaQFence))
	root := vt.root | abi.PDE_VALID_MASK
	add := map[uint64]uint32{
		abi.MES_ADD_QUEUE_DW_PROCESS_ID: vtPASID, abi.MES_ADD_QUEUE_DW_PAGE_TABLE_BASE_ADDR: lo(root),
		abi.MES_ADD_QUEUE_DW_PROCESS_VA_END: 0xFFFFFFFF, abi.MES_ADD_QUEUE_DW_PROCESS_VA_END + 1: 0xF,
		abi.MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ADDR: lo(m.fb(mtProc)), abi.MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ADDR + 1: hi(m.fb(mtProc)),
		abi.MES_ADD_QUEUE_DW_GANG_CONTEXT_ADDR: lo(m.fb(mtGang)), abi.MES_ADD_QUEUE_DW_GANG_CONTEXT_ADDR + 1: hi(m.fb(mtGang)),
		abi.MES_ADD_QUEUE_DW_GANG_GLOBAL_PRIORITY_LEVEL: abi.MES_PRIORITY_NORMAL,
		abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET:            2 * mtDB,
		abi.MES_ADD_QUEUE_DW_MQD_ADDR:                   lo(m.fb(mtMQD)), abi.MES_ADD_QUEUE_DW_MQD_ADDR + 1: hi(m.fb(mtMQD)),
		abi.MES_ADD_QUEUE_DW_WPTR_ADDR: lo(m.fb(mtShadow)), abi.MES_ADD_QUEUE_DW_WPTR_ADDR + 1: hi(m.fb(mtShadow)),
		abi.MES_ADD_QUEUE_DW_QUEUE_TYPE:      abi.MES_QUEUE_TYPE_COMPUTE,
		abi.MES_ADD_QUEUE_DW_VM_CONTEXT_CNTL: 3 << abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH__SHIFT,
	}
	m.put64(mtShadow, 0)
	if !m.frame(abi.MES_SCH_API_ADD_QUEUE, abi.MES_ADD_QUEUE_DW_API_STATUS, add) {
		t.Fatalf("ADD_QUEUE failed: %#x", m.r.reg(abi.REG_MES_LAST_ERROR))
	}
	m.userSubmit(bypassWrite(vaData, 0x5EED), pm4.Packet(abi.PM4_IT_PROTECTED_FENCE_SIGNAL, 0))
	eventually(t, "user job", func() bool { return m.u32(vtDataA) == 0x5EED })
	eventually(t, "protected fence", func() bool { return m.get64(mtQFence) == m.qwptr })
	m.r.setReg(abi.REG_MES_QUERY_DOORBELL, 2*mtDB)
	st := m.r.reg(abi.REG_MES_QUERY_STATUS)
	vmid := st & abi.REG_MES_QUERY_STATUS__VMID_MASK >> abi.REG_MES_QUERY_STATUS__VMID__SHIFT
	if vmid < 8 || m.r.reg(abi.REG_VM_PASID_LUT_0+4*vmid) != vtPASID {
		t.Fatalf("status %#x: VMID %d not one of MES's, or its PASID LUT not programmed", st, vmid)
	}
	eop := false
	n := int(m.r.reg(abi.REG_IH_ENTRIES))
	for i := range n {
		e := m.vram[vtIH+i*abi.IH_ENTRY_BYTES:]
		dw0 := binary.LittleEndian.Uint32(e)
		if dw0&0xFF == abi.IH_CLIENT_GRBM_CP && dw0>>8&0xFF == abi.IH_SRC_CP_EOP &&
			binary.LittleEndian.Uint32(e[16:]) == 2*mtDB && binary.LittleEndian.Uint32(e[12:])&0xFFFF == vtPASID {
			eop = true
		}
	}
	if !eop {
		t.Errorf("no EOP IV with the doorbell offset and PASID among %d IVs", n)
	}
	// The process itself cannot write its fence page: the queue halts and MES keeps it off.
	m.userSubmit(bypassWrite(vaQFence, 1))
	// (It may have been unmapped for idleness before: wait for the halt's save, not for
	// "unmapped".)
	eventually(t, "halted queue saved with its error", func() bool {
		return binary.LittleEndian.Uint32(m.vram[mtMQD+4*abi.MES_MQD_DW_CP_HQD_ERROR:]) == abi.CP_ERROR_TRANSLATION
	})
	m.r.setReg(abi.REG_MES_QUERY_DOORBELL, 2*mtDB)
	if st := m.r.reg(abi.REG_MES_QUERY_STATUS); st&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0 {
		t.Errorf("halted queue still mapped: status %#x", st)
	}
	if m.get64(mtQFence) != m.qwptr-uint64(len(bypassWrite(0, 0))) {
		t.Errorf("fence page changed by the faulting write: %#x", m.get64(mtQFence))
	}
	// A device reset stops the scheduler and forgets its queues.
	m.r.setReg(abi.REG_MES_RING_ACTIVE, 0)
	if m.r.reg(abi.REG_MES_STATUS)&abi.REG_MES_STATUS__STATE_MASK != abi.MES_STATE_OFF || m.r.reg(abi.REG_MES_QUEUES) != 0 {
		t.Errorf("after RING_ACTIVE=0: STATUS %#x QUEUES %d", m.r.reg(abi.REG_MES_STATUS), m.r.reg(abi.REG_MES_QUEUES))
	}
}
