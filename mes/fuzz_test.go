package mes

import (
	"encoding/binary"
	"testing"
	"time"

	"vgpu/abi"
)

// FuzzFrames feeds arbitrary API frames to a running scheduler with queues: whatever they say,
// every frame completes or fails (the trailing barrier's fence arrives), the scheduler never
// panics, and afterwards it still runs jobs.
//
// One rig serves every input of a worker (frameFuzz): building a CP and a scheduler and
// setting them up took most of an input's time. An input that could not have changed the
// scheduler's state (touches) is followed by a job on each of the rig's two queues; any other
// input by a fresh queue's job, as before, and then the next input starts from a restarted
// scheduler (restart: the same state a new rig has after the same setup).
func FuzzFrames(f *testing.F) {
	seed := func(op uint32, fields map[uint64]uint32) []byte {
		b := make([]byte, 4*abi.MES_API_FRAME_DWORDS)
		binary.LittleEndian.PutUint32(b, header(op))
		for dw, v := range fields {
			binary.LittleEndian.PutUint32(b[4*dw:], v)
		}
		return b
	}
	f.Add(seed(abi.MES_SCH_API_REMOVE_QUEUE, map[uint64]uint32{abi.MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET: 16}))
	f.Add(seed(abi.MES_SCH_API_SUSPEND, map[uint64]uint32{abi.MES_SUSPEND_DW_FLAGS: 1}))
	f.Add(seed(abi.MES_SCH_API_RESET, map[uint64]uint32{abi.MES_RESET_DW_FLAGS: 2, abi.MES_RESET_DW_DOORBELL_OFFSET_ADDR: 0xE000, abi.MES_RESET_DW_QUEUE_TYPE: 1}))
	f.Add(seed(abi.MES_SCH_API_MISC, map[uint64]uint32{abi.MES_MISC_DW_OPCODE: abi.MES_MISC_OP_WAIT_REG_MEM, abi.MES_MISC_DW_WAIT_MASK: 1, abi.MES_MISC_DW_WAIT_REFERENCE: 1}))
	f.Add(seed(abi.MES_SCH_API_ADD_QUEUE, map[uint64]uint32{abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET: 30, abi.MES_ADD_QUEUE_DW_MQD_ADDR: queueBase,
		abi.MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ADDR: 0x1000, abi.MES_ADD_QUEUE_DW_GANG_CONTEXT_ADDR: 0x2000, abi.MES_ADD_QUEUE_DW_QUEUE_TYPE: 1}))
	f.Add(seed(abi.MES_SCH_API_SET_LOG_BUFFER, map[uint64]uint32{abi.MES_LOG_DW_BUFFER_ADDR: 0xD000, abi.MES_LOG_DW_NUMBER_OF_ENTRIES: 8}))
	fz := &frameFuzz{}
	f.Cleanup(func() {
		if fz.r != nil {
			fz.r.close()
		}
	})
	f.Fuzz(fz.input)
}

// input runs one input of FuzzFrames.
func (fz *frameFuzz) input(t *testing.T, data []byte) {
	r := fz.begin(t)
	// Work on the rig's queues while the frames run, as in a driver's scheduler.
	seq := fz.jobs
	fz.jobs++
	for _, q := range fz.qs {
		q.job(seq)
	}
	const frameBytes = 4 * abi.MES_API_FRAME_DWORDS
	touched := false
	for n := 0; n < 4 && len(data) > 0; n++ {
		var fr frameB
		chunk := data[:min(len(data), frameBytes)]
		data = data[len(chunk):]
		for i := 0; i+4 <= len(chunk); i += 4 {
			fr[i/4] = binary.LittleEndian.Uint32(chunk[i:])
		}
		dw, ok := statusDW(fr[0] >> 4 & 0xFF)
		if !ok {
			dw = 2
		}
		touched = touched || touches((*frame)(&fr))
		fz.expectWait((*frame)(&fr))
		r.submit(&fr, dw) // returns once the barrier after it completed: it did not wedge
		fz.expectWait(nil)
	}
	if !touched {
		// The scheduler is in the state the restart left it in (touches), so its own queues
		// still take jobs: this input's must complete.
		r.waitFor("the rig's queues' jobs after fuzzed frames", 5*time.Second, func() bool {
			return fz.qs[0].done(seq) && fz.qs[1].done(seq)
		})
		fz.fresh = true
		return
	}
	// Still a working scheduler: a fresh queue runs a job. The next input restarts.
	q := r.queueAt(5, 0)
	q.add(abi.MES_PRIORITY_NORMAL, 0)
	q.job(0)
	r.waitFor("a job after fuzzed frames", 5*time.Second, func() bool { return q.done(0) })
}

