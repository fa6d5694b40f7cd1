package mes

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/pm4"
)

func TestBringupAndAddRemove(t *testing.T) {
	r := newRig(t)
	if st := r.rreg(abi.REG_MES_STATUS); st&abi.REG_MES_STATUS__STATE_MASK != abi.MES_STATE_RUNNING {
		t.Fatalf("STATUS %#x after RING_ACTIVE", st)
	}
	r.hwResources(0xF, 0, 0xFF00)
	q := r.queueAt(0, 0)
	q.add(abi.MES_PRIORITY_NORMAL, 0)
	if s := q.status(); s&abi.REG_MES_QUERY_STATUS__KNOWN_MASK == 0 || s&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0 {
		t.Fatalf("status after ADD_QUEUE %#x: want known, unmapped", s)
	}
	if r.mem.Load32(q.mqd+abi.MES_MQD_DW_IS_QUEUE_UNMAP*4) != 1 ||
		r.mem.Load32(q.mqd+abi.MES_MQD_DW_CP_HQD_PQ_DOORBELL_CONTROL*4) != q.db<<2|abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK {
		t.Errorf("MQD after ADD_QUEUE: IS_QUEUE_UNMAP %d, DOORBELL_CONTROL %#x", r.mem.Load32(q.mqd+abi.MES_MQD_DW_IS_QUEUE_UNMAP*4),
			r.mem.Load32(q.mqd+abi.MES_MQD_DW_CP_HQD_PQ_DOORBELL_CONTROL*4))
	}
	for i := uint32(0); i < 10; i++ {
		q.job(i)
	}
	r.waitFor("jobs", 5*time.Second, func() bool { return q.done(9) })
	if q.status()&abi.REG_MES_QUERY_STATUS__VMID_MASK == 0 {
		t.Errorf("no VMID assigned while mapped: status %#x", q.status())
	}
	if len(r.vm.bound) != 1 {
		t.Errorf("bound VMIDs %v", r.vm.bound)
	}
	if q.remove() == 0 {
		t.Fatalf("REMOVE_QUEUE failed: %#x", r.rreg(abi.REG_MES_LAST_ERROR))
	}
	// The MQD holds the saved state: rptr = wptr = the work submitted, ACTIVE 0, unmapped.
	if got := r.mem.Load32(q.mqd + abi.MES_MQD_DW_CP_HQD_PQ_WPTR_LO*4); uint64(got) != q.wptr {
		t.Errorf("MQD PQ_WPTR %d, want %d", got, q.wptr)
	}
	if got := r.mem.Load32(q.mqd + abi.MES_MQD_DW_CP_HQD_PQ_RPTR*4); uint64(got) != q.wptr%qRingDwords {
		t.Errorf("MQD PQ_RPTR %d, want %d", got, q.wptr%qRingDwords)
	}
	if r.mem.Load32(q.mqd+abi.MES_MQD_DW_CP_HQD_ACTIVE*4) != 0 || r.mem.Load32(q.mqd+abi.MES_MQD_DW_IS_QUEUE_UNMAP*4) != 1 {
		t.Errorf("MQD ACTIVE %d IS_QUEUE_UNMAP %d after REMOVE", r.mem.Load32(q.mqd+abi.MES_MQD_DW_CP_HQD_ACTIVE*4),
			r.mem.Load32(q.mqd+abi.MES_MQD_DW_IS_QUEUE_UNMAP*4))
	}
	if q.status() != 0 || r.rreg(abi.REG_MES_QUEUES) != 0 {
		t.Errorf("queue still known after REMOVE: %#x, QUEUES %d", q.status(), r.rreg(abi.REG_MES_QUEUES))
	}
}

