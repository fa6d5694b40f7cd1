package irq

import (
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"vgpu/ratelog"
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

// ErrNoVector is returned by TriggerMSIX and SetTableMask for a vector outside the table.
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
	Delivered   []uint64 // per MSI-X vector: eventfd signals that added to the counter
	Pending     int      // MSI-X vectors whose pending bit is set
	TableMasked int      // MSI-X vectors whose Mask Bit is set in the trapped table
	TableInUse  bool     // the client unmasked a vector through the trapped table: its mask bits count
	INTxSignals uint64   // signals of the INTx trigger eventfd
	ErrSignals  uint64   // signals of the ERR eventfd
	ReqSignals  uint64   // signals of the REQ eventfd (SET_IRQS loopback only)
	Saturated   uint64   // signals that found the eventfd counter at its maximum (EAGAIN): still pending there
	Retargeted  uint64   // MSI-X signals whose eventfd was replaced while being written, sent again
	Dropped     uint64   // signals lost: eventfd write failed, or ERR/REQ with no eventfd
	NoVector    uint64   // TriggerMSIX or SetTableMask calls for a vector outside the table (ErrNoVector)
	Refused     uint64   // SET_IRQS requests refused (EINVAL), among them fds that are not eventfds
}

type vector struct {
	fd           *eventfd
	clientMasked bool // ACTION_MASK from the client (SET_IRQS)
	tableMasked  bool // Vector Control Mask Bit in the trapped MSI-X table
	pending      bool
}

type intx struct {
	trigger  *eventfd
	resample *resampler
	asserted bool // the device drives the line
	masked   bool // ACTION_MASK from the client
}

// Keys of the controller's rate-limited log lines (ratelog): one per event kind.
const (
	logKeyRefused   = "irq-set-irqs-refused"
	logKeyNoVector  = "irq-no-such-vector"
	logKeySaturated = "irq-eventfd-saturated"
	logKeyFailed    = "irq-eventfd-write-failed"
	logKeyNoErrFd   = "irq-err-req-without-eventfd"
	logKeyResample  = "irq-resample-read-failed"
)

// Controller holds the DEVICE_SET_IRQS state of every index. All methods are safe for
// concurrent use. Eventfds are written after the lock is released (see send).
type Controller struct {
	limit    atomic.Pointer[ratelog.Limiter]
	ownLimit *ratelog.Limiter // the default, on New's logger

	mu         sync.Mutex
	msix       []vector
	tableInUse bool // see SetTableMask
	intx       intx
	errFd      *eventfd
	reqFd      *eventfd

	// Counters, updated without the lock once a signal's outcome is known.
	delivered                                []atomic.Uint64
	intxN, errN, reqN, saturated, retargeted atomic.Uint64
	dropped, noVector, refused               atomic.Uint64
	inj                                      injection // fault injection (inject.go)
}

// New returns a controller for msixVectors MSI-X vectors (1..MaxMSIXVectors; anything else is
// a programming error and panics) plus one INTx line, ERR and REQ. Log lines a client or guest
// can cause go through a rate limiter on log (nil discards) until SetLimiter replaces it.
// Every vector starts masked in the MSI-X table, its power-on state.
func New(msixVectors int, log *slog.Logger) *Controller {
	if msixVectors < 1 || msixVectors > MaxMSIXVectors {
		panic(fmt.Sprintf("irq.New: %d MSI-X vectors, want 1..%d", msixVectors, MaxMSIXVectors))
	}
	c := &Controller{
		ownLimit:  ratelog.New(log, ratelog.DefaultInterval, ratelog.DefaultBurst),
		msix:      make([]vector, msixVectors),
		delivered: make([]atomic.Uint64, msixVectors),
	}
	c.limit.Store(c.ownLimit)
	for k := range c.msix {
		c.msix[k].tableMasked = true
	}
	return c
}

// SetLimiter makes the controller's log lines go through l (the device's limiter, so that its
// diagnostics count them with the rest); nil restores the default. Safe at any time.
func (c *Controller) SetLimiter(l *ratelog.Limiter) {
	if l == nil {
		l = c.ownLimit
	}
	c.limit.Store(l)
}

func (c *Controller) log() *ratelog.Limiter { return c.limit.Load() }

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

// cleanup collects what Set must do after dropping the lock: signals to send, descriptors to
// close and resample goroutines to stop (they take the lock themselves).
type cleanup struct {
	sends []send
	files []*os.File
	stops []*resampler
}

func (a *cleanup) close(e *eventfd) {
	if e != nil {
		a.files = append(a.files, e.f)
	}
}

func (a *cleanup) signal(s send, ok bool) {
	if ok {
		a.sends = append(a.sends, s)
	}
}

