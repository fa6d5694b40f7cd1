package cptest

import (
	"sync"
	"testing"
	"time"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/pm4"
)

// Interrupts records the CP's IVs (engine.Interrupts). With Mem set, each IV is also a trace
// event, so tests can check its order against memory operations.
type Interrupts struct {
	Mem *Memory

	mu     sync.Mutex
	ivs    []engine.IV
	notify chan struct{}
}

// NewInterrupts returns an empty recorder.
func NewInterrupts() *Interrupts { return &Interrupts{notify: make(chan struct{}, 1)} }

// Push implements engine.Interrupts.
func (i *Interrupts) Push(iv engine.IV) {
	if i.Mem != nil {
		i.Mem.record(Event{Kind: "iv", Data: uint64(iv.Data[0])})
	}
	i.mu.Lock()
	i.ivs = append(i.ivs, iv)
	i.mu.Unlock()
	select {
	case i.notify <- struct{}{}:
	default:
	}
}

// All returns every IV so far.
func (i *Interrupts) All() []engine.IV {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]engine.IV(nil), i.ivs...)
}

// Reset forgets every IV.
func (i *Interrupts) Reset() {
	i.mu.Lock()
	i.ivs = nil
	i.mu.Unlock()
	select {
	case <-i.notify:
	default:
	}
}

// Len is the number of IVs so far.
func (i *Interrupts) Len() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return len(i.ivs)
}

// Wait blocks until at least n IVs arrived (false on timeout).
func (i *Interrupts) Wait(n int, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for i.Len() < n {
		select {
		case <-i.notify:
		case <-deadline.C:
			return i.Len() >= n
		}
	}
	return true
}

// Timeout is how long the helpers wait for the CP before failing a test.
const Timeout = 10 * time.Second

// Rig is a CP wired to test memory, registers and an IV recorder, used like a driver uses
// the device: HQD registers are written under one "device register lock" (Regs.Lock), as the
// server does, and memory writes by engines wake parked queues.
type Rig struct {
	CP   *cp.CP
	Mem  *Memory
	Regs *Registers
	IVs  *Interrupts
}

// NewRig builds a CP over memSize bytes of memory; cfg (optional) adjusts the Config. The CP
// is closed when the test ends.
func NewRig(tb testing.TB, memSize int, cfg ...func(*cp.Config)) *Rig {
	r := &Rig{Mem: NewMemory(memSize), Regs: NewRegisters(), IVs: NewInterrupts()}
	r.IVs.Mem = r.Mem
	c := cp.Config{Memory: r.Mem, Registers: r.Regs, Interrupts: r.IVs}
	for _, f := range cfg {
		f(&c)
	}
	r.CP = cp.New(c)
	r.Mem.SetOnWrite(r.CP.Wake)
	tb.Cleanup(r.CP.Close)
	return r
}

// RouteCPBlocks makes packets' register accesses to the CP and HQD blocks reach the CP, as
// in the device (so a queue can, e.g., dequeue itself or reset its engine with WRITE_DATA).
func (r *Rig) RouteCPBlocks() {
	r.Regs.Hook = func(reg, v uint32, write bool) (uint32, bool) {
		off := reg * 4
		switch {
		case off >= abi.BLOCK_HQD_BASE && off < abi.BLOCK_HQD_BASE+abi.BLOCK_HQD_SIZE:
			slot, o := int((off-abi.BLOCK_HQD_BASE)/abi.BLOCK_HQD_STRIDE), (off-abi.BLOCK_HQD_BASE)%abi.BLOCK_HQD_STRIDE
			if write {
				r.CP.WriteHQD(slot, o, v)
				return 0, true
			}
			return r.CP.ReadHQD(slot, o), true
		case off >= abi.BLOCK_CP_BASE && off < abi.BLOCK_CP_BASE+abi.BLOCK_CP_SIZE:
			if write {
				r.CP.WriteReg(off-abi.BLOCK_CP_BASE, v)
				return 0, true
			}
			return r.CP.ReadReg(off - abi.BLOCK_CP_BASE), true
		}
		return 0, false
	}
}

