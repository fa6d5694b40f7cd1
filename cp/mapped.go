package cp

import (
	"errors"
	"fmt"
	"sync"

	"vgpu/abi"
)

// IBState is an indirect buffer in flight.
type IBState struct {
	Base      uint64 // GPU address
	Size, Pos uint64 // dwords; Pos = next dword to execute
	VMID      int    // address space it is fetched from / its packets use
}

// ExecState is what a queue needs beyond its ring pointers to continue exactly where it
// stopped.
type ExecState struct {
	Level    int                 // 0 ring, 1 IB1, 2 IB2: the stream the next packet comes from
	IB       [IBMaxDepth]IBState // IB[0] = IB1, IB[1] = IB2 (valid up to Level)
	IBCount  int                 // IB starts since the last ring-level INDIRECT_BUFFER
	UserData [abi.SH_COMPUTE_USER_DATA_COUNT]uint32
	// Progress is how many bytes of the interrupted DMA_DATA (the packet at the current
	// stream's position) are done; 0: none.
	Progress uint64
	// WaitWritten: the interrupted WAIT_REG_MEM OPERATION 1 already wrote its reference.
	WaitWritten bool
	Fence       uint64 // last value PROTECTED_FENCE_SIGNAL wrote
	// Dispatches are the shader dispatches a preemption stopped mid-shader, oldest first
	// (shader_save.go): a Map restarts them from the context save area before the next
	// packet. At most MaxSavedDispatches.
	Dispatches []SavedDispatch
}

// SavedDispatch is what a Map needs to continue a preempted shader dispatch, besides the
// work-items' state in the context save area (compute.Saved, abi.SHADER_CSA_*). It is kept
// by the scheduler (host memory); only the CSA part is guest memory, checked on restore.
type SavedDispatch struct {
	Program  uint64   // COMPUTE_PGM (a GPU address in VMID)
	Slots    uint32   // its instruction slots (COMPUTE_PGM_RSRC1)
	CodeHash [32]byte // SHA-256 of the program's bytes: a changed program is refused
	// NoHash: the state was continued from a removed queue's record, which carries no hash
	// (mes/continued.go): the program is taken as it is now.
	NoHash    bool
	Groups    [3]uint32
	GroupSize [3]uint32
	Start     [3]uint32
	Stack     uint32 // COMPUTE_TMPRING_SIZE (0: abi.SHADER_STACK_DEFAULT)
	Args      uint64 // COMPUTE_USER_DATA_0/1
	VMID      int    // the address space it ran in (a process queue's: the image's VMID on Map)
	// CSAOffset and CSABytes are where its compute.Saved is, from Image.CSABase.
	CSAOffset, CSABytes uint64
}

// Image is a queue as a slot runs it: its ring configuration and execution state.
type Image struct {
	VMID            int
	Base            uint64 // ring GPU address
	Control         uint32 // as HQD_PQ_CONTROL (QUEUE_SIZE, NO_UPDATE_RPTR)
	ReportAddr      uint64 // rptr report (0: none)
	DoorbellControl uint32 // as HQD_PQ_DOORBELL_CONTROL
	// FenceAddr is the protected fence's GPU address in VMID (0: PROTECTED_FENCE_SIGNAL is
	// CP_ERROR_BAD_PACKET).
	FenceAddr uint64
	// DoorbellOffset is reported in the protected fence's EOP IV (DW4); usually
	// DoorbellControl's offset.
	DoorbellOffset uint32
	Rptr, Wptr     uint64 // monotonic dwords (Rptr ≤ Wptr ≤ Rptr + ring size)
	// Priority orders the queue's claim on execution turns (a MES_PRIORITY_* level: MES
	// passes the gang's): a higher one is granted the next turn first and is not made to
	// yield to lower ones. Register-activated queues have registerPriority.
	Priority uint8
	Exec     ExecState
	// CSABase and CSASize are the queue's context save area (the MQD's
	// CP_HQD_CTX_SAVE_BASE_ADDR and CP_HQD_CTX_SAVE_SIZE), a GPU address in VMID: a
	// preemption writes the state of the dispatches in flight there (0 bytes: a preemption
	// with a dispatch in flight halts with CP_ERROR_CONTEXT_SAVE).
	CSABase, CSASize uint64
	// Filled by Saved for a queue that halted: its CP_ERROR_* and error address (0
	// otherwise). Map of an image with Error != 0 is refused.
	Error     uint32
	ErrorAddr uint64
}

