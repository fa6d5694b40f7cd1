package mes

import (
	"sync/atomic"
	"time"

	"vgpu/abi"
	"vgpu/cp"
)

// process is an address space with queues: keyed by its process context address.
type process struct {
	ctxAddr   uint64
	vm        VMContext
	quantum   time.Duration
	vmid      int       // 0: none now
	vmidSince time.Time // when it got vmid
	lastMap   time.Time // last time one of its queues was mapped (VMID reuse: least recent first)
	queues    int       // added
	inSlots   int       // occupying a slot (mapped, preempting or hung)
	vmidAsked bool      // its VMID holder has been asked to give way (once per wait)
}

// gang is a set of queues scheduled together; userq uses one queue per gang.
type gang struct {
	ctxAddr   uint64
	proc      *process
	level     uint32 // gang_global_priority_level
	inproc    uint32
	quantum   time.Duration
	suspended bool
	queues    []*queue
}

// qstate is where a queue is.
type qstate uint8

const (
	qUnmapped   qstate = iota
	qMapped            // running in slot
	qPreempting        // asked to stop; still in slot
	qHung              // did not stop within its grace; keeps slot until RESET
	qHalted            // halted on an error (unmapped); not mapped again until RESET
)

// queue is one added queue. The scheduler goroutine owns every field but the atomics, which
// the doorbell path and the register path read.
type queue struct {
	doorbell  uint32 // dword offset: its identity
	gang      *gang
	ctx       uint64 // its record in the gang context page (MES_CTX_*): one per queue of the gang
	mqd       uint64
	wptrAddr  uint64
	unmapFlag uint64
	qtype     uint32

	state         qstate
	slot          int
	mappedAt      time.Time
	ranSince      time.Time // when it first ran or parked in its slot (its quantum starts); zero: not yet
	waitSince     time.Time // when it started waiting for a slot (in activation.waitList)
	inWait        bool      // in activation.waitList
	removed       bool      // REMOVE_QUEUE dropped it (a stale waitList entry is skipped)
	idleSince     time.Time // mapped and idle since (zero: busy)
	preemptReason uint32
	preemptReq    time.Time // when the preemption was asked for
	preemptAt     time.Time // its current deadline (a grace after the request, extended while not in a dispatch)
	rptr, wptr    uint64    // last known (monotonic dwords)
	img           cp.Image  // the saved image (valid once mapped once or loaded)
	hqd           []byte    // the MQD's HQD image (dwords 128..183) as last loaded
	loaded        bool      // img holds the MQD's ring configuration
	errCode       uint32    // CP_ERROR_* it halted with
	removing      bool      // a REMOVE_QUEUE waits for it
	owed          owedWrite // memory writes a policy pass owes it (deferred.go)

	// Shared with the doorbell path.
	lastDB    atomic.Uint64 // last doorbell value (a wptr)
	inSlot    atomic.Bool   // a doorbell reaches the HQD directly
	dbPending atomic.Bool   // a doorbell for it arrived while it was not in a slot

	// Published for the register path (MES_QUERY_*).
	status   atomic.Uint32 // MES_QUERY_STATUS layout
	maps     atomic.Uint32
	preempts atomic.Uint32
	pubRptr  atomic.Uint64
	ident    atomic.Pointer[queueIdent] // status.go
}

// hasWork: its known wptr is ahead of its rptr, or its last unmap saved shader dispatches
// (which a map resumes before anything else).
func (q *queue) hasWork() bool { return q.wptr > q.rptr || len(q.img.Exec.Dispatches) > 0 }

// runnable: it has work and may be mapped.
func (q *queue) runnable() bool {
	return q.state == qUnmapped && q.hasWork() && !q.gang.suspended && !q.removing
}

// occupies: it holds a slot.
func (q *queue) occupies() bool {
	return q.state == qMapped || q.state == qPreempting || q.state == qHung
}

// publish updates the register-visible status.
func (q *queue) publish() {
	v := uint32(abi.REG_MES_QUERY_STATUS__KNOWN_MASK)
	slot := uint32(0xFF)
	if q.occupies() {
		v |= abi.REG_MES_QUERY_STATUS__MAPPED_MASK
		slot = uint32(q.slot)
	}
	if q.state == qHung {
		v |= abi.REG_MES_QUERY_STATUS__HUNG_MASK
	}
	if q.gang.suspended {
		v |= abi.REG_MES_QUERY_STATUS__SUSPENDED_MASK
	}
	if q.hasWork() {
		v |= abi.REG_MES_QUERY_STATUS__HAS_WORK_MASK
	}
	v |= q.gang.level << abi.REG_MES_QUERY_STATUS__PRIORITY__SHIFT & abi.REG_MES_QUERY_STATUS__PRIORITY_MASK
	v |= slot << abi.REG_MES_QUERY_STATUS__SLOT__SHIFT
	v |= uint32(q.gang.proc.vmid) << abi.REG_MES_QUERY_STATUS__VMID__SHIFT & abi.REG_MES_QUERY_STATUS__VMID_MASK
	q.status.Store(v)
	q.pubRptr.Store(q.rptr)
}

// publishMapped publishes q as it will be once mapped in slot (place, before the map: the
// queue's work may complete before Map returns, and whoever sees it done must see the queue
// mapped — a driver that then rings its doorbell expects the HQD to take it).
func (q *queue) publishMapped(slot int) {
	state, was := q.state, q.slot
	q.state, q.slot = qMapped, slot
	q.publish()
	q.state, q.slot = state, was
}

// table is the scheduler's bookkeeping: processes, gangs, queues.
type table struct {
	procs  map[uint64]*process
	gangs  map[uint64]*gang
	queues map[uint32]*queue // by doorbell dword
	order  []*queue          // added order (deterministic scans)
}

func newTable() table {
	return table{procs: map[uint64]*process{}, gangs: map[uint64]*gang{}, queues: map[uint32]*queue{}}
}

// remove drops q and, when they become empty, its gang and process (the caller frees the VMID).
func (t *table) remove(q *queue) (procGone *process) {
	delete(t.queues, q.doorbell)
	for i, o := range t.order {
		if o == q {
			t.order = append(t.order[:i], t.order[i+1:]...)
			break
		}
	}
	g := q.gang
	for i, o := range g.queues {
		if o == q {
			g.queues = append(g.queues[:i], g.queues[i+1:]...)
			break
		}
	}
	if len(g.queues) == 0 {
		delete(t.gangs, g.ctxAddr)
	}
	p := g.proc
	p.queues--
	if p.queues == 0 {
		delete(t.procs, p.ctxAddr)
		return p
	}
	return nil
}
