package cp

import (
	"encoding/binary"
	"fmt"
	"time"
	"vgpu/engine"

	"vgpu/abi"
)

// Short names for abi's packet field values, to keep the decoders readable.
const (
	wrmAlways, wrmLT, wrmLE, wrmEQ = abi.PM4_WAIT_REG_MEM_FUNCTION_ALWAYS, abi.PM4_WAIT_REG_MEM_FUNCTION_LT, abi.PM4_WAIT_REG_MEM_FUNCTION_LE, abi.PM4_WAIT_REG_MEM_FUNCTION_EQ
	wrmNE, wrmGE, wrmGT            = abi.PM4_WAIT_REG_MEM_FUNCTION_NE, abi.PM4_WAIT_REG_MEM_FUNCTION_GE, abi.PM4_WAIT_REG_MEM_FUNCTION_GT
	wrmSpaceReg, wrmSpaceMem       = abi.PM4_WAIT_REG_MEM_MEM_SPACE_REG, abi.PM4_WAIT_REG_MEM_MEM_SPACE_MEM
	wrmOpWait, wrmOpWriteWait      = abi.PM4_WAIT_REG_MEM_OPERATION_WAIT, abi.PM4_WAIT_REG_MEM_OPERATION_WRITE_WAIT
	wrmOpWaitPreemptable           = abi.PM4_WAIT_REG_MEM_OPERATION_WAIT_PREEMPTABLE

	releaseDataNone, releaseData32, releaseData64 = abi.PM4_RELEASE_MEM_DATA_SEL_NONE, abi.PM4_RELEASE_MEM_DATA_SEL_32, abi.PM4_RELEASE_MEM_DATA_SEL_64
	releaseDataGPUClock, releaseDataSysClock      = abi.PM4_RELEASE_MEM_DATA_SEL_GPU_CLOCK, abi.PM4_RELEASE_MEM_DATA_SEL_SYSTEM_CLOCK
	releaseIntNone, releaseIntConfirm             = abi.PM4_RELEASE_MEM_INT_SEL_NONE, abi.PM4_RELEASE_MEM_INT_SEL_IRQ_CONFIRM
	releaseDstMem, releaseDstL2                   = abi.PM4_RELEASE_MEM_DST_SEL_MEM, abi.PM4_RELEASE_MEM_DST_SEL_TC_L2

	acquireRangeRange = abi.PM4_ACQUIRE_MEM_GCR_GL2_RANGE_RANGE

	regOffsetMask    = abi.PM4_REG_OFFSET_MASK
	setRegOffsetMask = abi.PM4_SET_REG_OFFSET_MASK
)

// Reserved bits the CP checks (CP_ERROR_RESERVED_BITS, IH_SRC_CP_RESERVED_BITS). Only fields
// that are reserved in AMD's layouts and that amdgpu emits as zero are checked.
const (
	pm4HeaderReserved    = 0x000000FC // header [7:2]
	setRegReserved       = 0x0FFF0000 // SET_CONFIG_REG / SET_UCONFIG_REG DW1 [27:16]
	setShRegReserved     = 0x007F0000 // SET_SH_REG DW1 [22:16]
	writeDataReserved    = 0x0000F0FF // WRITE_DATA DW1 [7:0], [15:12]
	acquireGCRReserved   = 0xFFF80000 // ACQUIRE_MEM GCR_CNTL [31:19]
	pfpSyncMeReservedAll = 0xFFFFFFFF // PFP_SYNC_ME's only payload dword must be zero
)

func dw(p []byte, i int) uint32 { return binary.LittleEndian.Uint32(p[4*i:]) }

func addr64(lo, hi uint32) uint64 { return uint64(hi)<<32 | uint64(lo) }

func overflows(a, n uint64) bool { return a+n < a }

func field(v, mask, shift uint32) uint32 { return v & mask >> shift }

// wantCount checks a fixed payload size (COUNT = payload dwords - 1).
func wantCount(count, want uint32) error {
	if count != want {
		return badPacket("wrong COUNT for the opcode")
	}
	return nil
}

