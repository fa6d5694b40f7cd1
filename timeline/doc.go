// Package timeline draws a Perfetto trace of the device (the one `vgpu serve --trace` and
// `vgpu run --trace` record) as one self-contained HTML page: inline SVG, CSS and a small
// script, no other file and no network, so it opens from file:// in any browser.
//
// Read parses the trace (bounded: a file over MaxTraceBytes is refused with ErrTooLarge,
// malformed input is an error, never a panic) into a Model: tracks from the TrackDescriptors
// with their parent nesting, slices matched begin to end per track (a begin without an end
// runs to the trace's end, an end without a begin from its start, and both are counted),
// instants, and flows (the events sharing a flow id, such as a doorbell, its fence and its
// interrupt). Render writes the page: one row group per track (HQD slots, the MES and its
// decisions, CUs, the IH ring, the transport) with slices as bars and instants as marks, the
// names on hover, flows as arrows, a time axis in readable units, a latency summary of the
// flows' steps (count, median, p90, max) and each track's busy fraction.
//
// Big traces stay small pages: slices and instants closer than a merge distance (1 pixel,
// doubled until at most Options.MaxElements bars and marks remain) are drawn as one bar or
// mark that says how many it holds, and the page says what was merged or left out. Every name
// from the trace (they come from the guest's actions) is cleaned (valid UTF-8, no control
// characters, bounded length) and HTML-escaped.
package timeline
