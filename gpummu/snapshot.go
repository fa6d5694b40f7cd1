package gpummu

// State is the GMC block as a snapshot keeps it: the GART registers as the driver wrote them
// and the VMID-0 fault latch. Cached translations are not part of it: a restored MMU starts
// with empty TLBs and refills them from the GART table in memory.
type State struct {
	GARTCntl, GARTStartLo, GARTStartHi, GARTEndLo, GARTEndHi, GARTTableLo, GARTTableHi uint32
	FaultStatus                                                                        uint32
	FaultAddr                                                                          uint64
}

// SaveState returns the block's registers and fault latch.
func (m *MMU) SaveState() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.regs
	return State{GARTCntl: r.cntl, GARTStartLo: r.startLo, GARTStartHi: r.startHi, GARTEndLo: r.endLo,
		GARTEndHi: r.endHi, GARTTableLo: r.tableLo, GARTTableHi: r.tableHi,
		FaultStatus: m.faultStatus, FaultAddr: m.faultAddr}
}

// RestoreState programs the block from s as the driver's writes did (the GART is decoded and
// clamped as a write would) and drops every cached translation. It reports whether the
// GART had to be cut to MaxGARTPages, as a write of the same values would warn.
func (m *MMU) RestoreState(s State) (clamped bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.regs = gartRegs{cntl: s.GARTCntl, startLo: s.GARTStartLo, startHi: s.GARTStartHi, endLo: s.GARTEndLo,
		endHi: s.GARTEndHi, tableLo: s.GARTTableLo, tableHi: s.GARTTableHi}
	m.gart, clamped = decodeGART(m.regs)
	m.flushTLBs(1<<NumVMIDs - 1)
	m.faultStatus, m.faultAddr = s.FaultStatus, s.FaultAddr
	return clamped && m.gart.enabled
}
