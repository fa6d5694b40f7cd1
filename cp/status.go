package cp

import "vgpu/abi"

// Live inspection (device.Status, `vgpu status`): one slot's configuration and state, and the
// packet its queue is stopped on. Reading it never touches guest memory: the packet is the
// copy the queue goroutine made from its own fetch buffer when it stopped on it (parked in a
// wait, halted, in an endless dispatch), so a status request can neither block on the client
// nor fault.

// MaxStatusPacketDwords bounds the dwords of a packet kept for the status: a header and the
// fields of every packet but the longest SET_SH_REG runs.
const MaxStatusPacketDwords = 16

// stoppedPacket is the packet a queue is stopped on. Guarded by h.mu.
type stoppedPacket struct {
	level  int    // 0: the ring, 1-2: an IB
	addr   uint64 // its GPU address
	dwords [MaxStatusPacketDwords]uint32
	n      int  // dwords kept (≤ the packet's length)
	total  int  // the packet's length in dwords
	valid  bool // set once a queue stopped on a packet
}

// HQDStatus is one slot as `vgpu status` shows it.
type HQDStatus struct {
	Slot       int    `json:"slot"`
	Active     bool   `json:"active"`
	Mapped     bool   `json:"mapped"` // placed by the scheduler (MES) from an MQD
	VMID       int    `json:"vmid"`
	RingBase   uint64 `json:"ring_base"`
	RingBytes  uint64 `json:"ring_bytes"`
	Doorbell   uint32 `json:"doorbell"` // dword offset in the doorbell BAR
	DoorbellOn bool   `json:"doorbell_enabled"`
	Rptr       uint64 `json:"rptr"` // monotonic dwords
	Wptr       uint64 `json:"wptr"`
	State      uint32 `json:"state"` // HQD_STATE_*
	Idle       bool   `json:"idle"`
	Error      uint32 `json:"error,omitempty"` // CP_ERROR_* of a halt
	ErrorAddr  uint64 `json:"error_addr,omitempty"`
	ErrorInfo  uint32 `json:"error_info,omitempty"`
	Fences     uint32 `json:"fences"`
	// Packet is the packet the queue is stopped on (waiting, halted, endless dispatch): its
	// first dwords, PacketDwords long in all, at PacketAddr (IBLevel 0: in the ring).
	Packet       []uint32 `json:"packet,omitempty"`
	PacketDwords int      `json:"packet_dwords,omitempty"`
	PacketAddr   uint64   `json:"packet_addr,omitempty"`
	IBLevel      int      `json:"ib_level,omitempty"`
}

// HQDStatus returns slot's state under its lock (out-of-range slots: the zero value).
func (c *CP) HQDStatus(slot int) HQDStatus {
	if slot < 0 || slot >= NumSlots {
		return HQDStatus{Slot: slot}
	}
	h := &c.hqds[slot]
	h.mu.Lock()
	defer h.mu.Unlock()
	s := HQDStatus{Slot: slot, VMID: int(h.vmid), RingBase: uint64(h.baseHi)<<32 | uint64(h.baseLo),
		Doorbell:   h.doorbell & abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK >> abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT,
		DoorbellOn: h.doorbell&abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK != 0,
		Wptr:       uint64(h.wptrHi)<<32 | uint64(h.wptrLo), State: abi.HQD_STATE_IDLE}
	q := h.q.Load()
	if q == nil {
		return s
	}
	s.Active = !q.stopped.Load()
	s.Mapped = q.mapped
	s.VMID, s.RingBase, s.RingBytes = q.vmid, q.base, q.size*4
	if q.mapped {
		s.Doorbell, s.DoorbellOn = q.doorbellOff, q.doorbellEn
	}
	s.Rptr, s.Wptr, s.State = q.rptr.Load(), q.wptr.Load(), q.state.Load()
	s.Idle = q.idleAt.Load() != 0
	s.Error, s.ErrorAddr, s.ErrorInfo = q.errCode, q.errAddr, q.errInfo
	s.Fences = q.fences.Load()
	// Every path into these states notes its packet first, so the one noted is this stop's
	// (rptr may have moved on since: an IB's packet is consumed when the IB starts).
	if p := &q.stopPkt; p.valid && stoppedOnPacket(s.State) {
		s.Packet = append([]uint32(nil), p.dwords[:p.n]...)
		s.PacketDwords, s.PacketAddr, s.IBLevel = p.total, p.addr, p.level
	}
	return s
}

// stoppedOnPacket: the states in which a queue sits on one packet.
func stoppedOnPacket(state uint32) bool {
	switch state {
	case abi.HQD_STATE_WAITING, abi.HQD_STATE_HALTED, abi.HQD_STATE_BUSY_KERNEL:
		return true
	}
	return false
}

// notePacket copies the packet at the current stream's position out of the fetch buffer
// (what is in it of the packet: a fetch that failed leaves less, or nothing) for HQDStatus.
// Called by the queue goroutine where it stops on a packet; cheap, and never on the packet
// fast path.
func (q *queue) notePacket() {
	s := &q.streams[q.level]
	pos := s.pos
	p := stoppedPacket{level: q.level, addr: s.addr(pos), valid: true}
	if off := pos - s.bufPos; off < s.bufN {
		hdr := le32(s.buf[off*4:])
		p.total = 1
		if hdr>>abi.PM4_HEADER_TYPE__SHIFT == abi.PM4_TYPE3 {
			p.total = int(hdr&abi.PM4_HEADER_COUNT_MASK>>abi.PM4_HEADER_COUNT__SHIFT) + 2
		}
		p.n = int(min(uint64(p.total), s.bufN-off, MaxStatusPacketDwords))
		for i := range p.n {
			p.dwords[i] = le32(s.buf[(off+uint64(i))*4:])
		}
	}
	q.h.mu.Lock()
	q.stopPkt = p
	q.h.mu.Unlock()
}
