package drm

import "fmt"

// Buffer is a BO mapped into the file's GPU VM at VA (and, when CPU-visible, into this
// process).
type Buffer struct {
	*BO
	VA      uint64
	VASize  uint64
	vmFlags uint32
}

// AllocVA hands out size bytes (a multiple of 4 KiB) of the file's GPU VA range, aligned to
// align (a power of two ≥ 4 KiB), from the bottom: the first 64 KiB are skipped (VA 0 is never
// mappable) and the top stays free for the driver's fence pages.
func (d *Device) AllocVA(size, align uint64) (uint64, error) {
	if align < 4096 {
		align = 4096
	}
	if d.nextVA == 0 {
		d.nextVA = max(d.Info.Va_start, 1<<16)
	}
	va := (d.nextVA + align - 1) &^ (align - 1)
	if va+size > d.Info.Va_end-(64<<20) || va+size < va {
		return 0, fmt.Errorf("GPU VA range exhausted: %#x bytes at %#x, range [%#x, %#x)", size, va, d.Info.Va_start, d.Info.Va_end)
	}
	d.nextVA = va + size
	return va, nil
}

// NewBuffer creates a BO of size bytes in domain, maps it into the GPU VM (vmFlags, VA aligned
// to align) and, when cpu is set, into this process.
func (d *Device) NewBuffer(size uint64, domain, flags, vmFlags uint32, align uint64, cpu bool) (*Buffer, error) {
	bo, err := d.CreateBO(size, domain, flags)
	if err != nil {
		return nil, err
	}
	b := &Buffer{BO: bo, vmFlags: vmFlags}
	if cpu {
		if err := bo.Mmap(); err != nil {
			bo.Close()
			return nil, err
		}
	}
	va, err := d.AllocVA(bo.Size, align)
	if err == nil {
		err = d.MapVA(bo.Handle, va, 0, bo.Size, vmFlags)
	}
	if err != nil {
		bo.Close()
		return nil, err
	}
	b.VA, b.VASize = va, bo.Size
	return b, nil
}

// Free unmaps the buffer from the GPU VM and closes the BO.
func (b *Buffer) Free() error {
	var err error
	if b.VASize != 0 {
		err = b.d.UnmapVA(b.Handle, b.VA, b.VASize)
		b.VASize = 0
	}
	if e := b.Close(); err == nil {
		err = e
	}
	return err
}
