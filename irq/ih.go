package irq

import (
	"encoding/binary"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"vgpu/engine"
	"vgpu/inject"

	"vgpu/abi"
	"vgpu/ratelog"
	"vgpu/trace"
)

// IHMemory is where the IH ring lives: Write stores p at GPU address va with VMID 0, bypassing
// the L2 (the device implements it through gpummu). A write may be a vfio-user DMA message that
// QEMU answers from its main loop, so the IH never calls it with its lock held.
type IHMemory interface {
	Write(va uint64, p []byte) error
}

// IHStats is a snapshot of the IH counters (the registers show the low 32 bits of the first
// two).
type IHStats struct {
	Entries         uint64 // entries written into the ring and published (IH_ENTRIES)
	Dropped         uint64 // entries lost: ring disabled, full without overflow, unwritable, or moved while being written (IH_DROPPED)
	WriteErrors     uint64 // the part of Dropped whose ring write failed
	WritebackErrors uint64 // wptr writebacks that failed (the entries themselves were written)
	Overflows       uint64 // entries written into a full ring or while RB_OVERFLOW was set (WPTR_OVERFLOW_ENABLE)
	Raised          uint64 // calls of raise: new entries and RB_RPTR re-arms
	Stalls          uint64 // pushes that waited for room in the backlog
	Pending         int    // entries pushed but not yet written
}

// Register offsets relative to the IH block.
const (
	ihRBCntl       = abi.REG_IH_RB_CNTL - abi.BLOCK_IH_BASE
	ihRBBaseLo     = abi.REG_IH_RB_BASE_LO - abi.BLOCK_IH_BASE
	ihRBBaseHi     = abi.REG_IH_RB_BASE_HI - abi.BLOCK_IH_BASE
	ihRBRptr       = abi.REG_IH_RB_RPTR - abi.BLOCK_IH_BASE
	ihRBWptr       = abi.REG_IH_RB_WPTR - abi.BLOCK_IH_BASE
	ihRBWptrAddrLo = abi.REG_IH_RB_WPTR_ADDR_LO - abi.BLOCK_IH_BASE
	ihRBWptrAddrHi = abi.REG_IH_RB_WPTR_ADDR_HI - abi.BLOCK_IH_BASE
	ihDoorbellRptr = abi.REG_IH_DOORBELL_RPTR - abi.BLOCK_IH_BASE
	ihMSIXVector   = abi.REG_IH_MSIX_VECTOR - abi.BLOCK_IH_BASE
	ihEntries      = abi.REG_IH_ENTRIES - abi.BLOCK_IH_BASE
	ihDropped      = abi.REG_IH_DROPPED - abi.BLOCK_IH_BASE
)

const (
	// IHMinRingLog2 and IHMaxRingLog2 bound IH_RB_CNTL.RB_SIZE (log2 of the ring in dwords):
	// 1 KiB (32 entries) to 256 KiB (8192 entries, amdgpu's ring 0), the largest ring whose byte
	// offsets fit RB_WPTR.OFFSET [17:2]. Other values are clamped into the range.
	IHMinRingLog2 = 8
	IHMaxRingLog2 = 16

	ihEntryBytes = abi.IH_ENTRY_BYTES

	// ihCntlStored are the RB_CNTL bits the register keeps (WPTR_OVERFLOW_CLEAR is an action).
	ihCntlStored = abi.REG_IH_RB_CNTL__RB_ENABLE_MASK | abi.REG_IH_RB_CNTL__RB_SIZE_MASK |
		abi.REG_IH_RB_CNTL__WPTR_WRITEBACK_ENABLE_MASK | abi.REG_IH_RB_CNTL__WPTR_OVERFLOW_ENABLE_MASK |
		abi.REG_IH_RB_CNTL__ENABLE_INTR_MASK
	ihCntlReset = IHMinRingLog2 << abi.REG_IH_RB_CNTL__RB_SIZE__SHIFT

	ihTimestampMask = 1<<48 - 1
	ihAddrHiMask    = 0xFFFF // GPU addresses are 48-bit

	// ihMaxPending bounds the entries waiting for the writer (beyond it, Push waits); ihBudget
	// bounds the entries one Push call writes for others before it hands the work to a new
	// goroutine.
	ihMaxPending = 1024
	ihBudget     = 4096
)