// exec runs one type-3 packet (header and payload in p) other than NOP.
func (q *queue) exec(op, hdr uint32, p []byte) error {
	count := field(hdr, abi.PM4_HEADER_COUNT_MASK, abi.PM4_HEADER_COUNT__SHIFT)
	switch op {
	case abi.PM4_IT_WRITE_DATA:
		return q.writeData(count, p)
	case abi.PM4_IT_RELEASE_MEM:
		return q.releaseMem(count, p)
	case abi.PM4_IT_INDIRECT_BUFFER:
		return q.indirectBuffer(count, p)
	case abi.PM4_IT_WAIT_REG_MEM:
		return q.waitRegMem(count, p)
	case abi.PM4_IT_ACQUIRE_MEM:
		return q.acquireMem(count, p)
	case abi.PM4_IT_SET_UCONFIG_REG:
		return q.setReg(count, p, abi.PM4_SPACE_UCONFIG_BASE, abi.PM4_SPACE_UCONFIG_END, setRegReserved)
	case abi.PM4_IT_SET_CONFIG_REG:
		return q.setReg(count, p, abi.PM4_SPACE_CONFIG_BASE, abi.PM4_SPACE_CONFIG_END, setRegReserved)
	case abi.PM4_IT_SET_SH_REG:
		return q.setShReg(count, p)
	case abi.PM4_IT_COPY_DATA:
		return q.copyData(count, p)
	case abi.PM4_IT_EVENT_WRITE:
		// CS_PARTIAL_FLUSH waits for earlier work of the queue: packets already run in order
		// to completion, so an event without data is a no-op. Sampling events (COUNT 2: an
		// address the result is written to) have nothing to sample here; accepting them
		// would leave the address unwritten and a wait on it hanging, so they are refused.
		if count == 2 {
			return badPacket("EVENT_WRITE with an address (a sampling event) is not supported")
		}
		if err := wantCount(count, 0); err != nil {
			return err
		}
		return q.waitShaders(false) // CS_PARTIAL_FLUSH: the queue's dispatches complete first
	case abi.PM4_IT_DMA_DATA:
		return q.dmaData(count, p)
	case abi.PM4_IT_INVALIDATE_TLBS:
		return q.invalidateTLBs(count, p)
	case abi.PM4_IT_DISPATCH_DIRECT:
		return q.dispatchDirect(count, p)
	case abi.PM4_IT_DISPATCH_INDIRECT:
		return q.dispatchIndirect(count, p)
	case abi.PM4_IT_SET_BASE:
		return q.setBase(count, p)
	case abi.PM4_IT_PROTECTED_FENCE_SIGNAL:
		return q.protectedFence(count, p)
	case abi.PM4_IT_PFP_SYNC_ME:
		if q.slot != 0 {
			// Compute queues have no PFP (amdgpu emits PFP_SYNC_ME on the graphics ring only).
			return badOpcode("PFP_SYNC_ME on a compute queue")
		}
		if err := wantCount(count, 0); err != nil {
			return err
		}
		if dw(p, 1)&pfpSyncMeReservedAll != 0 {
			return reserved("PFP_SYNC_ME payload")
		}
		return nil
	}
	return badOpcode(fmt.Sprintf("unknown opcode %#x", op))
}

// setReg is SET_CONFIG_REG / SET_UCONFIG_REG: COUNT values to consecutive registers of the
// space [base, end) (dword offsets into the register BAR).
func (q *queue) setReg(count uint32, p []byte, base, end, reservedMask uint32) error {
	d1 := dw(p, 1)
	if d1&reservedMask != 0 {
		return reserved("SET_*_REG DW1 [27:16]")
	}
	if count == 0 {
		return badPacket("SET_*_REG without values")
	}
	first := base + d1&setRegOffsetMask
	if uint64(first)+uint64(count) > uint64(end) {
		return badRegister("SET_*_REG beyond its register space", nil)
	}
	for i := uint32(0); i < count; i++ {
		if err := q.writeReg(first+i, dw(p, 2+int(i))); err != nil {
			return err
		}
		if i%longPacketCheck == longPacketCheck-1 && !q.chunkDone(longPacketCheck) {
			return errStop
		}
	}
	return nil
}

// setShReg is SET_SH_REG: COMPUTE_USER_DATA_0..15 and the shader dispatch registers
// (shader.go) are the queue's own state; other SH registers are accepted and ignored.
func (q *queue) setShReg(count uint32, p []byte) error {
	d1 := dw(p, 1)
	if d1&setShRegReserved != 0 {
		return reserved("SET_SH_REG DW1 [22:16]")
	}
	if count == 0 {
		return badPacket("SET_SH_REG without values")
	}
	off := d1 & setRegOffsetMask
	if uint64(off)+uint64(count) > abi.PM4_SPACE_SH_END-abi.PM4_SPACE_SH_BASE {
		return badRegister("SET_SH_REG beyond the SH space", nil)
	}
	for i := uint32(0); i < count; i++ {
		if r := off + i - abi.SH_COMPUTE_USER_DATA_0; r < abi.SH_COMPUTE_USER_DATA_COUNT {
			q.userData[r] = dw(p, 2+int(i))
		} else {
			q.setSh(off+i, dw(p, 2+int(i)))
		}
	}
	return nil
}

// regOperand checks a register operand (a dword offset in [17:0]).
func regOperand(v uint32) (uint32, error) {
	if v&^regOffsetMask != 0 {
		return 0, reserved("register offset bits [31:18]")
	}
	return v, nil
}