// StopState is what became of a mapped queue (Saved).
type StopState uint8

const (
	Running   StopState = iota // still running (or preempting)
	Preempted                  // stopped at a preemption point; Saved's image continues it
	Halted                     // stopped by an error (Image.Error); the image points at the bad packet
	Killed                     // stopped by Kill (or DEQUEUE_RESET, or a DEQUEUE_RESET-like stop): nothing to continue
	Empty                      // no mapped queue in the slot
)

func (s StopState) String() string {
	switch s {
	case Running:
		return "running"
	case Preempted:
		return "preempted"
	case Halted:
		return "halted"
	case Killed:
		return "killed"
	case Empty:
		return "empty"
	}
	return fmt.Sprintf("stopstate(%d)", uint8(s))
}

// Map's errors. A refused image is ErrBadImage wrapped with the reason.
var (
	ErrBadSlot      = errors.New("cp: map: slot out of range")
	ErrSlotBusy     = errors.New("cp: map: the slot has a live or unreleased queue")
	ErrSlotDraining = errors.New("cp: map: earlier activations of the slot are still inside a call out")
	ErrClosed       = errors.New("cp: map: the CP is closed")
	ErrBadImage     = errors.New("cp: map: invalid queue image")
)

// registerPriority is the turn priority of register-activated (kernel) queues: NORMAL, so
// user queues MES places at HIGH or REALTIME go before them and LOW ones after.
const registerPriority = abi.MES_PRIORITY_NORMAL

// stopPreempt is the stopReq value of a preemption (beside HQD_DEQUEUE_DRAIN/RESET): like a
// drain it stops at the next packet boundary, but the IB stack is kept, and it also stops a
// parked wait, a retry-fault wait and a DMA_DATA between chunks.
const stopPreempt = 0x100

// noOpcode stands for a type-2 packet in resume.
const noOpcode = ^uint32(0)

func badImage(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadImage}, args...)...)
}