func (c *Controller) run(a *cleanup) {
	for _, s := range a.sends {
		c.send(s)
	}
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
// requests — among them a descriptor that is not an eventfd — wrap syscall.EINVAL and change
// nothing.
func (c *Controller) Set(r Request) error {
	var after cleanup
	c.mu.Lock()
	err := c.setLocked(r, &after)
	c.mu.Unlock()
	if err != nil {
		after.files = append(after.files, r.Files...)
		c.refused.Add(1)
		c.log().Warn(logKeyRefused, "irq: SET_IRQS refused", "err", err)
	}
	c.run(&after)
	return err
}

func invalid(r Request, reason string) error {
	return fmt.Errorf("irq: SET_IRQS flags %#x index %d start %d count %d: %s: %w",
		r.Flags, r.Index, r.Start, r.Count, reason, syscall.EINVAL)
}

// refusedFd is invalid for a descriptor that cannot be used, keeping the cause (errNotEventfd).
func refusedFd(r Request, what string, cause error) error {
	return fmt.Errorf("irq: SET_IRQS flags %#x index %d start %d count %d: %s: %w: %w",
		r.Flags, r.Index, r.Start, r.Count, what, cause, syscall.EINVAL)
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
					return refusedFd(r, "INTx resample", err)
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
					return refusedFd(r, fmt.Sprintf("fd %d", k), err)
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
			slot, counter = &c.reqFd, &c.reqN
		}
		switch {
		case data == DataEventfd:
			after.close(*slot)
			*slot = fds[0]
		case data == DataNone && r.Count == 0:
			after.close(*slot)
			*slot = nil
		case r.Count == 1 && selected(0):
			after.signal(c.simpleLocked(*slot, counter))
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
		n := int(r.Start) + k
		v := &c.msix[n]
		switch {
		case action == ActionTrigger && data == DataEventfd:
			after.close(v.fd)
			v.fd = fds[k]
			after.signal(c.releaseLocked(n))
		case !selected(k):
		case action == ActionTrigger:
			after.signal(c.triggerLocked(n))
		case action == ActionMask:
			v.clientMasked = true
		case action == ActionUnmask:
			v.clientMasked = false
			after.signal(c.releaseLocked(n))
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
			after.signal(c.intxLocked())
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
				c.log().Warn(logKeyResample, "irq: INTx resample eventfd read failed; stopped watching it", "err", err)
			})
		}
	case r.Count == 0 || !selected(0):
	case action == ActionTrigger: // loopback
		if !x.masked {
			after.signal(c.intxLocked())
		}
	case action == ActionMask:
		x.masked = true
	case action == ActionUnmask:
		x.masked = false
		if x.asserted {
			after.signal(c.intxLocked())
		}
	}
}

// resampled runs on the resample goroutine: the guest EOI'd the line; if the device still
// drives it, signal again (level-triggered semantics over an edge-only eventfd).
func (c *Controller) resampled(rs *resampler) {
	c.mu.Lock()
	var s send
	ok := false
	if c.intx.resample == rs && c.intx.asserted && !c.intx.masked { // else replaced meanwhile, or low
		s, ok = c.intxLocked()
	}
	c.mu.Unlock()
	if ok {
		c.send(s)
	}
}

// TriggerMSIX raises MSI-X vector: signalled at once when it can be delivered (it has an
// eventfd and is masked neither by SET_IRQS nor in the table), else recorded in the PBA and
// delivered when that changes. Safe from any goroutine; it never blocks on the client.
func (c *Controller) TriggerMSIX(vector int) error {
	if err := c.checkVector(vector, "TriggerMSIX"); err != nil {
		return err
	}
	if c.inj.intercept(c, vector) {
		return nil
	}
	c.mu.Lock()
	s, ok := c.triggerLocked(vector)
	c.mu.Unlock()
	if ok {
		c.send(s)
	}
	return nil
}

func (c *Controller) checkVector(vector int, op string) error {
	if vector >= 0 && vector < len(c.msix) {
		return nil
	}
	c.noVector.Add(1)
	err := fmt.Errorf("%w: %d (table has %d)", ErrNoVector, vector, len(c.msix))
	c.log().Warn(logKeyNoVector, "irq: "+op+" refused", "err", err)
	return err
}

// SetTableMask applies a write of vector's Mask Bit (Vector Control bit 0) in the trapped MSI-X
// table. PCI semantics: a vector masked in the table is not delivered but sets its PBA bit;
// unmasking it delivers the pending interrupt and clears the bit — when the SET_IRQS mask is
// clear too and the vector has an eventfd (all three must allow delivery).
//
// QEMU emulates the table and never forwards table accesses (it masks by swapping eventfds),
// so the table we hold stays in its power-on state, every vector masked, for as long as QEMU
// is the client. The table's mask bits therefore count only once the client has shown that it
// uses this table, by unmasking a vector through it; from then until Close (the client goes)
// they count, across resets as well, as on hardware where reset masks everything and the driver
// unmasks what it uses. A vector outside the table is refused with ErrNoVector.
func (c *Controller) SetTableMask(vector int, masked bool) error {
	if err := c.checkVector(vector, "SetTableMask"); err != nil {
		return err
	}
	c.mu.Lock()
	c.msix[vector].tableMasked = masked
	var s send
	ok := false
	if !masked {
		c.tableInUse = true
		s, ok = c.releaseLocked(vector)
	}
	c.mu.Unlock()
	if ok {
		c.send(s)
	}
	return nil
}

