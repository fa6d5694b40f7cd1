package pm4

import "vgpu/abi"

// Shader is a shader dispatch's state as SET_SH_REG programs it (docs/shader.md): the
// program's GPU address (256-byte aligned) and length in instruction slots, the workgroup
// size, the stack bytes per work-item (0: the default), the first workgroup ids, and the
// kernel-argument pointer (COMPUTE_USER_DATA_0/1, R1 at entry).
type Shader struct {
	Program uint64
	Slots   uint32
	Threads [3]uint32
	Stack   uint32
	Start   [3]uint32
	Args    uint64
}

// Encode is the SET_SH_REG packets that program s.
func (s Shader) Encode() []uint32 {
	var out []uint32
	out = append(out, SetShReg(abi.SH_COMPUTE_PGM_LO, uint32(s.Program>>8), uint32(s.Program>>40)&0xFF)...)
	out = append(out, SetShReg(abi.SH_COMPUTE_PGM_RSRC1, s.Slots)...)
	out = append(out, SetShReg(abi.SH_COMPUTE_START_X, s.Start[0], s.Start[1], s.Start[2], s.Threads[0], s.Threads[1], s.Threads[2])...)
	out = append(out, SetShReg(abi.SH_COMPUTE_TMPRING_SIZE, s.Stack)...)
	return append(out, SetShReg(abi.SH_COMPUTE_USER_DATA_0, uint32(s.Args), uint32(s.Args>>32))...)
}

// SetBase sets DISPATCH_INDIRECT's base address.
func SetBase(addr uint64) []uint32 {
	return Packet(abi.PM4_IT_SET_BASE, abi.PM4_SET_BASE_INDEX_DISPATCH_INDIRECT, uint32(addr), uint32(addr>>32))
}

// DispatchIndirect dispatches the dimensions at the SET_BASE address plus off.
func DispatchIndirect(off uint32) []uint32 { return Packet(abi.PM4_IT_DISPATCH_INDIRECT, off, 1) }
