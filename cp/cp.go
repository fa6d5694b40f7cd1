package cp

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/compute"
	"vgpu/inject"
	"vgpu/ratelog"
	"vgpu/trace"
)

// CP is the command processor: NumSlots hardware queues, each run by its own goroutine while
// active. See the package comment for the threading contract.
type CP struct {
	mem                engine.Memory
	copier             engine.Copier // mem's one-copy path, or nil (asserted once, not per packet)
	regs               Registers
	irq                engine.Interrupts
	tlb                TLBInvalidator
	limiter            *ratelog.Limiter // every log line
	gpuClock, sysClock func() uint64
	maxIB              int
	stopTimeout        time.Duration
	turnBudget         time.Duration
	notifyFn           func(slot int)
	compute            *compute.Pool // shader dispatches (nil: refused)
	inj                *inject.Set   // fault injection (inject.go)

	hqds  [NumSlots]hqd
	turns turns          // the fair FIFO of execution turns (turn.go)
	wg    sync.WaitGroup // every goroutine the CP started

	closed atomic.Bool
	// owned is SetOwned's mask: slots whose HQD registers the register path may not write.
	owned atomic.Uint32
	pools bufPools // fetch and DMA buffers reused across activations (mapped.go)
	// parked counts queues parked in WAIT_REG_MEM: Wake returns at once when it is zero.
	parked atomic.Int32
	// quiet gets a (non-blocking) signal when a revoked activation leaves its turn: Quiesce
	// re-checks at once.
	quiet chan struct{}

	// engMu serialises resets (Reset, CP_ENGINE_RESET) and guards the engine-reset state.
	// Lock order: engMu before any slot mutex.
	engMu     sync.Mutex
	engBusy   uint32 // CP_ENGINE_RESET bits whose reset has not completed
	engResets uint32 // CP_ENGINE_RESETS

	packets, halts                           atomic.Uint64
	doorbells, doorbellMisses, wakes, checks atomic.Uint64
	ibs, ignoredWrites                       atomic.Uint64
	staleCallouts, yields, refusedActivation atomic.Uint64
	retryWaits                               atomic.Uint64
	shaderDispatches                         atomic.Uint64
	shaderPreempts, shaderResumes            atomic.Uint64

	trace *trace.Recorder // the timeline (trace.go; nil: off)
}

// New returns a CP with every queue inactive.
func New(cfg Config) *CP {
	c := &CP{
		mem: cfg.Memory, regs: cfg.Registers, irq: cfg.Interrupts, tlb: cfg.TLB, limiter: cfg.Limiter,
		gpuClock: cfg.GPUClock, sysClock: cfg.SystemClock,
		maxIB: cfg.MaxIBExpansions, stopTimeout: cfg.StopTimeout, turnBudget: cfg.TurnBudget,
		notifyFn: cfg.Notify, compute: cfg.Compute,
		quiet: make(chan struct{}, 1),
	}
	c.copier, _ = cfg.Memory.(engine.Copier)
	if c.limiter == nil {
		c.limiter = ratelog.New(cfg.Log, 0, 0) // a nil Log discards
	}
	if c.gpuClock == nil {
		start := time.Now()
		c.gpuClock = func() uint64 { return uint64(time.Since(start)) }
	}
	if c.sysClock == nil {
		c.sysClock = func() uint64 { return uint64(time.Now().UnixNano()) }
	}
	if c.maxIB <= 0 {
		c.maxIB = DefaultMaxIBExpansions
	}
	if c.stopTimeout <= 0 {
		c.stopTimeout = DefaultStopTimeout
	}
	if c.turnBudget <= 0 {
		c.turnBudget = DefaultTurnBudget
	}
	running := cfg.MaxRunning
	if running <= 0 {
		running = max(1, runtime.GOMAXPROCS(0)-1)
	}
	c.turns.free, c.turns.limit = running, running
	c.turns.spareP = running < runtime.GOMAXPROCS(0)
	for i := range c.hqds {
		c.hqds[i].c, c.hqds[i].slot = c, i
	}
	return c
}

