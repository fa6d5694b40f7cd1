package abi

import (
	"fmt"
	"strings"
)

// Access says how software may use a register.
type Access uint8

const (
	RO Access = iota // reads return device state; writes are ignored
	RW               // read/write storage or control
	WO               // write-only command; reads return 0
)

func (a Access) String() string {
	switch a {
	case RO:
		return "RO"
	case RW:
		return "RW"
	case WO:
		return "WO"
	}
	return "?"
}

// Field is a bit field inside a register.
type Field struct {
	Name         string
	Shift, Width uint
	Doc          string
}

// Register is one 32-bit register, at a byte offset into the register BAR.
type Register struct {
	Name   string // without the block prefix
	Offset uint32 // byte offset from the block base
	Access Access
	Doc    string
	Fields []Field
}

// Block is a group of registers owned by one part of the device. The register file refuses to
// build when two blocks' ranges overlap.
type Block struct {
	Name string
	Base uint32 // byte offset into the register BAR
	Size uint32 // bytes claimed (all instances), a multiple of 4
	// Count > 1 makes an array of identical instances Stride bytes apart (e.g. one per hardware
	// queue slot); register offsets are then relative to an instance.
	Count, Stride uint32
	Doc           string
	Registers     []Register
}

// Const is a named value software writes or reads (status codes, magic numbers, layout numbers).
type Const struct {
	Name  string
	Value uint64
	Doc   string
}

// ConstGroup is a set of related values; Prefix is prepended to each name.
type ConstGroup struct {
	Prefix string
	Doc    string
	Consts []Const
}

