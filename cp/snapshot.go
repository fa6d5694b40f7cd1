package cp

import (
	"errors"
	"fmt"
	"time"

	"vgpu/abi"
)

// Snapshots (device/snapshot.go): the CP is paused (no queue goroutine holds an execution
// turn, so none executes a packet), every slot is read at a packet boundary, and a fresh CP
// is given the slots back. A queue MES mapped is saved with its mapping (SlotState.Mapped,
// snapshot_mapped.go) and mapped again by RestoreState; the scheduler's tables say which
// queue it is.

// Snapshot errors.
var (
	// ErrBusy: a queue is not at a packet boundary (it is inside an IB, a DMA_DATA, a shader
	// dispatch, an endless kernel or a retry-fault wait), or the turns were not all given
	// back in time. Try again when the queue is idle, parked or halted.
	ErrBusy = errors.New("cp: snapshot: a queue is not at a packet boundary")
	// ErrNotPaused: SaveSlots without Pause.
	ErrNotPaused = errors.New("cp: snapshot: the CP is not paused")
	// ErrBadSlotState: a saved slot this CP cannot take (user input: every field is checked).
	ErrBadSlotState = errors.New("cp: restore: invalid slot state")
	// ErrNotFresh: RestoreSlots on a CP that already has a queue.
	ErrNotFresh = errors.New("cp: restore: the CP is not in its power-on state")
)

// SlotState is one HQD slot: its registers as programmed and its latest activation.
type SlotState struct {
	// Registers as the driver wrote them (PQ_WPTR as written while inactive).
	VMID, BaseLo, BaseHi, Control                      uint32
	ReportLo, ReportHi, PollLo, PollHi, WptrLo, WptrHi uint32
	Doorbell, PollCntl                                 uint32

	// Queue: the slot has an activation (ACTIVE was set since power-on). Then:
	Queue   bool
	Stopped bool   // ACTIVE reads 0 (dequeued)
	State   uint32 // HQD_STATE_*: RUNNING/WAITING (continues), HALTED (stays halted), IDLE
	// The halt: CP_ERROR_*, ERROR_ADDR, ERROR_INFO (kept until DEQUEUE_RESET).
	ErrCode, ErrInfo uint32
	ErrAddr          uint64
	// Rptr is the position of the next packet (the ring-level position: a parked
	// WAIT_REG_MEM is re-executed after a restore), Wptr the last write pointer delivered,
	// Reported the last rptr written to the report address.
	Rptr, Wptr, Reported uint64
	Fences               uint32
	// Packet state that outlives a packet: SET_SH_REG user data and the dispatch registers.
	UserData                      [abi.SH_COMPUTE_USER_DATA_COUNT]uint32
	PgmLo, PgmHi, PgmSlots, Stack uint32
	Threads, Start                [3]uint32
	IndirectBase                  uint64

	// Mapped: the slot runs a queue MES mapped (Queue is false); Map* are its image
	// (snapshot_mapped.go), with Rptr, Wptr, Reported, Fences and UserData above.
	Mapped                                  bool
	MapVMID, MapControl, MapDoorbellControl uint32
	MapDoorbellOffset, MapIBCount           uint32
	MapPriority                             uint8
	MapBase, MapReportAddr, MapFenceAddr    uint64
	MapCSABase, MapCSASize, MapFenceValue   uint64
}

// State is the whole CP.
type State struct {
	Slots          [NumSlots]SlotState
	Packets, Halts uint64
	EngineResets   uint32
}

