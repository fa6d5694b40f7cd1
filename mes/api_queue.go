package mes

import (
	"encoding/binary"
	"time"

	"vgpu/abi"
	"vgpu/cp"
)

// checkDoorbell says why a queue may not use dword as its doorbell ("" if it may).
func (a *activation) checkDoorbell(dword uint32) string {
	switch {
	case int(dword) >= 2*a.m.cfg.Doorbells:
		return "outside the doorbell BAR"
	case dword%2 != 0:
		return "not a 64-bit doorbell (an odd dword offset)"
	case a.ring.doorbell&abi.REG_MES_RING_DOORBELL__EN_MASK != 0 &&
		dword == a.ring.doorbell&abi.REG_MES_RING_DOORBELL__OFFSET_MASK>>abi.REG_MES_RING_DOORBELL__OFFSET__SHIFT:
		return "the MES ring's own doorbell"
	case a.m.cfg.DoorbellInUse != nil && a.m.cfg.DoorbellInUse(dword):
		return "used by a kernel queue or the IH"
	}
	for _, db := range a.hw.aggregated {
		if db != 0 && db == dword {
			return "an aggregated doorbell"
		}
	}
	return ""
}

func (a *activation) addQueue(f *frame, now time.Time) *frameErr {
	aq := f.addQueue()
	switch {
	case len(a.t.queues) >= abi.MES_MAX_QUEUES:
		return fail(abi.MES_ERR_TOO_MANY_QUEUES, "%d queues added", len(a.t.queues))
	case aq.globalPrio >= abi.MES_PRIORITY_LEVELS:
		return fail(abi.MES_ERR_BAD_PRIORITY, "gang_global_priority_level %d", aq.globalPrio)
	case aq.queueType == abi.MES_QUEUE_TYPE_SDMA || aq.queueType > abi.MES_QUEUE_TYPE_SDMA ||
		aq.flags&abi.MES_ADD_QUEUE_FLAG_IS_AQL_QUEUE_MASK != 0:
		return fail(abi.MES_ERR_BAD_QUEUE_TYPE, "queue_type %d flags %#x: vgpu has no SDMA or AQL queues", aq.queueType, aq.flags)
	case aq.queueType == abi.MES_QUEUE_TYPE_GFX && a.hw.owned&1 == 0:
		return fail(abi.MES_ERR_BAD_QUEUE_TYPE, "a GFX queue while the graphics HQD is not MES's")
	case aq.queueType == abi.MES_QUEUE_TYPE_COMPUTE && a.hw.owned&^1 == 0:
		return fail(abi.MES_ERR_BAD_QUEUE_TYPE, "a compute queue while no compute HQD is MES's")
	case aq.flags&abi.MES_ADD_QUEUE_FLAG_MAP_LEGACY_KQ_MASK != 0:
		return fail(abi.MES_ERR_BAD_FIELD, "map_legacy_kq: kernel queues are programmed through HQD registers")
	case aq.pasidHigh:
		return fail(abi.MES_ERR_BAD_FIELD, "process_id wider than a 16-bit PASID")
	case aq.vaStart > aq.vaEnd || aq.vaEnd >= 1<<(abi.GPU_VA_BITS-12):
		return fail(abi.MES_ERR_BAD_FIELD, "process VA pages %#x..%#x", aq.vaStart, aq.vaEnd)
	case aq.mqd == 0 || aq.mqd%256 != 0:
		return fail(abi.MES_ERR_BAD_ADDRESS, "mqd_addr %#x (256-byte aligned)", aq.mqd)
	case aq.procCtx == 0 || aq.procCtx%256 != 0 || aq.gangCtx == 0 || aq.gangCtx%256 != 0:
		return fail(abi.MES_ERR_BAD_ADDRESS, "context addresses %#x/%#x (256-byte aligned)", aq.procCtx, aq.gangCtx)
	case aq.wptr%8 != 0 || aq.unmapFlag%4 != 0:
		return fail(abi.MES_ERR_BAD_ADDRESS, "wptr_addr %#x (qword) / unmap_flag_addr %#x (dword)", aq.wptr, aq.unmapFlag)
	}
	if why := a.checkDoorbell(aq.doorbell); why != "" {
		return fail(abi.MES_ERR_BAD_DOORBELL, "doorbell %#x: %s", aq.doorbell, why)
	}
	if a.t.queues[aq.doorbell] != nil {
		return fail(abi.MES_ERR_DUPLICATE_QUEUE, "doorbell %#x already added", aq.doorbell)
	}
	g := a.t.gangs[aq.gangCtx]
	if g != nil && g.proc.ctxAddr != aq.procCtx {
		return fail(abi.MES_ERR_BAD_FIELD, "gang %#x belongs to process %#x", aq.gangCtx, g.proc.ctxAddr)
	}
	if g != nil && len(g.queues) >= 8 {
		return fail(abi.MES_ERR_BAD_FIELD, "gang %#x has MAX_QUEUES_IN_A_GANG (8) queues", aq.gangCtx)
	}
	q := &queue{doorbell: aq.doorbell, mqd: aq.mqd, wptrAddr: aq.wptr, unmapFlag: aq.unmapFlag, qtype: aq.queueType, slot: -1}
	q.ctx = aq.gangCtx + uint64(freeCtxIndex(g))*abi.MES_CTX_BYTES
	if err := a.loadMQD(q); err != nil {
		return err
	}
	if err := a.continueRemoved(q, aq.gangCtx, g); err != nil {
		return err
	}
	// The gang context is MES's page: clear this queue's record (a stale state must never be
	// taken for this queue's).
	if err := a.write(q.ctx, make([]byte, abi.MES_CTX_BYTES)); err != nil {
		return fail(abi.MES_ERR_BAD_ADDRESS, "gang_context_addr %#x: %v", aq.gangCtx, err)
	}
	// The MQD as MES keeps it: the doorbell enabled at the offset ADD_QUEUE gave, and the
	// queue unmapped (IS_QUEUE_UNMAP, the unmap flag) until it first runs.
	var dbc [4]byte
	binary.LittleEndian.PutUint32(dbc[:], q.img.DoorbellControl)
	if err := a.write(q.mqd+q.layout().doorbell*4, dbc[:]); err != nil {
		return fail(abi.MES_ERR_BAD_ADDRESS, "mqd_addr %#x: %v", q.mqd, err)
	}
	a.writeFlags(q, 1)
	if aq.wptr != 0 {
		if err := a.read(aq.wptr, a.scratch[:]); err != nil {
			return fail(abi.MES_ERR_BAD_ADDRESS, "wptr_addr %#x: %v", aq.wptr, err)
		}
		q.wptr = max(q.wptr, binary.LittleEndian.Uint64(a.scratch[:]))
	}
	if q.wptr-q.rptr > q.ringDwords() {
		q.wptr = q.rptr // a shadow more than a ring ahead is not work: wait for a sane one
	}
	p := a.t.procs[aq.procCtx]
	if p == nil {
		p = &process{ctxAddr: aq.procCtx, vm: VMContext{PASID: aq.pasid, PageTableBase: aq.ptBase,
			Cntl: aq.vmCntl, Start: aq.vaStart, End: aq.vaEnd}}
		p.quantum = units100ns(aq.procQuantum)
		if aq.procQuantum == 0 {
			p.quantum = a.cfg.procQuantum[aq.globalPrio]
		}
		a.t.procs[aq.procCtx] = p
	}
	if g == nil {
		g = &gang{ctxAddr: aq.gangCtx, proc: p, level: aq.globalPrio, inproc: aq.inprocPrio,
			quantum: units100ns(aq.gangQuantum)}
		if aq.gangQuantum == 0 {
			g.quantum = units100ns(abi.MES_DEFAULT_GANG_QUANTUM)
		}
		g.suspended = aq.flags&abi.MES_ADD_QUEUE_FLAG_IS_GANG_SUSPENDED_MASK != 0
		a.t.gangs[aq.gangCtx] = g
	}
	if a.m.cfg.ClaimDoorbell != nil && a.enter() {
		a.m.cfg.ClaimDoorbell(q.doorbell)
		a.leave()
	}
	q.gang = g
	g.queues = append(g.queues, q)
	p.queues++
	a.t.queues[q.doorbell] = q
	a.t.order = append(a.t.order, q)
	a.publishTable()
	a.markUnmapped(q, now)
	q.publishIdent()
	q.publish()
	return nil
}

