package cptest

import (
	"vgpu/abi"
	"vgpu/pm4"
)

// HQDReg is the register-file dword offset of HQD register off (a REG_HQD_* offset) of slot,
// as a packet names it.
func HQDReg(slot int, off uint32) uint32 {
	return (abi.BLOCK_HQD_BASE + uint32(slot)*abi.BLOCK_HQD_STRIDE + off) / 4
}

// SelfKick lays out a ring that keeps its queue busy forever, the way a hostile guest would:
// each lap adds the ring size to a counter in memory (the INCREMENT kernel) and copies the
// counter into the queue's own HQD_PQ_WPTR_LO through the register file, so the queue has
// one more lap of work whenever it finishes one. extra packets (e.g. a DMA_DATA) run in
// every lap. The register writes must reach the CP (Rig.RouteCPBlocks). counter is the
// counter's GPU address (a dword); the ring must be empty (wptr 0). Kick starts it.
func (r *Ring) SelfKick(counter uint64, extra ...[]uint32) {
	r.Rig.Mem.Store32(counter, uint32(r.Size))
	r.Emit(extra...)
	r.Emit(pm4.Kernel(abi.KERNEL_INCREMENT, counter, 0, 0), pm4.DispatchDirect(uint32(r.Size), 1, 1))
	r.CopyData(pm4.CopyData{SrcSel: abi.PM4_COPY_DATA_SEL_TC_L2, DstSel: abi.PM4_COPY_DATA_SEL_REG,
		Src: counter, Dst: uint64(HQDReg(r.Slot, abi.REG_HQD_PQ_WPTR_LO))})
	if rest := int(r.Size - r.Wptr()); rest > 0 {
		r.Nop(rest)
	}
	if r.Wptr() != r.Size {
		panic("cptest: SelfKick: the lap does not fit the ring")
	}
}
