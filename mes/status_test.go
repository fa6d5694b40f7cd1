package mes

import (
	"testing"
	"time"

	"vgpu/abi"
)

// TestStatus: the status names each added queue with its process, gang, PASID and priority,
// where it runs, and the frames completed, failures with their reason.
func TestStatus(t *testing.T) {
	r := newRig(t)
	r.hwResources(0x1, 0, 0xFF00)
	a, b := r.queueAt(0, 0), r.queueAt(1, 0)
	a.add(abi.MES_PRIORITY_HIGH, 0)
	b.add(abi.MES_PRIORITY_LOW, 0)
	a.job(0)
	r.waitFor("job", 5*time.Second, func() bool { return a.done(0) })
	r.fails(newFrame(abi.MES_SCH_API_REMOVE_QUEUE).set(abi.MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET, 0x7FE),
		abi.MES_REMOVE_QUEUE_DW_API_STATUS, abi.MES_ERR_NO_SUCH_QUEUE)

	// The barrier's fence is written before the scheduler moves its rptr past the barrier and
	// records it in the history (as on hardware, the fence comes first): wait for the rptr.
	var st Status
	r.waitFor("the ring consumed", 5*time.Second, func() bool { st = r.mes.Status(); return st.Ring.Rptr == st.Ring.Wptr })
	if st.State != abi.MES_STATE_RUNNING || len(st.QueueList) != 2 {
		t.Fatalf("status %+v", st)
	}
	for i, tc := range []struct {
		q    *testQueue
		prio uint32
	}{{a, abi.MES_PRIORITY_HIGH}, {b, abi.MES_PRIORITY_LOW}} {
		qs := st.QueueList[i]
		if qs.Doorbell != tc.q.db || qs.Process != tc.q.proc || qs.Gang != tc.q.gang || qs.MQD != tc.q.mqd ||
			qs.PASID != uint16(tc.q.proc>>12) || qs.Priority != tc.prio || qs.Type != abi.MES_QUEUE_TYPE_COMPUTE {
			t.Errorf("queue %d: %+v", i, qs)
		}
		if qs.Mapped != (qs.Slot >= 0) {
			t.Errorf("queue %d: mapped %v in slot %d", i, qs.Mapped, qs.Slot)
		}
	}
	// The queue that ran was mapped (it may be unmapped again by now: it went idle).
	if q := st.QueueList[0]; q.Maps == 0 || q.Mapped && q.Slot != 1 || st.QueueList[1].Maps != 0 {
		t.Errorf("queues: %+v", st.QueueList)
	}
	fr := st.LastFrames
	// The rig follows each frame with a QUERY_SCHEDULER_STATUS carrying the ring fence.
	const query = abi.MES_SCH_API_QUERY_SCHEDULER_STATUS
	want := []uint32{abi.MES_SCH_API_SET_HW_RSRC, query, abi.MES_SCH_API_ADD_QUEUE, query, abi.MES_SCH_API_ADD_QUEUE, query,
		abi.MES_SCH_API_REMOVE_QUEUE, query}
	if len(fr) != len(want) {
		t.Fatalf("%d frames recorded, want %d: %+v", len(fr), len(want), fr)
	}
	for i, op := range want {
		if fr[i].Opcode != op || fr[i].Seq != uint64(i) {
			t.Errorf("frame %d: %+v, want opcode %d", i, fr[i], op)
		}
	}
	if fr[6].Error != abi.MES_ERR_NO_SUCH_QUEUE || fr[6].Why == "" || fr[0].Error != 0 || fr[7].Error != 0 {
		t.Errorf("frame errors: %+v", fr)
	}
}

// TestFrameHistoryBound: the history keeps the last maxFrameRecords frames, oldest first.
func TestFrameHistoryBound(t *testing.T) {
	var h frameHistory
	for i := range maxFrameRecords + 5 {
		h.add(FrameRecord{Opcode: uint32(i)})
	}
	got := h.records()
	if len(got) != maxFrameRecords || got[0].Opcode != 5 || got[0].Seq != 5 || got[len(got)-1].Opcode != maxFrameRecords+4 {
		t.Fatalf("records %+v", got)
	}
}
