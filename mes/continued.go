package mes

import (
	"encoding/binary"

	"vgpu/abi"
	"vgpu/cp"
)

// A queue removed with work in flight — inside an IB, a DMA_DATA, a WAIT_REG_MEM, or with
// shader dispatches saved to its context save area — keeps that state in its gang-context
// record, marked MES_CTX_REMOVED with its MQD's address. amdgpu's eviction REMOVEs every queue
// of a process and ADDs them again once memory is back; an ADD_QUEUE of the same MQD into the
// same gang continues the queue where it stopped, as the hardware resumes from its MQD. The
// record is guest memory: what it says is checked as any image is (cp.Map checks the
// execution state, and a saved dispatch's program and save area are fetched and checked again
// at the map). A removed queue keeps at most one saved dispatch (the record describes one):
// REMOVE_QUEUE refuses more with MES_ERR_BUSY. A dispatch continued this way has no program
// hash: a program rewritten while its queue was removed is not detected.

// inFlight reports whether an unmapped queue's execution state is more than its pointers.
func inFlight(e *cp.ExecState) bool {
	return e.Level > 0 || e.Progress != 0 || e.WaitWritten || len(e.Dispatches) > 0
}

// markRemoved marks q's record (written at its unmap) as a removed queue's state.
func (a *activation) markRemoved(q *queue) {
	var b [12]byte
	binary.LittleEndian.PutUint32(b[0:], uint32(q.mqd))
	binary.LittleEndian.PutUint32(b[4:], uint32(q.mqd>>32))
	binary.LittleEndian.PutUint32(b[8:], abi.MES_CTX_REMOVED)
	if err := a.write(q.ctx+abi.MES_CTX_DW_MQD_LO*4, b[:]); err != nil {
		a.saveFailed(q, err)
	}
}

// continueRemoved looks in the gang's context page for a removed queue's record of q's MQD
// and, if there is one, takes its execution state for q and clears it.
func (a *activation) continueRemoved(q *queue, gangCtx uint64, g *gang) *frameErr {
	var page [8 * abi.MES_CTX_BYTES]byte
	if err := a.read(gangCtx, page[:]); err != nil {
		return fail(abi.MES_ERR_BAD_ADDRESS, "gang_context_addr %#x: %v", gangCtx, err)
	}
	for i := range 8 {
		r := page[i*abi.MES_CTX_BYTES : (i+1)*abi.MES_CTX_BYTES]
		d := func(dw uint64) uint32 { return binary.LittleEndian.Uint32(r[dw*4:]) }
		mqd := uint64(d(abi.MES_CTX_DW_MQD_HI))<<32 | uint64(d(abi.MES_CTX_DW_MQD_LO))
		if d(abi.MES_CTX_DW_MAGIC) != abi.MES_CTX_MAGIC || d(abi.MES_CTX_DW_REMOVED) != abi.MES_CTX_REMOVED || mqd != q.mqd {
			continue
		}
		if g != nil && recordInUse(g, gangCtx+uint64(i)*abi.MES_CTX_BYTES) {
			continue // an added queue's own record (a driver reusing an MQD address): not ours
		}
		q.img.Exec = decodeExec(d)
		q.loaded = true // the pointers come from the MQD, as loadMQD read them
		if err := a.write(gangCtx+uint64(i)*abi.MES_CTX_BYTES, make([]byte, 4)); err != nil {
			return fail(abi.MES_ERR_BAD_ADDRESS, "gang_context_addr %#x: %v", gangCtx, err)
		}
		return nil
	}
	return nil
}

func recordInUse(g *gang, rec uint64) bool {
	for _, q := range g.queues {
		if q.ctx == rec {
			return true
		}
	}
	return false
}

// decodeExec reads an execution state from a record (writeContext's layout).
func decodeExec(d func(dw uint64) uint32) cp.ExecState {
	var e cp.ExecState
	e.Level, e.IBCount = int(d(abi.MES_CTX_DW_LEVEL)), int(d(abi.MES_CTX_DW_IB_COUNT))
	vm := d(abi.MES_CTX_DW_IB1_VMID)
	e.IB[0] = cp.IBState{Base: uint64(d(abi.MES_CTX_DW_IB1_BASE_HI))<<32 | uint64(d(abi.MES_CTX_DW_IB1_BASE_LO)),
		Size: uint64(d(abi.MES_CTX_DW_IB1_SIZE)), Pos: uint64(d(abi.MES_CTX_DW_IB1_RPTR)), VMID: int(vm & 0xF)}
	e.IB[1] = cp.IBState{Base: uint64(d(abi.MES_CTX_DW_IB2_BASE_HI))<<32 | uint64(d(abi.MES_CTX_DW_IB2_BASE_LO)),
		Size: uint64(d(abi.MES_CTX_DW_IB2_SIZE)), Pos: uint64(d(abi.MES_CTX_DW_IB2_RPTR)), VMID: int(vm >> 4 & 0xF)}
	e.Progress = uint64(d(abi.MES_CTX_DW_PROGRESS_HI))<<32 | uint64(d(abi.MES_CTX_DW_PROGRESS_LO))
	e.WaitWritten = d(abi.MES_CTX_DW_FLAGS)&1 != 0
	for i := range e.UserData {
		e.UserData[i] = d(abi.MES_CTX_DW_USER_DATA + uint64(i))
	}
	e.Fence = uint64(d(abi.MES_CTX_DW_PROTECTED_FENCE_HI))<<32 | uint64(d(abi.MES_CTX_DW_PROTECTED_FENCE_LO))
	if d(abi.MES_CTX_DW_DISPATCHES) >= 1 {
		sd := cp.SavedDispatch{
			Program: uint64(d(abi.MES_CTX_DW_DISPATCH_PGM_HI))<<32 | uint64(d(abi.MES_CTX_DW_DISPATCH_PGM_LO)),
			Slots:   d(abi.MES_CTX_DW_DISPATCH_SLOTS), Stack: d(abi.MES_CTX_DW_DISPATCH_STACK),
			Args:      uint64(d(abi.MES_CTX_DW_DISPATCH_ARGS_HI))<<32 | uint64(d(abi.MES_CTX_DW_DISPATCH_ARGS_LO)),
			VMID:      int(d(abi.MES_CTX_DW_DISPATCH_VMID) & 0xF),
			CSAOffset: uint64(d(abi.MES_CTX_DW_DISPATCH_CSA_OFFSET)), CSABytes: uint64(d(abi.MES_CTX_DW_DISPATCH_CSA_BYTES)),
			NoHash: true,
		}
		for k := range uint64(3) {
			sd.Groups[k] = d(abi.MES_CTX_DW_DISPATCH_GROUPS + k)
			sd.GroupSize[k] = d(abi.MES_CTX_DW_DISPATCH_GROUP_SIZE + k)
			sd.Start[k] = d(abi.MES_CTX_DW_DISPATCH_START + k)
		}
		e.Dispatches = []cp.SavedDispatch{sd}
	}
	return e
}
