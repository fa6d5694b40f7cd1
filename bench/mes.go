package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
	"vgpu/vfiouser/vfiousertest"
)

// The MES rig: a device whose compute slots belong to the scheduler firmware, driven through
// the Go vfio-user client the way amdgpu and a user-mode driver drive it. The driver brings up
// the API ring in VRAM, sends 64-dword frames (each with its own api_status slot, a batch
// closed by QUERY_SCHEDULER_STATUS on the ring fence), builds v11 MQDs, process page tables and
// gang contexts in VRAM; a user queue's ring, rptr report and fence live in its process's
// address space, and work is submitted by writing the ring, the wptr shadow and the queue's
// doorbell. Everything reaches the device through BAR0 (VRAM, mmapped) and trapped
// register/doorbell writes.

// VRAM layout of the MES rigs (offsets; GPU address = GPU_FB_BASE + offset), above what
// NewRig uses with NoQueue.
const (
	mesRingOff    = 0x0200_0000 // API ring
	mesRingSize   = 13          // RING_CONTROL.QUEUE_SIZE: 2^14 dwords, 256 frames
	mesRingDwords = 1 << (mesRingSize + 1)
	mesRingFence  = 0x0201_0000 // u64: QUERY_SCHEDULER_STATUS's fence
	mesStatusOff  = 0x0201_1000 // a batch's per-frame api_status slots (u64 each)
	// Frames per batch, with the closing QUERY_SCHEDULER_STATUS: a batch waits for its fence,
	// so it is kept to what one scheduler pass runs (64 frames; more run in further passes).
	mesMaxBatch    = 63
	mesProcOff     = 0x0202_0000 // process context pages
	mesMaxProcs    = 16
	mesTablesOff   = 0x0210_0000 // page tables: mesTableSpan per process
	mesTableSpan   = 256 << 10
	mesQueuesOff   = 0x0400_0000 // queue areas (bump-allocated up to the end of VRAM)
	mesDoorbellDW  = 4           // the API ring's doorbell (dword index)
	mesFirstQueue  = 16          // queue k rings 64-bit doorbell mesFirstQueue+k
	mesProcVA      = 0x0000_0040_0000_0000
	mesPASIDBase   = 0x200
	mesVACntl      = 3 << abi.REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH__SHIFT // 4-level tables
	mesFrameWait   = 10 * time.Second
	mesFrameStatus = 1 // the api_status value the rig asks for
)

// Inside a queue's data page (its process maps it read-write), each on its own cache line.
const (
	mqFence   = 0x000 // u32: the last job's sequence number
	mqReport  = 0x040 // rptr report
	mqPktFnc  = 0x080 // the packet-rate baseline's fence
	mqData    = 0x100 // the jobs' WRITE_DATA targets
	mqPktDst  = 0x180 // the packet-rate baseline's destination
	mqShadow  = 0xA00 // in the MQD page (VMID 0): the wptr shadow
	mqGangCtx = 0xC00 // in the MQD page: the gang context MES writes (256 bytes)
)

// mesRig is a device with the scheduler running and SET_HW_RESOURCES sent.
type mesRig struct {
	*Rig
	mem       *tableMemory
	wptr, seq uint64 // API ring (dwords), ring fence
	next      uint64 // queue-area allocator
	procs     []*mesProc
	queues    []*mesQueue
}

// mesProc is a process: a context page, its page tables, a PASID.
type mesProc struct {
	r      *mesRig
	pasid  uint32
	ctx    uint64 // GPU address of the context page (VMID 0)
	pt     *ptBuilder
	limit  uint64 // end of its table area
	nextVA uint64
}

// mesQueue is a user queue as the driver and its user-mode half see it.
type mesQueue struct {
	r          *mesRig
	proc       *mesProc
	name       string
	doorbell   uint32 // dword index: the queue's identity in frames
	mqd        uint64 // GPU address (VMID 0); shadow and gang context are in its page
	ring, page []byte // the client's views of its ring and data page
	ringDwords uint64
	pageVA     uint64 // in its process
	wptr       uint64 // dwords, monotonic
	seq        uint32 // its last job
}

// mesSchedConfig is what the rig's driver tunes with SET_SCHEDULING_CONFIG (100 ns units,
// 0 = the device's default).
type mesSchedConfig struct {
	idleGrace, preemptGrace uint64
	// process serves the device from a child process (ServeIfChild), as QEMU sees it: the
	// client's goroutines then do not share the device's Go scheduler.
	process bool
}

