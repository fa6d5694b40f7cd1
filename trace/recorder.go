package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Options bound a recorder's memory and file.
type Options struct {
	// MaxBytes stops the file growing: events that would be written past it are dropped and
	// counted (0: DefaultMaxBytes).
	MaxBytes int64
	// Queue is the number of events that can wait for the writer; when they are that many
	// an event is dropped and counted rather than making an engine wait (0: DefaultQueue).
	// The recorder's memory is twice this many events (the batch being written and the one
	// being filled), about 230 bytes each.
	Queue int
}

const (
	DefaultMaxBytes = 256 << 20
	DefaultQueue    = 1 << 13
	// maxQueue bounds Options.Queue: the queue's memory is its length times an event's size.
	maxQueue = 1 << 20
)

// ErrClosed is Close's error for a second Close.
var ErrClosed = errors.New("trace: recorder already closed")

// Recorder records events to one trace file. A nil *Recorder records nothing and costs
// nothing: every method returns at once.
type Recorder struct {
	start time.Time
	// The queue: engines append to pending under mu; the writer swaps it for the batch it
	// has written. ready (one slot) tells the writer a batch has begun or is half full.
	mu      sync.Mutex
	pending []event
	ready   chan struct{}
	stop    chan struct{} // closed by Close: the writer drains and flushes
	done    chan struct{} // closed by the writer when the file is complete
	closed  atomic.Bool
	once    sync.Once

	dropped atomic.Uint64 // events lost to a full queue or the size cap
	written atomic.Uint64 // events written
	bytes   atomic.Int64  // bytes written

	nextFlow atomic.Uint64
	slotFlow [HQDSlots]atomic.Uint64 // a doorbell's flow, until the slot's fence takes it
	ringFlow [256]atomic.Uint64      // a fence's flow, until its IV (by IV ring id) takes it

	w      *writer
	closer io.Closer // the file Create opened
}

// Create records to a new file at path (truncated if it exists).
func Create(path string, o Options) (*Recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	r := New(f, o)
	r.closer = f
	return r, nil
}

// New records to w; Close flushes but does not close w.
func New(w io.Writer, o Options) *Recorder {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	o.Queue = min(o.Queue, maxQueue)
	r := &Recorder{
		start:   time.Now(),
		pending: make([]event, 0, o.Queue),
		ready:   make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	r.w = newWriter(r, bufio.NewWriterSize(w, 64<<10), o.MaxBytes)
	go r.w.run()
	return r
}

// Close writes what is queued, a last event with the dropped count, flushes and (for Create)
// closes the file. Events recorded after Close are ignored.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	err := ErrClosed
	r.once.Do(func() {
		r.closed.Store(true)
		close(r.stop)
		<-r.done
		err = r.w.err
		if r.closer != nil {
			if cerr := r.closer.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("trace: %w", cerr)
			}
		}
	})
	return err
}

// Dropped is the number of events lost so far to a full queue or the size cap.
func (r *Recorder) Dropped() uint64 {
	if r == nil {
		return 0
	}
	return r.dropped.Load()
}

// Written is the number of events written so far, and the file's size in bytes.
func (r *Recorder) Written() (events uint64, bytes int64) {
	if r == nil {
		return 0, 0
	}
	return r.written.Load(), r.bytes.Load()
}

// On reports whether r records: hooks that must compute something only for the trace (a
// name from a table, an error's text) check it first.
func (r *Recorder) On() bool { return r != nil }

// kind is an event's TrackEvent type.
type kind uint8

const (
	kindBegin kind = iota + 1
	kindEnd
	kindInstant
)

// maxArgs is the most annotations one event carries; more are ignored.
const maxArgs = 4

// event is what an engine hands the writer: plain values only (strings are the engines'
// constants or text built only when recording), copied into the queue.
type event struct {
	ts      int64
	track   Track
	kind    kind
	flowEnd bool // flow terminates here
	nargs   uint8
	name    string
	flow    uint64
	value   int64
	args    [maxArgs]Arg
}

// Arg is one key/value annotation of an event, made by U, I or S.
type Arg struct {
	Key   string
	Str   string
	Val   uint64
	IsStr bool
	IsInt bool // Val is an int64
}