// writeData is WRITE_DATA: data dwords to registers or memory, consecutive or all to one
// address. DST_SEL 2 goes through L2; 1 and 5 bypass it when CACHE_POLICY is BYPASS.
func (q *queue) writeData(count uint32, p []byte) error {
	if count < 3 {
		return badPacket("WRITE_DATA without data")
	}
	d1 := dw(p, 1)
	if d1&writeDataReserved != 0 {
		return reserved("WRITE_DATA DW1 [7:0]/[15:12]")
	}
	one := d1&abi.PM4_WRITE_DATA_WR_ONE_ADDR_MASK != 0
	data := p[16:]
	switch dst := field(d1, abi.PM4_WRITE_DATA_DST_SEL_MASK, abi.PM4_WRITE_DATA_DST_SEL__SHIFT); dst {
	case abi.PM4_WRITE_DATA_DST_REG:
		r, err := regOperand(dw(p, 2))
		if err != nil {
			return err
		}
		for i := 0; i < len(data); i += 4 {
			if err := q.writeReg(r, le32(data[i:])); err != nil {
				return err
			}
			if !one {
				r++
			}
			if i/4%longPacketCheck == longPacketCheck-1 && !q.chunkDone(longPacketCheck) {
				return errStop
			}
		}
		return nil
	case abi.PM4_WRITE_DATA_DST_MEM_GRBM, abi.PM4_WRITE_DATA_DST_TC_L2, abi.PM4_WRITE_DATA_DST_MEM:
		lo := dw(p, 2)
		if lo&3 != 0 {
			return badPacket("WRITE_DATA address not dword aligned")
		}
		a := addr64(lo, dw(p, 3))
		bypass := dst != abi.PM4_WRITE_DATA_DST_TC_L2 &&
			field(d1, abi.PM4_WRITE_DATA_CACHE_POLICY_MASK, abi.PM4_WRITE_DATA_CACHE_POLICY__SHIFT) == abi.PM4_CACHE_POLICY_BYPASS
		if !one {
			return q.write(bypass, a, data)
		}
		for i := 0; i < len(data); i += 4 {
			if err := q.write(bypass, a, data[i:i+4]); err != nil {
				return err
			}
			if i/4%longPacketCheck == longPacketCheck-1 && !q.chunkDone(longPacketCheck) {
				return errStop
			}
		}
		return nil
	}
	return badPacket("WRITE_DATA DST_SEL not supported")
}

// copyData is COPY_DATA: 32 or 64 bits from a register, memory, an immediate or the GPU
// clock to a register or memory.
func (q *queue) copyData(count uint32, p []byte) error {
	if err := wantCount(count, 4); err != nil {
		return err
	}
	d1 := dw(p, 1)
	n := 4
	if d1&abi.PM4_COPY_DATA_COUNT_SEL_MASK != 0 {
		n = 8
	}
	v := q.scratch[:n]
	switch field(d1, abi.PM4_COPY_DATA_SRC_SEL_MASK, abi.PM4_COPY_DATA_SRC_SEL__SHIFT) {
	case abi.PM4_COPY_DATA_SEL_REG:
		r, err := regOperand(dw(p, 2))
		if err != nil {
			return err
		}
		for i := 0; i < n; i += 4 {
			x, err := q.readReg(r + uint32(i/4))
			if err != nil {
				return err
			}
			binary.LittleEndian.PutUint32(v[i:], x)
		}
	case abi.PM4_COPY_DATA_SEL_TC_L2:
		lo := dw(p, 2)
		if lo&3 != 0 {
			return badPacket("COPY_DATA source not dword aligned")
		}
		bypass := field(d1, abi.PM4_COPY_DATA_SRC_CACHE_POLICY_MASK, abi.PM4_COPY_DATA_SRC_CACHE_POLICY__SHIFT) == abi.PM4_CACHE_POLICY_BYPASS
		if err := q.read(bypass, addr64(lo, dw(p, 3)), v); err != nil {
			return err
		}
	case abi.PM4_COPY_DATA_SEL_MEM: // as a source: immediate data
		binary.LittleEndian.PutUint64(q.scratch[:], addr64(dw(p, 2), dw(p, 3)))
	case abi.PM4_COPY_DATA_SEL_GPU_CLOCK:
		binary.LittleEndian.PutUint64(q.scratch[:], q.c.gpuClock())
	default:
		return badPacket("COPY_DATA SRC_SEL not supported")
	}
	switch dst := field(d1, abi.PM4_COPY_DATA_DST_SEL_MASK, abi.PM4_COPY_DATA_DST_SEL__SHIFT); dst {
	case abi.PM4_COPY_DATA_SEL_REG:
		r, err := regOperand(dw(p, 4))
		if err != nil {
			return err
		}
		for i := 0; i < n; i += 4 {
			if err := q.writeReg(r+uint32(i/4), le32(v[i:])); err != nil {
				return err
			}
		}
		return nil
	case abi.PM4_COPY_DATA_SEL_TC_L2, abi.PM4_COPY_DATA_SEL_MEM:
		lo := dw(p, 4)
		if lo&3 != 0 {
			return badPacket("COPY_DATA destination not dword aligned")
		}
		bypass := dst == abi.PM4_COPY_DATA_SEL_MEM &&
			field(d1, abi.PM4_COPY_DATA_DST_CACHE_POLICY_MASK, abi.PM4_COPY_DATA_DST_CACHE_POLICY__SHIFT) == abi.PM4_CACHE_POLICY_BYPASS
		return q.write(bypass, addr64(lo, dw(p, 5)), v)
	}
	return badPacket("COPY_DATA DST_SEL not supported")
}

