package cp

import (
	"fmt"

	"vgpu/abi"
)

// A slot MES mapped, in a snapshot: the queue's image as a preemption at this packet
// boundary would save it (the ring configuration, the pointers, the user data, the fence
// value), so RestoreState maps it again with Map and it continues with the packet at Rptr.
// Which queue of the scheduler's it is, the scheduler's tables say (mes.QueueRecord.Slot).

// saveMapped fills s for a mapped queue (h.mu held; the CP is paused). A queue that has
// stopped but that the scheduler has not taken off yet, or one not at a packet boundary
// (inside an IB, a DMA_DATA, with shader dispatches in flight), is ErrBusy: try again.
func (q *queue) saveMapped(s *SlotState) error {
	if q.stop != Running {
		return fmt.Errorf("%w: the mapped queue has stopped (%v) and is not yet taken off", ErrBusy, q.stop)
	}
	if why := q.notAtBoundary(); why != "" {
		return fmt.Errorf("%w: mapped queue %s", ErrBusy, why)
	}
	s.Mapped, s.State = true, q.state.Load()
	s.Rptr, s.Wptr, s.Reported, s.Fences = q.streams[0].pos, q.wptr.Load(), q.reported, q.fences.Load()
	s.UserData = q.userData
	s.MapVMID, s.MapControl, s.MapDoorbellControl = uint32(q.vmid), q.control, q.doorbellCtl
	s.MapDoorbellOffset, s.MapIBCount, s.MapPriority = q.fenceDoorbell, uint32(q.ibCount), q.prio
	s.MapBase, s.MapReportAddr, s.MapFenceAddr = q.base, q.reportAddr, q.fenceAddr
	s.MapCSABase, s.MapCSASize, s.MapFenceValue = q.csaBase, q.csaSize, q.fenceValue
	return nil
}

// MappedImage is the image a saved mapped slot is mapped again with.
func (s *SlotState) MappedImage() Image {
	img := Image{VMID: int(s.MapVMID & 0xFF), Base: s.MapBase, Control: s.MapControl, ReportAddr: s.MapReportAddr,
		DoorbellControl: s.MapDoorbellControl, FenceAddr: s.MapFenceAddr, DoorbellOffset: s.MapDoorbellOffset,
		Rptr: s.Rptr, Wptr: s.Wptr, Priority: s.MapPriority, CSABase: s.MapCSABase, CSASize: s.MapCSASize}
	img.Exec.IBCount, img.Exec.UserData, img.Exec.Fence = int(min(s.MapIBCount, 1<<20)), s.UserData, s.MapFenceValue
	return img
}

// restoreMapped maps a saved mapped slot again (the registers are restored; the scheduler
// is restored after the CP and finds the queue running). The image is checked as every Map
// checks one.
func (c *CP) restoreMapped(slot int, s *SlotState) error {
	switch {
	case s.ErrCode != 0 || s.Stopped:
		return badSlot("a mapped queue with error %d, stopped %v", s.ErrCode, s.Stopped)
	case s.State != abi.HQD_STATE_RUNNING && s.State != abi.HQD_STATE_WAITING && s.State != abi.HQD_STATE_IDLE:
		return badSlot("a mapped queue in state %d", s.State)
	case s.MapVMID > maxVMID:
		return badSlot("a mapped queue in VMID %d", s.MapVMID)
	}
	if err := c.Map(slot, s.MappedImage()); err != nil {
		return badSlot("%v", err)
	}
	if q := c.mappedQueue(slot); q != nil {
		q.fences.Add(s.Fences) // Add: the queue may already have signalled one
	}
	return nil
}
