package mes

import (
	"encoding/binary"

	"vgpu/abi"
	"vgpu/cp"
)

// The HQD image of a v11 compute MQD: dwords hqdFirst..hqdLast, read on map and written back
// on unmap in one access each.
const (
	hqdFirst = abi.MES_MQD_DW_CP_MQD_BASE_ADDR_LO
	hqdLast  = abi.MES_MQD_DW_CP_HQD_PQ_WPTR_HI
	hqdBytes = (hqdLast - hqdFirst + 1) * 4
)

func hqdOff(dw uint64) int { return int(dw-hqdFirst) * 4 }

// mqdLayout is where the fields that differ between the compute and the graphics MQD are.
type mqdLayout struct {
	doorbell, control, wptrLo, wptrHi, fenceLo uint64
	ib, err                                    bool // CP_HQD_IB_* and CP_HQD_ERROR exist
}

var (
	computeLayout = mqdLayout{doorbell: abi.MES_MQD_DW_CP_HQD_PQ_DOORBELL_CONTROL, control: abi.MES_MQD_DW_CP_HQD_PQ_CONTROL,
		wptrLo: abi.MES_MQD_DW_CP_HQD_PQ_WPTR_LO, wptrHi: abi.MES_MQD_DW_CP_HQD_PQ_WPTR_HI,
		fenceLo: abi.MES_MQD_DW_FENCE_ADDRESS_LO, ib: true, err: true}
	gfxLayout = mqdLayout{doorbell: abi.MES_MQD_DW_CP_HQD_PQ_DOORBELL_CONTROL, control: abi.MES_GFX_MQD_DW_CP_GFX_HQD_CNTL,
		wptrLo: abi.MES_GFX_MQD_DW_CP_GFX_HQD_WPTR, wptrHi: abi.MES_GFX_MQD_DW_CP_GFX_HQD_WPTR_HI,
		fenceLo: abi.MES_GFX_MQD_DW_FENCE_ADDRESS_LO}
)

func (q *queue) layout() *mqdLayout {
	if q.qtype == abi.MES_QUEUE_TYPE_GFX {
		return &gfxLayout
	}
	return &computeLayout
}

// ringDwords is the queue's ring size (dwords).
func (q *queue) ringDwords() uint64 {
	qs := q.img.Control & abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE_MASK >> abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT
	return uint64(1) << (min(qs, abi.CP_QUEUE_SIZE_MAX) + 1)
}

