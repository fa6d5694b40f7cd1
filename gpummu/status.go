package gpummu

import (
	"encoding/binary"

	"vgpu/abi"
	"vgpu/engine"
)

// Peek translates the VMID-0 GPU address va for live inspection (`vgpu status --ring`): the
// FB aperture, or the GART with its entry read through read, which must never wait (a direct
// path such as l2.DirectBacking's ReadDirect). Unlike an engine access it has no side effect:
// no TLB fill, no counter, no fault latched or logged. ok is false where va has no such
// translation (outside both apertures, GART off, entry invalid or not readable directly).
// The translation holds for va's page only.
func (m *MMU) Peek(va uint64, read func(d engine.Domain, addr uint64, p []byte) error) (pa engine.PhysAddr, ok bool) {
	if va >= vaLimit {
		return engine.PhysAddr{}, false
	}
	if m.inFB(va) {
		return engine.PhysAddr{Domain: engine.DomainVRAM, Addr: va - abi.GPU_FB_BASE}, true
	}
	g := m.view.Load().g
	page := va >> pageShift
	if g.empty || !g.enabled || !g.tableValid || page < g.startPage || page > g.endPage {
		return engine.PhysAddr{}, false
	}
	addr := g.tableAddr + (page-g.startPage)*abi.PTE_BYTES
	if g.tableDomain == engine.DomainVRAM && (addr >= m.vramSize || m.vramSize-addr < abi.PTE_BYTES) {
		return engine.PhysAddr{}, false
	}
	var buf [abi.PTE_BYTES]byte
	if read(g.tableDomain, addr, buf[:]) != nil {
		return engine.PhysAddr{}, false
	}
	pte := binary.LittleEndian.Uint64(buf[:])
	if pte&abi.PTE_VALID_MASK == 0 {
		return engine.PhysAddr{}, false
	}
	pa = engine.PhysAddr{Domain: engine.DomainVRAM, Addr: pte&abi.PTE_ADDRESS_MASK + va&pageMask}
	if pte&abi.PTE_SYSTEM_MASK != 0 {
		pa.Domain = engine.DomainSystem
	}
	return pa, true
}
