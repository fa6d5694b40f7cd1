package device

import (
	"testing"

	"vgpu/abi"
	"vgpu/compute"
)

// The SHADER block reads the compute units' sanitizer record field by field; a device reset
// clears it.
func TestShaderSanitizerRegisters(t *testing.T) {
	r := newRig(t)
	r.enable(false)
	if v := r.reg(abi.REG_SHADER_HAZARDS); v != 0 {
		t.Fatalf("SHADER_HAZARDS %d at power-on", v)
	}
	h := compute.Hazard{Kind: abi.SHADER_HAZARD_PACKET_WRITE, Slot: 9, VMID: 3, Opcode: abi.PM4_IT_WRITE_DATA,
		Addr: 0x1234_5678_9ABC, Size: 12, By: 0x10_0000_0040, Writer: 0x10_0000_0010}
	r.dev.gpu.cus.Report(h) // strict mode off: not reported
	if v := r.reg(abi.REG_SHADER_HAZARDS); v != 0 {
		t.Fatalf("a hazard was counted with strict mode off")
	}
	r.setReg(abi.REG_L2_CNTL, abi.REG_L2_CNTL__STRICT_MASK)
	r.dev.gpu.cus.Report(h)
	for _, tc := range []struct {
		reg  uint32
		want uint32
	}{
		{abi.REG_SHADER_HAZARDS, 1},
		{abi.REG_SHADER_HAZARD_INFO, abi.SHADER_HAZARD_PACKET_WRITE | 9<<abi.REG_SHADER_HAZARD_INFO__SLOT__SHIFT |
			3<<abi.REG_SHADER_HAZARD_INFO__VMID__SHIFT | abi.PM4_IT_WRITE_DATA<<abi.REG_SHADER_HAZARD_INFO__OPCODE__SHIFT},
		{abi.REG_SHADER_HAZARD_ADDR_LO, 0x5678_9ABC},
		{abi.REG_SHADER_HAZARD_ADDR_HI, 0x1234},
		{abi.REG_SHADER_HAZARD_SIZE, 12},
		{abi.REG_SHADER_HAZARD_BY_LO, 0x40},
		{abi.REG_SHADER_HAZARD_BY_HI, 0x10},
		{abi.REG_SHADER_HAZARD_WRITER_LO, 0x10},
		{abi.REG_SHADER_HAZARD_WRITER_HI, 0x10},
		{abi.REG_SHADER_STALE_READS, 0},
	} {
		if got := r.reg(tc.reg); got != tc.want {
			t.Errorf("register %#x = %#x, want %#x", tc.reg, got, tc.want)
		}
	}
	r.dev.gpu.cus.Reset(0)
	if v := r.reg(abi.REG_SHADER_HAZARDS); v != 0 {
		t.Errorf("SHADER_HAZARDS %d after a reset of the compute units", v)
	}
}
