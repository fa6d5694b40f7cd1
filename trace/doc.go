// Package trace records a timeline of the device in Perfetto's trace format: what each HQD
// slot, the MES, each compute unit, the IH ring, the transport and the device as a whole did,
// and when. The engines call a *Recorder's methods at the points worth seeing (a packet
// starts and ends, a doorbell rings, an IV is written); a writer goroutine turns the events
// into TracePackets (package trace/perfetto) and streams them to the file. The file opens in
// ui.perfetto.dev and trace_processor as it is; Load reads it back into slices, instants and
// flows (tests and `vgpu timeline` use it). docs/trace.md describes what is recorded.
//
// Cost: a nil *Recorder is recording off. Every method on it returns at once: no clock read,
// no allocation, nothing escapes (the engines' hooks pass only strings and integers), so the
// hooks stay in the hot paths for good. When on, an event is a clock read and a copy into a
// bounded queue; a full queue drops the event and counts it (Dropped) instead of blocking an
// engine or growing without bound, and the file stops growing at Options.MaxBytes. The guest
// can produce events without end; the recorder's memory is the queue's size.
//
// Concurrency: every method may be called from any goroutine. Events of one goroutine keep
// their order; readers order events by timestamp (trace_processor sorts; Load sorts stably).
//
// trace is a leaf: it imports only trace/perfetto and google.golang.org/protobuf.
package trace
