package cp

import (
	"errors"
	"sync/atomic"
	"vgpu/engine"

	"vgpu/abi"
)

// gate is an activation's half of the generation contract: every call out of cp a queue
// goroutine makes (Memory, Copier, Registers, Interrupts) goes through it.
//
//   - revoked is set once, by the register path, when the activation stops being its slot's
//     current one: Reset, an engine reset of its slot, or a newer activation. From then on
//     every call out is refused (Stats.StaleCallouts) and the goroutine stops.
//   - inflight is true while the goroutine holds an execution turn (turn.go): it is set
//     before the turn's first look at revoked and cleared when the turn ends, and the
//     goroutine calls out only inside a turn, after checking revoked. So once the revoker
//     (which stores revoked, then loads inflight; Go's atomics are sequentially consistent)
//     sees inflight false, that activation can never call out again: Quiesce and
//     CP_ENGINE_RESET_STATUS wait for exactly that. A turn is bounded by the budget and by
//     one call out, so this costs one atomic load per call out on the hot path.
//   - holding says the goroutine owns one of the CP's turns. A revocation takes the turn back
//     at once (whoever clears holding releases it), so a goroutine stuck in a call out that
//     never returns cannot keep other queues from running.
//
// The fields sit on their own cache line: the register path writes the queue's wptr on
// every kick and must not slow down the goroutine's checks.
type gate struct {
	_        [64]byte
	revoked  atomic.Bool
	inflight atomic.Bool
	holding  atomic.Bool
	_        [61]byte
}

// errRevoked ends the execution of an activation whose gate was closed; it is never
// reported as a halt.
var errRevoked = errors.New("cp: activation revoked by a reset")

// revoke closes q's gate and asks it to stop (slot mutex held). It does not wait.
func (q *queue) revoke() {
	if q.gate.revoked.Swap(true) {
		return
	}
	q.stopReq.Store(abi.HQD_DEQUEUE_RESET)
	if q.gate.holding.CompareAndSwap(true, false) {
		q.c.turns.release()
	}
	q.signal()
}

// open reports whether q may call out now; a refused call is counted.
func (q *queue) open() bool {
	if !q.gate.revoked.Load() {
		return true
	}
	q.c.staleCallouts.Add(1)
	return false
}

// draining reports whether q was revoked and may still be inside a call out.
func (q *queue) draining() bool { return q.gate.revoked.Load() && q.gate.inflight.Load() }

// The call outs. Each checks the gate first; memory and register errors come back as
// faults carrying the address or register.

// curVMID is the address space of the packet being executed: its stream's (the ring's
// HQD_VMID, or the VMID an INDIRECT_BUFFER on a kernel stream named).
func (q *queue) curVMID() int { return q.streams[q.level].vmid }

// access describes a packet's data access.
func (q *queue) access(bypass bool) engine.Access {
	return engine.Access{VMID: q.streams[q.level].vmid, Slot: q.slot, Bypass: bypass, Client: q.client}
}

// ringAccess describes the queue's own accesses outside packets (the polled wptr, the rptr
// report): the ring's address space, whatever IB is executing.
func (q *queue) ringAccess() engine.Access {
	return engine.Access{VMID: q.vmid, Slot: q.slot, Bypass: true, Client: abi.VM_CID_CPF}
}

func (q *queue) read(bypass bool, va uint64, p []byte) error {
	return q.readAs(q.access(bypass), va, p)
}

func (q *queue) readAs(a engine.Access, va uint64, p []byte) error {
	if !q.open() {
		return errRevoked
	}
	q.hazardCheck(a, va, uint64(len(p)), false)
	return q.readChecked(a, va, p)
}

// readPoll is a WAIT_REG_MEM's poll of memory: a synchronisation, never a hazard (hazard.go).
func (q *queue) readPoll(bypass bool, va uint64, p []byte) error {
	if !q.open() {
		return errRevoked
	}
	return q.readChecked(q.access(bypass), va, p)
}

// readChecked is a read call out once the gate is checked.
func (q *queue) readChecked(a engine.Access, va uint64, p []byte) error {
	if err := q.mem.Read(a, va, p); err != nil {
		return q.memError(err, a, va, p, false)
	}
	return nil
}

// fetchRead reads command dwords of s (bypassing L2: command fetch is coherent). In a process
// address space an IB fetch is an instruction fetch (PTE_EXECUTABLE); the ring is data.
func (q *queue) fetchRead(s *stream, va uint64, p []byte) error {
	if !q.open() {
		return errRevoked
	}
	a := engine.Access{VMID: s.vmid, Slot: q.slot, Bypass: true, Client: abi.VM_CID_CPF}
	if !s.ring && s.vmid != 0 {
		a.Kind = engine.Fetch
	}
	if err := q.mem.Read(a, va, p); err != nil {
		return q.memError(err, a, va, p, false)
	}
	return nil
}