// loadMQD reads the queue's MQD: its ring configuration into q.img and, for a queue being
// added, its start pointers. It validates what the CP would refuse, so a bad MQD fails its
// ADD_QUEUE (later maps that fail to load halt the queue).
func (a *activation) loadMQD(q *queue) *frameErr {
	lay := q.layout()
	b, hdr, fence, ferr := a.readMQD(q, lay)
	if ferr != nil {
		return ferr
	}
	if h := binary.LittleEndian.Uint32(hdr); h != abi.MES_MQD_HEADER {
		return fail(abi.MES_ERR_BAD_MQD, "MQD header %#08x (want %#08x)", h, abi.MES_MQD_HEADER)
	}
	if len(q.hqd) != hqdBytes {
		q.hqd = make([]byte, hqdBytes)
	}
	copy(q.hqd, b)
	d := func(dw uint64) uint32 { return binary.LittleEndian.Uint32(b[hqdOff(dw):]) }
	q.img.Base = (uint64(d(abi.MES_MQD_DW_CP_HQD_PQ_BASE_HI))<<32 | uint64(d(abi.MES_MQD_DW_CP_HQD_PQ_BASE_LO))) << 8
	q.img.Control = d(lay.control)
	if !lay.ib {
		q.img.Control &= abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE_MASK // CP_GFX_HQD_CNTL: only RB_BUFSZ means the same
	}
	q.img.ReportAddr = uint64(d(abi.MES_MQD_DW_CP_HQD_PQ_RPTR_REPORT_ADDR_HI))<<32 | uint64(d(abi.MES_MQD_DW_CP_HQD_PQ_RPTR_REPORT_ADDR_LO))
	q.img.FenceAddr = binary.LittleEndian.Uint64(fence)
	if lay.ib { // a compute MQD: the context save area of its shader dispatches
		q.img.CSABase = uint64(d(abi.MES_MQD_DW_CP_HQD_CTX_SAVE_BASE_ADDR_HI))<<32 | uint64(d(abi.MES_MQD_DW_CP_HQD_CTX_SAVE_BASE_ADDR_LO))
		q.img.CSASize = uint64(d(abi.MES_MQD_DW_CP_HQD_CTX_SAVE_SIZE))
	}
	q.img.DoorbellOffset = q.doorbell
	q.img.DoorbellControl = q.doorbell<<abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT&abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK |
		abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK
	qs := q.img.Control & abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE_MASK >> abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT
	switch {
	case qs < abi.CP_QUEUE_SIZE_MIN || qs > abi.CP_QUEUE_SIZE_MAX:
		return fail(abi.MES_ERR_BAD_MQD, "CP_HQD_PQ_CONTROL.QUEUE_SIZE %d", qs)
	case q.img.Base%256 != 0 || q.img.Base+q.ringDwords()*4 > 1<<abi.GPU_VA_BITS:
		return fail(abi.MES_ERR_BAD_MQD, "ring %#x beyond the 48-bit space", q.img.Base)
	case q.img.ReportAddr%4 != 0 || q.img.FenceAddr%8 != 0:
		return fail(abi.MES_ERR_BAD_MQD, "rptr report %#x / fence %#x misaligned", q.img.ReportAddr, q.img.FenceAddr)
	case q.img.CSABase%8 != 0 || q.img.CSABase+q.img.CSASize > 1<<abi.GPU_VA_BITS:
		return fail(abi.MES_ERR_BAD_MQD, "context save area %#x+%#x misaligned or beyond the 48-bit space", q.img.CSABase, q.img.CSASize)
	}
	if !q.loaded {
		// A new queue starts where its MQD says (amdgpu: 0 and 0).
		wptr := uint64(d(lay.wptrHi))<<32 | uint64(d(lay.wptrLo))
		rWrapped := uint64(d(abi.MES_MQD_DW_CP_HQD_PQ_RPTR)) & (q.ringDwords() - 1)
		q.wptr = wptr
		q.rptr = wptr - (wptr-rWrapped)&(q.ringDwords()-1)
		q.loaded = true
	}
	return nil
}

// readMQD reads the parts of q's MQD a load uses — the header, the HQD image, the protected
// fence address — in one access of the whole MQD (a map is one memory round trip, not three);
// if that fails (part of it unreadable), part by part, so the error names the part.
func (a *activation) readMQD(q *queue, lay *mqdLayout) (hqd, hdr, fence []byte, err *frameErr) {
	all := a.mqdAll[:]
	if a.read(q.mqd, all) == nil {
		return all[hqdFirst*4 : hqdFirst*4+hqdBytes], all[:4], all[lay.fenceLo*4 : lay.fenceLo*4+8], nil
	}
	hqd, hdr, fence = a.mqdBuf[:hqdBytes], a.io[:4], a.io[8:16]
	if err := a.read(q.mqd, hdr); err != nil {
		return nil, nil, nil, fail(abi.MES_ERR_BAD_ADDRESS, "mqd_addr %#x: %v", q.mqd, err)
	}
	if h := binary.LittleEndian.Uint32(hdr); h != abi.MES_MQD_HEADER {
		return nil, nil, nil, fail(abi.MES_ERR_BAD_MQD, "MQD header %#08x (want %#08x)", h, abi.MES_MQD_HEADER)
	}
	if err := a.read(q.mqd+hqdFirst*4, hqd); err != nil {
		return nil, nil, nil, fail(abi.MES_ERR_BAD_ADDRESS, "MQD %#x: %v", q.mqd, err)
	}
	if err := a.read(q.mqd+lay.fenceLo*4, fence); err != nil {
		return nil, nil, nil, fail(abi.MES_ERR_BAD_ADDRESS, "MQD %#x: %v", q.mqd, err)
	}
	return hqd, hdr, fence, nil
}

