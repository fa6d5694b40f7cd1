package mes

import (
	"sort"
	"sync"
	"time"

	"vgpu/abi"
)

// Live inspection (device.Status, `vgpu status`): the scheduler's queues with their process,
// gang and priority, and its last frames. Everything is read from what the scheduler
// goroutine published (atomics, and the small records below under their own locks): a status
// request never waits for the scheduler, which may itself be waiting on guest memory.

// maxFrameRecords is how many completed frames the status keeps (the last ones).
const maxFrameRecords = 16

// FrameRecord is one completed API frame.
type FrameRecord struct {
	Seq    uint64    `json:"seq"`             // frames completed by this activation before it
	Opcode uint32    `json:"opcode"`          // MES_SCH_API_*
	Sub    uint32    `json:"sub,omitempty"`   // MES_MISC_* of a MISC frame
	Error  uint32    `json:"error,omitempty"` // MES_ERR_* (0: success)
	Rptr   uint64    `json:"rptr"`            // ring position of the frame (monotonic dwords)
	At     time.Time `json:"at"`              // when it completed
	Why    string    `json:"why,omitempty"`   // the failure's detail
}

// frameHistory is an activation's last frames, written by its goroutine.
type frameHistory struct {
	mu   sync.Mutex
	n    uint64
	last [maxFrameRecords]FrameRecord
}

func (h *frameHistory) add(r FrameRecord) {
	h.mu.Lock()
	r.Seq = h.n
	h.last[h.n%maxFrameRecords] = r
	h.n++
	h.mu.Unlock()
}

// records returns the kept frames, oldest first.
func (h *frameHistory) records() []FrameRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := min(h.n, maxFrameRecords)
	out := make([]FrameRecord, 0, k)
	for i := h.n - k; i < h.n; i++ {
		out = append(out, h.last[i%maxFrameRecords])
	}
	return out
}

// noteFrame records a completed frame (called once per frame by complete).
func (a *activation) noteFrame(f *frame, pos uint64, err *frameErr) {
	r := FrameRecord{Opcode: f.opcode(), Rptr: pos, At: time.Now()}
	if r.Opcode == abi.MES_SCH_API_MISC {
		r.Sub = f.dw(abi.MES_MISC_DW_OPCODE) & 0xFF
	}
	if err != nil {
		r.Error, r.Why = err.reason, err.why
	}
	a.frameLog.add(r)
}

// queueIdent is what ADD_QUEUE said about a queue: fixed for its life.
type queueIdent struct {
	process, gang    uint64 // context addresses: the identities of its process and gang
	pasid            uint16
	qtype            uint32
	mqd              uint64
	inproc, priority uint32
}

// publishIdent publishes q's identity for the status (at ADD_QUEUE, by the goroutine).
func (q *queue) publishIdent() {
	q.ident.Store(&queueIdent{process: q.gang.proc.ctxAddr, gang: q.gang.ctxAddr, pasid: q.gang.proc.vm.PASID,
		qtype: q.qtype, mqd: q.mqd, inproc: q.gang.inproc, priority: q.gang.level})
}

// QueueStatus is one added queue.
type QueueStatus struct {
	Doorbell  uint32 `json:"doorbell"`
	Mapped    bool   `json:"mapped"`
	Slot      int    `json:"slot"` // -1 unless mapped
	Hung      bool   `json:"hung"`
	Suspended bool   `json:"suspended"`
	HasWork   bool   `json:"has_work"`
	VMID      int    `json:"vmid"` // 0: none now
	PASID     uint16 `json:"pasid"`
	Process   uint64 `json:"process"`  // process context address
	Gang      uint64 `json:"gang"`     // gang context address
	Priority  uint32 `json:"priority"` // MES_PRIORITY_* (gang_global_priority_level)
	Inproc    uint32 `json:"inproc_priority"`
	Type      uint32 `json:"type"` // MES_QUEUE_TYPE_*
	MQD       uint64 `json:"mqd"`
	Maps      uint32 `json:"maps"`
	Preempts  uint32 `json:"preempts"`
	Rptr      uint64 `json:"rptr"`
}

// Status is the scheduler for `vgpu status`: its counters (Stats), every queue and its last
// frames.
type Status struct {
	Stats
	Ring       RingStatus    `json:"ring"`
	QueueList  []QueueStatus `json:"queue_status"`
	LastFrames []FrameRecord `json:"last_frames"`
}

// RingStatus is the API ring's position.
type RingStatus struct {
	Rptr uint64 `json:"rptr"` // monotonic dwords
	Wptr uint64 `json:"wptr"`
}

// Status returns the scheduler's state without waiting for its goroutine.
func (m *MES) Status() Status {
	st := Status{Stats: m.Stats()}
	st.Stats.Queues = nil // QueueList says more
	a := m.act.Load()
	if a == nil {
		return st
	}
	st.Ring = RingStatus{Rptr: a.rptr.Load(), Wptr: a.wptr.Load()}
	st.LastFrames = a.frameLog.records()
	for db, q := range *a.byDoorbell.Load() {
		v := q.status.Load()
		qs := QueueStatus{Doorbell: db, Slot: -1,
			Mapped:    v&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0,
			Hung:      v&abi.REG_MES_QUERY_STATUS__HUNG_MASK != 0,
			Suspended: v&abi.REG_MES_QUERY_STATUS__SUSPENDED_MASK != 0,
			HasWork:   v&abi.REG_MES_QUERY_STATUS__HAS_WORK_MASK != 0,
			VMID:      int(v & abi.REG_MES_QUERY_STATUS__VMID_MASK >> abi.REG_MES_QUERY_STATUS__VMID__SHIFT),
			Priority:  v & abi.REG_MES_QUERY_STATUS__PRIORITY_MASK >> abi.REG_MES_QUERY_STATUS__PRIORITY__SHIFT,
			Maps:      q.maps.Load(), Preempts: q.preempts.Load(), Rptr: q.pubRptr.Load()}
		if qs.Mapped {
			qs.Slot = int(v & abi.REG_MES_QUERY_STATUS__SLOT_MASK >> abi.REG_MES_QUERY_STATUS__SLOT__SHIFT)
		}
		if id := q.ident.Load(); id != nil {
			qs.PASID, qs.Process, qs.Gang, qs.Type, qs.MQD, qs.Inproc = id.pasid, id.process, id.gang, id.qtype, id.mqd, id.inproc
		}
		st.QueueList = append(st.QueueList, qs)
	}
	sort.Slice(st.QueueList, func(i, j int) bool { return st.QueueList[i].Doorbell < st.QueueList[j].Doorbell })
	return st
}
