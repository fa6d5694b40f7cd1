package gpuvm

import (
	"time"

	"vgpu/abi"
)

// Recent faults for live inspection (device.Status, `vgpu status`): the fault latch keeps only
// the first fault since the driver cleared it; a developer looking at a stuck queue wants the
// last few, whatever the latch holds.

// maxRecentFaults bounds the faults kept.
const maxRecentFaults = 8

// FaultRecord is one no-retry fault (VMIDs 1..15, and VMID 0's faults reported by gpummu).
type FaultRecord struct {
	VMID   int       `json:"vmid"`
	Addr   uint64    `json:"addr"`   // the faulting page's address
	Status uint32    `json:"status"` // VM_FAULT_STATUS layout
	What   string    `json:"what"`   // StatusString(Status)
	At     time.Time `json:"at"`
}

// faultHistory is the last faults, guarded by VM.mu.
type faultHistory struct {
	n    uint64
	last [maxRecentFaults]FaultRecord
}

// noteFaultLocked records a fault. v.mu held.
func (v *VM) noteFaultLocked(st uint32, va uint64) {
	h := &v.recent
	h.last[h.n%maxRecentFaults] = FaultRecord{
		VMID: int(st & abi.REG_VM_FAULT_STATUS__VMID_MASK >> abi.REG_VM_FAULT_STATUS__VMID__SHIFT),
		Addr: va &^ (pageSize - 1), Status: st, At: time.Now()}
	h.n++
}

// RecentFaults returns the last faults, oldest first (What filled in).
func (v *VM) RecentFaults() []FaultRecord {
	v.mu.Lock()
	h := &v.recent
	k := min(h.n, maxRecentFaults)
	out := make([]FaultRecord, 0, k)
	for i := h.n - k; i < h.n; i++ {
		out = append(out, h.last[i%maxRecentFaults])
	}
	v.mu.Unlock()
	for i := range out {
		out[i].What = StatusString(out[i].Status)
	}
	return out
}
