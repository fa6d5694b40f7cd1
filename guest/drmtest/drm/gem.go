package drm

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BO is a GEM object of the Device, with its CPU mapping once Mmap succeeded.
type BO struct {
	d      *Device
	Handle uint32
	Size   uint64
	Domain uint32
	Mem    []byte // the CPU mapping (nil until Mmap)
}

// CreateBO is GEM_CREATE.
func (d *Device) CreateBO(size uint64, domain, flags uint32) (*BO, error) {
	a := GemCreate{Size: size, Domain: domain, Flags: flags}
	if err := d.ioctl("GEM_CREATE", ioctlVgpuGemCreate, unsafe.Pointer(&a)); err != nil {
		return nil, err
	}
	return &BO{d: d, Handle: a.Handle, Size: (size + 4095) &^ 4095, Domain: domain}, nil
}

// MmapOffset is GEM_MMAP: the offset to mmap(2) the BO at on the render node.
func (d *Device) MmapOffset(handle uint32) (uint64, error) {
	a := GemMmap{Handle: handle}
	if err := d.ioctl("GEM_MMAP", ioctlVgpuGemMmap, unsafe.Pointer(&a)); err != nil {
		return 0, err
	}
	return a.Offset, nil
}

// Mmap maps the whole BO read-write (GEM_MMAP, then mmap(2) of the node).
func (b *BO) Mmap() error {
	if b.Mem != nil {
		return nil
	}
	off, err := b.d.MmapOffset(b.Handle)
	if err != nil {
		return err
	}
	m, err := unix.Mmap(b.d.FD, int64(off), int(b.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap of BO %d (%d bytes at offset %#x): %w", b.Handle, b.Size, off, err)
	}
	b.Mem = m
	if b.d.mapped == nil {
		b.d.mapped = map[*BO]struct{}{}
	}
	b.d.mapped[b] = struct{}{}
	return nil
}

func (b *BO) munmap() {
	if b.Mem != nil {
		unix.Munmap(b.Mem)
		b.Mem = nil
		delete(b.d.mapped, b)
	}
}

// Close unmaps the BO and closes its handle (DRM_IOCTL_GEM_CLOSE).
func (b *BO) Close() error {
	b.munmap()
	return b.d.CloseHandle(b.Handle)
}

// CloseHandle is DRM_IOCTL_GEM_CLOSE.
func (d *Device) CloseHandle(handle uint32) error {
	a := GemClose{Handle: handle}
	return d.ioctl("GEM_CLOSE", ioctlGemClose, unsafe.Pointer(&a))
}

// WaitIdle is GEM_WAIT_IDLE with a relative timeout.
func (d *Device) WaitIdle(handle uint32, timeoutNS int64) error {
	a := GemWaitIdle{Handle: handle, Timeout_ns: timeoutNS}
	return d.ioctl("GEM_WAIT_IDLE", ioctlVgpuGemWaitIdle, unsafe.Pointer(&a))
}

// U64 is the 64-bit word at byte offset off of the CPU mapping (for atomic access).
func (b *BO) U64(off uint64) *uint64 { return (*uint64)(unsafe.Pointer(&b.Mem[off])) }

// U32 is the dword at byte offset off of the CPU mapping.
func (b *BO) U32(off uint64) *uint32 { return (*uint32)(unsafe.Pointer(&b.Mem[off])) }

// GemVA runs GEM_VA with a as given (tests use it to send invalid input).
func (d *Device) GemVA(a *GemVA) error {
	return d.ioctl("GEM_VA", ioctlVgpuGemVA, unsafe.Pointer(a))
}

// MapVA maps size bytes of the BO from off at va in the file's GPU VM.
func (d *Device) MapVA(handle uint32, va, off, size uint64, flags uint32) error {
	return d.GemVA(&GemVA{Handle: handle, Op: VGPU_VA_OP_MAP, Flags: flags, Va: va, Offset_in_bo: off, Size: size})
}

// UnmapVA removes the mapping at va of size bytes.
func (d *Device) UnmapVA(handle uint32, va, size uint64) error {
	return d.GemVA(&GemVA{Handle: handle, Op: VGPU_VA_OP_UNMAP, Va: va, Size: size})
}

// RW is read-write GPU access; RWX adds execute (rings, IBs).
const (
	RW  = VGPU_VM_PAGE_READABLE | VGPU_VM_PAGE_WRITEABLE
	RWX = RW | VGPU_VM_PAGE_EXECUTABLE
)
