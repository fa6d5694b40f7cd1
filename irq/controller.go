package irq

import (
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"os"
	"sync"
	"syscall"
)

// IRQ indexes (VFIO_PCI_*_IRQ_INDEX), as in DEVICE_GET_IRQ_INFO and DEVICE_SET_IRQS.
const (
	IndexINTx = 0
	IndexMSI  = 1
	IndexMSIX = 2
	IndexErr  = 3
	IndexReq  = 4

	numIndexes = 5
)

// Request flags (VFIO_IRQ_SET_*): exactly one DATA_* and one ACTION_*.
const (
	DataNone      = 1 << 0
	DataBool      = 1 << 1
	DataEventfd   = 1 << 2
	ActionMask    = 1 << 3
	ActionUnmask  = 1 << 4
	ActionTrigger = 1 << 5

	DataTypeMask   = DataNone | DataBool | DataEventfd
	ActionTypeMask = ActionMask | ActionUnmask | ActionTrigger
)

// MaxMSIXVectors is the PCI limit on MSI-X table size (Table Size is an 11-bit N-1 field).
const MaxMSIXVectors = 2048

// ErrNoVector is returned by TriggerMSIX for a vector outside the table.
var ErrNoVector = errors.New("irq: no such MSI-X vector")

// Request is one DEVICE_SET_IRQS, the same shape as vfiouser.SetIRQs: Bools has Count entries
// with DataBool; Files has at most Count entries with DataEventfd (a missing or nil entry
// de-assigns that interrupt). Set takes ownership of Files.
type Request struct {
	Flags, Index, Start, Count uint32
	Bools                      []bool
	Files                      []*os.File
}

// Stats is a snapshot of the controller's counters.
type Stats struct {
	Delivered   []uint64 // per MSI-X vector: eventfd signals
	Pending     int      // MSI-X vectors whose pending bit is set
	INTxSignals uint64   // signals of the INTx trigger eventfd
	ErrSignals  uint64   // signals of the ERR eventfd
	Dropped     uint64   // signals lost: eventfd write failed, or RaiseError with no ERR eventfd
}

type vector struct {
	fd        *eventfd
	masked    bool
	pending   bool
	delivered uint64
}

type intx struct {
	trigger  *eventfd
	resample *resampler
	asserted bool // the device drives the line
	masked   bool // ACTION_MASK from the client
}

// Controller holds the DEVICE_SET_IRQS state of every index. All methods are safe for
// concurrent use.
type Controller struct {
	log *slog.Logger

	mu      sync.Mutex
	msix    []vector
	intx    intx
	errFd   *eventfd
	reqFd   *eventfd
	intxN   uint64
	errN    uint64
	dropped uint64
}

