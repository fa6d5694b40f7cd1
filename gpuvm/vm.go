package gpuvm

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"vgpu/abi"
	"vgpu/engine"
	"vgpu/ratelog"
)

const (
	// NumVMIDs is the number of VM contexts; VMIDs 1..NumVMIDs-1 are gpuvm's, VMID 0 is the
	// kernel's (gpummu's apertures and GART).
	NumVMIDs = abi.VM_CONTEXTS
	// NumEngines is the number of invalidation engines.
	NumEngines = abi.VM_INV_ENGINES
	// CAMEntries is the size of the retry CAM.
	CAMEntries = abi.VM_RETRY_CAM_ENTRIES
	// TLBEntries and PDECacheEntries are the per-VMID capacities.
	TLBEntries      = abi.VM_TLB_ENTRIES
	PDECacheEntries = abi.VM_PDE_CACHE_ENTRIES

	pageShift = 12
	pageSize  = 1 << pageShift
	pageMask  = pageSize - 1
	vaBits    = abi.GPU_VA_BITS
	vaLimit   = uint64(1) << vaBits
	pageBits  = vaBits - pageShift // START/END are page numbers of this many bits
)

// TableReader reads page-table entries for the walker: len(p) bytes (one 8-byte entry) at pa,
// straight from memory (VRAM, or system memory through the IOMMU). It may be slow (a DMA
// message); the VM never calls it with a lock held. An error means the entry cannot be read
// (unmapped, Bus Master off, outside VRAM) and becomes a walker error.
type TableReader interface {
	ReadPTE(pa engine.PhysAddr, p []byte) error
}

// Config is what a VM needs from the device.
type Config struct {
	Tables   TableReader
	VRAMSize uint64           // VRAM page tables must lie below this offset
	Log      *slog.Logger     // nil: discard
	Limiter  *ratelog.Limiter // guest-triggered log lines; nil: a private one over Log
}

// VM is the GPUVM hub: contexts 1..15 with their page-table walker, TLBs and PDE caches, the
// invalidation engines, the fault latch and IVs, the retry CAM, and strict mode. All methods
// are safe for concurrent use; no lock is held across a page-table read or the IV sink.
type VM struct {
	tables   TableReader
	vramSize uint64
	log      *slog.Logger
	rl       *ratelog.Limiter

	sink   atomic.Pointer[func(engine.IV)]
	flush0 atomic.Pointer[func()]
	strict atomic.Bool
	cfg    [NumVMIDs]atomic.Pointer[ctxConfig] // decoded context registers, replaced on write
	ctx    [NumVMIDs]vmContext

	mu     sync.Mutex // registers, fault latch, CAM, engines, stale event; never held across memory
	regs   hubRegs
	latch  faultLatch
	recent faultHistory // the last faults, for the status (status.go)
	cam    cam
	stale  staleEvent
	stats  counters
	faults atomic.Uint64
}

// hubRegs holds the registers as the driver wrote them.
type hubRegs struct {
	ctx       [NumVMIDs]ctxRegs
	pasid     [NumVMIDs]uint32
	faultCntl uint32
	defLo     uint32
	defHi     uint32
	eng       [NumEngines]engRegs
}

type ctxRegs struct {
	cntl, baseLo, baseHi, startLo, startHi, endLo, endHi uint32
}

type engRegs struct {
	sem, req, ack, rangeLo, rangeHi uint32
}

// New returns a VM in its power-on state: every context disabled, nothing cached or latched.
func New(cfg Config) *VM {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rl := cfg.Limiter
	if rl == nil {
		rl = ratelog.New(log, 0, 0)
	}
	v := &VM{tables: cfg.Tables, vramSize: cfg.VRAMSize, log: log, rl: rl}
	for i := range v.cfg {
		v.cfg[i].Store(decodeContext(ctxRegs{}))
	}
	return v
}

// SetIVSink sets where fault IVs go (the IH); nil drops them. It is called without any VM
// lock held, on the faulting engine's goroutine.
func (v *VM) SetIVSink(f func(engine.IV)) {
	if f == nil {
		v.sink.Store(nil)
		return
	}
	v.sink.Store(&f)
}

