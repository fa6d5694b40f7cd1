package mes

import "sort"

// Stats is the scheduler's part of the device diagnostics: the answer to "my queue's work
// never completes" without a guest.
type Stats struct {
	State                           uint32 // MES_STATE_*
	Frames, FrameErrors             uint32
	LastError                       uint32 // MES_LAST_ERROR layout
	Owned                           uint32 // slots it owns
	Maps, Unmaps, UnmappedDoorbells uint32
	Processes                       uint32
	Queues                          []QueueStats
}

// QueueStats is one added queue as the register path sees it.
type QueueStats struct {
	Doorbell       uint32
	Status         uint32 // MES_QUERY_STATUS layout
	Maps, Preempts uint32
	Rptr           uint64
}

// Stats returns a snapshot (atomics only: safe from any goroutine).
func (m *MES) Stats() Stats {
	a := m.act.Load()
	m.mu.Lock()
	st := Stats{State: m.lastState} // RUNNING, or HALTED once the ring halted
	m.mu.Unlock()
	if a == nil {
		return st
	}
	st.Frames, st.FrameErrors, st.LastError = a.nFrames.Load(), a.nFrameErrors.Load(), a.lastError.Load()
	st.Owned, st.Maps, st.Unmaps = m.ownedMask.Load(), a.nMaps.Load(), a.nUnmaps.Load()
	st.UnmappedDoorbells, st.Processes = a.nUnmappedDBs.Load(), a.nProcs.Load()
	for db, q := range *a.byDoorbell.Load() {
		st.Queues = append(st.Queues, QueueStats{Doorbell: db, Status: q.status.Load(), Maps: q.maps.Load(),
			Preempts: q.preempts.Load(), Rptr: q.pubRptr.Load()})
	}
	sort.Slice(st.Queues, func(i, j int) bool { return st.Queues[i].Doorbell < st.Queues[j].Doorbell })
	return st
}
