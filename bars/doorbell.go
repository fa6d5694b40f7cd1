package bars

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DoorbellMode selects how doorbell writes reach the device.
type DoorbellMode int

const (
	// DoorbellTrap: the BAR is not mmapped; every write is a REGION_WRITE round trip.
	DoorbellTrap DoorbellMode = iota
	// DoorbellPoll: the BAR is a memfd mapped by QEMU; the server polls it for changes.
	DoorbellPoll
)

func (m DoorbellMode) String() string {
	if m == DoorbellPoll {
		return "poll"
	}
	return "trap"
}

// ParseDoorbellMode parses a --doorbell flag value.
func ParseDoorbellMode(s string) (DoorbellMode, error) {
	switch s {
	case "trap":
		return DoorbellTrap, nil
	case "poll":
		return DoorbellPoll, nil
	}
	return 0, fmt.Errorf("doorbell mode %q: want trap or poll", s)
}

// Poll back-off: after activity the poller rescans at once for spinFor, then sleeps, doubling
// from minSleep up to maxSleep. maxSleep bounds both idle CPU use (1/maxSleep wake-ups per
// second; on the nested-virtualisation hosts we measured, a timer wake-up costs ~0.2 ms of CPU,
// so 20 ms means about 1% of a core) and the worst-case latency of the first doorbell after an
// idle period (20 ms). Busy submission stays in the spin phase: ~18 µs doorbell to interrupt.
const (
	pollSpinFor  = 200 * time.Microsecond
	pollMinSleep = 20 * time.Microsecond
	pollMaxSleep = 20 * time.Millisecond
)

// Doorbells is the doorbell aperture: an array of 64-bit doorbells.
type Doorbells struct {
	mode  DoorbellMode
	file  *os.File
	mem   []byte
	slots []uint64 // view of mem; written by the guest (poll mode) or by Write (trap mode)
	ring  func(index int, value uint64)
	rings atomic.Uint64

	// Poll mode. gen is a sequence count over Reset: odd while Reset zeroes the page, even
	// otherwise. The poller compares the page against seen, the values it last reported in
	// generation seenGen; when gen has moved it forgets them (the post-reset page is all
	// zeroes), and it fires nothing it read while a Reset was under way.
	// Clear moves gen the same way for one doorbell; cleared marks which (so the poller forgets
	// only those), resets counts Resets (so it forgets everything).
	gen        atomic.Uint64
	resetMu    sync.Mutex // serialises Reset and Clear calls, so gen's parity means what it says
	resets     atomic.Uint64
	cleared    []atomic.Bool
	seen       []uint64 // poller goroutine only
	seenGen    uint64   // poller goroutine only
	seenResets uint64   // poller goroutine only
	scans      atomic.Uint64
	wake       chan struct{} // Reset asks the poller for a prompt scan of the zeroed page

	stop chan struct{}
	done sync.WaitGroup

	// adopt: restored values the poller takes as the ones it has seen (snapshot.go).
	adopt atomic.Pointer[[]uint64]
}

// NewDoorbells creates size bytes of doorbells. ring is called with the doorbell index and its
// new 64-bit value on every write (trap mode) or every observed change (poll mode).
func NewDoorbells(mode DoorbellMode, size uint64, ring func(index int, value uint64)) (*Doorbells, error) {
	return newDoorbells(mode, size, ring, true)
}

// newDoorbells is NewDoorbells; without startPoller a poll-mode aperture has no poller goroutine
// and the caller scans (fuzzing, where the scan must be synchronous to be cheap and exact).
func newDoorbells(mode DoorbellMode, size uint64, ring func(index int, value uint64), startPoller bool) (*Doorbells, error) {
	if size == 0 || size%4096 != 0 {
		return nil, fmt.Errorf("bars: doorbell aperture size %#x is not a whole number of pages", size)
	}
	file, mem, err := sharedMemory("vgpu-doorbells", size)
	if err != nil {
		return nil, err
	}
	d := &Doorbells{
		mode:    mode,
		file:    file,
		mem:     mem,
		slots:   unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), size/8),
		seen:    make([]uint64, size/8),
		cleared: make([]atomic.Bool, size/8),
		ring:    ring,
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	if mode == DoorbellPoll && startPoller {
		d.done.Add(1)
		go d.poll()
	}
	return d, nil
}

