package compute

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"vgpu/abi"
	"vgpu/engine"
	"vgpu/shader"
)

// MaxGroupItems is the most work-items a workgroup may have.
const MaxGroupItems = 1024

// MaxGroupStack bounds a workgroup's stacks together (work-items × stack bytes): the host
// memory a CU holds for one workgroup, and what a preemption saves of it, is the guest's
// choice otherwise (1024 × 64 KiB = 64 MiB per CU).
const MaxGroupStack = 4 << 20

// Dispatch is a grid to run: Groups workgroups of GroupSize work-items each, every one running
// Program from its entry (abi.SHADER_REG_*), in the address space of VMID, for the queue in
// Slot (RingID, PASID name it in IVs).
type Dispatch struct {
	Program   *shader.Program
	Groups    [3]uint32
	GroupSize [3]uint32
	Start     [3]uint32 // the first workgroup id in each dimension (COMPUTE_START_*)
	Args      uint64    // R1 at entry
	Stack     int       // stack bytes per work-item: 0 = abi.SHADER_STACK_DEFAULT
	VMID      int
	Slot      int
	RingID    uint8
	PASID     uint16
	// Resume continues a preempted dispatch of the same shape (Run.Result's Saved).
	Resume *Saved
	// Packet is the address of the packet that started the dispatch (hazard reports name it).
	// After are the runs of the same queue still in flight when it starts, with nothing
	// ordering it after them: in strict mode its loads and stores are checked against what
	// they wrote (compute/hazard.go).
	Packet uint64
	After  []*Run
	// OnEnd (optional) is called once the run has ended (after Done is closed), from a CU
	// goroutine or the caller of Start, Preempt or Kill: it must not block.
	OnEnd func()
}

// Errors a Run ends with besides a *shader.Error.
var (
	ErrPreempted = errors.New("compute: dispatch preempted")
	ErrKilled    = errors.New("compute: dispatch killed")
	ErrClosed    = errors.New("compute: pool closed")
)

// check validates the dispatch's shape.
func (d *Dispatch) check() error {
	items := uint64(d.GroupSize[0]) * uint64(d.GroupSize[1]) * uint64(d.GroupSize[2])
	switch {
	case d.Program == nil:
		return errors.New("compute: dispatch without a program")
	case items == 0 || items > MaxGroupItems:
		return fmt.Errorf("compute: workgroup of %d×%d×%d work-items (1..%d)", d.GroupSize[0], d.GroupSize[1], d.GroupSize[2], MaxGroupItems)
	case d.Stack < 0 || d.Stack > abi.SHADER_STACK_MAX || d.Stack%8 != 0:
		return fmt.Errorf("compute: stack of %d bytes (a multiple of 8, at most %d)", d.Stack, abi.SHADER_STACK_MAX)
	case items*uint64(max(d.Stack, abi.SHADER_STACK_DEFAULT)) > MaxGroupStack:
		return fmt.Errorf("compute: %d work-items of %d stack bytes: more than %d bytes of stack per workgroup", items, d.Stack, MaxGroupStack)
	}
	return nil
}

// Run is a dispatch in flight.
type Run struct {
	p          *Pool
	d          Dispatch
	total      uint64 // workgroups
	groupItems int
	stack      int

	mu       sync.Mutex
	next     uint64        // first workgroup not claimed
	resume   []SavedGroup  // preempted workgroups to finish first
	active   int           // workgroups being executed
	stopping error         // nil, ErrPreempted, ErrKilled, or the first *shader.Error
	saved    []SavedGroup  // workgroups stopped by a preemption
	done     chan struct{} // closed when no CU runs any of it any more
	result   error
	stopCh   chan struct{} // closed when stopping is set
	stopFlag atomic.Bool   // stopping is set (read between budgets)

	killed atomic.Bool // Kill: every memory access fails from now on (no effect after a reset)

	executed atomic.Uint64
	stale    atomic.Uint64

	// The sanitizer (hazard.go): the run's sequence number; in strict mode its write record
	// and the earlier runs its accesses are checked against.
	id     uint64
	writes *writeSet
	after  []*Run
}

