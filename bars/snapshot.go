package bars

import (
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
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

// DataExtents returns the byte ranges [start, end) of VRAM that may hold non-zero data: the
// memfd's allocated extents (SEEK_DATA/SEEK_HOLE), so a snapshot of a sparse VRAM reads only
// what was written and never populates the holes (a read fault on a shmem hole allocates a
// page). Without SEEK_DATA support it returns all of VRAM.
func (v *VRAM) DataExtents() [][2]uint64 {
	size := int64(len(v.mem))
	all := [][2]uint64{{0, uint64(size)}}
	fd := int(v.file.Fd())
	var out [][2]uint64
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data after off
		}
		if err != nil {
			return all
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return all
		}
		hole = min(hole, size)
		out = append(out, [2]uint64{uint64(data), uint64(hole)})
		off = hole
	}
	return out
}

// Zero clears VRAM bytes [off, off+n) and gives their memory back (a hole punched in the
// memfd), as after a restore that was refused; without hole punching they are cleared.
func (v *VRAM) Zero(off, n uint64) {
	if off >= uint64(len(v.mem)) || n > uint64(len(v.mem))-off {
		return
	}
	err := unix.Fallocate(int(v.file.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(off), int64(n))
	if err != nil {
		clear(v.mem[off : off+n])
	}
}