func (a *activation) removeQueue(f *frame, pos uint64, now time.Time) *frameErr {
	db := f.dw(abi.MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET)
	if fl := f.dw(abi.MES_REMOVE_QUEUE_DW_FLAGS); fl&0xF != 0 {
		return fail(abi.MES_ERR_BAD_FIELD, "legacy-queue flags %#x", fl)
	}
	q := a.t.queues[db]
	if q == nil {
		return fail(abi.MES_ERR_NO_SUCH_QUEUE, "no queue with doorbell %#x", db)
	}
	if q.state == qHung {
		return fail(abi.MES_ERR_QUEUE_HUNG, "queue %#x is hung (RESET it first)", db)
	}
	q.removing = true
	if q.state == qMapped {
		a.preempt(q, abi.MES_UNMAP_REMOVE, now)
	}
	return a.wait(f, pos, now, now.Add(24*time.Hour), 0, nil, func(now time.Time) *frameErr {
		switch q.state {
		case qMapped, qPreempting:
			return errWaiting
		case qHung:
			q.removing = false
			return fail(abi.MES_ERR_PREEMPT_TIMEOUT, "queue %#x did not leave slot %d within its grace", db, q.slot)
		}
		if n := len(q.img.Exec.Dispatches); n > 1 {
			q.removing = false
			return fail(abi.MES_ERR_BUSY, "queue %#x has %d saved shader dispatches; a removed queue keeps one", db, n)
		}
		a.dropQueue(q)
		return nil
	})
}

