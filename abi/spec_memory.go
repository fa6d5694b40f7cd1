package abi

// The formats that live in memory or in packets. These are bit-exact AMD encodings (PM4 type-3
// packets, IH interrupt vectors, GPUVM PTEs), so AMD's headers, decoders and knowledge apply;
// sources are named in docs/device.md. Only registers are vgpu's own map.

// field expands a bit field into its __SHIFT and _MASK constants.
func field(name string, shift, width uint, doc string) []Const {
	return []Const{
		{Name: name + "__SHIFT", Value: uint64(shift), Doc: doc},
		{Name: name + "_MASK", Value: ((uint64(1) << width) - 1) << shift},
	}
}

func consts(parts ...[]Const) []Const {
	var out []Const
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func c(name string, v uint64, doc string) []Const { return []Const{{Name: name, Value: v, Doc: doc}} }

var memoryGroups = []ConstGroup{
	{Prefix: "PM4_", Doc: "PM4 packet headers (AMD nvd.h).", Consts: consts(
		field("HEADER_TYPE", 30, 2, "0 = type-0, 2 = type-2 filler, 3 = type-3."),
		field("HEADER_COUNT", 16, 14, "Type-3: payload dwords minus one."),
		field("HEADER_OPCODE", 8, 8, "Type-3 IT_OPCODE."),
		field("HEADER_SHADER_TYPE", 1, 1, "1 = compute."),
		field("HEADER_PREDICATE", 0, 1, ""),
		c("TYPE2_NOP", 0x80000000, "A type-2 filler dword."),
		c("NOP_ONE_DWORD", 0xFFFF1000, "PACKET3(NOP, 0x3FFF): a NOP with no payload, the ring filler amdgpu and mesa use."),
		c("TYPE3", 3, ""),
		c("TYPE2", 2, ""),
	)},
	{Prefix: "PM4_IT_", Doc: "Type-3 opcodes the command processor executes.", Consts: consts(
		c("NOP", 0x10, ""), c("DISPATCH_DIRECT", 0x15, "Runs a built-in kernel (see KERNEL_*)."),
		c("WRITE_DATA", 0x37, ""), c("WAIT_REG_MEM", 0x3C, ""), c("INDIRECT_BUFFER", 0x3F, ""),
		c("COPY_DATA", 0x40, ""), c("PFP_SYNC_ME", 0x42, ""), c("EVENT_WRITE", 0x46, ""),
		c("RELEASE_MEM", 0x49, ""), c("DMA_DATA", 0x50, ""), c("ACQUIRE_MEM", 0x58, ""),
		c("SET_CONFIG_REG", 0x68, ""), c("SET_SH_REG", 0x76, ""), c("SET_UCONFIG_REG", 0x79, ""),
		c("INVALIDATE_TLBS", 0x98, "Invalidate the TLBs of every VMID 1..15 whose VM_PASID_LUT entry holds the PASID (2 dwords)."),
		c("PROTECTED_FENCE_SIGNAL", 0xD0, "Advance the queue's protected fence (see PM4_PROTECTED_FENCE_*)."),
	)},
	{Prefix: "PM4_INVALIDATE_TLBS_", Doc: "INVALIDATE_TLBS DW1 (AMD nvd.h PACKET3_INVALIDATE_TLBS_*).", Consts: consts(
		field("DST_SEL", 0, 4, "amdgpu's KIQ writes 1; vgpu has one hub and accepts any value."),
		field("ALL_HUB", 4, 1, "Every hub (vgpu has one)."),
		field("PASID", 5, 16, ""),
		field("FLUSH_TYPE", 29, 3, "As VM_INV_ENG_REQ.FLUSH_TYPE."),
	)},
	{Prefix: "PM4_", Doc: "Operand masks.", Consts: consts(
		c("REG_OFFSET_MASK", 0x3FFFF, "Register operands of WRITE_DATA, COPY_DATA and WAIT_REG_MEM: a dword offset in [17:0]."),
		c("SET_REG_OFFSET_MASK", 0xFFFF, "SET_*_REG DW1: register offset [15:0] relative to the space."),
	)},
	{Prefix: "CP_", Doc: "Command processor layout.", Consts: consts(
		c("COMPUTE_PIPES", 2, ""), c("QUEUES_PER_PIPE", 8, ""),
		c("IB_MAX_DEPTH", 2, "IB1 from the ring, IB2 from IB1."),
		c("QUEUE_SIZE_MIN", 5, "HQD_PQ_CONTROL.QUEUE_SIZE: 2^(5+1) = 64 dwords."),
		c("QUEUE_SIZE_MAX", 20, "2^21 dwords = 8 MiB."),
	)},
	{Prefix: "PM4_SPACE_", Doc: "Register spaces of SET_*_REG, as dword offsets into the register BAR (offset in the packet is relative to the base).", Consts: consts(
		c("CONFIG_BASE", 0x2000, ""), c("CONFIG_END", 0x2C00, ""),
		c("SH_BASE", 0x2C00, "SH registers are per-queue state (COMPUTE_USER_DATA_*), not MMIO."), c("SH_END", 0x3000, ""),
		c("UCONFIG_BASE", 0xC000, ""), c("UCONFIG_END", 0xC400, ""),
	)},
	{Prefix: "PM4_WRITE_DATA_", Doc: "WRITE_DATA DW1 (then DW2/3 address, DW4.. data).", Consts: consts(
		field("DST_SEL", 8, 4, "WRITE_DATA_DST_*."),
		field("WR_ONE_ADDR", 16, 1, "Write every dword to the same address."),
		field("WR_CONFIRM", 20, 1, ""),
		field("CACHE_POLICY", 25, 2, "CACHE_POLICY_*."),
		field("ENGINE_SEL", 30, 2, ""),
		c("DST_REG", 0, "Register: DW2 is a dword offset into the register BAR."),
		c("DST_MEM_GRBM", 1, "Memory, synchronous."),
		c("DST_TC_L2", 2, "Memory through L2."),
		c("DST_MEM", 5, "Memory."),
	)},
	{Prefix: "PM4_CACHE_POLICY_", Doc: "Cache policies of packet memory accesses.", Consts: consts(
		c("LRU", 0, ""), c("STREAM", 1, ""), c("NOA", 2, ""), c("BYPASS", 3, "Do not use L2."),
	)},
	{Prefix: "PM4_IB_", Doc: "INDIRECT_BUFFER: DW1 base lo, DW2 base hi, DW3 control.", Consts: consts(
		field("SIZE", 0, 20, "IB size in dwords."),
		field("CHAIN", 20, 1, "Replace the current IB instead of nesting."),
		field("VALID", 23, 1, ""),
		field("VMID", 24, 4, ""),
	)},
	{Prefix: "PM4_RELEASE_MEM_", Doc: "RELEASE_MEM (8 dwords): DW1 event and cache actions, DW2 selects, DW3/4 address, DW5/6 data, DW7 interrupt context id.", Consts: consts(
		field("EVENT_TYPE", 0, 6, ""), field("EVENT_INDEX", 8, 4, ""),
		field("GCR_GLM_WB", 12, 1, ""), field("GCR_GLM_INV", 13, 1, ""), field("GCR_GLV_INV", 14, 1, ""),
		field("GCR_GL1_INV", 15, 1, ""), field("GCR_GL2_US", 16, 1, ""), field("GCR_GL2_RANGE", 17, 1, ""),
		field("GCR_GL2_DISCARD", 19, 1, ""), field("GCR_GL2_INV", 20, 1, ""), field("GCR_GL2_WB", 21, 1, ""),
		field("GCR_SEQ", 22, 1, ""), field("CACHE_POLICY", 25, 2, ""), field("EXECUTE", 28, 1, ""),
		field("DST_SEL", 16, 2, "DW2: 0 memory, 1 TC/L2."),
		field("INT_SEL", 24, 3, "DW2: 0 none, 1 interrupt, 2 interrupt after the data write is confirmed."),
		field("DATA_SEL", 29, 3, "DW2: 0 none, 1 low 32 bits, 2 64 bits, 3 GPU clock, 4 system clock."),
		c("DATA_SEL_NONE", 0, ""), c("DATA_SEL_32", 1, ""), c("DATA_SEL_64", 2, ""),
		c("DATA_SEL_GPU_CLOCK", 3, ""), c("DATA_SEL_SYSTEM_CLOCK", 4, ""),
		c("INT_SEL_NONE", 0, ""), c("INT_SEL_IRQ", 1, ""), c("INT_SEL_IRQ_CONFIRM", 2, ""),
		c("DST_SEL_MEM", 0, ""), c("DST_SEL_TC_L2", 1, ""),
	)},
	{Prefix: "PM4_ACQUIRE_MEM_", Doc: "ACQUIRE_MEM (8 dwords): DW2 size lo, DW3 size hi [7:0], DW4 base lo, DW5 base hi [23:0] (both in 256-byte units; size 0xFFFFFFFF/0xFF = everything), DW6 poll interval, DW7 GCR_CNTL.", Consts: consts(
		field("GCR_GLI_INV", 0, 2, ""), field("GCR_GLM_WB", 4, 1, ""), field("GCR_GLM_INV", 5, 1, ""),
		field("GCR_GLK_WB", 6, 1, ""), field("GCR_GLK_INV", 7, 1, ""), field("GCR_GLV_INV", 8, 1, ""),
		field("GCR_GL1_INV", 9, 1, ""), field("GCR_GL2_US", 10, 1, ""), field("GCR_GL2_RANGE", 11, 2, "0 all, 2 the given range."),
		field("GCR_GL2_DISCARD", 13, 1, ""), field("GCR_GL2_INV", 14, 1, ""), field("GCR_GL2_WB", 15, 1, ""),
		field("GCR_SEQ", 16, 2, ""), field("GCR_RANGE_IS_PA", 18, 1, ""),
		c("GCR_GL2_RANGE_ALL", 0, ""), c("GCR_GL2_RANGE_RANGE", 2, "Act on COHER_BASE/COHER_SIZE (1 and 3 act on everything)."),
	)},
	{Prefix: "PM4_WAIT_REG_MEM_", Doc: "WAIT_REG_MEM (7 dwords): DW1 control, DW2/3 address (memory) or register offsets, DW4 reference, DW5 mask, DW6 poll interval. Compares (value & mask) FUNCTION (reference & mask).", Consts: consts(
		field("FUNCTION", 0, 3, "0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=, 6 >."),
		field("MEM_SPACE", 4, 2, "0 register, 1 memory."),
		field("OPERATION", 6, 2, "0 wait, 1 write REG_ADDR1 with the reference then wait on REG_ADDR2."),
		field("ENGINE", 8, 2, ""), field("CACHE_POLICY", 25, 2, ""),
		field("POLL_INTERVAL", 0, 16, "DW6: poll period in microseconds (0: 1)."),
		c("FUNCTION_ALWAYS", 0, ""), c("FUNCTION_LT", 1, ""), c("FUNCTION_LE", 2, ""), c("FUNCTION_EQ", 3, ""),
		c("FUNCTION_NE", 4, ""), c("FUNCTION_GE", 5, ""), c("FUNCTION_GT", 6, ""),
		c("MEM_SPACE_REG", 0, ""), c("MEM_SPACE_MEM", 1, ""),
		c("OPERATION_WAIT", 0, ""), c("OPERATION_WRITE_WAIT", 1, ""), c("OPERATION_WAIT_PREEMPTABLE", 3, ""),
	)},
	{Prefix: "PM4_EVENT_", Doc: "EVENT_WRITE DW1 and event types.", Consts: consts(
		field("TYPE", 0, 6, ""), field("INDEX", 8, 4, ""),
		c("CS_PARTIAL_FLUSH", 7, "Wait until earlier work of the queue completed (a barrier)."),
		c("CACHE_FLUSH_AND_INV_TS_EVENT", 0x14, "The end-of-pipe event RELEASE_MEM fences use."),
		c("BOTTOM_OF_PIPE_TS", 0x28, ""),
		c("INDEX_EOP", 5, "EVENT_INDEX of end-of-pipe events."),
		c("INDEX_CS_PARTIAL_FLUSH", 4, ""),
	)},
	{Prefix: "PM4_DMA_DATA_", Doc: "DMA_DATA (7 dwords): DW1 control, DW2/3 source (or fill data), DW4/5 destination, DW6 count.", Consts: consts(
		field("ENGINE", 0, 1, ""), field("SRC_CACHE_POLICY", 13, 2, ""), field("DST_SEL", 20, 2, "0 address, 3 address via L2."),
		field("DST_CACHE_POLICY", 25, 2, ""), field("SRC_SEL", 29, 2, "0 address, 2 immediate data (fill), 3 address via L2."),
		field("CP_SYNC", 31, 1, ""),
		field("BYTE_COUNT", 0, 26, "DW6."), field("SAS", 26, 1, "DW6: source is a register."), field("DAS", 27, 1, "DW6: destination is a register."),
		field("SAIC", 28, 1, "DW6: do not increment the source address."), field("DAIC", 29, 1, "DW6: do not increment the destination address."),
		field("RAW_WAIT", 30, 1, ""),
		c("SEL_ADDR", 0, ""), c("SEL_DATA", 2, ""), c("SEL_ADDR_L2", 3, ""),
	)},
	{Prefix: "PM4_COPY_DATA_", Doc: "COPY_DATA (6 dwords): DW1 control, DW2/3 source, DW4/5 destination.", Consts: consts(
		field("SRC_SEL", 0, 4, "0 register, 2 memory via L2, 5 immediate, 9 GPU clock."),
		field("DST_SEL", 8, 4, "0 register, 2 memory via L2, 5 memory."),
		field("SRC_CACHE_POLICY", 13, 2, ""), field("COUNT_SEL", 16, 1, "1 = 64 bits."),
		field("WR_CONFIRM", 20, 1, ""), field("DST_CACHE_POLICY", 25, 2, ""),
		c("SEL_REG", 0, ""), c("SEL_TC_L2", 2, ""), c("SEL_MEM", 5, "Memory (as destination) or immediate (as source)."), c("SEL_GPU_CLOCK", 9, ""),
	)},
	{Prefix: "SH_", Doc: "SH registers (SET_SH_REG offsets from PM4_SPACE_SH_BASE), per queue.", Consts: consts(
		c("COMPUTE_USER_DATA_0", 0x240, "DISPATCH_DIRECT: the KERNEL_* to run."),
		c("COMPUTE_USER_DATA_1", 0x241, "Destination address, low 32 bits."),
		c("COMPUTE_USER_DATA_2", 0x242, "Destination address, high 32 bits."),
		c("COMPUTE_USER_DATA_3", 0x243, "Source address (copy), low 32 bits."),
		c("COMPUTE_USER_DATA_4", 0x244, "Source address (copy), high 32 bits."),
		c("COMPUTE_USER_DATA_5", 0x245, "Fill value."),
		c("COMPUTE_USER_DATA_COUNT", 16, "USER_DATA_0..15 exist."),
	)},
	{Prefix: "KERNEL_", Doc: "Built-in kernels for DISPATCH_DIRECT (vgpu runs no shader ISA). A dispatch of X*Y*Z groups covers X*Y*Z*KERNEL_GROUP_DWORDS dwords.", Consts: consts(
		c("NONE", 0, ""), c("FILL", 1, "Write USER_DATA_5 to every dword of the destination."),
		c("COPY", 2, "Copy source dwords to the destination."),
		c("INCREMENT", 3, "Add 1 per workgroup to the dword at the destination."),
		c("ENDLESS", 4, "Never finishes: the queue stays busy until a dequeue reset (hang tests)."),
		c("GROUP_DWORDS", 64, ""),
	)},
	{Prefix: "IH_", Doc: "Interrupt vector entries: 8 dwords (AMD amdgpu_ih_decode_iv_helper layout).", Consts: consts(
		c("ENTRY_BYTES", 32, ""),
		field("DW0_CLIENT_ID", 0, 8, ""), field("DW0_SOURCE_ID", 8, 8, ""), field("DW0_RING_ID", 16, 8, ""),
		field("DW0_VMID", 24, 4, ""), field("DW0_VMID_TYPE", 31, 1, ""),
		field("DW2_TIMESTAMP_HI", 0, 16, "DW1 holds TIMESTAMP[31:0]."), field("DW2_TIMESTAMP_SRC", 31, 1, ""),
		field("DW3_PASID", 0, 16, ""), field("DW3_NODE_ID", 16, 8, ""),
		field("RING_ID_PIPE", 0, 2, "CP ring id: pipe."), field("RING_ID_ME", 2, 2, "CP ring id: micro engine (0 gfx, 1 compute)."), field("RING_ID_QUEUE", 4, 3, "CP ring id: queue."),
		c("CLIENT_GFX", 0x0A, "Client of VM faults."), c("CLIENT_GRBM_CP", 0x14, "Client of CP interrupts."),
		c("SRC_VM_FAULT", 0, "With CLIENT_GFX: a GPUVM fault; DW4..7 as VM_IV_*. VMID and PASID in DW0/DW3."),
		c("SRC_CP_RESERVED_BITS", 180, "A reserved packet field was not zero."),
		c("SRC_CP_EOP", 181, "End of pipe: RELEASE_MEM with INT_SEL. DW4 = INT_CTXID."),
		c("SRC_CP_BAD_OPCODE", 183, "Unknown opcode or malformed packet."),
		c("SRC_CP_GPF", 195, "The queue halted on a bad address or failed memory access; DW4 = CP_ERROR_*, DW5/6 = address."),
	)},
	{Prefix: "PTE_", Doc: "Page-table entries (the GART's and the PTBs of VMIDs 1..15), AMD gfx10/11 layout (gmc_v11_0.c, amdgpu_vm.h).", Consts: consts(
		field("VALID", 0, 1, ""), field("SYSTEM", 1, 1, "The address is a DMA (bus/IOVA) address, not a VRAM offset."),
		field("SNOOPED", 2, 1, ""), field("TMZ", 3, 1, "Encrypted (trusted memory zone); accepted and ignored."),
		field("EXECUTABLE", 4, 1, "VMIDs 1..15: needed by instruction fetches (the CP's IB fetch)."), field("READABLE", 5, 1, ""), field("WRITEABLE", 6, 1, ""),
		field("FRAGMENT", 7, 5, "The page is part of an aligned, physically contiguous run of 2^(12+FRAGMENT) bytes with the same flags: one TLB entry covers the run (VMIDs 1..15)."),
		field("ADDRESS", 12, 36, "Page address bits [47:12]."), field("MTYPE", 48, 3, "MTYPE_*: UC bypasses L2."),
		field("PRT", 51, 1, "Partially resident: with VALID clear, reads return 0 and writes are dropped, without a fault. With VALID set: amdgpu's no-retry marker (a no-retry fault)."),
		field("SW", 52, 2, "Software bits, ignored."),
		field("LOG", 55, 1, "Ignored."),
		field("TF", 56, 1, "Translate further. vgpu runs without translate-further (as gfx11): in a PTB entry it is amdgpu's no-retry marker (with PDE_PTE), a no-retry fault."),
		field("NOALLOC", 58, 1, "Ignored."),
		c("RESERVED_MASK", 0xFA00000000000000, "Bits 57 and 63:59: must be 0 in a PTE (a walker error)."),
		c("MTYPE_NC", 0, ""), c("MTYPE_WC", 1, ""), c("MTYPE_CC", 2, ""), c("MTYPE_UC", 3, ""),
		c("BYTES", 8, ""), c("PAGE_SIZE", 4096, ""),
	)},
	{Prefix: "PDE_", Doc: "Page-directory entries (GMC_GART_TABLE, VM_CONTEXT_PAGE_TABLE_BASE, the PDBs of VMIDs 1..15), AMD gfx10/11 layout.", Consts: consts(
		field("VALID", 0, 1, ""), field("SYSTEM", 1, 1, "The table is in system memory (a DMA address), not VRAM."),
		field("CACHE", 2, 1, "C: accepted and ignored."),
		field("ADDRESS", 12, 36, "GMC_GART_TABLE: table address bits [47:12]."),
		field("TABLE_ADDRESS", 6, 42, "VMIDs 1..15: next-level table address bits [47:6] (64-byte aligned)."),
		field("PTE", 54, 1, "P: the entry is a PTE (huge page) in PTE format: at PDB0 it maps 2^(21+block size) bytes (2 MiB), at PDB1 1 GiB; anywhere else a walker error."),
		field("BFS", 59, 5, "Block fragment size: accepted and ignored (translate-further is off)."),
		c("RESERVED_MASK", 0x0780000000000038, "Bits 5:3 and 58:55: must be 0 in a PDE that is not a PTE (a walker error)."),
	)},
	{Prefix: "VM_FAULT_", Doc: "GMC_VM_FAULT_STATUS.REASON values.", Consts: consts(
		c("NONE", 0, ""), c("OUTSIDE", 1, "The address is in no aperture."),
		c("INVALID_PTE", 2, "The GART entry is not valid."), c("NO_READ", 3, "Read of a page without READABLE."),
		c("NO_WRITE", 4, "Write to a page without WRITEABLE."), c("TABLE", 5, "The GART table itself could not be read."),
		c("BACKING", 6, "The translated address is not backed (no DMA mapping, Bus Master off, beyond VRAM)."),
		c("GART_DISABLED", 7, "GART aperture access with GART_CNTL.ENABLE clear."),
	)},
	{Prefix: "VM_", Doc: "GPUVM (VMIDs 1..15) sizes.", Consts: consts(
		c("CONTEXTS", 16, "VM_CONTEXT instances (instance 0 reserved)."),
		c("INV_ENGINES", 18, "VM_INV_ENG instances."),
		c("RETRY_CAM_ENTRIES", 64, "Retry CAM entries: at most this many distinct faulting pages have an IV outstanding."),
		c("TLB_ENTRIES", 1024, "Cached translations per VMID (pages, fragments or huge pages; 4-way set-associative)."),
		c("PDE_CACHE_ENTRIES", 256, "Cached page-directory entries per VMID."),
		c("LEVEL_BITS", 9, "VA bits per page-directory level."),
	)},
	{Prefix: "VM_CID_", Doc: "Memory client ids (VM_FAULT_STATUS.CID, gfxhub_v3_0 naming).", Consts: consts(
		c("CB_DB", 0, ""), c("GE1", 2, ""), c("GE2", 3, ""),
		c("CPF", 4, "Command fetch: ring and indirect-buffer reads."), c("CPC", 5, "Compute packet data accesses."),
		c("CPG", 6, "Graphics packet data accesses."), c("RLC", 7, ""), c("TCP", 8, ""),
		c("SQC_INST", 9, "Shader instruction fetch."), c("SQC_DATA", 10, "Shader scalar data."),
		c("SQG", 11, ""), c("SDMA0", 13, ""), c("SDMA1", 14, ""), c("GCR", 15, "Cache maintenance."),
	)},
	{Prefix: "VM_WALKER_", Doc: "VM_FAULT_STATUS.WALKER_ERROR values (vgpu's; AMD does not publish its encoding).", Consts: consts(
		c("NONE", 0, ""),
		c("READ_FAILED", 1, "A PDE or PTE could not be read: outside VRAM, an unmapped DMA address, Bus Master off."),
		c("RESERVED_BITS", 2, "An entry has reserved bits set (PTE_RESERVED_MASK, PDE_RESERVED_MASK)."),
		c("BAD_HUGE_PAGE", 3, "PDE_PTE at a level that has no huge pages (PDB2, or the root of a 4-level table)."),
		c("NO_RETRY_MARKER", 4, "An entry amdgpu writes to force a no-retry fault: PTE_TF or PDE_PTE in a PTB entry, or PTE_VALID with PTE_PRT."),
	)},
	{Prefix: "VM_PERM_", Doc: "VM_FAULT_STATUS.PERMISSION_FAULTS bits (vgpu's order).", Consts: consts(
		c("VALID", 1, "The PTE, or a PDE on the way, is not valid."), c("READ", 2, "Read of a page without PTE_READABLE."),
		c("WRITE", 4, "Write to a page without PTE_WRITEABLE."), c("EXECUTE", 8, "Instruction fetch from a page without PTE_EXECUTABLE."),
	)},
	{Prefix: "VM_IV_", Doc: "The VM-fault IV (IH_CLIENT_GFX, IH_SRC_VM_FAULT) as amdgpu's gmc_v11_0_process_interrupt decodes it: address = DW4 << 12 | (DW5 & 0xF) << 44.", Consts: consts(
		c("DW4_PAGE_LO", 0, "DW4 is the page number bits [31:0] (address bits [43:12])."),
		field("DW5_ADDR_HI", 0, 4, "Address bits [47:44]."),
		field("DW5_EXE", 4, 1, "An instruction fetch (AMDGPU_GMC9_FAULT_SOURCE_DATA_EXE)."),
		field("DW5_WRITE", 5, 1, "A write (..._WRITE)."),
		field("DW5_READ", 6, 1, "A data read (..._READ)."),
		field("DW5_RETRY", 7, 1, "A retry fault: the access waits for RETRY_CAM_ACK of DW6's index (..._RETRY)."),
		field("DW6_CAM_INDEX", 0, 10, "Retry faults: the CAM entry to acknowledge."),
		c("DW7_STATUS", 0, "DW7 is the fault's VM_FAULT_STATUS word (as latched, without MORE_FAULTS)."),
	)},
	{Prefix: "HQD_STATE_", Doc: "HQD_STATUS.STATE values.", Consts: consts(
		c("IDLE", 0, "Not active."), c("RUNNING", 1, "Active: fetching or executing."),
		c("WAITING", 2, "Parked in WAIT_REG_MEM (or waiting for the wptr)."), c("HALTED", 3, "Stopped by an error; see STATUS.ERROR."),
		c("BUSY_KERNEL", 4, "Running a dispatch that has not finished (the endless kernel)."),
	)},
	{Prefix: "HQD_DEQUEUE_", Doc: "HQD_DEQUEUE_REQUEST values.", Consts: consts(
		c("DRAIN", 1, "Stop at the next packet boundary and go idle, keeping rptr."),
		c("RESET", 2, "Stop now, discard in-flight work and the error, go idle."),
	)},
	{Prefix: "CP_ERROR_", Doc: "Why a queue halted (HQD_STATUS.ERROR, IH SRC_CP_* DW4).", Consts: consts(
		c("NONE", 0, ""), c("BAD_OPCODE", 1, "Unknown type-3 opcode, or a type-0/type-1 packet."),
		c("RESERVED_BITS", 2, "A field that must be zero was not."),
		c("BAD_PACKET", 3, "A field value the packet does not allow (count, selector, alignment)."),
		c("TRANSLATION", 4, "A GPU address did not translate (see GMC_VM_FAULT_*)."),
		c("MEMORY", 5, "A translated access failed (DMA refused: unmapped, read-only, Bus Master off)."),
		c("BAD_REGISTER", 6, "A register access outside the spaces packets may touch."),
		c("IB_DEPTH", 7, "INDIRECT_BUFFER nested deeper than IB2."),
		c("IB_LIMIT", 8, "Too many INDIRECT_BUFFER expansions for one submission (a loop)."),
		c("RING_CONFIG", 9, "The ring base/size is invalid."),
	)},
	{Prefix: "L2_", Doc: "L2 model.", Consts: consts(
		c("LINE_BYTES", 128, ""),
		c("EVENT_NONE", 0, ""), c("EVENT_STALE_READ", 1, "An engine read a cached line older than memory."),
		c("EVENT_DIRTY_FENCE", 2, "A fence was written while the queue's data was still only in L2."),
	)},
	{Prefix: "GPU_", Doc: "GPU address space for VMID 0.", Consts: consts(
		c("FB_BASE", 0x0000008000000000, "Where VRAM appears (GMC_FB_BASE)."),
		c("VA_BITS", 48, ""),
	)},
}
