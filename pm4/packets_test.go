package pm4

import (
	"slices"
	"testing"
)

// TestEncoders pins each encoder to the dwords AMD's layout gives, written out by hand from
// the field positions (type-3 header: TYPE [31:30], COUNT [29:16], IT_OPCODE [15:8]).
func TestEncoders(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want []uint32
	}{
		{"header of NOP, 1 payload dword", []uint32{Header(0x10, 1)}, []uint32{0xC0001000}},
		{"one-dword NOP", Nop(1), []uint32{0xFFFF1000}},
		{"3-dword NOP", Nop(3), []uint32{0xC0011000, 0, 0}},
		{"WRITE_DATA to memory, confirmed", WriteMem(0x1_2345_6780, 7, 8),
			[]uint32{0xC0043700, 5<<8 | 1<<20, 0x23456780, 1, 7, 8}},
		{"WRITE_DATA to a register", WriteReg(0x40, 9), []uint32{0xC0033700, 0, 0x40, 0, 9}},
		{"PROTECTED_FENCE_SIGNAL", ProtectedFenceSignal(), []uint32{0xC000D000, 0}},
		{"WAIT_REG_MEM ==, memory, bypass", WaitMem(0x1000, 5),
			[]uint32{0xC0053C00, 3 | 1<<4 | 3<<25, 0x1000, 0, 5, 0xFFFFFFFF, 4}},
		{"WAIT_REG_MEM64 >=, memory, bypass", WaitFence64(0x7_0000_1008, 0x1_0000_0002),
			[]uint32{0xC0079300, 5 | 1<<4 | 3<<25, 0x00001008, 7, 2, 1, 0xFFFFFFFF, 0xFFFFFFFF, 4}},
		{"WAIT_REG_MEM64 <, cached", WaitRegMem64{Function: FuncLT, Addr: 0x10, Ref: 3, Mask: 0xF, Interval: 10}.Encode(),
			[]uint32{0xC0079300, 1 | 1<<4, 0x10, 0, 3, 0, 0xF, 0, 10}},
		{"INDIRECT_BUFFER, VMID 3", IndirectBuffer{Addr: 0x2_0000_0100, Size: 16, VMID: 3}.Encode(),
			[]uint32{0xC0023F00, 0x100, 2, 16 | 1<<23 | 3<<24}},
		{"RELEASE_MEM fence with interrupt", Fence(0x3000, 9, 0x55, true),
			[]uint32{0xC0064900, 0x14 | 5<<8 | FenceGCR | 3<<25, 2<<24 | 1<<29, 0x3000, 0, 9, 0, 0x55}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %#x, want %#x", c.name, c.got, c.want)
		}
	}
}