// TestOversubscribe: many more queues than slots, each with an ordered job sequence: every job
// completes, in order, and queues are mapped and unmapped repeatedly.
func TestOversubscribe(t *testing.T) {
	r := newRig(t)
	r.hwResources(0x3, 0, 0xFFFE) // two slots
	const nq, jobs = 12, 20
	qs := make([]*testQueue, nq)
	for i := range qs {
		qs[i] = r.queueAt(i, 0)
		qs[i].add(abi.MES_PRIORITY_NORMAL, 1000) // 100 µs quantum
	}
	// Each job waits on a memory flag first, so queues hold their slots long enough to be
	// preempted by quantum.
	for j := uint32(0); j < jobs; j++ {
		for _, q := range qs {
			q.job(j)
		}
	}
	r.waitFor("every job", 20*time.Second, func() bool {
		for _, q := range qs {
			if !q.done(jobs - 1) {
				return false
			}
		}
		return true
	})
	for i, q := range qs {
		for j := uint32(0); j < jobs; j++ {
			if !q.done(j) {
				t.Fatalf("queue %d job %d missing", i, j)
			}
		}
	}
	if maps := r.rreg(abi.REG_MES_MAPS); maps < nq {
		t.Errorf("MAPS %d < %d queues", maps, nq)
	}
}

// TestPriorityPreempts: a HIGH queue with work takes a slot from a busy NORMAL queue at once.
func TestPriorityPreempts(t *testing.T) {
	r := newRig(t)
	r.hwResources(0x1, 0, 0xFFFE) // one slot
	low := r.queueAt(0, 0)
	low.add(abi.MES_PRIORITY_LOW, 1<<40) // a quantum that never expires
	flag := low.data + 0x800
	// The low queue parks on a flag nobody sets: it holds the slot.
	low.submit(pm4.WaitMem(flag, 1)...)
	r.waitFor("low mapped", 5*time.Second, func() bool { return low.status()&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0 })
	high := r.queueAt(1, 0)
	high.add(abi.MES_PRIORITY_HIGH, 0)
	high.job(0)
	r.waitFor("high job", 5*time.Second, func() bool { return high.done(0) })
	if p := func() uint32 { r.wreg(abi.REG_MES_QUERY_DOORBELL, low.db); return r.rreg(abi.REG_MES_QUERY_PREEMPTS) }(); p == 0 {
		t.Errorf("low queue never preempted")
	}
	// The low queue resumes its parked wait and finishes once the flag is set.
	low.job(1)
	r.mem.Store32(flag, 1)
	r.cp.Wake()
	r.waitFor("low job after resume", 5*time.Second, func() bool { return low.done(1) })
}

