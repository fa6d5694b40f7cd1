package device

import "vgpu/abi"

// hdp is the HDP block: the host data path, the CPU's window to VRAM. vgpu's host path has no
// buffer to drain (BAR0 is the VRAM memfd itself), so a flush completes as it is requested;
// the handshakes (FLUSH_REQ → FLUSH_DONE bits, the flush count) behave as on AMD parts so a
// driver's flush sequence runs unchanged. Guarded by the device's register lock.
type hdp struct {
	done    uint32 // HDP_FLUSH_DONE
	flushes uint32 // HDP_FLUSHES
}

func (h *hdp) read(off uint32) uint32 {
	switch off + abi.BLOCK_HDP_BASE {
	case abi.REG_HDP_FLUSH_DONE:
		return h.done
	case abi.REG_HDP_FLUSHES:
		return h.flushes
	}
	return 0
}

func (h *hdp) write(off, v uint32) {
	switch off + abi.BLOCK_HDP_BASE {
	case abi.REG_HDP_MEM_FLUSH_CNTL:
		h.flushes++
	case abi.REG_HDP_FLUSH_REQ:
		h.done |= v
		h.flushes++
	}
}
