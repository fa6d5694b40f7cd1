package bars

import (
	"fmt"
	"sync/atomic"
)

// Values returns every doorbell's current 64-bit value.
func (d *Doorbells) Values() []uint64 {
	v := make([]uint64, len(d.slots))
	for i := range d.slots {
		v[i] = atomic.LoadUint64(&d.slots[i])
	}
	return v
}

// RestoreValues sets every doorbell's value (a snapshot being restored). A trapped doorbell
// rings nothing; in poll mode the poller reports each value that differs from what it saw
// once, as if the guest had written it: the caller restores the queues first, so that ring
// delivers the write pointer the queue already has (a register queue's wptr is its last
// doorbell value).
func (d *Doorbells) RestoreValues(v []uint64) error {
	if len(v) != len(d.slots) {
		return fmt.Errorf("bars: %d doorbell values for %d doorbells", len(v), len(d.slots))
	}
	for i := range v {
		atomic.StoreUint64(&d.slots[i], v[i])
	}
	return nil
}
