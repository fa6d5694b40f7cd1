package drm

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RenderNode is the driver's only node.
const RenderNode = "/dev/dri/renderD128"

// Device is one open file of the render node: one GPU VM, its BOs, queues and syncobjs.
type Device struct {
	FD   int
	Info Info

	nextVA    uint64     // AllocVA's bump pointer
	doorbells *Doorbells // the doorbell page user queues share (NewQueue creates it)
	mapped    map[*BO]struct{}
}

// Open opens path (RenderNode), checks the driver's name and reads INFO.
func Open(path string) (*Device, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	d := &Device{FD: fd}
	name, err := d.DriverName()
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	if name != "vgpu" {
		unix.Close(fd)
		return nil, fmt.Errorf("%s is driven by %q, not vgpu", path, name)
	}
	if err := d.ioctl("INFO", ioctlVgpuInfo, unsafe.Pointer(&d.Info)); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return d, nil
}

// Close unmaps every BO still mapped into this process, then closes the file: the driver
// frees its queues, VM and (once idle) BOs. (A CPU mapping holds the DRM file open: without
// the munmaps closing the fd would release nothing.)
func (d *Device) Close() error {
	if d.FD < 0 {
		return nil
	}
	for b := range d.mapped {
		b.munmap()
	}
	err := unix.Close(d.FD)
	d.FD = -1
	return err
}

// IoctlError is a failed ioctl: which one and the errno the kernel returned.
type IoctlError struct {
	Op    string
	Errno unix.Errno
}

func (e *IoctlError) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.Op, unix.ErrnoName(e.Errno), e.Errno.Error())
}

func (e *IoctlError) Unwrap() error { return e.Errno }

// Errno is the errno of err (0 if it is not an ioctl failure).
func Errno(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// ioctl runs one ioctl, restarting it when a signal interrupts it (as libdrm's drmIoctl).
func (d *Device) ioctl(op string, code uintptr, arg unsafe.Pointer) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(d.FD), code, uintptr(arg))
		if e == unix.EINTR || e == unix.EAGAIN {
			continue
		}
		if e != 0 {
			return &IoctlError{Op: op, Errno: e}
		}
		return nil
	}
}

// DriverName is DRM_IOCTL_VERSION's name.
func (d *Device) DriverName() (string, error) {
	var v Version
	if err := d.ioctl("VERSION", ioctlVersion, unsafe.Pointer(&v)); err != nil {
		return "", err
	}
	if v.Name_len == 0 || v.Name_len > 64 {
		return "", fmt.Errorf("VERSION: driver name of %d bytes", v.Name_len)
	}
	buf := make([]byte, v.Name_len)
	v.Name = (*int8)(unsafe.Pointer(&buf[0]))
	v.Date_len, v.Desc_len = 0, 0
	if err := d.ioctl("VERSION", ioctlVersion, unsafe.Pointer(&v)); err != nil {
		return "", err
	}
	return string(buf[:min(int(v.Name_len), len(buf))]), nil
}