// WriteCP writes a CP block register (a REG_CP_* address) under the device lock.
func (r *Rig) WriteCP(reg, v uint32) {
	r.Regs.Lock.Lock()
	defer r.Regs.Lock.Unlock()
	r.CP.WriteReg(reg-abi.BLOCK_CP_BASE, v)
}

// ReadCP reads a CP block register (a REG_CP_* address) under the device lock.
func (r *Rig) ReadCP(reg uint32) uint32 {
	r.Regs.Lock.Lock()
	defer r.Regs.Lock.Unlock()
	return r.CP.ReadReg(reg - abi.BLOCK_CP_BASE)
}

// WriteHQD writes an HQD register under the device lock.
func (r *Rig) WriteHQD(slot int, off, v uint32) {
	r.Regs.Lock.Lock()
	defer r.Regs.Lock.Unlock()
	r.CP.WriteHQD(slot, off, v)
}

// ReadHQD reads an HQD register under the device lock.
func (r *Rig) ReadHQD(slot int, off uint32) uint32 {
	r.Regs.Lock.Lock()
	defer r.Regs.Lock.Unlock()
	return r.CP.ReadHQD(slot, off)
}

// Doorbell delivers a doorbell write under the device lock.
func (r *Rig) Doorbell(dword uint32, v uint64) {
	r.Regs.Lock.Lock()
	defer r.Regs.Lock.Unlock()
	r.CP.Doorbell(dword, v)
}

// Status returns a slot's HQD_STATUS STATE and ERROR.
func (r *Rig) Status(slot int) (state, errCode uint32) {
	v := r.ReadHQD(slot, abi.REG_HQD_STATUS)
	return v & abi.REG_HQD_STATUS__STATE_MASK >> abi.REG_HQD_STATUS__STATE__SHIFT,
		v & abi.REG_HQD_STATUS__ERROR_MASK >> abi.REG_HQD_STATUS__ERROR__SHIFT
}

// Eventually polls cond until it holds or Timeout passes (then fails the test with what).
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// WaitState waits until a slot's STATE is state.
func (r *Rig) WaitState(tb testing.TB, slot int, state uint32) {
	tb.Helper()
	Eventually(tb, "queue state", func() bool { s, _ := r.Status(slot); return s == state })
}

// WaitInactive waits until a slot's HQD_ACTIVE reads 0.
func (r *Rig) WaitInactive(tb testing.TB, slot int) {
	tb.Helper()
	Eventually(tb, "HQD_ACTIVE = 0", func() bool { return r.ReadHQD(slot, abi.REG_HQD_ACTIVE) == 0 })
}

// QueueConfig is what a driver programs before HQD_ACTIVE.
type QueueConfig struct {
	Base           uint64 // ring GPU address (256-byte aligned)
	QueueSize      uint32 // PQ_CONTROL.QUEUE_SIZE: the ring has 2^(QueueSize+1) dwords
	RptrReport     uint64 // 0: none
	NoUpdateRptr   bool
	Doorbell       uint32 // doorbell dword index
	DoorbellEn     bool
	PollAddr       uint64
	Poll           bool
	PollIntervalUS uint32
	VMID           uint32
}

// Program writes the HQD registers of cfg (queue inactive) without activating.
func (r *Rig) Program(slot int, c QueueConfig) {
	r.WriteHQD(slot, abi.REG_HQD_VMID, c.VMID)
	r.WriteHQD(slot, abi.REG_HQD_PQ_BASE_LO, uint32(c.Base))
	r.WriteHQD(slot, abi.REG_HQD_PQ_BASE_HI, uint32(c.Base>>32))
	ctl := c.QueueSize << abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT
	if c.NoUpdateRptr {
		ctl |= abi.REG_HQD_PQ_CONTROL__NO_UPDATE_RPTR_MASK
	}
	r.WriteHQD(slot, abi.REG_HQD_PQ_CONTROL, ctl)
	r.WriteHQD(slot, abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO, uint32(c.RptrReport))
	r.WriteHQD(slot, abi.REG_HQD_PQ_RPTR_REPORT_ADDR_HI, uint32(c.RptrReport>>32))
	db := c.Doorbell << abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT & abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK
	if c.DoorbellEn {
		db |= abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK
	}
	r.WriteHQD(slot, abi.REG_HQD_PQ_DOORBELL_CONTROL, db)
	r.WriteHQD(slot, abi.REG_HQD_PQ_WPTR_POLL_ADDR_LO, uint32(c.PollAddr))
	r.WriteHQD(slot, abi.REG_HQD_PQ_WPTR_POLL_ADDR_HI, uint32(c.PollAddr>>32))
	pc := c.PollIntervalUS << abi.REG_HQD_PQ_WPTR_POLL_CNTL__INTERVAL_US__SHIFT & abi.REG_HQD_PQ_WPTR_POLL_CNTL__INTERVAL_US_MASK
	if c.Poll {
		pc |= abi.REG_HQD_PQ_WPTR_POLL_CNTL__EN_MASK
	}
	r.WriteHQD(slot, abi.REG_HQD_PQ_WPTR_POLL_CNTL, pc)
}

