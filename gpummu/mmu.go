package gpummu

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/gpuvm"
	"vgpu/l2"
	"vgpu/ratelog"
)

const (
	// PageSize is the GPU page size: one GART entry maps one page.
	PageSize  = abi.PTE_PAGE_SIZE
	pageShift = 12
	pageMask  = PageSize - 1

	// NumVMIDs is the number of VM contexts an access or VM_INVALIDATE can name. Only VMID 0
	// (the kernel's GART context) has apertures; other VMIDs fault.
	NumVMIDs = 16

	// MaxGARTPages bounds the GART aperture at 64 GiB (16 Mi entries, a 128 MiB table): far
	// beyond amdgpu's 512 MiB default. It exists so no guest-programmed size reaches an
	// arithmetic edge; an aperture programmed larger is cut to its first MaxGARTPages pages
	// (logged), and addresses past that fault as outside.
	MaxGARTPages = 16 << 20

	// MaxTLBEntries bounds the translation cache of each VMID (memory). It is direct-mapped:
	// page p's entry replaces whatever page p-MaxTLBEntries·k was cached, so the TLB never
	// grows with the guest's working set. A power of two.
	MaxTLBEntries = 8192

	// MaxCacheOpPages bounds the GART pages one CacheOp translates one by one (256 MiB). A
	// larger range acts on the whole cache instead (a discard becoming write-back+invalidate),
	// which does more than asked but never loses data the guest did not give up.
	MaxCacheOpPages = 65536

	vaLimit = uint64(1) << abi.GPU_VA_BITS
)

// The page-shift arithmetic assumes 4 KiB pages.
var _ [PageSize - 1<<pageShift]struct{}
var _ [1<<pageShift - PageSize]struct{}

// MMU translates GPU addresses of VMID 0 and performs engine memory accesses through the L2.
// It also owns the GMC register block. All methods are safe for concurrent use.
type MMU struct {
	cache    *l2.Cache
	b        l2.Backing
	vramSize uint64
	log      *slog.Logger
	onWrite  atomic.Pointer[func()]
	vm       *gpuvm.VM // VMIDs 1..15 (nil: they fault); set before use

	mu          sync.Mutex // registers, decoded GART, TLB fills and flushes, fault latch; never held across memory
	regs        gartRegs
	gart        gart
	gen         uint64                   // bumped whenever translations are dropped; a TLB fill from an older gen is discarded
	view        atomic.Pointer[gartView] // gart and gen as of the last change, for translation without mu
	tlb         [NumVMIDs]tlb
	faultStatus uint32
	faultAddr   uint64
	rl          *ratelog.Limiter // guest-triggered log lines (faults, oversized apertures)

	stats struct {
		faults, accessErrors, tlbHits, tlbMisses, tlbFlushes atomic.Uint64
	}
}

// gartRegs holds the GMC registers as the driver wrote them.
type gartRegs struct {
	cntl, startLo, startHi, endLo, endHi, tableLo, tableHi uint32
}

// gart is the decoded GART configuration.
type gart struct {
	enabled            bool
	empty              bool   // END < START: no GART aperture
	startPage, endPage uint64 // inclusive page numbers (GPU address >> 12)
	tableValid         bool
	tableDomain        engine.Domain
	tableAddr          uint64
}

func decodeGART(r gartRegs) (g gart, clamped bool) {
	start := (uint64(r.startHi)<<32 | uint64(r.startLo)) & (vaLimit - 1)
	end := (uint64(r.endHi)<<32 | uint64(r.endLo)) & (vaLimit - 1)
	g.enabled = r.cntl&abi.REG_GMC_GART_CNTL__ENABLE_MASK != 0
	g.startPage, g.endPage = start>>pageShift, end>>pageShift
	switch {
	case g.endPage < g.startPage:
		g.empty = true
	case g.endPage-g.startPage >= MaxGARTPages:
		g.endPage = g.startPage + MaxGARTPages - 1
		clamped = true
	}
	pde := uint64(r.tableHi)<<32 | uint64(r.tableLo)
	g.tableValid = pde&abi.PTE_VALID_MASK != 0
	g.tableDomain = engine.DomainVRAM
	if pde&abi.PTE_SYSTEM_MASK != 0 {
		g.tableDomain = engine.DomainSystem
	}
	g.tableAddr = pde & abi.PTE_ADDRESS_MASK
	return g, clamped
}