func TestHangDetectAndReset(t *testing.T) {
	r := newRig(t)
	r.hwResources(0x3, 0, 0xFFFE)
	cfg := newFrame(abi.MES_SCH_API_SET_SCHEDULING_CONFIG)
	for l := uint64(0); l < abi.MES_PRIORITY_LEVELS; l++ {
		cfg.set64(abi.MES_SCHED_CFG_DW_GRACE_PERIOD_OTHER_LEVELS+2*l, 50000) // 5 ms
	}
	r.ok(cfg, abi.MES_SCHED_CFG_DW_API_STATUS)
	bad := r.queueAt(0, 0)
	bad.add(abi.MES_PRIORITY_NORMAL, 0)
	bad.submit(pm4.Kernel(abi.KERNEL_ENDLESS, 0, 0, 0)...)
	bad.submit(pm4.DispatchDirect(1, 1, 1)...)
	good := r.queueAt(1, 0)
	good.add(abi.MES_PRIORITY_NORMAL, 0)
	good.job(0)
	r.waitFor("good job", 5*time.Second, func() bool { return good.done(0) })
	// Under load the bad queue may still be on its way to the dispatch: a queue stopped
	// before it is no hang. Detect once its endless kernel runs (rptr past SET_SH_REG).
	r.waitFor("the endless kernel running", 5*time.Second, func() bool {
		for slot := range cp.NumSlots {
			if h := r.cp.HQDStatus(slot); h.Active && h.Mapped && h.Doorbell == bad.db && h.Rptr >= 8 {
				return true
			}
		}
		return false
	})
	// Detect: the endless queue cannot stop; REMOVE of it fails once it is hung.
	arr := uint64(0xE000)
	for i := uint64(0); i < 8; i++ {
		r.mem.Store32(arr+4*i, abi.MES_HUNG_DB_INVALID)
	}
	det := newFrame(abi.MES_SCH_API_RESET).set(abi.MES_RESET_DW_FLAGS, abi.MES_RESET_FLAG_HANG_DETECT_ONLY_MASK).
		set64(abi.MES_RESET_DW_DOORBELL_OFFSET_ADDR, arr).set(abi.MES_RESET_DW_QUEUE_TYPE, abi.MES_QUEUE_TYPE_COMPUTE)
	r.ok(det, abi.MES_RESET_DW_API_STATUS)
	if got := r.mem.Load32(arr); got != bad.db {
		t.Fatalf("hung array[0] %#x, want doorbell %#x", got, bad.db)
	}
	if r.mem.Load32(arr+4) != abi.MES_HUNG_DB_INVALID {
		t.Errorf("array[1] %#x: only one queue is hung", r.mem.Load32(arr+4))
	}
	if bad.status()&abi.REG_MES_QUERY_STATUS__HUNG_MASK == 0 {
		t.Fatalf("status %#x: not hung", bad.status())
	}
	if bad.remove() != 0 {
		t.Fatal("REMOVE of a hung queue succeeded")
	}
	if reason := r.rreg(abi.REG_MES_LAST_ERROR) & 0xFF; reason != abi.MES_ERR_QUEUE_HUNG {
		t.Fatalf("REMOVE failed with %s", abi.NameOf("MES_ERR_", uint64(reason)))
	}
	good.job(1)
	r.waitFor("good job while the other is hung", 5*time.Second, func() bool { return good.done(1) })
	rst := newFrame(abi.MES_SCH_API_RESET).set(abi.MES_RESET_DW_FLAGS, abi.MES_RESET_FLAG_RESET_QUEUE_ONLY_MASK).
		set(abi.MES_RESET_DW_DOORBELL_OFFSET, bad.db)
	r.ok(rst, abi.MES_RESET_DW_API_STATUS)
	if s := bad.status(); s&(abi.REG_MES_QUERY_STATUS__HUNG_MASK|abi.REG_MES_QUERY_STATUS__MAPPED_MASK) != 0 || r.rreg(abi.REG_MES_HUNG) != 0 {
		t.Fatalf("after RESET: status %#x, MES_HUNG %d", s, r.rreg(abi.REG_MES_HUNG))
	}
	bad.job(0)
	r.waitFor("job after reset", 5*time.Second, func() bool { return bad.done(0) })
	if bad.remove() == 0 {
		t.Fatal("REMOVE after RESET failed")
	}
}