// RingID is the IV ring id of a slot: slot 0 is ME 0 pipe 0 queue 0 (graphics); slot s ≥ 1
// is ME 1, pipe (s-1)/QueuesPerPipe, queue (s-1)%QueuesPerPipe.
func RingID(slot int) uint8 {
	if slot <= 0 {
		return 0
	}
	pipe := uint32(slot-1) / QueuesPerPipe
	queue := uint32(slot-1) % QueuesPerPipe
	return uint8(pipe<<abi.IH_RING_ID_PIPE__SHIFT&abi.IH_RING_ID_PIPE_MASK |
		1<<abi.IH_RING_ID_ME__SHIFT&abi.IH_RING_ID_ME_MASK |
		queue<<abi.IH_RING_ID_QUEUE__SHIFT&abi.IH_RING_ID_QUEUE_MASK)
}

// ReadReg reads the CP register block; off is relative to BLOCK_CP_BASE.
func (c *CP) ReadReg(off uint32) uint32 {
	switch off + abi.BLOCK_CP_BASE {
	case abi.REG_CP_HQD_COUNT:
		return NumSlots
	case abi.REG_CP_COMPUTE_PIPES:
		return ComputePipes
	case abi.REG_CP_QUEUES_PER_PIPE:
		return QueuesPerPipe
	case abi.REG_CP_PACKETS_LO:
		return uint32(c.packets.Load())
	case abi.REG_CP_PACKETS_HI:
		return uint32(c.packets.Load() >> 32)
	case abi.REG_CP_HALTS:
		return uint32(c.halts.Load())
	case abi.REG_CP_IB_MAX_DEPTH:
		return IBMaxDepth
	case abi.REG_CP_ENGINE_RESET_STATUS:
		busy, _ := c.engineStatus()
		return busy
	case abi.REG_CP_ENGINE_RESETS:
		_, n := c.engineStatus()
		return n
	}
	return 0
}

// WriteReg writes the CP register block; off is relative to BLOCK_CP_BASE. Only
// CP_ENGINE_RESET is writable (see EngineReset); other writes are ignored.
func (c *CP) WriteReg(off, v uint32) {
	if off+abi.BLOCK_CP_BASE == abi.REG_CP_ENGINE_RESET {
		c.EngineReset(v)
	}
}

// ReadHQD reads register off (a REG_HQD_* offset) of slot's HQD instance. Out-of-range slots
// read 0. It never blocks on a queue goroutine.
func (c *CP) ReadHQD(slot int, off uint32) uint32 {
	if slot < 0 || slot >= NumSlots {
		return 0
	}
	return c.hqds[slot].read(off)
}

// WriteHQD writes register off of slot's HQD instance. It never blocks on a queue goroutine
// and never touches Memory, Registers or Interrupts.
func (c *CP) WriteHQD(slot int, off uint32, v uint32) {
	if slot < 0 || slot >= NumSlots {
		return
	}
	c.hqds[slot].write(off, v)
}

// Doorbell delivers a doorbell write: dword is the doorbell's dword index (64-bit doorbell k
// is dword 2k), value its whole 64-bit content. Every active queue with DOORBELL_EN and that
// DOORBELL_OFFSET gets wptr = value (a mapped queue: max(wptr, value)) and is kicked. It
// reports whether a running queue took it: false (a miss, Stats.DoorbellMisses) also when
// the only matching queue was a mapped one stopping meanwhile, whose saved image may lack
// the value — the scheduler must see such a doorbell. It takes no lock and never blocks, so
// it may be called from any goroutine, with or without the device's register lock.
func (c *CP) Doorbell(dword uint32, value uint64) bool {
	c.doorbells.Add(1)
	hit := false
	for i := range c.hqds {
		q := c.hqds[i].q.Load()
		if q == nil || q.stopped.Load() || !q.doorbellEn || q.doorbellOff != dword {
			continue
		}
		q.kick(value)
		c.traceDoorbell(i, value)
		// A mapped queue saves its wptr after it sets stopped: if it is stopped now, the
		// value may have missed the image.
		if !q.mapped || !q.stopped.Load() {
			hit = true
		}
	}
	if !hit {
		c.doorbellMisses.Add(1)
	}
	return hit
}

// Wake tells parked WAIT_REG_MEM waits that memory (or a register) may have changed. It is
// cheap (an atomic load when nothing is parked) and never blocks.
func (c *CP) Wake() {
	if c.parked.Load() == 0 {
		return
	}
	for i := range c.hqds {
		if q := c.hqds[i].q.Load(); q != nil && q.parkedNow.Load() {
			q.signal()
			c.wakes.Add(1)
		}
	}
}

