package drm

import (
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SyncobjCreate is DRM_IOCTL_SYNCOBJ_CREATE.
func (d *Device) SyncobjCreate(flags uint32) (uint32, error) {
	a := SyncobjCreate{Flags: flags}
	if err := d.ioctl("SYNCOBJ_CREATE", ioctlSyncobjCreate, unsafe.Pointer(&a)); err != nil {
		return 0, err
	}
	return a.Handle, nil
}

// SyncobjDestroy is DRM_IOCTL_SYNCOBJ_DESTROY.
func (d *Device) SyncobjDestroy(h uint32) error {
	a := SyncobjDestroy{Handle: h}
	return d.ioctl("SYNCOBJ_DESTROY", ioctlSyncobjDestroy, unsafe.Pointer(&a))
}

// SyncobjExport is SYNCOBJ_HANDLE_TO_FD: an fd another process can import.
func (d *Device) SyncobjExport(h uint32) (int, error) {
	a := SyncobjHandle{Handle: h}
	if err := d.ioctl("SYNCOBJ_HANDLE_TO_FD", ioctlSyncobjHandleToFD, unsafe.Pointer(&a)); err != nil {
		return -1, err
	}
	return int(a.Fd), nil
}

// SyncobjImport is SYNCOBJ_FD_TO_HANDLE.
func (d *Device) SyncobjImport(fd int) (uint32, error) {
	a := SyncobjHandle{Fd: int32(fd)}
	if err := d.ioctl("SYNCOBJ_FD_TO_HANDLE", ioctlSyncobjFDToHandle, unsafe.Pointer(&a)); err != nil {
		return 0, err
	}
	return a.Handle, nil
}

// SyncobjWait waits (all of handles) until timeout from now; flags add to WAIT_ALL. ETIME
// when it expires.
func (d *Device) SyncobjWait(handles []uint32, timeout time.Duration, flags uint32) error {
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		return err
	}
	var pn runtime.Pinner
	defer pn.Unpin()
	a := SyncobjWait{
		Handles:       userPtr(&pn, &handles[0]),
		Timeout_nsec:  now.Nano() + int64(timeout),
		Count_handles: uint32(len(handles)),
		Flags:         DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL | flags,
	}
	return d.ioctl("SYNCOBJ_WAIT", ioctlSyncobjWait, unsafe.Pointer(&a))
}

// SyncobjReset is SYNCOBJ_RESET of one syncobj (it holds no fence afterwards).
func (d *Device) SyncobjReset(h uint32) error {
	var pn runtime.Pinner
	defer pn.Unpin()
	hs := []uint32{h}
	a := SyncobjArray{Handles: userPtr(&pn, &hs[0]), Count_handles: 1}
	return d.ioctl("SYNCOBJ_RESET", ioctlSyncobjReset, unsafe.Pointer(&a))
}

// FenceStatus is the status of the syncobj's current fence, read through a sync file
// (SYNCOBJ_HANDLE_TO_FD with EXPORT_SYNC_FILE, then SYNC_IOC_FILE_INFO): 1 signalled, 0 still
// pending, a negative errno the error it completed with (-ETIME: the job timed out).
func (d *Device) FenceStatus(h uint32) (int32, error) {
	a := SyncobjHandle{Handle: h, Flags: DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE}
	if err := d.ioctl("SYNCOBJ_HANDLE_TO_FD(EXPORT_SYNC_FILE)", ioctlSyncobjHandleToFD, unsafe.Pointer(&a)); err != nil {
		return 0, err
	}
	defer unix.Close(int(a.Fd))
	var info SyncFileInfo // num_fences 0: only the status
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(a.Fd), ioctlSyncFileInfo, uintptr(unsafe.Pointer(&info))); e != 0 {
		return 0, &IoctlError{Op: "SYNC_IOC_FILE_INFO", Errno: e}
	}
	return info.Status, nil
}