// SetVMID0Flush sets what an invalidation of VMID 0 does (gpummu drops its GART
// translations); nil: nothing. Called without any VM lock held.
func (v *VM) SetVMID0Flush(f func()) {
	if f == nil {
		v.flush0.Store(nil)
		return
	}
	v.flush0.Store(&f)
}

// PASID returns the PASID table's entry for vmid (0 for a VMID out of range): IVs of work in
// that VMID carry it.
func (v *VM) PASID(vmid int) uint16 {
	if vmid < 0 || vmid >= NumVMIDs {
		return 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return uint16(v.regs.pasid[vmid])
}

func (v *VM) sendIV(iv engine.IV) {
	if f := v.sink.Load(); f != nil {
		(*f)(iv)
	}
}

// Reset returns the hub to power-on: registers, caches, latch, CAM (every waiting retry
// fault is released; it replays and then faults against the reset contexts), strict mode off.
// Counters stay.
func (v *VM) Reset() {
	v.mu.Lock()
	v.regs = hubRegs{}
	for i := range v.cfg {
		v.cfg[i].Store(decodeContext(ctxRegs{}))
	}
	v.latch = faultLatch{}
	v.stale = staleEvent{}
	v.cam.releaseAll()
	v.mu.Unlock()
	v.strict.Store(false)
	for i := range v.ctx {
		v.ctx[i].invalidate(invAll)
	}
}

// DropRetryFaults frees every retry-CAM entry and releases their waiters (which replay):
// the engines' outstanding work is forgotten when the client goes, while the configuration
// (contexts, PASID table, policies) and the caches stay, as for a disconnect elsewhere.
func (v *VM) DropRetryFaults() {
	v.mu.Lock()
	v.cam.releaseAll()
	v.mu.Unlock()
}

// counters are the VM's statistics (atomics: updated without v.mu). TLB hits and walks are
// counted per context, under its lock (vmContext).
type counters struct {
	tableReads                                           atomic.Uint64
	defaultPage, prt, retryIVs, retryWaits, camFullWaits atomic.Uint64
	bogusAcks, invalidations, staleUses, staleRaces      atomic.Uint64
}

// Stats counts the VM's work and the guest's mistakes.
type Stats struct {
	TLBHits       uint64
	TLBMisses     uint64 // walks
	PDECacheHits  uint64 // walks that started below the root from a cached PDE
	TableReads    uint64 // page-table entries read from memory
	Faults        uint64 // no-retry faults
	DefaultPage   uint64 // of which redirected to the default page
	PRT           uint64 // accesses to PRT pages
	RetryIVs      uint64 // retry faults that allocated a CAM entry and sent an IV
	RetryWaits    uint64 // retry faults returned (each one makes an engine wait)
	CAMFullWaits  uint64 // of which waited for a free CAM entry
	BogusAcks     uint64 // RETRY_CAM_ACK of an entry not in use
	Invalidations uint64 // per-VMID invalidations done
	StaleUses     uint64 // strict mode
	TLBEntries    int    // translations cached now (all VMIDs)
}

// Stats returns the counters.
func (v *VM) Stats() Stats {
	s := Stats{
		TableReads: v.stats.tableReads.Load(), Faults: v.faults.Load(),
		DefaultPage: v.stats.defaultPage.Load(), PRT: v.stats.prt.Load(),
		RetryIVs: v.stats.retryIVs.Load(), RetryWaits: v.stats.retryWaits.Load(),
		CAMFullWaits: v.stats.camFullWaits.Load(), BogusAcks: v.stats.bogusAcks.Load(),
		Invalidations: v.stats.invalidations.Load(), StaleUses: v.stats.staleUses.Load(),
	}
	for i := range v.ctx {
		n, hits, misses, pdeHits := v.ctx[i].counts()
		s.TLBEntries += n
		s.TLBHits += hits
		s.TLBMisses += misses
		s.PDECacheHits += pdeHits
	}
	return s
}