// checkImage validates img as ACTIVE=1 validates the HQD registers, plus the execution
// state: everything a later Map could be handed is bounded here, so a bad image is a named
// error and never a panic or an unbounded queue.
func (c *CP) checkImage(img *Image) error {
	qs := img.Control & abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE_MASK >> abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT
	if qs < minQueueSizeField || qs > maxQueueSizeField {
		return badImage("QUEUE_SIZE %d outside [%d, %d]", qs, minQueueSizeField, maxQueueSizeField)
	}
	size := uint64(1) << (qs + 1)
	e := &img.Exec
	switch {
	case img.Error != 0:
		return badImage("the queue halted (error %s)", errorName(img.Error))
	case img.Priority >= abi.MES_PRIORITY_LEVELS:
		return badImage("priority %d outside [0, %d)", img.Priority, abi.MES_PRIORITY_LEVELS)
	case img.VMID < 0 || img.VMID > maxVMID:
		return badImage("VMID %d outside [0, %d]", img.VMID, maxVMID)
	case img.Base%ringAlign != 0:
		return badImage("ring base %#x not 256-byte aligned", img.Base)
	case img.Base >= 1<<abi.GPU_VA_BITS || img.Base+size*4 > 1<<abi.GPU_VA_BITS:
		return badImage("ring beyond the 48-bit GPU address space")
	case img.ReportAddr%4 != 0:
		return badImage("rptr report address %#x not dword aligned", img.ReportAddr)
	case img.FenceAddr%8 != 0:
		return badImage("protected fence address %#x not qword aligned", img.FenceAddr)
	case img.Wptr < img.Rptr || img.Wptr-img.Rptr > size:
		return badImage("wptr %d not in [rptr %d, rptr + ring size %d]", img.Wptr, img.Rptr, size)
	case e.Level < 0 || e.Level > IBMaxDepth:
		return badImage("IB level %d outside [0, %d]", e.Level, IBMaxDepth)
	case e.IBCount < 0 || e.IBCount > c.maxIB:
		return badImage("IB count %d outside [0, %d]", e.IBCount, c.maxIB)
	case e.Progress%4 != 0 || e.Progress > abi.PM4_DMA_DATA_BYTE_COUNT_MASK:
		return badImage("DMA progress %d not a dword count below the largest DMA_DATA", e.Progress)
	}
	parent := img.VMID
	for i := 0; i < e.Level; i++ {
		ib := &e.IB[i]
		switch {
		case ib.Base%4 != 0:
			return badImage("IB%d base %#x not dword aligned", i+1, ib.Base)
		case ib.Size > abi.PM4_IB_SIZE_MASK:
			return badImage("IB%d size %d beyond the IB_SIZE field", i+1, ib.Size)
		case ib.Pos > ib.Size:
			return badImage("IB%d position %d past its size %d", i+1, ib.Pos, ib.Size)
		case overflows(ib.Base, ib.Size*4):
			return badImage("IB%d wraps the address space", i+1)
		case ib.VMID < 0 || ib.VMID > maxVMID:
			return badImage("IB%d VMID %d outside [0, %d]", i+1, ib.VMID, maxVMID)
		case parent != 0 && ib.VMID != parent:
			// As INDIRECT_BUFFER: a process stream never leaves its address space.
			return badImage("IB%d VMID %d in a VMID %d stream", i+1, ib.VMID, parent)
		}
		parent = ib.VMID
	}
	if err := checkSavedDispatches(img); err != nil {
		return err
	}
	if e.Progress != 0 || e.WaitWritten {
		// They belong to the packet at the current position: there must be one.
		if e.Level == 0 && img.Rptr == img.Wptr || e.Level > 0 && e.IB[e.Level-1].Pos == e.IB[e.Level-1].Size {
			return badImage("DMA progress or a written wait without a packet at the position")
		}
	}
	return nil
}

