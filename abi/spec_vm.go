package abi

// The GPUVM register blocks: the process address spaces (VMIDs 1..15) beside the kernel's
// VMID 0 (block GMC). vgpu's own map, AMD gfx11 (gfxhub_v3_0) field layouts and semantics:
// GCVM_CONTEXTn_CNTL, GCVM_L2_PROTECTION_FAULT_STATUS/ADDR/CNTL, GCVM_INVALIDATE_ENGn_*, the
// IH_VMID_n_LUT PASID table and the retry CAM's acknowledgement.

// vmBlock holds what the hub shares between contexts: the fault latch, the default page, the
// retry CAM, the PASID table and strict mode.
var vmBlock = Block{
	Name: "VM", Base: 0x3000, Size: 0x100,
	Doc: "GPUVM hub: the protection-fault latch (AMD GCVM_L2_PROTECTION_FAULT_* layout, every VMID), the default page, the retry CAM, the PASID table and the stale-translation detector.",
	Registers: []Register{
		{Name: "FAULT_STATUS", Offset: 0x00, Access: RO, Doc: "The first no-retry fault since the last FAULT_CNTL.CLEAR (0: none), in AMD's GCVM_L2_PROTECTION_FAULT_STATUS layout; later faults only set MORE_FAULTS.", Fields: []Field{
			{Name: "MORE_FAULTS", Shift: 0, Width: 1, Doc: "Another fault happened after the latched one."},
			{Name: "WALKER_ERROR", Shift: 1, Width: 3, Doc: "A VM_WALKER_* value: the page-table walk itself failed."},
			{Name: "PERMISSION_FAULTS", Shift: 4, Width: 4, Doc: "VM_PERM_* bits: what the entry refused (or that it was not valid)."},
			{Name: "MAPPING_ERROR", Shift: 8, Width: 1, Doc: "The address is outside the context's range, or the context is not enabled."},
			{Name: "CID", Shift: 9, Width: 9, Doc: "Memory client: a VM_CID_* value."},
			{Name: "RW", Shift: 18, Width: 1, Doc: "1: the access was a write."},
			{Name: "ATOMIC", Shift: 19, Width: 1, Doc: "The access was an atomic (no engine issues atomics yet)."},
			{Name: "VMID", Shift: 20, Width: 4},
			{Name: "PRT", Shift: 29, Width: 1, Doc: "The faulting entry has PTE_PRT set (with PTE_VALID: amdgpu's no-retry marker)."},
		}},
		{Name: "FAULT_ADDR_LO", Offset: 0x04, Access: RO, Doc: "Page number (GPU address >> 12) of the latched fault, bits [31:0] (AMD LOGICAL_PAGE_ADDR_LO32)."},
		{Name: "FAULT_ADDR_HI", Offset: 0x08, Access: RO, Doc: "Page number bits [35:32] in [3:0] (AMD LOGICAL_PAGE_ADDR_HI4)."},
		{Name: "FAULT_CNTL", Offset: 0x0C, Access: RW, Doc: "Fault latch control (AMD GCVM_L2_PROTECTION_FAULT_CNTL bit 0).", Fields: []Field{
			{Name: "CLEAR_PROTECTION_FAULT_STATUS_ADDR", Shift: 0, Width: 1, Doc: "Writing 1 clears FAULT_STATUS/ADDR and re-arms the latch (reads 0)."},
			{Name: "CRASH_ON_NO_RETRY_FAULT", Shift: 30, Width: 1, Doc: "Halt on every no-retry fault, whatever the context's *_ENABLE_DEFAULT policy says."},
		}},
		{Name: "FAULT_DEFAULT_ADDR_LO", Offset: 0x10, Access: RW, Doc: "The default (dummy) page that accesses faulting under an ENABLE_DEFAULT policy reach: page number bits [31:0] of a DMA address (amdgpu: dummy_page >> 12). While LO and HI are both 0 such reads return zeros without touching memory."},
		{Name: "FAULT_DEFAULT_ADDR_HI", Offset: 0x14, Access: RW, Doc: "Page number bits [35:32] in [3:0] (amdgpu: dummy_page >> 44)."},
		{Name: "RETRY_CAM_ACK", Offset: 0x18, Access: WO, Doc: "Write a CAM index (from a retry fault IV's DW6): the entry is freed and every access waiting on it is replayed (as amdgpu's retry_cam_ack doorbell)."},
		{Name: "RETRY_CAM_STATUS", Offset: 0x1C, Access: RO, Fields: []Field{
			{Name: "USED", Shift: 0, Width: 8, Doc: "CAM entries holding an unacknowledged retry fault."},
			{Name: "SIZE", Shift: 8, Width: 8, Doc: "CAM entries (VM_RETRY_CAM_ENTRIES)."},
			{Name: "WAITING_FULL", Shift: 16, Width: 1, Doc: "An access is waiting for a free entry (it sent no IV)."},
		}},
		{Name: "RETRY_FAULTS", Offset: 0x20, Access: RO, Doc: "Retry-fault IVs sent since reset (one per CAM entry allocated)."},
		{Name: "FAULTS", Offset: 0x24, Access: RO, Doc: "No-retry faults since reset (latched or not)."},
		{Name: "STRICT_CNTL", Offset: 0x28, Access: RW, Fields: []Field{
			{Name: "ENABLE", Shift: 0, Width: 1, Doc: "Check every cached translation against the page tables in memory: a use of a stale translation is counted, latched and logged."},
		}},
		{Name: "STALE_USES", Offset: 0x2C, Access: RO, Doc: "Strict mode: accesses that used a cached translation (TLB or PDE cache) other than the page tables in memory give."},
		{Name: "STALE_EVENT", Offset: 0x30, Access: RO, Doc: "The last stale use.", Fields: []Field{
			{Name: "SLOT", Shift: 0, Width: 8, Doc: "Hardware queue slot (0xFF: no queue)."},
			{Name: "VMID", Shift: 8, Width: 4},
			{Name: "WRITE", Shift: 12, Width: 1},
			{Name: "NEW_FAULTS", Shift: 13, Width: 1, Doc: "Memory holds no usable translation any more (NEW_PTE is the entry the walk stopped at)."},
		}},
		{Name: "STALE_VA_LO", Offset: 0x34, Access: RO, Doc: "GPU address of the last stale use, low 32 bits."},
		{Name: "STALE_VA_HI", Offset: 0x38, Access: RO},
		{Name: "STALE_OLD_PTE_LO", Offset: 0x3C, Access: RO, Doc: "The cached entry that was used, low 32 bits."},
		{Name: "STALE_OLD_PTE_HI", Offset: 0x40, Access: RO},
		{Name: "STALE_NEW_PTE_LO", Offset: 0x44, Access: RO, Doc: "The entry memory holds now, low 32 bits."},
		{Name: "STALE_NEW_PTE_HI", Offset: 0x48, Access: RO},
		{Name: "PASID_LUT_0", Offset: 0x80, Access: RW, Doc: "PASID of VMID 0 in [15:0] (as IH_VMID_0_LUT); PASID_LUT_n is at PASID_LUT_0 + 4n. Fault IVs carry it; INVALIDATE_TLBS selects VMIDs 1..15 by it."},
		{Name: "PASID_LUT_1", Offset: 0x84, Access: RW}, {Name: "PASID_LUT_2", Offset: 0x88, Access: RW},
		{Name: "PASID_LUT_3", Offset: 0x8C, Access: RW}, {Name: "PASID_LUT_4", Offset: 0x90, Access: RW},
		{Name: "PASID_LUT_5", Offset: 0x94, Access: RW}, {Name: "PASID_LUT_6", Offset: 0x98, Access: RW},
		{Name: "PASID_LUT_7", Offset: 0x9C, Access: RW}, {Name: "PASID_LUT_8", Offset: 0xA0, Access: RW},
		{Name: "PASID_LUT_9", Offset: 0xA4, Access: RW}, {Name: "PASID_LUT_10", Offset: 0xA8, Access: RW},
		{Name: "PASID_LUT_11", Offset: 0xAC, Access: RW}, {Name: "PASID_LUT_12", Offset: 0xB0, Access: RW},
		{Name: "PASID_LUT_13", Offset: 0xB4, Access: RW}, {Name: "PASID_LUT_14", Offset: 0xB8, Access: RW},
		{Name: "PASID_LUT_15", Offset: 0xBC, Access: RW},
	},
}