func (q *queue) write(bypass bool, va uint64, p []byte) error {
	return q.writeAs(q.access(bypass), va, p)
}

func (q *queue) writeAs(a engine.Access, va uint64, p []byte) error {
	if !q.open() {
		return errRevoked
	}
	q.hazardCheck(a, va, uint64(len(p)), true)
	if err := q.mem.Write(a, va, p); err != nil {
		return q.memError(err, a, va, p, true)
	}
	return nil
}

// memError handles a failed memory call out: a retry fault (engine.Retrier) parks the queue
// until the driver resolves it and then replays the access — as often as it faults again —
// and a dequeue or reset ends the wait (errStop); any other error is a halt. (No closure for
// the replay: captured arguments would move to the heap on the hot path's every call.)
func (q *queue) memError(err error, a engine.Access, va uint64, p []byte, write bool) error {
	for {
		var r engine.Retrier
		if !errors.As(err, &r) {
			return memFault(err, va)
		}
		if err := q.retryWait(r.RetryReady()); err != nil {
			return err
		}
		if !q.open() {
			return errRevoked
		}
		if write {
			err = q.mem.Write(a, va, p)
		} else {
			err = q.mem.Read(a, va, p)
		}
		if err == nil {
			return nil
		}
	}
}

// retryWait waits, holding no execution turn (like a parked WAIT_REG_MEM), until ready is
// closed or a dequeue is requested; then it takes a turn again.
func (q *queue) retryWait(ready <-chan struct{}) error {
	q.rptr.Store(q.streams[0].pos)
	q.flushCount()
	q.notePacket()
	prev := q.state.Swap(abi.HQD_STATE_WAITING) // WAITING already inside a WAIT_REG_MEM's poll
	q.c.retryWaits.Add(1)
	defer q.state.CompareAndSwap(abi.HQD_STATE_WAITING, prev)
	q.endTurn()
	q.notify()
	for done := false; !done; {
		select {
		case <-ready:
			done = true
		case <-q.wake: // a kick, a memory write, or a dequeue request
		}
		if q.stopReq.Load() != 0 {
			return errStop
		}
	}
	if !q.takeTurn(stopOnDequeue) {
		return errStop
	}
	return nil
}

// copyVia is engine.Copier.Copy; an error naming its address (engine.FaultAddresser) is
// reported there.
func (q *queue) copyVia(c engine.Copier, bypass bool, dst, src, n uint64) error {
	if !q.open() {
		return errRevoked
	}
	a := q.access(bypass)
	q.hazardCheck(a, src, n, false)
	q.hazardCheck(a, dst, n, true)
	err := c.Copy(a, dst, src, n)
	for err != nil {
		var r engine.Retrier
		if !errors.As(err, &r) {
			break
		}
		if err := q.retryWait(r.RetryReady()); err != nil {
			return err
		}
		if !q.open() {
			return errRevoked
		}
		err = c.Copy(a, dst, src, n) // the whole copy again: it is idempotent
	}
	if err != nil {
		va := src
		var at engine.FaultAddresser
		if errors.As(err, &at) {
			va = at.FaultAddress()
		}
		return memFault(err, va)
	}
	return nil
}

func (q *queue) cacheOp(op engine.CacheOp, va, size uint64) error {
	if !q.open() {
		return errRevoked
	}
	if err := q.mem.CacheOp(q.access(false), op, va, size); err != nil {
		return memFault(err, va)
	}
	return nil
}

func (q *queue) fenceCheck(va uint64) error {
	if !q.open() {
		return errRevoked
	}
	q.mem.FenceCheck(q.slot, va)
	return nil
}

// errProcessRegister refuses register access by packets of a process address space: the
// register BAR holds every queue's and every context's state.
var errProcessRegister = errors.New("register access from a process address space (VMID 1..15)")

func (q *queue) writeReg(r, v uint32) error {
	if !q.open() {
		return errRevoked
	}
	if q.curVMID() != 0 {
		return badRegister("register write refused", errProcessRegister)
	}
	if err := q.c.regs.WriteReg(r, v); err != nil {
		return badRegister("register write refused", err)
	}
	return nil
}

func (q *queue) readReg(r uint32) (uint32, error) {
	if !q.open() {
		return 0, errRevoked
	}
	if q.curVMID() != 0 {
		return 0, badRegister("register read refused", errProcessRegister)
	}
	v, err := q.c.regs.ReadReg(r)
	if err != nil {
		return 0, badRegister("register read refused", err)
	}
	return v, nil
}

func (q *queue) push(iv engine.IV) error {
	if !q.open() {
		return errRevoked
	}
	q.c.irq.Push(iv)
	return nil
}
