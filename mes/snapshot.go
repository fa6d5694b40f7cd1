package mes

import (
	"errors"
	"fmt"
	"time"

	"vgpu/abi"
)

// Snapshots (device/snapshot.go). An idle scheduler is its registers. A running one is saved
// between frames, with no frame in progress: Pause parks the firmware goroutine at the top of
// its loop, and SaveState reads what it keeps — ring pointers, hardware resources, scheduling
// configuration, the event log's place, the frame counters, and its tables of processes,
// gangs and queues (snapshot_tables.go). A queue on its way out of a slot, a frame in
// progress and doorbells not yet taken in are waited for (ErrPause); a halted scheduler is
// refused (ErrActive).

// Snapshot errors.
var (
	// ErrActive: the scheduler has halted, or was not paused.
	ErrActive = errors.New("mes: snapshot: the scheduler has halted or is not paused")
	// ErrPause: the firmware goroutine did not reach the top of its loop in time, or paused
	// with a frame in progress: try again.
	ErrPause = errors.New("mes: snapshot: the scheduler did not pause")
	// ErrBadState: a saved scheduler this one cannot take (the state is user input).
	ErrBadState = errors.New("mes: restore: invalid scheduler state")
	errClosed   = errors.New("mes: closed")
)

// State is the MES block: the registers, Running's firmware state and its Tables (encoded
// by MarshalBinary, decoded by DecodeState).
type State struct {
	Registers
	Running RunningState
	Tables  Tables
}

// Registers are the ring registers as programmed (an idle scheduler starts from them at
// RING_ACTIVE = 1), MES_CNTL and the query doorbell.
type Registers struct {
	BaseLo, BaseHi, Control, ReportLo, ReportHi uint32
	WptrLo, WptrHi, Doorbell, QueryDoorbell     uint32
	Cntl                                        uint32
}

// RunningState is a running scheduler's firmware state beside its tables.
type RunningState struct {
	Active     bool
	Rptr, Wptr uint64
	// SET_HW_RESOURCES (HW false: not received yet).
	HW           bool
	VMIDs, Owned uint32
	Aggregated   [abi.MES_PRIORITY_LEVELS]uint32
	PollNs       int64
	// SET_SCHEDULING_CONFIG, in nanoseconds.
	PreemptGraceNs, IdleGraceNs, ProcQuantumNs [abi.MES_PRIORITY_LEVELS]int64
	YieldPercent                               uint32
	// The event log (MISC SET_LOG_BUFFER): where and how many records were written.
	LogAddr, LogEntries, LogN uint64
	// The counter registers.
	Frames, FrameErrors, Maps, Unmaps, UnmappedDoorbells, LastError, LastErrorRptr uint32
}

// pauseReq parks the firmware goroutine: it closes parked and waits for resume.
type pauseReq struct{ parked, resume chan struct{} }

// checkPause is called by the goroutine at the top of its loop.
func (a *activation) checkPause() {
	p := a.pauseReq.Swap(nil)
	if p == nil {
		return
	}
	close(p.parked)
	select {
	case <-p.resume:
	case <-a.stop:
	}
}

// Pause parks the running scheduler's goroutine between frames (nothing to do when it is
// off) and returns the function that lets it go on; SaveState then reads its state. ErrPause
// if it does not park within timeout (a call out in progress).
func (m *MES) Pause(timeout time.Duration) (resume func(), err error) {
	m.mu.Lock()
	a, state, herr := m.act.Load(), m.lastState, m.lastErr
	m.mu.Unlock()
	if a == nil {
		return func() {}, nil
	}
	if state != abi.MES_STATE_RUNNING {
		// Its goroutine has ended: nothing to pause, and nothing a snapshot keeps.
		return nil, fmt.Errorf("%w (halted: %s)", ErrActive, abi.NameOf("MES_ERR_", uint64(herr)))
	}
	p := &pauseReq{parked: make(chan struct{}), resume: make(chan struct{})}
	if !a.pauseReq.CompareAndSwap(nil, p) {
		return nil, fmt.Errorf("%w: a pause is already pending", ErrPause)
	}
	a.kick()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.parked:
	case <-a.stop:
		a.pauseReq.CompareAndSwap(p, nil)
		close(p.resume)
		return nil, fmt.Errorf("%w: the activation was stopped", ErrPause)
	case <-t.C:
		a.pauseReq.CompareAndSwap(p, nil)
		close(p.resume) // if it took the request meanwhile, it goes on at once
		return nil, fmt.Errorf("%w within %v", ErrPause, timeout)
	}
	m.mu.Lock()
	m.paused = a
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		m.paused = nil
		m.mu.Unlock()
		close(p.resume)
	}, nil
}

