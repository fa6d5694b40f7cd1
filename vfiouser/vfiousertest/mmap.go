package vfiousertest

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"vgpu/vfiouser"
)

// MappedArea is one mmapped window of a region; Offset is relative to the region start.
type MappedArea struct {
	Offset uint64
	Data   []byte
}

// Mapping is a region mmapped the way QEMU does it: every sparse area, or the whole region.
type Mapping struct {
	Info  RegionInfo
	Areas []MappedArea
}

// At returns the mapped bytes [off, off+n) of the region, or nil when they are not inside one
// mapped area.
func (m *Mapping) At(off, n uint64) []byte {
	for _, a := range m.Areas {
		if off >= a.Offset && off-a.Offset <= uint64(len(a.Data)) && n <= uint64(len(a.Data))-(off-a.Offset) {
			rel := off - a.Offset
			return a.Data[rel : rel+n]
		}
	}
	return nil
}

// Close unmaps every area and closes the region fd.
func (m *Mapping) Close() error {
	var errs []error
	for _, a := range m.Areas {
		errs = append(errs, unix.Munmap(a.Data))
	}
	m.Areas = nil
	if m.Info.File != nil {
		errs = append(errs, m.Info.File.Close())
	}
	return errors.Join(errs...)
}

// MmapRegion asks for the region's info and maps it through the fd that came with it.
func (c *Client) MmapRegion(index uint32) (*Mapping, error) {
	ri, err := c.RegionInfo(index)
	if err != nil {
		return nil, err
	}
	m := &Mapping{Info: ri}
	if ri.Flags&vfiouser.RegionFlagMmap == 0 || ri.File == nil {
		m.Close()
		return nil, fmt.Errorf("region %d is not mmap-able (flags %#x)", index, ri.Flags)
	}
	areas := ri.Sparse
	if len(areas) == 0 {
		areas = []vfiouser.SparseArea{{Offset: 0, Size: ri.Size}}
	}
	prot := 0
	if ri.Flags&vfiouser.RegionFlagRead != 0 {
		prot |= unix.PROT_READ
	}
	if ri.Flags&vfiouser.RegionFlagWrite != 0 {
		prot |= unix.PROT_WRITE
	}
	for _, a := range areas {
		b, err := mmapFile(ri.File, ri.Offset+a.Offset, a.Size, prot)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("region %d area %#x+%#x: %w", index, a.Offset, a.Size, err)
		}
		m.Areas = append(m.Areas, MappedArea{Offset: a.Offset, Data: b})
	}
	return m, nil
}

func mmapFile(f *os.File, off, size uint64, prot int) ([]byte, error) {
	if size == 0 || size > 1<<40 || off > 1<<62 {
		return nil, fmt.Errorf("bad mmap window %#x+%#x", off, size)
	}
	return unix.Mmap(int(f.Fd()), int64(off), int(size), prot, unix.MAP_SHARED)
}