// Start begins a dispatch; its workgroups run on the CUs while the caller goes on. A shape
// error is returned at once (nothing runs).
func (p *Pool) Start(d Dispatch) (*Run, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	r := &Run{p: p, d: d, done: make(chan struct{}), stopCh: make(chan struct{})}
	r.total = uint64(d.Groups[0]) * uint64(d.Groups[1]) * uint64(d.Groups[2])
	r.groupItems = int(d.GroupSize[0] * d.GroupSize[1] * d.GroupSize[2])
	r.stack = d.Stack
	if r.stack == 0 {
		r.stack = abi.SHADER_STACK_DEFAULT
	}
	if s := d.Resume; s != nil {
		if err := s.fits(&d, r.total, r.groupItems, r.stack); err != nil {
			return nil, err
		}
		r.next = s.Next
		r.resume = append([]SavedGroup(nil), s.Groups...)
	}
	r.startTracking()
	p.stats.dispatches.Add(1)
	p.track(r)
	if !r.more() {
		r.finish()
		return r, nil
	}
	if !p.enqueue(r) {
		r.result = ErrClosed
		close(r.done)
		p.untrack(r)
	}
	return r, nil
}

// Done is closed when the run has ended: completed, failed, preempted or killed.
func (r *Run) Done() <-chan struct{} { return r.done }

// Result is how the run ended, once Done: nil (every workgroup completed), a *shader.Error,
// ErrKilled, or ErrPreempted with the state to Resume from.
func (r *Run) Result() (error, *Saved) {
	<-r.done
	if r.result == ErrPreempted {
		return r.result, &Saved{Next: r.next, Total: r.total, GroupItems: uint32(r.groupItems), Stack: uint32(r.stack),
			Groups: append(append([]SavedGroup(nil), r.resume...), r.saved...)}
	}
	return r.result, nil
}

// Executed is the number of instructions the run's work-items have executed so far.
func (r *Run) Executed() uint64 { return r.executed.Load() }

// StaleReads counts the run's stale L0 reads (strict mode).
func (r *Run) StaleReads() uint64 { return r.stale.Load() }

// Preempt asks every work-item of the run to stop between two instructions; the run then ends
// with ErrPreempted and its state. Workgroups not started stay unstarted. No effect on a run
// that has ended or is stopping already.
func (r *Run) Preempt() { r.stop(ErrPreempted) }

// Kill stops the run without saving anything (a queue or device reset). No memory access of
// the run begins after Kill returns; once Done is closed none is in progress either.
func (r *Run) Kill() {
	r.killed.Store(true)
	r.stop(ErrKilled)
}

func (r *Run) stop(why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping != nil || r.isDone() {
		return
	}
	if why == ErrPreempted {
		r.p.stats.preempts.Add(1)
	}
	r.stopping = why
	r.stopFlag.Store(true)
	close(r.stopCh)
	if r.active == 0 {
		r.finishLocked()
	}
}

func (r *Run) isDone() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// more reports whether workgroups remain to be claimed (r.mu held or before sharing).
func (r *Run) more() bool {
	return r.stopping == nil && (len(r.resume) > 0 || r.next < r.total)
}

// work is one workgroup to execute: a fresh one, or a preempted one to continue.
type work struct {
	group  uint64
	resume *SavedGroup
}

// take claims the next workgroup: ok if there was one, more if others remain after it.
func (r *Run) take() (w work, more, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.more() {
		return work{}, false, false
	}
	if n := len(r.resume); n > 0 {
		g := r.resume[n-1]
		r.resume = r.resume[:n-1]
		w = work{group: g.Index, resume: &g}
	} else {
		w = work{group: r.next}
		r.next++
	}
	r.active++
	return w, r.more(), true
}

