package cp

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"vgpu/abi"
)

// hqd is one instance of the HQD register block. Its mutex guards the programmed registers
// and the error fields of its queues; it is taken by the register path (with the device's
// register lock held) and, briefly and never across a call out, by the queue goroutine.
type hqd struct {
	c    *CP
	slot int

	mu                                 sync.Mutex
	vmid, baseLo, baseHi, control      uint32
	reportLo, reportHi, pollLo, pollHi uint32
	wptrLo, wptrHi                     uint32 // PQ_WPTR as written while inactive
	doorbell, pollCntl                 uint32

	// q is the latest activation, nil after power-on and reset. Stored under mu; loaded
	// without it by Doorbell, Wake and the queue itself.
	q atomic.Pointer[queue]
	// live holds every activation of this slot whose goroutine has not ended (the current
	// one and revoked ones still finishing), at most MaxLivePerSlot that may be inside a
	// call out (stuck).
	live []*queue
	// spare is a preempted mapped queue whose goroutine, past its last call out, waits for
	// Map to hand it the slot's next mapped queue (mapped.go), or for a reset to end it.
	spare *queue
	// pending is the mapped queue Map handed the spare's goroutine, which has not picked it
	// up yet (an idle one is picked up at its first wake); it is not in live until then.
	pending *queue
	// fresh is a zeroed queue for the slot's next Map (mapped.go: prepareFresh).
	fresh atomic.Pointer[queue]
}

// maxVMID: HQD_VMID must fit the 4-bit VMID fields of IVs and IBs.
const maxVMID = abi.IH_DW0_VMID_MASK >> abi.IH_DW0_VMID__SHIFT

func (h *hqd) read(off uint32) uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.q.Load()
	if q != nil && q.mapped {
		// A mapped queue's configuration came from its image, not from these registers.
		switch off {
		case abi.REG_HQD_VMID:
			return uint32(q.vmid)
		case abi.REG_HQD_PQ_BASE_LO:
			return uint32(q.base)
		case abi.REG_HQD_PQ_BASE_HI:
			return uint32(q.base >> 32)
		case abi.REG_HQD_PQ_CONTROL:
			return q.control
		case abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO:
			return uint32(q.reportAddr)
		case abi.REG_HQD_PQ_RPTR_REPORT_ADDR_HI:
			return uint32(q.reportAddr >> 32)
		case abi.REG_HQD_PQ_DOORBELL_CONTROL:
			return q.doorbellCtl
		case abi.REG_HQD_PQ_WPTR_POLL_ADDR_LO, abi.REG_HQD_PQ_WPTR_POLL_ADDR_HI, abi.REG_HQD_PQ_WPTR_POLL_CNTL:
			return 0 // mapped queues do not poll
		}
	}
	switch off {
	case abi.REG_HQD_ACTIVE:
		if q != nil && !q.stopped.Load() {
			return 1
		}
		return 0
	case abi.REG_HQD_VMID:
		return h.vmid
	case abi.REG_HQD_PQ_BASE_LO:
		return h.baseLo
	case abi.REG_HQD_PQ_BASE_HI:
		return h.baseHi
	case abi.REG_HQD_PQ_CONTROL:
		return h.control
	case abi.REG_HQD_PQ_RPTR:
		if q != nil {
			return uint32(q.rptr.Load() & (q.size - 1))
		}
		return 0
	case abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO:
		return h.reportLo
	case abi.REG_HQD_PQ_RPTR_REPORT_ADDR_HI:
		return h.reportHi
	case abi.REG_HQD_PQ_WPTR_POLL_ADDR_LO:
		return h.pollLo
	case abi.REG_HQD_PQ_WPTR_POLL_ADDR_HI:
		return h.pollHi
	case abi.REG_HQD_PQ_WPTR_LO:
		if q != nil {
			return uint32(q.wptr.Load())
		}
		return h.wptrLo
	case abi.REG_HQD_PQ_WPTR_HI:
		if q != nil {
			return uint32(q.wptr.Load() >> 32)
		}
		return h.wptrHi
	case abi.REG_HQD_PQ_DOORBELL_CONTROL:
		return h.doorbell
	case abi.REG_HQD_PQ_WPTR_POLL_CNTL:
		return h.pollCntl
	case abi.REG_HQD_STATUS:
		if q == nil {
			return abi.HQD_STATE_IDLE
		}
		return q.state.Load()<<abi.REG_HQD_STATUS__STATE__SHIFT&abi.REG_HQD_STATUS__STATE_MASK |
			q.errCode<<abi.REG_HQD_STATUS__ERROR__SHIFT&abi.REG_HQD_STATUS__ERROR_MASK
	case abi.REG_HQD_ERROR_ADDR_LO:
		if q != nil {
			return uint32(q.errAddr)
		}
	case abi.REG_HQD_ERROR_ADDR_HI:
		if q != nil {
			return uint32(q.errAddr >> 32)
		}
	case abi.REG_HQD_ERROR_INFO:
		if q != nil {
			return q.errInfo
		}
	case abi.REG_HQD_FENCES:
		if q != nil {
			return q.fences.Load()
		}
	}
	return 0
}

