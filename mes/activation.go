package mes

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"vgpu/abi"
	"vgpu/engine"
)

// ringConfig is the API ring as programmed when the scheduler started.
type ringConfig struct {
	base       uint64
	sizeField  uint32
	reportAddr uint64
	doorbell   uint32
	wptr       uint64
}

// activation is one run of the scheduler, from RING_ACTIVE = 1 until it is revoked. Its
// goroutine owns every non-atomic field; the register, doorbell and notify paths touch only
// atomics and the small event lists under evMu.
type activation struct {
	m     *MES
	ring  ringConfig
	size  uint64 // ring dwords
	start time.Time

	// Gate: a revoked activation makes no further call out.
	revoked      atomic.Bool
	inflight     atomic.Int64
	drainCounted atomic.Bool // counted in MES.draining (revoked, a call out was in flight)
	stop         chan struct{}
	wake         chan struct{}

	wptr atomic.Uint64 // API ring wptr (monotonic dwords)
	rptr atomic.Uint64 // API ring rptr

	// Events from other goroutines.
	evMu       sync.Mutex
	dbQueued   []*queue // doorbells of queues not in a slot
	dbSpare    []*queue // the goroutine's: dbQueued's other buffer (events)
	pollNow    bool     // an aggregated doorbell: read every unmapped queue's wptr shadow
	slotNotify atomic.Uint32
	pauseReq   atomic.Pointer[pauseReq] // a snapshot's pause (snapshot.go)

	// Published tables for the doorbell and register paths (copy on write by the goroutine).
	byDoorbell atomic.Pointer[map[uint32]*queue]
	aggregated atomic.Pointer[[abi.MES_PRIORITY_LEVELS]uint32]

	// Counters (registers).
	nFrames, nFrameErrors, nMaps, nUnmaps, nUnmappedDBs atomic.Uint32
	nQueues, nMapped, nHung, nProcs                     atomic.Uint32
	lastError, lastErrorRptr                            atomic.Uint32
	frameLog                                            frameHistory // the last frames, for the status (status.go)

	// Goroutine state.
	hw         *hwState // nil until SET_HW_RESOURCES
	cfg        schedConfig
	t          table
	slots      [numSlots]*queue // occupant of each slot
	vmids      [16]*process     // holder of each VMID
	pend       *pending         // the frame in progress (frames complete in order)
	moreFrames bool             // the last pass left frames on the ring
	waitList   []*queue         // queues waiting for a slot, in the order they started (sched.go)
	waitLevels uint32           // bit l: a queue of level l is in waitList
	rescan     bool             // a queue may have got work: the next pass scans every queue
	lastScan   time.Time
	deferring  bool     // the policy owes its MQD and context writes (deferred.go)
	owedQueues []*queue // queues owed writes, in order
	wokeHQD    bool     // a map of this pass gave an HQD work
	log        eventLog
	pollWait   time.Duration // current wptr-poll period (backs off)
	nextPoll   time.Time
	timer      *time.Timer
	timerAt    time.Time // when timer fires (it kicks; past: fired); see sleep
	buf        [abi.MES_API_FRAME_DWORDS * 4]byte
	scratch    [8]byte
	// io is the buffer of the MQD and context reads and writes of a map and an unmap (one
	// at a time: Memory copies): a local array would escape to the heap through Memory.
	io     [abi.MES_CTX_BYTES]byte
	evBuf  [abi.MES_EVENT_BYTES + 4]byte // an event record and the log header (evlog.go)
	mqdBuf []byte
	mqdAll [abi.MES_MQD_DWORDS * 4]byte // a whole MQD (loadMQD)
}

func newActivation(m *MES, rc ringConfig) *activation {
	a := &activation{m: m, ring: rc, start: time.Now(), stop: make(chan struct{}), wake: make(chan struct{}, 1),
		cfg: defaultSchedConfig(), t: newTable(), mqdBuf: make([]byte, hqdBytes)}
	a.size = uint64(1) << (min(rc.sizeField, 30) + 1)
	a.wptr.Store(rc.wptr)
	empty := map[uint32]*queue{}
	a.byDoorbell.Store(&empty)
	a.aggregated.Store(&[abi.MES_PRIORITY_LEVELS]uint32{})
	return a
}

