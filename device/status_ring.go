package device

import (
	"encoding/binary"
	"errors"
	"fmt"

	"vgpu/cp"
	"vgpu/engine"
	"vgpu/gpummu"
)

// A ring dump for live inspection (`vgpu status --ring SLOT`): the dwords a queue has yet to
// execute, read through the device without waiting for the client and without side effects.

// MaxRingDumpDwords bounds a dump: 16 KiB of packets is far more than a stuck queue's next
// few, and a status reply stays small.
const MaxRingDumpDwords = 4096

// Why a ring cannot be dumped.
var (
	ErrNoSuchSlot      = errors.New("no such queue slot")
	ErrSlotInactive    = errors.New("the slot has no active queue")
	ErrRingNotReadable = errors.New("the ring is not readable without waiting or faulting")
)

// RingDump is a slot's pending ring contents: Dwords are ring positions [Start, Start+len),
// from its rptr towards its wptr.
type RingDump struct {
	Slot       int      `json:"slot"`
	VMID       int      `json:"vmid"`
	Base       uint64   `json:"base"`
	SizeDwords uint64   `json:"size_dwords"`
	Rptr       uint64   `json:"rptr"` // monotonic dwords
	Wptr       uint64   `json:"wptr"`
	Start      uint64   `json:"start"` // monotonic position of Dwords[0] (= Rptr)
	Dwords     []uint32 `json:"dwords"`
	Truncated  bool     `json:"truncated,omitempty"` // more than MaxRingDumpDwords pending
}

// RingDump reads slot's ring from rptr to wptr (at most MaxRingDumpDwords). Only VMID-0 rings
// (the FB aperture, the GART) whose memory is directly reachable can be read: a process VMID
// would need a page walk, and message-served guest memory a DMA round trip, either of which
// could wait on the client; those are ErrRingNotReadable.
func (d *Device) RingDump(slot int) (RingDump, error) {
	if slot < 0 || slot >= cp.NumSlots {
		return RingDump{}, fmt.Errorf("slot %d: %w", slot, ErrNoSuchSlot)
	}
	h := d.gpu.cp.HQDStatus(slot)
	if !h.Active || h.RingBytes == 0 {
		return RingDump{}, fmt.Errorf("slot %d: %w", slot, ErrSlotInactive)
	}
	r := RingDump{Slot: slot, VMID: h.VMID, Base: h.RingBase, SizeDwords: h.RingBytes / 4, Rptr: h.Rptr, Wptr: h.Wptr, Start: h.Rptr}
	if h.VMID != 0 {
		return r, fmt.Errorf("slot %d: ring in VMID %d: %w", slot, h.VMID, ErrRingNotReadable)
	}
	n := uint64(0)
	if h.Wptr > h.Rptr {
		n = min(h.Wptr-h.Rptr, r.SizeDwords)
	}
	if n > MaxRingDumpDwords {
		n, r.Truncated = MaxRingDumpDwords, true
	}
	back := physBacking{d}
	r.Dwords = make([]uint32, 0, n)
	var b [4]byte
	var page engine.PhysAddr // the translation of the page of the previous dword
	pageVA := ^uint64(0)
	for i := uint64(0); i < n; i++ {
		va := r.Base + (r.Start+i)%r.SizeDwords*4 // dword-aligned: a dword never spans pages
		if va&^(gpummu.PageSize-1) != pageVA {
			pa, ok := d.gpu.mmu.Peek(va&^(gpummu.PageSize-1), back.ReadDirect)
			if !ok {
				return r, fmt.Errorf("slot %d: ring page at %#x: %w", slot, va, ErrRingNotReadable)
			}
			page, pageVA = pa, va&^(gpummu.PageSize-1)
		}
		if back.ReadDirect(page.Domain, page.Addr+va-pageVA, b[:]) != nil {
			return r, fmt.Errorf("slot %d: ring dword at %#x: %w", slot, va, ErrRingNotReadable)
		}
		r.Dwords = append(r.Dwords, binary.LittleEndian.Uint32(b[:]))
	}
	return r, nil
}
