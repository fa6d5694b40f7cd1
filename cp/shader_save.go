package cp

import (
	"crypto/sha256"
	"errors"
	"time"

	"vgpu/abi"
	"vgpu/compute"
	"vgpu/engine"
	"vgpu/shader"
)

// Instruction-level preemption of a mapped queue's shader dispatches (docs/shader.md,
// "Preemption"). A MES preemption (stopPreempt) of a queue with dispatches in flight asks each
// to stop between instructions (compute.Run.Preempt), waits for the compute units to leave
// them (bounded: shaderPreemptWait), and writes each one's compute.Saved, oldest first, one
// after the other from the start of the queue's context save area (Image.CSABase, CSASize:
// the MQD's CP_HQD_CTX_SAVE_*). Each Saved carries its own header (abi.SHADER_CSA_*); what
// the CSA cannot be trusted with — the program's address and hash, the grid, the arguments,
// where in the CSA it is — stays in the image (ExecState.Dispatches), which the scheduler
// keeps. A dispatch that completed meanwhile is not saved; one that failed halts the queue
// as it would have. A later Map restores them before its first packet (restoreShaders): it
// fetches each program again (a changed one is refused), reads and checks its Saved (guest
// memory: compute.UnmarshalSaved, then Start's fit check) and resumes it, so the results are
// those of an uninterrupted run. Every failure is CP_ERROR_CONTEXT_SAVE with a
// SHADER_CSA_ERR_* reason in ERROR_INFO.

// MaxSavedDispatches bounds the dispatches one preemption saves (more in flight:
// SHADER_CSA_ERR_TOO_MANY).
const MaxSavedDispatches = 64

// shaderPreemptWait bounds how long a preemption waits for the compute units to stop a
// dispatch (a CU looks between budgets of instructions and wakes from every wait).
const shaderPreemptWait = time.Second

// maxCSABytes bounds one saved dispatch (a corrupt image is refused, never allocated).
const maxCSABytes = 1 << 30

// shaderCSA is a mapped queue's context save area and the dispatches it holds.
type shaderCSA struct {
	csaBase, csaSize uint64
	savedRuns        []SavedDispatch // saved by this activation's preemption (Saved's image)
	restore          []SavedDispatch // to restore before the first packet (from Map's image)
}

func csaError(reason uint32, addr uint64, why string) error {
	return &fault{code: abi.CP_ERROR_CONTEXT_SAVE, addr: addr, hasAddr: true, info: reason, hasInfo: true, why: "context save: " + why}
}

// saveShaders preempts the queue's dispatches and writes them to the context save area. On
// success q.runs is empty and q.savedRuns holds what a Map restores; on an error the
// dispatches still in q.runs are killed by the caller.
func (q *queue) saveShaders() error {
	for _, f := range q.runs {
		f.run.Preempt()
	}
	t := time.NewTimer(shaderPreemptWait)
	defer t.Stop()
	for _, f := range q.runs {
		select {
		case <-f.run.Done():
		case <-t.C:
			return csaError(abi.SHADER_CSA_ERR_TIMEOUT, q.csaBase, "a dispatch did not stop in time")
		}
	}
	if !q.takeTurn(stopOnReset) {
		return errStop
	}
	defer q.endTurn()
	var saved []SavedDispatch
	off := uint64(0)
	for len(q.runs) > 0 {
		f := q.runs[0]
		err, st := f.run.Result()
		var se *shader.Error
		switch {
		case err == nil: // completed before it saw the stop
		case errors.As(err, &se):
			return shaderHalt(se, f.pgm)
		case err == compute.ErrPreempted:
			if len(saved) == MaxSavedDispatches {
				return csaError(abi.SHADER_CSA_ERR_TOO_MANY, q.csaBase, "too many dispatches in flight")
			}
			b := st.Marshal()
			n := uint64(len(b))
			if n > q.csaSize || off > q.csaSize-n {
				return csaError(abi.SHADER_CSA_ERR_TOO_SMALL, q.csaBase, "the context save area is too small")
			}
			if !q.open() {
				return errRevoked
			}
			if err := q.mem.Write(q.csaAccess(), q.csaBase+off, b); err != nil {
				return csaError(abi.SHADER_CSA_ERR_FAULT, q.csaBase+off, "write: "+err.Error())
			}
			d := f.desc
			d.CSAOffset, d.CSABytes = off, n
			saved = append(saved, d)
			off += n
		default: // killed (a reset)
			return errStop
		}
		q.runs = q.runs[1:]
	}
	q.runs = nil
	q.savedRuns = saved
	q.c.shaderPreempts.Add(uint64(len(saved)))
	return nil
}