// vmContextBlock: one instance per VMID, as GCVM_CONTEXTn_*.
var vmContextBlock = Block{
	Name: "VM_CONTEXT", Base: 0x3200, Size: 0x20 * 16, Count: 16, Stride: 0x20,
	Doc: "Process address spaces, one instance per VMID. Instance 0 is reserved (VMID 0 is programmed through GMC_GART_*): it reads 0 and ignores writes. Registers take effect for the next page-table walk; cached translations stay until invalidated.",
	Registers: []Register{
		{Name: "CNTL", Offset: 0x00, Access: RW, Doc: "AMD GCVM_CONTEXTn_CNTL. A write that changes ENABLE_CONTEXT, PAGE_TABLE_DEPTH or PAGE_TABLE_BLOCK_SIZE releases the context's waiting retry faults (they replay).", Fields: []Field{
			{Name: "ENABLE_CONTEXT", Shift: 0, Width: 1},
			{Name: "PAGE_TABLE_DEPTH", Shift: 1, Width: 2, Doc: "Levels below the root: 3 is PDB2 → PDB1 → PDB0 → PTB (amdgpu's num_level)."},
			{Name: "PAGE_TABLE_BLOCK_SIZE", Shift: 3, Width: 4, Doc: "A PTB maps 2^(9+n) pages (amdgpu: block_size - 9)."},
			{Name: "RETRY_PERMISSION_OR_INVALID_PAGE_FAULT", Shift: 7, Width: 1, Doc: "Invalid PDEs/PTEs and permission faults are retry faults: the access waits for RETRY_CAM_ACK."},
			{Name: "RETRY_OTHER_FAULT", Shift: 8, Width: 1, Doc: "Range faults and walker errors are retry faults too."},
			{Name: "RANGE_PROTECTION_FAULT_ENABLE_INTERRUPT", Shift: 9, Width: 1, Doc: "Send a VM-fault IV for this kind of no-retry fault."},
			{Name: "RANGE_PROTECTION_FAULT_ENABLE_DEFAULT", Shift: 10, Width: 1, Doc: "1: the access goes to the default page (reads it, writes are dropped) and execution continues; 0: the engine halts."},
			{Name: "DUMMY_PAGE_PROTECTION_FAULT_ENABLE_INTERRUPT", Shift: 11, Width: 1, Doc: "Kept for AMD's layout: vgpu raises no dummy-page faults."},
			{Name: "DUMMY_PAGE_PROTECTION_FAULT_ENABLE_DEFAULT", Shift: 12, Width: 1},
			{Name: "PDE0_PROTECTION_FAULT_ENABLE_INTERRUPT", Shift: 13, Width: 1, Doc: "PDE faults: a PDE at any level not valid, and walker errors."},
			{Name: "PDE0_PROTECTION_FAULT_ENABLE_DEFAULT", Shift: 14, Width: 1},
			{Name: "VALID_PROTECTION_FAULT_ENABLE_INTERRUPT", Shift: 15, Width: 1, Doc: "The leaf PTE is not valid (and not PRT)."},
			{Name: "VALID_PROTECTION_FAULT_ENABLE_DEFAULT", Shift: 16, Width: 1},
			{Name: "READ_PROTECTION_FAULT_ENABLE_INTERRUPT", Shift: 17, Width: 1},
			{Name: "READ_PROTECTION_FAULT_ENABLE_DEFAULT", Shift: 18, Width: 1},
			{Name: "WRITE_PROTECTION_FAULT_ENABLE_INTERRUPT", Shift: 19, Width: 1},
			{Name: "WRITE_PROTECTION_FAULT_ENABLE_DEFAULT", Shift: 20, Width: 1},
			{Name: "EXECUTE_PROTECTION_FAULT_ENABLE_INTERRUPT", Shift: 21, Width: 1},
			{Name: "EXECUTE_PROTECTION_FAULT_ENABLE_DEFAULT", Shift: 22, Width: 1},
		}},
		{Name: "PAGE_TABLE_BASE_LO", Offset: 0x04, Access: RW, Doc: "The root page directory in PDE format (amdgpu_gmc_pd_addr): PDE_ADDRESS, PDE_SYSTEM, PDE_VALID. Low 32 bits."},
		{Name: "PAGE_TABLE_BASE_HI", Offset: 0x08, Access: RW},
		{Name: "START_LO", Offset: 0x0C, Access: RW, Doc: "First page (GPU address >> 12) of the context's range, bits [31:0]. The walk indexes from this page."},
		{Name: "START_HI", Offset: 0x10, Access: RW, Doc: "Bits [35:32] in [3:0]."},
		{Name: "END_LO", Offset: 0x14, Access: RW, Doc: "Last page of the range (inclusive; amdgpu: max_pfn - 1), bits [31:0]."},
		{Name: "END_HI", Offset: 0x18, Access: RW, Doc: "Bits [35:32] in [3:0]."},
	},
}

