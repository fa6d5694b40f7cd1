package drm

import (
	"runtime"
	"unsafe"
)

// userq is the ioctl's union: the in half, which the kernel overwrites with the out half.
type userq [sizeofUserq]byte

// Userq runs DRM_IOCTL_VGPU_USERQ with in and returns the out half.
func (d *Device) Userq(in UserqIn) (UserqOut, error) {
	var u userq
	*(*UserqIn)(unsafe.Pointer(&u)) = in
	err := d.ioctl(userqOpName(in.Op), ioctlVgpuUserq, unsafe.Pointer(&u))
	return *(*UserqOut)(unsafe.Pointer(&u)), err
}

func userqOpName(op uint32) string {
	switch op {
	case VGPU_USERQ_OP_CREATE:
		return "USERQ CREATE"
	case VGPU_USERQ_OP_FREE:
		return "USERQ FREE"
	case VGPU_USERQ_OP_QUERY_STATUS:
		return "USERQ QUERY_STATUS"
	}
	return "USERQ"
}

// FreeQueue is USERQ FREE.
func (d *Device) FreeQueue(id uint32) error {
	_, err := d.Userq(UserqIn{Op: VGPU_USERQ_OP_FREE, Queue_id: id})
	return err
}

// QueryStatus is USERQ QUERY_STATUS: VGPU_USERQ_QUERY_STATUS_FLAGS_*.
func (d *Device) QueryStatus(id uint32) (uint32, error) {
	out, err := d.Userq(UserqIn{Op: VGPU_USERQ_OP_QUERY_STATUS, Queue_id: id})
	return out.Status_flags, err
}

// Signal is USERQ_SIGNAL: a fence at the queue's current wptr replaces the fence of each
// syncobj (and joins the listed BOs' reservations as a write).
func (d *Device) Signal(queue uint32, syncobjs []uint32, writeBOs []uint32) error {
	var pn runtime.Pinner
	defer pn.Unpin()
	a := UserqSignal{Queue_id: queue, Num_syncobj_handles: uint64(len(syncobjs)), Num_bo_write_handles: uint32(len(writeBOs))}
	if len(syncobjs) > 0 {
		a.Syncobj_handles = userPtr(&pn, &syncobjs[0])
	}
	if len(writeBOs) > 0 {
		a.Bo_write_handles = userPtr(&pn, &writeBOs[0])
	}
	return d.ioctl("USERQ_SIGNAL", ioctlVgpuUserqSignal, unsafe.Pointer(&a))
}

// Wait is USERQ_WAIT on syncobjs for queue: first the count, then the {va, value} pairs the
// queue must wait for in its own ring (kernel fences are waited inside the ioctl).
func (d *Device) Wait(queue uint32, syncobjs []uint32) ([]UserqFenceInfo, error) {
	var pn runtime.Pinner
	defer pn.Unpin()
	a := UserqWait{Waitq_id: queue, Num_syncobj_handles: uint32(len(syncobjs))}
	if len(syncobjs) > 0 {
		a.Syncobj_handles = userPtr(&pn, &syncobjs[0])
	}
	if err := d.ioctl("USERQ_WAIT (count)", ioctlVgpuUserqWait, unsafe.Pointer(&a)); err != nil {
		return nil, err
	}
	if a.Num_fences == 0 {
		return nil, nil
	}
	out := make([]UserqFenceInfo, a.Num_fences)
	a.Out_fences = userPtr(&pn, &out[0])
	if err := d.ioctl("USERQ_WAIT", ioctlVgpuUserqWait, unsafe.Pointer(&a)); err != nil {
		return nil, err
	}
	return out[:a.Num_fences], nil
}

// Submit is SUBMIT: a job on the driver's kernel queue.
func (d *Device) Submit(s *Submit) error {
	return d.ioctl("SUBMIT", ioctlVgpuSubmit, unsafe.Pointer(s))
}