// indirectBuffer is INDIRECT_BUFFER: from the ring it starts IB1, from IB1 an IB2; CHAIN
// replaces the current IB (an IB1 chain continues the ring after the IB1 ends). The IB's
// VMID field is honoured only in a kernel stream (VMID 0): it runs the IB — fetch and every
// access of its packets, and the IBs it starts — in that process address space, as amdgpu
// submits a process's IB on a kernel ring. A process stream's IBs stay in its VMID whatever
// the field says (a process cannot leave its address space).
func (q *queue) indirectBuffer(count uint32, p []byte) error {
	if err := wantCount(count, 2); err != nil {
		return err
	}
	lo, ctl := dw(p, 1), dw(p, 3)
	if lo&3 != 0 {
		return badPacket("INDIRECT_BUFFER base not dword aligned (swap is not supported)")
	}
	base := addr64(lo, dw(p, 2))
	size := uint64(ctl & abi.PM4_IB_SIZE_MASK >> abi.PM4_IB_SIZE__SHIFT)
	if overflows(base, size*4) {
		return badPacket("INDIRECT_BUFFER wraps the address space")
	}
	level := q.level
	if ctl&abi.PM4_IB_CHAIN_MASK != 0 {
		if level == 0 {
			return badPacket("INDIRECT_BUFFER CHAIN in the ring (only an IB can be chained)")
		}
	} else {
		if level == IBMaxDepth {
			return &fault{code: abi.CP_ERROR_IB_DEPTH, why: "INDIRECT_BUFFER nested deeper than IB2"}
		}
		if level == 0 {
			q.ibCount = 0 // a new submission
		}
		level++
	}
	q.ibCount++
	q.c.ibs.Add(1)
	if q.ibCount > q.c.maxIB {
		return &fault{code: abi.CP_ERROR_IB_LIMIT, why: "too many INDIRECT_BUFFER starts for one submission"}
	}
	vmid := q.curVMID()
	if vmid == 0 {
		vmid = int(ctl & abi.PM4_IB_VMID_MASK >> abi.PM4_IB_VMID__SHIFT)
	}
	s := &q.streams[level]
	s.base, s.size, s.ring, s.pos, s.end, s.bufN, s.vmid = base, size, false, 0, size, 0, vmid
	q.level = level
	q.traceIB(base, size, ctl&abi.PM4_IB_CHAIN_MASK != 0)
	return nil
}

// cacheActions performs the GL2 part of a GCR request on [va, va+size) (CacheAll: every
// line): write-back and/or invalidate, then discard. GLM/GLV/GL1/GLK/GLI have no model.
func (q *queue) cacheActions(wb, inv, discard bool, va, size uint64) error {
	var op engine.CacheOp
	switch {
	case wb && inv:
		op = engine.CacheWBInv
	case wb:
		op = engine.CacheWB
	case inv:
		op = engine.CacheInv
	}
	if op != 0 {
		if err := q.cacheOp(op, va, size); err != nil {
			return err
		}
	}
	if discard {
		return q.cacheOp(engine.CacheDiscard, va, size)
	}
	return nil
}

// releaseMem is RELEASE_MEM, an end-of-pipe event: everything before it has completed (in
// order), so: the cache actions, then the fence data, then the interrupt.
func (q *queue) releaseMem(count uint32, p []byte) error {
	if err := wantCount(count, 6); err != nil {
		return err
	}
	d1, d2 := dw(p, 1), dw(p, 2)
	dataSel := field(d2, abi.PM4_RELEASE_MEM_DATA_SEL_MASK, abi.PM4_RELEASE_MEM_DATA_SEL__SHIFT)
	intSel := field(d2, abi.PM4_RELEASE_MEM_INT_SEL_MASK, abi.PM4_RELEASE_MEM_INT_SEL__SHIFT)
	dstSel := field(d2, abi.PM4_RELEASE_MEM_DST_SEL_MASK, abi.PM4_RELEASE_MEM_DST_SEL__SHIFT)
	switch {
	case dataSel > releaseDataSysClock:
		return badPacket("RELEASE_MEM DATA_SEL not supported")
	case intSel > releaseIntConfirm:
		return badPacket("RELEASE_MEM INT_SEL not supported")
	case dstSel > releaseDstL2:
		return badPacket("RELEASE_MEM DST_SEL not supported")
	}
	lo := dw(p, 3)
	a := addr64(lo, dw(p, 4))
	n := 8
	if dataSel == releaseData32 {
		n = 4
	}
	if dataSel != releaseDataNone && lo&uint32(n-1) != 0 {
		return badPacket("RELEASE_MEM address not aligned to its data")
	}
	// An end-of-pipe event: the queue's dispatches complete before its cache actions and data.
	if err := q.waitShaders(false); err != nil {
		return err
	}
	if d1&(abi.PM4_RELEASE_MEM_GCR_GLV_INV_MASK|abi.PM4_RELEASE_MEM_GCR_GL1_INV_MASK) != 0 && q.c.compute != nil {
		q.invalidateL0()
	}
	if err := q.cacheActions(d1&abi.PM4_RELEASE_MEM_GCR_GL2_WB_MASK != 0, d1&abi.PM4_RELEASE_MEM_GCR_GL2_INV_MASK != 0,
		d1&abi.PM4_RELEASE_MEM_GCR_GL2_DISCARD_MASK != 0, 0, engine.CacheAll); err != nil {
		return err
	}
	if dataSel != releaseDataNone {
		switch dataSel {
		case releaseData32, releaseData64:
			binary.LittleEndian.PutUint64(q.scratch[:], addr64(dw(p, 5), dw(p, 6)))
		case releaseDataGPUClock:
			binary.LittleEndian.PutUint64(q.scratch[:], q.c.gpuClock())
		case releaseDataSysClock:
			binary.LittleEndian.PutUint64(q.scratch[:], q.c.sysClock())
		}
		if err := q.fenceCheck(a); err != nil {
			return err
		}
		bypass := dstSel == releaseDstMem &&
			field(d1, abi.PM4_RELEASE_MEM_CACHE_POLICY_MASK, abi.PM4_RELEASE_MEM_CACHE_POLICY__SHIFT) == abi.PM4_CACHE_POLICY_BYPASS
		if err := q.write(bypass, a, q.scratch[:n]); err != nil {
			return err
		}
		q.fences.Add(1)
	}
	q.traceFence(a, dataSel != releaseDataNone, intSel != releaseIntNone)
	if intSel != releaseIntNone {
		return q.push(engine.IV{
			Client: abi.IH_CLIENT_GRBM_CP, Source: abi.IH_SRC_CP_EOP, RingID: q.ringID, VMID: uint8(q.curVMID()),
			Data: [4]uint32{dw(p, 7)},
		})
	}
	return nil
}