// Map starts slot from img (a queue Saved stopped, possibly in another slot, or a new one).
// The slot must have no live queue and no unreleased mapped one (ErrSlotBusy); the image is
// validated as ACTIVE=1 validates the ring, plus its execution state (ErrBadImage with the
// reason; the slot stays as it was). It never blocks and never calls Memory: the queue's
// goroutine does the work. Mapped queues do not poll a wptr (Kick and doorbells deliver it).
func (c *CP) Map(slot int, img Image) error {
	if slot < 0 || slot >= NumSlots {
		return ErrBadSlot
	}
	if err := c.checkImage(&img); err != nil {
		return err
	}
	h := &c.hqds[slot]
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.closed.Load() {
		return ErrClosed
	}
	if old := h.q.Load(); old != nil && (old.mapped || !old.stopped.Load()) {
		return ErrSlotBusy
	}
	if h.stuck() >= MaxLivePerSlot {
		c.refusedActivation.Add(1)
		return ErrSlotDraining
	}
	qs := img.Control & abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE_MASK >> abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT
	q := h.takeFresh()
	q.c, q.h, q.mem, q.slot, q.ringID, q.vmid, q.client = c, h, c.mem, slot, RingID(slot), img.VMID, abi.VM_CID_CPC
	q.base, q.size, q.reportAddr = img.Base, uint64(1)<<(qs+1), img.ReportAddr
	q.noUpdateRptr = img.Control&abi.REG_HQD_PQ_CONTROL__NO_UPDATE_RPTR_MASK != 0
	q.doorbellEn = img.DoorbellControl&abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK != 0
	q.doorbellOff = img.DoorbellControl & abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK >> abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT
	q.mapped, q.control, q.doorbellCtl, q.prio = true, img.Control, img.DoorbellControl, img.Priority
	q.fenceAddr, q.fenceDoorbell = img.FenceAddr, img.DoorbellOffset
	spare := h.spare
	if spare != nil {
		// The spare's goroutine will run q: q takes over its channels. A stray wake meant
		// for the spare (a stale pointer's signal) is only a hint to q, and the spare is in
		// no turn queue, so no grant is in flight.
		q.wake, q.grant = spare.wake, spare.grant
	} else {
		q.wake, q.grant = make(chan struct{}, 1), make(chan struct{}, 1)
	}
	if slot == 0 {
		q.client = abi.VM_CID_CPG
	}
	q.state.Store(abi.HQD_STATE_RUNNING)
	q.wptr.Store(img.Wptr)
	q.rptr.Store(img.Rptr)
	q.reported = img.Rptr
	q.streams[0] = stream{base: q.base, size: q.size, ring: true, vmid: q.vmid, pos: img.Rptr}
	e := &img.Exec
	for i := 0; i < e.Level; i++ {
		ib := &e.IB[i]
		q.streams[i+1] = stream{base: ib.Base, size: ib.Size, vmid: ib.VMID, pos: ib.Pos, end: ib.Size}
	}
	q.level, q.ibCount, q.userData = e.Level, e.IBCount, e.UserData
	q.progress, q.waitWritten, q.fenceValue = e.Progress, e.WaitWritten, e.Fence
	q.resuming = e.Progress != 0 || e.WaitWritten
	q.csaBase, q.csaSize = img.CSABase, img.CSASize
	q.restore = append([]SavedDispatch(nil), e.Dispatches...)
	for i := range q.restore {
		if img.VMID != 0 {
			q.restore[i].VMID = img.VMID // a process stream never leaves its address space
		}
	}
	if old := h.q.Load(); old != nil {
		old.revoke() // a stopped register queue; its goroutine may still be finishing
	}
	h.q.Store(q)
	if e.Progress == 0 && !e.WaitWritten && img.Rptr == img.Wptr && len(e.Dispatches) == 0 {
		// Idle: it starts as if its goroutine had gone to sleep, so neither a switch to it
		// nor a Preempt of it needs that goroutine to run (and Notify reports no idleness).
		q.asleep.Store(asleepIdle)
		q.idleAt.Store(img.Wptr + 1)
	}
	if spare != nil {
		// The goroutine of the queue preempted here runs this one (awaitNext): no goroutine
		// to start, none to end. An idle queue needs no wake: its first kick (or stop) wakes
		// the goroutine. It replaces a pending one that never ran (it was preempted, or
		// killed, and released: nothing of it is left to run).
		h.pending = q
		if q.asleep.Load() == 0 {
			spare.signal()
		}
		return nil
	}
	h.live = append(h.live, q)
	c.wg.Add(1)
	go q.run()
	return nil
}

// takeFresh returns a zeroed queue for Map: the one prepareFresh made, else a new one.
func (h *hqd) takeFresh() *queue {
	if q := h.fresh.Swap(nil); q != nil {
		return q
	}
	return new(queue)
}

// prepareFresh makes the zeroed queue the slot's next Map takes (a mapped queue calls it when
// it goes idle, on its own goroutine): a queue is some 1.6 KiB, and a switch should not
// allocate and clear it between the unmap and the new queue's start. A fresh queue is never
// reused: stale pointers to an old one (a Doorbell that loaded it before Release) read its
// immutable fields without a lock.
func (h *hqd) prepareFresh() {
	if h.fresh.Load() == nil {
		h.fresh.CompareAndSwap(nil, new(queue))
	}
}

// stuck counts the slot's goroutines that may still be inside (or make) a call out (mu
// held): MaxLivePerSlot bounds those. A mapped queue whose stop was saved is past its last
// one and exits on its own, so fast switches do not count against the bound.
func (h *hqd) stuck() int {
	n := 0
	for _, q := range h.live {
		if !q.done {
			n++
		}
	}
	return n
}

