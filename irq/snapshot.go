package irq

import (
	"errors"
	"fmt"

	"vgpu/abi"
)

// IHState is the IH block as a snapshot keeps it: the ring registers (RB_CNTL, base, read
// and write pointers, overflow, write-back address, doorbell, vector) and the last
// timestamp, so entries written after a restore never go back in time. Entries already in
// the ring are guest memory (or VRAM); the backlog of entries not yet written is empty when
// a snapshot is taken (SaveState refuses otherwise).
type IHState struct {
	Cntl, BaseLo, BaseHi, Rptr, Wptr uint32
	Overflow                         bool
	WbLo, WbHi, Doorbell, Vector     uint32
	LastTS                           uint64
	Entries, Dropped                 uint64
}

// ErrIHBusy: the IH is writing entries (a backlog in flight); a snapshot waits for it.
var ErrIHBusy = errors.New("irq: the IH has entries being written")

// SaveState returns the ring registers, or ErrIHBusy while entries wait to be written.
func (h *IH) SaveState() (IHState, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.writing || h.npen != 0 {
		return IHState{}, fmt.Errorf("%w (%d pending)", ErrIHBusy, h.npen)
	}
	return IHState{Cntl: h.cntl, BaseLo: h.baseLo, BaseHi: h.baseHi, Rptr: h.rptr, Wptr: h.wptr, Overflow: h.overflow,
		WbLo: h.wbLo, WbHi: h.wbHi, Doorbell: h.doorbell, Vector: h.vector, LastTS: h.lastTS,
		Entries: h.entries, Dropped: h.dropped}, nil
}

// RestoreState programs the ring from s with the masks register writes apply (RB_SIZE is
// clamped, the pointers are cut to the ring); the backlog is emptied. An interrupt the guest
// had not yet consumed (rptr != wptr) is not raised again: the next entry or RPTR write
// raises the vector, as for a driver that polls the ring.
func (h *IH) RestoreState(s IHState) {
	log2 := (s.Cntl & abi.REG_IH_RB_CNTL__RB_SIZE_MASK) >> abi.REG_IH_RB_CNTL__RB_SIZE__SHIFT
	clamped := min(max(log2, IHMinRingLog2), IHMaxRingLog2)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cntl = ihCntlStored&s.Cntl&^abi.REG_IH_RB_CNTL__RB_SIZE_MASK | clamped<<abi.REG_IH_RB_CNTL__RB_SIZE__SHIFT
	h.baseLo, h.baseHi = s.BaseLo&^0xFF, s.BaseHi&ihAddrHiMask
	mask := h.sizeLocked() - 1
	h.rptr, h.wptr = s.Rptr&mask&abi.REG_IH_RB_WPTR__OFFSET_MASK, s.Wptr&mask&abi.REG_IH_RB_WPTR__OFFSET_MASK
	h.overflow = s.Overflow
	h.wbLo, h.wbHi = s.WbLo&^3, s.WbHi&ihAddrHiMask
	h.doorbell = s.Doorbell & (abi.REG_IH_DOORBELL_RPTR__OFFSET_MASK | abi.REG_IH_DOORBELL_RPTR__ENABLE_MASK)
	h.vector = s.Vector
	h.lastTS = s.LastTS & ihTimestampMask
	h.entries, h.dropped = s.Entries, s.Dropped
	h.head, h.npen = 0, 0
	h.gen++
	h.epoch++
}

// PendingVectors returns the MSI-X pending bits (a vector raised while masked).
func (c *Controller) PendingVectors() []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := make([]bool, len(c.msix))
	for k := range c.msix {
		p[k] = c.msix[k].pending
	}
	return p
}

// RestorePending sets the MSI-X pending bits; each is delivered when its vector becomes
// deliverable (an eventfd from the next client, an unmask), as a pending bit set while the
// vector was masked would be.
func (c *Controller) RestorePending(p []bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(p) != len(c.msix) {
		return fmt.Errorf("irq: %d pending bits for %d vectors", len(p), len(c.msix))
	}
	for k := range c.msix {
		c.msix[k].pending = p[k]
	}
	return nil
}