// acquireMem is ACQUIRE_MEM: GL2 write-back/invalidate/discard of everything or, with
// GL2_RANGE = 2, of COHER_BASE/COHER_SIZE (256-byte units; an all-ones size is everything).
func (q *queue) acquireMem(count uint32, p []byte) error {
	if err := wantCount(count, 6); err != nil {
		return err
	}
	gcr := dw(p, 7)
	if gcr&acquireGCRReserved != 0 {
		return reserved("ACQUIRE_MEM GCR_CNTL [31:19]")
	}
	if gcr&(abi.PM4_ACQUIRE_MEM_GCR_GLV_INV_MASK|abi.PM4_ACQUIRE_MEM_GCR_GL1_INV_MASK) != 0 && q.c.compute != nil {
		q.invalidateL0() // the compute units' L0s (GLV, the vector L0, and GL1)
	}
	va, size := uint64(0), engine.CacheAll
	sizeLo, sizeHi := dw(p, 2), dw(p, 3)&0xFF
	if field(gcr, abi.PM4_ACQUIRE_MEM_GCR_GL2_RANGE_MASK, abi.PM4_ACQUIRE_MEM_GCR_GL2_RANGE__SHIFT) == acquireRangeRange &&
		(sizeLo != 0xFFFFFFFF || sizeHi != 0xFF) {
		va = addr64(dw(p, 4), dw(p, 5)&0xFFFFFF) << 8
		size = addr64(sizeLo, sizeHi) << 8
		if size == 0 {
			return nil
		}
	}
	return q.cacheActions(gcr&abi.PM4_ACQUIRE_MEM_GCR_GL2_WB_MASK != 0, gcr&abi.PM4_ACQUIRE_MEM_GCR_GL2_INV_MASK != 0,
		gcr&abi.PM4_ACQUIRE_MEM_GCR_GL2_DISCARD_MASK != 0, va, size)
}

// waitCond is a WAIT_REG_MEM condition.
type waitCond struct {
	fn        uint32
	mem       bool
	bypass    bool
	addr      uint64 // memory
	reg       uint32 // register polled
	ref, mask uint32
}

func (w *waitCond) eval(q *queue) (bool, error) {
	var v uint32
	if w.mem {
		if err := q.readPoll(w.bypass, w.addr, q.scratch[:4]); err != nil {
			return false, err
		}
		v = le32(q.scratch[:])
		if compare(w.fn, v&w.mask, w.ref&w.mask) {
			q.hazardAcquire(q.curVMID(), w.addr) // a wait on a dispatch's own fence orders it
			return true, nil
		}
	} else {
		var err error
		if v, err = q.readReg(w.reg); err != nil {
			return false, err
		}
	}
	return compare(w.fn, v&w.mask, w.ref&w.mask), nil
}

func compare(fn, a, b uint32) bool {
	switch fn {
	case wrmAlways:
		return true
	case wrmLT:
		return a < b
	case wrmLE:
		return a <= b
	case wrmEQ:
		return a == b
	case wrmNE:
		return a != b
	case wrmGE:
		return a >= b
	case wrmGT:
		return a > b
	}
	return false
}

