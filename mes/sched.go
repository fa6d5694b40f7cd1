package mes

import (
	"encoding/binary"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/engine"
)

const (
	noSlot       = 0xFF
	maxPollWait  = 10 * time.Millisecond // the unmapped-queue wptr poll backs off to this
	minLoopSleep = 10 * time.Microsecond
	// maxPreemptWait: a queue that is not in a dispatch but has not stopped this long after
	// the request is hung anyway (amdgpu waits 2.1 s for MES itself).
	maxPreemptWait = 2 * time.Second
	// fullScanEvery: a pass at least this long after the last full scan scans again (a safety
	// net behind rescan; it adds no timer).
	fullScanEvery = 10 * time.Millisecond
)

// publishTable publishes the doorbell → queue map for the doorbell path (copy on write: adds
// and removes are rare next to doorbells).
func (a *activation) publishTable() {
	m := make(map[uint32]*queue, len(a.t.queues))
	for db, q := range a.t.queues {
		m[db] = q
	}
	a.byDoorbell.Store(&m)
	a.nQueues.Store(uint32(len(a.t.queues)))
	a.nProcs.Store(uint32(len(a.t.procs)))
}

// events takes in what other goroutines reported: doorbells of queues not in a slot and
// aggregated doorbells (a poll of every unmapped queue's wptr shadow).
func (a *activation) events(now time.Time) {
	a.evMu.Lock()
	dbs := a.dbQueued
	a.dbQueued = a.dbSpare[:0] // the two lists take turns: no allocation per doorbell
	poll := a.pollNow
	a.pollNow = false
	a.evMu.Unlock()
	for _, q := range dbs {
		q.dbPending.Store(false)
		if a.t.queues[q.doorbell] != q || q.occupies() {
			continue // removed, or back in a slot (the HQD got the doorbell)
		}
		if w := q.lastDB.Load(); w > q.wptr && w-q.rptr <= q.ringDwords() {
			q.wptr = w
			a.await(q, now)
			a.nUnmappedDBs.Add(1)
			a.event(abi.MES_EVT_DOORBELL, 0, noSlot, q.gang.level, q.doorbell, q.rptr, 0)
			q.publish()
		}
	}
	clear(dbs)
	a.dbSpare = dbs
	if poll || a.hw != nil && a.hw.poll > 0 && !now.Before(a.nextPoll) {
		a.pollShadows(now)
	}
}

// pollShadows reads the wptr shadow of every unmapped queue: work found there runs as if its
// doorbell had reached the scheduler. The periodic poll backs off while it finds nothing.
func (a *activation) pollShadows(now time.Time) {
	found := false
	for _, q := range a.t.order {
		if q.occupies() || q.state == qHalted {
			continue
		}
		// A queue without a wptr shadow: its doorbell is what MES can read (the doorbell
		// page is memory too), so a doorbell the intercept did not pass on is still found.
		w := q.lastDB.Load()
		if q.wptrAddr != 0 {
			if err := a.read(q.wptrAddr, a.scratch[:]); err != nil {
				if err == errRevoked {
					return
				}
				a.m.limiter.Warn(logKeyPoll, "mes: wptr shadow unreadable", "doorbell", q.doorbell, "addr", q.wptrAddr, "err", err)
				continue
			}
			w = binary.LittleEndian.Uint64(a.scratch[:])
		}
		if w > q.wptr && w-q.rptr <= q.ringDwords() {
			q.wptr = w
			found = true
			a.rescan = true
			a.event(abi.MES_EVT_DOORBELL, 1, noSlot, q.gang.level, q.doorbell, q.rptr, 0)
			q.publish()
		}
	}
	if a.hw == nil || a.hw.poll == 0 {
		return
	}
	// The period has a floor that grows with the queues a poll reads (200 ns each): with
	// amdgpu's 50 µs and a thousand unmapped queues that always have work, the poll would
	// otherwise be the scheduler's whole work.
	floor := max(a.hw.poll, time.Duration(len(a.t.order))*200*time.Nanosecond)
	if found {
		a.pollWait = floor
	} else {
		a.pollWait = min(max(2*a.pollWait, floor), max(maxPollWait, floor))
	}
	a.nextPoll = now.Add(a.pollWait)
}