// SaveState returns the block. A running scheduler must be paused (Pause): ErrActive
// otherwise (also for one halted on its own); ErrPause while a frame is in progress or a
// queue is leaving its slot.
func (m *MES) SaveState() (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := State{Registers: Registers{BaseLo: m.baseLo, BaseHi: m.baseHi, Control: m.control, ReportLo: m.reportLo,
		ReportHi: m.reportHi, WptrLo: m.wptrLo, WptrHi: m.wptrHi, Doorbell: m.doorbell, QueryDoorbell: m.queryDB,
		Cntl: m.cntl.Load()}}
	a := m.act.Load()
	if a == nil {
		return s, nil
	}
	switch {
	case m.paused != a:
		return State{}, fmt.Errorf("%w (not paused)", ErrActive)
	case m.lastState != abi.MES_STATE_RUNNING:
		return State{}, fmt.Errorf("%w (halted: %s)", ErrActive, abi.NameOf("MES_ERR_", uint64(m.lastErr)))
	case a.pend != nil || a.moreFrames:
		return State{}, fmt.Errorf("%w: a frame in progress", ErrPause) // soon done: try again
	}
	a.evMu.Lock()
	queued := len(a.dbQueued)
	a.evMu.Unlock()
	if queued != 0 {
		return State{}, fmt.Errorf("%w: doorbells of unplaced queues pending", ErrPause)
	}
	t, err := a.saveTables(time.Now())
	if err != nil {
		return State{}, err
	}
	s.Tables = t
	r := &s.Running
	r.Active, r.Rptr, r.Wptr = true, a.rptr.Load(), a.wptr.Load()
	if h := a.hw; h != nil {
		r.HW, r.VMIDs, r.Owned, r.Aggregated, r.PollNs = true, h.vmids, h.owned, h.aggregated, int64(h.poll)
	}
	for l := range abi.MES_PRIORITY_LEVELS {
		r.PreemptGraceNs[l], r.IdleGraceNs[l], r.ProcQuantumNs[l] =
			int64(a.cfg.preemptGrace[l]), int64(a.cfg.idleGrace[l]), int64(a.cfg.procQuantum[l])
	}
	r.YieldPercent = a.cfg.yieldPercent
	r.LogAddr, r.LogEntries, r.LogN = a.log.addr, a.log.entries, a.log.n
	r.Frames, r.FrameErrors, r.Maps, r.Unmaps = a.nFrames.Load(), a.nFrameErrors.Load(), a.nMaps.Load(), a.nUnmaps.Load()
	r.UnmappedDoorbells, r.LastError, r.LastErrorRptr = a.nUnmappedDBs.Load(), a.lastError.Load(), a.lastErrorRptr.Load()
	return s, nil
}

func badState(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadState}, args...)...)
}

// maxSavedDuration bounds the saved periods (an hour: far above any the API sets usefully).
const maxSavedDuration = int64(time.Hour)