// frameFuzz is FuzzFrames' rig, kept across the inputs of one worker process (inputs run one
// at a time). fresh says the scheduler is as restart left it (plus completed jobs): an input
// that ended otherwise — touched, or failed — makes the next one restart it.
type frameFuzz struct {
	r     *rig
	qs    [2]*testQueue
	fresh bool
	jobs  uint32 // the next job's sequence number on qs

	// The register a MISC WAIT_REG_MEM frame polls and the value it comes to hold (guarded by
	// r.regs.Lock; see expectWait).
	waiting          bool
	waitReg, waitVal uint32
	reads            int
}

// begin prepares the rig for an input run by t.
func (fz *frameFuzz) begin(t *testing.T) *rig {
	t.Helper()
	if fz.r == nil {
		fz.r = buildRig(t, nil)
		fz.r.wakeOnWrite()
		fz.r.regs.Hook = fz.regHook
	}
	fz.r.t = t
	if !fz.fresh {
		fz.restart()
	}
	fz.fresh = false // until the input ends well
	// Register values are input state (MISC WRITE_REG, WAIT_REG_MEM); nothing else the rig runs
	// reads registers (its jobs are WRITE_DATA). Recorded IVs would only pile up.
	fz.r.regs.Reset()
	fz.r.ivs.Reset()
	return fz.r
}

// restart brings the rig to the state a new one has after FuzzFrames' setup: the scheduler
// and the CP reset and quiet, memory zeroed, then the API ring started again and given the
// HW resources, the scheduling config (1 ms preemption grace: hangs are found fast) and two
// queues. It costs one memory clear and one round trip instead of a new CP and scheduler.
func (fz *frameFuzz) restart() {
	r := fz.r
	r.t.Helper()
	r.wreg(abi.REG_MES_RING_ACTIVE, 0) // a MES pipe reset: revoked, its slots killed and returned
	r.cp.Reset()
	if !r.mes.Quiesce(5*time.Second) || !r.cp.Quiesce(5*time.Second) {
		r.t.Fatalf("restart: the scheduler or the CP still inside a call out after 5 s")
	}
	r.mem.Reset()
	r.vm.mu.Lock()
	clear(r.vm.bound)
	r.vm.binds = 0
	r.vm.mu.Unlock()
	r.wptr, r.seq, r.n = 0, 0, 0
	r.startRing()
	hw := newFrame(abi.MES_SCH_API_SET_HW_RSRC).set(abi.MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB, 0xFFFE).
		set(abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK, 0x3).set(abi.MES_SET_HW_RSRC_DW_OVERSUBSCRIPTION_TIMER, 50)
	cfg := newFrame(abi.MES_SCH_API_SET_SCHEDULING_CONFIG)
	for l := uint64(0); l < abi.MES_PRIORITY_LEVELS; l++ {
		cfg.set64(abi.MES_SCHED_CFG_DW_GRACE_PERIOD_OTHER_LEVELS+2*l, 10000) // 1 ms
	}
	fz.qs = [2]*testQueue{r.queueAt(0, 0), r.queueAt(1, 0)}
	fz.jobs = 0
	r.okBatch([]*frameB{hw, cfg, fz.qs[0].addFrame(0, 0), fz.qs[1].addFrame(1, 0)},
		[]uint64{abi.MES_SET_HW_RSRC_DW_API_STATUS, abi.MES_SCHED_CFG_DW_API_STATUS, abi.MES_ADD_QUEUE_DW_API_STATUS, abi.MES_ADD_QUEUE_DW_API_STATUS})
}

// touches reports whether f could change what the scheduler does next (its tables, slots,
// configuration, or memory it or the rig's queues read). false only for frames that provably
// do not (execute in api.go): a bad header fails before anything; QUERY_SCHEDULER_STATUS and
// the other barriers complete doing nothing; SET_HW_RESOURCES fails while queues are added
// (the rig's two are, unless an earlier frame touched); an opcode the scheduler has no status
// for fails as unknown; MISC WRITE_REG and WAIT_REG_MEM act on registers only (begin clears
// them and nothing the rig runs reads them), INV_GART is the rig's no-op, the accepted no-op
// sub-opcodes and unknown ones do nothing. Everything else — READ_REG (writes memory
// anywhere), NOTIFY_WORK_ON_UNMAPPED_QUEUE, and every queue, gang, config and log frame —
// touches, whether it succeeds or fails.
func touches(f *frame) bool {
	if !f.headerOK() {
		return false
	}
	switch op := f.opcode(); op {
	case abi.MES_SCH_API_QUERY_SCHEDULER_STATUS, abi.MES_SCH_API_PERFORM_YIELD, abi.MES_SCH_API_PROGRAM_GDS,
		abi.MES_SCH_API_SET_DEBUG_VMID, abi.MES_SCH_API_AMD_LOG, abi.MES_SCH_API_SET_HW_RSRC_1, abi.MES_SCH_API_SET_HW_RSRC:
		return false
	case abi.MES_SCH_API_MISC:
		switch f.dw(abi.MES_MISC_DW_OPCODE) {
		case abi.MES_MISC_OP_READ_REG, abi.MES_MISC_OP_NOTIFY_WORK_ON_UNMAPPED_QUEUE:
			return true
		}
		return false
	default:
		_, known := statusDW(op)
		return known
	}
}

