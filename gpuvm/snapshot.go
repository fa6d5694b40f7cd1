package gpuvm

// State is the VM block as a snapshot keeps it: every register as the driver wrote it (the
// contexts of VMIDs 1..15, the PASID table, the fault and default-page registers, the
// invalidation engines' semaphores, requests and acks), the protection-fault latch and strict
// mode. Cached translations (TLBs, PDE caches) and the retry CAM are not: a restored VM walks
// the page tables again on first use, and a snapshot is taken only when no engine waits on a
// retry fault.
type State struct {
	Contexts  [NumVMIDs]ContextRegs
	PASID     [NumVMIDs]uint32
	FaultCntl uint32
	DefaultLo uint32
	DefaultHi uint32
	Engines   [NumEngines]EngineRegs
	// The protection-fault latch (VM_FAULT_STATUS / VM_FAULT_ADDR).
	Latched     bool
	LatchStatus uint32
	LatchPage   uint64
	Strict      bool
}

// ContextRegs is one VM_CONTEXT instance.
type ContextRegs struct{ Cntl, BaseLo, BaseHi, StartLo, StartHi, EndLo, EndHi uint32 }

// EngineRegs is one VM_INV_ENG instance.
type EngineRegs struct{ Sem, Req, Ack, RangeLo, RangeHi uint32 }

// SaveState returns the block's registers and latch.
func (v *VM) SaveState() State {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := State{PASID: v.regs.pasid, FaultCntl: v.regs.faultCntl, DefaultLo: v.regs.defLo, DefaultHi: v.regs.defHi,
		Latched: v.latch.latched, LatchStatus: v.latch.status, LatchPage: v.latch.page, Strict: v.strict.Load()}
	for i, c := range v.regs.ctx {
		s.Contexts[i] = ContextRegs{c.cntl, c.baseLo, c.baseHi, c.startLo, c.startHi, c.endLo, c.endHi}
	}
	for i, e := range v.regs.eng {
		s.Engines[i] = EngineRegs{e.sem, e.req, e.ack, e.rangeLo, e.rangeHi}
	}
	return s
}

// RestoreState programs the block from s, applying the masks a register write applies (so a
// file cannot set bits the driver could not), and drops every cached translation and retry
// CAM entry. VMID 0's context registers are not used (VMID 0 is the GART) and stay zero.
func (v *VM) RestoreState(s State) {
	v.mu.Lock()
	var r hubRegs
	for i := 1; i < NumVMIDs; i++ {
		c := s.Contexts[i]
		r.ctx[i] = ctxRegs{cntl: c.Cntl & cntlStored, baseLo: c.BaseLo, baseHi: c.BaseHi,
			startLo: c.StartLo, startHi: c.StartHi & pageHiMask, endLo: c.EndLo, endHi: c.EndHi & pageHiMask}
	}
	for i, p := range s.PASID {
		r.pasid[i] = p & 0xFFFF
	}
	r.faultCntl = s.FaultCntl & faultCntlStored
	r.defLo, r.defHi = s.DefaultLo, s.DefaultHi&pageHiMask
	for i, e := range s.Engines {
		r.eng[i] = engRegs{sem: e.Sem & 1, req: e.Req & reqStored, ack: e.Ack & vmidBits,
			rangeLo: e.RangeLo, rangeHi: e.RangeHi & 0x1F}
	}
	v.regs = r
	for i := range v.cfg {
		v.cfg[i].Store(decodeContext(r.ctx[i]))
	}
	v.latch = faultLatch{latched: s.Latched, status: s.LatchStatus, page: s.LatchPage}
	v.stale = staleEvent{}
	v.cam.releaseAll()
	v.mu.Unlock()
	v.strict.Store(s.Strict)
	for i := range v.ctx {
		v.ctx[i].invalidate(invAll)
	}
}