// New returns an MMU over cache c and memory b for vramSize bytes of VRAM (rounded down to
// whole pages). c may be nil: every access then goes straight to b. The GMC registers start at
// their reset values (GART disabled, no fault latched). A nil log discards messages.
func New(c *l2.Cache, b l2.Backing, vramSize uint64, log *slog.Logger) *MMU {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	vramSize = min(vramSize, vaLimit-abi.GPU_FB_BASE) &^ pageMask
	m := &MMU{cache: c, b: b, vramSize: vramSize, log: log, rl: ratelog.New(log, 0, 10)}
	m.gart, _ = decodeGART(m.regs)
	m.publish()
	return m
}

// SetLimiter makes guest-triggered log lines go through l (the device's one limiter); call
// it before the MMU is used.
func (m *MMU) SetLimiter(l *ratelog.Limiter) { m.rl = l }

// SetOnWrite sets the function Write calls after it wrote memory (nil: none). The command
// processor uses it to re-check WAIT_REG_MEMs parked on memory. It is called without any MMU
// lock held, on the writer's goroutine.
func (m *MMU) SetOnWrite(f func()) {
	if f == nil {
		m.onWrite.Store(nil)
		return
	}
	m.onWrite.Store(&f)
}

// Read copies len(p) bytes at GPU address va into p. The access is split into pages, each
// translated and read through the L2 (or around it for Bypass and MTYPE_UC pages). It stops at
// the first page that fails: a *Fault for a translation failure, an *AccessError when memory
// refused; either is latched in GMC_VM_FAULT_*.
func (m *MMU) Read(a engine.Access, va uint64, p []byte) error {
	_, err := m.access(a, va, p, false)
	return err
}

// Write copies p to GPU address va, page by page like Read; pages before a failing one are
// written. If anything was written it then calls the OnWrite hook.
func (m *MMU) Write(a engine.Access, va uint64, p []byte) error {
	n, err := m.access(a, va, p, true)
	if n > 0 {
		if f := m.onWrite.Load(); f != nil {
			(*f)()
		}
	}
	return err
}

func (m *MMU) access(a engine.Access, va uint64, p []byte, write bool) (int, error) {
	if m.inVM(a.VMID) {
		return m.accessVM(a, va, p, write)
	}
	done := 0
	for len(p) > 0 {
		n := min(uint64(len(p)), PageSize-va&pageMask)
		x, reason := m.translate(a, va, write, true)
		if reason != abi.VM_FAULT_NONE {
			return done, m.fault(a, va, write, reason)
		}
		pa := engine.PhysAddr{Domain: x.pa.Domain, Addr: x.pa.Addr + va&pageMask}
		if err := m.phys(a, x.uc, pa, va, p[:n], write); err != nil {
			return done, m.accessError(a, va, pa, write, err)
		}
		done += int(n)
		va += n // va < vaLimit: no overflow; the next page faults if it is past the end
		p = p[n:]
	}
	return done, nil
}

// phys performs one access inside one page.
func (m *MMU) phys(a engine.Access, uc bool, pa engine.PhysAddr, va uint64, p []byte, write bool) error {
	if pa.Domain == engine.DomainVRAM && (pa.Addr >= m.vramSize || uint64(len(p)) > m.vramSize-pa.Addr) {
		return ErrBeyondVRAM
	}
	switch {
	case m.cache == nil && write:
		return m.b.WritePhys(pa.Domain, pa.Addr, p)
	case m.cache == nil:
		return m.b.ReadPhys(pa.Domain, pa.Addr, p)
	case (a.Bypass || uc) && write:
		return m.cache.WriteUncached(pa, p)
	case a.Bypass || uc:
		return m.cache.ReadUncached(pa, p)
	case write:
		return m.cache.Write(a.Slot, pa, va, p)
	}
	return m.cache.Read(a.Slot, pa, va, p)
}

// xlat is a page translation.
type xlat struct {
	pa engine.PhysAddr // start of the physical page
	uc bool            // MTYPE_UC: bypass L2
}