// observe looks at every occupied slot: queues that stopped are saved, idle ones noted,
// preemptions past their grace become hangs.
func (a *activation) observe(now time.Time) {
	a.slotNotify.Store(0)
	for s, q := range a.slots {
		if q == nil || q.state == qHung {
			continue
		}
		if !a.observeSlot(s, q, now) {
			return
		}
	}
}

// observeSlot looks at one occupied slot (see observe); false if the activation is revoked.
func (a *activation) observeSlot(s int, q *queue, now time.Time) bool {
	var img cp.Image
	var st cp.StopState
	var qs cp.QueueStats
	if !a.slotsDo(func(sl Slots) {
		img, st = sl.Saved(s)
		if st == cp.Running {
			qs = sl.Queue(s)
		}
	}) {
		return false
	}
	switch st {
	case cp.Running:
		progressed := qs.Rptr != q.rptr
		q.rptr, q.wptr = qs.Rptr, max(q.wptr, qs.Wptr)
		if qs.Idle && qs.Rptr == qs.Wptr {
			// Idle since this look if it ran since the last one: the idle grace
			// measures time without work, not since the first idle moment.
			if q.idleSince.IsZero() || progressed {
				q.idleSince = now
			}
		} else {
			q.idleSince = time.Time{}
		}
		// Its quantum runs from when it first ran (or parked) in the slot, not from
		// the map: a queue still waiting for its first execution turn has had none.
		if q.ranSince.IsZero() && (progressed || qs.Idle || qs.State == abi.HQD_STATE_WAITING ||
			qs.State == abi.HQD_STATE_BUSY_KERNEL) {
			q.ranSince = now
		}
		if q.state == qPreempting && !now.Before(q.preemptAt) {
			// A queue inside the endless kernel cannot stop: hung at its grace. One
			// still between preemption points (a slow host, a long call out) gets
			// another grace, up to maxPreemptWait in all.
			if qs.State == abi.HQD_STATE_BUSY_KERNEL || now.Sub(q.preemptReq) >= maxPreemptWait {
				a.hang(q, now)
			} else {
				q.preemptAt = now.Add(a.cfg.preemptGrace[q.gang.level])
			}
		}
		q.publish() // MES_QUERY_* follow a running queue
	case cp.Preempted:
		a.tracedLeftSlot(q, img, q.preemptReason, now)
	case cp.Halted:
		q.errCode = img.Error
		a.tracedLeftSlot(q, img, abi.MES_UNMAP_HALTED, now)
	default: // Killed (RESET) or Empty (the CP was reset under us)
		a.tracedLeftSlot(q, img, abi.MES_UNMAP_RESET, now)
	}
	return true
}

// leftSlot finishes an unmap: the slot is free, the queue's state saved.
func (a *activation) leftSlot(q *queue, img cp.Image, reason uint32, now time.Time) {
	slot := q.slot
	a.slotsDo(func(s Slots) { s.Release(slot) })
	a.slots[slot] = nil
	q.inSlot.Store(false) // then read lastDB: a doorbell after this point flags the queue
	q.gang.proc.inSlots--
	q.slot = -1
	a.nMapped.Add(^uint32(0))
	a.nUnmaps.Add(1)
	switch reason {
	case abi.MES_UNMAP_RESET:
		a.event(abi.MES_EVT_UNMAP, reason, slot, q.gang.level, q.doorbell, q.rptr, 0)
		a.discard(q)
		return
	case abi.MES_UNMAP_HALTED:
		q.rptr, q.wptr = img.Rptr, max(img.Wptr, q.wptr, q.lastDB.Load())
		q.img.Exec = img.Exec
		q.state = qHalted
	default:
		q.rptr, q.wptr = img.Rptr, max(img.Wptr, q.wptr, q.lastDB.Load())
		q.img.Exec = img.Exec
		q.state = qUnmapped
		q.preempts.Add(1)
	}
	a.event(abi.MES_EVT_UNMAP, reason, slot, q.gang.level, q.doorbell, q.rptr, uint32(q.gang.proc.vm.PASID))
	q.publish()
	if a.deferring {
		a.owe(q, oweSave) // after the map this unmap makes room for (deferred.go)
	} else {
		a.writeSaved(q)
	}
	a.markUnmapped(q, now)
}