// vmInvalidateBlock: AMD's invalidation engines, GCVM_INVALIDATE_ENGn_*.
var vmInvalidateBlock = Block{
	Name: "VM_INV_ENG", Base: 0x3400, Size: 0x20 * 18, Count: 18, Stride: 0x20,
	Doc: "TLB invalidation engines (AMD GCVM_INVALIDATE_ENGn_*). A REQ write invalidates at once and sets the ACK bits of the VMIDs it named; it never waits for memory.",
	Registers: []Register{
		{Name: "SEM", Offset: 0x00, Access: RW, Doc: "Semaphore: a read returns 1 and takes it when it was free, 0 when another holder has it; writing 0 releases it."},
		{Name: "REQ", Offset: 0x04, Access: RW, Doc: "Invalidation request: writing it runs the invalidation.", Fields: []Field{
			{Name: "PER_VMID_INVALIDATE_REQ", Shift: 0, Width: 16, Doc: "A bit per VMID (bit 0: VMID 0's GART translations)."},
			{Name: "FLUSH_TYPE", Shift: 16, Width: 3, Doc: "0 legacy, 1 lightweight, 2 heavyweight: all act alike on vgpu."},
			{Name: "INVALIDATE_L2_PTES", Shift: 19, Width: 1, Doc: "Drop cached leaf translations (with INVALIDATE_L1_PTES: either drops them)."},
			{Name: "INVALIDATE_L2_PDE0", Shift: 20, Width: 1, Doc: "Drop cached PDB0 entries (PTB addresses)."},
			{Name: "INVALIDATE_L2_PDE1", Shift: 21, Width: 1},
			{Name: "INVALIDATE_L2_PDE2", Shift: 22, Width: 1},
			{Name: "INVALIDATE_L1_PTES", Shift: 23, Width: 1},
			{Name: "CLEAR_PROTECTION_FAULT_STATUS_ADDR", Shift: 24, Width: 1, Doc: "Also clear and re-arm VM_FAULT_STATUS/ADDR."},
			{Name: "LOG_REQUEST", Shift: 25, Width: 1, Doc: "Ignored."},
			{Name: "INVALIDATE_4K_PAGES_ONLY", Shift: 26, Width: 1, Doc: "Drop only translations of single 4 KiB pages (not fragments or huge pages)."},
		}},
		{Name: "ACK", Offset: 0x08, Access: RO, Fields: []Field{
			{Name: "PER_VMID_INVALIDATE_ACK", Shift: 0, Width: 16, Doc: "The VMIDs of the last REQ, once done (at once on vgpu)."},
			{Name: "SEMAPHORE", Shift: 16, Width: 1, Doc: "The engine's semaphore is held."},
		}},
		{Name: "ADDR_RANGE_LO", Offset: 0x0C, Access: RW, Doc: "AMD's range (S_BIT [0], page address bits [31:1]); kept, but vgpu invalidates the whole VMID (more than asked, never less). amdgpu writes 0xFFFFFFFF."},
		{Name: "ADDR_RANGE_HI", Offset: 0x10, Access: RW, Doc: "Page address bits [4:0]; amdgpu writes 0x1F."},
	},
}
