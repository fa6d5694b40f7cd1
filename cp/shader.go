package cp

import (
	"errors"
	"time"

	"vgpu/abi"
	"vgpu/compute"
	"vgpu/engine"
	"vgpu/shader"
)

// Shader dispatches (docs/shader.md): with COMPUTE_PGM set, DISPATCH_DIRECT and
// DISPATCH_INDIRECT start the program on the compute units (Config.Compute) and the queue goes
// on with its next packets at once. What must follow the dispatches waits for them: a
// RELEASE_MEM (an end-of-pipe event), EVENT_WRITE CS_PARTIAL_FLUSH, the end of the submitted
// work (a queue is not idle while its dispatches run), and a drain of a register queue (a
// dispatch finishes first). A MES preemption of a mapped queue stops its dispatches between
// instructions and saves them to the queue's context save area (shader_save.go); a Map
// restores them. A reset kills them. A shader error halts the queue with CP_ERROR_SHADER
// once the queue sees it.

// shRegs are the SH registers of a shader dispatch, per queue (SET_SH_REG).
type shRegs struct {
	pgm          uint64 // program GPU address (0: DISPATCH runs a built-in kernel)
	pgmLo, pgmHi uint32
	pgmSlots     uint32
	threads      [3]uint32
	start        [3]uint32
	stack        uint32
	indirectBase uint64 // SET_BASE 1
}

// setSh records one SH register a shader dispatch uses (others are accepted and ignored).
func (q *queue) setSh(off, v uint32) {
	s := &q.sh
	switch off {
	case abi.SH_COMPUTE_PGM_LO:
		s.pgmLo = v
	case abi.SH_COMPUTE_PGM_HI:
		s.pgmHi = v & 0xFF
	case abi.SH_COMPUTE_PGM_RSRC1:
		s.pgmSlots = v & 0x1FFFF
	case abi.SH_COMPUTE_NUM_THREAD_X, abi.SH_COMPUTE_NUM_THREAD_Y, abi.SH_COMPUTE_NUM_THREAD_Z:
		s.threads[off-abi.SH_COMPUTE_NUM_THREAD_X] = v & 0xFFFF
	case abi.SH_COMPUTE_START_X, abi.SH_COMPUTE_START_Y, abi.SH_COMPUTE_START_Z:
		s.start[off-abi.SH_COMPUTE_START_X] = v
	case abi.SH_COMPUTE_TMPRING_SIZE:
		s.stack = v & 0x1FFFF
	default:
		return
	}
	s.pgm = (uint64(s.pgmHi)<<32 | uint64(s.pgmLo)) << 8
}

// inflight is a dispatch of the queue still running (or ended, not yet looked at).
type inflight struct {
	run *compute.Run
	pgm uint64 // its program's address (ERROR_ADDR of a shader error)
	// desc is the dispatch as a preemption saves it (all but the CSA placement).
	desc SavedDispatch
}

// setBase is SET_BASE: only BASE_INDEX 1, DISPATCH_INDIRECT's base.
func (q *queue) setBase(count uint32, p []byte) error {
	if err := wantCount(count, 2); err != nil {
		return err
	}
	if dw(p, 1) != abi.PM4_SET_BASE_INDEX_DISPATCH_INDIRECT {
		return badPacket("SET_BASE: only BASE_INDEX 1 (DISPATCH_INDIRECT) is supported")
	}
	a := addr64(dw(p, 2), dw(p, 3))
	if a%8 != 0 {
		return badPacket("SET_BASE: address not 8-byte aligned")
	}
	q.sh.indirectBase = a
	return nil
}

// dispatchIndirect is DISPATCH_INDIRECT: the dimensions are three dwords at the SET_BASE
// address plus DW1.
func (q *queue) dispatchIndirect(count uint32, p []byte) error {
	if err := wantCount(count, 1); err != nil {
		return err
	}
	off := dw(p, 1)
	if off%4 != 0 {
		return badPacket("DISPATCH_INDIRECT: offset not dword aligned")
	}
	a := q.sh.indirectBase + uint64(off)
	if q.sh.indirectBase == 0 || overflows(a, 12) {
		return badPacket("DISPATCH_INDIRECT without a SET_BASE, or past the address space")
	}
	var b [12]byte
	if err := q.read(false, a, b[:]); err != nil {
		return err
	}
	return q.dispatch(le32(b[0:]), le32(b[4:]), le32(b[8:]))
}