// newKernelRig starts a device with the same layout and no scheduler: its queues are
// activated through HQD registers (activate), as kernel queues are.
func newKernelRig() (*mesRig, error) {
	rig, err := NewRig(RigConfig{NoQueue: true, Process: true})
	if err != nil {
		return nil, err
	}
	clear(rig.VRAM[mesRingOff:mesQueuesOff])
	return &mesRig{Rig: rig, mem: &tableMemory{vram: rig.VRAM}, next: mesQueuesOff}, nil
}

// activate starts q on a slot the kernel owns, in vmid, as MES would map it: VM_CONTEXT[vmid]
// over its process's tables (as MES programs it), then the HQD registers from the queue's
// ring configuration. The queue stays in its slot for good.
func (r *mesRig) activate(q *mesQueue, slot, vmid int) error {
	ctx := abi.BLOCK_VM_CONTEXT_BASE + uint32(vmid)*abi.BLOCK_VM_CONTEXT_STRIDE
	ringVA := q.ringVA()
	log2 := uint32(0)
	for 1<<log2 < q.ringDwords {
		log2++
	}
	for _, w := range [][2]uint32{
		{ctx + abi.REG_VM_CONTEXT_CNTL, 0},
		{ctx + abi.REG_VM_CONTEXT_PAGE_TABLE_BASE_LO, uint32(q.proc.pt.root | abi.PDE_VALID_MASK)},
		{ctx + abi.REG_VM_CONTEXT_PAGE_TABLE_BASE_HI, uint32(q.proc.pt.root >> 32)},
		{ctx + abi.REG_VM_CONTEXT_START_LO, 0}, {ctx + abi.REG_VM_CONTEXT_START_HI, 0},
		{ctx + abi.REG_VM_CONTEXT_END_LO, 0xFFFFFFFF}, {ctx + abi.REG_VM_CONTEXT_END_HI, 0xF},
		{ctx + abi.REG_VM_CONTEXT_CNTL, abi.REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK | mesVACntl},
		{abi.REG_VM_PASID_LUT_0 + 4*uint32(vmid), q.proc.pasid},
		{hqdReg(slot, abi.REG_HQD_VMID), uint32(vmid)},
		{hqdReg(slot, abi.REG_HQD_PQ_BASE_LO), uint32(ringVA)}, {hqdReg(slot, abi.REG_HQD_PQ_BASE_HI), uint32(ringVA >> 32)},
		{hqdReg(slot, abi.REG_HQD_PQ_CONTROL), log2 - 1},
		{hqdReg(slot, abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO), uint32(q.va(mqReport))},
		{hqdReg(slot, abi.REG_HQD_PQ_RPTR_REPORT_ADDR_HI), uint32(q.va(mqReport) >> 32)},
		{hqdReg(slot, abi.REG_HQD_PQ_DOORBELL_CONTROL), q.doorbell<<abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT&
			abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK | abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK},
		{hqdReg(slot, abi.REG_HQD_ACTIVE), 1},
	} {
		if err := r.SetReg(w[0], w[1]); err != nil {
			return err
		}
	}
	return nil
}

// ringVA is the queue's ring address in its process (from its MQD).
func (q *mesQueue) ringVA() uint64 {
	m := q.r.VRAM[q.mqd-abi.GPU_FB_BASE:]
	return (uint64(binary.LittleEndian.Uint32(m[4*abi.MES_MQD_DW_CP_HQD_PQ_BASE_HI:]))<<32 |
		uint64(binary.LittleEndian.Uint32(m[4*abi.MES_MQD_DW_CP_HQD_PQ_BASE_LO:]))) << 8
}

// newMESRig starts a device, brings up the MES ring and gives MES the compute slots in the
// masks (bit q of pipe p = slot 1+8p+q) and VMIDs 1..15. The unmapped-doorbell intercept is
// on and OVERSUBSCRIPTION_TIMER is 0: every doorbell of an unmapped queue reaches MES, so a
// periodic poll of every unmapped queue's wptr shadow would cost CPU and find nothing.
func newMESRig(pipe0, pipe1 uint32, sc mesSchedConfig) (*mesRig, error) {
	rig, err := NewRig(RigConfig{NoQueue: true, Process: sc.process})
	if err != nil {
		return nil, err
	}
	r := &mesRig{Rig: rig, mem: &tableMemory{vram: rig.VRAM}, next: mesQueuesOff}
	if err := r.bringUp(pipe0, pipe1, sc); err != nil {
		return nil, errors.Join(err, rig.Close())
	}
	return r, nil
}