// IH is the interrupt handler ring: engines Push IVs; the IH appends them as AMD IV entries to a
// ring in GPU memory, writes the write pointer back and raises an MSI-X vector. The driver
// consumes entries and moves IH_RB_RPTR. See "Interrupt handler ring" in the package
// documentation for the contract.
//
// All methods are safe for concurrent use.
type IH struct {
	mem   IHMemory
	raise func(vector int)
	now   func() time.Duration // since creation or Reset; replaced by tests

	budget int // see ihBudget; lowered by tests

	mu    sync.Mutex
	idle  sync.Cond // broadcast when the writer role is released
	space sync.Cond // broadcast when the backlog shrinks or the ring is disabled
	start time.Time

	// Registers.
	cntl           uint32 // ihCntlStored bits only, RB_SIZE clamped
	baseLo, baseHi uint32
	rptr, wptr     uint32 // byte offsets into the ring, below its size
	overflow       bool   // RB_WPTR.RB_OVERFLOW
	wbLo, wbHi     uint32
	doorbell       uint32
	vector         uint32

	// gen changes on Reset: work begun before it is forgotten silently. epoch changes whenever
	// the ring moves (base, size, enable, Reset): an entry written under an older epoch landed
	// in a ring that no longer exists and is dropped instead of published.
	gen, epoch uint64
	lastTS     uint64

	// Entries pushed but not yet written: a FIFO of encoded entries, in push order.
	pend       [][ihEntryBytes]byte
	head, npen int
	writing    bool   // a goroutine holds the writer role
	wbuf       []byte // the writer's staging buffer (owned by the writer role)

	entries, dropped, writeErrs, wbErrs, overflows, stalls uint64
	raised                                                 atomic.Uint64

	limit    atomic.Pointer[ratelog.Limiter]
	ownLimit *ratelog.Limiter // the default, on NewIH's logger

	trace *trace.Recorder // the timeline (trace.go; nil: off)
	inj   *inject.Set     // fault injection (inject.go)
}

// Keys of the IH's rate-limited log lines (ratelog).
const (
	logKeyIHWrite     = "ih-ring-write-failed"
	logKeyIHWriteback = "ih-wptr-writeback-failed"
	logKeyIHRingSize  = "ih-rb-size-clamped"
)

// NewIH returns an IH in its reset state. raise is called (never with the IH's lock held, from
// Push callers, a hand-off goroutine or WriteReg/SetRPTR callers) with IH_MSIX_VECTOR; it must
// be safe for concurrent use and must not block on the vfio-user worker. Log lines (a guest
// can cause every one of them) go through a rate limiter on log, one line per kind and second
// (nil log discards), until SetLimiter replaces it.
func NewIH(mem IHMemory, raise func(vector int), log *slog.Logger) *IH {
	h := &IH{mem: mem, raise: raise, budget: ihBudget, pend: make([][ihEntryBytes]byte, ihMaxPending)}
	// One line per kind and second, as before the device's limiter existed.
	h.ownLimit = ratelog.New(log, time.Second, 1)
	h.limit.Store(h.ownLimit)
	h.idle.L = &h.mu
	h.space.L = &h.mu
	h.now = func() time.Duration { return time.Since(h.start) }
	h.mu.Lock()
	h.resetLocked()
	h.mu.Unlock()
	return h
}

// Reset returns every register to its reset value (all 0 except RB_CNTL.RB_SIZE, which reads
// IHMinRingLog2), clears the counters and restarts the timestamp clock. Entries not yet written
// are forgotten; a memory write already in flight is not waited for (it may still land, but is
// never published).
func (h *IH) Reset() {
	h.mu.Lock()
	h.resetLocked()
	h.mu.Unlock()
}

// Quiesce waits up to timeout until no goroutine holds the writer role, and reports whether
// that happened. After Reset the backlog is empty and the ring disabled, so a writer finishes
// the one memory write it may be in and stops: the life-cycle contract's "no engine write in
// flight" for the IH (a hand-off goroutine included).
func (h *IH) Quiesce(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		h.mu.Lock()
		busy := h.writing
		h.mu.Unlock()
		if !busy {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Microsecond)
	}
}