// saveQueue writes an unmapped queue's state back: the MQD's HQD image (pointers, IB1, error,
// ACTIVE 0), IS_QUEUE_UNMAP, the unmap flag, and the gang context (what the MQD has no field
// for, and the per-queue status). A write that fails is logged: the scheduler's own copy
// stays authoritative, so the queue still continues correctly.
func (a *activation) saveQueue(q *queue) {
	// The image as the last load read it (MES owns the MQD while the queue is added): the
	// driver's other fields are written back unchanged, without reading them again.
	b := a.mqdBuf[:hqdBytes]
	copy(b, q.hqd)
	put := func(dw uint64, v uint32) { binary.LittleEndian.PutUint32(b[hqdOff(dw):], v) }
	lay := q.layout()
	put(abi.MES_MQD_DW_CP_HQD_ACTIVE, 0)
	put(abi.MES_MQD_DW_CP_HQD_PQ_RPTR, uint32(q.rptr&(q.ringDwords()-1)))
	put(lay.wptrLo, uint32(q.wptr))
	put(lay.wptrHi, uint32(q.wptr>>32))
	if lay.ib {
		a.putIB(q, put)
	}
	if lay.err {
		put(abi.MES_MQD_DW_CP_HQD_ERROR, q.errCode)
	}
	if err := a.write(q.mqd+hqdFirst*4, b); err != nil {
		a.saveFailed(q, err)
		return
	}
	a.writeFlags(q, 1)
	a.writeContext(q)
}

// putIB fills a compute MQD's CP_HQD_IB_* with the IB1 in flight.
func (a *activation) putIB(q *queue, put func(dw uint64, v uint32)) {
	e := &q.img.Exec
	var ib cp.IBState
	if e.Level >= 1 {
		ib = e.IB[0]
	}
	put(abi.MES_MQD_DW_CP_HQD_IB_BASE_ADDR_LO, uint32(ib.Base))
	put(abi.MES_MQD_DW_CP_HQD_IB_BASE_ADDR_HI, uint32(ib.Base>>32))
	put(abi.MES_MQD_DW_CP_HQD_IB_RPTR, uint32(ib.Pos))
	ctl := uint32(ib.Size) & abi.MES_MQD_IB_CONTROL_IB_SIZE_MASK
	if e.Level >= 1 {
		ctl |= abi.MES_MQD_IB_CONTROL_PROCESSING_IB_MASK
	}
	put(abi.MES_MQD_DW_CP_HQD_IB_CONTROL, ctl)
}

// writeFlags writes IS_QUEUE_UNMAP (and the ADD_QUEUE unmap flag): 1 unmapped, 0 mapped.
func (a *activation) writeFlags(q *queue, unmapped uint32) {
	v := a.io[:4]
	binary.LittleEndian.PutUint32(v, unmapped)
	if err := a.write(q.mqd+abi.MES_MQD_DW_IS_QUEUE_UNMAP*4, v); err != nil {
		a.saveFailed(q, err)
	}
	if q.unmapFlag != 0 {
		if err := a.write(q.unmapFlag, v); err != nil {
			a.saveFailed(q, err)
		}
	}
}

// writeMapped records a map in the MQD: ACTIVE 1, the VMID MES gave, IS_QUEUE_UNMAP 0.
func (a *activation) writeMapped(q *queue) {
	v := a.io[:8]
	binary.LittleEndian.PutUint32(v, 1)
	binary.LittleEndian.PutUint32(v[4:], uint32(q.gang.proc.vmid))
	if err := a.write(q.mqd+abi.MES_MQD_DW_CP_HQD_ACTIVE*4, v); err != nil {
		a.saveFailed(q, err)
	}
	a.writeFlags(q, 0)
	a.writeStatus(q)
}

