package cp

import (
	"log/slog"
	"time"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/compute"
	"vgpu/ratelog"
)

// Registers is the register BAR as packets reach it, by dword offset (the device's register
// file). An error means the packet may not touch that register: CP_ERROR_BAD_REGISTER.
type Registers interface {
	ReadReg(dw uint32) (uint32, error)
	WriteReg(dw uint32, v uint32) error
}

// Config wires a CP. Memory, Registers and Interrupts are required.
type Config struct {
	Memory     engine.Memory // an engine.Copier too gives DMA_DATA and kernels one-copy moves
	Registers  Registers
	Interrupts engine.Interrupts
	// TLB runs the INVALIDATE_TLBS packet (gpuvm.VM); nil: the packet is refused.
	TLB TLBInvalidator
	Log *slog.Logger // nil: discard
	// Limiter rate-limits every log line a guest can trigger (halts, ignored writes, queues
	// that do not stop). nil: a limiter with ratelog's defaults writing to Log.
	Limiter *ratelog.Limiter

	// GPUClock and SystemClock give the 64-bit timestamps of RELEASE_MEM DATA_SEL 3/4 and
	// COPY_DATA's clock source. nil: nanoseconds since New (GPU) and Unix nanoseconds (system).
	GPUClock, SystemClock func() uint64

	// MaxIBExpansions bounds INDIRECT_BUFFER starts (calls and chains, any level) per
	// ring-level INDIRECT_BUFFER packet. 0: DefaultMaxIBExpansions.
	MaxIBExpansions int
	// StopTimeout bounds how long Close waits for the goroutines the CP started. 0:
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// MaxRunning is how many queue goroutines may execute at once (a fair FIFO of execution
	// turns; idle and parked queues hold none), so a P stays free for the transport. 0:
	// max(1, GOMAXPROCS-1) at New.
	MaxRunning int
	// TurnBudget is how long a queue executes before it yields its turn to the next waiting
	// queue (and the Go scheduler). 0: DefaultTurnBudget.
	TurnBudget time.Duration
	// Notify (optional) is called whenever a mapped queue's goroutine stops (preempted,
	// halted, killed), goes idle (rptr caught up with wptr) or parks in a WAIT_REG_MEM or a
	// retry-fault wait: the scheduler's wake-up. It is called from the queue goroutine with
	// no cp lock and no turn held, and must not block.
	Notify func(slot int)
	// Compute runs shader dispatches (COMPUTE_PGM set); nil: such a dispatch halts the queue
	// with CP_ERROR_BAD_PACKET.
	Compute *compute.Pool
}

// Named bounds and layout numbers. Every guest-controlled quantity the CP iterates over has one.
const (
	// NumSlots is the number of hardware queue slots (HQD instances).
	NumSlots = abi.BLOCK_HQD_COUNT
	// ComputePipes and QueuesPerPipe: slots 1..16 are ME 1, pipe-major.
	ComputePipes  = abi.CP_COMPUTE_PIPES
	QueuesPerPipe = abi.CP_QUEUES_PER_PIPE
	// IBMaxDepth is the deepest INDIRECT_BUFFER nesting: IB1 (from the ring) and IB2 (from IB1).
	IBMaxDepth = abi.CP_IB_MAX_DEPTH

	// DefaultMaxIBExpansions bounds the work one ring-level INDIRECT_BUFFER can cause, so a
	// chain that points at itself ends with CP_ERROR_IB_LIMIT instead of running forever.
	DefaultMaxIBExpansions = 4096
	// DefaultStopTimeout: Close gives up waiting for a queue goroutine stuck in a Memory,
	// Registers or Interrupts call after this long (it can no longer act, see Reset, and
	// exits when the call returns).
	DefaultStopTimeout = 100 * time.Millisecond
	// DefaultTurnBudget: a queue that always has work yields after this much execution, so
	// 16 self-kicking queues cannot delay anything else by more than about one turn.
	DefaultTurnBudget = 100 * time.Microsecond
	// MaxLivePerSlot bounds the goroutines of one slot that are still alive (a revoked
	// activation stuck in a call out, plus the current one): ACTIVE=1 beyond it is ignored,
	// so resets cannot pile up goroutines behind a call that never returns.
	MaxLivePerSlot = 4

	// MaxDispatchGroups bounds DIM_X*DIM_Y*DIM_Z of DISPATCH_DIRECT (2^20 groups of
	// KERNEL_GROUP_DWORDS dwords = 256 MiB of kernel output at most).
	MaxDispatchGroups = 1 << 20

	// Ring sizes: PQ_CONTROL.QUEUE_SIZE q gives 2^(q+1) dwords; 64 dwords (256 B) to 2^21
	// dwords (8 MiB).
	minQueueSizeField = abi.CP_QUEUE_SIZE_MIN
	maxQueueSizeField = abi.CP_QUEUE_SIZE_MAX
	// ringAlign: PQ_BASE must be 256-byte aligned.
	ringAlign = 256
)

// Internal bounds of work done per step (not guest-visible).
const (
	// fetchChunkDwords: ring and IB dwords are read through Memory up to 4 KiB at a time.
	fetchChunkDwords = 1024
	// dmaChunkBytes: DMA_DATA and kernels move data in 64 KiB pieces; a dequeue reset is
	// honoured between pieces.
	dmaChunkBytes = 64 << 10
	// copyChunkBytes: copies through a Copier move this much per call (no bounce buffer, so
	// larger pieces cost nothing); a dequeue reset is honoured between pieces.
	copyChunkBytes = 2 << 20
	// WAIT_REG_MEM re-check timer: the programmed interval (µs) clamped to at least
	// minWaitInterval, doubling on each timer expiry up to maxWaitInterval, so a long wait
	// costs next to no CPU. Wake, doorbells and dequeue requests re-check at once.
	minWaitInterval = 10 * time.Microsecond
	maxWaitInterval = time.Millisecond
	// Wake-driven re-checks of a parked wait are at least a hold-off apart; it doubles from
	// minWakeHoldoff to maxWakeHoldoff while wakes keep arriving faster (see queue.park).
	minWakeHoldoff = 10 * time.Microsecond
	maxWakeHoldoff = 200 * time.Microsecond
	// defaultWptrPoll is PQ_WPTR_POLL_CNTL.INTERVAL_US = 0; minWptrPoll caps the poll rate.
	defaultWptrPoll = 100 * time.Microsecond
	minWptrPoll     = 10 * time.Microsecond
	// longPacketCheck: a packet that makes one call out per dword (register writes,
	// WR_ONE_ADDR memory writes; up to 16 Ki dwords) checks its turn's budget, and a
	// DEQUEUE_RESET, this often.
	longPacketCheck = 256
	// A turn reads the clock first after firstBudgetCheck units of work, then when the rate
	// so far predicts the budget is spent, but at least minBudgetStep and at most
	// maxBudgetStep units apart (see queue.spend).
	firstBudgetCheck = 32
	minBudgetStep    = 8
	maxBudgetStep    = 4096
	// Quiesce re-checks at least this often (a revoked goroutine leaving its turn also
	// wakes it at once).
	minQuiescePoll = 20 * time.Microsecond
	maxQuiescePoll = time.Millisecond
)

// TLBInvalidator invalidates the TLBs of every process VMID whose PASID table entry holds
// pasid (the INVALIDATE_TLBS packet) and returns those VMIDs.
type TLBInvalidator interface {
	InvalidatePASID(pasid uint16, allHub bool, flushType uint8) uint32
}