// writeSaved writes what an unmap leaves in memory: the MQD and gang context, and the rptr
// report.
func (a *activation) writeSaved(q *queue) {
	a.saveQueue(q)
	a.reportQueueRptr(q)
}

// reportQueueRptr writes an unmapped queue's rptr to its rptr report address, in its process's
// address space: the CP writes it at the end of a batch, and a preemption can stop the queue
// after packets it has not reported yet (a user queue would then see its ring fuller than it
// is, and nothing would map it again to correct that); after a RESET it shows the discarded
// work gone. The CP itself would need an execution turn for that write; MES needs none.
func (a *activation) reportQueueRptr(q *queue) {
	p := q.gang.proc
	if q.img.ReportAddr == 0 || q.img.Control&abi.REG_HQD_PQ_CONTROL__NO_UPDATE_RPTR_MASK != 0 || p.vmid == 0 || !a.enter() {
		return
	}
	defer a.leave()
	b := a.io[:4]
	binary.LittleEndian.PutUint32(b, uint32(q.rptr&(q.ringDwords()-1)))
	acc := engine.Access{VMID: p.vmid, Slot: -1, Bypass: true, Client: abi.VM_CID_CPC}
	if err := a.m.cfg.Memory.Write(acc, q.img.ReportAddr, b); err != nil {
		a.m.limiter.Warn(logKeySave, "mes: rptr report unwritable", "doorbell", q.doorbell, "addr", q.img.ReportAddr, "err", err)
	}
}

// markUnmapped publishes an unmapped queue and puts it in the wait list if it has work.
func (a *activation) markUnmapped(q *queue, now time.Time) {
	a.await(q, now)
	q.publish()
}

// await puts q at the end of the wait list if it may be mapped and is not there yet: what a
// scan of every queue (a.rescan) would do for it, for the events that concern one queue (its
// doorbell, its unmap), so that a switch costs no scan of a thousand queues.
func (a *activation) await(q *queue, now time.Time) {
	if !q.inWait && q.runnable() {
		q.inWait, q.waitSince = true, now
		a.waitList = append(a.waitList, q)
	}
}

// hang marks a queue that did not stop within its grace: it keeps its slot until RESET.
func (a *activation) hang(q *queue, now time.Time) {
	q.state = qHung
	a.nHung.Add(1)
	a.event(abi.MES_EVT_HANG, q.preemptReason, q.slot, q.gang.level, q.doorbell, q.rptr, 0)
	a.m.limiter.Warn(logKeyHang, "mes: queue did not stop within its preemption grace: marked hung",
		"doorbell", q.doorbell, "slot", q.slot, "rptr", q.rptr, "grace", a.cfg.preemptGrace[q.gang.level])
	a.push(engine.IV{Client: abi.IH_CLIENT_GRBM_CP, Source: abi.IH_SRC_MES_QUEUE_HUNG, RingID: cp.RingID(q.slot),
		VMID: uint8(q.gang.proc.vmid), PASID: q.gang.proc.vm.PASID,
		Data: [4]uint32{q.doorbell, uint32(q.slot), uint32(q.rptr), uint32(q.rptr >> 32)}})
	a.writeStatus(q)
}

// preempt asks a mapped queue to leave its slot.
func (a *activation) preempt(q *queue, reason uint32, now time.Time) {
	a.requestPreempt(q, reason, now)
	// An idle queue stops inside Preempt, and the CP sends no Notify for a stop its caller
	// made: look at the slot again in the next pass, at once.
	a.kick()
}

// requestPreempt is preempt without the next pass: for a caller that looks at the slot
// itself right after it (a stop inside Preempt is then seen in this pass; any later stop is
// the CP's to Notify).
func (a *activation) requestPreempt(q *queue, reason uint32, now time.Time) {
	q.state = qPreempting
	q.preemptReason = reason
	q.preemptReq, q.preemptAt = now, now.Add(a.cfg.preemptGrace[q.gang.level])
	slot := q.slot
	a.slotsDo(func(s Slots) { s.Preempt(slot) })
	a.event(abi.MES_EVT_PREEMPT, reason, slot, q.gang.level, q.doorbell, q.rptr, 0)
}

