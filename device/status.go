package device

import (
	"runtime"
	"sort"
	"time"

	"vgpu/abi"
	"vgpu/bars"
	"vgpu/cp"
	"vgpu/gpummu"
	"vgpu/gpuvm"
	"vgpu/inject"
	"vgpu/irq"
	"vgpu/l2"
	"vgpu/mes"
)

// Status is the device's state for live inspection (`vgpu status`, the control socket's
// "status" command): every queue slot in use with the packet it is stopped on, the
// scheduler, recent faults, cache and TLB figures, interrupts, unmodelled register accesses
// and the spin detector. Status never waits for the client: every part is read from the
// engines' published state under their own locks, and nothing reads guest memory.
type Status struct {
	Time       time.Time        `json:"time"`
	Function   FunctionStatus   `json:"function"`
	HQDs       []HQDStatus      `json:"hqds"` // slots with an activation or a non-idle state
	MES        mes.Status       `json:"mes"`
	Faults     FaultStatus      `json:"faults"`
	L2         l2.Stats         `json:"l2"`
	TLB        TLBStatus        `json:"tlb"`
	Interrupts InterruptStatus  `json:"interrupts"`
	Unmodelled UnmodelledStatus `json:"unmodelled"`
	Spins      bars.SpinStats   `json:"spins"`
	CP         CPCounters       `json:"cp"`
	Injection  InjectionStatus  `json:"injection"`
}

// InjectionStatus is the fault-injection rules in force and what they did (docs/inject.md).
type InjectionStatus struct {
	Rules  []inject.Status   `json:"rules"`
	Totals map[string]uint64 `json:"totals"` // injections made per kind since the device was made
}

// FunctionStatus is the PCI function's life: resets and clients.
type FunctionStatus struct {
	DeviceResets uint64 `json:"device_resets"`
	FLRs         uint64 `json:"flrs"`
	Disconnects  uint64 `json:"disconnects"`
	EngineResets uint32 `json:"engine_resets"` // CP_ENGINE_RESET completions
	Stragglers   uint64 `json:"stragglers"`
	Goroutines   int    `json:"goroutines"`
}

// HQDStatus is one queue slot: the CP's view, its name, the PASID of the process the
// scheduler placed there, and the packet it is stopped on.
type HQDStatus struct {
	cp.HQDStatus
	Name      string `json:"name"`                    // gfx, or compute pipe/queue
	StateName string `json:"state_name"`              // HQD_STATE_*
	ErrorName string `json:"error_name,omitempty"`    // CP_ERROR_* of a halt
	PASID     uint16 `json:"pasid,omitempty"`         // mapped queues: the process's PASID
	MESQueue  bool   `json:"mes_queue"`               // placed by the scheduler
	Opcode    string `json:"packet_opcode,omitempty"` // PM4_IT_* of Packet
}

// FaultStatus is the faults recorded: the last few of VMIDs 1..15 (and VMID 0's reported
// through gpuvm), and VMID 0's latch.
type FaultStatus struct {
	Recent        []gpuvm.FaultRecord `json:"recent"`
	GMCStatus     uint32              `json:"gmc_status"` // GMC_VM_FAULT_STATUS: VMID 0's first fault
	GMCAddr       uint64              `json:"gmc_addr"`
	Translation   uint64              `json:"translation_faults"` // VMID 0
	AccessErrors  uint64              `json:"access_errors"`
	VMFaults      uint64              `json:"vm_faults"` // VMIDs 1..15, no-retry
	RetryFaultIVs uint64              `json:"retry_fault_ivs"`
}

// TLBStatus is the translation caches: GART (VMID 0) and the VM contexts.
type TLBStatus struct {
	GART gpummu.Stats `json:"gart"`
	VM   gpuvm.Stats  `json:"vm"`
}

// InterruptStatus is the interrupt path: per MSI-X vector, the IH ring, the function's lines.
type InterruptStatus struct {
	Vectors     []irq.VectorStatus `json:"vectors"`
	IH          irq.IHStats        `json:"ih"`
	Controller  irq.Stats          `json:"controller"`
	NoBusMaster uint64             `json:"not_sent_bus_master_off"`
	Refused     uint64             `json:"refused"` // vector the function does not have
}

// UnmodelledStatus is the register accesses no block decodes, most frequent first.
type UnmodelledStatus struct {
	Offsets   int                `json:"offsets"` // distinct offsets touched
	Top       []UnmodelledAccess `json:"top"`     // the maxUnmodelled most frequent
	Misshapen uint64             `json:"misshapen"`
}

// UnmodelledAccess is one unclaimed register offset.
type UnmodelledAccess struct {
	Offset uint32 `json:"offset"`
	Name   string `json:"name,omitempty"` // the abi name, if the offset has one
	Count  uint64 `json:"count"`
}