func (r *mesRig) bringUp(pipe0, pipe1 uint32, sc mesSchedConfig) error {
	clear(r.VRAM[mesRingOff:mesQueuesOff])
	ring := uint64(abi.GPU_FB_BASE) + mesRingOff
	for _, w := range [][2]uint32{
		{abi.REG_MES_RING_BASE_LO, uint32(ring)}, {abi.REG_MES_RING_BASE_HI, uint32(ring >> 32)},
		{abi.REG_MES_RING_CONTROL, mesRingSize},
		{abi.REG_MES_RING_DOORBELL, mesDoorbellDW<<abi.REG_MES_RING_DOORBELL__OFFSET__SHIFT | abi.REG_MES_RING_DOORBELL__EN_MASK},
		{abi.REG_MES_RING_ACTIVE, 1},
	} {
		if err := r.SetReg(w[0], w[1]); err != nil {
			return err
		}
	}
	st, err := r.Reg(abi.REG_MES_STATUS)
	if err != nil {
		return err
	}
	if st&abi.REG_MES_STATUS__STATE_MASK != abi.MES_STATE_RUNNING {
		return fmt.Errorf("MES_STATUS %#x after RING_ACTIVE = 1: not running", st)
	}
	hw := mesFrame(abi.MES_SCH_API_SET_HW_RSRC).
		set(abi.MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB, 0xFFFE).
		set(abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK, pipe0).set(abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK+1, pipe1).
		set(abi.MES_SET_HW_RSRC_DW_OVERSUBSCRIPTION_TIMER, 0)
	cfg := mesFrame(abi.MES_SCH_API_SET_SCHEDULING_CONFIG)
	for l := uint64(0); l < abi.MES_PRIORITY_LEVELS; l++ {
		cfg.set64(abi.MES_SCHED_CFG_DW_PROCESS_GRACE_PERIOD_SAME_LEVEL+2*l, sc.idleGrace)
		cfg.set64(abi.MES_SCHED_CFG_DW_GRACE_PERIOD_OTHER_LEVELS+2*l, sc.preemptGrace)
	}
	return r.frames([]*mesFrameB{hw, cfg})
}

// mesFrameB is one API frame being built.
type mesFrameB struct {
	dw       [abi.MES_API_FRAME_DWORDS]uint32
	statusDW uint64 // where its MES_API_STATUS sits
}

// mesStatusDW is where each opcode the rig sends keeps its MES_API_STATUS.
var mesStatusDW = map[uint32]uint64{
	abi.MES_SCH_API_SET_HW_RSRC:            abi.MES_SET_HW_RSRC_DW_API_STATUS,
	abi.MES_SCH_API_SET_SCHEDULING_CONFIG:  abi.MES_SCHED_CFG_DW_API_STATUS,
	abi.MES_SCH_API_ADD_QUEUE:              abi.MES_ADD_QUEUE_DW_API_STATUS,
	abi.MES_SCH_API_REMOVE_QUEUE:           abi.MES_REMOVE_QUEUE_DW_API_STATUS,
	abi.MES_SCH_API_RESET:                  abi.MES_RESET_DW_API_STATUS,
	abi.MES_SCH_API_SUSPEND:                abi.MES_SUSPEND_DW_API_STATUS,
	abi.MES_SCH_API_RESUME:                 abi.MES_RESUME_DW_API_STATUS,
	abi.MES_SCH_API_QUERY_SCHEDULER_STATUS: abi.MES_QUERY_DW_API_STATUS,
	abi.MES_SCH_API_SET_LOG_BUFFER:         abi.MES_LOG_DW_API_STATUS,
}

func mesFrame(op uint32) *mesFrameB {
	f := &mesFrameB{statusDW: mesStatusDW[op]}
	f.dw[0] = abi.MES_API_TYPE_SCHEDULER | op<<abi.MES_API_HEADER_OPCODE__SHIFT | abi.MES_API_FRAME_DWORDS<<abi.MES_API_HEADER_DWSIZE__SHIFT
	return f
}

func (f *mesFrameB) set(dw uint64, v uint32) *mesFrameB { f.dw[dw] = v; return f }
func (f *mesFrameB) set64(dw uint64, v uint64) *mesFrameB {
	f.dw[dw], f.dw[dw+1] = uint32(v), uint32(v>>32)
	return f
}