func (h *hqd) write(off, v uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c.owned.Load()&(1<<h.slot) != 0 {
		h.ignored("HQD register written in a slot MES owns", off)
		return
	}
	q := h.q.Load()
	active := q != nil && !q.stopped.Load()
	switch off {
	case abi.REG_HQD_ACTIVE:
		switch {
		case v&1 != 0 && !active:
			h.activate()
		case v&1 == 0 && active:
			h.ignored("ACTIVE=0 on an active queue (stopping is DEQUEUE_REQUEST's job)", v)
		case v&1 != 0:
			h.ignored("ACTIVE=1 on an active queue", v)
		}
		return
	case abi.REG_HQD_DEQUEUE_REQUEST:
		h.dequeue(q, v)
		return
	case abi.REG_HQD_PQ_WPTR_LO:
		if active {
			q.kick(q.wptr.Load()&^0xffffffff | uint64(v))
		} else {
			h.wptrLo = v
		}
		return
	case abi.REG_HQD_PQ_WPTR_HI:
		if active {
			q.kick(q.wptr.Load()&0xffffffff | uint64(v)<<32)
		} else {
			h.wptrHi = v
		}
		return
	}
	var reg *uint32
	switch off {
	case abi.REG_HQD_VMID:
		reg = &h.vmid
	case abi.REG_HQD_PQ_BASE_LO:
		reg = &h.baseLo
	case abi.REG_HQD_PQ_BASE_HI:
		reg = &h.baseHi
	case abi.REG_HQD_PQ_CONTROL:
		reg = &h.control
	case abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO:
		reg = &h.reportLo
	case abi.REG_HQD_PQ_RPTR_REPORT_ADDR_HI:
		reg = &h.reportHi
	case abi.REG_HQD_PQ_WPTR_POLL_ADDR_LO:
		reg = &h.pollLo
	case abi.REG_HQD_PQ_WPTR_POLL_ADDR_HI:
		reg = &h.pollHi
	case abi.REG_HQD_PQ_DOORBELL_CONTROL:
		reg = &h.doorbell
	case abi.REG_HQD_PQ_WPTR_POLL_CNTL:
		reg = &h.pollCntl
	default:
		return // read-only or unknown: ignored, as the register file does
	}
	if active {
		// The running queue uses the configuration it was started with; a register reads
		// back what is in effect.
		h.ignored("HQD configuration written while the queue is active", off)
		return
	}
	*reg = v
}

func (h *hqd) ignored(what string, v uint32) {
	h.c.ignoredWrites.Add(1)
	h.c.limiter.Log(slog.LevelDebug, logKeyIgnored, "cp: "+what, "slot", h.slot, "value", v)
}