func (h *IH) resetLocked() {
	h.cntl = ihCntlReset
	h.baseLo, h.baseHi, h.rptr, h.wptr, h.overflow = 0, 0, 0, 0, false
	h.wbLo, h.wbHi, h.doorbell, h.vector = 0, 0, 0, 0
	h.gen++
	h.epoch++
	h.start = time.Now()
	h.lastTS = 0
	h.head, h.npen = 0, 0
	h.space.Broadcast()
	h.entries, h.dropped, h.writeErrs, h.wbErrs, h.overflows, h.stalls = 0, 0, 0, 0, 0, 0
	h.raised.Store(0)
}

func (h *IH) enabledLocked() bool { return h.cntl&abi.REG_IH_RB_CNTL__RB_ENABLE_MASK != 0 }

func (h *IH) cntlBit(mask uint32) bool { return h.cntl&mask != 0 }

// sizeLocked is the ring size in bytes.
func (h *IH) sizeLocked() uint32 {
	log2 := (h.cntl & abi.REG_IH_RB_CNTL__RB_SIZE_MASK) >> abi.REG_IH_RB_CNTL__RB_SIZE__SHIFT
	return 4 << log2
}

func (h *IH) baseLocked() uint64 { return uint64(h.baseHi)<<32 | uint64(h.baseLo) }

func (h *IH) wbAddrLocked() uint64 { return uint64(h.wbHi)<<32 | uint64(h.wbLo) }

// wptrRegLocked is the RB_WPTR register value, which is also what the writeback stores.
func (h *IH) wptrRegLocked() uint32 {
	v := h.wptr & abi.REG_IH_RB_WPTR__OFFSET_MASK
	if h.overflow {
		v |= abi.REG_IH_RB_WPTR__RB_OVERFLOW_MASK
	}
	return v
}

// Push appends iv to the ring, or drops it (counted) when the ring is disabled. If another
// goroutine is writing entries, iv joins the backlog that goroutine writes before it returns,
// and Push returns at once; otherwise this call writes the backlog itself (memory writes, the
// wptr writeback, raise). So when every Push call has returned, every pushed entry has been
// written or dropped, and published — except after a very long run of pushes, where the writer
// hands the rest to a new goroutine (see ihBudget). Push waits only when the backlog is full
// (ihMaxPending entries), until the writer takes the next run.
//
// The entry is the 32-byte AMD IV entry (abi.IH_*): VMID keeps its low 4 bits, NODE_ID,
// VMID_TYPE, TIMESTAMP_SRC and PASID_SRC are 0, and the timestamp is the IH's own clock.
//
// Because Push may write memory (possibly a vfio-user DMA message), it must not be called on
// the vfio-user worker goroutine.
func (h *IH) Push(iv engine.IV) {
	if h.inj.HasAny(inject.IVKinds) && h.injectIV(&iv) {
		return
	}
	h.mu.Lock()
	if h.npen == len(h.pend) && h.enabledLocked() {
		// Backpressure, as a CP stalls on a full IH input FIFO: a full backlog has a writer
		// (pending entries always do), so this wait ends when that writer takes the next run,
		// or when the ring is disabled or reset.
		h.stalls++
		for h.npen == len(h.pend) && h.enabledLocked() {
			h.space.Wait()
		}
	}
	if !h.enabledLocked() {
		h.dropped++
		h.mu.Unlock()
		h.traceIV(&iv, true)
		return
	}
	ts := uint64(h.now()) & ihTimestampMask
	if ts < h.lastTS && h.lastTS-ts < 1<<47 { // never go backwards (except on the 48-bit wrap)
		ts = h.lastTS
	}
	h.lastTS = ts
	encodeIV(&h.pend[(h.head+h.npen)%len(h.pend)], iv, ts)
	h.npen++
	h.traceIV(&iv, false)
	if h.writing {
		h.mu.Unlock()
		return
	}
	h.writing = true
	h.mu.Unlock()
	h.drain(h.budget)
}