// waitRegMem is WAIT_REG_MEM: poll a register or memory dword until (value & mask) FUNCTION
// (reference & mask); OPERATION 1 first writes the reference to REG_ADDR1 and polls
// REG_ADDR2. An unsatisfied wait parks the queue (see park).
func (q *queue) waitRegMem(count uint32, p []byte) error {
	if err := wantCount(count, 5); err != nil {
		return err
	}
	d1 := dw(p, 1)
	w := waitCond{
		fn:  field(d1, abi.PM4_WAIT_REG_MEM_FUNCTION_MASK, abi.PM4_WAIT_REG_MEM_FUNCTION__SHIFT),
		ref: dw(p, 4), mask: dw(p, 5),
	}
	if w.fn > wrmGT {
		return badPacket("WAIT_REG_MEM FUNCTION 7")
	}
	op := field(d1, abi.PM4_WAIT_REG_MEM_OPERATION_MASK, abi.PM4_WAIT_REG_MEM_OPERATION__SHIFT)
	switch field(d1, abi.PM4_WAIT_REG_MEM_MEM_SPACE_MASK, abi.PM4_WAIT_REG_MEM_MEM_SPACE__SHIFT) {
	case wrmSpaceMem:
		if op != wrmOpWait && op != wrmOpWaitPreemptable {
			return badPacket("WAIT_REG_MEM write-then-wait needs register space")
		}
		lo := dw(p, 2)
		if lo&3 != 0 {
			return badPacket("WAIT_REG_MEM address not dword aligned")
		}
		w.mem, w.addr = true, addr64(lo, dw(p, 3))
		w.bypass = field(d1, abi.PM4_WAIT_REG_MEM_CACHE_POLICY_MASK, abi.PM4_WAIT_REG_MEM_CACHE_POLICY__SHIFT) == abi.PM4_CACHE_POLICY_BYPASS
	case wrmSpaceReg:
		r1, err := regOperand(dw(p, 2))
		if err != nil {
			return err
		}
		w.reg = r1
		switch op {
		case wrmOpWait, wrmOpWaitPreemptable:
		case wrmOpWriteWait:
			if w.reg, err = regOperand(dw(p, 3)); err != nil {
				return err
			}
			// A mapped queue preempted in this wait has written the reference already
			// (ExecState.WaitWritten): the write is not repeated on resume.
			if !q.waitWritten {
				if err := q.writeReg(r1, w.ref); err != nil {
					return err
				}
				q.waitWritten = true
			}
		default:
			return badPacket("WAIT_REG_MEM OPERATION not supported")
		}
	default:
		return badPacket("WAIT_REG_MEM MEM_SPACE not supported")
	}
	ok, err := w.eval(q)
	if err == nil && !ok {
		interval := time.Duration(dw(p, 6)&abi.PM4_WAIT_REG_MEM_POLL_INTERVAL_MASK) * time.Microsecond
		err = q.park(&w, interval)
	}
	if err != errStop {
		q.waitWritten = false // the packet is over (done or halted): the next one writes again
	}
	return err
}

// dmaData is DMA_DATA: copy or fill BYTE_COUNT bytes between GPU addresses. SEL 0 goes
// straight to memory, SEL 3 through L2 (unless its cache policy is BYPASS). SAIC/DAIC keep an
// address fixed (dword transfers: BYTE_COUNT must then be a multiple of 4). Register
// addressing (SAS/DAS) and GDS are not supported.
func (q *queue) dmaData(count uint32, p []byte) error {
	if err := wantCount(count, 5); err != nil {
		return err
	}
	d1, d6 := dw(p, 1), dw(p, 6)
	if d6&(abi.PM4_DMA_DATA_SAS_MASK|abi.PM4_DMA_DATA_DAS_MASK) != 0 {
		return badPacket("DMA_DATA register addressing (SAS/DAS) not supported")
	}
	n := uint64(d6 & abi.PM4_DMA_DATA_BYTE_COUNT_MASK >> abi.PM4_DMA_DATA_BYTE_COUNT__SHIFT)
	saic, daic := d6&abi.PM4_DMA_DATA_SAIC_MASK != 0, d6&abi.PM4_DMA_DATA_DAIC_MASK != 0
	src, dst := addr64(dw(p, 2), dw(p, 3)), addr64(dw(p, 4), dw(p, 5))

	var dstBypass bool
	switch field(d1, abi.PM4_DMA_DATA_DST_SEL_MASK, abi.PM4_DMA_DATA_DST_SEL__SHIFT) {
	case abi.PM4_DMA_DATA_SEL_ADDR:
		dstBypass = true
	case abi.PM4_DMA_DATA_SEL_ADDR_L2:
		dstBypass = field(d1, abi.PM4_DMA_DATA_DST_CACHE_POLICY_MASK, abi.PM4_DMA_DATA_DST_CACHE_POLICY__SHIFT) == abi.PM4_CACHE_POLICY_BYPASS
	default:
		return badPacket("DMA_DATA DST_SEL not supported")
	}
	fill, srcBypass := false, false
	switch field(d1, abi.PM4_DMA_DATA_SRC_SEL_MASK, abi.PM4_DMA_DATA_SRC_SEL__SHIFT) {
	case abi.PM4_DMA_DATA_SEL_ADDR:
		srcBypass = true
	case abi.PM4_DMA_DATA_SEL_ADDR_L2:
		srcBypass = field(d1, abi.PM4_DMA_DATA_SRC_CACHE_POLICY_MASK, abi.PM4_DMA_DATA_SRC_CACHE_POLICY__SHIFT) == abi.PM4_CACHE_POLICY_BYPASS
	case abi.PM4_DMA_DATA_SEL_DATA:
		fill = true
	default:
		return badPacket("DMA_DATA SRC_SEL not supported")
	}
	if (saic || daic) && n%4 != 0 {
		return badPacket("DMA_DATA SAIC/DAIC with a byte count not a multiple of 4")
	}
	// A mapped queue preempted inside this packet resumes after the bytes it moved.
	done := q.progress
	if done != 0 && (done >= n || daic) {
		return badPacket("DMA_DATA resumed with a saved progress beyond its byte count")
	}
	if n == 0 {
		return nil
	}
	if !daic && overflows(dst, n) || !fill && !saic && overflows(src, n) {
		return badPacket("DMA_DATA range wraps the address space")
	}
	pattern := uint32(src)
	if !fill && saic {
		// A fixed source reads the same dword each time: a fill with that dword.
		if err := q.read(srcBypass, src, q.scratch[:4]); err != nil {
			return err
		}
		pattern, fill = le32(q.scratch[:]), true
	}
	if daic {
		// A fixed destination ends up holding the last dword transferred.
		if !fill {
			if err := q.read(srcBypass, src+n-4, q.scratch[:4]); err != nil {
				return err
			}
			pattern = le32(q.scratch[:])
		}
		binary.LittleEndian.PutUint32(q.scratch[:], pattern)
		return q.write(dstBypass, dst, q.scratch[:4])
	}
	var err error
	if fill {
		err = q.fill(dstBypass, dst, pattern, n, done, true)
	} else {
		err = q.copyMem(srcBypass, src, dstBypass, dst, n, done, true)
	}
	if err == nil {
		q.progress = 0
	}
	return err
}