func (f *mesFrameB) opcode() uint32 {
	return f.dw[0] & abi.MES_API_HEADER_OPCODE_MASK >> abi.MES_API_HEADER_OPCODE__SHIFT
}

// frames sends fs in batches, each frame with its own api_status slot and the batch closed by
// QUERY_SCHEDULER_STATUS on the ring fence, waits for the ring fence, and fails naming the
// first frame whose status was not written and MES_LAST_ERROR's reason (frames complete in
// order: amdgpu sends one at a time, the batching only saves set-up time).
func (r *mesRig) frames(fs []*mesFrameB) error {
	for len(fs) > 0 {
		k := min(len(fs), mesMaxBatch)
		if err := r.batch(fs[:k]); err != nil {
			return err
		}
		fs = fs[k:]
	}
	return nil
}

func (r *mesRig) batch(fs []*mesFrameB) error {
	fb := uint64(abi.GPU_FB_BASE)
	clear(r.VRAM[mesStatusOff : mesStatusOff+8*len(fs)])
	put := func(f *mesFrameB) {
		for _, d := range f.dw {
			binary.LittleEndian.PutUint32(r.VRAM[mesRingOff+4*(r.wptr%mesRingDwords):], d)
			r.wptr++
		}
	}
	for i, f := range fs {
		f.set64(f.statusDW, fb+mesStatusOff+uint64(8*i)).set64(f.statusDW+2, mesFrameStatus)
		put(f)
	}
	r.seq++
	put(mesFrame(abi.MES_SCH_API_QUERY_SCHEDULER_STATUS).set64(abi.MES_QUERY_DW_API_STATUS, fb+mesRingFence).
		set64(abi.MES_QUERY_DW_API_STATUS+2, r.seq))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], r.wptr)
	if err := r.C.Write(abi.BAR_DOORBELL, 4*mesDoorbellDW, b[:]); err != nil {
		return err
	}
	for deadline := time.Now().Add(mesFrameWait); binary.LittleEndian.Uint64(r.VRAM[mesRingFence:]) < r.seq; {
		if time.Now().After(deadline) {
			return fmt.Errorf("MES ring fence %d not written after %v: %s", r.seq, mesFrameWait, r.mesState())
		}
		time.Sleep(20 * time.Microsecond)
	}
	for i, f := range fs {
		if binary.LittleEndian.Uint64(r.VRAM[mesStatusOff+8*i:]) == 0 {
			le, _ := r.Reg(abi.REG_MES_LAST_ERROR)
			return fmt.Errorf("MES frame %s failed: %s (MES_LAST_ERROR %#x)", abi.NameOf("MES_SCH_API_", uint64(f.opcode())),
				abi.NameOf("MES_ERR_", uint64(le&abi.REG_MES_LAST_ERROR__REASON_MASK)), le)
		}
	}
	return nil
}

// mesState describes the scheduler for an error message.
func (r *mesRig) mesState() string {
	var s string
	for _, g := range []struct {
		name string
		reg  uint32
	}{{"STATUS", abi.REG_MES_STATUS}, {"RPTR", abi.REG_MES_RING_RPTR}, {"FRAMES", abi.REG_MES_FRAMES},
		{"FRAME_ERRORS", abi.REG_MES_FRAME_ERRORS}, {"LAST_ERROR", abi.REG_MES_LAST_ERROR}, {"QUEUES", abi.REG_MES_QUEUES},
		{"MAPPED", abi.REG_MES_MAPPED}, {"HUNG", abi.REG_MES_HUNG}, {"MAPS", abi.REG_MES_MAPS}, {"UNMAPS", abi.REG_MES_UNMAPS}} {
		v, err := r.Reg(g.reg)
		if err != nil {
			return s + " " + err.Error()
		}
		s += fmt.Sprintf(" MES_%s %#x", g.name, v)
	}
	return s[1:]
}

// healthy fails if any frame failed, any queue is hung or a VM fault is latched.
func (r *mesRig) healthy() error {
	for _, g := range []struct {
		what string
		reg  uint32
	}{{"MES frame errors", abi.REG_MES_FRAME_ERRORS}, {"hung MES queues", abi.REG_MES_HUNG}, {"VM_FAULT_STATUS", abi.REG_VM_FAULT_STATUS}} {
		v, err := r.Reg(g.reg)
		if err != nil {
			return err
		}
		if v != 0 {
			return fmt.Errorf("%s: %#x (%s)", g.what, v, r.mesState())
		}
	}
	return nil
}

