package device

import (
	"fmt"
	"io"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/mes"
)

// The scheduler's section (secMES) is variable-length: mes.State.MarshalBinary, decoded by
// mes.DecodeState through the section's bytes only. The slots the scheduler mapped are in the
// CP's section (cp.SlotState.Mapped); checkMESSlots makes the two agree before anything is
// applied.

func writeMESSection(sw *snapWriter, s *mes.State) {
	b, err := s.MarshalBinary()
	if err != nil && sw.err == nil {
		sw.err = err
	}
	sw.put(secMES)
	sw.put(uint64(len(b)))
	sw.raw(b)
}

// sectionReader reads the current section's bytes and no more.
type sectionReader struct{ s *snapReader }

func (r sectionReader) Read(p []byte) (int, error) {
	if r.s.left == 0 {
		return 0, io.EOF
	}
	p = p[:min(uint64(len(p)), r.s.left)]
	if err := r.s.bytes(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func readMES(sr *snapReader) (mes.State, error) {
	if err := sr.next(secMES, mes.MaxStateBytes); err != nil {
		return mes.State{}, err
	}
	s, err := mes.DecodeState(sectionReader{sr})
	if err != nil {
		return mes.State{}, fmt.Errorf("%w: %w", ErrSnapshotCorrupt, err)
	}
	return s, nil
}

// checkMESSlots: every slot the CP saved as mapped is the scheduler's and holds the queue its
// tables place there (same doorbell, its process's VMID), and every queue the tables place
// in a slot is there; no slot holds two queues (mes checks that too).
func checkMESSlots(m *mes.State, c *cp.State) error {
	t := &m.Tables
	var occupant [cp.NumSlots]*mes.QueueRecord
	for i := range t.Queues {
		q := &t.Queues[i]
		if q.Slot < 0 {
			continue
		}
		if q.Slot >= cp.NumSlots || occupant[q.Slot] != nil {
			return corrupt("MES queue %#x: slot %d out of range or held twice", q.Doorbell, q.Slot)
		}
		occupant[q.Slot] = q
	}
	for slot := range c.Slots {
		s, q := &c.Slots[slot], occupant[slot]
		switch {
		case s.Mapped && (!m.Running.Active || m.Running.Owned&(1<<slot) == 0):
			return corrupt("slot %d: a mapped queue in a slot the scheduler does not own (%#x)", slot, m.Running.Owned)
		case s.Mapped != (q != nil):
			return corrupt("slot %d: mapped %v in the CP, a queue of the scheduler's there %v", slot, s.Mapped, q != nil)
		case q == nil:
			continue
		}
		img := s.MappedImage()
		db := img.DoorbellControl & abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK >> abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT
		if db != q.Doorbell || q.Gang >= uint32(len(t.Gangs)) || t.Gangs[q.Gang].Proc >= uint32(len(t.Procs)) ||
			uint32(img.VMID) != t.Procs[t.Gangs[q.Gang].Proc].VMID {
			return corrupt("slot %d: the CP's queue (doorbell %#x, VMID %d) is not the scheduler's queue %#x there", slot, db, img.VMID, q.Doorbell)
		}
	}
	return nil
}