// translate maps the page of va. It returns abi.VM_FAULT_NONE or the fault reason; with
// checkPerm false the PTE's R/W bits are not checked (cache operations).
func (m *MMU) translate(a engine.Access, va uint64, write, checkPerm bool) (xlat, uint32) {
	if va >= vaLimit || a.VMID != 0 {
		return xlat{}, abi.VM_FAULT_OUTSIDE
	}
	if m.inFB(va) {
		return xlat{pa: engine.PhysAddr{Domain: engine.DomainVRAM, Addr: (va - abi.GPU_FB_BASE) &^ pageMask}}, abi.VM_FAULT_NONE
	}
	page := va >> pageShift
	v := m.view.Load()
	g, gen := v.g, v.gen
	if g.empty || page < g.startPage || page > g.endPage {
		return xlat{}, abi.VM_FAULT_OUTSIDE
	}
	if !g.enabled {
		return xlat{}, abi.VM_FAULT_GART_DISABLED
	}
	pte, hit := m.tlb[a.VMID].get(page)

	if hit {
		m.stats.tlbHits.Add(1)
	} else {
		m.stats.tlbMisses.Add(1)
		var reason uint32
		if pte, reason = m.readPTE(g, page); reason != abi.VM_FAULT_NONE {
			return xlat{}, reason
		}
		m.mu.Lock()
		if m.gen == gen { // no invalidation or GART change since we looked
			m.tlb[a.VMID].put(page, pte)
		}
		m.mu.Unlock()
	}
	if checkPerm {
		if write && pte&abi.PTE_WRITEABLE_MASK == 0 {
			return xlat{}, abi.VM_FAULT_NO_WRITE
		}
		if !write && pte&abi.PTE_READABLE_MASK == 0 {
			return xlat{}, abi.VM_FAULT_NO_READ
		}
	}
	x := xlat{
		pa: engine.PhysAddr{Domain: engine.DomainVRAM, Addr: pte & abi.PTE_ADDRESS_MASK},
		uc: (pte&abi.PTE_MTYPE_MASK)>>abi.PTE_MTYPE__SHIFT == abi.PTE_MTYPE_UC,
	}
	if pte&abi.PTE_SYSTEM_MASK != 0 {
		x.pa.Domain = engine.DomainSystem
	}
	return x, abi.VM_FAULT_NONE
}

func (m *MMU) inFB(va uint64) bool {
	return va >= abi.GPU_FB_BASE && va-abi.GPU_FB_BASE < m.vramSize
}

// readPTE fetches the GART entry of page from the table, straight from memory (the table is
// written by the CPU; the L2 does not hold it). Called without m.mu: the read may be a DMA
// message round trip.
func (m *MMU) readPTE(g gart, page uint64) (uint64, uint32) {
	if !g.tableValid {
		return 0, abi.VM_FAULT_TABLE
	}
	// page-startPage < MaxGARTPages and tableAddr < 2^48: no overflow.
	addr := g.tableAddr + (page-g.startPage)*abi.PTE_BYTES
	if g.tableDomain == engine.DomainVRAM && (addr >= m.vramSize || m.vramSize-addr < abi.PTE_BYTES) {
		return 0, abi.VM_FAULT_TABLE
	}
	var buf [abi.PTE_BYTES]byte
	if err := m.b.ReadPhys(g.tableDomain, addr, buf[:]); err != nil {
		return 0, abi.VM_FAULT_TABLE
	}
	pte := binary.LittleEndian.Uint64(buf[:])
	if pte&abi.PTE_VALID_MASK == 0 {
		return 0, abi.VM_FAULT_INVALID_PTE
	}
	return pte, abi.VM_FAULT_NONE
}

// fault latches and returns a translation fault.
func (m *MMU) fault(a engine.Access, va uint64, write bool, reason uint32) error {
	m.stats.faults.Add(1)
	m.latch(a, va, write, reason, nil)
	m.reportVM(a, va, write, reason)
	return &Fault{VA: va, VMID: a.VMID, Slot: a.Slot, Write: write, Reason: reason}
}