// reg reads a MES register (its first error is kept for the caller's check).
func (r *mesRig) reg(reg uint32, err *error) uint32 {
	v, e := r.Reg(reg)
	if e != nil && *err == nil {
		*err = e
	}
	return v
}

// newProc creates a process: a context page and a root page table in its own table area.
func (r *mesRig) newProc() (*mesProc, error) {
	n := len(r.procs)
	if n >= mesMaxProcs {
		return nil, fmt.Errorf("more than %d processes", mesMaxProcs)
	}
	at := uint64(mesTablesOff + n*mesTableSpan)
	p := &mesProc{r: r, pasid: mesPASIDBase + uint32(n), ctx: abi.GPU_FB_BASE + mesProcOff + uint64(n)*abi.PTE_PAGE_SIZE,
		pt: newPTBuilder(r.mem, at), limit: at + mesTableSpan, nextVA: mesProcVA}
	r.procs = append(r.procs, p)
	return p, nil
}

// mapVRAM maps n bytes of VRAM at off (page aligned) at the process's next free VA.
func (p *mesProc) mapVRAM(off, n, flags uint64) (uint64, error) {
	va := p.nextVA
	for i := uint64(0); i < n; i += abi.PTE_PAGE_SIZE {
		p.pt.mapPage(va+i, (off+i)|flags)
	}
	if p.pt.next > p.limit {
		return 0, fmt.Errorf("process %#x: page tables beyond their %d KiB", p.pasid, mesTableSpan>>10)
	}
	p.nextVA += (n + abi.PTE_PAGE_SIZE - 1) &^ (abi.PTE_PAGE_SIZE - 1)
	return va, nil
}

// alloc takes n bytes (page aligned) from the queue area.
func (r *mesRig) alloc(n uint64) (uint64, error) {
	n = (n + abi.PTE_PAGE_SIZE - 1) &^ (abi.PTE_PAGE_SIZE - 1)
	if r.next+n > rigVRAM {
		return 0, fmt.Errorf("queue areas exceed VRAM (%d MiB)", rigVRAM>>20)
	}
	off := r.next
	r.next += n
	clear(r.VRAM[off : off+n])
	return off, nil
}