// csaAccess is the CP's access to the context save area: the queue's address space,
// bypassing L2 (as the command fetch and the rptr report do).
func (q *queue) csaAccess() engine.Access {
	return engine.Access{VMID: q.vmid, Slot: q.slot, Bypass: true, Client: abi.VM_CID_CPC}
}

// restoreShaders restarts the dispatches Map's image saved, oldest first, before the
// queue's first packet (inside a turn).
func (q *queue) restoreShaders() error {
	pool := q.c.compute
	if pool != nil {
		// A workgroup may continue on another CU: none may read what its L0 held of the
		// memory the workgroup wrote elsewhere meanwhile.
		pool.InvalidateL0()
	}
	for len(q.restore) > 0 {
		d := q.restore[0]
		if pool == nil {
			return csaError(abi.SHADER_CSA_ERR_CORRUPT, q.csaBase+d.CSAOffset, "a saved dispatch on a device without compute units")
		}
		code, err := q.fetchCode(d.Program, int(d.Slots)*abi.SHADER_INSN_BYTES, d.VMID)
		if err != nil {
			return err
		}
		if !d.NoHash && sha256.Sum256(code) != d.CodeHash {
			return csaError(abi.SHADER_CSA_ERR_PROGRAM_CHANGED, d.Program, "the program changed while the queue was unmapped")
		}
		prog, err := q.decodeProgram(d.Program, d.VMID, code)
		if err != nil {
			return err
		}
		b := make([]byte, d.CSABytes)
		a := q.csaBase + d.CSAOffset
		if !q.open() {
			return errRevoked
		}
		if err := q.mem.Read(q.csaAccess(), a, b); err != nil {
			return csaError(abi.SHADER_CSA_ERR_FAULT, a, "read: "+err.Error())
		}
		st, err := compute.UnmarshalSaved(b)
		if err != nil {
			return csaError(abi.SHADER_CSA_ERR_CORRUPT, a, err.Error())
		}
		run, err := q.startShader(prog, &d, st, 0)
		if err != nil {
			return csaError(abi.SHADER_CSA_ERR_CORRUPT, a, err.Error())
		}
		d.CSAOffset, d.CSABytes = 0, 0
		q.runs = append(q.runs, inflight{run: run, pgm: d.Program, desc: d})
		q.restore = q.restore[1:]
		q.c.shaderResumes.Add(1)
	}
	q.restore = nil
	return nil
}

// checkSavedDispatches bounds an image's saved dispatches (Map): each in its CSA, with a
// shape a dispatch could have had.
func checkSavedDispatches(img *Image) error {
	e := &img.Exec
	if len(e.Dispatches) == 0 {
		return nil
	}
	if len(e.Dispatches) > MaxSavedDispatches {
		return badImage("%d saved dispatches (at most %d)", len(e.Dispatches), MaxSavedDispatches)
	}
	if overflows(img.CSABase, img.CSASize) {
		return badImage("context save area %#x+%#x wraps the address space", img.CSABase, img.CSASize)
	}
	for i := range e.Dispatches {
		d := &e.Dispatches[i]
		items := uint64(d.GroupSize[0]) * uint64(d.GroupSize[1]) * uint64(d.GroupSize[2])
		groups := uint64(d.Groups[0]) * uint64(d.Groups[1]) * uint64(d.Groups[2])
		switch {
		case d.Slots == 0 || d.Slots > abi.SHADER_MAX_INSNS || overflows(d.Program, uint64(d.Slots)*abi.SHADER_INSN_BYTES):
			return badImage("saved dispatch %d: program %#x of %d slots", i, d.Program, d.Slots)
		case items == 0 || items > compute.MaxGroupItems || groups == 0 || groups > MaxDispatchGroups:
			return badImage("saved dispatch %d: %d workgroups of %d items", i, groups, items)
		case d.Stack%8 != 0 || d.Stack > abi.SHADER_STACK_MAX:
			return badImage("saved dispatch %d: stack %d", i, d.Stack)
		case d.VMID < 0 || d.VMID > maxVMID:
			return badImage("saved dispatch %d: VMID %d", i, d.VMID)
		case d.CSABytes < abi.SHADER_CSA_HEADER_BYTES || d.CSABytes > maxCSABytes ||
			d.CSABytes > img.CSASize || d.CSAOffset > img.CSASize-d.CSABytes:
			return badImage("saved dispatch %d: %d bytes at %d of a %d-byte context save area", i, d.CSABytes, d.CSAOffset, img.CSASize)
		}
	}
	return nil
}