// freeCtxIndex is the first record of g's context page no queue of g uses.
func freeCtxIndex(g *gang) int {
	if g == nil {
		return 0
	}
	for i := 0; ; i++ {
		used := false
		for _, q := range g.queues {
			if q.ctx == g.ctxAddr+uint64(i)*abi.MES_CTX_BYTES {
				used = true
			}
		}
		if !used {
			return i
		}
	}
}

// dropQueue forgets an unmapped queue (REMOVE_QUEUE). A queue with work in flight leaves its
// record marked removed, for an ADD_QUEUE of the same MQD to continue it (continued.go); one
// with nothing in flight clears it.
func (a *activation) dropQueue(q *queue) {
	if inFlight(&q.img.Exec) {
		a.markRemoved(q)
	} else if err := a.write(q.ctx, make([]byte, 4)); err != nil { // MES_CTX_DW_MAGIC = 0: nothing to continue
		a.saveFailed(q, err)
	}
	q.status.Store(0)
	q.removed = true
	if p := a.t.remove(q); p != nil && p.vmid != 0 {
		a.vmids[p.vmid] = nil
		a.unbind(p.vmid)
		a.event(abi.MES_EVT_VMID, 0, noSlot, 0, q.doorbell, 0, uint32(p.vm.PASID)|uint32(p.vmid)<<16)
		p.vmid = 0
	}
	a.publishTable()
}

// gangsOf returns the gangs a SUSPEND/RESUME names: all, or the one at ctx.
func (a *activation) gangsOf(all bool, ctx uint64) ([]*gang, *frameErr) {
	if all {
		var gs []*gang
		for _, q := range a.t.order {
			if len(gs) == 0 || gs[len(gs)-1] != q.gang {
				gs = append(gs, q.gang)
			}
		}
		return gs, nil
	}
	g := a.t.gangs[ctx]
	if g == nil {
		return nil, fail(abi.MES_ERR_NO_SUCH_QUEUE, "no gang with context %#x", ctx)
	}
	return []*gang{g}, nil
}