// Blocks is the register map of the register BAR (BAR5), in address order.
var Blocks = []Block{
	{
		Name: "ID", Base: 0x0000, Size: 0x100,
		Doc: "Identity: what this device is and how it was configured. Read-only.",
		Registers: []Register{
			{Name: "MAGIC", Offset: 0x00, Access: RO, Doc: "Reads ID_MAGIC_VALUE (\"VGPU\" in memory order)."},
			{Name: "VERSION", Offset: 0x04, Access: RO, Doc: "Interface version.", Fields: []Field{
				{Name: "MINOR", Shift: 0, Width: 16},
				{Name: "MAJOR", Shift: 16, Width: 16},
			}},
			{Name: "VRAM_SIZE_LO", Offset: 0x08, Access: RO, Doc: "VRAM size in bytes, low 32 bits."},
			{Name: "VRAM_SIZE_HI", Offset: 0x0C, Access: RO, Doc: "VRAM size in bytes, high 32 bits."},
			{Name: "VRAM_WINDOW_LO", Offset: 0x10, Access: RO, Doc: "CPU-visible VRAM (BAR0 size) in bytes, low 32 bits."},
			{Name: "VRAM_WINDOW_HI", Offset: 0x14, Access: RO, Doc: "CPU-visible VRAM (BAR0 size) in bytes, high 32 bits."},
			{Name: "DOORBELL_MODE", Offset: 0x18, Access: RO, Doc: "How doorbell writes reach the device: a DOORBELL_MODE_* value."},
			{Name: "MSIX_VECTORS", Offset: 0x1C, Access: RO, Doc: "Number of MSI-X vectors."},
			{Name: "DOORBELL_COUNT", Offset: 0x20, Access: RO, Doc: "Number of 64-bit doorbells in BAR2."},
			{Name: "COMPUTE_UNITS", Offset: 0x24, Access: RO, Doc: "Number of compute units running shader dispatches (a context save area holds at most this many workgroups)."},
		},
	},
	{
		Name: "SELFTEST", Base: 0x0200, Size: 0x100,
		Doc: "Self-test block: proves the interrupt and DMA paths end to end without any engine.",
		Registers: []Register{
			{Name: "IRQ", Offset: 0x00, Access: WO, Doc: "Writing k raises MSI-X vector k (INTx when MSI-X is off). Out-of-range vectors are counted in IRQ_ERRORS."},
			{Name: "IRQ_ERRORS", Offset: 0x04, Access: RO, Doc: "Count of SELFTEST_IRQ writes naming a vector the device does not have."},
			{Name: "INTX_ACK", Offset: 0x08, Access: WO, Doc: "Writing 1 de-asserts the INTx line raised by SELFTEST_IRQ."},
			{Name: "DMA_ADDR_LO", Offset: 0x10, Access: RW, Doc: "DMA target address (IOVA), low 32 bits."},
			{Name: "DMA_ADDR_HI", Offset: 0x14, Access: RW, Doc: "DMA target address (IOVA), high 32 bits."},
			{Name: "DMA_LEN", Offset: 0x18, Access: RW, Doc: "Bytes to write; a multiple of 4, at most SELFTEST_DMA_MAX_LEN."},
			{Name: "DMA_PATTERN", Offset: 0x1C, Access: RW, Doc: "Dword i of the target receives PATTERN + i."},
			{Name: "DMA_CTRL", Offset: 0x20, Access: WO, Doc: "Start a self-test DMA.", Fields: []Field{
				{Name: "GO", Shift: 0, Width: 1, Doc: "1 starts the transfer (ignored while BUSY)."},
				{Name: "IRQ_EN", Shift: 1, Width: 1, Doc: "Raise IRQ_VECTOR when the transfer ends (done or error)."},
				{Name: "IRQ_VECTOR", Shift: 8, Width: 11, Doc: "MSI-X vector for completion."},
			}},
			{Name: "DMA_STATUS", Offset: 0x24, Access: RO, Doc: "A SELFTEST_DMA_STATUS_* value."},
			{Name: "DMA_COUNT", Offset: 0x28, Access: RO, Doc: "Number of self-test transfers that completed successfully."},
		},
	},
	{
		Name: "GMC", Base: 0x0400, Size: 0x100,
		Doc: "GPU memory controller for kernel work (VMID 0): the VRAM aperture, the flat GART and fault reporting.",
		Registers: []Register{
			{Name: "FB_BASE_LO", Offset: 0x00, Access: RO, Doc: "GPU address where VRAM appears (the frame-buffer aperture), low 32 bits."},
			{Name: "FB_BASE_HI", Offset: 0x04, Access: RO, Doc: "Frame-buffer aperture, high 32 bits. The aperture is ID_VRAM_SIZE bytes long."},
			{Name: "GART_CNTL", Offset: 0x08, Access: RW, Doc: "GART control.", Fields: []Field{
				{Name: "ENABLE", Shift: 0, Width: 1, Doc: "Translate the GART aperture through the table."},
			}},
			{Name: "GART_START_LO", Offset: 0x0C, Access: RW, Doc: "First GPU address of the GART aperture (4 KiB aligned), low 32 bits."},
			{Name: "GART_START_HI", Offset: 0x10, Access: RW},
			{Name: "GART_END_LO", Offset: 0x14, Access: RW, Doc: "Last GPU address of the GART aperture (inclusive; aperture size = END - START + 1), low 32 bits."},
			{Name: "GART_END_HI", Offset: 0x18, Access: RW},
			{Name: "GART_TABLE_LO", Offset: 0x1C, Access: RW, Doc: "The GART table in PDE format: address bits [47:12] of the table, PDE_VALID, and PDE_SYSTEM when the table is in system memory (a DMA address) rather than VRAM (an offset). Low 32 bits."},
			{Name: "GART_TABLE_HI", Offset: 0x20, Access: RW},
			{Name: "VM_FAULT_STATUS", Offset: 0x24, Access: RO, Doc: "The first translation fault since the last clear.", Fields: []Field{
				{Name: "VALID", Shift: 0, Width: 1},
				{Name: "WRITE", Shift: 1, Width: 1, Doc: "The access was a write."},
				{Name: "MORE", Shift: 2, Width: 1, Doc: "More faults happened after the latched one."},
				{Name: "REASON", Shift: 4, Width: 4, Doc: "A VM_FAULT_* value."},
				{Name: "VMID", Shift: 8, Width: 4},
				{Name: "SLOT", Shift: 16, Width: 8, Doc: "Hardware queue slot of the faulting engine."},
			}},
			{Name: "VM_FAULT_ADDR_LO", Offset: 0x28, Access: RO, Doc: "Faulting GPU address, low 32 bits."},
			{Name: "VM_FAULT_ADDR_HI", Offset: 0x2C, Access: RO},
			{Name: "VM_FAULT_CNTL", Offset: 0x30, Access: WO, Doc: "Write CLEAR to clear and re-arm VM_FAULT_STATUS.", Fields: []Field{
				{Name: "CLEAR", Shift: 0, Width: 1},
			}},
			{Name: "VM_INVALIDATE", Offset: 0x34, Access: WO, Doc: "Write a VMID bit mask: drop cached translations of those VMIDs (GART entries included)."},
		},
	},
	{
		Name: "IH", Base: 0x0500, Size: 0x100,
		Doc: "Interrupt handler ring: the device writes 32-byte AMD IV entries into a ring in GPU memory and raises IH_MSIX_VECTOR.",
		Registers: []Register{
			{Name: "RB_CNTL", Offset: 0x00, Access: RW, Doc: "Ring control (AMD IH_RB_CNTL layout).", Fields: []Field{
				{Name: "RB_ENABLE", Shift: 0, Width: 1},
				{Name: "RB_SIZE", Shift: 1, Width: 5, Doc: "log2 of the ring size in dwords."},
				{Name: "WPTR_WRITEBACK_ENABLE", Shift: 8, Width: 1},
				{Name: "WPTR_OVERFLOW_ENABLE", Shift: 16, Width: 1, Doc: "On overflow keep writing over the oldest entries and flag RB_OVERFLOW; otherwise drop new entries."},
				{Name: "ENABLE_INTR", Shift: 17, Width: 1},
				{Name: "WPTR_OVERFLOW_CLEAR", Shift: 31, Width: 1, Doc: "Writing 1 clears RB_OVERFLOW."},
			}},
			{Name: "RB_BASE_LO", Offset: 0x04, Access: RW, Doc: "Ring GPU address (256-byte aligned), low 32 bits."},
			{Name: "RB_BASE_HI", Offset: 0x08, Access: RW},
			{Name: "RB_RPTR", Offset: 0x0C, Access: RW, Doc: "Read pointer in bytes, written by the driver after it consumed entries."},
			{Name: "RB_WPTR", Offset: 0x10, Access: RO, Doc: "Write pointer (AMD IH_RB_WPTR layout).", Fields: []Field{
				{Name: "RB_OVERFLOW", Shift: 0, Width: 1},
				{Name: "OFFSET", Shift: 2, Width: 16, Doc: "Byte offset of the next entry, in dwords<<2."},
			}},
			{Name: "RB_WPTR_ADDR_LO", Offset: 0x14, Access: RW, Doc: "GPU address where the device writes RB_WPTR after each batch, low 32 bits."},
			{Name: "RB_WPTR_ADDR_HI", Offset: 0x18, Access: RW},
			{Name: "DOORBELL_RPTR", Offset: 0x1C, Access: RW, Doc: "Let a doorbell carry RB_RPTR.", Fields: []Field{
				{Name: "OFFSET", Shift: 0, Width: 26, Doc: "Doorbell dword index."},
				{Name: "ENABLE", Shift: 28, Width: 1},
			}},
			{Name: "MSIX_VECTOR", Offset: 0x20, Access: RW, Doc: "MSI-X vector raised for new entries (0 after reset)."},
			{Name: "ENTRIES", Offset: 0x24, Access: RO, Doc: "Entries written since reset."},
			{Name: "DROPPED", Offset: 0x28, Access: RO, Doc: "Entries dropped (ring disabled, full without overflow, or unwritable)."},
		},
	},
	{
		Name: "HDP", Base: 0x0600, Size: 0x40,
		Doc: "Host data path: the CPU's window to VRAM. vgpu keeps no HDP cache, but the flush handshakes work as on AMD parts.",
		Registers: []Register{
			{Name: "MEM_FLUSH_CNTL", Offset: 0x00, Access: WO, Doc: "Any write flushes the host data path."},
			{Name: "READ_CACHE_INVALIDATE", Offset: 0x04, Access: WO, Doc: "Any write invalidates the host data path read cache."},
			{Name: "FLUSH_REQ", Offset: 0x08, Access: WO, Doc: "Per-client flush request bits (as GPU_HDP_FLUSH_REQ); each requested bit is set in FLUSH_DONE once done."},
			{Name: "FLUSH_DONE", Offset: 0x0C, Access: RO, Doc: "Per-client flush done bits (as GPU_HDP_FLUSH_DONE)."},
			{Name: "FLUSHES", Offset: 0x10, Access: RO, Doc: "Number of flushes done."},
		},
	},
	{
		Name: "L2", Base: 0x0700, Size: 0x100,
		Doc: "The GPU's write-back L2 cache model (128-byte lines, deterministic) and its strict mode.",
		Registers: []Register{
			{Name: "CNTL", Offset: 0x00, Access: RW, Fields: []Field{
				{Name: "STRICT", Shift: 0, Width: 1, Doc: "Report coherence mistakes: stale reads and fences written over dirty lines."},
			}},
			{Name: "STALE_READS", Offset: 0x04, Access: RO, Doc: "Strict mode: engine reads that returned a cached line older than memory."},
			{Name: "DIRTY_FENCES", Offset: 0x08, Access: RO, Doc: "Strict mode: fences written while the queue's earlier writes were still only in L2."},
			{Name: "LAST_EVENT", Offset: 0x0C, Access: RO, Doc: "The last strict-mode event.", Fields: []Field{
				{Name: "KIND", Shift: 0, Width: 4, Doc: "An L2_EVENT_* value."},
				{Name: "SLOT", Shift: 8, Width: 8, Doc: "Hardware queue slot."},
			}},
			{Name: "LAST_ADDR_LO", Offset: 0x10, Access: RO, Doc: "Address of the last strict-mode event (GPU address), low 32 bits."},
			{Name: "LAST_ADDR_HI", Offset: 0x14, Access: RO},
			{Name: "LINES", Offset: 0x18, Access: RO, Doc: "Lines resident."},
			{Name: "DIRTY_LINES", Offset: 0x1C, Access: RO, Doc: "Lines resident and dirty."},
			{Name: "CONTROL", Offset: 0x20, Access: WO, Doc: "MMIO cache maintenance.", Fields: []Field{
				{Name: "WB", Shift: 0, Width: 1, Doc: "Write back every dirty line."},
				{Name: "INV", Shift: 1, Width: 1, Doc: "Invalidate every line (after WB when both are set)."},
			}},
			{Name: "STATUS", Offset: 0x24, Access: RO, Doc: "Progress of the maintenance an L2_CONTROL write started: it runs asynchronously; poll until BUSY reads 0.", Fields: []Field{
				{Name: "BUSY", Shift: 0, Width: 1, Doc: "The last L2_CONTROL request is still running (a write while BUSY is queued behind it)."},
				{Name: "ERROR", Shift: 1, Width: 1, Doc: "The last completed request could not write some dirty lines back (unmapped memory, Bus Master off): they were dropped and counted in WB_ERRORS."},
			}},
			{Name: "CONTROL_DONE", Offset: 0x28, Access: RO, Doc: "L2_CONTROL requests completed since reset."},
			{Name: "WB_ERRORS", Offset: 0x2C, Access: RO, Doc: "Dirty lines dropped because their write-back failed, since reset."},
			{Name: "DISCARDED", Offset: 0x30, Access: RO, Doc: "Dirty lines for system memory discarded unwritten because the client that mapped that memory went away, since power-on."},
		},
	},
	{
		Name: "CP", Base: 0x0800, Size: 0x100,
		Doc: "Command processor: engine-wide identity and counters.",
		Registers: []Register{
			{Name: "HQD_COUNT", Offset: 0x00, Access: RO, Doc: "Hardware queue slots: slot 0 is the graphics queue, slots 1.. are compute (pipe-major)."},
			{Name: "COMPUTE_PIPES", Offset: 0x04, Access: RO},
			{Name: "QUEUES_PER_PIPE", Offset: 0x08, Access: RO},
			{Name: "PACKETS_LO", Offset: 0x0C, Access: RO, Doc: "PM4 packets executed since reset, low 32 bits."},
			{Name: "PACKETS_HI", Offset: 0x10, Access: RO},
			{Name: "HALTS", Offset: 0x14, Access: RO, Doc: "Queue halts (errors) since reset."},
			{Name: "IB_MAX_DEPTH", Offset: 0x18, Access: RO, Doc: "Deepest indirect-buffer nesting accepted (2: IB1 and IB2)."},
			{Name: "ENGINE_RESET", Offset: 0x1C, Access: WO, Doc: "Soft-reset engines (as GRBM_SOFT_RESET): every queue of a named engine is stopped at once (as DEQUEUE_RESET) and its HQD registers return to power-on values; queues of other engines keep running. Runs asynchronously: poll ENGINE_RESET_STATUS.", Fields: []Field{
				{Name: "GFX", Shift: 0, Width: 1, Doc: "The graphics engine (ME 0: slot 0)."},
				{Name: "COMPUTE", Shift: 1, Width: 1, Doc: "The compute engine (ME 1: slots 1..16)."},
			}},
			{Name: "ENGINE_RESET_STATUS", Offset: 0x20, Access: RO, Doc: "Engines whose reset is still in progress, in ENGINE_RESET's bit layout: 0 when every requested reset has completed."},
			{Name: "ENGINE_RESETS", Offset: 0x24, Access: RO, Doc: "Engine resets completed since power-on (one per engine reset)."},
		},
	},
	shaderBlock,
	{
		Name: "HQD", Base: 0x1000, Size: 0x100 * 17, Count: 17, Stride: 0x100,
		Doc: "Hardware queue descriptors, one instance per queue slot. Program the ring while ACTIVE is 0, then set ACTIVE.",
		Registers: []Register{
			{Name: "ACTIVE", Offset: 0x00, Access: RW, Doc: "Write 1 to start the queue with the programmed ring (rptr and wptr start at 0); reads 1 while it runs."},
			{Name: "VMID", Offset: 0x04, Access: RW, Doc: "VMID the queue's memory accesses use: 0 the kernel's (GMC apertures), 1..15 a process address space (VM_CONTEXT) for the ring, its IBs and every packet access."},
			{Name: "PQ_BASE_LO", Offset: 0x08, Access: RW, Doc: "Ring GPU address (256-byte aligned), low 32 bits."},
			{Name: "PQ_BASE_HI", Offset: 0x0C, Access: RW},
			{Name: "PQ_CONTROL", Offset: 0x10, Access: RW, Fields: []Field{
				{Name: "QUEUE_SIZE", Shift: 0, Width: 6, Doc: "Ring size is 2^(QUEUE_SIZE+1) dwords (AMD encoding); 256 B to 8 MiB."},
				{Name: "NO_UPDATE_RPTR", Shift: 27, Width: 1, Doc: "Do not write the read pointer back to memory."},
			}},
			{Name: "PQ_RPTR", Offset: 0x14, Access: RO, Doc: "Read pointer in dwords (wraps with the ring)."},
			{Name: "PQ_RPTR_REPORT_ADDR_LO", Offset: 0x18, Access: RW, Doc: "GPU address where the CP writes the 32-bit rptr after each batch, low 32 bits."},
			{Name: "PQ_RPTR_REPORT_ADDR_HI", Offset: 0x1C, Access: RW},
			{Name: "PQ_WPTR_POLL_ADDR_LO", Offset: 0x20, Access: RW, Doc: "GPU address of a 64-bit wptr the CP polls when WPTR_POLL_EN is set, low 32 bits."},
			{Name: "PQ_WPTR_POLL_ADDR_HI", Offset: 0x24, Access: RW},
			{Name: "PQ_WPTR_LO", Offset: 0x28, Access: RW, Doc: "Write pointer in dwords (monotonic, 64-bit); writing it kicks the queue like a doorbell."},
			{Name: "PQ_WPTR_HI", Offset: 0x2C, Access: RW},
			{Name: "PQ_DOORBELL_CONTROL", Offset: 0x30, Access: RW, Fields: []Field{
				{Name: "DOORBELL_OFFSET", Shift: 2, Width: 26, Doc: "Doorbell dword index (64-bit doorbell k is dword 2k)."},
				{Name: "DOORBELL_EN", Shift: 30, Width: 1},
			}},
			{Name: "PQ_WPTR_POLL_CNTL", Offset: 0x34, Access: RW, Fields: []Field{
				{Name: "EN", Shift: 0, Width: 1, Doc: "Poll the wptr at PQ_WPTR_POLL_ADDR (also on every kick)."},
				{Name: "INTERVAL_US", Shift: 8, Width: 16, Doc: "Poll period in microseconds (0: 100)."},
			}},
			{Name: "DEQUEUE_REQUEST", Offset: 0x38, Access: WO, Doc: "A DEQUEUE_* value: stop the queue at a packet boundary (drain) or at once, discarding its state and error (reset)."},
			{Name: "STATUS", Offset: 0x3C, Access: RO, Fields: []Field{
				{Name: "STATE", Shift: 0, Width: 4, Doc: "A HQD_STATE_* value."},
				{Name: "ERROR", Shift: 8, Width: 8, Doc: "A CP_ERROR_* value when halted."},
			}},
			{Name: "ERROR_ADDR_LO", Offset: 0x40, Access: RO, Doc: "GPU address of the packet (or data) that halted the queue, low 32 bits."},
			{Name: "ERROR_ADDR_HI", Offset: 0x44, Access: RO},
			{Name: "ERROR_INFO", Offset: 0x48, Access: RO, Doc: "The offending packet header, or the faulting address's low bits for memory errors."},
			{Name: "FENCES", Offset: 0x4C, Access: RO, Doc: "RELEASE_MEM fences written by this queue since it was started."},
		},
	},
	vmBlock, vmContextBlock, vmInvalidateBlock, mesBlock,
	{
		Name: "CONFIG", Base: 0x8000, Size: 0x20,
		Doc: "Eight general registers at the start of the CONFIG space (SET_CONFIG_REG offset 0).",
		Registers: []Register{
			{Name: "SCRATCH_0", Offset: 0x00, Access: RW}, {Name: "SCRATCH_1", Offset: 0x04, Access: RW},
			{Name: "SCRATCH_2", Offset: 0x08, Access: RW}, {Name: "SCRATCH_3", Offset: 0x0C, Access: RW},
			{Name: "SCRATCH_4", Offset: 0x10, Access: RW}, {Name: "SCRATCH_5", Offset: 0x14, Access: RW},
			{Name: "SCRATCH_6", Offset: 0x18, Access: RW}, {Name: "SCRATCH_7", Offset: 0x1C, Access: RW},
		},
	},
	{
		Name: "SCRATCH", Base: 0x30100, Size: 0x20,
		Doc: "Eight scratch registers in the UCONFIG space (SET_UCONFIG_REG offset 0x40 is SCRATCH_0, as SCRATCH_REG0 on AMD parts): plain storage, cleared by reset, for ring and MMIO tests.",
		Registers: []Register{
			{Name: "0", Offset: 0x00, Access: RW}, {Name: "1", Offset: 0x04, Access: RW},
			{Name: "2", Offset: 0x08, Access: RW}, {Name: "3", Offset: 0x0C, Access: RW},
			{Name: "4", Offset: 0x10, Access: RW}, {Name: "5", Offset: 0x14, Access: RW},
			{Name: "6", Offset: 0x18, Access: RW}, {Name: "7", Offset: 0x1C, Access: RW},
		},
	},
}

