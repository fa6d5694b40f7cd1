package pcie

import (
	"errors"
	"fmt"
	"math/bits"
)

// ErrInvalidSpec is wrapped by every error New returns for a Spec it refuses.
var ErrInvalidSpec = errors.New("pcie: invalid spec")

// BAR describes one memory Base Address Register. There is no I/O flag: vgpu never has I/O
// BARs, so their COMMAND bit is hardwired to 0 as well.
type BAR struct {
	// Size is the aperture size in bytes: 0 for an absent BAR, otherwise a power of two of
	// at least 4 KiB (the PCI minimum is 16 bytes; vgpu keeps every BAR page-sized so QEMU
	// can mmap it). At most 2 GiB for a 32-bit BAR, at most 2^63 for a 64-bit one.
	Size uint64
	// Mem64 makes this a 64-bit BAR. Its upper half occupies the next slot, which must be
	// left absent (zero) in the Spec.
	Mem64 bool
	// Prefetchable sets the BAR's prefetchable bit (no read side effects).
	Prefetchable bool
}

// MSIX describes the MSI-X capability. Table and PBA live in memory BARs of the device;
// the offsets are from the start of the BAR and must be 8-byte aligned.
type MSIX struct {
	Vectors     int // 1..MSIXMaxVectors
	TableBAR    int
	TableOffset uint32
	PBABAR      int
	PBAOffset   uint32
}

// ResizableBAR describes the one BAR listed in the Resizable BAR extended capability.
//
// The capability advertises every power of two from Current up to Max and reports Current
// in the BAR Size field, which is read-only here. The reason: QEMU's vfio code rewrites
// this capability for the guest so that it lists the current size only and drops guest
// writes to the size field (a real resize would need the region to change size under
// QEMU, which vfio cannot do). The window size is therefore chosen when the server starts
// (a server flag), within what the capability advertises; Max is typically the size of the
// VRAM behind the window.
type ResizableBAR struct {
	BAR     int    // index of the (lower slot of the) BAR; its Size must equal Current
	Current uint64 // power of two, 1 MiB .. 512 GiB
	Max     uint64 // power of two, Current .. 2^63 (2 GiB for a 32-bit BAR)
}

// Spec is everything that differs between functions built by this package. The rest of the
// layout (header type 0, capability order, link and device capabilities) is fixed.
type Spec struct {
	VendorID, DeviceID             uint16
	SubsystemVendorID, SubsystemID uint16
	Revision                       uint8
	ClassCode                      uint32 // 24 bits: base<<16 | sub<<8 | prog-if; vgpu: 0x030200
	BARs                           [6]BAR
	MSIX                           MSIX
	ResizableBAR                   *ResizableBAR // nil: no extended capability at all
}

func specErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidSpec}, args...)...)
}

func isPow2(x uint64) bool { return x != 0 && x&(x-1) == 0 }

func log2(x uint64) int { return bits.Len64(x) - 1 }

const (
	minBARSize   = 4096
	max32BARSize = 1 << 31
	max64BARSize = 1 << 63
)

func (s *Spec) validate() error {
	switch s.VendorID {
	case 0x0000, 0xffff:
		// 0xffff is what a read of an empty slot returns; 0 is not a valid vendor either.
		return specErr("vendor ID %#04x is reserved", s.VendorID)
	}
	if s.ClassCode > 0xffffff {
		return specErr("class code %#x does not fit in 24 bits", s.ClassCode)
	}
	for i := range s.BARs {
		if err := s.validateBAR(i); err != nil {
			return err
		}
	}
	if err := s.validateMSIX(); err != nil {
		return err
	}
	if s.ResizableBAR != nil {
		if err := s.validateRebar(); err != nil {
			return err
		}
	}
	return nil
}

// upperHalf reports whether slot i holds the upper 32 bits of the 64-bit BAR at i-1.
func (s *Spec) upperHalf(i int) bool {
	return i > 0 && s.BARs[i-1].Mem64 && s.BARs[i-1].Size != 0
}