// mappedQueue returns slot's queue if Map started it and Release has not forgotten it.
func (c *CP) mappedQueue(slot int) *queue {
	if slot < 0 || slot >= NumSlots {
		return nil
	}
	if q := c.hqds[slot].q.Load(); q != nil && q.mapped {
		return q
	}
	return nil
}

// Preempt asks slot's mapped queue to stop at its next preemption point: a packet boundary
// at any IB level, a parked WAIT_REG_MEM, a retry-fault wait, between DMA_DATA chunks, while
// waiting for a turn or idle. Shader dispatches in flight stop between instructions and are
// saved to the queue's context save area (shader_save.go); the endless built-in kernel never
// stops (only Kill stops it). Non-blocking and idempotent; Notify reports the stop.
func (c *CP) Preempt(slot int) {
	q := c.mappedQueue(slot)
	if q == nil {
		return
	}
	q.stopReq.CompareAndSwap(0, stopPreempt)
	if q.asleep.Load() == asleepIdle {
		// Idle: nothing runs, so the stop is taken here and Saved has it at once. The
		// goroutine is not woken: it becomes the slot's spare, which the next Map of the
		// slot hands its queue (a reset ends it).
		h := q.h
		h.mu.Lock()
		taken := q.stop == Running && q.stopReq.Load() == stopPreempt && q.asleep.CompareAndSwap(asleepIdle, asleepTaken)
		if taken {
			q.saveLocked()
			if h.pending == q {
				h.pending = nil // it never ran: the spare goroutine is still the slot's
			} else {
				h.spare = q // its goroutine, asleep, becomes the spare
			}
		}
		h.mu.Unlock()
		if taken {
			return
		}
	}
	q.signal()
}

// preempt asks q to stop at its next preemption point (h.mu may be held).
func (q *queue) preempt() {
	q.stopReq.CompareAndSwap(0, stopPreempt)
	q.signal()
}

// An idle mapped queue's goroutine publishes its execution state by asleep = asleepIdle
// (an atomic store after its last change to it), so Preempt may save it from outside by
// moving asleep to asleepTaken; a goroutine that wakes and cannot move it back to 0 has been
// saved and only ends.
const (
	asleepIdle  = 1
	asleepTaken = 2
)

// sleepMapped is sleep for a mapped queue (no wptr polling) after it set asleep. false:
// Preempt saved it (the goroutine then ends the activation and waits as the slot's spare).
func (q *queue) sleepMapped() bool {
	q.h.prepareFresh()
	if q.stopReq.Load() == 0 { // else a stop came before asleep was set: do not wait for it
		<-q.wake
	}
	return q.asleep.CompareAndSwap(asleepIdle, 0)
}

// awaitNext is the goroutine after an activation: a mapped queue that is its slot's spare
// (preempted; it has made its last call out) waits for Map to hand it the slot's next mapped
// queue, which it returns; nil (not the spare, or a reset or Close took that away): the
// goroutine ends. Its wake channel is the next queue's too, so a wake meant for the old
// queue is only a hint to the new one.
func (q *queue) awaitNext() *queue {
	if !q.mapped {
		return nil
	}
	h := q.h
	for {
		h.mu.Lock()
		if h.spare != q { // a reset or Close
			h.mu.Unlock()
			return nil
		}
		if next := h.pending; next != nil {
			h.spare, h.pending = nil, nil
			h.live = append(h.live, next)
			h.mu.Unlock()
			return next
		}
		h.mu.Unlock()
		<-q.wake // a stray wake (a doorbell that raced the stop): still the spare
	}
}

// Saved returns the image to continue slot's mapped queue from, once its goroutine has
// stopped (Preempted, or Halted with Image.Error set; Killed: the ring configuration and
// published pointers only), Running while it has not, Empty without a mapped queue.
func (c *CP) Saved(slot int) (Image, StopState) {
	if slot < 0 || slot >= NumSlots {
		return Image{}, Empty
	}
	h := &c.hqds[slot]
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.q.Load()
	if q == nil || !q.mapped {
		return Image{}, Empty
	}
	if q.stop == Running {
		return Image{}, Running
	}
	return q.saved, q.stop
}