// newQueue builds a compute queue of p (MQD page with its wptr shadow and gang context, a
// ring and a data page mapped in p) and returns it with its ADD_QUEUE frame: a gang of its
// own at level with a gang quantum in 100 ns units (0: the default), as amdgpu's userq does.
func (r *mesRig) newQueue(p *mesProc, name string, ringDwords uint64, level uint32, quantum uint64) (*mesQueue, *mesFrameB, error) {
	mqdOff, err := r.alloc(abi.PTE_PAGE_SIZE)
	if err != nil {
		return nil, nil, err
	}
	ringOff, err := r.alloc(4 * ringDwords)
	if err != nil {
		return nil, nil, err
	}
	pageOff, err := r.alloc(abi.PTE_PAGE_SIZE)
	if err != nil {
		return nil, nil, err
	}
	ringVA, err := p.mapVRAM(ringOff, 4*ringDwords, abi.PTE_VALID_MASK|abi.PTE_READABLE_MASK)
	if err != nil {
		return nil, nil, err
	}
	pageVA, err := p.mapVRAM(pageOff, abi.PTE_PAGE_SIZE, trRW)
	if err != nil {
		return nil, nil, err
	}
	log2 := uint32(0)
	for 1<<log2 < ringDwords {
		log2++
	}
	q := &mesQueue{r: r, proc: p, name: name, doorbell: 2 * uint32(mesFirstQueue+len(r.queues)),
		mqd: abi.GPU_FB_BASE + mqdOff, ring: r.VRAM[ringOff : ringOff+4*ringDwords], page: r.VRAM[pageOff : pageOff+abi.PTE_PAGE_SIZE],
		ringDwords: ringDwords, pageVA: pageVA}
	if int(q.doorbell) >= abi.DOORBELL_SIZE/4 {
		return nil, nil, fmt.Errorf("queue %s: no doorbell left", name)
	}
	mqd := r.VRAM[mqdOff:]
	put := func(dw uint64, v uint32) { binary.LittleEndian.PutUint32(mqd[4*dw:], v) }
	put(abi.MES_MQD_DW_HEADER, abi.MES_MQD_HEADER)
	put(abi.MES_MQD_DW_CP_HQD_PQ_BASE_LO, uint32(ringVA>>8))
	put(abi.MES_MQD_DW_CP_HQD_PQ_BASE_HI, uint32(ringVA>>40))
	put(abi.MES_MQD_DW_CP_HQD_PQ_CONTROL, log2-1)
	put(abi.MES_MQD_DW_CP_HQD_PQ_RPTR_REPORT_ADDR_LO, uint32(pageVA+mqReport))
	put(abi.MES_MQD_DW_CP_HQD_PQ_RPTR_REPORT_ADDR_HI, uint32((pageVA+mqReport)>>32))
	f := mesFrame(abi.MES_SCH_API_ADD_QUEUE).set(abi.MES_ADD_QUEUE_DW_PROCESS_ID, p.pasid).
		set64(abi.MES_ADD_QUEUE_DW_PAGE_TABLE_BASE_ADDR, p.pt.root|abi.PDE_VALID_MASK).
		set64(abi.MES_ADD_QUEUE_DW_PROCESS_VA_START, 0).set64(abi.MES_ADD_QUEUE_DW_PROCESS_VA_END, 1<<(abi.GPU_VA_BITS-12)-1).
		set64(abi.MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ADDR, p.ctx).
		set64(abi.MES_ADD_QUEUE_DW_GANG_QUANTUM, quantum).set64(abi.MES_ADD_QUEUE_DW_GANG_CONTEXT_ADDR, q.mqd+mqGangCtx).
		set(abi.MES_ADD_QUEUE_DW_GANG_GLOBAL_PRIORITY_LEVEL, level).
		set(abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET, q.doorbell).set64(abi.MES_ADD_QUEUE_DW_MQD_ADDR, q.mqd).
		set64(abi.MES_ADD_QUEUE_DW_WPTR_ADDR, q.mqd+mqShadow).set(abi.MES_ADD_QUEUE_DW_QUEUE_TYPE, abi.MES_QUEUE_TYPE_COMPUTE).
		set(abi.MES_ADD_QUEUE_DW_VM_CONTEXT_CNTL, mesVACntl)
	r.queues = append(r.queues, q)
	return q, f, nil
}

// emit writes packets at the queue's wptr.
func (q *mesQueue) emit(dws []uint32) {
	for _, d := range dws {
		binary.LittleEndian.PutUint32(q.ring[4*(q.wptr%q.ringDwords):], d)
		q.wptr++
	}
}

// kick publishes the wptr as a user-mode driver does: the wptr shadow, then the doorbell.
func (q *mesQueue) kick() error {
	binary.LittleEndian.PutUint64(q.r.VRAM[q.mqd-abi.GPU_FB_BASE+mqShadow:], q.wptr)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], q.wptr)
	return q.r.C.Write(abi.BAR_DOORBELL, 4*uint64(q.doorbell), b[:])
}

func (q *mesQueue) fence() uint32           { return binary.LittleEndian.Uint32(q.page[mqFence:]) }
func (q *mesQueue) word(off int) uint32     { return binary.LittleEndian.Uint32(q.page[off:]) }
func (q *mesQueue) va(off uint64) uint64    { return q.pageVA + off }
func (q *mesQueue) String() string          { return q.name }
func (q *mesQueue) jobDone(seq uint32) bool { return int32(q.fence()-seq) >= 0 }

// job appends one short job: WRITE_DATA packets of its sequence number (one dword each, to
// consecutive data dwords), then its fence: a RELEASE_MEM of the sequence number, interrupting
// when irq (a driver asks for the interrupt of the job it will wait for). The writes bypass
// the L2 (cache policy BYPASS) and the fence asks for no cache action: amdgpu's fence writes
// back the whole L2, whose cost grows with every line the 1024 queues' pages leave in it —
// an L2 cost, not the scheduler's, that would swamp what these figures are about.
func (q *mesQueue) job(writes int, irq bool) {
	q.seq++
	for k := range writes {
		q.emit(pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_MEM, Addr: q.va(mqData + 4*uint64(k)), Confirm: true,
			CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, Data: []uint32{q.seq}}.Encode())
	}
	q.emit(jobFence(q.va(mqFence), q.seq, irq))
}