func (a *activation) suspend(f *frame, pos uint64, now time.Time) *frameErr {
	gs, err := a.gangsOf(f.dw(abi.MES_SUSPEND_DW_FLAGS)&1 != 0, f.qw(abi.MES_SUSPEND_DW_GANG_CONTEXT_ADDR))
	if err != nil {
		return err
	}
	fence, value := f.qw(abi.MES_SUSPEND_DW_SUSPEND_FENCE_ADDR), f.dw(abi.MES_SUSPEND_DW_SUSPEND_FENCE_VALUE)
	if fence%4 != 0 {
		return fail(abi.MES_ERR_BAD_ADDRESS, "suspend_fence_addr %#x not dword aligned", fence)
	}
	for _, g := range gs {
		g.suspended = true
		for _, q := range g.queues {
			if q.state == qMapped {
				a.preempt(q, abi.MES_UNMAP_SUSPEND, now)
			}
			q.publish()
		}
	}
	return a.wait(f, pos, now, now.Add(24*time.Hour), 0, nil, func(now time.Time) *frameErr {
		for _, g := range gs {
			for _, q := range g.queues {
				switch q.state {
				case qMapped, qPreempting:
					return errWaiting
				case qHung:
					return fail(abi.MES_ERR_PREEMPT_TIMEOUT, "queue %#x did not leave slot %d within its grace", q.doorbell, q.slot)
				}
			}
		}
		if fence != 0 {
			var b [4]byte
			binary.LittleEndian.PutUint32(b[:], value)
			if err := a.write(fence, b[:]); err != nil {
				return fail(abi.MES_ERR_BAD_ADDRESS, "suspend_fence_addr %#x: %v", fence, err)
			}
		}
		return nil
	})
}

func (a *activation) resume(f *frame) *frameErr {
	all := f.dw(abi.MES_RESUME_DW_FLAGS)&1 != 0
	gs, err := a.gangsOf(all, f.qw(abi.MES_RESUME_DW_GANG_CONTEXT_ADDR))
	if err != nil {
		return err
	}
	if !all && !gs[0].suspended {
		return fail(abi.MES_ERR_NOT_SUSPENDED, "gang %#x is not suspended", gs[0].ctxAddr)
	}
	for _, g := range gs {
		g.suspended = false
		for _, q := range g.queues {
			q.publish()
		}
	}
	a.rescan = true
	return nil
}

// reset is RESET: one queue by doorbell, or hang detection over a queue type.
func (a *activation) reset(f *frame, pos uint64, now time.Time) *frameErr {
	fl := f.dw(abi.MES_RESET_DW_FLAGS)
	switch {
	case fl&abi.MES_RESET_FLAG_RESET_LEGACY_GFX_MASK != 0:
		return fail(abi.MES_ERR_BAD_FIELD, "reset_legacy_gfx: kernel queues are reset through HQD_DEQUEUE_REQUEST")
	case fl&abi.MES_RESET_FLAG_RESET_QUEUE_ONLY_MASK != 0:
		db := f.dw(abi.MES_RESET_DW_DOORBELL_OFFSET)
		q := a.t.queues[db]
		if q == nil {
			return fail(abi.MES_ERR_NO_SUCH_QUEUE, "no queue with doorbell %#x", db)
		}
		a.resetQueues([]*queue{q})
		return a.wait(f, pos, now, now.Add(24*time.Hour), 0, nil, func(time.Time) *frameErr {
			if q.occupies() {
				return errWaiting
			}
			return nil
		})
	case fl&(abi.MES_RESET_FLAG_HANG_DETECT_ONLY_MASK|abi.MES_RESET_FLAG_HANG_DETECT_THEN_RESET_MASK) != 0:
		return a.detect(f, pos, now, fl&abi.MES_RESET_FLAG_HANG_DETECT_THEN_RESET_MASK != 0)
	}
	return fail(abi.MES_ERR_BAD_FIELD, "RESET flags %#x name no operation", fl)
}