// accessError latches and returns a failed memory access.
func (m *MMU) accessError(a engine.Access, va uint64, pa engine.PhysAddr, write bool, err error) error {
	m.stats.accessErrors.Add(1)
	m.latch(a, va, write, abi.VM_FAULT_BACKING, err)
	return &AccessError{VA: va, PA: pa, Write: write, Err: err}
}

// latch records a fault in GMC_VM_FAULT_STATUS/ADDR: the first since the last clear is kept,
// later ones only set MORE. It also logs (rate-limited).
func (m *MMU) latch(a engine.Access, va uint64, write bool, reason uint32, err error) {
	m.mu.Lock()
	first := m.faultStatus&abi.REG_GMC_VM_FAULT_STATUS__VALID_MASK == 0
	if first {
		s := uint32(abi.REG_GMC_VM_FAULT_STATUS__VALID_MASK)
		if write {
			s |= abi.REG_GMC_VM_FAULT_STATUS__WRITE_MASK
		}
		s |= reason << abi.REG_GMC_VM_FAULT_STATUS__REASON__SHIFT & abi.REG_GMC_VM_FAULT_STATUS__REASON_MASK
		s |= uint32(a.VMID) << abi.REG_GMC_VM_FAULT_STATUS__VMID__SHIFT & abi.REG_GMC_VM_FAULT_STATUS__VMID_MASK
		s |= uint32(a.Slot) << abi.REG_GMC_VM_FAULT_STATUS__SLOT__SHIFT & abi.REG_GMC_VM_FAULT_STATUS__SLOT_MASK
		m.faultStatus, m.faultAddr = s, va
	} else {
		m.faultStatus |= abi.REG_GMC_VM_FAULT_STATUS__MORE_MASK
	}
	m.mu.Unlock()
	attrs := []any{"addr", fmt.Sprintf("%#x", va), "vmid", a.VMID, "queue", a.Slot, "write", write,
		"reason", ReasonString(reason), "latched", first}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	// A queue that faults in a loop must not flood the log.
	m.rl.Warn("gpummu-vm-fault", "gpummu: VM fault", attrs...)
}

// FenceCheck forwards to the L2's strict-mode dirty-fence check (see l2.Cache.FenceCheck).
func (m *MMU) FenceCheck(slot int, va uint64) {
	if m.cache != nil {
		m.cache.FenceCheck(slot, va)
	}
}

// CacheOp applies op to the L2 lines that hold [va, va+size) for the accessing VMID. size 0 or
// engine.CacheAll means the whole cache. The range is translated page by page (the
// frame-buffer part as one piece), contiguous physical pieces are merged, and pages without a
// translation are skipped: nothing can be cached for them, and a cache action is not an
// access, so it does not fault (nor check R/W permissions). A write-back failure is returned
// as an *AccessError and latched (VM_FAULT_BACKING); the rest of the range is still
// processed. An op that names no action is ErrCacheOp.
func (m *MMU) CacheOp(a engine.Access, op engine.CacheOp, va, size uint64) error {
	o, ok := l2.OpFor(op)
	if !ok {
		return fmt.Errorf("%w: %v", ErrCacheOp, op)
	}
	return m.cacheOp(a, o, va, size)
}