// encodeIV builds the AMD IV entry (amdgpu_ih_decode_iv_helper layout).
func encodeIV(e *[ihEntryBytes]byte, iv engine.IV, ts uint64) {
	dw0 := uint32(iv.Client)<<abi.IH_DW0_CLIENT_ID__SHIFT&abi.IH_DW0_CLIENT_ID_MASK |
		uint32(iv.Source)<<abi.IH_DW0_SOURCE_ID__SHIFT&abi.IH_DW0_SOURCE_ID_MASK |
		uint32(iv.RingID)<<abi.IH_DW0_RING_ID__SHIFT&abi.IH_DW0_RING_ID_MASK |
		uint32(iv.VMID)<<abi.IH_DW0_VMID__SHIFT&abi.IH_DW0_VMID_MASK
	dw2 := uint32(ts>>32) << abi.IH_DW2_TIMESTAMP_HI__SHIFT & abi.IH_DW2_TIMESTAMP_HI_MASK
	dw3 := uint32(iv.PASID) << abi.IH_DW3_PASID__SHIFT & abi.IH_DW3_PASID_MASK
	binary.LittleEndian.PutUint32(e[0:], dw0)
	binary.LittleEndian.PutUint32(e[4:], uint32(ts))
	binary.LittleEndian.PutUint32(e[8:], dw2)
	binary.LittleEndian.PutUint32(e[12:], dw3)
	for i, d := range iv.Data {
		binary.LittleEndian.PutUint32(e[16+4*i:], d)
	}
}

// run is a contiguous stretch of ring slots reserved by the writer.
type run struct {
	gen, epoch uint64
	addr       uint64 // GPU address of the first slot
	slot       uint32 // its byte offset in the ring
	n          uint32 // entries
	overflow   uint32 // entries of the stretch beyond the free space (written over unread ones)
}

// publication is what the writer announces after a run: the wptr writeback and the interrupt.
type publication struct {
	gen      uint64
	wptr     uint32
	wb, intr bool
	wbAddr   uint64
	vector   int
	ok       bool
}

// drain is the writer role: it writes the backlog run by run, publishing after each, until the
// backlog is empty or budget entries were written (then a new goroutine takes the role over).
func (h *IH) drain(budget int) {
	for {
		h.mu.Lock()
		if h.npen == 0 {
			h.writing = false
			h.idle.Broadcast()
			h.mu.Unlock()
			return
		}
		if budget <= 0 {
			h.mu.Unlock()
			go h.drain(h.budget) // keeps the writer role
			return
		}
		r := h.reserveLocked()
		h.mu.Unlock()
		if r.n == 0 {
			continue
		}

		err := h.mem.Write(r.addr, h.wbuf)

		h.mu.Lock()
		pub := h.commitLocked(r, err)
		h.mu.Unlock()
		budget -= int(r.n)
		if err != nil {
			h.limit.Load().Warn(logKeyIHWrite, "ih: ring write failed, entries dropped", "addr", hexAddr(r.addr), "entries", r.n, "err", err)
		}
		h.publish(pub)
	}
}

// reserveLocked takes the next run off the backlog and stages it in wbuf: as many entries as
// are pending, up to the end of the ring and, without WPTR_OVERFLOW_ENABLE, up to the last free
// slot. Entries that cannot be written (ring disabled, ring full) are dropped; then n is 0.
func (h *IH) reserveLocked() run {
	if !h.enabledLocked() { // (WriteReg drops the backlog when it disables; this is a safety net)
		h.dropped += uint64(h.npen)
		h.head, h.npen = 0, 0
		h.space.Broadcast()
		return run{}
	}
	size := h.sizeLocked()
	// Bytes wptr may advance without reaching rptr (rptr == wptr means empty, so the ring holds
	// size/32 - 1 entries); an entry fits when all its 32 bytes do.
	free := ((h.rptr - h.wptr - 1) & (size - 1)) / ihEntryBytes
	n := min(uint32(h.npen), (size-h.wptr)/ihEntryBytes)
	var over uint32
	if n > free {
		if !h.cntlBit(abi.REG_IH_RB_CNTL__WPTR_OVERFLOW_ENABLE_MASK) {
			if free == 0 { // full: everything pending is dropped (rptr cannot move meanwhile)
				h.dropped += uint64(h.npen)
				h.head, h.npen = 0, 0
				h.space.Broadcast()
				return run{}
			}
			n = free
		} else {
			over = n - free // AMD: keep writing over the oldest entries and flag RB_OVERFLOW
		}
	}
	need := int(n) * ihEntryBytes
	if cap(h.wbuf) < need {
		h.wbuf = make([]byte, max(need, 64*ihEntryBytes))
	}
	h.wbuf = h.wbuf[:need]
	for i := range n {
		copy(h.wbuf[i*ihEntryBytes:], h.pend[h.head][:])
		h.head = (h.head + 1) % len(h.pend)
	}
	h.npen -= int(n)
	if h.npen == 0 {
		h.head = 0
	}
	h.space.Broadcast()
	return run{gen: h.gen, epoch: h.epoch, addr: h.baseLocked() + uint64(h.wptr), slot: h.wptr, n: n, overflow: over}
}