func (q *queue) chunkBuf() []byte {
	if q.chunk == nil {
		q.chunk = q.c.getChunk()
	}
	return q.chunk
}

// protectedFence is PROTECTED_FENCE_SIGNAL (mapped queues with a fence address): the ring
// rptr after the packet (inside an IB: after the IB's packet), 64 bits, written to the fence
// address with the kernel's privilege (a read-only page of the queue's process does not
// fault), bypassing L2 as a fence does; then an EOP IV with DW4 = the doorbell offset.
func (q *queue) protectedFence(count uint32, p []byte) error {
	if q.fenceAddr == 0 {
		return badPacket("PROTECTED_FENCE_SIGNAL on a queue without a protected fence")
	}
	if err := wantCount(count, 0); err != nil {
		return err
	}
	if dw(p, 1) != 0 {
		return reserved("PROTECTED_FENCE_SIGNAL payload")
	}
	v := q.streams[0].pos // inside an IB: the ring is already past the IB's packet
	if q.level == 0 {
		v += abi.PM4_PROTECTED_FENCE_DWORDS
	}
	binary.LittleEndian.PutUint64(q.scratch[:], v)
	if err := q.fenceCheck(q.fenceAddr); err != nil {
		return err
	}
	a := engine.Access{VMID: q.vmid, Slot: q.slot, Bypass: true, Client: q.client, Privileged: true}
	if err := q.writeAs(a, q.fenceAddr, q.scratch[:8]); err != nil {
		return err
	}
	q.fenceValue = v
	q.fences.Add(1)
	q.traceFence(q.fenceAddr, true, true)
	return q.push(engine.IV{
		Client: abi.IH_CLIENT_GRBM_CP, Source: abi.IH_SRC_CP_EOP, RingID: q.ringID, VMID: uint8(q.vmid),
		Data: [4]uint32{q.fenceDoorbell},
	})
}

// fill writes n bytes of the little-endian pattern (repeated; a partial last dword gets its
// low bytes) at dst, a chunk at a time, starting at offset from (a multiple of 4); a dequeue
// reset stops it between chunks, and so does a preemption when dma (DMA_DATA, not a kernel:
// the bytes done are left in q.progress).
func (q *queue) fill(bypass bool, dst uint64, pattern uint32, n, from uint64, dma bool) error {
	b := q.chunkBuf()[:min(n, dmaChunkBytes)]
	var t [4]byte
	binary.LittleEndian.PutUint32(t[:], pattern)
	for i := copy(b, t[:]); i < len(b); i *= 2 {
		copy(b[i:], b[:i]) // doubling: i stays a multiple of 4, so the phase is kept
	}
	for off, units := from, 0; off < n; {
		if !q.between(dma, off, units) {
			return errStop
		}
		m := min(n-off, dmaChunkBytes)
		if err := q.write(bypass, dst+off, b[:m]); err != nil {
			return err
		}
		off, units = off+m, int(m>>12)
	}
	return nil
}

// between is the check between chunks of a long packet at byte off (units of work since the
// last one): a DMA_DATA records its progress and stops for a preemption too (it resumes
// there), a kernel only for a reset.
func (q *queue) between(dma bool, off uint64, units int) bool {
	if dma {
		q.progress = off
		return q.dmaChunkDone(units)
	}
	return q.chunkDone(units)
}