func TestBadFrames(t *testing.T) {
	r := newRig(t)
	q := r.queueAt(0, 0)
	r.fails(q.addFrame(1, 0), abi.MES_ADD_QUEUE_DW_API_STATUS, abi.MES_ERR_NOT_INITIALIZED)
	r.hwResources(0x3, 0, 0xFFFE)
	o := r.queueAt(1, 0) // a queue not added: its frames fail for their own reason
	cases := []struct {
		name   string
		f      *frameB
		dw     uint64
		reason uint32
	}{
		{"unknown opcode", newFrame(0x55), 2, abi.MES_ERR_UNKNOWN_OPCODE},
		{"bad header", newFrame(abi.MES_SCH_API_QUERY_SCHEDULER_STATUS).set(0, 0x2), abi.MES_QUERY_DW_API_STATUS, abi.MES_ERR_BAD_HEADER},
		{"mqd unreachable", o.addFrame(1, 0).set64(abi.MES_ADD_QUEUE_DW_MQD_ADDR, 1<<40), abi.MES_ADD_QUEUE_DW_API_STATUS, abi.MES_ERR_BAD_ADDRESS},
		{"doorbell outside", o.addFrame(1, 0).set(abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET, 4096), abi.MES_ADD_QUEUE_DW_API_STATUS, abi.MES_ERR_BAD_DOORBELL},
		{"odd doorbell", o.addFrame(1, 0).set(abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET, 41), abi.MES_ADD_QUEUE_DW_API_STATUS, abi.MES_ERR_BAD_DOORBELL},
		{"mes doorbell", o.addFrame(1, 0).set(abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET, 4), abi.MES_ADD_QUEUE_DW_API_STATUS, abi.MES_ERR_BAD_DOORBELL},
		{"priority", o.addFrame(7, 0), abi.MES_ADD_QUEUE_DW_API_STATUS, abi.MES_ERR_BAD_PRIORITY},
		{"sdma", o.addFrame(1, 0).set(abi.MES_ADD_QUEUE_DW_QUEUE_TYPE, abi.MES_QUEUE_TYPE_SDMA), abi.MES_ADD_QUEUE_DW_API_STATUS, abi.MES_ERR_BAD_QUEUE_TYPE},
		{"remove unknown", newFrame(abi.MES_SCH_API_REMOVE_QUEUE).set(abi.MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET, 999), abi.MES_REMOVE_QUEUE_DW_API_STATUS, abi.MES_ERR_NO_SUCH_QUEUE},
		{"misc unknown", newFrame(abi.MES_SCH_API_MISC).set(abi.MES_MISC_DW_OPCODE, 77), abi.MES_MISC_DW_API_STATUS, abi.MES_ERR_UNKNOWN_OPCODE},
		{"masks again with queues", newFrame(abi.MES_SCH_API_SET_HW_RSRC), abi.MES_SET_HW_RSRC_DW_API_STATUS, abi.MES_ERR_BAD_FIELD},
	}
	q.add(1, 0)
	r.fails(q.addFrame(1, 0), abi.MES_ADD_QUEUE_DW_API_STATUS, abi.MES_ERR_DUPLICATE_QUEUE)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r.t = t
			r.fails(c.f, c.dw, c.reason)
		})
	}
	r.t = t
	// A misaligned api_status fails the frame before it acts: the queue is not suspended.
	susp := newFrame(abi.MES_SCH_API_SUSPEND).set(abi.MES_SUSPEND_DW_FLAGS, 1)
	susp.set64(abi.MES_SUSPEND_DW_API_STATUS, statusBase+4).set64(abi.MES_SUSPEND_DW_API_STATUS+2, 1)
	r.put(susp)
	r.seq++
	r.put(newFrame(abi.MES_SCH_API_QUERY_SCHEDULER_STATUS).set64(abi.MES_QUERY_DW_API_STATUS, ringFence).set64(abi.MES_QUERY_DW_API_STATUS+2, r.seq))
	r.mes.Doorbell(4, r.wptr)
	r.waitFor("ring fence", 5*time.Second, func() bool { return r.mem.Load64(ringFence) >= r.seq })
	if reason := r.rreg(abi.REG_MES_LAST_ERROR) & 0xFF; reason != abi.MES_ERR_BAD_ADDRESS || q.status()&abi.REG_MES_QUERY_STATUS__SUSPENDED_MASK != 0 {
		t.Errorf("misaligned api_status: %s, status %#x", abi.NameOf("MES_ERR_", uint64(reason)), q.status())
	}
	q.job(0)
	r.waitFor("job after bad frames", 5*time.Second, func() bool { return q.done(0) })
	if e := r.rreg(abi.REG_MES_FRAME_ERRORS); e != uint32(len(cases)+3) {
		t.Errorf("FRAME_ERRORS %d, want %d", e, len(cases)+3)
	}
}

// TestKernelSlotMask: SET_HW_RESOURCES naming an HQD the kernel runs fails.
func TestKernelSlotMask(t *testing.T) {
	r := newRig(t)
	r.cp.WriteHQD(1, abi.REG_HQD_PQ_BASE_LO, 0x200000)
	r.cp.WriteHQD(1, abi.REG_HQD_PQ_CONTROL, 9)
	r.cp.WriteHQD(1, abi.REG_HQD_ACTIVE, 1)
	f := newFrame(abi.MES_SCH_API_SET_HW_RSRC).set(abi.MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB, 0xFF00).
		set(abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK, 0x3)
	r.fails(f, abi.MES_SET_HW_RSRC_DW_API_STATUS, abi.MES_ERR_BAD_MASK)
}

// TestVMIDOversubscribe: more processes than VMIDs all progress.
func TestVMIDOversubscribe(t *testing.T) {
	r := newRig(t)
	r.hwResources(0xF, 0, 0x6) // VMIDs 1 and 2 only
	var qs []*testQueue
	for i := 0; i < 5; i++ {
		q := r.queueAt(i, 0)
		q.add(abi.MES_PRIORITY_NORMAL, 0)
		qs = append(qs, q)
	}
	for j := uint32(0); j < 10; j++ {
		for _, q := range qs {
			q.job(j)
		}
	}
	r.waitFor("all processes' jobs", 10*time.Second, func() bool {
		for _, q := range qs {
			if !q.done(9) {
				return false
			}
		}
		return true
	})
}