// Pause takes every execution turn back: once it returns nil no queue goroutine executes a
// packet until Unpause (doorbells and register writes still arrive; queues wait for a turn).
// It waits up to timeout for the queues holding turns to give them back (a queue gives its
// turn back when idle, parked, or at the next budget check); ErrBusy if they do not.
func (c *CP) Pause(timeout time.Duration) error {
	t := &c.turns
	t.mu.Lock()
	t.paused = true
	t.pausing.Store(true)
	t.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for {
		t.mu.Lock()
		free := t.free
		t.mu.Unlock()
		if free == t.limit {
			return nil
		}
		if time.Now().After(deadline) {
			c.Unpause()
			return fmt.Errorf("%w: %d of %d execution turns still held after %v", ErrBusy, t.limit-free, t.limit, timeout)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// Unpause hands the turns out again, highest priority first.
func (c *CP) Unpause() {
	t := &c.turns
	t.mu.Lock()
	t.paused = false
	t.pausing.Store(false)
	n := min(t.free, len(t.waiting))
	t.free -= n
	t.mu.Unlock()
	for range n {
		t.release() // to the best waiter, or back to the pool if it left meanwhile
	}
}

// SaveState reads every slot; the CP must be paused (the caller also holds the register lock,
// so no HQD register changes under it).
func (c *CP) SaveState() (State, error) {
	var s State
	c.turns.mu.Lock()
	paused := c.turns.paused
	c.turns.mu.Unlock()
	if !paused {
		return s, ErrNotPaused
	}
	for i := range c.hqds {
		if err := c.hqds[i].save(&s.Slots[i]); err != nil {
			return State{}, fmt.Errorf("slot %d: %w", i, err)
		}
	}
	s.Packets, s.Halts = c.packets.Load(), c.halts.Load()
	_, s.EngineResets = c.engineStatus()
	return s, nil
}

func (h *hqd) save(s *SlotState) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	*s = SlotState{VMID: h.vmid, BaseLo: h.baseLo, BaseHi: h.baseHi, Control: h.control,
		ReportLo: h.reportLo, ReportHi: h.reportHi, PollLo: h.pollLo, PollHi: h.pollHi,
		WptrLo: h.wptrLo, WptrHi: h.wptrHi, Doorbell: h.doorbell, PollCntl: h.pollCntl}
	q := h.q.Load()
	if q == nil {
		return nil
	}
	if q.mapped {
		return q.saveMapped(s)
	}
	s.Queue, s.Stopped, s.State = true, q.stopped.Load(), q.state.Load()
	s.ErrCode, s.ErrInfo, s.ErrAddr = q.errCode, q.errInfo, q.errAddr
	s.Wptr, s.Fences = q.wptr.Load(), q.fences.Load()
	s.Rptr = q.rptr.Load()
	if s.Stopped || s.State == abi.HQD_STATE_HALTED {
		return nil // its goroutine has ended or ends without another packet
	}
	if why := q.notAtBoundary(); why != "" {
		return fmt.Errorf("%w: %s", ErrBusy, why)
	}
	// The goroutine waits (asleep, parked or for a turn) and its last writes happened before
	// it gave its turn back, which Pause saw under turns.mu: its private fields are stable.
	s.Rptr, s.Reported = q.streams[0].pos, q.reported
	s.UserData = q.userData
	sh := &q.sh
	s.PgmLo, s.PgmHi, s.PgmSlots, s.Stack = sh.pgmLo, sh.pgmHi, sh.pgmSlots, sh.stack
	s.Threads, s.Start, s.IndirectBase = sh.threads, sh.start, sh.indirectBase
	return nil
}

// notAtBoundary says why a running queue of a paused CP cannot be saved ("" if it can).
func (q *queue) notAtBoundary() string {
	c := q.c
	c.turns.mu.Lock()
	waiting := false
	for _, w := range c.turns.waiting {
		waiting = waiting || w == q
	}
	on := q.waitOn
	c.turns.mu.Unlock()
	idle, parked := q.idleAt.Load() != 0, q.parkedNow.Load()
	switch {
	case q.initFault != nil:
		return "reporting its configuration fault"
	case q.state.Load() == abi.HQD_STATE_BUSY_KERNEL:
		// Checked first: a queue waiting for its dispatches reaps them without a turn, so
		// its private fields are not frozen by the pause (it set BUSY_KERNEL before it gave
		// its turn back, and keeps it until it has one again).
		return "BUSY_KERNEL: shader dispatches in flight or an endless kernel (a register queue has no context save area to save them to)"
	case len(q.runs) > 0 || len(q.restore) > 0:
		return "shader dispatches in flight (a register queue has no context save area to save them to)"
	case q.level != 0:
		return fmt.Sprintf("inside an IB%d", q.level)
	case q.progress != 0 || q.resuming:
		return "inside a DMA_DATA"
	case parked:
		return "" // the WAIT_REG_MEM at the ring position runs again
	case q.state.Load() == abi.HQD_STATE_WAITING:
		return "waiting on a retry fault"
	case idle:
		return ""
	case waiting && on == stopOnDequeue:
		return "" // between packets, waiting for a turn
	}
	return "inside a packet"
}

// RestoreState gives a CP in its power-on state the slots of s: registers as saved; a
// halted queue stays halted with its error; a dequeued one stays inactive; a running one is
// activated with its ring pointers and continues with the packet at Rptr. Every field is
// checked (the state comes from a file); on an error the CP is Reset.
func (c *CP) RestoreState(s *State) error {
	for i := range c.hqds {
		if c.hqds[i].q.Load() != nil || c.hqds[i].alive() != 0 {
			return ErrNotFresh
		}
	}
	for i := range s.Slots {
		err := c.hqds[i].restore(&s.Slots[i])
		if err == nil && s.Slots[i].Mapped {
			err = c.restoreMapped(i, &s.Slots[i])
		}
		if err != nil {
			c.Reset()
			return fmt.Errorf("slot %d: %w", i, err)
		}
	}
	c.packets.Store(s.Packets)
	c.halts.Store(s.Halts)
	c.engMu.Lock()
	c.engResets = s.EngineResets
	c.engMu.Unlock()
	return nil
}

func badSlot(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadSlotState}, args...)...)
}