// maxUnmodelled bounds the unmodelled offsets listed: a guest that sweeps the BAR touches
// tens of thousands; the most frequent are the ones a driver depends on.
const maxUnmodelled = 64

// CPCounters is the command processor's totals.
type CPCounters struct {
	Packets, IBs, Halts, Doorbells, DoorbellMisses uint64
	ShaderDispatches                               uint64
}

// Status returns the device's state now. Safe from any goroutine at any time (the control
// socket's connections call it concurrently with the vfio-user worker and the engines).
func (d *Device) Status() Status {
	g := &d.gpu
	cs := g.cp.Stats()
	ms := g.mes.Status()
	un, bad := d.regs.Diagnostics()
	s := Status{
		Time: time.Now(),
		Function: FunctionStatus{DeviceResets: d.stats.resets.Load(), FLRs: d.stats.flrs.Load(),
			Disconnects: d.stats.disconnects.Load(), EngineResets: cs.EngineResets, Stragglers: d.stats.stragglers.Load()},
		MES: ms,
		L2:  g.cache.Stats(),
		TLB: TLBStatus{GART: g.mmu.Stats(), VM: g.vm.Stats()},
		Interrupts: InterruptStatus{Vectors: d.irqs.Vectors(), IH: g.ih.Stats(), Controller: d.irqs.Stats(),
			NoBusMaster: d.stats.irqWithoutBusMaster.Load(), Refused: d.stats.irqErrors.Load()},
		Unmodelled: unmodelled(un, bad),
		Spins:      d.spins(),
		CP: CPCounters{Packets: cs.Packets, IBs: cs.IBs, Halts: cs.Halts, Doorbells: cs.Doorbells,
			DoorbellMisses: cs.DoorbellMisses, ShaderDispatches: cs.ShaderDispatches},
	}
	s.Function.Goroutines = runtime.NumGoroutine()
	s.Injection = d.injectionStatus()
	s.Faults = FaultStatus{Recent: g.vm.RecentFaults(),
		GMCStatus:   g.mmu.ReadReg(abi.REG_GMC_VM_FAULT_STATUS - abi.BLOCK_GMC_BASE),
		GMCAddr:     uint64(g.mmu.ReadReg(abi.REG_GMC_VM_FAULT_ADDR_HI-abi.BLOCK_GMC_BASE))<<32 | uint64(g.mmu.ReadReg(abi.REG_GMC_VM_FAULT_ADDR_LO-abi.BLOCK_GMC_BASE)),
		Translation: s.TLB.GART.Faults, AccessErrors: s.TLB.GART.AccessErrors,
		VMFaults: s.TLB.VM.Faults, RetryFaultIVs: s.TLB.VM.RetryIVs}
	pasidBySlot := map[int]uint16{}
	for _, q := range ms.QueueList {
		if q.Mapped {
			pasidBySlot[q.Slot] = q.PASID
		}
	}
	for slot := range cp.NumSlots {
		h := g.cp.HQDStatus(slot)
		if !h.Active && h.State == abi.HQD_STATE_IDLE && h.Error == 0 {
			continue
		}
		hs := HQDStatus{HQDStatus: h, Name: slotName(slot), StateName: abi.NameOf("HQD_STATE_", uint64(h.State)),
			MESQueue: h.Mapped}
		if h.Error != 0 {
			hs.ErrorName = abi.NameOf("CP_ERROR_", uint64(h.Error))
		}
		if p, ok := pasidBySlot[slot]; ok && h.Mapped {
			hs.PASID = p
		}
		if len(h.Packet) > 0 {
			hs.Opcode = packetOpcode(h.Packet[0])
		}
		s.HQDs = append(s.HQDs, hs)
	}
	return s
}

// packetOpcode names a PM4 header's packet.
func packetOpcode(hdr uint32) string {
	if hdr>>abi.PM4_HEADER_TYPE__SHIFT != abi.PM4_TYPE3 {
		return abi.NameOf("PM4_TYPE", uint64(hdr>>abi.PM4_HEADER_TYPE__SHIFT))
	}
	return abi.NameOf("PM4_IT_", uint64(hdr&abi.PM4_HEADER_OPCODE_MASK>>abi.PM4_HEADER_OPCODE__SHIFT))
}

// unmodelled ranks the unclaimed offsets by count (ties: by offset).
func unmodelled(un []bars.UnclaimedAccess, misshapen uint64) UnmodelledStatus {
	u := UnmodelledStatus{Offsets: len(un), Misshapen: misshapen}
	sorted := append([]bars.UnclaimedAccess(nil), un...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Count > sorted[j].Count })
	for i, a := range sorted {
		if i == maxUnmodelled {
			break
		}
		u.Top = append(u.Top, UnmodelledAccess{Offset: a.Offset, Name: abi.RegisterNames[a.Offset], Count: a.Count})
	}
	return u
}
