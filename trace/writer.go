package trace

import (
	"bufio"
	"fmt"
	"os"
	"time"

	"google.golang.org/protobuf/proto"

	"vgpu/trace/perfetto"
)

// sequenceID is the one packet sequence a recorder writes.
const sequenceID = 1

// writer is the recorder's goroutine: it owns the file and everything below.
type writer struct {
	r        *Recorder
	out      *bufio.Writer
	max      int64
	err      error // the first write error; later events are dropped
	declared [numTracks]bool
	seenLost uint64 // Dropped when the last event was written
	enc      encoder
	buf      []byte
	batch    []event // the queue's other half
}

func newWriter(r *Recorder, out *bufio.Writer, max int64) *writer {
	return &writer{r: r, out: out, max: max, batch: make([]event, 0, cap(r.pending))}
}

// batchDelay is how long the writer lets a batch fill after its first event (unless it gets
// half full first): one wake-up per batch, not per event.
const batchDelay = time.Millisecond

func (w *writer) run() {
	defer close(w.r.done)
	w.header()
	delay := time.NewTimer(batchDelay)
	delay.Stop()
	for {
		select {
		case <-w.r.ready:
			delay.Reset(batchDelay)
			select {
			case <-w.r.ready: // half full
			case <-delay.C:
			case <-w.r.stop:
			}
			delay.Stop()
			w.drain()
		case <-w.r.stop:
			w.drain()
			w.trailer()
			if err := w.out.Flush(); err != nil && w.err == nil {
				w.err = fmt.Errorf("trace: %w", err)
			}
			return
		}
	}
}

// drain writes the queued events, swapping the queue's halves until it is empty.
func (w *writer) drain() {
	for {
		w.r.mu.Lock()
		w.batch, w.r.pending = w.r.pending, w.batch[:0]
		w.r.mu.Unlock()
		if len(w.batch) == 0 {
			return
		}
		for i := range w.batch {
			w.event(&w.batch[i])
		}
	}
}

// header declares the process track and the fixed tracks, in the order the UI shows them.
func (w *writer) header() {
	w.packet(&perfetto.TracePacket{
		TrustedPacketSequenceId: proto.Uint32(sequenceID),
		SequenceFlags:           proto.Uint32(uint32(perfetto.TracePacket_SEQ_INCREMENTAL_STATE_CLEARED)),
		FirstPacketOnSequence:   proto.Bool(true),
		Data: &perfetto.TracePacket_TrackDescriptor{TrackDescriptor: &perfetto.TrackDescriptor{
			Uuid:          proto.Uint64(rootUUID),
			Name:          proto.String("vgpu"),
			Process:       &perfetto.ProcessDescriptor{Pid: proto.Int32(int32(os.Getpid())), ProcessName: proto.String("vgpu")},
			ChildOrdering: perfetto.TrackDescriptor_EXPLICIT.Enum(),
		}},
	})
	for t := range fixedTracks {
		w.declare(Track(t))
	}
}

// declare writes t's descriptor: a named child of the process track, ranked by its index.
func (w *writer) declare(t Track) {
	w.declared[t] = true
	w.packet(&perfetto.TracePacket{
		TrustedPacketSequenceId: proto.Uint32(sequenceID),
		Data: &perfetto.TracePacket_TrackDescriptor{TrackDescriptor: &perfetto.TrackDescriptor{
			Uuid:             proto.Uint64(t.uuid()),
			ParentUuid:       proto.Uint64(rootUUID),
			Name:             proto.String(t.Name()),
			SiblingOrderRank: proto.Int32(int32(t)),
		}},
	})
}

// trailer records, on the device track, how many events the trace lost.
func (w *writer) trailer() {
	e := event{ts: int64(w.r.sinceStart()), track: TrackDevice, kind: kindInstant, name: "trace closed",
		nargs: 2, args: [maxArgs]Arg{U("events written", w.r.written.Load()), U("events dropped", w.r.dropped.Load())}}
	w.max += 1 << 10 // room for this one past the cap
	w.event(&e)
}

// event writes one engine event (its track's descriptor first, for a CU's first event).
func (w *writer) event(e *event) {
	if !w.declared[e.track] {
		w.declare(e.track)
	}
	d := w.r.dropped.Load()
	lost := d != w.seenLost
	w.seenLost = d
	w.buf = w.enc.appendEvent(w.buf[:0], e, sequenceID, lost)
	if w.write(w.buf) {
		w.r.written.Add(1)
	} else {
		w.r.dropped.Add(1)
	}
}

// packet writes p (a descriptor) unless the file is at its cap or broken.
func (w *writer) packet(p *perfetto.TracePacket) bool {
	if w.err != nil {
		return false
	}
	var err error
	w.buf, err = perfetto.AppendPacket(w.buf[:0], p)
	if err != nil {
		w.err = err
		return false
	}
	return w.write(w.buf)
}

// write writes one encoded packet unless the file is at its cap or broken; it reports
// whether it did.
func (w *writer) write(b []byte) bool {
	if w.err != nil {
		return false
	}
	n := w.r.bytes.Load()
	if n+int64(len(b)) > w.max {
		return false
	}
	if _, err := w.out.Write(b); err != nil {
		w.err = fmt.Errorf("trace: %w", err)
		return false
	}
	w.r.bytes.Add(int64(len(b)))
	return true
}