// writeContext writes the gang context (MES_CTX_*): the execution state beyond the MQD's.
func (a *activation) writeContext(q *queue) {
	b := a.io[:abi.MES_CTX_BYTES]
	clear(b)
	put := func(dw uint64, v uint32) { binary.LittleEndian.PutUint32(b[dw*4:], v) }
	e := &q.img.Exec
	put(abi.MES_CTX_DW_MAGIC, abi.MES_CTX_MAGIC)
	put(abi.MES_CTX_DW_LEVEL, uint32(e.Level))
	put(abi.MES_CTX_DW_IB_COUNT, uint32(e.IBCount))
	put(abi.MES_CTX_DW_IB1_BASE_LO, uint32(e.IB[0].Base))
	put(abi.MES_CTX_DW_IB1_BASE_HI, uint32(e.IB[0].Base>>32))
	put(abi.MES_CTX_DW_IB1_SIZE, uint32(e.IB[0].Size))
	put(abi.MES_CTX_DW_IB1_RPTR, uint32(e.IB[0].Pos))
	put(abi.MES_CTX_DW_IB2_BASE_LO, uint32(e.IB[1].Base))
	put(abi.MES_CTX_DW_IB2_BASE_HI, uint32(e.IB[1].Base>>32))
	put(abi.MES_CTX_DW_IB2_SIZE, uint32(e.IB[1].Size))
	put(abi.MES_CTX_DW_IB2_RPTR, uint32(e.IB[1].Pos))
	put(abi.MES_CTX_DW_IB1_VMID, uint32(e.IB[0].VMID)&0xF|uint32(e.IB[1].VMID)&0xF<<4)
	put(abi.MES_CTX_DW_PROGRESS_LO, uint32(e.Progress))
	put(abi.MES_CTX_DW_PROGRESS_HI, uint32(e.Progress>>32))
	if e.WaitWritten {
		put(abi.MES_CTX_DW_FLAGS, 1)
	}
	for i, u := range e.UserData {
		put(abi.MES_CTX_DW_USER_DATA+uint64(i), u)
	}
	put(abi.MES_CTX_DW_PROTECTED_FENCE_LO, uint32(e.Fence))
	put(abi.MES_CTX_DW_PROTECTED_FENCE_HI, uint32(e.Fence>>32))
	putDispatches(e, put)
	q.publish()
	a.putStatus(q, b[abi.MES_CTX_DW_STATUS*4:])
	if err := a.write(q.ctx, b); err != nil {
		a.saveFailed(q, err)
	}
}

// writeStatus writes only the per-queue status part of the gang context.
func (a *activation) writeStatus(q *queue) {
	q.publish()
	b := a.io[:20]
	a.putStatus(q, b)
	if err := a.write(q.ctx+abi.MES_CTX_DW_STATUS*4, b); err != nil {
		a.saveFailed(q, err)
	}
}

func (a *activation) putStatus(q *queue, b []byte) {
	binary.LittleEndian.PutUint32(b[0:], q.status.Load())
	binary.LittleEndian.PutUint32(b[4:], q.maps.Load())
	binary.LittleEndian.PutUint32(b[8:], q.preempts.Load())
	binary.LittleEndian.PutUint64(b[12:], q.rptr)
}

func (a *activation) saveFailed(q *queue, err error) {
	if err == errRevoked {
		return
	}
	a.m.limiter.Warn(logKeySave, "mes: could not write a queue's MQD or context", "doorbell", q.doorbell,
		"mqd", q.mqd, "err", err)
}

// putDispatches writes the saved shader dispatches' count and the oldest one's description
// (MES_CTX_DW_DISPATCH*): the driver's view. What a map restores is MES's own copy (q.img).
func putDispatches(e *cp.ExecState, put func(dw uint64, v uint32)) {
	put(abi.MES_CTX_DW_DISPATCHES, uint32(len(e.Dispatches)))
	if len(e.Dispatches) == 0 {
		return
	}
	d := &e.Dispatches[0]
	put(abi.MES_CTX_DW_DISPATCH_PGM_LO, uint32(d.Program))
	put(abi.MES_CTX_DW_DISPATCH_PGM_HI, uint32(d.Program>>32))
	put(abi.MES_CTX_DW_DISPATCH_SLOTS, d.Slots)
	for k := range uint64(3) {
		put(abi.MES_CTX_DW_DISPATCH_GROUPS+k, d.Groups[k])
		put(abi.MES_CTX_DW_DISPATCH_GROUP_SIZE+k, d.GroupSize[k])
		put(abi.MES_CTX_DW_DISPATCH_START+k, d.Start[k])
	}
	put(abi.MES_CTX_DW_DISPATCH_STACK, d.Stack)
	put(abi.MES_CTX_DW_DISPATCH_ARGS_LO, uint32(d.Args))
	put(abi.MES_CTX_DW_DISPATCH_ARGS_HI, uint32(d.Args>>32))
	put(abi.MES_CTX_DW_DISPATCH_VMID, uint32(d.VMID))
	put(abi.MES_CTX_DW_DISPATCH_CSA_OFFSET, uint32(d.CSAOffset))
	put(abi.MES_CTX_DW_DISPATCH_CSA_BYTES, uint32(d.CSABytes))
}