// expectWait arms the rig's registers for f (nil: disarms them). A MISC WAIT_REG_MEM frame
// waits in real time until its register matches, and fails after MES_MISC_OP_WAIT_TIMEOUT_US
// (100 ms) if it never does: one such input cost as much as a thousand others. So the
// register it polls comes to hold the awaited value from its second read on, as hardware
// that acknowledges: the frame still goes pending and completes through the scheduler's
// re-checks; the timeout itself is TestMiscWaitTimeout's.
func (fz *frameFuzz) expectWait(f *frame) {
	l := fz.r.regs.Lock
	l.Lock()
	defer l.Unlock()
	fz.waiting = false
	if f == nil || f.opcode() != abi.MES_SCH_API_MISC || f.dw(abi.MES_MISC_DW_OPCODE) != abi.MES_MISC_OP_WAIT_REG_MEM {
		return
	}
	fz.waiting, fz.reads = true, 0
	fz.waitReg = f.dw(abi.MES_MISC_DW_WAIT_REG_OFFSET1)
	if f.dw(abi.MES_MISC_DW_WAIT_OP) == abi.MES_MISC_OP_WAIT_OP_WRITE_WAIT_WRITE {
		fz.waitReg = f.dw(abi.MES_MISC_DW_WAIT_REG_OFFSET2)
	}
	fz.waitVal = f.dw(abi.MES_MISC_DW_WAIT_REFERENCE) & f.dw(abi.MES_MISC_DW_WAIT_MASK)
}

// regHook is the rig's register Hook (r.regs.Lock held).
func (fz *frameFuzz) regHook(reg, _ uint32, write bool) (uint32, bool) {
	if !fz.waiting || write || reg != fz.waitReg {
		return 0, false
	}
	fz.reads++
	return fz.waitVal, fz.reads >= 2
}

// okBatch sends frames (fs[i] with its status at dws[i]) behind one doorbell and a trailing
// barrier, and fails the test unless every one succeeded.
func (r *rig) okBatch(fs []*frameB, dws []uint64) {
	r.t.Helper()
	slots := make([]uint64, len(fs))
	for i, f := range fs {
		slots[i] = uint64(statusBase + 8*(r.n%256))
		r.n++
		r.mem.Store64(slots[i], 0)
		r.put(f.set64(dws[i], slots[i]).set64(dws[i]+2, 1))
	}
	r.seq++
	r.put(newFrame(abi.MES_SCH_API_QUERY_SCHEDULER_STATUS).set64(abi.MES_QUERY_DW_API_STATUS, ringFence).set64(abi.MES_QUERY_DW_API_STATUS+2, r.seq))
	r.mes.Doorbell(4, r.wptr)
	r.waitFor("ring fence", 10*time.Second, func() bool { return r.mem.Load64(ringFence) >= r.seq })
	for i, f := range fs {
		if r.mem.Load64(slots[i]) == 0 {
			r.t.Fatalf("frame %d (%s) failed: %s", i, abi.NameOf("MES_SCH_API_", uint64(f[0]>>4&0xFF)),
				abi.NameOf("MES_ERR_", uint64(r.rreg(abi.REG_MES_LAST_ERROR)&0xFF)))
		}
	}
}

// TestMiscWaitTimeout: a MISC WAIT_REG_MEM whose register never matches fails with
// WAIT_TIMEOUT after MES_MISC_OP_WAIT_TIMEOUT_US, the ring waiting behind it, and the frame
// after it runs (FuzzFrames makes the registers its waits poll match; this is the other path).
func TestMiscWaitTimeout(t *testing.T) {
	r := newRig(t)
	r.hwResources(0x1, 0, 0xFFFE)
	w := newFrame(abi.MES_SCH_API_MISC).set(abi.MES_MISC_DW_OPCODE, abi.MES_MISC_OP_WAIT_REG_MEM).
		set(abi.MES_MISC_DW_WAIT_REG_OFFSET1, 0x40).set(abi.MES_MISC_DW_WAIT_MASK, 1).set(abi.MES_MISC_DW_WAIT_REFERENCE, 1)
	start := time.Now()
	r.fails(w, abi.MES_MISC_DW_API_STATUS, abi.MES_ERR_WAIT_TIMEOUT)
	if d := time.Since(start); d < abi.MES_MISC_OP_WAIT_TIMEOUT_US*time.Microsecond {
		t.Errorf("WAIT_REG_MEM failed after %v, before its timeout", d)
	}
	r.ok(newFrame(abi.MES_SCH_API_QUERY_SCHEDULER_STATUS), abi.MES_QUERY_DW_API_STATUS)
}
