package mes

import (
	"errors"

	"vgpu/abi"
)

// ErrActive: a snapshot of a running scheduler. Its tables (processes, gangs, queues and
// their priorities, MQD addresses, hardware resources) are owned by the firmware goroutine
// and are not saved by this version; stop the ring (MES_RING_ACTIVE = 0) or snapshot before
// the driver starts it.
var ErrActive = errors.New("mes: snapshot: the scheduler is running; its tables are not saved")

// State is the MES block of a scheduler that is off: the ring registers as programmed (the
// next RING_ACTIVE = 1 starts from them), MES_CNTL and the query doorbell (an idle scheduler's
// status is OFF).
type State struct {
	BaseLo, BaseHi, Control, ReportLo, ReportHi uint32
	WptrLo, WptrHi, Doorbell, QueryDoorbell     uint32
	Cntl                                        uint32
}

// SaveState returns the block, or ErrActive while a scheduler activation exists (running or
// halted on its own).
func (m *MES) SaveState() (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.act.Load() != nil {
		return State{}, ErrActive
	}
	return State{BaseLo: m.baseLo, BaseHi: m.baseHi, Control: m.control, ReportLo: m.reportLo, ReportHi: m.reportHi,
		WptrLo: m.wptrLo, WptrHi: m.wptrHi, Doorbell: m.doorbell, QueryDoorbell: m.queryDB,
		Cntl: m.cntl.Load()}, nil
}

// RestoreState programs an idle scheduler from s with the masks register writes apply.
func (m *MES) RestoreState(s State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.act.Load() != nil {
		return ErrActive
	}
	m.baseLo, m.baseHi = s.BaseLo, s.BaseHi
	m.control = s.Control & abi.REG_MES_RING_CONTROL__QUEUE_SIZE_MASK
	m.reportLo, m.reportHi = s.ReportLo, s.ReportHi
	m.wptrLo, m.wptrHi = s.WptrLo, s.WptrHi
	m.doorbell = s.Doorbell & (abi.REG_MES_RING_DOORBELL__OFFSET_MASK | abi.REG_MES_RING_DOORBELL__EN_MASK)
	m.queryDB = s.QueryDoorbell
	m.cntl.Store(s.Cntl & abi.REG_MES_CNTL__UNMAPPED_DOORBELL_DISABLE_MASK)
	return nil
}