// errRevoked: the activation was revoked; the goroutine ends quietly.
var errRevoked = errors.New("mes: activation revoked")

// enter opens a call out; false when revoked. A call out counts as in flight until leave.
func (a *activation) enter() bool {
	a.inflight.Add(1)
	if a.revoked.Load() {
		a.leave()
		return false
	}
	return true
}

func (a *activation) leave() {
	if a.inflight.Add(-1) == 0 && a.revoked.Load() {
		a.undrain()
	}
}

// undrain uncounts a revoked activation from MES.draining, once.
func (a *activation) undrain() {
	if a.drainCounted.CompareAndSwap(true, false) {
		a.m.draining.Add(-1)
	}
}

// revoke stops the activation: no call out after this returns begins (enter checks revoked
// after counting itself in flight); one in flight is counted in MES.draining until its leave.
func (a *activation) revoke() {
	a.m.slotMu.Lock()
	already := a.revoked.Swap(true)
	a.m.slotMu.Unlock()
	if already {
		return
	}
	a.drainCounted.Store(true)
	a.m.draining.Add(1)
	if a.inflight.Load() == 0 {
		a.undrain()
	}
	close(a.stop)
}

func (a *activation) kick() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *activation) setWptr(w uint64) {
	a.wptr.Store(w)
	a.kick()
}

// doorbell handles a doorbell write (any goroutine, no lock on the mapped path).
func (a *activation) doorbell(dword uint32, value uint64) {
	if a.ring.doorbell&abi.REG_MES_RING_DOORBELL__EN_MASK != 0 &&
		dword == a.ring.doorbell&abi.REG_MES_RING_DOORBELL__OFFSET_MASK>>abi.REG_MES_RING_DOORBELL__OFFSET__SHIFT {
		a.setWptr(value)
		return
	}
	if q := (*a.byDoorbell.Load())[dword]; q != nil {
		q.lastDB.Store(value)
		if q.inSlot.Load() || a.m.cntl.Load()&abi.REG_MES_CNTL__UNMAPPED_DOORBELL_DISABLE_MASK != 0 {
			return
		}
		if !q.dbPending.Swap(true) {
			a.evMu.Lock()
			a.dbQueued = append(a.dbQueued, q)
			a.evMu.Unlock()
		}
		a.kick()
		return
	}
	for _, db := range a.aggregated.Load() {
		if db != 0 && db == dword {
			a.evMu.Lock()
			a.pollNow = true
			a.evMu.Unlock()
			a.kick()
			return
		}
	}
}

func (a *activation) notify(slot int) {
	if slot >= 0 && slot < numSlots {
		a.slotNotify.Or(1 << slot)
		a.kick()
	}
}

// run is the scheduler goroutine.
func (a *activation) run() {
	defer a.m.wg.Done()
	a.timer, a.timerAt = time.AfterFunc(time.Hour, a.kick), time.Now().Add(time.Hour)
	defer a.timer.Stop()
	if reason := a.checkRing(); reason != 0 {
		a.haltRing(reason, "API ring configuration invalid")
		return
	}
	for {
		if a.revoked.Load() {
			return
		}
		a.checkPause()
		now := time.Now()
		a.events(now)
		a.observe(now)
		if !a.frames(now) {
			return // ring halted or revoked
		}
		a.schedule(now)
		a.yieldToHQDs()
		a.payAll() // what the policy deferred (deferred.go)
		a.sleep(now, a.nextDeadline(now))
	}
}