// jobFence is a RELEASE_MEM of seq to addr without cache actions.
func jobFence(addr uint64, seq uint32, irq bool) []uint32 {
	f := pm4.ReleaseMem{CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, DataSel: pm4.Data32, Addr: addr, Data: uint64(seq), CtxID: seq}
	if irq {
		f.IntSel = pm4.IntConfirm
	}
	return f.Encode()
}

// checkJobs: the queue's fence shows its last job and the data dwords hold its number.
func (q *mesQueue) checkJobs(writes int) error {
	if f := q.fence(); f != q.seq {
		return fmt.Errorf("queue %s: fence %d, last job %d", q, f, q.seq)
	}
	for k := range writes {
		if v := q.word(mqData + 4*k); v != q.seq {
			return fmt.Errorf("queue %s: data dword %d holds %d after job %d", q, k, v, q.seq)
		}
	}
	return nil
}

// status is the scheduler's view of the queue (MES_QUERY_*), for error messages and checks.
type mesQueueStatus struct {
	status, maps, preempts uint32
	rptr                   uint64
}

func (q *mesQueue) status() (mesQueueStatus, error) {
	var s mesQueueStatus
	if err := q.r.SetReg(abi.REG_MES_QUERY_DOORBELL, q.doorbell); err != nil {
		return s, err
	}
	var err error
	s.status = q.r.reg(abi.REG_MES_QUERY_STATUS, &err)
	s.maps = q.r.reg(abi.REG_MES_QUERY_MAPS, &err)
	s.preempts = q.r.reg(abi.REG_MES_QUERY_PREEMPTS, &err)
	s.rptr = uint64(q.r.reg(abi.REG_MES_QUERY_RPTR_LO, &err)) | uint64(q.r.reg(abi.REG_MES_QUERY_RPTR_HI, &err))<<32
	return s, err
}

func (s mesQueueStatus) mapped() bool { return s.status&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0 }

func (s mesQueueStatus) String() string {
	return fmt.Sprintf("MES_QUERY_STATUS %#x (slot %d) maps %d preempts %d rptr %d", s.status,
		s.status&abi.REG_MES_QUERY_STATUS__SLOT_MASK>>abi.REG_MES_QUERY_STATUS__SLOT__SHIFT, s.maps, s.preempts, s.rptr)
}

// describe says where a queue stands, for an error about it: the scheduler's status, its
// fence, wptr and rptr report, and the MQD's saved error.
func (q *mesQueue) describe() string {
	s, err := q.status()
	if err != nil {
		return err.Error()
	}
	mqdErr := binary.LittleEndian.Uint32(q.r.VRAM[q.mqd-abi.GPU_FB_BASE+4*abi.MES_MQD_DW_CP_HQD_ERROR:])
	return fmt.Sprintf("%v; fence %d, last job %d, wptr %d, rptr report %d, MQD CP_HQD_ERROR %#x", s, q.fence(), q.seq,
		q.wptr, q.word(mqReport), mqdErr)
}

// waitJobs waits until every queue's fence shows its last job, sleeping on the fence
// interrupt (each queue's last job must interrupt); a queue that does not get there is
// described.
func (r *mesRig) waitJobs(qs []*mesQueue, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for i := 0; i < len(qs); {
		if qs[i].jobDone(qs[i].seq) {
			i++
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("queue %s: job %d not complete after %v: %s (%s)", qs[i], qs[i].seq, timeout, qs[i].describe(), r.mesState())
		}
		if _, err := vfiousertest.WaitIRQ(r.IRQ[0], min(left, time.Millisecond)); err != nil && !errors.Is(err, vfiousertest.ErrTimeout) {
			return err
		}
	}
	return nil
}

// resetFrame is RESET of one queue (RESET_QUEUE_ONLY): stopped at once, its pending work
// discarded.
func (q *mesQueue) resetFrame() *mesFrameB {
	return mesFrame(abi.MES_SCH_API_RESET).set(abi.MES_RESET_DW_FLAGS, abi.MES_RESET_FLAG_RESET_QUEUE_ONLY_MASK).
		set(abi.MES_RESET_DW_DOORBELL_OFFSET, q.doorbell)
}

// jain is Jain's fairness index of x: (Σx)² / (n·Σx²), 1 when all are equal, 1/n when one
// got everything.
func jain(x []uint32) float64 {
	var s, s2 float64
	for _, v := range x {
		s += float64(v)
		s2 += float64(v) * float64(v)
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(x)) * s2)
}