// dispatch starts x*y*z workgroups: the shader if COMPUTE_PGM is set, else a built-in kernel.
func (q *queue) dispatch(x, y, z uint32) error {
	if uint64(x) > MaxDispatchGroups || uint64(y) > MaxDispatchGroups || uint64(z) > MaxDispatchGroups ||
		uint64(x)*uint64(y)*uint64(z) > MaxDispatchGroups {
		return badPacket("DISPATCH: more than MaxDispatchGroups workgroups")
	}
	if q.sh.pgm == 0 {
		return q.kernel(uint64(x) * uint64(y) * uint64(z))
	}
	return q.dispatchShader(x, y, z)
}

func (q *queue) dispatchShader(x, y, z uint32) error {
	pool := q.c.compute
	if pool == nil {
		return badPacket("DISPATCH: a shader (COMPUTE_PGM) on a device without compute units")
	}
	if len(q.runs) >= MaxSavedDispatches {
		// A queue has at most this many dispatches in flight (what a preemption can save):
		// the next one waits for the oldest, as a full dispatch queue holds the CP back.
		if err := q.waitShadersTo(MaxSavedDispatches-1, false); err != nil {
			return err
		}
	}
	s := &q.sh
	items := uint64(s.threads[0]) * uint64(s.threads[1]) * uint64(s.threads[2])
	switch {
	case items == 0 || items > compute.MaxGroupItems:
		return badPacket("DISPATCH: COMPUTE_NUM_THREAD_X*Y*Z not in 1..1024")
	case s.stack%8 != 0 || s.stack > abi.SHADER_STACK_MAX:
		return badPacket("DISPATCH: COMPUTE_TMPRING_SIZE stack not a multiple of 8 up to SHADER_STACK_MAX")
	}
	if x == 0 || y == 0 || z == 0 {
		return nil // no workgroups
	}
	prog, err := q.loadProgram()
	if err != nil {
		return err
	}
	desc := SavedDispatch{Program: s.pgm, Slots: s.pgmSlots, CodeHash: q.lastProg.hash, Groups: [3]uint32{x, y, z},
		GroupSize: s.threads, Start: s.start, Stack: s.stack, Args: addr64(q.userData[0], q.userData[1]), VMID: q.curVMID()}
	run, err := q.startShader(prog, &desc, nil, q.streams[q.level].addr(q.streams[q.level].pos))
	if err != nil {
		return badPacket("DISPATCH: " + err.Error())
	}
	q.runs = append(q.runs, inflight{run: run, pgm: s.pgm, desc: desc})
	q.c.shaderDispatches.Add(1)
	return nil
}

// startShader starts d's dispatch on the compute units (resumed from saved if not nil).
func (q *queue) startShader(prog *shader.Program, d *SavedDispatch, saved *compute.Saved, packet uint64) (*compute.Run, error) {
	cd := compute.Dispatch{
		Program: prog, Groups: d.Groups, GroupSize: d.GroupSize, Start: d.Start, Args: d.Args, Stack: int(d.Stack),
		VMID: d.VMID, Slot: q.slot, RingID: q.ringID, Resume: saved, OnEnd: q.signal,
	}
	if saved == nil {
		// The sanitizer (hazard.go) checks a new dispatch against the queue's others; a
		// resumed one is not checked (its writes before the save were not recorded).
		cd.Packet, cd.After = packet, q.hazardPeers()
	}
	return q.c.compute.Start(cd)
}

// shaderFault is a shader error the CP found itself (a program that does not load or fetch):
// it raises IH_SRC_SHADER_ERROR as the compute units do for theirs, and halts the queue.
func (q *queue) shaderFault(se *shader.Error, pgm uint64) error {
	_ = q.push(engine.IV{Client: abi.IH_CLIENT_GRBM_CP, Source: abi.IH_SRC_SHADER_ERROR, RingID: q.ringID,
		VMID: uint8(q.curVMID()), Data: [4]uint32{se.Reason, uint32(se.PC), uint32(se.Addr), uint32(se.Addr >> 32)}})
	return shaderHalt(se, pgm)
}

// shaderHalt is the queue's halt for a shader error: CP_ERROR_SHADER, ERROR_ADDR the failing
// instruction's address, ERROR_INFO the reason (its IV is already out).
func shaderHalt(se *shader.Error, pgm uint64) error {
	return &fault{code: abi.CP_ERROR_SHADER, addr: pgm + uint64(se.PC)*abi.SHADER_INSN_BYTES, hasAddr: true,
		info: se.Reason, hasInfo: true, why: se.Error()}
}

