package vfiouser

// The trapped register read is the one command on every MMIO round trip of a driver, and with
// client and server on one CPU each instruction the server runs between reading a request and
// sending its reply is time the client waits — and time in which the scheduler may run the
// client, woken by the write space our read gave back, only for it to sleep again. So a plain
// REGION_READ is answered here, by the executor, without the general dispatch: the same checks
// and the same Device call, one reply buffer of its own, one send.

// maxFastRead is the largest REGION_READ answered on the fast path: a register pair. Anything
// larger (a VRAM window read) takes the general path, which sizes its buffer as needed.
const maxFastRead = 8

// fastReply is the session's reply buffer for the fast path: header, access, data.
type fastReply [HeaderSize + RegionAccessSize + maxFastRead]byte

// handleFast answers m if it is a REGION_READ the fast path serves and reports whether it did.
// It must behave exactly as handle would: a command it declines goes through handle, and one
// it accepts gets the reply (or the error reply) handle would have sent. It declines whenever
// the general path has something to do besides the read: tracing or debug logging on, a
// message not yet negotiated, carrying descriptors, flagged NO_REPLY, or shaped other than a
// 4- or 8-byte access; a failed check also goes to handle, which names the error (the Device
// has not been called then).
func (ss *session) handleFast(m *Message) bool {
	if m.Cmd != CmdRegionRead || m.Flags != FlagTypeCommand || len(m.Payload) != RegionAccessSize ||
		len(m.FDs) != 0 || m.FDsTruncated || !ss.negotiated || !ss.connected || ss.trace != nil || ss.debug {
		return false
	}
	p := m.Payload
	a := RegionAccess{Offset: le.Uint64(p[0:]), Region: le.Uint32(p[8:]), Count: le.Uint32(p[12:])}
	if (a.Count != 4 && a.Count != 8) || ss.checkAccess(a, RegionFlagRead) != nil {
		return false
	}
	size := HeaderSize + RegionAccessSize + int(a.Count)
	b := ss.fast[:size]
	if err := ss.dev.RegionRead(a.Region, a.Offset, b[HeaderSize+RegionAccessSize:]); err != nil {
		ss.failed(m, err)
		return true
	}
	Header{ID: m.ID, Cmd: m.Cmd, Size: uint32(size), Flags: FlagTypeReply}.Put(b)
	a.put(b[HeaderSize:])
	if err := ss.conn.writeSmall(b); err != nil {
		ss.conn.Close() // as send does: the reader notices and tears the session down
	}
	return true
}