// present reports whether slot i is the (lower) register of a BAR.
func (s *Spec) present(i int) bool {
	return i >= 0 && i < numBARs && s.BARs[i].Size != 0
}

func (s *Spec) validateBAR(i int) error {
	b := s.BARs[i]
	if b.Size == 0 {
		if b.Mem64 || b.Prefetchable {
			return specErr("BAR%d: absent (size 0) but has type flags", i)
		}
		return nil
	}
	if s.upperHalf(i) {
		return specErr("BAR%d: slot holds the upper half of 64-bit BAR%d and must be absent", i, i-1)
	}
	if !isPow2(b.Size) {
		return specErr("BAR%d: size %#x is not a power of two", i, b.Size)
	}
	if b.Size < minBARSize {
		return specErr("BAR%d: size %#x is below the 4 KiB minimum", i, b.Size)
	}
	if b.Mem64 {
		if i == numBARs-1 {
			return specErr("BAR%d: a 64-bit BAR needs the next slot, and there is none", i)
		}
		if b.Size > max64BARSize {
			return specErr("BAR%d: size %#x too large", i, b.Size)
		}
	} else if b.Size > max32BARSize {
		return specErr("BAR%d: size %#x too large for a 32-bit BAR (max 2 GiB)", i, b.Size)
	}
	return nil
}

func (s *Spec) validateMSIX() error {
	m := s.MSIX
	if m.Vectors < 1 || m.Vectors > MSIXMaxVectors {
		return specErr("MSI-X: %d vectors, want 1..%d", m.Vectors, MSIXMaxVectors)
	}
	tableLen := uint64(m.Vectors) * msixEntrySize
	pbaLen := uint64((m.Vectors+63)/64) * 8
	check := func(what string, bar int, off uint32, n uint64) error {
		if bar < 0 || bar >= numBARs {
			return specErr("MSI-X %s: BAR index %d out of range", what, bar)
		}
		if !s.present(bar) {
			return specErr("MSI-X %s: BAR%d is absent", what, bar)
		}
		if off&msixBIRMask != 0 {
			return specErr("MSI-X %s: offset %#x is not 8-byte aligned", what, off)
		}
		if end := uint64(off) + n; end > s.BARs[bar].Size {
			return specErr("MSI-X %s: [%#x, %#x) exceeds BAR%d size %#x", what, off, end, bar, s.BARs[bar].Size)
		}
		return nil
	}
	if err := check("table", m.TableBAR, m.TableOffset, tableLen); err != nil {
		return err
	}
	if err := check("PBA", m.PBABAR, m.PBAOffset, pbaLen); err != nil {
		return err
	}
	if m.TableBAR == m.PBABAR {
		t0, t1 := uint64(m.TableOffset), uint64(m.TableOffset)+tableLen
		p0, p1 := uint64(m.PBAOffset), uint64(m.PBAOffset)+pbaLen
		if t0 < p1 && p0 < t1 {
			return specErr("MSI-X: table [%#x, %#x) and PBA [%#x, %#x) overlap", t0, t1, p0, p1)
		}
	}
	return nil
}

func (s *Spec) validateRebar() error {
	r := s.ResizableBAR
	if r.BAR < 0 || r.BAR >= numBARs || !s.present(r.BAR) {
		return specErr("resizable BAR: BAR%d is absent", r.BAR)
	}
	b := s.BARs[r.BAR]
	if !isPow2(r.Current) || r.Current < rebarMinSize || r.Current > 1<<rebarCurrentMaxLog2 {
		return specErr("resizable BAR: current size %#x must be a power of two in 1 MiB..512 GiB", r.Current)
	}
	if !isPow2(r.Max) || r.Max < r.Current {
		return specErr("resizable BAR: max size %#x must be a power of two >= current %#x", r.Max, r.Current)
	}
	if !b.Mem64 && r.Max > max32BARSize {
		return specErr("resizable BAR: max size %#x too large for 32-bit BAR%d", r.Max, r.BAR)
	}
	if b.Size != r.Current {
		return specErr("resizable BAR: current size %#x differs from BAR%d size %#x", r.Current, r.BAR, b.Size)
	}
	return nil
}