// New returns a controller for msixVectors MSI-X vectors (1..MaxMSIXVectors; anything else is
// a programming error and panics) plus one INTx line, ERR and REQ. A nil log discards.
func New(msixVectors int, log *slog.Logger) *Controller {
	if msixVectors < 1 || msixVectors > MaxMSIXVectors {
		panic(fmt.Sprintf("irq.New: %d MSI-X vectors, want 1..%d", msixVectors, MaxMSIXVectors))
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Controller{log: log, msix: make([]vector, msixVectors)}
}

// count is the number of interrupts behind an index (what GET_IRQ_INFO should report).
func (c *Controller) count(index uint32) uint32 {
	switch index {
	case IndexINTx, IndexErr, IndexReq:
		return 1
	case IndexMSIX:
		return uint32(len(c.msix))
	}
	return 0 // MSI is not offered
}

// cleanup collects what Set must release after dropping the lock: descriptors to close and
// resample goroutines to stop (they take the lock themselves).
type cleanup struct {
	files []*os.File
	stops []*resampler
}

func (a *cleanup) close(e *eventfd) {
	if e != nil {
		a.files = append(a.files, e.f)
	}
}

func (a *cleanup) run() {
	for _, f := range a.files {
		if f != nil {
			f.Close()
		}
	}
	for _, r := range a.stops {
		r.stop()
	}
}

// Set applies one DEVICE_SET_IRQS. It takes ownership of r.Files on every path. Invalid
// requests wrap syscall.EINVAL.
func (c *Controller) Set(r Request) error {
	var after cleanup
	c.mu.Lock()
	err := c.setLocked(r, &after)
	c.mu.Unlock()
	if err != nil {
		after.files = append(after.files, r.Files...)
	}
	after.run()
	return err
}

func invalid(r Request, reason string) error {
	return fmt.Errorf("irq: SET_IRQS flags %#x index %d start %d count %d: %s: %w",
		r.Flags, r.Index, r.Start, r.Count, reason, syscall.EINVAL)
}

func (c *Controller) setLocked(r Request, after *cleanup) error {
	data, action := r.Flags&DataTypeMask, r.Flags&ActionTypeMask
	switch {
	case r.Flags&^(DataTypeMask|ActionTypeMask) != 0:
		return invalid(r, "unknown flag bits")
	case bits.OnesCount32(data) != 1 || bits.OnesCount32(action) != 1:
		return invalid(r, "want exactly one DATA_ and one ACTION_ flag")
	case r.Index >= numIndexes:
		return invalid(r, "no such index")
	}
	n := c.count(r.Index)
	switch {
	case n == 0:
		return invalid(r, "index has no interrupts")
	case r.Start >= n || uint64(r.Start)+uint64(r.Count) > uint64(n):
		return invalid(r, fmt.Sprintf("range outside the index's %d interrupts", n))
	case n == 1 && r.Count != 1 && !(data == DataNone && action == ActionTrigger):
		return invalid(r, "a single-interrupt index takes count 1 (count 0 only to disable)")
	case data == DataBool && len(r.Bools) != int(r.Count):
		return invalid(r, fmt.Sprintf("%d bools for %d interrupts", len(r.Bools), r.Count))
	case data != DataBool && len(r.Bools) != 0:
		return invalid(r, "bools without DATA_BOOL")
	case data == DataEventfd && len(r.Files) > int(r.Count):
		return invalid(r, fmt.Sprintf("%d eventfds for %d interrupts", len(r.Files), r.Count))
	case data != DataEventfd && len(r.Files) != 0:
		return invalid(r, "eventfds without DATA_EVENTFD")
	case data == DataEventfd && action == ActionMask:
		return invalid(r, "masking by eventfd is not supported")
	case data == DataEventfd && action == ActionUnmask && r.Index != IndexINTx:
		return invalid(r, "an unmask eventfd exists only for INTx")
	case action != ActionTrigger && (r.Index == IndexErr || r.Index == IndexReq):
		return invalid(r, "ERR and REQ support only ACTION_TRIGGER")
	}

	// selected reports whether the k-th interrupt of the request is acted on (DATA_NONE: all
	// of them; DATA_BOOL: those set).
	selected := func(k int) bool { return data == DataNone || data == DataBool && r.Bools[k] }

	// Wrap the eventfds before changing anything, so a failure leaves the state untouched.
	var fds []*eventfd
	var rs *resampler
	if data == DataEventfd {
		if action == ActionUnmask { // INTx resample fd
			if len(r.Files) == 1 && r.Files[0] != nil {
				var err error
				if rs, err = newResampler(r.Files[0]); err != nil {
					return fmt.Errorf("irq: INTx resample eventfd: %w", err)
				}
			}
		} else {
			fds = make([]*eventfd, r.Count)
			for k, f := range r.Files {
				if f == nil {
					continue
				}
				e, err := newEventfd(f)
				if err != nil {
					return invalid(r, fmt.Sprintf("eventfd %d: %v", k, err))
				}
				fds[k] = e
			}
		}
	}

	switch r.Index {
	case IndexMSIX:
		c.setMSIX(r, data, action, fds, selected, after)
	case IndexINTx:
		c.setINTx(r, data, action, fds, rs, selected, after)
	case IndexErr, IndexReq:
		slot, counter := &c.errFd, &c.errN
		if r.Index == IndexReq {
			slot, counter = &c.reqFd, nil
		}
		switch {
		case data == DataEventfd:
			after.close(*slot)
			*slot = fds[0]
		case data == DataNone && r.Count == 0:
			after.close(*slot)
			*slot = nil
		case r.Count == 1 && selected(0):
			c.signalSimple(*slot, counter)
		}
	}
	return nil
}

func (c *Controller) setMSIX(r Request, data, action uint32, fds []*eventfd, selected func(int) bool, after *cleanup) {
	if action == ActionTrigger && data == DataNone && r.Count == 0 {
		// Disable the index: QEMU does this whenever it re-creates the vector set, so it is
		// not a reset — masks and pending bits stay.
		for k := range c.msix {
			after.close(c.msix[k].fd)
			c.msix[k].fd = nil
		}
		return
	}
	for k := 0; k < int(r.Count); k++ {
		v := &c.msix[int(r.Start)+k]
		switch {
		case action == ActionTrigger && data == DataEventfd:
			after.close(v.fd)
			v.fd = fds[k]
			if v.fd != nil && v.pending && !v.masked {
				c.deliverLocked(v, int(r.Start)+k)
			}
		case !selected(k):
		case action == ActionTrigger:
			c.triggerLocked(int(r.Start) + k)
		case action == ActionMask:
			v.masked = true
		case action == ActionUnmask:
			v.masked = false
			if v.pending && v.fd != nil {
				c.deliverLocked(v, int(r.Start)+k)
			}
		}
	}
}

func (c *Controller) setINTx(r Request, data, action uint32, fds []*eventfd, rs *resampler, selected func(int) bool, after *cleanup) {
	x := &c.intx
	switch {
	case action == ActionTrigger && data == DataEventfd:
		after.close(x.trigger)
		x.trigger = fds[0]
		if x.asserted && !x.masked {
			c.signalINTxLocked()
		}
	case action == ActionTrigger && data == DataNone && r.Count == 0:
		// Disable INTx (QEMU does this before enabling MSI-X). The line's level is device
		// state and stays.
		after.close(x.trigger)
		x.trigger = nil
		if x.resample != nil {
			after.stops = append(after.stops, x.resample)
			x.resample = nil
		}
	case action == ActionUnmask && data == DataEventfd:
		if x.resample != nil {
			after.stops = append(after.stops, x.resample)
		}
		x.resample = rs
		if rs != nil {
			go rs.run(c.resampled, func(err error) {
				c.log.Warn("irq: INTx resample eventfd read failed; stopped watching it", "err", err)
			})
		}
	case r.Count == 0 || !selected(0):
	case action == ActionTrigger: // loopback
		if !x.masked {
			c.signalINTxLocked()
		}
	case action == ActionMask:
		x.masked = true
	case action == ActionUnmask:
		x.masked = false
		if x.asserted {
			c.signalINTxLocked()
		}
	}
}

// resampled runs on the resample goroutine: the guest EOI'd the line; if the device still
// drives it, signal again (level-triggered semantics over an edge-only eventfd).
func (c *Controller) resampled(rs *resampler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.intx.resample != rs {
		return // replaced while we were waking up
	}
	if c.intx.asserted && !c.intx.masked {
		c.signalINTxLocked()
	}
}

// TriggerMSIX raises MSI-X vector: signalled at once when it has an eventfd and is not masked,
// else recorded in the PBA and delivered when that changes. Safe from any goroutine.
func (c *Controller) TriggerMSIX(vector int) error {
	if vector < 0 || vector >= len(c.msix) {
		return fmt.Errorf("%w: %d (table has %d)", ErrNoVector, vector, len(c.msix))
	}
	c.mu.Lock()
	c.triggerLocked(vector)
	c.mu.Unlock()
	return nil
}

func (c *Controller) triggerLocked(k int) {
	v := &c.msix[k]
	if v.masked || v.fd == nil {
		v.pending = true
		return
	}
	c.deliverLocked(v, k)
}

// deliverLocked signals v's eventfd and clears its pending bit.
func (c *Controller) deliverLocked(v *vector, k int) {
	v.pending = false
	if err := v.fd.signal(); err != nil {
		c.dropLocked(v.fd, "MSI-X vector", k, err)
		return
	}
	v.delivered++
}

func (c *Controller) dropLocked(e *eventfd, what string, k int, err error) {
	c.dropped++
	if !e.failed {
		e.failed = true
		c.log.Warn("irq: eventfd write failed; further failures on this fd are only counted",
			"irq", what, "n", k, "err", err)
	}
}

// AssertINTx drives the INTx line high. The trigger eventfd is signalled on the rising edge
// (unless masked) and again on every resample or unmask while the line stays high.
func (c *Controller) AssertINTx() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.intx.asserted {
		return
	}
	c.intx.asserted = true
	if !c.intx.masked {
		c.signalINTxLocked()
	}
}

