package gpuvm

import (
	"testing"

	"vgpu/abi"
)

// TestSaveRestoreState: every register of the block, each context and each engine reads back
// the same from a VM restored from a saved state, and the restore applies the write masks.
func TestSaveRestoreState(t *testing.T) {
	v := New(Config{VRAMSize: 1 << 30})
	for vmid := 1; vmid < NumVMIDs; vmid++ {
		for off := uint32(ctxCntl); off <= ctxEndHi; off += 4 {
			v.WriteContext(vmid, off, 0xFFFF_FF00|uint32(vmid)<<4|off)
		}
		v.WriteReg(regPASIDLUT0+4*uint32(vmid), 0x10000+uint32(vmid))
	}
	v.WriteReg(regDefaultLo, 0x1234)
	v.WriteReg(regDefaultHi, 0xFF)
	v.WriteReg(regStrictCntl, abi.REG_VM_STRICT_CNTL__ENABLE_MASK)
	v.WriteEngine(2, engRangeLo, 0xABC)
	v.WriteEngine(2, engSem, 1)
	s := v.SaveState()
	v2 := New(Config{VRAMSize: 1 << 30})
	v2.RestoreState(s)
	for vmid := range NumVMIDs {
		for off := uint32(ctxCntl); off <= ctxEndHi; off += 4 {
			if a, b := v.ReadContext(vmid, off), v2.ReadContext(vmid, off); a != b {
				t.Errorf("VMID %d context %#x: %#x restored, %#x saved", vmid, off, b, a)
			}
		}
	}
	for off := uint32(0); off < regPASIDLUTEnd+4; off += 4 {
		if a, b := v.ReadReg(off), v2.ReadReg(off); a != b {
			t.Errorf("VM register %#x: %#x restored, %#x saved", off, b, a)
		}
	}
	for e := range NumEngines {
		for _, off := range []uint32{engSem, engReq, engAck, engRangeLo, engRangeHi} {
			if a, b := v.ReadEngine(e, off), v2.ReadEngine(e, off); a != b {
				t.Errorf("engine %d %#x: %#x restored, %#x saved", e, off, b, a)
			}
		}
	}
	if v2.PASID(3) != 3 {
		t.Errorf("PASID(3) = %#x, want the masked 3", v2.PASID(3))
	}
	// Bits no write could set stay clear.
	s.Contexts[1].Cntl, s.DefaultHi = 0xFFFF_FFFF, 0xFFFF_FFFF
	v2.RestoreState(s)
	if got := v2.ReadContext(1, ctxCntl); got != cntlStored {
		t.Errorf("CNTL restored as %#x, want the stored bits %#x", got, uint32(cntlStored))
	}
	if got := v2.ReadReg(regDefaultHi); got != pageHiMask {
		t.Errorf("DEFAULT_HI restored as %#x", got)
	}
}