// RestoreState programs an idle scheduler from s with the masks register writes apply and,
// for a running one, starts it with the saved firmware state and tables (its slots are given
// to it in the CP as SET_HW_RESOURCES did). The queues it had in slots must already be there
// (the CP is restored first: cp.SlotState.Mapped); its first pass observes them. Every field
// is checked (ErrBadState); a refused state starts nothing.
func (m *MES) RestoreState(s State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.act.Load() != nil {
		return fmt.Errorf("%w: the scheduler is already running", ErrBadState)
	}
	m.baseLo, m.baseHi = s.BaseLo, s.BaseHi
	m.control = s.Control & abi.REG_MES_RING_CONTROL__QUEUE_SIZE_MASK
	m.reportLo, m.reportHi = s.ReportLo, s.ReportHi
	m.wptrLo, m.wptrHi = s.WptrLo, s.WptrHi
	m.doorbell = s.Doorbell & (abi.REG_MES_RING_DOORBELL__OFFSET_MASK | abi.REG_MES_RING_DOORBELL__EN_MASK)
	m.queryDB = s.QueryDoorbell
	m.cntl.Store(s.Cntl & abi.REG_MES_CNTL__UNMAPPED_DOORBELL_DISABLE_MASK)
	r := s.Running
	if !r.Active {
		if len(s.Tables.Queues) != 0 || len(s.Tables.Procs) != 0 || len(s.Tables.Gangs) != 0 {
			return badState("tables of a scheduler that is off")
		}
		return nil
	}
	if err := m.checkRunning(&r); err != nil {
		return err
	}
	err := m.startWith(func(a *activation) error {
		if reason := a.checkRing(); reason != 0 {
			return badState("the saved ring registers do not start a scheduler (%s)", abi.NameOf("MES_ERR_", uint64(reason)))
		}
		if r.Wptr < r.Rptr || r.Wptr-r.Rptr > a.size {
			return badState("ring wptr %d not in [rptr %d, rptr + ring size %d]", r.Wptr, r.Rptr, a.size)
		}
		a.rptr.Store(r.Rptr)
		a.wptr.Store(r.Wptr)
		if r.HW {
			a.hw = &hwState{vmids: r.VMIDs, owned: r.Owned, aggregated: r.Aggregated, poll: time.Duration(r.PollNs)}
			agg := r.Aggregated
			a.aggregated.Store(&agg)
			a.pollWait = a.hw.poll
		}
		for l := range abi.MES_PRIORITY_LEVELS {
			a.cfg.preemptGrace[l], a.cfg.idleGrace[l], a.cfg.procQuantum[l] =
				time.Duration(r.PreemptGraceNs[l]), time.Duration(r.IdleGraceNs[l]), time.Duration(r.ProcQuantumNs[l])
		}
		a.cfg.yieldPercent = r.YieldPercent
		a.log = eventLog{addr: r.LogAddr, entries: r.LogEntries, n: r.LogN}
		a.nFrames.Store(r.Frames)
		a.nFrameErrors.Store(r.FrameErrors)
		a.nMaps.Store(r.Maps)
		a.nUnmaps.Store(r.Unmaps)
		a.nUnmappedDBs.Store(r.UnmappedDoorbells)
		a.lastError.Store(r.LastError)
		a.lastErrorRptr.Store(r.LastErrorRptr)
		if err := a.checkTables(&s.Tables, a.hw); err != nil {
			return err
		}
		if err := m.checkSlots(&s.Tables, a.hw); err != nil {
			return err
		}
		a.restoreTables(&s.Tables, time.Now())
		return nil
	})
	if err != nil {
		return err
	}
	if r.HW {
		// No goroutine call out can race this: the activation has made none yet, and the CP
		// is fresh (the device restores the scheduler before the queues).
		m.cfg.Slots.SetOwned(r.Owned)
		m.ownedMask.Store(r.Owned)
	}
	return nil
}

// checkRunning bounds what SET_HW_RESOURCES and SET_SCHEDULING_CONFIG could have set.
func (m *MES) checkRunning(r *RunningState) error {
	if r.HW {
		switch {
		case r.VMIDs == 0 || r.VMIDs&1 != 0 || r.VMIDs > 0xFFFF:
			return badState("VMID mask %#x", r.VMIDs)
		case r.Owned == 0 || r.Owned>>numSlots != 0:
			return badState("HQD slot mask %#x", r.Owned)
		case r.PollNs < 0 || r.PollNs > maxSavedDuration:
			return badState("poll period %d ns", r.PollNs)
		}
		for l, db := range r.Aggregated {
			if db != 0 && int(db) >= 2*m.cfg.Doorbells {
				return badState("aggregated doorbell %d: %#x outside the doorbell BAR", l, db)
			}
		}
	} else if r.VMIDs != 0 || r.Owned != 0 || r.PollNs != 0 || r.Aggregated != [abi.MES_PRIORITY_LEVELS]uint32{} {
		return badState("hardware resources without SET_HW_RESOURCES")
	}
	for l := range abi.MES_PRIORITY_LEVELS {
		for _, d := range []int64{r.PreemptGraceNs[l], r.IdleGraceNs[l], r.ProcQuantumNs[l]} {
			if d < 0 || d > maxSavedDuration {
				return badState("scheduling period %d ns at level %d", d, l)
			}
		}
	}
	if r.YieldPercent > 100 {
		return badState("yield percent %d", r.YieldPercent)
	}
	return nil
}