// DeassertINTx drives the INTx line low. Nothing is signalled: the guest side de-asserts on EOI
// and asks again through the resample eventfd.
func (c *Controller) DeassertINTx() {
	c.mu.Lock()
	c.intx.asserted = false
	c.mu.Unlock()
}

func (c *Controller) signalINTxLocked() {
	e := c.intx.trigger
	if e == nil {
		return // the line level is kept; assigning a trigger fd signals it
	}
	if err := e.signal(); err != nil {
		c.dropLocked(e, "INTx", 0, err)
		return
	}
	c.intxN++
}

// signalSimple signals the ERR or REQ eventfd (loopback trigger from SET_IRQS or RaiseError).
func (c *Controller) signalSimple(e *eventfd, counter *uint64) {
	if e == nil {
		c.dropped++
		return
	}
	if err := e.signal(); err != nil {
		c.dropLocked(e, "ERR/REQ", 0, err)
		return
	}
	if counter != nil {
		*counter++
	}
}

// RaiseError signals the ERR eventfd (an unrecoverable device error); with none assigned the
// signal is counted as dropped.
func (c *Controller) RaiseError() {
	c.mu.Lock()
	c.signalSimple(c.errFd, &c.errN)
	c.mu.Unlock()
}

// ReadPBA fills p with the MSI-X Pending Bit Array from byte offset off: bit k of the
// little-endian qword k/64 is vector k's pending bit; bytes past the table read as zero.
func (c *Controller) ReadPBA(off uint64, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := uint64(len(c.msix))
	for i := range p {
		p[i] = 0
		b := off + uint64(i)
		if b < off || b >= (n+7)/8 {
			continue
		}
		for bit := uint64(0); bit < 8; bit++ {
			if k := b*8 + bit; k < n && c.msix[k].pending {
				p[i] |= 1 << bit
			}
		}
	}
}