// place maps q into slot; false if its process has no VMID now or the map failed.
func (a *activation) place(q *queue, slot int, now time.Time) bool {
	p := q.gang.proc
	if !a.ensureVMID(p, now) {
		return false
	}
	a.payOwed(q) // an unmap of q earlier in this pass is saved before q's MQD is read again
	if err := a.loadMQD(q); err != nil {
		q.state, q.errCode = qHalted, abi.CP_ERROR_RING_CONFIG
		a.m.limiter.Warn(logKeySave, "mes: MQD no longer loads: queue halted", "doorbell", q.doorbell, "why", err.why)
		a.event(abi.MES_EVT_UNMAP, abi.MES_UNMAP_HALTED, noSlot, q.gang.level, q.doorbell, q.rptr, 0)
		q.publish()
		return false
	}
	img := q.img
	img.VMID, img.Priority = p.vmid, uint8(q.gang.level)
	img.Rptr, img.Wptr = q.rptr, q.wptr
	q.inSlot.Store(true) // then Map, then read lastDB: a doorbell is seen by the HQD or below
	// Counted before the map, so whoever sees the queue's work done sees its map counted (the
	// work may finish before Map returns); taken back if the map fails.
	q.maps.Add(1)
	a.nMaps.Add(1)
	a.nMapped.Add(1)
	q.publishMapped(slot) // likewise MES_QUERY_STATUS shows it mapped
	var err error
	if !a.slotsDo(func(s Slots) { err = s.Map(slot, img) }) {
		a.uncountMap(q)
		q.publish()
		return false
	}
	if err != nil {
		a.uncountMap(q)
		q.state, q.errCode = qHalted, abi.CP_ERROR_RING_CONFIG
		a.m.limiter.Warn(logKeySave, "mes: the CP refused the queue's image: queue halted", "doorbell", q.doorbell, "err", err)
		q.publish()
		return false
	}
	if w := q.lastDB.Load(); w > q.wptr && w-q.rptr <= q.ringDwords() {
		q.wptr = w
		a.slotsDo(func(s Slots) { s.Kick(slot, w) })
	}
	a.wokeHQD = a.wokeHQD || q.hasWork()
	q.img.Exec.Dispatches = nil // the CP has them now (the next unmap saves what is left)
	q.state, q.slot, q.mappedAt, q.idleSince, q.ranSince = qMapped, slot, now, time.Time{}, time.Time{}
	a.slots[slot] = q
	p.inSlots++
	p.lastMap = now
	a.event(abi.MES_EVT_MAP, 0, slot, q.gang.level, q.doorbell, q.rptr, uint32(p.vm.PASID)|uint32(p.vmid)<<16)
	if a.deferring {
		q.publish()
		a.owe(q, oweMapped)
	} else {
		a.writeMapped(q)
	}
	return true
}

// uncountMap takes back place's counts and inSlot for a map that did not happen.
func (a *activation) uncountMap(q *queue) {
	q.inSlot.Store(false)
	q.maps.Add(^uint32(0))
	a.nMaps.Add(^uint32(0))
	a.nMapped.Add(^uint32(0))
}

// ensureVMID gives p a VMID: a free one, else the one of the process that has had none of its
// queues in a slot for the longest. If every VMID's process has queues in slots, the one that
// held its VMID longest past its process quantum is asked to give way (its queues are
// preempted) and false is returned: p waits.
func (a *activation) ensureVMID(p *process, now time.Time) bool {
	if p.vmid != 0 {
		return true
	}
	var pick int
	var victim *process
	for v := 1; v < len(a.vmids); v++ {
		if a.hw.vmids&(1<<v) == 0 {
			continue
		}
		h := a.vmids[v]
		if h == nil {
			pick, victim = v, nil
			break
		}
		if h.inSlots == 0 && (victim == nil || victim.inSlots != 0 || h.lastMap.Before(victim.lastMap)) {
			pick, victim = v, h
		}
	}
	if pick == 0 {
		if !p.vmidAsked {
			var holder *process
			for v := 1; v < len(a.vmids); v++ {
				h := a.vmids[v]
				if h != nil && now.Sub(h.vmidSince) >= h.quantum && (holder == nil || h.vmidSince.Before(holder.vmidSince)) {
					holder = h
				}
			}
			if holder != nil {
				p.vmidAsked = true
				for _, q := range a.slots {
					if q != nil && q.gang.proc == holder && q.state == qMapped {
						a.preempt(q, abi.MES_UNMAP_VMID, now)
					}
				}
			}
		}
		return false
	}
	if victim != nil {
		victim.vmid = 0
		a.event(abi.MES_EVT_VMID, 0, noSlot, 0, 0, 0, uint32(victim.vm.PASID)|uint32(pick)<<16)
	}
	p.vmid, p.vmidSince, p.vmidAsked = pick, now, false
	a.vmids[pick] = p
	a.bind(pick, p)
	a.event(abi.MES_EVT_VMID, 1, noSlot, 0, 0, 0, uint32(p.vm.PASID)|uint32(pick)<<16)
	return true
}