// commitLocked publishes a written run by advancing wptr over it, or drops it.
func (h *IH) commitLocked(r run, err error) publication {
	if r.gen != h.gen {
		return publication{} // reset meanwhile: counters start afresh
	}
	if err != nil || r.epoch != h.epoch {
		h.dropped += uint64(r.n)
		if err != nil {
			h.writeErrs += uint64(r.n)
		}
		return publication{}
	}
	h.wptr = (r.slot + r.n*ihEntryBytes) & (h.sizeLocked() - 1)
	h.entries += uint64(r.n)
	if h.overflow {
		h.overflows += uint64(r.n) // wptr already passed rptr: every entry lands on unread ones
	} else if r.overflow > 0 {
		h.overflow = true
		h.overflows += uint64(r.overflow)
	}
	return publication{
		gen:    h.gen,
		wptr:   h.wptrRegLocked(),
		wb:     h.cntlBit(abi.REG_IH_RB_CNTL__WPTR_WRITEBACK_ENABLE_MASK),
		wbAddr: h.wbAddrLocked(),
		intr:   h.cntlBit(abi.REG_IH_RB_CNTL__ENABLE_INTR_MASK),
		vector: int(h.vector),
		ok:     true,
	}
}

// publish writes the wptr back and raises the vector (called by the writer, without the lock,
// so writebacks are ordered like the runs).
func (h *IH) publish(p publication) {
	if !p.ok {
		return
	}
	if p.wb {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], p.wptr)
		if err := h.mem.Write(p.wbAddr, b[:]); err != nil {
			h.mu.Lock()
			if p.gen == h.gen {
				h.wbErrs++
			}
			h.mu.Unlock()
			h.limit.Load().Warn(logKeyIHWriteback, "ih: wptr writeback failed", "addr", hexAddr(p.wbAddr), "err", err)
		}
	}
	if p.intr {
		h.raised.Add(1)
		h.raise(p.vector)
	}
}

// ReadReg reads the IH register at byte offset off from abi.BLOCK_IH_BASE. Unknown offsets read
// 0.
func (h *IH) ReadReg(off uint32) uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch off {
	case ihRBCntl:
		return h.cntl
	case ihRBBaseLo:
		return h.baseLo
	case ihRBBaseHi:
		return h.baseHi
	case ihRBRptr:
		return h.rptr
	case ihRBWptr:
		return h.wptrRegLocked()
	case ihRBWptrAddrLo:
		return h.wbLo
	case ihRBWptrAddrHi:
		return h.wbHi
	case ihDoorbellRptr:
		return h.doorbell
	case ihMSIXVector:
		return h.vector
	case ihEntries:
		return uint32(h.entries)
	case ihDropped:
		return uint32(h.dropped)
	}
	return 0
}

