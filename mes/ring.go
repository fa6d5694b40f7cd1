package mes

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"vgpu/abi"
	"vgpu/engine"
)

// maxFramesPerPass bounds the frames one pass of the loop executes before it schedules again,
// so a long ring of cheap frames cannot starve the queues' placement.
const maxFramesPerPass = 64

// frameErr is a frame's failure: a MES_ERR_* reason and what, for the log line.
type frameErr struct {
	reason uint32
	why    string
}

func (e *frameErr) Error() string { return abi.NameOf("MES_ERR_", uint64(e.reason)) + ": " + e.why }

func fail(reason uint32, format string, args ...any) *frameErr {
	return &frameErr{reason: reason, why: fmt.Sprintf(format, args...)}
}

// pending is a frame that cannot complete at once (it waits for queues to leave their slots,
// or for a register): the ring stalls behind it, the scheduler keeps running.
type pending struct {
	f        frame
	pos      uint64 // ring position of the frame
	deadline time.Time
	// check reports whether the frame is done (nil: success), still waiting (errWaiting), or
	// failed. It runs on every pass of the loop.
	check func(now time.Time) *frameErr
	// recheck is how soon check wants to run again without an event (0: only on events).
	recheck time.Duration
}

var errWaiting = &frameErr{}

// frames runs the API ring: the pending frame first, then new ones, in order. It returns
// false when the ring halted (the goroutine ends).
func (a *activation) frames(now time.Time) bool {
	if a.pend != nil {
		err := a.pend.check(now)
		if err == errWaiting {
			return true
		}
		p := a.pend
		a.pend = nil
		a.complete(&p.f, p.pos, err)
		a.rptr.Store(p.pos + abi.MES_API_FRAME_DWORDS)
		a.reportRptr()
	}
	a.moreFrames = false
	for n := 0; a.pend == nil; n++ {
		if n == maxFramesPerPass {
			a.moreFrames = true // the next pass comes at once (nextDeadline)
			return true
		}
		if a.revoked.Load() {
			return false
		}
		pos, w := a.rptr.Load(), a.wptr.Load()
		if w == pos || w-pos > math.MaxInt64 {
			return true // nothing (or a wptr behind: a 64-bit write half done)
		}
		if (w-pos)%abi.MES_API_FRAME_DWORDS != 0 || pos%abi.MES_API_FRAME_DWORDS != 0 || w-pos > a.size {
			a.haltRing(abi.MES_ERR_BAD_WPTR, fmt.Sprintf("wptr %#x with rptr %#x (ring %d dwords)", w, pos, a.size))
			return false
		}
		va := a.ring.base + pos%a.size*4
		if err := a.read(va, a.buf[:]); err != nil {
			if err == errRevoked {
				return false
			}
			a.haltRing(abi.MES_ERR_RING_CONFIG, fmt.Sprintf("frame fetch at %#x: %v", va, err))
			return false
		}
		f := decodeFrame(a.buf[:])
		err := a.execute(&f, pos, now)
		if err == errWaiting {
			return true // a.pend set
		}
		a.complete(&f, pos, err)
		a.rptr.Store(pos + abi.MES_API_FRAME_DWORDS)
		a.reportRptr()
	}
	return true
}

// complete ends a frame: its api_status fence on success; the error report on failure.
func (a *activation) complete(f *frame, pos uint64, err *frameErr) {
	defer func() { a.noteFrame(f, pos, err) }() // err as it ends up
	op := f.opcode()
	if err == nil {
		if addr, val, ok := f.apiStatus(); ok && addr != 0 {
			binary.LittleEndian.PutUint64(a.scratch[:], val)
			if werr := a.write(addr, a.scratch[:]); werr != nil {
				err = fail(abi.MES_ERR_BAD_ADDRESS, "api_completion_fence_addr %#x: %v", addr, werr)
			}
		}
	}
	if err == nil {
		a.nFrames.Add(1)
		a.event(abi.MES_EVT_FRAME, 0, noSlot, 0, op, pos, 0)
		return
	}
	a.nFrameErrors.Add(1)
	sub := uint32(0)
	if op == abi.MES_SCH_API_MISC {
		sub = f.dw(abi.MES_MISC_DW_OPCODE) & 0xFF
	}
	a.lastError.Store(err.reason | op&0xFF<<abi.REG_MES_LAST_ERROR__OPCODE__SHIFT | sub<<abi.REG_MES_LAST_ERROR__SUB__SHIFT)
	a.lastErrorRptr.Store(uint32(pos % a.size))
	db := uint32(0)
	if op == abi.MES_SCH_API_ADD_QUEUE || op == abi.MES_SCH_API_REMOVE_QUEUE {
		db = f.dw(abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET)
		if op == abi.MES_SCH_API_REMOVE_QUEUE {
			db = f.dw(abi.MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET)
		}
	}
	a.m.limiter.Warn(logKeyFrame, "mes: frame failed", "opcode", abi.NameOf("MES_SCH_API_", uint64(op)),
		"error", abi.NameOf("MES_ERR_", uint64(err.reason)), "why", err.why, "rptr", pos%a.size)
	a.event(abi.MES_EVT_FRAME_ERROR, err.reason, noSlot, 0, op, pos, 0)
	a.push(engine.IV{Client: abi.IH_CLIENT_GRBM_CP, Source: abi.IH_SRC_MES_ERROR,
		Data: [4]uint32{err.reason, op, uint32(pos % a.size), db}})
}

