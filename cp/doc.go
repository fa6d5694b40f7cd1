// Package cp is the command processor: the NumSlots (17) hardware queue slots (HQDs) that
// fetch PM4 packets from rings in GPU memory and execute them. Slot 0 is the graphics queue
// (ME 0, pipe 0, queue 0); slots 1..16 are compute (ME 1, pipe (slot-1)/8, queue (slot-1)%8),
// which RingID encodes for interrupt vectors. docs/device.md is the guest's view; this
// comment is the implementation's.
//
// # Boundaries
//
// cp imports abi, engine and ratelog only. What crosses its boundary is package engine's
// contract, shared with every engine and the memory side (docs/design.md): engine.Access,
// engine.CacheOp (a size of engine.CacheAll means every line), engine.IV, and the interfaces
// engine.Memory (gpummu.MMU in the device; an engine.Copier too), engine.Interrupts (irq.IH)
// and cp's own Registers (the register file, by dword offset). The device passes the real
// parts in directly; tests use cptest's stand-ins.
//
// # Data flow
//
//	register path                             queue goroutine (one per activation)
//	  WriteHQD/ReadHQD ── HQD registers           take a turn (CP-wide FIFO, MaxRunning)
//	  WriteHQD(PQ_WPTR), Doorbell ── kick ──────►   wptr (kick, doorbell or poll)
//	  Wake (an engine wrote memory) ── wake ────►   fetch ring/IB dwords: Memory.Read, Bypass
//	  DEQUEUE_REQUEST ── stop flag + wake ──────►   decode header → packet handler
//	  Reset, CP_ENGINE_RESET ── revoke ─────────►   gate check → Memory / Registers / Interrupts
//	                                                end of batch: publish rptr, PQ_RPTR_REPORT
//	                                                budget spent, idle, parked: give the turn back
//
// A queue fetches up to 4 KiB of ring or IB at a time into a per-stream buffer (a packet
// may straddle the ring's end; ring fetches stop at wptr, so nothing unsubmitted is read),
// decodes headers without allocating, and counts packets per batch. Packets of one queue run
// strictly in order, each to completion, so EVENT_WRITE(CS_PARTIAL_FLUSH) is trivially
// satisfied; queues run concurrently with each other, up to Config.MaxRunning at a time.
//
// # Threading and the locking rule
//
// The register path — ReadHQD, WriteHQD, ReadReg, WriteReg, Reset, Stats, Queue — is called
// by the device, normally with its register lock held (and WriteHQD/WriteReg also by packets,
// through the register file, from a queue goroutine). It never blocks on a queue goroutine
// and never calls Memory, Registers or Interrupts: it takes the slot's mutex, the engine-reset
// mutex or the turn FIFO's mutex briefly, sets atomics, and wakes goroutines with non-blocking
// sends on one-slot channels. Doorbell and Wake take no lock at all (atomic loads, then the
// same non-blocking kick), so they may be called from any goroutine with or without the
// device lock: the vfio-user worker for a trapped doorbell, the doorbell poller in poll mode,
// a Memory implementation after an engine write. Even an invalid ring configuration, which
// halts the queue at once on ACTIVE=1, has its interrupt sent by the queue's goroutine.
//
// A queue goroutine takes its slot's mutex only to record a halt or its end, and the turn
// FIFO's mutex to queue for a turn, never across a call out (a call out may take the device
// lock, e.g. a packet writing HQD registers through the register file). Lock order: device
// lock → engine-reset mutex → slot mutex → turn FIFO mutex. Only Quiesce and Close wait for
// goroutines, both bounded; neither may be called with the device's register lock held (a
// call out in flight may be waiting for it).
//
// An idle queue (rptr == wptr) blocks on its wake channel: no CPU, no timer, no turn (with
// wptr polling, the poll timer). A WAIT_REG_MEM that does not hold parks the queue (STATE =
// WAITING) without a turn: it blocks on the wake channel and a timer that starts at the
// packet's poll interval (at least 10 µs) and doubles to 1 ms, and takes a turn to re-check
// on every wake — Wake (engine memory writes; Memory implementations call it), kicks,
// doorbells, dequeue requests — so a long wait costs about a thousand cheap checks a second.
// Wake carries no address, so wake-driven re-checks are spaced by a hold-off (10 µs, doubling
// to 200 µs while wakes keep coming faster, reset by a quiet spell): a queue streaming writes
// elsewhere cannot make a parked queue spin. The endless kernel blocks on the channel alone.
//
// # Budgets
//
// Everything a guest can make a queue do is bounded per packet (see Bounds), but a queue can
// always have more work: a ring that writes its own HQD_PQ_WPTR, IB chains resubmitted from
// the ring, DMA_DATA loops. So execution is split into turns. Config.MaxRunning goroutines
// (default max(1, GOMAXPROCS-1), leaving a P for the transport) may hold a turn at once; the
// others queue by priority — a mapped queue's Image.Priority (MES passes the gang's level),
// NORMAL for register-activated queues — and first come, first served within one. A turn
// lasts at most Config.TurnBudget (default 100 µs, checked between packets, between the
// 64 KiB / 2 MiB pieces of DMA_DATA and kernels, and every 256 dwords of long register or
// WR_ONE_ADDR writes); then, if a queue of at least its priority is waiting, the queue yields
// (Stats.Yields): it hands the turn to the best waiter and queues again (with no spare P it
// also lets the Go scheduler run timers and the transport); if nobody waits, or only lower
// priorities, the turn is simply renewed (after a Gosched without a spare P); and a queue of
// a higher priority waiting ends a lower one's turn at its next unit of work (packet or
// chunk): a HIGH user queue waits for a packet boundary, never for a LOW one's budget. The clock is read only when the
// work done in the turn predicts the budget is spent (time.Now costs up to half a
// microsecond on some hosts). A queue gives its turn back before it blocks, so idle and
// parked queues hold none. A goroutine holding a turn while stuck in a call out delays the
// others until it returns or its activation is revoked (which takes the turn back).
//
// # Queue lifecycle
//
// HQD registers are programmed while ACTIVE is 0; while active, writes to them are ignored
// (and counted: Stats.IgnoredWrites), so they read back what is in effect. ACTIVE=1 snapshots
// the configuration, sets rptr = wptr = 0 and starts the goroutine. It validates the ring:
// PQ_BASE 256-byte aligned, QUEUE_SIZE 5..20 (64 dwords to 2^21), the ring inside the 48-bit
// space, VMID ≤ 15, PQ_RPTR_REPORT_ADDR dword aligned and (when polling) PQ_WPTR_POLL_ADDR
// qword aligned; otherwise the queue is HALTED with CP_ERROR_RING_CONFIG (ERROR_ADDR = the
// bad address, ERROR_INFO = PQ_CONTROL) before WriteHQD returns, and its goroutine reports
// that snapshot (a DEQUEUE_RESET may clear the fields first). ACTIVE=0 writes are ignored:
// stopping is DEQUEUE_REQUEST's job. ACTIVE=1 is also ignored (Stats.RefusedActivations)
// while MaxLivePerSlot goroutines of the slot are alive — earlier activations revoked while
// stuck in a call out — so resets cannot pile up goroutines behind a call that never returns.
//
// The write pointer is a monotonic 64-bit dword count. It arrives by Doorbell (every active
// queue with DOORBELL_EN and a matching DOORBELL_OFFSET gets the value), by PQ_WPTR_LO/HI
// (each write replaces its half and kicks; write LO then HI, as a 64-bit MMIO access does),
// or, with PQ_WPTR_POLL_CNTL.EN, from the qword at PQ_WPTR_POLL_ADDR, read (bypassing L2) on
// every kick and every INTERVAL_US (0: 100 µs; at least 10 µs); a polled value overrides the
// others. A wptr behind rptr is not work (it is what LO-then-HI looks like between the writes
// when the high half changes); one more than a ring ahead halts with CP_ERROR_RING_CONFIG
// (ERROR_INFO = its low 32 bits). A packet that extends past wptr waits for more.
//
// After each batch (the queue caught up with the wptr it saw, or it parks) the 32-bit rptr,
// wrapped to the ring, is written to PQ_RPTR_REPORT_ADDR, bypassing L2 (unless the address is
// 0 or NO_UPDATE_RPTR is set). PQ_RPTR is the fetch position: an INDIRECT_BUFFER packet is
// consumed when its IB starts; any other packet when it finishes, so a parked WAIT_REG_MEM or
// a halted packet keeps rptr on itself. CP_PACKETS is updated at the end of each batch and
// each turn.
//
// DEQUEUE_DRAIN stops at the next packet boundary at any IB level (a parked WAIT_REG_MEM is
// one; a running kernel is not) and goes IDLE keeping rptr. DEQUEUE_RESET stops at once —
// between packets, between 64 KiB chunks of DMA_DATA and kernels, in a parked wait, in the
// endless kernel, while waiting for a turn, or from HALTED — and clears the error. A halted
// queue stays ACTIVE (STATE HALTED) until a dequeue request: DRAIN makes it IDLE keeping the
// error, RESET clears it.
//
// # Mapped queues (MES)
//
// The scheduler (package mes) runs queues whose descriptors live in memory on the slots it
// owns, through a Go API instead of HQD registers (mapped.go). Map(slot, Image) starts a
// queue from an image — ring configuration (VMID, base, PQ_CONTROL, rptr report, doorbell
// control, protected fence address and its IV's doorbell offset), monotonic Rptr/Wptr and
// an ExecState — into a slot that has no live queue and no unreleased mapped one. The image
// is validated as ACTIVE=1 validates the ring, plus: VMID ≤ 15, Rptr ≤ Wptr ≤ Rptr + ring
// size, Level ≤ IBMaxDepth with each IB dword aligned, within IB_SIZE, Pos ≤ Size, not
// wrapping and in its parent stream's VMID when that is a process's (a process never leaves
// its address space), IBCount ≤ MaxIBExpansions, Progress a dword count below 2^26 and,
// with WaitWritten, only with a packet at the position, the fence qword aligned, no Error. A
// bad image is ErrBadImage wrapped with the reason (others: ErrBadSlot, ErrSlotBusy,
// ErrSlotDraining, ErrClosed); the slot stays as it was. Map never blocks and never calls
// Memory; the queue goroutine starts at the image's stream, position, IB stack, IB count
// and user data. Ring-id and slot dependent things (IVs, the memory client, fault reports)
// follow the new slot. Mapped queues do not poll a wptr: it arrives by doorbell (routed by
// DoorbellControl as for any queue) or Kick, and only moves forward (max of the current and
// the delivered value).
//
// Preempt asks the queue to stop at its next preemption point, without blocking: a packet
// boundary at any IB level (unlike DEQUEUE_DRAIN, the IB stack is kept); a parked
// WAIT_REG_MEM (rptr stays on it; it is evaluated again on resume, and an OPERATION 1 whose
// reference was written records WaitWritten so the write is not repeated); a retry-fault
// wait (the packet is replayed from its start on resume: what it did before the fault it
// does again with the same data — rewrites, cache actions — and its IV comes after every
// access); between the pieces of a DMA_DATA
// (64 KiB, or 2 MiB through a Copier; Progress records the bytes done and the resumed packet
// moves only the rest — a fixed source is read again); a wait for a turn; idleness. A
// running dispatch finishes first; the endless kernel never does, which is how the
// scheduler sees a hang: only Kill stops it. An idle queue is stopped by Preempt itself (its
// goroutine publishes its state atomically before it shows Idle and sleeps), so Saved has
// the image as soon as Preempt returns and no Notify follows. Saved returns the image and how the
// queue ended: Preempted (the image continues it exactly, in any slot), Halted (Error and
// ErrorAddr set; the image points at the bad packet; Map refuses it), Killed (Kill,
// DEQUEUE_RESET: configuration and published pointers only), Running while the goroutine
// has not stopped, Empty without a mapped queue. Progress and WaitWritten belong to the
// packet at the image's position: a resumed stream whose first packet is not a DMA_DATA but
// has a Progress halts with CP_ERROR_BAD_PACKET. Kill stops the queue at once, as
// DEQUEUE_RESET, the endless kernel too: its activation is revoked (no further call out) and
// Saved reports Killed before Kill returns. Release forgets a stopped mapped queue (it
// revokes it, to be sure): the slot is Empty, ACTIVE reads 0, and Map may use it again.
//
// While mapped, a queue is an ordinary activation: rptr reports, halts with their IVs and
// log lines, the gate and its revocation, Reset, CP_ENGINE_RESET, Quiesce and Close all
// apply (after Reset or an engine reset its slots are Empty). A halted mapped queue shows
// HALTED (ACTIVE 1) until Release; a preempted or killed one reads ACTIVE 0. Its HQD
// registers read back the live queue (ACTIVE, RPTR, WPTR, STATUS, FENCES, ERROR_*, and the
// image's VMID, PQ_BASE, PQ_CONTROL, RPTR_REPORT_ADDR, DOORBELL_CONTROL; the wptr-poll
// registers read 0). A DEQUEUE_REQUEST written to a slot MES does not own preempts (DRAIN)
// or kills (RESET) its mapped queue. SetOwned(mask) names the slots MES owns: HQD register
// writes to them from the register path — the driver's MMIO or packets through the register
// file — are ignored (Stats.IgnoredWrites, rate-limited log), reads still show the live
// queue. Reset clears it; CP_ENGINE_RESET does not.
//
// Map, Preempt, Saved, Kill, Release and SetOwned never block on a queue goroutine and never
// call out: they take the slot's mutex briefly (lock order: after the device lock and the
// engine-reset mutex, like the register path) or none (Kick, SetOwned), so the scheduler
// may call them from its own goroutine with its own lock held, as long as Notify does not
// wait for that lock.
//
// Config.Notify(slot) is the scheduler's wake-up: called from the queue goroutine, with no
// cp lock and no turn held, whenever a mapped queue stops (preempted, halted, killed — except
// a stop Preempt made itself), goes idle (rptr caught up with wptr) or parks in a
// WAIT_REG_MEM or a retry-fault wait (once per wait). It must not block. Doorbell reports
// whether a running queue took the value; a mapped queue that stops while a doorbell races
// it saves its wptr after it reads ACTIVE 0, so the doorbell either is in the saved image or
// counts as a miss (false, Stats.DoorbellMisses) for the scheduler to handle.
//
// A switch (Preempt, Saved, Release, Map) costs one queue struct and no goroutine: a
// preempted mapped queue's goroutine, past its last call out, stays as its slot's spare and
// runs the slot's next mapped queue (which takes over its wake and grant channels; a stray
// wake is only a hint), until a reset or Close ends it; a queue mapped into another slot
// starts a goroutine. An idle image (Rptr == Wptr, no Progress or WaitWritten) is mapped as
// if its goroutine had gone to sleep: QueueStats.Idle at once, no Notify for that, and the
// spare is woken only by the queue's first kick (or stop). Fetch and DMA buffers are pooled
// across activations, the queue's timer is created on first use, and saved queues do not
// count against MaxLivePerSlot (which bounds goroutines that may be inside a call out).
// BenchmarkSwitch measures a switch beside 20 one-dword WRITE_DATA packets.
//
// # Resets and the generation contract
//
// Each activation has a gate (gate.go). A goroutine calls out — Memory (Read, Write, CacheOp,
// FenceCheck, Copier.Copy), Registers, Interrupts.Push — only inside a turn and only after
// checking that its gate is open; holding a turn counts it as in flight. Reset, an engine
// reset of its slot, or a newer activation of its slot revokes the gate (the slot's
// generation moves on): the goroutine is asked to stop, its turn is taken back at once, and
// every call out it attempts from then on is refused (Stats.StaleCallouts) and ends it
// quietly (no halt, no IV, no log). A goroutine that is slow or stuck in a call out can
// therefore never act after a reset, whether or not anyone waits for it.
//
//   - Reset stops every queue at once, revokes every activation alive, and returns every HQD
//     register and counter (CP_PACKETS, CP_HALTS, CP_ENGINE_RESET_STATUS, CP_ENGINE_RESETS)
//     to power-on values; it does not wait.
//   - Quiesce(timeout) waits, sleeping between checks, until no revoked activation is in
//     flight (Stats.Draining = 0): after it returns true nothing started before the last
//     revocation can touch memory, registers or interrupts. The device calls it after it has
//     cut the engines off from memory, which makes in-flight accesses return promptly.
//   - Close is Reset that also refuses later activations, then waits at most
//     Config.StopTimeout for every goroutine the CP started, and says so (rate-limited) if
//     some are still inside a call out.
//   - CP_ENGINE_RESET (write-only; GFX = slot 0, COMPUTE = slots 1..16, both = every slot)
//     does for the named engines what Reset does for the CP — stop, revoke, registers to
//     power-on — without touching the other engine's queues or CP_PACKETS/CP_HALTS.
//     CP_ENGINE_RESET_STATUS reads the engines whose reset is still in progress: a bit clears
//     (and CP_ENGINE_RESETS counts one) once no revoked activation of that engine's slots is
//     in flight; completion is evaluated when either register (or Stats) is read. A write
//     naming an engine already resetting resets it again and merges with it. A packet may
//     reset its own engine: its next call out is refused.
//
// # Packets
//
// PM4 type-3 packets in AMD encoding (amd-model §1.3) and type-2 fillers. Every packet with a
// fixed layout must have its exact COUNT; memory addresses must be dword aligned (qword for
// 64-bit RELEASE_MEM data); register operands are dword offsets in bits [17:0].
//
//   - NOP skips its payload without fetching it; PACKET3(NOP, 0x3FFF) is one dword.
//   - SET_CONFIG_REG / SET_UCONFIG_REG write Registers at space base + offset + i and must stay
//     in their space (else CP_ERROR_BAD_REGISTER). SET_SH_REG keeps COMPUTE_USER_DATA_0..15 per
//     activation (the built-in kernels' arguments); other SH registers are accepted and
//     ignored (there is no shader state).
//   - WRITE_DATA: DST_SEL 0 registers (WR_ONE_ADDR: all to one), 1 and 5 memory (through L2
//     unless CACHE_POLICY is BYPASS), 2 memory through L2; others CP_ERROR_BAD_PACKET.
//     WR_CONFIRM needs nothing: every access is synchronous.
//   - COPY_DATA: source register, memory (2, through L2 unless BYPASS), immediate (5) or the
//     GPU clock (9); destination register or memory (2 through L2; 5 honours DST_CACHE_POLICY);
//     32 or 64 bits (registers r and r+1).
//   - INDIRECT_BUFFER: from the ring IB1, from IB1 IB2; deeper is CP_ERROR_IB_DEPTH. CHAIN
//     replaces the current IB (a CHAIN in the ring itself is CP_ERROR_BAD_PACKET). Size 0 is
//     an empty IB. IBs are fetched bypassing L2. Their VMID field counts only in a kernel
//     stream (the ring of a VMID-0 queue, or a VMID-0 IB): a non-zero one runs the IB — its
//     fetch (an engine.Fetch access in a process VMID), its packets' accesses and the IBs it
//     starts — in that VMID; in a process stream it is ignored, so a process never leaves its
//     address space. Each ring-level INDIRECT_BUFFER allows MaxIBExpansions IB
//     starts (calls and chains at any level) before CP_ERROR_IB_LIMIT: a chain to itself ends
//     instead of hanging, and a long run of well-formed submissions never trips it.
//   - RELEASE_MEM (end of pipe; in-order execution makes everything before it complete): GL2
//     cache actions (WB and/or INV of everything, then DISCARD; GL2_RANGE has no range here),
//     then, when DATA_SEL writes data (1: 32 bits, 2: 64, 3: GPU clock, 4: system clock),
//     Memory.FenceCheck and the write — bypassing L2 when DST_SEL is 0 and CACHE_POLICY is
//     BYPASS, else through L2 — counted in HQD_FENCES, then for INT_SEL 1 or 2 an IV
//     {IH_CLIENT_GRBM_CP, IH_SRC_CP_EOP, ring id, VMID, Data[0] = INT_CTXID}.
//   - ACQUIRE_MEM: GCR_CNTL GL2_WB/GL2_INV/GL2_DISCARD on everything, or with GL2_RANGE = 2 on
//     COHER_BASE/COHER_SIZE (256-byte units; an all-ones size is everything, 0 nothing).
//   - WAIT_REG_MEM: register or memory (through L2 unless BYPASS), functions 0..6 on
//     (value & mask) vs (reference & mask); OPERATION 1 writes the reference to REG_ADDR1 and
//     polls REG_ADDR2 (registers only); OPERATION 3 is a wait (every wait is preemptible).
//   - EVENT_WRITE with COUNT 0 (CS_PARTIAL_FLUSH and other events without data) is a no-op.
//     With an address (COUNT 2: sampling events such as ZPASS_DONE or SAMPLE_PIPELINESTAT)
//     it is CP_ERROR_BAD_PACKET: there is no pipeline to sample, and accepting it would leave
//     the address unwritten and a wait on it hanging. amdgpu's kernel rings never emit it
//     (they use EVENT_WRITE only for partial flushes, COUNT 0); sampling events come from
//     graphics user-mode drivers' occlusion and statistics queries.
//   - DMA_DATA: SRC_SEL 0/3 address, 2 fill data; DST_SEL 0/3 address. SEL 0 goes straight to
//     memory, SEL 3 through L2 unless its cache policy is BYPASS. Any byte count up to
//     2^26-1, moved in 64 KiB chunks; SAIC (a fixed source: a fill with the dword read once)
//     and DAIC (a fixed destination: it receives the last dword) need a multiple of 4. SAS/DAS
//     (register addresses) and GDS are CP_ERROR_BAD_PACKET.
//   - PFP_SYNC_ME: a no-op on the graphics queue; on a compute queue, which has no PFP,
//     CP_ERROR_BAD_OPCODE (amdgpu emits it on the graphics ring only).
//   - DISPATCH_DIRECT: DIM_X*DIM_Y*DIM_Z ≤ MaxDispatchGroups workgroups of the built-in
//     kernel in COMPUTE_USER_DATA_0 (KERNEL_*), through L2: FILL writes USER_DATA_5 to
//     groups*KERNEL_GROUP_DWORDS dwords at USER_DATA_1/2; COPY copies as many from USER_DATA_3/4;
//     INCREMENT adds the group count to the dword at USER_DATA_1/2; ENDLESS never finishes
//     (STATE BUSY_KERNEL until DEQUEUE_RESET). KERNEL_NONE or unknown: CP_ERROR_BAD_PACKET.
//   - PROTECTED_FENCE_SIGNAL (PM4_IT_PROTECTED_FENCE_SIGNAL, COUNT 0, its one payload
//     dword reserved: else CP_ERROR_RESERVED_BITS): only on a mapped queue with a fence
//     address (else CP_ERROR_BAD_PACKET). It writes the 64-bit ring rptr just after the
//     packet (monotonic dwords; inside an IB, the ring's position after the IB's packet) to
//     the fence address in the queue's VMID with the kernel's privilege
//     (engine.Access.Privileged: a read-only page of the process is written; every other
//     write of the queue to it faults), bypassing L2 after Memory.FenceCheck, counted in
//     HQD_FENCES; then an IV {IH_CLIENT_GRBM_CP, IH_SRC_CP_EOP, ring id, VMID, Data[0] = the
//     image's DoorbellOffset}. The value is kept in ExecState.Fence.
//   - Anything else, and type-0/type-1 packets: CP_ERROR_BAD_OPCODE.
//
// Reserved fields checked (CP_ERROR_RESERVED_BITS): header [7:2]; SET_CONFIG/UCONFIG_REG DW1
// [27:16]; SET_SH_REG DW1 [22:16]; WRITE_DATA DW1 [7:0] and [15:12]; register operands
// [31:18]; ACQUIRE_MEM GCR_CNTL [31:19]; PFP_SYNC_ME's and PROTECTED_FENCE_SIGNAL's payload.
//
// # Errors
//
// A packet the CP cannot execute halts its queue only: STATE = HALTED, ERROR = a CP_ERROR_*,
// ERROR_ADDR = the packet's GPU address — or, for CP_ERROR_TRANSLATION/CP_ERROR_MEMORY, the
// GPU address of the failed access (the start of the Memory call: a fetch window, a 64 KiB
// DMA chunk, the fence address) — and ERROR_INFO = the packet's header (0 when the header
// itself could not be fetched). An IV {IH_CLIENT_GRBM_CP, source, ring id, VMID, Data =
// [code, ERROR_ADDR lo, ERROR_ADDR hi, ERROR_INFO]} is pushed and the halt is logged at Warn
// with the error's name. Every log line a guest can trigger (halts, ignored HQD writes,
// refused activations) goes through one ratelog.Limiter (Config.Limiter; default a limiter
// on Config.Log) under a fixed key; Stats.LogLines/LogSuppressed sum cp's keys. Sources: CP_ERROR_RESERVED_BITS → IH_SRC_CP_RESERVED_BITS;
// TRANSLATION, MEMORY, BAD_REGISTER, RING_CONFIG → IH_SRC_CP_GPF; BAD_OPCODE, BAD_PACKET,
// IB_DEPTH, IB_LIMIT → IH_SRC_CP_BAD_OPCODE. A Memory error that is (or wraps) an
// engine.TranslationFaulter reporting true is CP_ERROR_TRANSLATION, any other CP_ERROR_MEMORY; a Registers error is
// CP_ERROR_BAD_REGISTER. Other queues are not affected.
//
// A Memory error that is an engine.Retrier (a retry fault) is not a halt: the queue gives up
// its turn, shows HQD_STATE_WAITING, waits for the Retrier's channel (or a dequeue request,
// which ends the wait as errStop) and then replays the same access (a Copy from its start),
// as often as it retry-faults (Stats.RetryWaits counts the waits). Packets of a process
// stream (VMID 1..15) cannot reach registers (CP_ERROR_BAD_REGISTER), nor run
// INVALIDATE_TLBS (CP_ERROR_BAD_PACKET). INVALIDATE_TLBS (DW1: DST_SEL, ALL_HUB, PASID,
// FLUSH_TYPE; [28:21] reserved) calls Config.TLB.
//
// # Bounds
//
// Every guest-controlled quantity is bounded: ring size (QUEUE_SIZE 5..20), packet length
// (COUNT+2 ≤ the ring, ≤ the rest of the IB), IB depth (IBMaxDepth) and IB starts per
// submission (Config.MaxIBExpansions, default DefaultMaxIBExpansions), DMA_DATA bytes (the
// 26-bit field), dispatch size (MaxDispatchGroups), pending work (wptr - rptr ≤ ring size),
// the wait re-check rate (10 µs .. 1 ms), the execution turn (Config.TurnBudget), the
// goroutines of one slot that may be inside a call out (MaxLivePerSlot), and every field of a
// mapped queue's image (Map). Long packets move data in 64 KiB chunks so a reset
// is honoured promptly.
package cp
