package cp_test

import (
	"fmt"
	"testing"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
)

// The test address space.
const (
	memSize    = 4 << 20
	reportAddr = 0x800   // rptr report
	pollAddr   = 0x900   // polled wptr
	ringBase   = 0x10000 // first ring; rings are ringStride apart
	ringStride = 0x8000
	ringQS     = 10 // 2048 dwords = 8 KiB
	dataBase   = 0x100000
	ibBase     = 0x80000
)

// scratch is the dword offset of REG_SCRATCH_i (UCONFIG offset 0x40+i).
func scratch(i uint32) uint32 { return abi.REG_SCRATCH_0/4 + i }

// scratchOff is REG_SCRATCH_0's offset in the UCONFIG space.
const scratchOff = abi.REG_SCRATCH_0/4 - abi.PM4_SPACE_UCONFIG_BASE

func queueConfig(slot int) cptest.QueueConfig {
	return cptest.QueueConfig{
		Base: ringBase + uint64(slot)*ringStride, QueueSize: ringQS,
		RptrReport: reportAddr + uint64(slot)*8, Doorbell: uint32(2 * slot), DoorbellEn: true,
	}
}

// start returns a rig with one active queue in slot.
func start(t testing.TB, slot int, cfg ...func(*cp.Config)) (*cptest.Rig, *cptest.Ring) {
	r := cptest.NewRig(t, memSize, cfg...)
	return r, r.StartQueue(slot, queueConfig(slot))
}

func hex(v uint64) string { return fmt.Sprintf("%#x", v) }

// wantIV checks one IV field by field.
func wantIV(t *testing.T, got, want engine.IV) {
	t.Helper()
	if got != want {
		t.Errorf("unexpected IV (-want +got):\n- %+v\n+ %+v", want, got)
	}
}

// haltIV is the IV a halt with code at addr (header info) raises from slot.
func haltIV(slot int, code uint32, addr uint64, info uint32) engine.IV {
	src := uint8(abi.IH_SRC_CP_BAD_OPCODE)
	switch code {
	case abi.CP_ERROR_RESERVED_BITS:
		src = abi.IH_SRC_CP_RESERVED_BITS
	case abi.CP_ERROR_TRANSLATION, abi.CP_ERROR_MEMORY, abi.CP_ERROR_BAD_REGISTER, abi.CP_ERROR_RING_CONFIG:
		src = abi.IH_SRC_CP_GPF
	}
	return engine.IV{Client: abi.IH_CLIENT_GRBM_CP, Source: src, RingID: cp.RingID(slot),
		Data: [4]uint32{code, uint32(addr), uint32(addr >> 32), info}}
}

// errorRegs reads ERROR_ADDR and ERROR_INFO.
func errorRegs(r *cptest.Rig, slot int) (uint64, uint32) {
	return uint64(r.ReadHQD(slot, abi.REG_HQD_ERROR_ADDR_HI))<<32 | uint64(r.ReadHQD(slot, abi.REG_HQD_ERROR_ADDR_LO)),
		r.ReadHQD(slot, abi.REG_HQD_ERROR_INFO)
}