// StartQueue programs and activates a queue and returns its guest-side ring.
func (r *Rig) StartQueue(slot int, c QueueConfig) *Ring {
	r.Program(slot, c)
	r.WriteHQD(slot, abi.REG_HQD_ACTIVE, 1)
	return r.NewRing(slot, c)
}

// NewRing returns the guest-side view of a ring (wptr 0) without touching the HQD.
func (r *Rig) NewRing(slot int, c QueueConfig) *Ring {
	ring := &Ring{Rig: r, Slot: slot, Base: c.Base, Size: uint64(1) << (c.QueueSize + 1), Config: c}
	ring.Writer = Writer{emit: ring.put}
	return ring
}

// Writer has an emit helper per packet; Ring and IB embed it. Each returns the position
// after the packet: the ring's wptr, or the IB's size in dwords.
type Writer struct{ emit func(dws []uint32) uint64 }

// Emit writes packets in order.
func (w Writer) Emit(pkts ...[]uint32) uint64 {
	var pos uint64
	for _, p := range pkts {
		pos = w.emit(p)
	}
	return pos
}

func (w Writer) Nop(total int) uint64 { return w.emit(pm4.Nop(total)) }
func (w Writer) SetUConfigReg(off uint32, v ...uint32) uint64 {
	return w.emit(pm4.SetUConfigReg(off, v...))
}
func (w Writer) SetConfigReg(off uint32, v ...uint32) uint64 {
	return w.emit(pm4.SetConfigReg(off, v...))
}
func (w Writer) SetShReg(off uint32, v ...uint32) uint64 { return w.emit(pm4.SetShReg(off, v...)) }
func (w Writer) WriteData(p pm4.WriteData) uint64        { return w.emit(p.Encode()) }
func (w Writer) WriteMem(addr uint64, data ...uint32) uint64 {
	return w.emit(pm4.WriteMem(addr, data...))
}
func (w Writer) WriteReg(reg uint32, data ...uint32) uint64 {
	return w.emit(pm4.WriteReg(reg, data...))
}
func (w Writer) CopyData(p pm4.CopyData) uint64             { return w.emit(p.Encode()) }
func (w Writer) IB(ib *IB) uint64                           { return w.emit(IBCall(ib)) }
func (w Writer) IndirectBuffer(p pm4.IndirectBuffer) uint64 { return w.emit(p.Encode()) }
func (w Writer) ReleaseMem(p pm4.ReleaseMem) uint64         { return w.emit(p.Encode()) }
func (w Writer) AcquireMem(p pm4.AcquireMem) uint64         { return w.emit(p.Encode()) }
func (w Writer) WaitRegMem(p pm4.WaitRegMem) uint64         { return w.emit(p.Encode()) }
func (w Writer) DMAData(p pm4.DMAData) uint64               { return w.emit(p.Encode()) }
func (w Writer) EventWrite(typ, index uint32) uint64        { return w.emit(pm4.EventWrite(typ, index)) }
func (w Writer) PfpSyncMe() uint64                          { return w.emit(pm4.PfpSyncMe()) }

// Fence emits amdgpu's job fence (see pm4.Fence).
func (w Writer) Fence(addr uint64, seq, ctx uint32, irq bool) uint64 {
	return w.emit(pm4.Fence(addr, seq, ctx, irq))
}