func (h *hqd) restore(s *SlotState) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.vmid, h.baseLo, h.baseHi, h.control = s.VMID, s.BaseLo, s.BaseHi, s.Control
	h.reportLo, h.reportHi, h.pollLo, h.pollHi = s.ReportLo, s.ReportHi, s.PollLo, s.PollHi
	h.doorbell, h.pollCntl = s.Doorbell, s.PollCntl
	if s.Mapped && s.Queue {
		return badSlot("both a register-activated and a mapped queue")
	}
	if !s.Queue {
		h.wptrLo, h.wptrHi = s.WptrLo, s.WptrHi
		return nil
	}
	running := !s.Stopped && s.State != abi.HQD_STATE_HALTED
	switch {
	case s.Stopped && s.State != abi.HQD_STATE_IDLE:
		return badSlot("a dequeued queue in state %d", s.State)
	case running && s.State != abi.HQD_STATE_RUNNING && s.State != abi.HQD_STATE_WAITING:
		return badSlot("an active queue in state %d", s.State)
	case s.ErrCode > abi.REG_HQD_STATUS__ERROR_MASK>>abi.REG_HQD_STATUS__ERROR__SHIFT:
		return badSlot("error code %d beyond HQD_STATUS.ERROR", s.ErrCode)
	case running && s.ErrCode != 0:
		return badSlot("a running queue with error %d", s.ErrCode)
	}
	prep := func(q *queue) error {
		if q.initFault != nil {
			return badSlot("the saved registers do not activate: %s", q.initFault.why)
		}
		if s.Wptr < s.Rptr || s.Wptr-s.Rptr > q.size {
			return badSlot("wptr %d not in [rptr %d, rptr + ring size %d]", s.Wptr, s.Rptr, q.size)
		}
		q.rptr.Store(s.Rptr)
		q.wptr.Store(s.Wptr)
		q.fences.Store(s.Fences)
		q.streams[0].pos = s.Rptr
		q.reported = s.Reported
		q.userData = s.UserData
		q.sh = shRegs{pgmLo: s.PgmLo, pgmHi: s.PgmHi & 0xFF, pgmSlots: s.PgmSlots & 0x1FFFF,
			threads: s.Threads, start: s.Start, stack: s.Stack & 0x1FFFF, indirectBase: s.IndirectBase}
		for i := range q.sh.threads {
			q.sh.threads[i] &= 0xFFFF
		}
		q.sh.pgm = uint64(q.sh.pgmHi)<<32 | uint64(q.sh.pgmLo)
		return nil
	}
	if running {
		return h.activateWith(prep)
	}
	// Halted or dequeued: no goroutine (a halted queue's has ended after its report); the
	// queue only answers register reads until the driver dequeues or re-activates the slot.
	q := &queue{c: h.c, h: h, mem: h.c.mem, slot: h.slot, ringID: RingID(h.slot), vmid: int(h.vmid),
		prio: registerPriority, wake: make(chan struct{}, 1), grant: make(chan struct{}, 1)}
	qs := h.control & abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE_MASK >> abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT
	q.size = uint64(1) << (min(qs, maxQueueSizeField) + 1)
	q.rptr.Store(s.Rptr)
	q.wptr.Store(s.Wptr)
	q.fences.Store(s.Fences)
	q.state.Store(s.State)
	q.stopped.Store(s.Stopped)
	q.errCode, q.errInfo, q.errAddr = s.ErrCode, s.ErrInfo, s.ErrAddr
	q.done = true
	h.wptrLo, h.wptrHi = s.WptrLo, s.WptrHi
	h.q.Store(q)
	return nil
}
