package device

import (
	"encoding/binary"

	"vgpu/abi"
	"vgpu/bars"
)

// claims hands each register block of abi.Blocks to its owner. A block without an owner here
// is a construction error, so the register map and the device cannot drift apart.
func (d *Device) claims() []bars.Claim {
	owners := d.gpuClaims()
	owners["ID"] = blockOwner{Read: d.readID}
	owners["SCRATCH"] = storage(&d.scratch)
	owners["SELFTEST"] = blockOwner{Read: d.selftest.read, Write: d.selftest.write}
	owners["SHADER"] = blockOwner{Read: d.readShader}
	var claims []bars.Claim
	for _, b := range abi.Blocks {
		o, ok := owners[b.Name]
		c := bars.Claim{Read: o.Read, Write: o.Write}
		if !ok {
			// Leave Read/Write nil: NewRegisterFile still claims it, and the log says why
			// accesses do nothing.
			d.log.Warn("register block has no owner in this device", "block", b.Name)
		}
		c.Name, c.Offset, c.Size = b.Name, b.Base, b.Size
		claims = append(claims, c)
	}
	return append(claims, bars.Claim{
		Name: "MSIX", Offset: abi.REGS_MSIX_TABLE_OFFSET, Size: abi.REGS_SIZE - abi.REGS_MSIX_TABLE_OFFSET,
		Read: d.readMSIXPage, Write: d.writeMSIXPage,
	})
}

// storage is a block of plain read/write registers (SCRATCH, CONFIG): what software writes it
// reads back, nothing else happens. Guarded by the register lock like every block.
func storage(regs *[8]uint32) blockOwner {
	return blockOwner{
		Read:  func(off uint32) uint32 { return regs[off/4] },
		Write: func(off, v uint32) { regs[off/4] = v },
	}
}

// blockOwner handles one register block; offsets are relative to the block.
type blockOwner struct {
	Read  func(off uint32) uint32
	Write func(off, v uint32)
}

func (d *Device) readID(off uint32) uint32 {
	switch off + abi.BLOCK_ID_BASE {
	case abi.REG_ID_MAGIC:
		return abi.ID_MAGIC_VALUE
	case abi.REG_ID_VERSION:
		return abi.ID_VERSION_MAJOR<<abi.REG_ID_VERSION__MAJOR__SHIFT | abi.ID_VERSION_MINOR
	case abi.REG_ID_VRAM_SIZE_LO:
		return uint32(d.cfg.VRAMSize)
	case abi.REG_ID_VRAM_SIZE_HI:
		return uint32(d.cfg.VRAMSize >> 32)
	case abi.REG_ID_VRAM_WINDOW_LO:
		return uint32(d.cfg.VRAMWindow)
	case abi.REG_ID_VRAM_WINDOW_HI:
		return uint32(d.cfg.VRAMWindow >> 32)
	case abi.REG_ID_DOORBELL_MODE:
		if d.cfg.Doorbells == bars.DoorbellPoll {
			return abi.DOORBELL_MODE_POLL
		}
		return abi.DOORBELL_MODE_TRAP
	case abi.REG_ID_MSIX_VECTORS:
		return uint32(d.cfg.MSIXVectors)
	case abi.REG_ID_DOORBELL_COUNT:
		return uint32(d.doorbells.Count())
	case abi.REG_ID_COMPUTE_UNITS:
		return uint32(d.computeUnits())
	}
	return 0
}

