package gpuvm

import (
	"fmt"

	"vgpu/abi"
	"vgpu/engine"
)

// Fault is a no-retry translation fault whose policy halts the engine: a guest mistake,
// already latched (or counted as MORE_FAULTS) and sent as an IV when the context enables it.
type Fault struct {
	VA     uint64 // the canonical GPU address that faulted
	VMID   int
	Slot   int
	Write  bool
	Kind   engine.Kind
	Status uint32 // the VM_FAULT_STATUS word of this fault (without MORE_FAULTS)
	Entry  uint64 // the entry the walk stopped at (0: none was read)
}

func (f *Fault) Error() string {
	return fmt.Sprintf("gpuvm: %s fault at %#x (vmid %d, slot %d): %s (entry %#x)",
		accessName(f.Kind, f.Write), f.VA, f.VMID, f.Slot, StatusString(f.Status), f.Entry)
}

// TranslationFault reports true: the engine halts with CP_ERROR_TRANSLATION.
func (f *Fault) TranslationFault() bool { return true }

// FaultAddress returns VA.
func (f *Fault) FaultAddress() uint64 { return f.VA }

// RetryFault is a retry fault: the access did not happen. The engine waits until RetryReady
// is closed — the driver acknowledged the CAM entry (RETRY_CAM_ACK), a CAM entry became free
// (CAMIndex -1: the fault sent no IV yet), the context was reprogrammed, or the hub was reset
// — and then replays the access. It is not a TranslationFaulter: nothing failed.
type RetryFault struct {
	VA       uint64
	VMID     int
	Slot     int
	Write    bool
	CAMIndex int // -1: waiting for a free CAM entry
	ready    <-chan struct{}
}

func (r *RetryFault) Error() string {
	return fmt.Sprintf("gpuvm: retry fault at %#x (vmid %d, slot %d, cam %d): waiting for the driver",
		r.VA, r.VMID, r.Slot, r.CAMIndex)
}

// RetryReady implements engine.Retrier.
func (r *RetryFault) RetryReady() <-chan struct{} { return r.ready }

// FaultAddress returns VA.
func (r *RetryFault) FaultAddress() uint64 { return r.VA }

var (
	_ engine.TranslationFaulter = (*Fault)(nil)
	_ engine.FaultAddresser     = (*Fault)(nil)
	_ engine.Retrier            = (*RetryFault)(nil)
	_ engine.FaultAddresser     = (*RetryFault)(nil)
)

// faultLatch is VM_FAULT_STATUS/ADDR.
type faultLatch struct {
	latched bool
	status  uint32
	page    uint64
}

// status builds the VM_FAULT_STATUS word of a fault.
func status(f walkFault, a engine.Access, write bool) uint32 {
	var s uint32
	switch f.k {
	case classDisabled, classRange:
		s |= abi.REG_VM_FAULT_STATUS__MAPPING_ERROR_MASK
	case classPDE, classValid:
		s |= abi.VM_PERM_VALID << abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS__SHIFT
	case classRead:
		s |= abi.VM_PERM_READ << abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS__SHIFT
	case classWrite:
		s |= abi.VM_PERM_WRITE << abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS__SHIFT
	case classExecute:
		s |= abi.VM_PERM_EXECUTE << abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS__SHIFT
	}
	s |= f.walker << abi.REG_VM_FAULT_STATUS__WALKER_ERROR__SHIFT & abi.REG_VM_FAULT_STATUS__WALKER_ERROR_MASK
	if f.prt {
		s |= abi.REG_VM_FAULT_STATUS__PRT_MASK
	}
	return s | accessBits(a, write)
}

// accessBits are the STATUS fields naming the access: client, direction, VMID.
func accessBits(a engine.Access, write bool) uint32 {
	s := uint32(a.Client) << abi.REG_VM_FAULT_STATUS__CID__SHIFT & abi.REG_VM_FAULT_STATUS__CID_MASK
	if write {
		s |= abi.REG_VM_FAULT_STATUS__RW_MASK
	}
	return s | uint32(a.VMID)<<abi.REG_VM_FAULT_STATUS__VMID__SHIFT&abi.REG_VM_FAULT_STATUS__VMID_MASK
}

// fault handles a failed translation: a retry fault (CAM, IV once per page), or a no-retry
// fault (latch, IV if enabled, then the default page or a *Fault).
func (v *VM) fault(a engine.Access, c *ctxConfig, va uint64, write bool, f walkFault) (Translation, error) {
	st := status(f, a, write)
	if c.retries(f.k) {
		return Translation{}, v.retryFault(a, va, write, st)
	}
	interrupt, toDefault := c.policy(f.k)
	v.mu.Lock()
	first := v.latchLocked(st, va)
	crash := v.regs.faultCntl&abi.REG_VM_FAULT_CNTL__CRASH_ON_NO_RETRY_FAULT_MASK != 0
	pasid := uint16(v.regs.pasid[a.VMID])
	def := (uint64(v.regs.defHi)<<32 | uint64(v.regs.defLo)) & (1<<pageBits - 1) << pageShift
	v.mu.Unlock()
	if interrupt {
		v.sendIV(faultIV(a, pasid, va, write, st, false, 0))
	}
	v.rl.Warn("gpuvm-fault", "gpuvm: VM fault", "addr", fmt.Sprintf("%#x", va), "vmid", a.VMID,
		"queue", a.Slot, "access", accessName(a.Kind, write), "status", StatusString(st),
		"entry", fmt.Sprintf("%#x", f.entry), "latched", first, "default_page", toDefault && !crash)
	if toDefault && !crash {
		v.stats.defaultPage.Add(1)
		return Translation{
			PA:         engine.PhysAddr{Domain: engine.DomainSystem, Addr: def + va&pageMask},
			Len:        pageSize - va&pageMask,
			ReadZero:   def == 0,
			DropWrites: true,
			Default:    true,
		}, nil
	}
	return Translation{}, &Fault{VA: va, VMID: a.VMID, Slot: a.Slot, Write: write, Kind: a.Kind, Status: st, Entry: f.entry}
}

