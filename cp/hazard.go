package cp

import (
	"vgpu/abi"
	"vgpu/compute"
	"vgpu/engine"
)

// The pipeline-hazard sanitizer's CP half (strict mode; docs/shader.md "Sanitizer"). A queue's
// dispatches run while it goes on with its packets; what orders a packet after a dispatch is
// the queue waiting for it (RELEASE_MEM, CS_PARTIAL_FLUSH, the end of the submitted work:
// waitShaders), after which the dispatch has ended, or a WAIT_REG_MEM that saw a value the
// dispatch wrote (its own fence: Run.Acquire). So a packet's data access is a hazard when it
// touches a line one of the queue's dispatches wrote while that dispatch is still in flight
// (compute.Run.Wrote). A dispatch started while others of the queue are in flight is checked
// by the compute units against them (compute.Dispatch.After).
//
// What is not checked: command fetch and the queue's ring bookkeeping (client CPF: the rptr
// report, the polled wptr), a WAIT_REG_MEM's own polls (a poll is a synchronisation, not a
// hazard), and other queues' dispatches (queues order each other with fences). With strict
// mode off, dispatches record nothing and a check is a loop over the queue's few in-flight
// runs finding none tracked.

// hazardCheck names the packet data access [va, va+n) in a's address space if an in-flight
// dispatch of the queue has written some of it: the first such dispatch, oldest first.
func (q *queue) hazardCheck(a engine.Access, va, n uint64, write bool) {
	if len(q.runs) == 0 || a.Client == abi.VM_CID_CPF {
		return
	}
	for _, f := range q.runs {
		at, size, ok := f.run.Wrote(a.VMID, va, n)
		if !ok {
			continue
		}
		kind := uint32(abi.SHADER_HAZARD_PACKET_READ)
		if write {
			kind = abi.SHADER_HAZARD_PACKET_WRITE
		}
		by, op := q.packetNow()
		q.c.compute.Report(compute.Hazard{Kind: kind, Slot: q.slot, VMID: a.VMID, Opcode: op, Addr: at, Size: size,
			By: by, Writer: f.run.Packet(), WriterRun: f.run.ID()})
		return
	}
}

// packetNow is the address and opcode of the packet being executed (a non-IB packet's
// position stays on it until it completes; its header is in the fetch buffer).
func (q *queue) packetNow() (addr uint64, op uint32) {
	s := &q.streams[q.level]
	addr = s.addr(s.pos)
	if off := s.pos - s.bufPos; off < s.bufN {
		op = le32(s.buf[off*4:]) & abi.PM4_HEADER_OPCODE_MASK >> abi.PM4_HEADER_OPCODE__SHIFT
	}
	return addr, op
}

// hazardAcquire is a satisfied WAIT_REG_MEM on memory: each dispatch of the queue that wrote
// the polled line has what it wrote so far ordered before the packets after the wait.
func (q *queue) hazardAcquire(vmid int, va uint64) {
	for _, f := range q.runs {
		f.run.Acquire(vmid, va)
	}
}

// hazardPeers is what a new dispatch is checked against (compute.Dispatch.After): the newest
// hazardPeersMax of the queue's dispatches in flight that record their writes, so that a
// work-item's check stays bounded however many dispatches a stream leaves in flight (older
// ones go unchecked: missed, never falsely named). nil with strict mode off.
func (q *queue) hazardPeers() []*compute.Run {
	var peers []*compute.Run
	for i := len(q.runs) - 1; i >= 0 && len(peers) < hazardPeersMax; i-- {
		if r := q.runs[i].run; r.Tracked() {
			select {
			case <-r.Done():
			default:
				peers = append(peers, r)
			}
		}
	}
	return peers
}

// hazardPeersMax bounds compute.Dispatch.After.
const hazardPeersMax = 16