// reapShaders looks at the queue's dispatches that have ended, oldest first: a completed one
// is forgotten, a failed one halts the queue. It never waits.
func (q *queue) reapShaders() error {
	n := 0
	for _, f := range q.runs {
		select {
		case <-f.run.Done():
			if err := q.shaderResult(f); err != nil {
				q.runs = q.runs[:copy(q.runs, q.runs[n:])]
				return err
			}
			continue
		default:
		}
		q.runs[n] = f
		n++
	}
	clear(q.runs[n:])
	q.runs = q.runs[:n]
	return nil
}

func (q *queue) shaderResult(f inflight) error {
	err, _ := f.run.Result()
	var se *shader.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return shaderHalt(se, f.pgm)
	}
	return errStop // killed (a reset)
}

// waitShaders waits until every dispatch of the queue has ended (or, with orWork, until new
// work arrives), without a turn; a reset kills them. It returns a failed dispatch's halt,
// errStop on a reset.
func (q *queue) waitShaders(orWork bool) error { return q.waitShadersTo(0, orWork) }

// waitShadersTo waits, as waitShaders does, until at most keep of the queue's dispatches are
// still running.
func (q *queue) waitShadersTo(keep int, orWork bool) error {
	if err := q.reapShaders(); err != nil || len(q.runs) <= keep {
		return err
	}
	if !q.endBatch() {
		return errHalted
	}
	w := q.wptr.Load()
	// A register queue's dispatches must finish before a drain does: BUSY_KERNEL. A mapped
	// queue's can be preempted (MES's hang detection is for the endless built-in kernel
	// only): WAITING, as for any wait its preemption interrupts.
	busy := uint32(abi.HQD_STATE_BUSY_KERNEL)
	if q.mapped {
		busy = abi.HQD_STATE_WAITING
	}
	q.notePacket()
	q.state.Store(busy)
	defer q.state.CompareAndSwap(busy, abi.HQD_STATE_RUNNING)
	q.endTurn()
	q.notify() // the scheduler looks at a mapped queue that now waits (its quantum runs), as for a parked one
	for len(q.runs) > keep {
		if q.mapped && q.stopReq.Load() == stopPreempt {
			return errStop // endShaders saves them; the packet waiting runs again after the map
		}
		select {
		case <-q.runs[0].run.Done():
		case <-q.wake:
			if q.stopReq.Load() == abi.HQD_DEQUEUE_RESET {
				q.killShaders()
				return errStop
			}
		}
		if err := q.reapShaders(); err != nil {
			return err
		}
		if orWork && q.wptr.Load() != w {
			break
		}
	}
	if !q.takeTurn(stopOnRevoke) {
		return errStop
	}
	return nil
}

// killShaders kills the queue's dispatches and waits (bounded) until no CU runs them: after a
// reset nothing the queue started touches memory.
func (q *queue) killShaders() {
	for _, f := range q.runs {
		f.run.Kill()
	}
	t := time.NewTimer(shaderKillWait)
	defer t.Stop()
wait:
	for _, f := range q.runs {
		select {
		case <-f.run.Done():
		case <-t.C:
			q.c.limiter.Warn(logKeyHalt, "cp: a killed shader dispatch is still inside a compute unit", "slot", q.slot)
			break wait
		}
	}
	clear(q.runs)
	q.runs = q.runs[:0]
}

// shaderKillWait bounds how long a reset waits for its dispatches' CUs (a CU sees a kill at
// its next memory access or instruction budget).
const shaderKillWait = 100 * time.Millisecond

// endShaders is the last thing an activation does with its dispatches: a preemption of a
// mapped queue saves them to the context save area (shader_save.go), a drain of a register
// queue lets them finish (a dispatch finishes first), anything else (reset, halt,
// revocation, a failed save) kills them.
func (q *queue) endShaders() {
	if len(q.runs) == 0 {
		return
	}
	req := q.stopReq.Load()
	if q.mapped && req == stopPreempt && q.state.Load() != abi.HQD_STATE_HALTED && q.current() {
		if err := q.saveShaders(); err != nil {
			q.halt(err, 0, 0)
		}
		if len(q.runs) == 0 {
			return
		}
	} else if (req == abi.HQD_DEQUEUE_DRAIN || req == stopPreempt) && q.state.Load() != abi.HQD_STATE_HALTED && q.current() {
		if err := q.waitShaders(false); err == nil {
			q.endTurn()
			return
		} else if err != errStop {
			q.halt(err, 0, 0)
		}
	}
	q.killShaders()
}
