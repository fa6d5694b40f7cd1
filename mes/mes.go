package mes

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/engine"
	"vgpu/inject"
	"vgpu/ratelog"
	"vgpu/trace"
)

// Slots is the hardware the scheduler places queues on: the CP's HQD slots (cp.CP).
type Slots interface {
	Map(slot int, img cp.Image) error
	Preempt(slot int)
	Saved(slot int) (cp.Image, cp.StopState)
	Kill(slot int)
	Release(slot int)
	Kick(slot int, wptr uint64)
	Queue(slot int) cp.QueueStats
	SetOwned(mask uint32)
}

// VMContext is what the scheduler programs into a VMID for a process (VM_CONTEXT and the
// PASID LUT).
type VMContext struct {
	PASID         uint16
	PageTableBase uint64 // PDE format
	Cntl          uint32 // VM_CONTEXT_CNTL
	Start, End    uint64 // pages
}

// AddressSpaces programs process address spaces into VMIDs (gpuvm, through the device).
type AddressSpaces interface {
	// Bind programs vmid for a process and drops its cached translations.
	Bind(vmid int, c VMContext)
	// Unbind disables vmid and drops its cached translations.
	Unbind(vmid int)
	// InvalidateGART drops VMID 0's cached GART translations (MISC INV_GART).
	InvalidateGART()
}

// Config wires the scheduler to the rest of the GPU. Every interface is called only from the
// scheduler's goroutine, inside a call-out (see gate), never with a lock of this package held.
type Config struct {
	Memory     engine.Memory     // VMID 0: the ring, fences, MQDs, contexts, wptr shadows, the log
	Registers  cp.Registers      // MISC register access
	Interrupts engine.Interrupts // IH_SRC_MES_* IVs
	Slots      Slots
	VM         AddressSpaces
	// Doorbells is the number of 64-bit doorbells in the BAR: valid dword offsets are < 2·Doorbells.
	Doorbells int
	// DoorbellInUse reports whether a doorbell dword is used by something other than MES queues
	// (a kernel HQD, the IH). May be nil.
	DoorbellInUse func(dword uint32) bool
	// ClaimDoorbell is called when a queue takes a doorbell (ADD_QUEUE): the device zeroes it,
	// so that a polled doorbell sees the queue's first ring whatever the doorbell held. May be nil.
	ClaimDoorbell func(dword uint32)
	Log           *slog.Logger
	Limiter       *ratelog.Limiter
	// StopTimeout bounds Close's wait for the goroutine (default 1 s).
	StopTimeout time.Duration
}

// numSlots: the CP's slots (slot 0 gfx, 1..16 compute).
const numSlots = cp.NumSlots

// MES is the scheduler: register block, API ring and the firmware goroutine.
type MES struct {
	cfg     Config
	log     *slog.Logger
	limiter *ratelog.Limiter

	// mu guards the register state and act; it is held only briefly, never across a call out.
	mu                      sync.Mutex
	baseLo, baseHi, control uint32
	reportLo, reportHi      uint32
	wptrLo, wptrHi          uint32 // as written while inactive
	doorbell                uint32
	queryDB                 uint32
	act                     atomic.Pointer[activation] // the running scheduler, nil when off; stored under mu
	// slotMu orders the goroutine's Slots calls against a halt: after revoke (under slotMu)
	// no Slots call of the activation begins. Lock order: mu → slotMu → the CP's locks.
	slotMu             sync.Mutex
	cntl               atomic.Uint32
	ownedMask          atomic.Uint32 // MES's slots now (published for the device)
	wg                 sync.WaitGroup
	closed             atomic.Bool
	lastState, lastErr uint32 // of the last activation once it ended (halt reason)
	// draining counts call outs in flight of revoked activations (Quiesce waits for 0).
	draining atomic.Int64

	trace *trace.Recorder            // the timeline (trace.go; nil: off)
	inj   atomic.Pointer[inject.Set] // fault injection (inject.go)
	// paused is the activation a snapshot's Pause parked (snapshot.go); guarded by mu.
	paused *activation
}