// U is an unsigned annotation (addresses, counts, register values).
func U(key string, v uint64) Arg { return Arg{Key: key, Val: v} }

// I is a signed annotation.
func I(key string, v int64) Arg { return Arg{Key: key, Val: uint64(v), IsInt: true} }

// S is a text annotation.
func S(key, v string) Arg { return Arg{Key: key, Str: v, IsStr: true} }

// emit queues e, timestamped now; a full queue drops it.
func (r *Recorder) emit(e *event, args []Arg) {
	if r.closed.Load() || int(e.track) >= numTracks {
		return
	}
	e.nargs = uint8(copy(e.args[:], args))
	r.mu.Lock()
	e.ts = int64(r.sinceStart()) // under mu: the queue is in time order
	n, c := len(r.pending), cap(r.pending)
	if n == c {
		r.mu.Unlock()
		r.dropped.Add(1)
		return
	}
	r.pending = append(r.pending, *e)
	r.mu.Unlock()
	if n == 0 || n == c/2 {
		select {
		case r.ready <- struct{}{}:
		default:
		}
	}
}

// Begin opens a slice on t; End closes the innermost open slice of t. Slices of one track
// must nest: a track's slices come from one goroutine at a time.
func (r *Recorder) Begin(t Track, name string, args ...Arg) {
	if r == nil {
		return
	}
	r.emit(&event{track: t, kind: kindBegin, name: name}, args)
}

// End closes the innermost open slice of t; args are added to that slice's.
func (r *Recorder) End(t Track, args ...Arg) {
	if r == nil {
		return
	}
	r.emit(&event{track: t, kind: kindEnd}, args)
}

// Instant records a point event on t.
func (r *Recorder) Instant(t Track, name string, args ...Arg) {
	if r == nil {
		return
	}
	r.emit(&event{track: t, kind: kindInstant, name: name}, args)
}

// FlowStep records an instant on t that starts flow (or continues it from its last event):
// the UI draws an arrow from each event of a flow to the next.
func (r *Recorder) FlowStep(t Track, name string, flow uint64, args ...Arg) {
	if r == nil {
		return
	}
	r.emit(&event{track: t, kind: kindInstant, name: name, flow: flow}, args)
}

// FlowEnd records an instant on t that is the last event of flow.
func (r *Recorder) FlowEnd(t Track, name string, flow uint64, args ...Arg) {
	if r == nil {
		return
	}
	r.emit(&event{track: t, kind: kindInstant, name: name, flow: flow, flowEnd: flow != 0}, args)
}

// NewFlow returns a flow id not used before in this trace (never 0).
func (r *Recorder) NewFlow() uint64 {
	if r == nil {
		return 0
	}
	return r.nextFlow.Add(1)
}

// SetSlotFlow leaves flow for the next TakeSlotFlow of slot (a doorbell hands its flow to the
// fence its queue writes next); a later SetSlotFlow replaces it.
func (r *Recorder) SetSlotFlow(slot int, flow uint64) {
	if r == nil || uint(slot) >= HQDSlots {
		return
	}
	r.slotFlow[slot].Store(flow)
}

// TakeSlotFlow returns the flow left for slot and clears it (0: none).
func (r *Recorder) TakeSlotFlow(slot int) uint64 {
	if r == nil || uint(slot) >= HQDSlots {
		return 0
	}
	if r.slotFlow[slot].Load() == 0 {
		return 0
	}
	return r.slotFlow[slot].Swap(0)
}

// SetRingFlow leaves flow for the next IV of an IV ring id (a fence hands its flow to its
// interrupt).
func (r *Recorder) SetRingFlow(ring uint8, flow uint64) {
	if r == nil {
		return
	}
	r.ringFlow[ring].Store(flow)
}

// TakeRingFlow returns the flow left for ring and clears it (0: none).
func (r *Recorder) TakeRingFlow(ring uint8) uint64 {
	if r == nil || r.ringFlow[ring].Load() == 0 {
		return 0
	}
	return r.ringFlow[ring].Swap(0)
}

// sinceStart is the trace clock: nanoseconds since the recorder started (monotonic).
func (r *Recorder) sinceStart() time.Duration { return time.Since(r.start) }