// Stats is a diagnostic snapshot.
type Stats struct {
	Packets        uint64 // packets executed since reset (REG_CP_PACKETS)
	Halts          uint64 // queue halts since reset (REG_CP_HALTS)
	Doorbells      uint64 // Doorbell calls
	DoorbellMisses uint64 // Doorbell calls that matched no active queue
	Wakes          uint64 // wake-ups sent to parked queues by Wake
	WaitChecks     uint64 // re-evaluations of parked WAIT_REG_MEM conditions
	IBs            uint64 // INDIRECT_BUFFER starts (calls and chains)
	IgnoredWrites  uint64 // HQD writes ignored (configuration while active, unknown values)
	// StaleCallouts counts call outs refused because the goroutine's activation had been
	// revoked (a Reset, an engine reset, or a newer activation of its slot) since its turn began.
	StaleCallouts uint64
	// Yields counts turns a queue gave up because it used its budget (Config.TurnBudget)
	// with work left and another queue was waiting (or no P is spare); TurnWaits counts
	// turns that had to wait for one (Config.MaxRunning).
	Yields, TurnWaits uint64
	// RefusedActivations counts ACTIVE=1 writes ignored because MaxLivePerSlot goroutines
	// of that slot were still alive (earlier activations stuck in a call out).
	RefusedActivations uint64
	// RetryWaits counts waits of queues on a retry fault (engine.Retrier) before a replay.
	RetryWaits uint64
	// ShaderDispatches counts dispatches started on the compute units.
	ShaderDispatches uint64
	// ShaderPreempts counts dispatches a preemption saved to a context save area,
	// ShaderResumes those a Map restored from one.
	ShaderPreempts, ShaderResumes uint64
	// EngineResetBusy is CP_ENGINE_RESET_STATUS; EngineResets is CP_ENGINE_RESETS.
	EngineResetBusy, EngineResets uint32
	// Draining is how many revoked activations are still inside a turn (a call out that
	// began before their revocation may be in progress): Quiesce waits for 0. Live is how
	// many queue goroutines exist (current and revoked ones still returning).
	Draining, Live int
	// LogLines and LogSuppressed are the rate-limited log lines of cp's keys written and
	// suppressed (Config.Limiter; its Counts break them down by key).
	LogLines, LogSuppressed uint64
	Queues                  [NumSlots]QueueStats
}

// QueueStats is one slot's state.
type QueueStats struct {
	Active    bool   // HQD_ACTIVE
	State     uint32 // HQD_STATE_*
	Error     uint32 // CP_ERROR_*
	ErrorAddr uint64
	ErrorInfo uint32
	Rptr      uint64 // monotonic read pointer (dwords; PQ_RPTR is this modulo the ring size)
	Wptr      uint64 // last write pointer delivered (kick, doorbell or poll)
	Fences    uint32
	// Idle: the queue goroutine has seen Wptr, caught up with it (or the next packet extends
	// past it), and sleeps until the wptr moves.
	Idle bool
}

// Queue returns one slot's state (a cheaper Stats().Queues[slot]).
func (c *CP) Queue(slot int) QueueStats {
	if slot < 0 || slot >= NumSlots {
		return QueueStats{}
	}
	return c.hqds[slot].stats()
}

// Stats returns a snapshot of the counters and every queue's state.
func (c *CP) Stats() Stats {
	s := Stats{
		Packets: c.packets.Load(), Halts: c.halts.Load(),
		Doorbells: c.doorbells.Load(), DoorbellMisses: c.doorbellMisses.Load(),
		Wakes: c.wakes.Load(), WaitChecks: c.checks.Load(), IBs: c.ibs.Load(),
		IgnoredWrites: c.ignoredWrites.Load(),
		StaleCallouts: c.staleCallouts.Load(), RetryWaits: c.retryWaits.Load(), ShaderDispatches: c.shaderDispatches.Load(),
		ShaderPreempts: c.shaderPreempts.Load(), ShaderResumes: c.shaderResumes.Load(), Yields: c.yields.Load(), TurnWaits: c.turns.waits.Load(),
		RefusedActivations: c.refusedActivation.Load(),
	}
	s.EngineResetBusy, s.EngineResets = c.engineStatus()
	for i := range c.hqds {
		s.Queues[i] = c.hqds[i].stats()
		s.Draining += c.hqds[i].draining()
		s.Live += c.hqds[i].alive()
	}
	for _, n := range c.limiter.Counts() {
		if strings.HasPrefix(n.Key, logKeyPrefix) {
			s.LogLines += n.Logged
			s.LogSuppressed += n.Suppressed
		}
	}
	return s
}