// Mode is the doorbell mode.
func (d *Doorbells) Mode() DoorbellMode { return d.mode }

// Count is the number of doorbells.
func (d *Doorbells) Count() int { return len(d.slots) }

// Size is the aperture size in bytes.
func (d *Doorbells) Size() uint64 { return uint64(len(d.mem)) }

// File is the memfd to hand to QEMU in poll mode; nil in trap mode (the region is not mappable).
func (d *Doorbells) File() *os.File {
	if d.mode == DoorbellPoll {
		return d.file
	}
	return nil
}

// Rings counts doorbell events delivered.
func (d *Doorbells) Rings() uint64 { return d.rings.Load() }

// Read returns the current doorbell values.
func (d *Doorbells) Read(off uint64, p []byte) error {
	if err := d.check(off, len(p)); err != nil {
		return err
	}
	for i := range p {
		p[i] = byte(atomic.LoadUint64(&d.slots[(off+uint64(i))/8]) >> (8 * ((off + uint64(i)) % 8)))
	}
	return nil
}

// Write stores a trapped doorbell write. A 32-bit write to either half of a doorbell updates
// that half and rings the doorbell with the combined 64-bit value, like a write-combining
// doorbell on hardware. In poll mode the poller notices the new value and rings it, so a write
// that arrives trapped (QEMU's INTx fallback path) is not rung twice.
func (d *Doorbells) Write(off uint64, p []byte) error {
	if err := d.check(off, len(p)); err != nil {
		return err
	}
	var b [8]byte
	first, last := off/8, (off+uint64(len(p))-1)/8
	for slot := first; slot <= last; slot++ {
		binary.LittleEndian.PutUint64(b[:], atomic.LoadUint64(&d.slots[slot]))
		for i := range p {
			if a := off + uint64(i); a/8 == slot {
				b[a%8] = p[i]
			}
		}
		v := binary.LittleEndian.Uint64(b[:])
		atomic.StoreUint64(&d.slots[slot], v)
		if d.mode == DoorbellTrap {
			d.fire(int(slot), v)
		}
	}
	return nil
}

func (d *Doorbells) check(off uint64, n int) error {
	size := uint64(len(d.mem))
	if n <= 0 || off >= size || uint64(n) > size-off {
		return fmt.Errorf("bars: doorbell access [%#x+%d) outside the %#x-byte aperture: %w", off, n, size, syscall.EINVAL)
	}
	return nil
}

func (d *Doorbells) fire(index int, v uint64) {
	d.rings.Add(1)
	if d.ring != nil {
		d.ring(index, v)
	}
}

// poll scans the shared page for changed doorbells with adaptive back-off.
func (d *Doorbells) poll() {
	defer d.done.Done()
	lastActivity := time.Now()
	sleep := pollMinSleep
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if d.scan() {
			lastActivity = time.Now()
			sleep = pollMinSleep
		}
		if time.Since(lastActivity) < pollSpinFor {
			select {
			case <-d.stop:
				return
			case <-d.wake:
			default:
			}
			// Yield while spinning: the goroutine this doorbell just woke (a queue) is
			// likely queued on this very P and must run for the doorbell to mean anything.
			runtime.Gosched()
			continue
		}
		timer.Reset(sleep)
		select {
		case <-d.stop:
			return
		case <-d.wake:
			sleep = pollMinSleep
			continue
		case <-timer.C:
		}
		sleep = min(2*sleep, pollMaxSleep)
	}
}

