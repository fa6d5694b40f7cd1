package mes

import (
	"encoding/binary"
	"time"

	"vgpu/abi"
)

// hwState is what SET_HW_RESOURCES gave the scheduler.
type hwState struct {
	vmids      uint32 // VMIDs it may hand out
	owned      uint32 // HQD slots it owns (bit = slot)
	aggregated [abi.MES_PRIORITY_LEVELS]uint32
	poll       time.Duration // wptr-shadow poll period of unmapped queues (0: none)
}

// schedConfig is SET_SCHEDULING_CONFIG's state, per priority level.
type schedConfig struct {
	preemptGrace [abi.MES_PRIORITY_LEVELS]time.Duration
	idleGrace    [abi.MES_PRIORITY_LEVELS]time.Duration
	procQuantum  [abi.MES_PRIORITY_LEVELS]time.Duration
	yieldPercent uint32
}

// units100ns converts the API's 100 ns units.
func units100ns(v uint64) time.Duration {
	const maxUnits = uint64(1<<63-1) / 100
	return time.Duration(min(v, maxUnits) * 100)
}

func defaultSchedConfig() schedConfig {
	var c schedConfig
	for l := range c.preemptGrace {
		c.preemptGrace[l] = units100ns(abi.MES_DEFAULT_PREEMPT_GRACE)
		c.idleGrace[l] = units100ns(abi.MES_DEFAULT_IDLE_GRACE)
		c.procQuantum[l] = units100ns(abi.MES_DEFAULT_PROCESS_QUANTUM)
	}
	c.yieldPercent = abi.MES_DEFAULT_NORMAL_YIELD_PERCENT
	return c
}

func (a *activation) setHWResources(f *frame) *frameErr {
	if len(a.t.queues) != 0 {
		return fail(abi.MES_ERR_BAD_FIELD, "SET_HW_RESOURCES while %d queues are added", len(a.t.queues))
	}
	h := f.hwResources()
	if h.vmids == 0 || h.vmids&1 != 0 || h.vmids > 0xFFFF {
		return fail(abi.MES_ERR_BAD_MASK, "vmid_mask_gfxhub %#x (VMID 0 is the kernel's; 1..15 only)", h.vmids)
	}
	var owned uint32
	for pipe, m := range h.compute {
		if pipe >= abi.CP_COMPUTE_PIPES && m != 0 || m>>abi.CP_QUEUES_PER_PIPE != 0 {
			return fail(abi.MES_ERR_BAD_MASK, "compute_hqd_mask[%d] %#x names HQDs vgpu lacks (%d pipes of %d)", pipe, m,
				abi.CP_COMPUTE_PIPES, abi.CP_QUEUES_PER_PIPE)
		}
		owned |= m << (1 + pipe*abi.CP_QUEUES_PER_PIPE)
	}
	if h.gfx[0]&^1 != 0 || h.gfx[1] != 0 {
		return fail(abi.MES_ERR_BAD_MASK, "gfx_hqd_mask %#x/%#x: vgpu has one graphics HQD", h.gfx[0], h.gfx[1])
	}
	owned |= h.gfx[0] & 1
	if owned == 0 {
		return fail(abi.MES_ERR_BAD_MASK, "no HQD slot given to MES")
	}
	prev := uint32(0)
	if a.hw != nil {
		prev = a.hw.owned
	}
	var busy int = -1
	a.slotsDo(func(s Slots) {
		for slot := 0; slot < numSlots; slot++ {
			if owned&(1<<slot) != 0 && prev&(1<<slot) == 0 && s.Queue(slot).Active {
				busy = slot
				return
			}
		}
	})
	if busy >= 0 {
		return fail(abi.MES_ERR_BAD_MASK, "HQD slot %d is running a kernel queue", busy)
	}
	for l, db := range h.aggregated {
		if db != 0 && int(db) >= 2*a.m.cfg.Doorbells {
			return fail(abi.MES_ERR_BAD_DOORBELL, "aggregated_doorbells[%d] %#x outside the doorbell BAR", l, db)
		}
	}
	if !a.slotsDo(func(s Slots) { s.SetOwned(owned) }) {
		return fail(abi.MES_ERR_NONE, "revoked")
	}
	a.m.ownedMask.Store(owned)
	a.hw = &hwState{vmids: h.vmids, owned: owned, aggregated: h.aggregated,
		poll: time.Duration(h.pollUS) * time.Microsecond}
	agg := h.aggregated
	a.aggregated.Store(&agg)
	a.pollWait = a.hw.poll
	return nil
}