// deliverableLocked reports whether vector k can be signalled now.
func (c *Controller) deliverableLocked(k int) bool {
	v := &c.msix[k]
	return v.fd != nil && !v.clientMasked && !(c.tableInUse && v.tableMasked)
}

// triggerLocked raises vector k: it returns the signal to send, or records the pending bit.
func (c *Controller) triggerLocked(k int) (send, bool) {
	if !c.deliverableLocked(k) {
		c.msix[k].pending = true
		return send{}, false
	}
	return send{to: c.msix[k].fd, kind: sendMSIX, n: k}, true
}

// releaseLocked delivers vector k's pending interrupt if it has become deliverable (an
// unmask, a new eventfd), clearing the pending bit.
func (c *Controller) releaseLocked(k int) (send, bool) {
	if !c.msix[k].pending || !c.deliverableLocked(k) {
		return send{}, false
	}
	c.msix[k].pending = false
	return send{to: c.msix[k].fd, kind: sendMSIX, n: k}, true
}

// AssertINTx drives the INTx line high. The trigger eventfd is signalled on the rising edge
// (unless masked) and again on every resample or unmask while the line stays high.
func (c *Controller) AssertINTx() {
	c.mu.Lock()
	var s send
	ok := false
	if !c.intx.asserted {
		c.intx.asserted = true
		if !c.intx.masked {
			s, ok = c.intxLocked()
		}
	}
	c.mu.Unlock()
	if ok {
		c.send(s)
	}
}

// DeassertINTx drives the INTx line low. Nothing is signalled: the guest side de-asserts on EOI
// and asks again through the resample eventfd.
func (c *Controller) DeassertINTx() {
	c.mu.Lock()
	c.intx.asserted = false
	c.mu.Unlock()
}

// intxLocked returns the signal of the INTx trigger eventfd, if there is one (the line level is
// kept either way; assigning a trigger fd signals it).
func (c *Controller) intxLocked() (send, bool) {
	if c.intx.trigger == nil {
		return send{}, false
	}
	return send{to: c.intx.trigger, kind: sendINTx}, true
}

// simpleLocked returns the signal of the ERR or REQ eventfd (loopback trigger from SET_IRQS or
// RaiseError); with none assigned the signal is dropped and counted.
func (c *Controller) simpleLocked(e *eventfd, counter *atomic.Uint64) (send, bool) {
	kind := sendErr
	if counter == &c.reqN {
		kind = sendReq
	}
	if e == nil {
		c.dropped.Add(1)
		c.log().Warn(logKeyNoErrFd, "irq: ERR/REQ signal dropped: no eventfd assigned", "irq", kind.String())
		return send{}, false
	}
	return send{to: e, kind: kind}, true
}

// RaiseError signals the ERR eventfd (an unrecoverable device error); with none assigned the
// signal is counted as dropped.
func (c *Controller) RaiseError() {
	c.mu.Lock()
	s, ok := c.simpleLocked(c.errFd, &c.errN)
	c.mu.Unlock()
	if ok {
		c.send(s)
	}
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
// masked by SET_IRQS, every vector masked in the MSI-X table, INTx de-asserted. Eventfds stay
// (the client re-programs what it wants), and so does whether the client uses the table.
func (c *Controller) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.msix {
		c.msix[k].pending = false
		c.msix[k].clientMasked = false
		c.msix[k].tableMasked = true
	}
	c.intx.asserted = false
	c.intx.masked = false
}

// Close closes every eventfd and stops the resample goroutine (client disconnect). Device
// state — pending bits, masks, the INTx level — stays; the next client has not used the table
// yet, so its mask bits stop counting (see SetTableMask). The controller stays usable.
func (c *Controller) Close() {
	var after cleanup
	c.mu.Lock()
	for k := range c.msix {
		after.close(c.msix[k].fd)
		c.msix[k].fd = nil
	}
	c.tableInUse = false
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
	c.run(&after)
}

// Stats returns a snapshot of the counters.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{
		Delivered:   make([]uint64, len(c.msix)),
		TableInUse:  c.tableInUse,
		INTxSignals: c.intxN.Load(),
		ErrSignals:  c.errN.Load(),
		ReqSignals:  c.reqN.Load(),
		Saturated:   c.saturated.Load(),
		Retargeted:  c.retargeted.Load(),
		Dropped:     c.dropped.Load(),
		NoVector:    c.noVector.Load(),
		Refused:     c.refused.Load(),
	}
	for k, v := range c.msix {
		st.Delivered[k] = c.delivered[k].Load()
		if v.pending {
			st.Pending++
		}
		if v.tableMasked {
			st.TableMasked++
		}
	}
	return st
}