func (m *MMU) cacheOp(a engine.Access, op l2.Op, va, size uint64) error {
	if m.cache == nil || op == 0 {
		return nil
	}
	if size == 0 || size == engine.CacheAll {
		return m.apply(a, op, nil, va)
	}
	if m.inVM(a.VMID) {
		return m.cacheOpVM(a, op, va, size)
	}
	if va >= vaLimit || a.VMID != 0 {
		return nil
	}
	last := va + min(size-1, vaLimit-1-va) // inclusive, below vaLimit
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	if m.vramSize > 0 {
		lo, hi := max(va, abi.GPU_FB_BASE), min(last, abi.GPU_FB_BASE+m.vramSize-1)
		if lo <= hi {
			keep(m.apply(a, op, &l2.Range{Domain: engine.DomainVRAM, Addr: lo - abi.GPU_FB_BASE, Size: hi - lo + 1}, lo))
		}
	}
	m.mu.Lock()
	g := m.gart
	m.mu.Unlock()
	if g.empty || !g.enabled {
		return first
	}
	lo, hi := max(va>>pageShift, g.startPage), min(last>>pageShift, g.endPage)
	if lo > hi {
		return first
	}
	if hi-lo+1 > MaxCacheOpPages {
		whole := op
		if whole&l2.OpDiscard != 0 {
			whole = whole&^l2.OpDiscard | l2.OpWriteBackInvalidate
		}
		keep(m.apply(a, whole, nil, va))
		return first
	}
	var run *l2.Range
	var runVA uint64
	flush := func() {
		if run != nil {
			keep(m.apply(a, op, run, runVA))
			run = nil
		}
	}
	for page := lo; page <= hi; page++ {
		pva := page << pageShift
		if m.inFB(pva) { // the frame buffer wins where the apertures overlap; done above
			flush()
			continue
		}
		x, reason := m.translate(a, pva, false, false)
		if reason != abi.VM_FAULT_NONE {
			flush()
			continue
		}
		s, e := max(pva, va), min(pva+pageMask, last)
		pa, n := x.pa.Addr+(s-pva), e-s+1
		if run != nil && run.Domain == x.pa.Domain && run.Addr+run.Size == pa {
			run.Size += n
			continue
		}
		flush()
		run, runVA = &l2.Range{Domain: x.pa.Domain, Addr: pa, Size: n}, s
	}
	flush()
	return first
}

// apply runs op on r (nil: everything); va is the GPU address of r's first byte, for reports.
func (m *MMU) apply(a engine.Access, op l2.Op, r *l2.Range, va uint64) error {
	err := m.cache.Apply(op, r)
	if err == nil {
		return nil
	}
	pa := engine.PhysAddr{}
	if r != nil {
		pa = engine.PhysAddr{Domain: r.Domain, Addr: r.Addr}
	}
	if wb, ok := err.(*l2.WriteBackError); ok {
		if r != nil && wb.PA.Addr >= r.Addr {
			va += wb.PA.Addr - r.Addr
		}
		pa = wb.PA
	}
	return m.accessError(a, va, pa, true, err)
}

// Stats counts the MMU's work and the guest's mistakes.
type Stats struct {
	Faults       uint64 // translation faults (*Fault)
	AccessErrors uint64 // refused memory accesses and failed write-backs (*AccessError)
	TLBHits      uint64
	TLBMisses    uint64 // GART entries read from the table
	TLBFlushes   uint64 // VM_INVALIDATE, GART register writes, Reset
	TLBEntries   int    // translations cached now (all VMIDs)
}

// Stats returns the counters.
func (m *MMU) Stats() Stats {
	s := Stats{
		Faults:       m.stats.faults.Load(),
		AccessErrors: m.stats.accessErrors.Load(),
		TLBHits:      m.stats.tlbHits.Load(),
		TLBMisses:    m.stats.tlbMisses.Load(),
		TLBFlushes:   m.stats.tlbFlushes.Load(),
	}
	for i := range m.tlb {
		s.TLBEntries += m.tlb[i].size()
	}
	return s
}

// flushTLBs drops the translations of every VMID in mask. Called with m.mu held.
func (m *MMU) flushTLBs(mask uint32) {
	for v := range NumVMIDs {
		if mask&(1<<v) != 0 {
			m.tlb[v].flush()
		}
	}
	m.gen++
	m.publish()
	m.stats.tlbFlushes.Add(1)
}

// gartView is what translation reads without m.mu: the decoded GART and the TLB generation
// it belongs to (a fill checks, under m.mu, that the generation has not moved since).
type gartView struct {
	g   gart
	gen uint64
}

// publish makes the current GART configuration and generation visible to translation.
// Called with m.mu held (or before the MMU is shared), after every change of either.
func (m *MMU) publish() { m.view.Store(&gartView{g: m.gart, gen: m.gen}) }

// Reset returns the GMC to its power-on state: GART disabled and unprogrammed, no cached
// translation, no latched fault. The L2 is not touched (its owner resets it); counters stay.
func (m *MMU) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.regs = gartRegs{}
	m.gart, _ = decodeGART(m.regs)
	m.flushTLBs(1<<NumVMIDs - 1)
	m.faultStatus, m.faultAddr = 0, 0
}

var (
	_ engine.Memory = (*MMU)(nil)
	_ engine.Copier = (*MMU)(nil)
)
