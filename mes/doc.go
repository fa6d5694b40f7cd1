// Package mes is the scheduler firmware (AMD's MES): it maps many user queues, described by
// MQDs in memory, onto the few HQD slots of the CP that it owns, and takes them off again —
// by priority, time slice and idleness — saving each queue's execution state so that a later
// map, in any slot, continues exactly where it stopped. docs/device.md ("MES") is the
// driver's view; this comment is the implementation's.
//
// # Boundaries
//
// mes imports abi, cp, engine and ratelog. It reaches memory through engine.Memory (VMID 0,
// bypassing L2: the API ring, api_status fences, MQDs, gang contexts, wptr shadows, the event
// log, the hung-doorbell array), registers through cp.Registers (MISC READ_REG, WRITE_REG,
// WAIT_REG_MEM), interrupts through engine.Interrupts (IH_SRC_MES_*), the HQD slots through
// Slots (cp.CP's Map/Preempt/Saved/Kill/Release/Kick/SetOwned) and process address spaces
// through AddressSpaces (the device programs VM_CONTEXT, the PASID LUT and invalidates).
//
// # Threading
//
// One goroutine per activation (MES_RING_ACTIVE = 1) is the firmware. It owns every table
// (processes keyed by process context, gangs by gang context, queues by doorbell) and makes
// every call out, never holding a lock of this package across one. The register path
// (ReadReg/WriteReg, with the device's register lock held), Doorbell and Notify (any
// goroutine) never wait for it: they read atomics and published snapshots (the doorbell →
// queue map is copied on write), append to a small event list, and wake the goroutine with a
// non-blocking send. Lock order: MES.mu → MES.slotMu → the CP's locks.
//
// The loop: take in events (doorbells of queues not in a slot, aggregated doorbells, the
// periodic wptr-shadow poll), observe the occupied slots (a queue that stopped is saved and
// its slot released; idle queues are noted; a preemption past its grace is a hang), run API
// frames in order (a frame that must wait — REMOVE, SUSPEND, RESET, MISC WAIT_REG_MEM — stalls
// the ring, not the scheduler), apply the policy — then, if a map gave an HQD work and no
// queue waits, yield once to the HQD goroutines it woke, then make the memory writes the policy
// deferred (deferred.go: a switch's new queue starts before the old one's MQD is written) —
// then sleep until the next event or timer (a preemption grace, an idle grace, a quantum
// someone waits for, the poll, a register wait).
// Every timer has a floor, every pass does bounded work (at most 64 frames), and every frame
// completes or fails with a named reason: the firmware never wedges and never spins.
//
// # Doorbells and lost submissions
//
// A doorbell reaches the scheduler before the CP (device.routeDoorbell). The scheduler records
// its value in the queue (lastDB) whether or not the queue is in a slot; if it is not and the
// intercept is on, the queue is flagged. Placing a queue sets inSlot, maps it, then reads
// lastDB again and kicks the HQD with anything newer; unmapping clears inSlot and then reads
// lastDB. Go's atomics are sequentially consistent, so every doorbell is either delivered to
// the HQD or seen by the scheduler: no submission is lost in a switch.
//
// # Lifecycle
//
// Reset (device reset, FLR, disconnect) revokes the activation without waiting: under slotMu,
// so no Slots call of it begins afterwards, and every other call out checks the gate (enter/
// leave) first; Quiesce waits, bounded, until none of a revoked activation's call outs is in
// flight. The CP's own reset stops the queues and clears ownership. MES_RING_ACTIVE = 0 is a
// MES pipe reset: the same, and the owned slots are killed and returned to the kernel.
package mes