// activate starts a queue with the programmed ring (mu held). An invalid configuration
// halts it at once with CP_ERROR_RING_CONFIG; its goroutine then only reports the halt (the
// register path must not call Interrupts).
func (h *hqd) activate() { _ = h.activateWith(nil) }

// activateWith is activate; prep (snapshot.go) adjusts the new queue before its goroutine
// starts, and its error leaves the slot as it was.
func (h *hqd) activateWith(prep func(*queue) error) error {
	c := h.c
	if c.closed.Load() {
		h.ignored("ACTIVE=1 after Close", 1)
		return ErrClosed
	}
	if h.stuck() >= MaxLivePerSlot {
		// Earlier activations are stuck in call outs (revoked, they cannot act): do not pile
		// up more goroutines behind them.
		c.refusedActivation.Add(1)
		c.limiter.Warn(logKeyRefused, "cp: ACTIVE=1 ignored: earlier activations of the slot are still inside a call out",
			"slot", h.slot, "alive", len(h.live))
		return ErrSlotDraining
	}
	qs := h.control & abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE_MASK >> abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT
	q := &queue{
		c: c, h: h, mem: c.mem, slot: h.slot, ringID: RingID(h.slot), vmid: int(h.vmid), client: abi.VM_CID_CPC,
		prio:         registerPriority,
		base:         uint64(h.baseHi)<<32 | uint64(h.baseLo),
		size:         uint64(1) << (min(qs, maxQueueSizeField) + 1),
		reportAddr:   uint64(h.reportHi)<<32 | uint64(h.reportLo),
		noUpdateRptr: h.control&abi.REG_HQD_PQ_CONTROL__NO_UPDATE_RPTR_MASK != 0,
		pollAddr:     uint64(h.pollHi)<<32 | uint64(h.pollLo),
		pollEn:       h.pollCntl&abi.REG_HQD_PQ_WPTR_POLL_CNTL__EN_MASK != 0,
		doorbellEn:   h.doorbell&abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK != 0,
		doorbellOff:  h.doorbell & abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK >> abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT,
		wake:         make(chan struct{}, 1),
		grant:        make(chan struct{}, 1),
	}
	if h.slot == 0 {
		q.client = abi.VM_CID_CPG
	}
	q.pollInterval = time.Duration(h.pollCntl&abi.REG_HQD_PQ_WPTR_POLL_CNTL__INTERVAL_US_MASK>>abi.REG_HQD_PQ_WPTR_POLL_CNTL__INTERVAL_US__SHIFT) * time.Microsecond
	if q.pollInterval == 0 {
		q.pollInterval = defaultWptrPoll
	}
	q.pollInterval = max(q.pollInterval, minWptrPoll)
	q.state.Store(abi.HQD_STATE_RUNNING)

	var why string
	bad := q.base
	switch {
	case qs < minQueueSizeField || qs > maxQueueSizeField:
		why = fmt.Sprintf("PQ_CONTROL.QUEUE_SIZE %d outside [%d, %d]", qs, minQueueSizeField, maxQueueSizeField)
	case q.base%ringAlign != 0:
		why = "PQ_BASE not 256-byte aligned"
	case q.base >= 1<<abi.GPU_VA_BITS || q.base+q.size*4 > 1<<abi.GPU_VA_BITS:
		why = "ring beyond the 48-bit GPU address space"
	case h.vmid > maxVMID:
		why = fmt.Sprintf("HQD_VMID %d > %d", h.vmid, maxVMID)
	case q.reportAddr%4 != 0:
		why, bad = "PQ_RPTR_REPORT_ADDR not dword aligned", q.reportAddr
	case q.pollEn && q.pollAddr%8 != 0:
		why, bad = "PQ_WPTR_POLL_ADDR not qword aligned", q.pollAddr
	}
	if why != "" {
		// The goroutine reports from this snapshot: a DEQUEUE_RESET may clear the error
		// fields (under mu) before it runs.
		q.initFault = &fault{code: abi.CP_ERROR_RING_CONFIG, why: why}
		q.initAddr, q.initInfo = bad, h.control
		q.state.Store(abi.HQD_STATE_HALTED)
		q.errCode, q.errAddr, q.errInfo = abi.CP_ERROR_RING_CONFIG, bad, h.control
	}
	q.streams[0] = stream{base: q.base, size: q.size, ring: true, vmid: q.vmid}
	if prep != nil {
		if err := prep(q); err != nil {
			return err
		}
	}
	h.wptrLo, h.wptrHi = 0, 0
	if old := h.q.Load(); old != nil {
		old.revoke() // stopped already; its goroutine may still be finishing a halt report
	}
	h.q.Store(q)
	h.live = append(h.live, q)
	c.wg.Add(1)
	go q.run()
	return nil
}

