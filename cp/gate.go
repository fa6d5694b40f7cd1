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

func (q *queue) read(bypass bool, va uint64, p []byte) error {
	if !q.open() {
		return errRevoked
	}
	if err := q.mem.Read(engine.Access{VMID: q.vmid, Slot: q.slot, Bypass: bypass}, va, p); err != nil {
		return memFault(err, va)
	}
	return nil
}

func (q *queue) write(bypass bool, va uint64, p []byte) error {
	if !q.open() {
		return errRevoked
	}
	if err := q.mem.Write(engine.Access{VMID: q.vmid, Slot: q.slot, Bypass: bypass}, va, p); err != nil {
		return memFault(err, va)
	}
	return nil
}

// copyVia is engine.Copier.Copy; an error naming its address (engine.FaultAddresser) is
// reported there.
func (q *queue) copyVia(c engine.Copier, bypass bool, dst, src, n uint64) error {
	if !q.open() {
		return errRevoked
	}
	if err := c.Copy(engine.Access{VMID: q.vmid, Slot: q.slot, Bypass: bypass}, dst, src, n); err != nil {
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
	if err := q.mem.CacheOp(engine.Access{VMID: q.vmid, Slot: q.slot}, op, va, size); err != nil {
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

func (q *queue) writeReg(r, v uint32) error {
	if !q.open() {
		return errRevoked
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