// slotsFor lists the owned slots a queue type may use.
func (a *activation) slotsFor(qtype uint32) uint32 {
	if qtype == abi.MES_QUEUE_TYPE_GFX {
		return a.hw.owned & 1
	}
	return a.hw.owned &^ 1
}

// schedule applies the policy (docs/device.md "MES scheduling"): idle queues give their slots
// up, waiting queues take free slots, higher levels preempt lower ones, equal levels take
// turns by gang quantum.
func (a *activation) schedule(now time.Time) {
	if a.hw == nil {
		return
	}
	a.deferWrites()
	waiters := a.refreshWaiting(now)
	var waiting [2]int // by type: gfx, compute
	for _, q := range waiters {
		waiting[typeIndex(q.qtype)]++
	}
	// Idle queues leave at once when someone waits, else after their idle grace.
	for _, q := range a.slots {
		if q == nil || q.state != qMapped || q.idleSince.IsZero() || q.hasWork() {
			continue
		}
		if waiting[typeIndex(q.qtype)] > 0 || now.Sub(q.idleSince) >= a.cfg.idleGrace[q.gang.level] {
			slot := q.slot
			a.requestPreempt(q, abi.MES_UNMAP_IDLE, now)
			// An idle queue usually stops inside Preempt: free its slot in this pass, for
			// the waiter below. No second pass for it then (a pass is most of a switch's
			// cost); a queue that did not stop inside Preempt (it got work meanwhile) is
			// the CP's to Notify when it stops, as after any other Preempt that ran.
			if !a.observeSlot(slot, q, now) {
				return
			}
		}
	}
	if len(waiters) == 0 {
		return
	}
	var freeing [2]int // slots already being given up, by type
	for s, q := range a.slots {
		if q != nil && q.state == qPreempting && q.preemptReason != abi.MES_UNMAP_RESET {
			freeing[typeIndex(slotType(s))]++
		}
	}
	// Highest level first; within a level the list is in the order the queues started
	// waiting. Once a waiter of a type finds no slot, no free one and no victim, later ones
	// of that type (same or lower level) cannot either.
	var stuck [2]bool
	for l := int(abi.MES_PRIORITY_LEVELS) - 1; l >= 0; l-- {
		if a.waitLevels&(1<<l) == 0 {
			continue // nobody of this level waits: no pass over the list for it
		}
		for _, w := range waiters {
			if stuck[0] && stuck[1] {
				return
			}
			ti := typeIndex(w.qtype)
			if int(w.gang.level) != l || stuck[ti] || w.state != qUnmapped {
				continue
			}
			if slot := a.freeSlot(w.qtype); slot >= 0 {
				a.tracedPlace(w, slot, now) // may fail (no VMID yet): the next waiter tries
				continue
			}
			if freeing[ti] > 0 {
				freeing[ti]--
				continue
			}
			v := a.victim(w.qtype)
			switch {
			case v != nil && v.gang.level < w.gang.level:
				a.preempt(v, abi.MES_UNMAP_PRIORITY, now)
			case v != nil && v.gang.level == w.gang.level && !v.ranSince.IsZero() && now.Sub(v.ranSince) >= v.gang.quantum:
				a.preempt(v, abi.MES_UNMAP_QUANTUM, now)
			default:
				stuck[ti] = true
			}
		}
	}
}

