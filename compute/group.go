package compute

import (
	"errors"
	"runtime"
	"time"

	"vgpu/abi"
	"vgpu/engine"
	"vgpu/shader"
)

// cu is one compute unit: a goroutine that executes claimed workgroups one at a time, with
// its L0 and its work-items' storage, reused from group to group.
type cu struct {
	p      *Pool
	id     int
	l0     *l0
	lanes  []shader.Lane
	ptrs   []*shader.Lane // lanes, for a wave
	stacks []byte
	state  []item
}

// item is what a CU knows of one work-item between its turns.
type item struct {
	kind  uint8     // abi.SHADER_ITEM_*
	until time.Time // sleeping: wake-up time
	retry <-chan struct{}
}

func (c *cu) loop() {
	defer c.p.wg.Done()
	for {
		r, w, ok := c.p.claim()
		if !ok {
			return
		}
		c.p.sem <- struct{}{}
		e := c.tracedGroup(r, w)
		<-c.p.sem
		r.finishGroup(e)
	}
}

// prepare sizes the CU's storage for n work-items of stack bytes each.
func (c *cu) prepare(n, stack int) {
	if cap(c.lanes) < n {
		c.lanes = make([]shader.Lane, n)
		c.state = make([]item, n)
		c.ptrs = make([]*shader.Lane, n)
	}
	c.lanes, c.state, c.ptrs = c.lanes[:n], c.state[:n], c.ptrs[:n]
	for i := range c.lanes {
		c.ptrs[i] = &c.lanes[i]
	}
	if cap(c.stacks) < n*stack {
		c.stacks = make([]byte, n*stack)
	}
	c.stacks = c.stacks[:n*stack]
}

// runGroup executes one workgroup until every work-item exited, one failed, or the run is
// stopping (then a preempted group's state is saved). Work-items take turns of the pool's
// budget; those at a barrier, asleep or parked on a retry fault wait without a turn, and when
// all wait the CU gives up its execution turn until one can go on.
func (c *cu) runGroup(r *Run, w work) groupEnd {
	n, stack := r.groupItems, r.stack
	c.prepare(n, stack)
	mem := &laneMem{c: c.l0, acc: dataAccess(r.d.VMID, r.d.Slot), run: r}
	d := r.dims(w.group, 0) // work-item 0; the others step from it
	for i := range n {
		l := &c.lanes[i]
		st := c.stacks[i*stack : (i+1)*stack]
		if i > 0 {
			r.step(&d)
		}
		if w.resume != nil {
			it := &w.resume.Items[i]
			*l = shader.Lane{Regs: it.Regs, PC: int(it.PC), Stack: st, Dims: d}
			copy(st, it.Stack)
			l.Bind(r.d.Program, mem, r)
			c.state[i] = item{kind: it.Kind}
			if it.Kind == abi.SHADER_ITEM_SLEEPING {
				c.state[i].until = time.Now().Add(time.Duration(it.SleepNS))
			}
			continue
		}
		l.Reset(r.d.Program, mem, r, r.d.Args, d, st)
		c.state[i] = item{kind: abi.SHADER_ITEM_READY}
	}
	budget := c.p.cfg.Budget
	for {
		if r.stopFlag.Load() {
			return c.stopped(r, w)
		}
		if c.converged(n) {
			// Every work-item ready at one PC: run them in lockstep while they stay together
			// (shader.RunWave); whatever leaves the wave continues alone below.
			before := c.lanes[0].Executed
			stop := shader.RunWave(c.ptrs, budget)
			done := c.lanes[0].Executed - before
			r.executed.Add(done * uint64(n))
			c.p.stats.instructions.Add(done * uint64(n))
			if stop == shader.Exited {
				return groupEnd{}
			}
			if r.stopFlag.Load() {
				return c.stopped(r, w)
			}
		}
		exited, atBarrier, ran := 0, 0, false
		var wake time.Time
		var retry <-chan struct{}
		now := time.Time{}
		for i := range n {
			if r.stopFlag.Load() {
				// Between two work-items' turns: a stop waits for one budget of one
				// work-item, not for the whole workgroup's round (items before i have
				// had this round's turn, the others not: either state resumes).
				return c.stopped(r, w)
			}
			s := &c.state[i]
			switch s.kind {
			case abi.SHADER_ITEM_EXITED:
				exited++
				continue
			case abi.SHADER_ITEM_BARRIER:
				atBarrier++
				continue
			case abi.SHADER_ITEM_SLEEPING:
				if now.IsZero() {
					now = time.Now()
				}
				if now.Before(s.until) {
					if wake.IsZero() || s.until.Before(wake) {
						wake = s.until
					}
					continue
				}
				s.kind = abi.SHADER_ITEM_READY
			case abi.SHADER_ITEM_RETRY:
				select {
				case <-s.retry:
					s.kind, s.retry = abi.SHADER_ITEM_READY, nil
				default:
					retry = s.retry
					continue
				}
			}
			ran = true
			l := &c.lanes[i]
			before := l.Executed
			stop, err := l.Run(budget)
			r.executed.Add(l.Executed - before)
			c.p.stats.instructions.Add(l.Executed - before)
			switch stop {
			case shader.Exited:
				s.kind = abi.SHADER_ITEM_EXITED
				exited++
			case shader.AtBarrier:
				s.kind = abi.SHADER_ITEM_BARRIER
				atBarrier++
			case shader.Sleeping:
				s.kind, s.until = abi.SHADER_ITEM_SLEEPING, time.Now().Add(time.Duration(l.SleepNS))
			case shader.Failed:
				var rt engine.Retrier
				if errors.As(err, &rt) {
					// A retry fault parks this work-item only; it replays the access once
					// the driver has handled the fault.
					s.kind, s.retry = abi.SHADER_ITEM_RETRY, rt.RetryReady()
					continue
				}
				return groupEnd{err: err}
			}
		}
		if exited == n {
			return groupEnd{}
		}
		if atBarrier > 0 && atBarrier+exited == n {
			for i := range n {
				if c.state[i].kind == abi.SHADER_ITEM_BARRIER {
					c.state[i].kind = abi.SHADER_ITEM_READY
				}
			}
			continue
		}
		if ran {
			// Let another CU have this execution turn between rounds: an endless
			// workgroup must not keep every other dispatch waiting.
			<-c.p.sem
			runtime.Gosched() // and the CP's goroutines a P: a preemption waits for none
			c.p.sem <- struct{}{}
			continue
		}
		c.wait(r, wake, retry)
	}
}

