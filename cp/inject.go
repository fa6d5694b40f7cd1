package cp

import (
	"vgpu/abi"
	"vgpu/inject"
)

// Fault injection (package inject): a queue.stall rule makes a queue that has work stop
// fetching, as a queue hung on a packet that never finishes: rptr stays where it is, the HQD
// reads busy (RUNNING), no fence is written. A drain or an MES preemption does not stop it
// (it never reaches a packet boundary), so MES's hang detection and a driver's job timeout
// fire; a reset does (DEQUEUE_RESET, an engine reset, MES's Kill, a device reset), which is
// how the driver recovers. The rule stays in the set, but an N rule has spent itself.

// SetInjector gives the CP its rule set (nil: none). Call before queues run.
func (c *CP) SetInjector(s *inject.Set) { c.inj = s }

// injectedStall asks the rules whether q stalls now and, if so, stalls it until a reset ends
// the activation (true: the caller returns, as after a stop).
func (q *queue) injectedStall() bool {
	db := inject.Any
	if q.doorbellEn {
		db = int(q.doorbellOff)
	}
	if !q.c.inj.Stall(q.slot, db) {
		return false
	}
	if !q.endBatch() { // what ran before the stall is published
		return true
	}
	q.state.Store(abi.HQD_STATE_RUNNING)
	q.endTurn()
	for q.stopReq.Load() != abi.HQD_DEQUEUE_RESET {
		<-q.wake
	}
	return true
}