// ended removes a finished activation from live (its goroutine is returning).
func (h *hqd) ended(q *queue) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, l := range h.live {
		if l == q {
			h.live = append(h.live[:i], h.live[i+1:]...)
			return
		}
	}
}

// alive counts this slot's goroutines.
func (h *hqd) alive() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.live)
	if h.spare != nil && !slices.Contains(h.live, h.spare) {
		n++ // a spare goroutine past its activation (mapped.go)
	}
	return n
}

// draining counts this slot's revoked activations that are still inside a turn.
func (h *hqd) draining() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, q := range h.live {
		if q.draining() {
			n++
		}
	}
	return n
}

// dequeue handles DEQUEUE_REQUEST (mu held). A running queue is only flagged and signalled;
// its goroutine stops itself. A halted queue has nothing left to stop and goes idle here.
func (h *hqd) dequeue(q *queue, v uint32) {
	if v != abi.HQD_DEQUEUE_DRAIN && v != abi.HQD_DEQUEUE_RESET {
		h.ignored("unknown DEQUEUE_REQUEST value", v)
		return
	}
	if q == nil {
		return
	}
	if q.mapped {
		// A mapped queue's DRAIN is a preemption (its state is saved), RESET is Kill.
		if v == abi.HQD_DEQUEUE_RESET {
			q.killLocked()
		} else if q.stop == Running {
			q.preempt()
		}
		return
	}
	if q.stopped.Load() || q.state.Load() == abi.HQD_STATE_HALTED {
		q.stopLocked(v == abi.HQD_DEQUEUE_RESET)
		return
	}
	if v == abi.HQD_DEQUEUE_RESET {
		q.stopReq.Store(abi.HQD_DEQUEUE_RESET)
	} else {
		q.stopReq.CompareAndSwap(0, abi.HQD_DEQUEUE_DRAIN)
	}
	q.signal()
}

// reset returns the instance to power-on state and revokes every activation of the slot
// still alive (each stops at once and can no longer call out). It does not wait.
func (h *hqd) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending = nil // never ran: nothing to stop
	if s := h.spare; s != nil {
		h.spare = nil
		s.signal() // it ends (it may also be among live, revoked below)
	}
	for _, q := range h.live {
		q.revoke()
	}
	h.q.Store(nil)
	h.vmid, h.baseLo, h.baseHi, h.control = 0, 0, 0, 0
	h.reportLo, h.reportHi, h.pollLo, h.pollHi = 0, 0, 0, 0
	h.wptrLo, h.wptrHi, h.doorbell, h.pollCntl = 0, 0, 0, 0
}

func (h *hqd) stats() QueueStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.q.Load()
	if q == nil {
		return QueueStats{}
	}
	w := q.wptr.Load()
	return QueueStats{
		Active: !q.stopped.Load(), State: q.state.Load(), Error: q.errCode,
		ErrorAddr: q.errAddr, ErrorInfo: q.errInfo,
		Rptr: q.rptr.Load(), Wptr: w, Fences: q.fences.Load(),
		Idle: q.idleAt.Load() == w+1, // idle for the wptr delivered last, not an older one
	}
}