// readShader is the SHADER block: what strict mode's sanitizer named (compute.Pool.Sanitizer).
func (d *Device) readShader(off uint32) uint32 {
	s := d.gpu.cus.Sanitizer()
	h, st := &s.Last, &s.LastStale
	switch off + abi.BLOCK_SHADER_BASE {
	case abi.REG_SHADER_HAZARDS:
		return uint32(s.Hazards)
	case abi.REG_SHADER_HAZARD_INFO:
		return h.Kind<<abi.REG_SHADER_HAZARD_INFO__KIND__SHIFT&abi.REG_SHADER_HAZARD_INFO__KIND_MASK |
			uint32(h.Slot)<<abi.REG_SHADER_HAZARD_INFO__SLOT__SHIFT&abi.REG_SHADER_HAZARD_INFO__SLOT_MASK |
			uint32(h.VMID)<<abi.REG_SHADER_HAZARD_INFO__VMID__SHIFT&abi.REG_SHADER_HAZARD_INFO__VMID_MASK |
			h.Opcode<<abi.REG_SHADER_HAZARD_INFO__OPCODE__SHIFT&abi.REG_SHADER_HAZARD_INFO__OPCODE_MASK
	case abi.REG_SHADER_HAZARD_ADDR_LO:
		return uint32(h.Addr)
	case abi.REG_SHADER_HAZARD_ADDR_HI:
		return uint32(h.Addr >> 32)
	case abi.REG_SHADER_HAZARD_SIZE:
		return uint32(min(h.Size, 0xFFFFFFFF))
	case abi.REG_SHADER_HAZARD_BY_LO:
		return uint32(h.By)
	case abi.REG_SHADER_HAZARD_BY_HI:
		return uint32(h.By >> 32)
	case abi.REG_SHADER_HAZARD_WRITER_LO:
		return uint32(h.Writer)
	case abi.REG_SHADER_HAZARD_WRITER_HI:
		return uint32(h.Writer >> 32)
	case abi.REG_SHADER_STALE_READS:
		return uint32(s.StaleReads)
	case abi.REG_SHADER_STALE_INFO:
		return uint32(st.Slot)<<abi.REG_SHADER_STALE_INFO__SLOT__SHIFT&abi.REG_SHADER_STALE_INFO__SLOT_MASK |
			uint32(st.VMID)<<abi.REG_SHADER_STALE_INFO__VMID__SHIFT&abi.REG_SHADER_STALE_INFO__VMID_MASK
	case abi.REG_SHADER_STALE_ADDR_LO:
		return uint32(st.Addr)
	case abi.REG_SHADER_STALE_ADDR_HI:
		return uint32(st.Addr >> 32)
	}
	return 0
}

// The MSI-X page: QEMU emulates the table itself and never forwards table accesses, but it
// forwards PBA reads; a trapped table access (another client) still gets table semantics: the
// Mask Bit of each Vector Control word is handed to the interrupt controller, which holds the
// vector's interrupts pending while it is set (irq.Controller.SetTableMask). The PBA is
// read-only.
const (
	msixPBAOffset     = abi.REGS_MSIX_PBA_OFFSET - abi.REGS_MSIX_TABLE_OFFSET
	msixEntrySize     = 16
	msixVectorControl = 12 // offset of Vector Control in an entry
	msixMaskBit       = 1  // Vector Control bit 0
)

func (d *Device) readMSIXPage(off uint32) uint32 {
	if off >= msixPBAOffset {
		var b [4]byte
		d.irqs.ReadPBA(uint64(off-msixPBAOffset), b[:])
		return binary.LittleEndian.Uint32(b[:])
	}
	if int(off)+4 <= len(d.msixTable) {
		return binary.LittleEndian.Uint32(d.msixTable[off:])
	}
	return 0
}

func (d *Device) writeMSIXPage(off, v uint32) {
	if off >= msixPBAOffset || int(off)+4 > len(d.msixTable) {
		return // the PBA is read-only; between the table's end and the PBA nothing is decoded
	}
	binary.LittleEndian.PutUint32(d.msixTable[off:], v)
	if off%msixEntrySize == msixVectorControl {
		// In range by construction: the table has one entry per controller vector.
		d.irqs.SetTableMask(int(off/msixEntrySize), v&msixMaskBit != 0)
	}
}

// resetMSIXTable puts the table in its power-on state: every vector masked. The mask bits go
// through writeMSIXPage, so the controller masks the vectors too.
func (d *Device) resetMSIXTable() {
	clear(d.msixTable)
	for v := 0; v < len(d.msixTable)/msixEntrySize; v++ {
		d.writeMSIXPage(uint32(v*msixEntrySize+msixVectorControl), msixMaskBit)
	}
}
