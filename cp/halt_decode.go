package cp

import (
	"encoding/binary"

	"vgpu/abi"
	"vgpu/decode"
)

// haltOn halts the queue on the packet p it had fetched (header first), so the halt's log
// line shows that packet decoded. Called on the queue's goroutine only; haltPkt is set just
// for the synchronous halt (p is the fetch buffer, reused by the next fetch).
func (q *queue) haltOn(err error, addr uint64, hdr uint32, p []byte) {
	q.haltPkt = p
	q.halt(err, addr, hdr)
	q.haltPkt = nil
}

// packetText is the offending packet for a halt's log line: the whole packet decoded when
// the queue had fetched it, else its header (ERROR_INFO) alone; "" when the halt is not
// about a packet (a shader error's ERROR_INFO is its SHADER_ERR_*, a ring error has none).
// The decoder's text is bounded, whatever the packet's size.
func (q *queue) packetText(f *fault, info uint32) string {
	if p := q.haltPkt; len(p) >= 4 {
		dws := make([]uint32, len(p)/4)
		for i := range dws {
			dws[i] = binary.LittleEndian.Uint32(p[4*i:])
		}
		pkt, _ := decode.PM4Packet(dws)
		return pkt.String()
	}
	if f.hasInfo || f.code == abi.CP_ERROR_RING_CONFIG || info == 0 {
		return ""
	}
	return decode.PM4Header(info).String()
}