// New builds the scheduler, off until MES_RING_ACTIVE = 1.
func New(cfg Config) *MES {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Limiter == nil {
		cfg.Limiter = ratelog.New(cfg.Log, 0, 0)
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = time.Second
	}
	return &MES{cfg: cfg, log: cfg.Log, limiter: cfg.Limiter}
}

// ReadReg reads a MES register (off relative to the block). Called with the device's register
// lock held: it never blocks on the scheduler goroutine.
func (m *MES) ReadReg(off uint32) uint32 {
	reg := off + abi.BLOCK_MES_BASE
	switch reg {
	case abi.REG_MES_CNTL:
		return m.cntl.Load()
	case abi.REG_MES_VERSION:
		return abi.MES_SCHED_API_VERSION<<12 | abi.MES_SCHED_FW_VERSION
	}
	m.mu.Lock()
	if v, ok := m.storedLocked(reg); ok {
		m.mu.Unlock()
		return v
	}
	a := m.act.Load()
	q, state, herr := m.queryDB, m.lastState, m.lastErr
	wlo, whi := m.wptrLo, m.wptrHi
	m.mu.Unlock()
	switch reg {
	case abi.REG_MES_RING_ACTIVE:
		if a != nil {
			return 1
		}
		return 0
	case abi.REG_MES_STATUS:
		v := state<<abi.REG_MES_STATUS__STATE__SHIFT | herr<<abi.REG_MES_STATUS__ERROR__SHIFT
		if a != nil && m.ownedMask.Load() != 0 {
			v |= abi.REG_MES_STATUS__HW_RESOURCES_MASK
		}
		return v
	}
	if a == nil {
		switch reg {
		case abi.REG_MES_RING_WPTR_LO:
			return wlo
		case abi.REG_MES_RING_WPTR_HI:
			return whi
		}
		return 0
	}
	return a.readReg(reg, q)
}

// storedLocked reads the registers that are plain storage (mu held).
func (m *MES) storedLocked(reg uint32) (uint32, bool) {
	switch reg {
	case abi.REG_MES_RING_BASE_LO:
		return m.baseLo, true
	case abi.REG_MES_RING_BASE_HI:
		return m.baseHi, true
	case abi.REG_MES_RING_CONTROL:
		return m.control, true
	case abi.REG_MES_RING_RPTR_REPORT_ADDR_LO:
		return m.reportLo, true
	case abi.REG_MES_RING_RPTR_REPORT_ADDR_HI:
		return m.reportHi, true
	case abi.REG_MES_RING_DOORBELL:
		return m.doorbell, true
	case abi.REG_MES_QUERY_DOORBELL:
		return m.queryDB, true
	}
	return 0, false
}

// WriteReg writes a MES register. Called with the device's register lock held.
func (m *MES) WriteReg(off, v uint32) {
	reg := off + abi.BLOCK_MES_BASE
	m.mu.Lock()
	a := m.act.Load()
	switch reg {
	case abi.REG_MES_RING_ACTIVE:
		if v&1 != 0 && a == nil {
			m.startLocked()
		} else if v&1 == 0 && a != nil {
			// A MES pipe reset: the firmware stops and the queues it placed stop with it.
			m.act.Store(nil)
			m.lastState, m.lastErr = abi.MES_STATE_OFF, 0
			a.revoke()
			a.stopAll()
		}
	case abi.REG_MES_RING_WPTR_LO:
		if a != nil {
			a.setWptr(a.wptr.Load()&^0xFFFFFFFF | uint64(v))
		} else {
			m.wptrLo = v
		}
	case abi.REG_MES_RING_WPTR_HI:
		if a != nil {
			a.setWptr(a.wptr.Load()&0xFFFFFFFF | uint64(v)<<32)
		} else {
			m.wptrHi = v
		}
	case abi.REG_MES_CNTL:
		m.cntl.Store(v & abi.REG_MES_CNTL__UNMAPPED_DOORBELL_DISABLE_MASK)
	case abi.REG_MES_QUERY_DOORBELL:
		m.queryDB = v
	default:
		if a != nil {
			break // ring configuration is fixed while the scheduler runs
		}
		switch reg {
		case abi.REG_MES_RING_BASE_LO:
			m.baseLo = v
		case abi.REG_MES_RING_BASE_HI:
			m.baseHi = v
		case abi.REG_MES_RING_CONTROL:
			m.control = v & abi.REG_MES_RING_CONTROL__QUEUE_SIZE_MASK
		case abi.REG_MES_RING_RPTR_REPORT_ADDR_LO:
			m.reportLo = v
		case abi.REG_MES_RING_RPTR_REPORT_ADDR_HI:
			m.reportHi = v
		case abi.REG_MES_RING_DOORBELL:
			m.doorbell = v & (abi.REG_MES_RING_DOORBELL__OFFSET_MASK | abi.REG_MES_RING_DOORBELL__EN_MASK)
		}
	}
	m.mu.Unlock()
}