// TestUnmappedDoorbellIntercept: with the intercept off and no periodic poll, work on an
// unmapped queue waits for NOTIFY_WORK_ON_UNMAPPED_QUEUE.
func TestUnmappedDoorbellIntercept(t *testing.T) {
	r := newRig(t)
	f := newFrame(abi.MES_SCH_API_SET_HW_RSRC).set(abi.MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB, 0xFFFE).
		set(abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK, 0x1).set(abi.MES_SET_HW_RSRC_DW_AGGREGATED_DOORBELLS+1, 40)
	r.ok(f, abi.MES_SET_HW_RSRC_DW_API_STATUS)
	q := r.queueAt(0, 0)
	q.add(abi.MES_PRIORITY_NORMAL, 0)
	q.job(0)
	r.waitFor("intercepted doorbell", 5*time.Second, func() bool { return q.done(0) })
	r.waitFor("unmapped after idle", 5*time.Second, func() bool { return q.status()&abi.REG_MES_QUERY_STATUS__MAPPED_MASK == 0 })
	r.wreg(abi.REG_MES_CNTL, abi.REG_MES_CNTL__UNMAPPED_DOORBELL_DISABLE_MASK)
	q.job(1)
	time.Sleep(30 * time.Millisecond)
	if q.done(1) {
		t.Fatal("job ran although nothing told MES")
	}
	r.ok(newFrame(abi.MES_SCH_API_MISC).set(abi.MES_MISC_DW_OPCODE, abi.MES_MISC_OP_NOTIFY_WORK_ON_UNMAPPED_QUEUE), abi.MES_MISC_DW_API_STATUS)
	r.waitFor("job after notify", 5*time.Second, func() bool { return q.done(1) })
	r.waitFor("unmapped again", 5*time.Second, func() bool { return q.status()&abi.REG_MES_QUERY_STATUS__MAPPED_MASK == 0 })
	q.job(2)
	r.mes.Doorbell(40, 1) // the aggregated doorbell of NORMAL
	r.waitFor("job after aggregated doorbell", 5*time.Second, func() bool { return q.done(2) })
}

func TestSuspendResume(t *testing.T) {
	r := newRig(t)
	r.hwResources(0x3, 0, 0xFFFE)
	q := r.queueAt(0, 0)
	q.add(abi.MES_PRIORITY_NORMAL, 0)
	flag := q.data + 0x800
	q.submit(pm4.WaitMem(flag, 1)...)
	q.job(0)
	r.waitFor("mapped", 5*time.Second, func() bool { return q.status()&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0 })
	fence := uint64(0xE100)
	s := newFrame(abi.MES_SCH_API_SUSPEND).set64(abi.MES_SUSPEND_DW_GANG_CONTEXT_ADDR, q.gang).
		set64(abi.MES_SUSPEND_DW_SUSPEND_FENCE_ADDR, fence).set(abi.MES_SUSPEND_DW_SUSPEND_FENCE_VALUE, 7)
	r.ok(s, abi.MES_SUSPEND_DW_API_STATUS)
	if r.mem.Load32(fence) != 7 || q.status()&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0 {
		t.Fatalf("suspend fence %d status %#x", r.mem.Load32(fence), q.status())
	}
	r.mem.Store32(flag, 1)
	time.Sleep(20 * time.Millisecond)
	if q.done(0) {
		t.Fatal("a suspended gang made progress")
	}
	r.ok(newFrame(abi.MES_SCH_API_RESUME).set64(abi.MES_RESUME_DW_GANG_CONTEXT_ADDR, q.gang), abi.MES_RESUME_DW_API_STATUS)
	r.waitFor("job after resume", 5*time.Second, func() bool { return q.done(0) })
}