// Kill stops slot's mapped queue now, as DEQUEUE_RESET (the endless kernel too): its
// activation is revoked — it can make no further call out — and Saved reports Killed at
// once. Non-blocking; a queue already stopped is left as it is.
func (c *CP) Kill(slot int) {
	if slot < 0 || slot >= NumSlots {
		return
	}
	h := &c.hqds[slot]
	h.mu.Lock()
	defer h.mu.Unlock()
	if q := h.q.Load(); q != nil && q.mapped {
		q.killLocked()
	}
}

// killLocked stops a running mapped queue for good (h.mu held).
func (q *queue) killLocked() {
	if q.stop != Running {
		return
	}
	q.revoke()
	q.saved = q.configImage()
	q.saved.Rptr = q.rptr.Load() // the goroutine's own state is private to it
	q.stop = Killed
	q.stopLocked(true)
}

// Release forgets slot's stopped mapped queue: the slot is Empty again (ACTIVE reads 0, the
// HQD registers read what the register path programmed) and may be mapped. A running queue
// is not released (Preempt or Kill it first). A stopped queue has made its last call out
// (or was revoked by Kill); its goroutine, if it is the slot's spare, stays for the next Map.
func (c *CP) Release(slot int) {
	if slot < 0 || slot >= NumSlots {
		return
	}
	h := &c.hqds[slot]
	h.mu.Lock()
	defer h.mu.Unlock()
	if q := h.q.Load(); q != nil && q.mapped && q.stop != Running {
		if !q.done {
			q.revoke() // not reached (a stop is saved or killed): only to be sure it never acts
		}
		h.q.Store(nil)
	}
}

// Kick delivers a write pointer to slot's mapped queue: its wptr becomes max(current, wptr)
// (monotonic dwords) and it is woken. It takes no lock and never blocks.
func (c *CP) Kick(slot int, wptr uint64) {
	if q := c.mappedQueue(slot); q != nil && !q.stopped.Load() {
		q.kick(wptr)
	}
}

// SetOwned says which slots belong to MES (bit s: slot s): HQD register writes to them from
// the register path (the driver's MMIO, packets through the register file) are ignored and
// counted in Stats.IgnoredWrites; reads still show the live queue. Reset clears it.
func (c *CP) SetOwned(mask uint32) { c.owned.Store(mask & (1<<NumSlots - 1)) }

// configImage is q's ring configuration as an Image (no execution state).
func (q *queue) configImage() Image {
	return Image{
		VMID: q.vmid, Base: q.base, Control: q.control, ReportAddr: q.reportAddr,
		DoorbellControl: q.doorbellCtl, FenceAddr: q.fenceAddr, DoorbellOffset: q.fenceDoorbell,
		Wptr: q.wptr.Load(), Priority: q.prio,
	}
}

