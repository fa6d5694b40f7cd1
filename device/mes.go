package device

import (
	"vgpu/abi"
	"vgpu/mes"
)

// The scheduler's wiring: it reaches memory through the MMU (VMID 0, like the CP's kernel
// queues), places queues on the CP's slots, and programs process address spaces into VMIDs
// through the VM block's registers, under the register lock as the driver's own writes.

func (d *Device) newMES() {
	g := &d.gpu
	g.mes = mes.New(mes.Config{
		Memory:        g.mmu,
		Registers:     registerPort{d},
		Interrupts:    interruptPort{g},
		Slots:         g.cp,
		VM:            addressSpaces{d},
		Doorbells:     abi.DOORBELL_SIZE / abi.DOORBELL_STRIDE,
		DoorbellInUse: d.doorbellInUse,
		ClaimDoorbell: func(dword uint32) { d.doorbells.Clear(int(dword / 2)) },
		Log:           d.log.With("part", "mes"),
		Limiter:       d.rl,
	})
}

// doorbellInUse: the IH's read-pointer doorbell, or the doorbell of an HQD the kernel
// programmed and started itself (not one of MES's slots).
func (d *Device) doorbellInUse(dword uint32) bool {
	if db, on := d.gpu.ih.DoorbellRPTR(); on && (db == dword || db == dword^1) {
		return true
	}
	owned := d.gpu.mes.Owned()
	for slot := 0; slot < abi.CP_COMPUTE_PIPES*abi.CP_QUEUES_PER_PIPE+1; slot++ {
		if owned&(1<<slot) != 0 || d.gpu.cp.ReadHQD(slot, abi.REG_HQD_ACTIVE)&1 == 0 {
			continue
		}
		ctl := d.gpu.cp.ReadHQD(slot, abi.REG_HQD_PQ_DOORBELL_CONTROL)
		if ctl&abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK != 0 &&
			ctl&abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK>>abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT == dword {
			return true
		}
	}
	return false
}

// addressSpaces is mes.AddressSpaces: VM_CONTEXT[vmid], the PASID LUT and an invalidation of
// the VMID, written as the driver would write them (under the register lock).
type addressSpaces struct{ d *Device }

const pasidLUT0 = abi.REG_VM_PASID_LUT_0 - abi.BLOCK_VM_BASE

func (s addressSpaces) Bind(vmid int, c mes.VMContext) {
	vm := s.d.gpu.vm
	s.d.regMu.Lock()
	defer s.d.regMu.Unlock()
	vm.WriteContext(vmid, abi.REG_VM_CONTEXT_CNTL, 0)
	vm.WriteContext(vmid, abi.REG_VM_CONTEXT_PAGE_TABLE_BASE_LO, uint32(c.PageTableBase))
	vm.WriteContext(vmid, abi.REG_VM_CONTEXT_PAGE_TABLE_BASE_HI, uint32(c.PageTableBase>>32))
	vm.WriteContext(vmid, abi.REG_VM_CONTEXT_START_LO, uint32(c.Start))
	vm.WriteContext(vmid, abi.REG_VM_CONTEXT_START_HI, uint32(c.Start>>32))
	vm.WriteContext(vmid, abi.REG_VM_CONTEXT_END_LO, uint32(c.End))
	vm.WriteContext(vmid, abi.REG_VM_CONTEXT_END_HI, uint32(c.End>>32))
	vm.WriteContext(vmid, abi.REG_VM_CONTEXT_CNTL, c.Cntl|abi.REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK)
	vm.WriteReg(pasidLUT0+4*uint32(vmid), uint32(c.PASID))
	vm.InvalidateVMIDs(1 << vmid)
}

func (s addressSpaces) Unbind(vmid int) {
	vm := s.d.gpu.vm
	s.d.regMu.Lock()
	defer s.d.regMu.Unlock()
	vm.WriteContext(vmid, abi.REG_VM_CONTEXT_CNTL, 0)
	vm.WriteReg(pasidLUT0+4*uint32(vmid), 0)
	vm.InvalidateVMIDs(1 << vmid)
}

func (s addressSpaces) InvalidateGART() {
	s.d.regMu.Lock()
	defer s.d.regMu.Unlock()
	s.d.gpu.mmu.WriteReg(abi.REG_GMC_VM_INVALIDATE-abi.BLOCK_GMC_BASE, 1)
}
