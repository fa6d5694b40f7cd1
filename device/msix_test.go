package device

import (
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/vfiouser/vfiousertest"
)

// vectorControl is the register offset of vector v's Vector Control word in the MSI-X table.
func vectorControl(v int) uint32 {
	return abi.REGS_MSIX_TABLE_OFFSET + uint32(v)*msixEntrySize + msixVectorControl
}

// TestMSIXTableMaskRegisterPath drives the trapped MSI-X table as a client that does not emulate
// it would: Mask Bits written through BAR5 hold interrupts in the PBA, unmasking delivers them,
// the PBA is read-only, and a device reset masks every vector again.
func TestMSIXTableMaskRegisterPath(t *testing.T) {
	r := newRig(t)
	r.enable(true)
	fds := r.enableMSIX()
	raise := func(v int) { r.setReg(abi.REG_SELFTEST_IRQ, uint32(v)) }
	got := func(v int) uint64 {
		n, _ := vfiousertest.WaitIRQ(fds[v], 100*time.Millisecond)
		return n
	}
	for v := range fds {
		if m := r.reg(vectorControl(v)); m != msixMaskBit {
			t.Fatalf("vector %d Vector Control after power-on = %#x, want masked", v, m)
		}
	}
	// QEMU never writes the table: its power-on mask bits do not hold interrupts back.
	raise(3)
	if n := got(3); n != 1 {
		t.Fatalf("vector 3 with the table unused: %d interrupts, want 1", n)
	}

	r.setReg(vectorControl(5), 0) // the client uses the table from now on
	raise(3)
	raise(5)
	if n3, n5 := got(3), got(5); n3 != 0 || n5 != 1 {
		t.Errorf("masked vector 3 got %d, unmasked vector 5 got %d; want 0 and 1", n3, n5)
	}
	if pba := r.reg(abi.REGS_MSIX_PBA_OFFSET); pba != 1<<3 {
		t.Errorf("PBA = %#x, want vector 3 pending", pba)
	}
	r.setReg(abi.REGS_MSIX_PBA_OFFSET, 0xFFFF_FFFF) // read-only
	if pba := r.reg(abi.REGS_MSIX_PBA_OFFSET); pba != 1<<3 {
		t.Errorf("PBA after a write = %#x, want it unchanged", pba)
	}
	if m := r.reg(vectorControl(5)); m != 0 {
		t.Errorf("vector 5 Vector Control reads %#x, want 0", m)
	}
	r.setReg(vectorControl(3), 0)
	if n := got(3); n != 1 {
		t.Errorf("unmasking vector 3 delivered %d interrupts, want its pending one", n)
	}
	if pba := r.reg(abi.REGS_MSIX_PBA_OFFSET); pba != 0 {
		t.Errorf("PBA after the unmask = %#x, want 0", pba)
	}
	r.setReg(vectorControl(3), msixMaskBit|0x10) // Mask Bit with another bit: still masked
	raise(3)
	if n := got(3); n != 0 {
		t.Errorf("re-masked vector 3 got %d interrupts", n)
	}

	if err := r.c.Reset(); err != nil {
		t.Fatal(err)
	}
	if st := r.dev.Diagnostics().IRQ; st.TableMasked != len(fds) || st.Pending != 0 {
		t.Errorf("after reset: %d vectors masked in the table, %d pending; want %d and 0", st.TableMasked, st.Pending, len(fds))
	}
	r.enable(true) // the reset turned Memory Space off
	for v := range fds {
		if m := r.reg(vectorControl(v)); m != msixMaskBit {
			t.Errorf("vector %d Vector Control after reset = %#x, want masked", v, m)
		}
	}
	fds = r.enableMSIX()
	raise(5)
	if n := got(5); n != 0 {
		t.Errorf("vector 5 after reset got %d interrupts before the driver unmasked it", n)
	}
	r.setReg(vectorControl(5), 0)
	if n := got(5); n != 1 {
		t.Errorf("unmasking vector 5 after reset delivered %d interrupts, want 1", n)
	}
}