// latchLocked records a no-retry fault: the first since the last clear is kept, later ones
// set MORE_FAULTS. It reports whether this one was latched. v.mu held.
func (v *VM) latchLocked(st uint32, va uint64) bool {
	v.faults.Add(1)
	v.noteFaultLocked(st, va)
	if v.latch.latched {
		v.latch.status |= abi.REG_VM_FAULT_STATUS__MORE_FAULTS_MASK
		return false
	}
	v.latch = faultLatch{latched: true, status: st, page: va >> pageShift}
	return true
}

// ReportFault latches a fault the caller detected itself — VMID 0's apertures and GART in
// gpummu — and sends its VM-fault IV (VMID 0 has no context register: always). st holds the
// cause fields (VM_FAULT_STATUS MAPPING_ERROR, PERMISSION_FAULTS, WALKER_ERROR); the client,
// direction and VMID are filled in from a.
func (v *VM) ReportFault(a engine.Access, va uint64, write bool, st uint32) {
	st = st&(abi.REG_VM_FAULT_STATUS__MAPPING_ERROR_MASK|abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS_MASK|
		abi.REG_VM_FAULT_STATUS__WALKER_ERROR_MASK|abi.REG_VM_FAULT_STATUS__PRT_MASK) | accessBits(a, write)
	va &= vaLimit - 1
	v.mu.Lock()
	v.latchLocked(st, va)
	pasid := uint16(v.regs.pasid[a.VMID&(NumVMIDs-1)])
	v.mu.Unlock()
	v.sendIV(faultIV(a, pasid, va, write, st, false, 0))
}

// faultIV encodes a VM-fault IV as amdgpu's gmc_v11_0_process_interrupt decodes it.
func faultIV(a engine.Access, pasid uint16, va uint64, write bool, st uint32, retry bool, cam int) engine.IV {
	iv := engine.IV{Client: abi.IH_CLIENT_GFX, Source: abi.IH_SRC_VM_FAULT, VMID: uint8(a.VMID), PASID: pasid}
	iv.Data[0] = uint32(va >> pageShift)
	iv.Data[1] = uint32(va>>44) & abi.VM_IV_DW5_ADDR_HI_MASK
	switch {
	case a.Kind == engine.Fetch:
		iv.Data[1] |= abi.VM_IV_DW5_EXE_MASK
	case write:
		iv.Data[1] |= abi.VM_IV_DW5_WRITE_MASK
	default:
		iv.Data[1] |= abi.VM_IV_DW5_READ_MASK
	}
	if retry {
		iv.Data[1] |= abi.VM_IV_DW5_RETRY_MASK
		iv.Data[2] = uint32(cam) & abi.VM_IV_DW6_CAM_INDEX_MASK
	}
	iv.Data[3] = st
	return iv
}

func accessName(k engine.Kind, write bool) string {
	switch {
	case k == engine.Fetch:
		return "fetch"
	case write:
		return "write"
	}
	return "read"
}

// StatusString describes a VM_FAULT_STATUS word's cause for logs.
func StatusString(st uint32) string {
	perm := st & abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS_MASK >> abi.REG_VM_FAULT_STATUS__PERMISSION_FAULTS__SHIFT
	walker := st & abi.REG_VM_FAULT_STATUS__WALKER_ERROR_MASK >> abi.REG_VM_FAULT_STATUS__WALKER_ERROR__SHIFT
	var s string
	switch {
	case st&abi.REG_VM_FAULT_STATUS__MAPPING_ERROR_MASK != 0:
		s = "mapping error (outside the range, or context disabled)"
	case walker != 0:
		s = abi.NameOf("VM_WALKER_", uint64(walker))
	case perm&abi.VM_PERM_VALID != 0:
		s = "entry not valid"
	case perm&abi.VM_PERM_READ != 0:
		s = "page not readable"
	case perm&abi.VM_PERM_WRITE != 0:
		s = "page not writeable"
	case perm&abi.VM_PERM_EXECUTE != 0:
		s = "page not executable"
	default:
		s = "no cause"
	}
	return fmt.Sprintf("%s, cid %d, status %#x", s,
		st&abi.REG_VM_FAULT_STATUS__CID_MASK>>abi.REG_VM_FAULT_STATUS__CID__SHIFT, st)
}
