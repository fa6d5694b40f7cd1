package vfiouser

import (
	"encoding/binary"

	"vgpu/trace"
)

// The transport's timeline (package trace): on the transport track, a slice per command the
// server handles, named by the command (REGION_READ, REGION_WRITE, DMA_MAP, ...), annotated
// with the region and offset of a region access, and with the error of a failed command.

// WithTrace makes the server record its commands on r (nil: off).
func WithTrace(r *trace.Recorder) Option {
	return func(o *options) { o.trace = r }
}

// tracedDispatch is dispatch inside the command's slice.
func (ss *session) tracedDispatch(m *Message) ([]byte, []int, error) {
	r := ss.trace
	if r == nil {
		return ss.dispatch(m)
	}
	if (m.Cmd == CmdRegionRead || m.Cmd == CmdRegionWrite) && len(m.Payload) >= RegionAccessSize {
		p := m.Payload
		r.Begin(trace.TrackTransport, m.Cmd.String(), trace.U("region", uint64(binary.LittleEndian.Uint32(p[8:]))),
			trace.U("offset", binary.LittleEndian.Uint64(p)), trace.U("count", uint64(binary.LittleEndian.Uint32(p[12:]))))
	} else {
		r.Begin(trace.TrackTransport, m.Cmd.String(), trace.U("size", uint64(len(m.Payload))))
	}
	out, fds, err := ss.dispatch(m)
	if err != nil {
		r.End(trace.TrackTransport, trace.S("error", err.Error()))
	} else {
		r.End(trace.TrackTransport)
	}
	return out, fds, err
}