// TestRingHalt: a wptr that is not a whole number of frames halts the scheduler with the
// reason in MES_STATUS.ERROR, an IV and the queues stopped; RING_ACTIVE=0 clears it.
func TestRingHalt(t *testing.T) {
	r := newRig(t)
	r.hwResources(0x1, 0, 0xFFFE)
	r.wreg(abi.REG_MES_RING_WPTR_LO, uint32(r.wptr+3))
	r.waitFor("halt", 5*time.Second, func() bool {
		return r.rreg(abi.REG_MES_STATUS)&abi.REG_MES_STATUS__STATE_MASK == abi.MES_STATE_HALTED
	})
	if e := r.rreg(abi.REG_MES_STATUS) & abi.REG_MES_STATUS__ERROR_MASK >> abi.REG_MES_STATUS__ERROR__SHIFT; e != abi.MES_ERR_BAD_WPTR {
		t.Fatalf("STATUS.ERROR %s", abi.NameOf("MES_ERR_", uint64(e)))
	}
	found := false
	for _, iv := range r.ivs.All() {
		if iv.Source == abi.IH_SRC_MES_ERROR && iv.Data[0] == abi.MES_ERR_BAD_WPTR {
			found = true
		}
	}
	if !found {
		t.Error("no IH_SRC_MES_ERROR IV for the halt")
	}
	r.wreg(abi.REG_MES_RING_ACTIVE, 0)
	if st := r.rreg(abi.REG_MES_STATUS); st != abi.MES_STATE_OFF {
		t.Fatalf("STATUS %#x after RING_ACTIVE=0", st)
	}
}

// TestManyFramesOneDoorbell: more frames than one pass runs (maxFramesPerPass) after a
// single doorbell all complete, without another event.
func TestManyFramesOneDoorbell(t *testing.T) {
	r := newRig(t)
	const n = 3*maxFramesPerPass + 5 // within the ring: ringDwords/64 frames
	for i := 1; i <= n; i++ {
		r.put(newFrame(abi.MES_SCH_API_QUERY_SCHEDULER_STATUS).set64(abi.MES_QUERY_DW_API_STATUS, ringFence).set64(abi.MES_QUERY_DW_API_STATUS+2, uint64(i)))
	}
	r.mes.Doorbell(4, r.wptr)
	r.waitFor("the last frame's fence", 5*time.Second, func() bool { return r.mem.Load64(ringFence) == n })
}

// mapWatcher looks at the scheduler's registers from inside Map, where a queue's
// work may already run and finish: whoever sees it done must see it mapped and counted.
type mapWatcher struct {
	Slots
	r    *rig
	q    *testQueue
	mu   sync.Mutex
	seen []string // what was wrong at each Map
}

func (w *mapWatcher) Map(slot int, img cp.Image) error {
	r := w.r
	var wrong []string
	if q := w.q; q.db == img.DoorbellOffset {
		if s := q.status(); s&abi.REG_MES_QUERY_STATUS__MAPPED_MASK == 0 {
			wrong = append(wrong, fmt.Sprintf("status %#x not mapped", s))
		}
		if r.wreg(abi.REG_MES_QUERY_DOORBELL, q.db); r.rreg(abi.REG_MES_QUERY_MAPS) == 0 {
			wrong = append(wrong, "QUERY_MAPS 0")
		}
	}
	if r.rreg(abi.REG_MES_MAPS) == 0 || r.rreg(abi.REG_MES_MAPPED) == 0 {
		wrong = append(wrong, "MAPS or MAPPED 0")
	}
	w.mu.Lock()
	w.seen = append(w.seen, strings.Join(wrong, ", "))
	w.mu.Unlock()
	return w.Slots.Map(slot, img)
}

// TestMappedBeforeMap: the status register and the counts say "mapped" before the CP gets the
// queue (it may finish the queue's work before Map returns; a driver that saw its fence read a
// status that still said unmapped). The MQD's records follow after the map (docs/device.md).
func TestMappedBeforeMap(t *testing.T) {
	var w *mapWatcher
	r := newRigSlots(t, func(s Slots) Slots { w = &mapWatcher{Slots: s}; return w })
	w.r = r
	r.hwResources(0x1, 0, 0xFFFE)
	q := r.queueAt(0, 0)
	w.q = q
	q.add(abi.MES_PRIORITY_NORMAL, 0)
	q.job(0)
	r.waitFor("job", 5*time.Second, func() bool { return q.done(0) })
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.seen) == 0 {
		t.Fatal("no Map")
	}
	for i, s := range w.seen {
		if s != "" {
			t.Errorf("map %d: %s", i, s)
		}
	}
}