// Groups holds the enumerated values and layout numbers of the interface.
var Groups = append(append(append(baseGroups, memoryGroups...), mesGroups...), shaderGroups...)

// baseGroups: PCI, BAR, identity and self-test values.
var baseGroups = []ConstGroup{
	{Prefix: "PCI_", Doc: "PCI identity defaults (vendor and device can be overridden by server flags).", Consts: []Const{
		{Name: "VENDOR_ID", Value: 0x1234, Doc: "Default vendor ID (QEMU's experimental range)."},
		{Name: "DEVICE_ID", Value: 0x5650, Doc: "Default device ID (\"VP\")."},
		{Name: "SUBSYSTEM_VENDOR_ID", Value: 0x1234},
		{Name: "SUBSYSTEM_ID", Value: 0x0001},
		{Name: "REVISION", Value: 0x01},
		{Name: "CLASS_CODE", Value: 0x030200, Doc: "Display controller / 3D controller."},
	}},
	{Prefix: "BAR_", Doc: "Which PCI BAR holds what.", Consts: []Const{
		{Name: "VRAM", Value: 0, Doc: "64-bit prefetchable VRAM window (BAR0/1)."},
		{Name: "DOORBELL", Value: 2, Doc: "64-bit doorbell aperture (BAR2/3)."},
		{Name: "REGS", Value: 5, Doc: "32-bit register aperture (BAR5)."},
	}},
	{Prefix: "REGS_", Doc: "Register BAR layout.", Consts: []Const{
		{Name: "SIZE", Value: 0x40000, Doc: "Register BAR size in bytes."},
		{Name: "MSIX_TABLE_OFFSET", Value: 0x3F000, Doc: "MSI-X table: on the last page of the register BAR."},
		{Name: "MSIX_PBA_OFFSET", Value: 0x3F800, Doc: "MSI-X pending-bit array, same page."},
		{Name: "MSIX_MAX_VECTORS", Value: 128, Doc: "The MSI-X page has room for this many vectors."},
	}},
	{Prefix: "DOORBELL_", Doc: "Doorbell aperture layout.", Consts: []Const{
		{Name: "SIZE", Value: 0x10000, Doc: "Doorbell BAR size in bytes: 16 pages, so that a driver can give each process a page of its own (amdgpu's doorbell objects) beside its kernel page."},
		{Name: "STRIDE", Value: 8, Doc: "Bytes per doorbell: each is 64 bits."},
		{Name: "PER_PAGE", Value: 512, Doc: "Doorbells per 4 KiB page."},
		{Name: "MODE_TRAP", Value: 0, Doc: "Doorbell BAR is trapped: every write is a vfio-user message."},
		{Name: "MODE_POLL", Value: 1, Doc: "Doorbell BAR is shared memory that the device polls."},
	}},
	{Prefix: "ID_", Doc: "Identity values.", Consts: []Const{
		{Name: "MAGIC_VALUE", Value: 0x55504756, Doc: "\"VGPU\" as bytes in memory order."},
		{Name: "VERSION_MAJOR", Value: 1},
		{Name: "VERSION_MINOR", Value: 5, Doc: "1: asynchronous L2_CONTROL (L2_STATUS), CP_ENGINE_RESET. 2: GPUVM (VM, VM_CONTEXT, VM_INV_ENG blocks; INVALIDATE_TLBS; the IB VMID field on kernel streams). 3: the MES scheduler (MES block, AMD v11 API frames and MQDs, PROTECTED_FENCE_SIGNAL). 4: a 64 KiB doorbell BAR (16 pages of 512). 5: shader dispatches (the eBPF ISA, COMPUTE_PGM and friends, DISPATCH_INDIRECT, CP_ERROR_SHADER, ID_COMPUTE_UNITS), their preemption into a context save area (CP_ERROR_CONTEXT_SAVE, MES_CTX dispatch records, removed queues continued), the SHADER block (hazards, stale L0 reads)."},
	}},
	{Prefix: "SELFTEST_", Doc: "Self-test DMA status codes and bounds.", Consts: []Const{
		{Name: "DMA_MAX_LEN", Value: 1 << 20, Doc: "Largest self-test transfer in bytes."},
		{Name: "DMA_STATUS_IDLE", Value: 0, Doc: "No transfer since reset."},
		{Name: "DMA_STATUS_BUSY", Value: 1, Doc: "Transfer in progress."},
		{Name: "DMA_STATUS_DONE", Value: 2, Doc: "Last transfer completed."},
		{Name: "DMA_STATUS_ERR_BUS_MASTER", Value: 3, Doc: "Refused: Bus Master Enable is off in COMMAND."},
		{Name: "DMA_STATUS_ERR_FAULT", Value: 4, Doc: "The target range is not (writably) mapped for the device."},
		{Name: "DMA_STATUS_ERR_LENGTH", Value: 5, Doc: "DMA_LEN is zero, not a multiple of 4, or too large."},
	}},
}

// NameOf returns the full name (prefix included) of value v in the constant group with that
// prefix, e.g. NameOf("HQD_STATE_", 3) is "HQD_STATE_HALTED"; a value the group does not name
// reads as the prefix and the number. For diagnostics, which print event kinds by name.
func NameOf(prefix string, v uint64) string {
	for _, g := range Groups {
		for _, c := range g.Consts {
			if name := g.Prefix + c.Name; c.Value == v && strings.HasPrefix(name, prefix) {
				return name
			}
		}
	}
	return fmt.Sprintf("%s%#x?", prefix, v)
}