// resetQueues stops queues now (the endless kernel too) and discards their pending work; the
// scheduler finishes each reset when its slot reports it stopped (observe).
func (a *activation) resetQueues(qs []*queue) {
	for _, q := range qs {
		if q.state == qHung {
			a.nHung.Add(^uint32(0))
		}
		if q.occupies() {
			q.state = qPreempting
			q.preemptReason = abi.MES_UNMAP_RESET
			q.preemptReq, q.preemptAt = time.Now(), time.Now().Add(24*time.Hour)
			slot := q.slot
			a.slotsDo(func(s Slots) { s.Kill(slot) })
			a.event(abi.MES_EVT_PREEMPT, abi.MES_UNMAP_RESET, slot, q.gang.level, q.doorbell, q.rptr, 0)
			continue
		}
		a.discard(q)
	}
}

// discard makes an unmapped queue's pending work vanish (RESET): rptr := wptr, error and saved
// execution state cleared.
func (a *activation) discard(q *queue) {
	q.wptr = max(q.wptr, q.lastDB.Load())
	q.rptr = q.wptr
	q.img.Exec = cp.ExecState{}
	q.errCode = 0
	q.state = qUnmapped
	a.event(abi.MES_EVT_RESET, 0, noSlot, q.gang.level, q.doorbell, q.rptr, 0)
	a.saveQueue(q)
	a.reportQueueRptr(q)
	q.publish()
}

// detect is RESET's hang detection: every mapped queue of the type is asked to leave its slot;
// those that do not within their grace are hung. Their doorbells (and slots) are written to
// the driver's array; with thenReset they are reset.
func (a *activation) detect(f *frame, pos uint64, now time.Time, thenReset bool) *frameErr {
	arr := f.qw(abi.MES_RESET_DW_DOORBELL_OFFSET_ADDR)
	qt := f.dw(abi.MES_RESET_DW_QUEUE_TYPE)
	if arr == 0 || arr%4 != 0 {
		return fail(abi.MES_ERR_BAD_ADDRESS, "doorbell_offset_addr %#x", arr)
	}
	var probed []*queue
	for _, q := range a.t.order {
		if q.qtype != qt {
			continue
		}
		if q.state == qMapped {
			a.preempt(q, abi.MES_UNMAP_DETECT, now)
		}
		if q.occupies() {
			probed = append(probed, q)
		}
	}
	var hung []*queue
	phase := 0
	return a.wait(f, pos, now, now.Add(24*time.Hour), 0, nil, func(now time.Time) *frameErr {
		if phase == 0 {
			for _, q := range probed {
				if q.state == qPreempting {
					return errWaiting
				}
			}
			for _, q := range probed {
				if q.state == qHung && len(hung) < abi.MES_RESET_DW_HUNG_DB_ENTRIES {
					hung = append(hung, q)
				}
			}
			// Only the hung queues' entries are written: the others keep what the driver put
			// there (MES_HUNG_DB_INVALID).
			for i, q := range hung {
				var b [4]byte
				binary.LittleEndian.PutUint32(b[:], q.doorbell)
				err := a.write(arr+4*uint64(i), b[:])
				if err == nil {
					binary.LittleEndian.PutUint32(b[:], uint32(q.slot))
					err = a.write(arr+4*uint64(abi.MES_RESET_DW_HUNG_DB_ENTRIES+i), b[:])
				}
				if err != nil {
					return fail(abi.MES_ERR_BAD_ADDRESS, "doorbell_offset_addr %#x: %v", arr, err)
				}
			}
			if !thenReset || len(hung) == 0 {
				return nil
			}
			a.resetQueues(hung)
			phase = 1
		}
		for _, q := range hung {
			if q.occupies() {
				return errWaiting
			}
		}
		return nil
	})
}