// groupEnd is how a CU left a workgroup.
type groupEnd struct {
	err   error       // a *shader.Error: the run fails
	saved *SavedGroup // preempted: its state
}

// finishGroup records a workgroup's end and ends the run when nothing of it runs any more.
func (r *Run) finishGroup(e groupEnd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active--
	switch {
	case e.err != nil && r.stopping == nil:
		r.stopping = e.err
		r.stopFlag.Store(true)
		close(r.stopCh)
	case e.saved != nil:
		r.saved = append(r.saved, *e.saved)
	}
	if e.err == nil && e.saved == nil {
		r.p.stats.groups.Add(1)
	}
	if r.active == 0 && (r.stopping != nil || !r.more()) {
		r.finishLocked()
	}
}

func (r *Run) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finishLocked()
}

func (r *Run) finishLocked() {
	if r.isDone() {
		return
	}
	r.result = r.stopping
	var se *shader.Error
	if errors.As(r.result, &se) {
		r.p.stats.errors.Add(1)
		r.p.cfg.Log.Warn("compute.error", "compute: shader error ended the dispatch",
			"slot", r.d.Slot, "vmid", r.d.VMID, "err", se)
		r.push(abi.IH_SRC_SHADER_ERROR, [4]uint32{se.Reason, uint32(se.PC), uint32(se.Addr), uint32(se.Addr >> 32)})
	}
	close(r.done)
	r.p.untrack(r)
	if r.d.OnEnd != nil {
		r.d.OnEnd()
	}
}

func (r *Run) push(src uint8, data [4]uint32) {
	if r.p.cfg.Interrupts == nil {
		return
	}
	r.p.cfg.Interrupts.Push(engine.IV{Client: abi.IH_CLIENT_GRBM_CP, Source: src, RingID: r.d.RingID,
		VMID: uint8(r.d.VMID), PASID: r.d.PASID, Data: data})
}

// Trap implements shader.Trapper: HELPER_TRAP raises an IV with the code, the call's slot and
// the work-item's linear id in the dispatch.
func (r *Run) Trap(l *shader.Lane, pc int, code uint32) {
	d := &l.Dims
	st := &r.d.Start
	g0, g1, g2 := d.Group[0]-uint64(st[0]), d.Group[1]-uint64(st[1]), d.Group[2]-uint64(st[2])
	group := g0 + g1*d.NumGroups[0] + g2*d.NumGroups[0]*d.NumGroups[1]
	r.push(abi.IH_SRC_SHADER_TRAP, [4]uint32{code, uint32(pc), uint32(group*uint64(r.groupItems) + d.Linear), 0})
}

// step moves d from one work-item to the next in its workgroup (local x, then y, then z).
func (r *Run) step(d *shader.Dims) {
	d.Linear++
	for k := range 3 {
		d.Local[k]++
		d.Global[k]++
		if d.Local[k] < d.LocalSize[k] || k == 2 {
			return
		}
		d.Global[k] -= d.Local[k]
		d.Local[k] = 0
	}
}

// dims is the place of work-item i of workgroup g in the grid.
func (r *Run) dims(g uint64, i int) shader.Dims {
	d := &r.d
	var s shader.Dims
	for k := range 3 {
		s.LocalSize[k], s.NumGroups[k] = uint64(d.GroupSize[k]), uint64(d.Groups[k])
	}
	s.Group[0] = g % s.NumGroups[0]
	s.Group[1] = g / s.NumGroups[0] % s.NumGroups[1]
	s.Group[2] = g / (s.NumGroups[0] * s.NumGroups[1])
	li := uint64(i)
	s.Local[0] = li % s.LocalSize[0]
	s.Local[1] = li / s.LocalSize[0] % s.LocalSize[1]
	s.Local[2] = li / (s.LocalSize[0] * s.LocalSize[1])
	for k := range 3 {
		s.Group[k] += uint64(d.Start[k])
		s.Global[k] = s.Group[k]*s.LocalSize[k] + s.Local[k]
	}
	s.Linear = li
	return s
}