// converged reports whether all n work-items are ready at one PC (a wave can run them).
func (c *cu) converged(n int) bool {
	pc := c.lanes[0].PC
	for i := range n {
		if c.state[i].kind != abi.SHADER_ITEM_READY || c.lanes[i].PC != pc {
			return false
		}
	}
	return n > 1
}

// wait gives up the execution turn until a sleeper's time, a retry channel, or a stop (at
// most a millisecond: other parked work-items may be ready by then).
func (c *cu) wait(r *Run, wake time.Time, retry <-chan struct{}) {
	<-c.p.sem
	defer func() { c.p.sem <- struct{}{} }()
	d := time.Millisecond
	if !wake.IsZero() {
		d = min(d, max(time.Until(wake), 0))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-retry:
	case <-r.stopCh:
	}
}

// stopped leaves a workgroup because its run is stopping: a preemption saves it.
func (c *cu) stopped(r *Run, w work) groupEnd {
	r.mu.Lock()
	why := r.stopping
	r.mu.Unlock()
	if why != ErrPreempted {
		return groupEnd{}
	}
	g := SavedGroup{Index: w.group, Items: make([]SavedItem, r.groupItems)}
	now := time.Now()
	for i := range g.Items {
		l, s := &c.lanes[i], &c.state[i]
		it := &g.Items[i]
		it.Regs, it.PC, it.Kind = l.Regs, uint32(l.PC), s.kind
		it.Stack = append([]byte(nil), l.Stack...)
		switch s.kind {
		case abi.SHADER_ITEM_SLEEPING:
			it.SleepNS = uint64(max(s.until.Sub(now), 0))
		case abi.SHADER_ITEM_RETRY:
			it.Kind = abi.SHADER_ITEM_READY // the access replays on resume (and faults again if still unmapped)
		}
	}
	return groupEnd{saved: &g}
}