// WriteReg writes the IH register at byte offset off from abi.BLOCK_IH_BASE. Read-only and
// unknown registers ignore writes.
func (h *IH) WriteReg(off uint32, v uint32) {
	switch off {
	case ihRBCntl:
		h.writeCntl(v)
		return
	case ihRBRptr:
		h.SetRPTR(v)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch off {
	case ihRBBaseLo:
		h.setBaseLocked(&h.baseLo, v&^0xFF)
	case ihRBBaseHi:
		h.setBaseLocked(&h.baseHi, v&ihAddrHiMask)
	case ihRBWptrAddrLo:
		h.wbLo = v &^ 3
	case ihRBWptrAddrHi:
		h.wbHi = v & ihAddrHiMask
	case ihDoorbellRptr:
		h.doorbell = v & (abi.REG_IH_DOORBELL_RPTR__OFFSET_MASK | abi.REG_IH_DOORBELL_RPTR__ENABLE_MASK)
	case ihMSIXVector:
		h.vector = v
	}
}

func (h *IH) setBaseLocked(reg *uint32, v uint32) {
	if *reg != v {
		*reg = v
		h.epoch++
	}
}

func (h *IH) writeCntl(v uint32) {
	log2 := (v & abi.REG_IH_RB_CNTL__RB_SIZE_MASK) >> abi.REG_IH_RB_CNTL__RB_SIZE__SHIFT
	clamped := min(max(log2, IHMinRingLog2), IHMaxRingLog2)
	n := ihCntlStored&v&^abi.REG_IH_RB_CNTL__RB_SIZE_MASK | clamped<<abi.REG_IH_RB_CNTL__RB_SIZE__SHIFT

	h.mu.Lock()
	old := h.cntl
	h.cntl = n
	if v&abi.REG_IH_RB_CNTL__WPTR_OVERFLOW_CLEAR_MASK != 0 {
		h.overflow = false
	}
	wasOn, on := old&abi.REG_IH_RB_CNTL__RB_ENABLE_MASK != 0, n&abi.REG_IH_RB_CNTL__RB_ENABLE_MASK != 0
	if wasOn != on || old&abi.REG_IH_RB_CNTL__RB_SIZE_MASK != n&abi.REG_IH_RB_CNTL__RB_SIZE_MASK {
		h.epoch++
	}
	if wasOn && !on {
		// Disabling empties the ring (amdgpu zeroes both pointers here; our RB_WPTR is RO) and
		// drops what has not been written yet.
		h.rptr, h.wptr = 0, 0
		h.dropped += uint64(h.npen)
		h.head, h.npen = 0, 0
		h.space.Broadcast()
	}
	mask := h.sizeLocked() - 1
	h.rptr &= mask
	h.wptr &= mask
	h.mu.Unlock()

	if clamped != log2 {
		h.limit.Load().Warn(logKeyIHRingSize, "ih: IH_RB_CNTL.RB_SIZE out of range, clamped", "rb_size", log2, "used", clamped)
	}
}

// SetRPTR sets the read pointer (bytes) as a write of IH_RB_RPTR does; the device calls it for a
// doorbell write that matches DoorbellRPTR. When entries remain after the move (rptr != wptr)
// and interrupts are on, the vector is raised again (RPTR_REARM).
func (h *IH) SetRPTR(v uint32) {
	h.mu.Lock()
	h.rptr = v & (h.sizeLocked() - 1) & abi.REG_IH_RB_WPTR__OFFSET_MASK
	again := h.enabledLocked() && h.cntlBit(abi.REG_IH_RB_CNTL__ENABLE_INTR_MASK) && h.rptr != h.wptr
	vector := int(h.vector)
	h.mu.Unlock()
	if again {
		h.raised.Add(1)
		h.raise(vector)
	}
}

// DoorbellRPTR returns the doorbell (dword index) that carries IH_RB_RPTR, and whether it is
// enabled (IH_DOORBELL_RPTR).
func (h *IH) DoorbellRPTR() (dword uint32, enabled bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.doorbell & abi.REG_IH_DOORBELL_RPTR__OFFSET_MASK, h.doorbell&abi.REG_IH_DOORBELL_RPTR__ENABLE_MASK != 0
}

// Stats returns a snapshot of the counters.
func (h *IH) Stats() IHStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return IHStats{
		Entries: h.entries, Dropped: h.dropped, WriteErrors: h.writeErrs, WritebackErrors: h.wbErrs,
		Overflows: h.overflows, Raised: h.raised.Load(), Stalls: h.stalls, Pending: h.npen,
	}
}

// SetLimiter makes the IH's log lines go through l (the device's limiter); nil restores the
// default, one line per kind and second on NewIH's logger. Safe at any time.
func (h *IH) SetLimiter(l *ratelog.Limiter) {
	if l == nil {
		l = h.ownLimit
	}
	h.limit.Store(l)
}

func hexAddr(a uint64) string { return "0x" + strconv.FormatUint(a, 16) }

// IH is the engines' interrupt port.
var _ engine.Interrupts = (*IH)(nil)