// copyMem copies n bytes from src to dst a chunk at a time (forward; overlapping ranges get
// chunk-wise results, as undefined on hardware), starting at offset from; dma as for fill.
func (q *queue) copyMem(srcBypass bool, src uint64, dstBypass bool, dst uint64, n, from uint64, dma bool) error {
	if c := q.c.copier; c != nil && srcBypass == dstBypass {
		for off, units := from, 0; off < n; {
			if !q.between(dma, off, units) {
				return errStop
			}
			m := min(n-off, copyChunkBytes)
			if err := q.copyVia(c, srcBypass, dst+off, src+off, m); err != nil {
				return err
			}
			off, units = off+m, int(m>>12)
		}
		return nil
	}
	b := q.chunkBuf()
	for off, units := from, 0; off < n; {
		if !q.between(dma, off, units) {
			return errStop
		}
		m := min(n-off, dmaChunkBytes)
		if err := q.read(srcBypass, src+off, b[:m]); err != nil {
			return err
		}
		if err := q.write(dstBypass, dst+off, b[:m]); err != nil {
			return err
		}
		off, units = off+m, int(m>>11) // read and write: 2 units per 4 KiB
	}
	return nil
}

// dispatchDirect is DISPATCH_DIRECT: DIM_X*DIM_Y*DIM_Z workgroups of the shader at
// COMPUTE_PGM (shader.go), or with COMPUTE_PGM 0 of the built-in kernel named by
// COMPUTE_USER_DATA_0.
func (q *queue) dispatchDirect(count uint32, p []byte) error {
	if err := wantCount(count, 3); err != nil {
		return err
	}
	return q.dispatch(dw(p, 1), dw(p, 2), dw(p, 3))
}

// kernel runs groups workgroups of the built-in kernel COMPUTE_USER_DATA_0 names, to
// completion. Kernels access memory through L2, as shaders do.
func (q *queue) kernel(groups uint64) error {
	ud := &q.userData
	kernel := ud[0]
	switch kernel {
	case abi.KERNEL_FILL, abi.KERNEL_COPY, abi.KERNEL_INCREMENT, abi.KERNEL_ENDLESS:
	default:
		return badPacket("DISPATCH_DIRECT: COMPUTE_USER_DATA_0 names no kernel")
	}
	if groups == 0 {
		return nil
	}
	dst, src := addr64(ud[1], ud[2]), addr64(ud[3], ud[4])
	n := groups * abi.KERNEL_GROUP_DWORDS * 4
	if kernel != abi.KERNEL_ENDLESS && dst%4 != 0 || kernel == abi.KERNEL_COPY && src%4 != 0 {
		return badPacket("DISPATCH_DIRECT: kernel address not dword aligned")
	}
	switch kernel {
	case abi.KERNEL_FILL:
		if overflows(dst, n) {
			return badPacket("DISPATCH_DIRECT: range wraps the address space")
		}
		return q.fill(false, dst, ud[5], n, 0, false)
	case abi.KERNEL_COPY:
		if overflows(dst, n) || overflows(src, n) {
			return badPacket("DISPATCH_DIRECT: range wraps the address space")
		}
		return q.copyMem(false, src, false, dst, n, 0, false)
	case abi.KERNEL_INCREMENT:
		if err := q.read(false, dst, q.scratch[:4]); err != nil {
			return err
		}
		binary.LittleEndian.PutUint32(q.scratch[:], le32(q.scratch[:])+uint32(groups))
		return q.write(false, dst, q.scratch[:4])
	}
	return q.endless()
}

// invalidateTLBs is INVALIDATE_TLBS: invalidate every process VMID whose PASID table entry
// holds DW1's PASID. It is privileged: refused in a process address space.
func (q *queue) invalidateTLBs(count uint32, p []byte) error {
	if err := wantCount(count, 0); err != nil {
		return err
	}
	if q.curVMID() != 0 {
		return badPacket("INVALIDATE_TLBS from a process address space (privileged)")
	}
	if !q.open() {
		return errRevoked
	}
	if q.c.tlb == nil {
		return badOpcode("INVALIDATE_TLBS without a GPUVM")
	}
	d1 := dw(p, 1)
	if d1&invalidateTLBsReserved != 0 {
		return reserved("INVALIDATE_TLBS DW1 [28:21]")
	}
	q.c.tlb.InvalidatePASID(uint16(field(d1, abi.PM4_INVALIDATE_TLBS_PASID_MASK, abi.PM4_INVALIDATE_TLBS_PASID__SHIFT)),
		d1&abi.PM4_INVALIDATE_TLBS_ALL_HUB_MASK != 0,
		uint8(field(d1, abi.PM4_INVALIDATE_TLBS_FLUSH_TYPE_MASK, abi.PM4_INVALIDATE_TLBS_FLUSH_TYPE__SHIFT)))
	return nil
}

const invalidateTLBsReserved = ^uint32(abi.PM4_INVALIDATE_TLBS_DST_SEL_MASK | abi.PM4_INVALIDATE_TLBS_ALL_HUB_MASK |
	abi.PM4_INVALIDATE_TLBS_PASID_MASK | abi.PM4_INVALIDATE_TLBS_FLUSH_TYPE_MASK)