// refreshWaiting returns the queues waiting for a slot, in the order they started waiting.
// The list persists across passes: entries that stopped waiting are dropped, and queues that
// may have started are appended — found by a scan of every queue only when something could
// have given a queue work (a.rescan), and at least every fullScanEvery as a safety net, so a
// pass costs O(waiting) rather than O(queues).
func (a *activation) refreshWaiting(now time.Time) []*queue {
	n := 0
	a.waitLevels = 0
	for _, q := range a.waitList {
		if q.runnable() && !q.removed {
			a.waitList[n] = q
			n++
			a.waitLevels |= 1 << q.gang.level
			continue
		}
		q.inWait = false
		q.waitSince = time.Time{}
	}
	clear(a.waitList[n:])
	a.waitList = a.waitList[:n]
	if a.rescan || now.Sub(a.lastScan) >= fullScanEvery {
		a.rescan, a.lastScan = false, now
		for _, q := range a.t.order {
			if !q.inWait && q.runnable() {
				q.inWait, q.waitSince = true, now
				a.waitList = append(a.waitList, q)
				a.waitLevels |= 1 << q.gang.level
			}
		}
	}
	return a.waitList
}

func typeIndex(qtype uint32) int {
	if qtype == abi.MES_QUEUE_TYPE_GFX {
		return 0
	}
	return 1
}

func slotType(slot int) uint32 {
	if slot == 0 {
		return abi.MES_QUEUE_TYPE_GFX
	}
	return abi.MES_QUEUE_TYPE_COMPUTE
}

func (a *activation) freeSlot(qtype uint32) int {
	m := a.slotsFor(qtype)
	for s := 0; s < numSlots; s++ {
		if m&(1<<s) != 0 && a.slots[s] == nil {
			return s
		}
	}
	return -1
}

// victim is the mapped (not already preempting) queue of the type that gives way first: the
// lowest level, and within it the one mapped longest.
func (a *activation) victim(qtype uint32) *queue {
	var v *queue
	for s, q := range a.slots {
		if q == nil || q.state != qMapped || a.slotsFor(qtype)&(1<<s) == 0 {
			continue
		}
		if v == nil || q.gang.level < v.gang.level || q.gang.level == v.gang.level && q.mappedAt.Before(v.mappedAt) {
			v = q
		}
	}
	return v
}

// nextDeadline is how long the loop may sleep without an event: until the earliest
// preemption grace, idle grace, quantum expiry that someone waits for, poll, or frame recheck.
func (a *activation) nextDeadline(now time.Time) time.Duration {
	if a.moreFrames {
		return 0
	}
	next := now.Add(time.Hour)
	at := func(t time.Time) {
		if t.Before(next) {
			next = t
		}
	}
	if a.pend != nil {
		at(a.pend.deadline)
		if a.pend.recheck > 0 {
			at(now.Add(a.pend.recheck))
		}
	}
	// A quantum (or a VMID holder's process quantum) matters only while a queue of at least
	// that level waits; only expiries still ahead are timers (an expired one either acted
	// already or has no taker).
	waitLevel := [2]int{-1, -1}
	for _, q := range a.waitList {
		if q.runnable() {
			waitLevel[typeIndex(q.qtype)] = max(waitLevel[typeIndex(q.qtype)], int(q.gang.level))
		}
	}
	future := func(t time.Time) {
		if t.After(now) {
			at(t)
		}
	}
	for s, q := range a.slots {
		if q == nil {
			continue
		}
		switch q.state {
		case qPreempting:
			at(q.preemptAt)
		case qMapped:
			if !q.idleSince.IsZero() {
				at(q.idleSince.Add(a.cfg.idleGrace[q.gang.level]))
			}
			if int(q.gang.level) <= waitLevel[typeIndex(slotType(s))] && !q.ranSince.IsZero() {
				future(q.ranSince.Add(q.gang.quantum))
				future(q.gang.proc.vmidSince.Add(q.gang.proc.quantum))
			}
		}
	}
	if a.hw != nil && a.hw.poll > 0 {
		at(a.nextPoll)
	}

	// A floor: whatever was missed above cannot turn the loop into a spin.
	return max(next.Sub(now), minLoopSleep)
}
