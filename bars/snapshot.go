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

// RestoreValues sets every doorbell's value (a snapshot being restored) without ringing any:
// the queues that listen take their write pointers from the snapshot. In poll mode the
// poller takes the values as the ones it has seen (handed over like Reset's zeroes, under an
// odd generation), so only later guest writes ring.
func (d *Doorbells) RestoreValues(v []uint64) error {
	if len(v) != len(d.slots) {
		return fmt.Errorf("bars: %d doorbell values for %d doorbells", len(v), len(d.slots))
	}
	d.resetMu.Lock()
	defer d.resetMu.Unlock()
	d.gen.Add(1) // odd: the poller stops trusting what it reads
	seen := append([]uint64(nil), v...)
	d.adopt.Store(&seen)
	for i := range v {
		atomic.StoreUint64(&d.slots[i], v[i])
	}
	d.gen.Add(1) // even: the poller adopts seen, then compares against it
	d.kick()
	return nil
}