// Reset returns to the power-on interrupt state for a device reset: no pending bits, nothing
// masked, INTx de-asserted. Eventfds stay (the client re-programs what it wants).
func (c *Controller) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.msix {
		c.msix[k].pending = false
		c.msix[k].masked = false
	}
	c.intx.asserted = false
	c.intx.masked = false
}

// Close closes every eventfd and stops the resample goroutine (client disconnect). Device
// state — pending bits, masks, the INTx level — stays. The controller stays usable.
func (c *Controller) Close() {
	var after cleanup
	c.mu.Lock()
	for k := range c.msix {
		after.close(c.msix[k].fd)
		c.msix[k].fd = nil
	}
	after.close(c.intx.trigger)
	c.intx.trigger = nil
	if c.intx.resample != nil {
		after.stops = append(after.stops, c.intx.resample)
		c.intx.resample = nil
	}
	after.close(c.errFd)
	after.close(c.reqFd)
	c.errFd, c.reqFd = nil, nil
	c.mu.Unlock()
	after.run()
}

// Stats returns a snapshot of the counters.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{
		Delivered:   make([]uint64, len(c.msix)),
		INTxSignals: c.intxN,
		ErrSignals:  c.errN,
		Dropped:     c.dropped,
	}
	for k, v := range c.msix {
		st.Delivered[k] = v.delivered
		if v.pending {
			st.Pending++
		}
	}
	return st
}