// reportRptr writes the ring rptr to the report address.
func (a *activation) reportRptr() {
	if a.ring.reportAddr == 0 {
		return
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(a.rptr.Load()%a.size))
	if err := a.write(a.ring.reportAddr, b[:]); err != nil && err != errRevoked {
		a.m.limiter.Warn(logKeyRing, "mes: rptr report write failed", "addr", a.ring.reportAddr, "err", err)
	}
}

// execute runs one frame: nil (done), errWaiting (a.pend set) or its failure.
func (a *activation) execute(f *frame, pos uint64, now time.Time) *frameErr {
	if !f.headerOK() {
		return fail(abi.MES_ERR_BAD_HEADER, "header %#08x", f[0])
	}
	// A fence the frame could not be completed with fails it before it acts (a driver that
	// sees a failure must be able to retry).
	if addr, _, ok := f.apiStatus(); ok && addr%8 != 0 {
		return fail(abi.MES_ERR_BAD_ADDRESS, "api_completion_fence_addr %#x not qword aligned", addr)
	}
	op := f.opcode()
	switch op {
	case abi.MES_SCH_API_SET_HW_RSRC:
		return a.setHWResources(f)
	case abi.MES_SCH_API_QUERY_SCHEDULER_STATUS, abi.MES_SCH_API_PERFORM_YIELD, abi.MES_SCH_API_PROGRAM_GDS,
		abi.MES_SCH_API_SET_DEBUG_VMID, abi.MES_SCH_API_AMD_LOG, abi.MES_SCH_API_SET_HW_RSRC_1:
		return nil // frames before it have completed: that is the barrier
	case abi.MES_SCH_API_SET_SCHEDULING_CONFIG:
		return a.setSchedulingConfig(f)
	case abi.MES_SCH_API_SET_LOG_BUFFER:
		return a.setLogBuffer(f)
	case abi.MES_SCH_API_MISC:
		return a.misc(f, pos, now)
	}
	if a.hw == nil {
		if _, known := statusDW(op); known {
			return fail(abi.MES_ERR_NOT_INITIALIZED, "%s before SET_HW_RESOURCES", abi.NameOf("MES_SCH_API_", uint64(op)))
		}
	}
	switch op {
	case abi.MES_SCH_API_ADD_QUEUE:
		return a.addQueue(f, now)
	case abi.MES_SCH_API_REMOVE_QUEUE:
		return a.removeQueue(f, pos, now)
	case abi.MES_SCH_API_SUSPEND:
		return a.suspend(f, pos, now)
	case abi.MES_SCH_API_RESUME:
		return a.resume(f)
	case abi.MES_SCH_API_RESET:
		return a.reset(f, pos, now)
	case abi.MES_SCH_API_CHANGE_GANG_PRIORITY, abi.MES_SCH_API_SET_GANG_PRIORITY_LEVEL:
		return a.changePriority(f)
	case abi.MES_SCH_API_UPDATE_ROOT_PAGE_TABLE:
		return a.updateRoot(f)
	}
	return fail(abi.MES_ERR_UNKNOWN_OPCODE, "opcode %d", op)
}

// wait makes f pending on check, bounded by deadline (then it fails with onTimeout).
func (a *activation) wait(f *frame, pos uint64, now, deadline time.Time, recheck time.Duration, onTimeout *frameErr,
	check func(now time.Time) *frameErr) *frameErr {
	if onTimeout == nil {
		onTimeout = fail(abi.MES_ERR_PREEMPT_TIMEOUT, "gave up waiting after %v", deadline.Sub(now))
	}
	a.pend = &pending{f: *f, pos: pos, deadline: deadline, recheck: recheck, check: func(now time.Time) *frameErr {
		if err := check(now); err != errWaiting {
			return err
		}
		if !now.Before(deadline) {
			return onTimeout
		}
		return errWaiting
	}}
	// Evaluate once now: many waits are already satisfied.
	err := a.pend.check(now)
	if err != errWaiting {
		a.pend = nil
	}
	return err
}