// Dispatch sets a built-in kernel's arguments and dispatches x*y*z groups.
func (w Writer) Dispatch(kernel uint32, dst, src uint64, value uint32, x, y, z uint32) uint64 {
	w.emit(pm4.Kernel(kernel, dst, src, value))
	return w.emit(pm4.DispatchDirect(x, y, z))
}

// Ring is the driver's side of one queue: it writes packets into the ring memory at wptr
// (wrapping) and tells the CP about the new wptr.
type Ring struct {
	Writer
	Rig    *Rig
	Slot   int
	Base   uint64
	Size   uint64 // dwords
	Config QueueConfig

	mu   sync.Mutex
	wptr uint64
}

func (r *Ring) put(dws []uint32) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range dws {
		r.Rig.Mem.Store32(r.Base+r.wptr%r.Size*4, d)
		r.wptr++
	}
	return r.wptr
}

// Wptr is the driver's write pointer (dwords, monotonic).
func (r *Ring) Wptr() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wptr
}

// SetWptr moves the driver's write pointer without writing packets.
func (r *Ring) SetWptr(w uint64) {
	r.mu.Lock()
	r.wptr = w
	r.mu.Unlock()
}

// Kick writes PQ_WPTR_LO then PQ_WPTR_HI with the wptr.
func (r *Ring) Kick() {
	w := r.Wptr()
	r.Rig.WriteHQD(r.Slot, abi.REG_HQD_PQ_WPTR_LO, uint32(w))
	r.Rig.WriteHQD(r.Slot, abi.REG_HQD_PQ_WPTR_HI, uint32(w>>32))
}

// Ring rings the queue's doorbell with the wptr.
func (r *Ring) Ring() { r.Rig.Doorbell(r.Config.Doorbell, r.Wptr()) }

// Submit emits packets and kicks.
func (r *Ring) Submit(pkts ...[]uint32) uint64 {
	w := r.Emit(pkts...)
	r.Kick()
	return w
}

// Rptr is the CP's monotonic read pointer.
func (r *Ring) Rptr() uint64 { return r.Rig.CP.Stats().Queues[r.Slot].Rptr }

// WaitIdle waits until the CP consumed everything up to the wptr (failing the test if the
// queue halts first).
func (r *Ring) WaitIdle(tb testing.TB) {
	tb.Helper()
	w := r.Wptr()
	Eventually(tb, "ring idle", func() bool {
		q := r.Rig.CP.Stats().Queues[r.Slot]
		if q.State == abi.HQD_STATE_HALTED {
			tb.Fatalf("slot %d halted: error %d at %#x info %#x", r.Slot, q.Error, q.ErrorAddr, q.ErrorInfo)
		}
		return q.Rptr == w
	})
}

// WaitHalt waits until the queue halts and returns its error code.
func (r *Ring) WaitHalt(tb testing.TB) uint32 {
	tb.Helper()
	r.Rig.WaitState(tb, r.Slot, abi.HQD_STATE_HALTED)
	_, e := r.Rig.Status(r.Slot)
	return e
}

// Dequeue writes DEQUEUE_REQUEST.
func (r *Ring) Dequeue(v uint32) { r.Rig.WriteHQD(r.Slot, abi.REG_HQD_DEQUEUE_REQUEST, v) }

// IB is an indirect buffer being built in memory at Base.
type IB struct {
	Writer
	Mem  *Memory
	Base uint64

	mu sync.Mutex
	n  uint64
}

// NewIB starts an empty IB at base.
func NewIB(mem *Memory, base uint64) *IB {
	ib := &IB{Mem: mem, Base: base}
	ib.Writer = Writer{emit: ib.put}
	return ib
}

func (ib *IB) put(dws []uint32) uint64 {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	ib.Mem.StoreDwords(ib.Base+ib.n*4, dws)
	ib.n += uint64(len(dws))
	return ib.n
}

// Size is the IB's length in dwords.
func (ib *IB) Size() uint32 {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return uint32(ib.n)
}

// IBCall is INDIRECT_BUFFER of the IB built so far.
func IBCall(ib *IB) []uint32 { return pm4.IndirectBuffer{Addr: ib.Base, Size: ib.Size()}.Encode() }