// saveLocked records how a mapped queue's goroutine ended (h.mu held; from exit, on the
// goroutine, so the execution state is its own): Halted with the error, Killed by a reset
// request or a revocation, else Preempted. ACTIVE then reads 0, except for a halted queue,
// which shows HALTED until Release, as a register-activated one does until DEQUEUE_RESET.
func (q *queue) saveLocked() {
	q.done = true // called from exit, or by Preempt on an idle queue: no call out follows
	if q.stop != Running {
		return // Kill got there first
	}
	req := q.stopReq.Load()
	switch {
	case q.state.Load() == abi.HQD_STATE_HALTED:
		q.stop = Halted
	case req == stopPreempt:
		q.stop = Preempted
		q.stopLocked(false)
	default: // a reset request or a revocation
		q.stop = Killed
		q.stopLocked(true)
	}
	// stopped was set before wptr is read: a doorbell that raced the stop is either in the
	// image or sees stopped and counts as a miss (Doorbell).
	img := q.configImage()
	if q.stop == Killed {
		img.Rptr = q.streams[0].pos
		q.saved = img
		return
	}
	img.Rptr = q.streams[0].pos
	e := &img.Exec
	e.Level, e.IBCount, e.UserData = q.level, q.ibCount, q.userData
	for i := 0; i < q.level; i++ {
		s := &q.streams[i+1]
		e.IB[i] = IBState{Base: s.base, Size: s.size, Pos: s.pos, VMID: s.vmid}
	}
	e.Progress, e.WaitWritten, e.Fence = q.progress, q.waitWritten, q.fenceValue
	e.Dispatches = q.savedRuns
	if len(q.restore) > 0 {
		// Stopped before it restored its image's dispatches (a stop right after Map): they
		// are still to run, before anything this activation saved (nothing: they come first).
		e.Dispatches = append(append([]SavedDispatch(nil), q.restore...), q.savedRuns...)
	}
	img.CSABase, img.CSASize = q.csaBase, q.csaSize
	if q.stop == Halted {
		img.Error, img.ErrorAddr = q.errCode, q.errAddr
	}
	q.saved = img
}

// stopLevel is the IB level a stop leaves: a drain (register queues) returns to the ring; a
// preemption keeps the IB stack, which Saved's image resumes.
func (q *queue) stopLevel() {
	if q.stopReq.Load() != stopPreempt {
		q.level = 0
	}
}

// resume applies the saved per-packet state to the first packet a mapped queue executes
// (op; noOpcode for a type-2 packet): a DMA progress belongs to a DMA_DATA only (anything
// else is a corrupt image: CP_ERROR_BAD_PACKET), a written reference to a WAIT_REG_MEM only
// (else it is dropped).
func (q *queue) resume(op uint32) error {
	q.resuming = false
	if op != abi.PM4_IT_WAIT_REG_MEM {
		q.waitWritten = false
	}
	if q.progress != 0 && op != abi.PM4_IT_DMA_DATA {
		q.progress = 0
		return badPacket("saved DMA progress for a packet that is not DMA_DATA")
	}
	return nil
}

// notify tells the scheduler about a mapped queue (stopped, idle, parked). It holds no lock
// and no turn when called.
func (q *queue) notify() {
	if q.mapped && q.c.notifyFn != nil {
		q.c.notifyFn(q.slot)
	}
}

// Fetch buffers and DMA chunk buffers outlive the queues that used them: a switch between
// mapped queues starts a goroutine, and should not also allocate and zero 68 KiB.
type bufPools struct {
	fetch, chunk sync.Pool // *[fetchChunkDwords * 4]byte, *[dmaChunkBytes]byte
}

// getBuf returns a fetch buffer of at least n bytes (old is replaced; pooled if standard).
func (c *CP) getBuf(old []byte, n uint64) []byte {
	if cap(old) == fetchChunkDwords*4 {
		c.pools.fetch.Put((*[fetchChunkDwords * 4]byte)(old[:fetchChunkDwords*4]))
	}
	if n == fetchChunkDwords*4 {
		if b, ok := c.pools.fetch.Get().(*[fetchChunkDwords * 4]byte); ok {
			return b[:]
		}
	}
	return make([]byte, n)
}

func (c *CP) getChunk() []byte {
	if b, ok := c.pools.chunk.Get().(*[dmaChunkBytes]byte); ok {
		return b[:]
	}
	return make([]byte, dmaChunkBytes)
}

// putBufs gives an ending queue's buffers back (its goroutine no longer touches them).
func (c *CP) putBufs(q *queue) {
	for i := range q.streams {
		if b := q.streams[i].buf; cap(b) == fetchChunkDwords*4 {
			c.pools.fetch.Put((*[fetchChunkDwords * 4]byte)(b[:fetchChunkDwords*4]))
		}
		q.streams[i].buf = nil
	}
	if q.chunk != nil {
		c.pools.chunk.Put((*[dmaChunkBytes]byte)(q.chunk))
		q.chunk = nil
	}
}