// sleep waits for an event, the stop, or d (from the pass's start, now). The timer is armed
// again only for a deadline earlier than the one it is armed for, or once that one has passed:
// a later one is met by waking at the armed time, whose pass arms the timer anew. Re-arming
// and stopping the timer in every pass cost a sizeable part of a short pass. The timer wakes
// the goroutine as an event does (it kicks): a wait on the timer's channel beside the others
// would put the timer in and out of the runtime's heap at every sleep and wake — the most
// frequent wake-up is a doorbell's or a slot's, and on a switch it is on the new queue's path.
func (a *activation) sleep(now time.Time, d time.Duration) {
	if d <= 0 {
		select {
		case <-a.wake:
		default:
		}
		return
	}
	if at := now.Add(d); a.timerAt.IsZero() || !now.Before(a.timerAt) || at.Before(a.timerAt) {
		a.timer.Reset(d)
		a.timerAt = at
	}
	select {
	case <-a.wake:
	case <-a.stop:
	}
}

// checkRing validates the API ring as an HQD's.
func (a *activation) checkRing() uint32 {
	r := a.ring
	switch {
	case r.sizeField < 6 || r.sizeField > abi.CP_QUEUE_SIZE_MAX:
		return abi.MES_ERR_RING_CONFIG
	case r.base%256 != 0 || r.base >= 1<<abi.GPU_VA_BITS || r.base+a.size*4 > 1<<abi.GPU_VA_BITS:
		return abi.MES_ERR_RING_CONFIG
	case r.reportAddr%4 != 0:
		return abi.MES_ERR_RING_CONFIG
	}
	return 0
}

// haltRing stops the scheduler for good, as firmware that crashed: the registers show HALTED
// (until RING_ACTIVE = 0), and the queues it placed are stopped.
func (a *activation) haltRing(reason uint32, why string) {
	a.m.limiter.Warn(logKeyRing, "mes: API ring halted", "error", abi.NameOf("MES_ERR_", uint64(reason)), "why", why)
	a.m.halted(a, reason)
	pos := a.rptr.Load()
	a.event(abi.MES_EVT_FRAME_ERROR, reason, noSlot, 0, 0xFF, pos, 0)
	a.push(engine.IV{Client: abi.IH_CLIENT_GRBM_CP, Source: abi.IH_SRC_MES_ERROR,
		Data: [4]uint32{reason, 0xFF, uint32(pos % a.size), 0}})
	a.m.slotMu.Lock()
	a.revoked.Store(true)
	a.m.slotMu.Unlock()
	a.stopAll()
}

// stopAll kills whatever runs in the slots the scheduler owns and gives them back to the
// kernel. It is called after the activation was revoked (so no Map can follow), from the
// register path or the goroutine; Slots calls never block.
func (a *activation) stopAll() {
	a.m.slotMu.Lock()
	defer a.m.slotMu.Unlock()
	owned := a.m.ownedMask.Swap(0)
	for s := 0; s < numSlots; s++ {
		if owned&(1<<s) != 0 {
			a.m.cfg.Slots.Kill(s)
			a.m.cfg.Slots.Release(s)
		}
	}
	a.m.cfg.Slots.SetOwned(0)
}

// slots runs f on the Slots unless the activation is revoked (then false): a revoked
// activation never places, preempts or kills a queue again.
func (a *activation) slotsDo(f func(s Slots)) bool {
	a.m.slotMu.Lock()
	defer a.m.slotMu.Unlock()
	if a.revoked.Load() {
		return false
	}
	f(a.m.cfg.Slots)
	return true
}

// access is the scheduler's memory access descriptor: VMID 0, bypassing L2 (firmware reads
// and writes are coherent).
var access = engine.Access{VMID: 0, Slot: -1, Bypass: true, Client: abi.VM_CID_CPC}

func (a *activation) read(va uint64, p []byte) error {
	if !a.enter() {
		return errRevoked
	}
	defer a.leave()
	return a.m.cfg.Memory.Read(access, va, p)
}

func (a *activation) write(va uint64, p []byte) error {
	if !a.enter() {
		return errRevoked
	}
	defer a.leave()
	return a.m.cfg.Memory.Write(access, va, p)
}

func (a *activation) push(iv engine.IV) {
	if !a.enter() {
		return
	}
	defer a.leave()
	a.m.cfg.Interrupts.Push(iv)
}

// ns is the scheduler's clock: nanoseconds since it started.
func (a *activation) ns(now time.Time) uint64 { return uint64(now.Sub(a.start)) }