// scan reports whether any doorbell changed since the last scan (or a Reset cut the scan
// short, so that the poller looks again at once).
//
// Against Reset: a value is fired only if gen, read after the value, is the even generation
// the scan started in. Go's atomics are sequentially consistent, so such a value was read
// before Reset made gen odd, hence before it zeroed anything: it is a doorbell the guest rang
// before the reset (it may be delivered while Reset runs, as a trapped write that reached the
// worker just before the reset would have been). A value read once gen has moved — one of
// Reset's zeroes, or a pre-reset value not yet zeroed — is dropped, and the next scan compares
// against the post-reset page, so a post-reset ring with the pre-reset value is seen and no
// ring with value 0 is invented. Reset never waits for the poller (the ring callback may
// block on engine locks); the poller never waits for Reset (it skips the page while gen is
// odd, which lasts one pass over the page).
func (d *Doorbells) scan() bool {
	g := d.gen.Load()
	if g&1 != 0 {
		return true // Reset is zeroing the page: look again in a moment
	}
	if g != d.seenGen {
		// What moved gen zeroed doorbells: all of them (Reset) or those marked (Clear). A mark
		// is set after its zero is stored, so the zero is what the next load reads, or a
		// newer guest value.
		if r := d.resets.Load(); r != d.seenResets {
			clear(d.seen)
			d.seenResets = r
		}
		for i := range d.cleared {
			if d.cleared[i].Load() {
				d.cleared[i].Store(false)
				d.seen[i] = 0
			}
		}
		if v := d.adopt.Swap(nil); v != nil {
			copy(d.seen, *v)
		}
		d.seenGen = g
	}
	changed := false
	for i := range d.slots {
		v := atomic.LoadUint64(&d.slots[i])
		if v == d.seen[i] {
			continue
		}
		if d.gen.Load() != g {
			return true
		}
		d.seen[i] = v
		d.fire(i, v)
		changed = true
	}
	d.scans.Add(1)
	return changed
}

// Reset clears every doorbell (device reset). In poll mode the poller then compares against
// the zeroed page: the first ring after Reset is seen whatever its value (but 0, which is
// what the page already holds), and the zeroing itself rings nothing. Reset does not wait for
// the poller; it wakes it for a prompt scan.
func (d *Doorbells) Reset() {
	d.resetMu.Lock()
	defer d.resetMu.Unlock()
	d.gen.Add(1) // odd: the poller stops trusting what it reads
	for i := range d.slots {
		atomic.StoreUint64(&d.slots[i], 0)
	}
	d.resets.Add(1)
	d.gen.Add(1) // even: a new generation, compared against zeroes
	d.kick()
}

// Clear zeroes doorbell index, for a queue that takes it over (the device calls it when an
// HQD is activated): its first ring must be seen even when it writes the value the doorbell
// already holds, the last wptr of the queue that used it before. A trapped write always rings;
// in poll mode the poller compares against what it saw, so without the zero a ring with the
// old value would be lost. As with Reset, the zeroing itself rings nothing (the poller
// compares that doorbell against zero from then on) and the other doorbells are undisturbed.
// The guest cannot race it: its doorbell store follows the trapped register write that
// activates the queue, which QEMU does not post while a region of the device is mmapped.
func (d *Doorbells) Clear(index int) {
	if index < 0 || index >= len(d.slots) {
		return
	}
	d.resetMu.Lock()
	defer d.resetMu.Unlock()
	d.gen.Add(1)
	atomic.StoreUint64(&d.slots[index], 0)
	d.cleared[index].Store(true)
	d.gen.Add(1)
	d.kick()
}

// kick asks the poller for a prompt scan.
func (d *Doorbells) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Close stops the poller and releases the memory.
func (d *Doorbells) Close() error {
	close(d.stop)
	d.done.Wait()
	err := unix.Munmap(d.mem)
	if cerr := d.file.Close(); err == nil {
		err = cerr
	}
	return err
}