func (a *activation) setSchedulingConfig(f *frame) *frameErr {
	c := a.cfg
	for l := 0; l < abi.MES_PRIORITY_LEVELS; l++ {
		if v := f.qw(abi.MES_SCHED_CFG_DW_GRACE_PERIOD_OTHER_LEVELS + uint64(2*l)); v != 0 {
			c.preemptGrace[l] = units100ns(v)
		}
		if v := f.qw(abi.MES_SCHED_CFG_DW_PROCESS_QUANTUM_FOR_LEVEL + uint64(2*l)); v != 0 {
			c.procQuantum[l] = units100ns(v)
		}
		if v := f.qw(abi.MES_SCHED_CFG_DW_PROCESS_GRACE_PERIOD_SAME_LEVEL + uint64(2*l)); v != 0 {
			c.idleGrace[l] = units100ns(v)
		}
	}
	y := f.dw(abi.MES_SCHED_CFG_DW_NORMAL_YIELD_PERCENT)
	if y > 50 {
		return fail(abi.MES_ERR_BAD_FIELD, "normal_yield_percent %d > 50", y)
	}
	c.yieldPercent = y
	a.cfg = c
	return nil
}

func (a *activation) setLogBuffer(f *frame) *frameErr {
	addr, n := f.qw(abi.MES_LOG_DW_BUFFER_ADDR), f.dw(abi.MES_LOG_DW_NUMBER_OF_ENTRIES)
	if addr == 0 {
		a.log = eventLog{}
		return nil
	}
	if addr%abi.MES_EVENT_BYTES != 0 {
		return fail(abi.MES_ERR_BAD_ADDRESS, "log buffer %#x not 32-byte aligned", addr)
	}
	if n == 0 || n > 65536 {
		return fail(abi.MES_ERR_BAD_FIELD, "number_of_entries %d (1..65536)", n)
	}
	var hdr [abi.MES_EVENT_BYTES]byte
	binary.LittleEndian.PutUint32(hdr[4:], n)
	if err := a.write(addr, hdr[:]); err != nil {
		return fail(abi.MES_ERR_BAD_ADDRESS, "log buffer %#x: %v", addr, err)
	}
	a.log = eventLog{addr: addr, entries: uint64(n)}
	return nil
}

func (a *activation) changePriority(f *frame) *frameErr {
	g := a.t.gangs[f.qw(abi.MES_CHANGE_PRIO_DW_GANG_CONTEXT_ADDR)]
	if g == nil {
		return fail(abi.MES_ERR_NO_SUCH_QUEUE, "no gang with context %#x", f.qw(abi.MES_CHANGE_PRIO_DW_GANG_CONTEXT_ADDR))
	}
	lvl := f.dw(abi.MES_CHANGE_PRIO_DW_GANG_GLOBAL_PRIORITY_LEVEL)
	if lvl >= abi.MES_PRIORITY_LEVELS {
		return fail(abi.MES_ERR_BAD_PRIORITY, "level %d", lvl)
	}
	g.level, g.inproc = lvl, f.dw(abi.MES_CHANGE_PRIO_DW_INPROCESS_GANG_PRIORITY)
	if qu := f.qw(abi.MES_CHANGE_PRIO_DW_GANG_QUANTUM); qu != 0 {
		g.quantum = units100ns(qu)
	}
	for _, q := range g.queues {
		q.publish()
	}
	return nil
}

func (a *activation) updateRoot(f *frame) *frameErr {
	p := a.t.procs[f.qw(abi.MES_ROOT_PT_DW_PROCESS_CONTEXT_ADDR)]
	if p == nil {
		return fail(abi.MES_ERR_NO_SUCH_QUEUE, "no process with context %#x", f.qw(abi.MES_ROOT_PT_DW_PROCESS_CONTEXT_ADDR))
	}
	p.vm.PageTableBase = f.qw(abi.MES_ROOT_PT_DW_PAGE_TABLE_BASE_ADDR)
	if p.vmid != 0 {
		a.bind(p.vmid, p)
	}
	return nil
}

// bind programs vmid for p (a call out).
func (a *activation) bind(vmid int, p *process) {
	if !a.enter() {
		return
	}
	defer a.leave()
	a.m.cfg.VM.Bind(vmid, p.vm)
}

func (a *activation) unbind(vmid int) {
	if !a.enter() {
		return
	}
	defer a.leave()
	a.m.cfg.VM.Unbind(vmid)
}