// startLocked starts a scheduler activation on the programmed ring (mu held).
func (m *MES) startLocked() { _ = m.startWith(nil) }

// startWith is startLocked; prep (snapshot.go) sets the new activation's state before its
// goroutine starts, and its error starts nothing.
func (m *MES) startWith(prep func(a *activation) error) error {
	if m.closed.Load() {
		return errClosed
	}
	qs := m.control & abi.REG_MES_RING_CONTROL__QUEUE_SIZE_MASK >> abi.REG_MES_RING_CONTROL__QUEUE_SIZE__SHIFT
	a := newActivation(m, ringConfig{
		base:       uint64(m.baseHi)<<32 | uint64(m.baseLo),
		sizeField:  qs,
		reportAddr: uint64(m.reportHi)<<32 | uint64(m.reportLo),
		doorbell:   m.doorbell,
		wptr:       uint64(m.wptrHi)<<32 | uint64(m.wptrLo),
	})
	if prep != nil {
		if err := prep(a); err != nil {
			return err
		}
	}
	m.wptrLo, m.wptrHi = 0, 0
	m.act.Store(a)
	m.lastState, m.lastErr = abi.MES_STATE_RUNNING, 0
	m.wg.Add(1)
	go a.run()
	return nil
}

// ended is called by an activation's goroutine when it halts on its own (ring error): the
// registers then show HALTED until RING_ACTIVE = 0.
func (m *MES) halted(a *activation, reason uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.act.Load() == a {
		m.lastState, m.lastErr = abi.MES_STATE_HALTED, reason
	}
}

// Doorbell is told about every doorbell write (before the CP gets it). It takes no lock on the
// path of mapped queues and never blocks.
func (m *MES) Doorbell(dword uint32, value uint64) {
	if a := m.act.Load(); a != nil {
		a.doorbell(dword, value)
	}
}

// Notify is the CP's notification that a slot's queue stopped, idled or parked: the scheduler
// looks at it soon. Never blocks.
func (m *MES) Notify(slot int) {
	if a := m.act.Load(); a != nil {
		a.notify(slot)
	}
}

// Owned returns the slots the scheduler owns now.
func (m *MES) Owned() uint32 { return m.ownedMask.Load() }

// Reset stops the scheduler without waiting (device reset, FLR, disconnect): its activation is
// revoked (no further call out), its tables forgotten, the registers return to power-on. The
// CP's own reset stops the queues it mapped.
func (m *MES) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.act.Swap(nil)
	m.baseLo, m.baseHi, m.control, m.reportLo, m.reportHi = 0, 0, 0, 0, 0
	m.wptrLo, m.wptrHi, m.doorbell, m.queryDB = 0, 0, 0, 0
	m.lastState, m.lastErr = abi.MES_STATE_OFF, 0
	m.cntl.Store(0)
	m.ownedMask.Store(0)
	if a != nil {
		a.revoke() // the CP's reset stops the queues and clears ownership
	}
}

// Quiesce waits, bounded, until no revoked activation is inside a call out.
func (m *MES) Quiesce(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if m.draining.Load() == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// Close stops the scheduler for good and waits (bounded) for its goroutine.
func (m *MES) Close() {
	m.closed.Store(true)
	m.Reset()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(m.cfg.StopTimeout):
		m.limiter.Warn(logKeyClose, "mes: scheduler goroutine still inside a call out at Close")
	}
}
