package abi

// The shader ISA: eBPF instructions as the Linux BPF ABI encodes them (8-byte little-endian
// slots, LD_IMM64 taking two), run per work-item on the compute units. What eBPF leaves to its
// host — the entry state, the helper calls, where the stack lives, and the errors that end a
// dispatch — is vgpu's, defined here and specified in docs/shader.md.

// shaderBlock is strict mode's sanitizer for shaders: pipeline hazards and stale L0 reads.
var shaderBlock = Block{
	Name: "SHADER", Base: 0x0900, Size: 0x100,
	Doc: "Shader sanitizer (strict mode, L2_CNTL.STRICT; docs/shader.md \"Sanitizer\"): pipeline hazards and stale L0 reads, counted since reset, the last of each named.",
	Registers: []Register{
		{Name: "HAZARDS", Offset: 0x00, Access: RO, Doc: "Pipeline hazards named: accesses (a packet's, or a later dispatch's load or store) to bytes an in-flight dispatch of the same queue had written, with no barrier in between; each access counts once."},
		{Name: "HAZARD_INFO", Offset: 0x04, Access: RO, Doc: "The last hazard.", Fields: []Field{
			{Name: "KIND", Shift: 0, Width: 4, Doc: "A SHADER_HAZARD_* value."},
			{Name: "SLOT", Shift: 8, Width: 8, Doc: "Hardware queue slot of both parties."},
			{Name: "VMID", Shift: 16, Width: 4, Doc: "Their address space."},
			{Name: "OPCODE", Shift: 24, Width: 8, Doc: "The accessing packet's PM4 opcode (PACKET_* kinds; 0 for a dispatch's own access)."},
		}},
		{Name: "HAZARD_ADDR_LO", Offset: 0x08, Access: RO, Doc: "First byte of the access that the dispatch had written (GPU virtual address), low 32 bits."},
		{Name: "HAZARD_ADDR_HI", Offset: 0x0C, Access: RO},
		{Name: "HAZARD_SIZE", Offset: 0x10, Access: RO, Doc: "Bytes of the access from HAZARD_ADDR on that the dispatch had written (the first such range)."},
		{Name: "HAZARD_BY_LO", Offset: 0x14, Access: RO, Doc: "GPU address of the packet that made the access; for a dispatch's own load or store, its DISPATCH packet. Low 32 bits."},
		{Name: "HAZARD_BY_HI", Offset: 0x18, Access: RO},
		{Name: "HAZARD_WRITER_LO", Offset: 0x1C, Access: RO, Doc: "GPU address of the DISPATCH packet of the in-flight dispatch that had written the memory, low 32 bits."},
		{Name: "HAZARD_WRITER_HI", Offset: 0x20, Access: RO},
		{Name: "STALE_READS", Offset: 0x24, Access: RO, Doc: "Loads a compute unit's L0 served with data the L2 no longer holds (a missing GL0/GLV invalidation)."},
		{Name: "STALE_INFO", Offset: 0x28, Access: RO, Doc: "The last stale L0 read.", Fields: []Field{
			{Name: "SLOT", Shift: 8, Width: 8, Doc: "Hardware queue slot of the dispatch."},
			{Name: "VMID", Shift: 16, Width: 4},
		}},
		{Name: "STALE_ADDR_LO", Offset: 0x2C, Access: RO, Doc: "Its GPU virtual address, low 32 bits."},
		{Name: "STALE_ADDR_HI", Offset: 0x30, Access: RO},
	},
}

var shaderGroups = []ConstGroup{
	{Prefix: "SHADER_HAZARD_", Doc: "What the second party of a pipeline hazard did (SHADER_HAZARD_INFO.KIND).", Consts: consts(
		c("NONE", 0, "No hazard named yet."),
		c("PACKET_READ", 1, "A packet read memory the dispatch had written (COPY_DATA, DMA_DATA, a built-in kernel, a program or DISPATCH_INDIRECT fetch...)."),
		c("PACKET_WRITE", 2, "A packet wrote memory the dispatch had written (WRITE_DATA, COPY_DATA, DMA_DATA, RELEASE_MEM data...)."),
		c("DISPATCH_READ", 3, "A later dispatch of the queue loaded memory the dispatch had written."),
		c("DISPATCH_WRITE", 4, "A later dispatch of the queue stored to (or did an atomic on) memory the dispatch had written."),
	)},
	{Prefix: "IH_SRC_SHADER_", Doc: "Shader interrupts (IH_CLIENT_GRBM_CP; vgpu's source ids). DW0 ring id and VMID, DW3 PASID as for every IV.", Consts: consts(
		c("TRAP", 0xF2, "HELPER_TRAP: DW4 the code (R1 low 32 bits), DW5 the program counter (slot index), DW6 the dispatch's work-item linear id, DW7 0."),
		c("ERROR", 0xF3, "A shader ended its dispatch: DW4 SHADER_ERR_*, DW5 the program counter, DW6/DW7 the faulting address (low, high) or 0."),
	)},
	{Prefix: "SHADER_", Doc: "Shader execution: entry state, stack window and limits (docs/shader.md).", Consts: consts(
		c("INSN_BYTES", 8, "Bytes per instruction slot (LD_IMM64 takes two)."),
		c("MAX_INSNS", 65536, "Most instruction slots a program may have: a longer one is SHADER_ERR_PROGRAM_SIZE."),
		c("STACK_TOP", 1<<56, "R10 at entry: the top of the work-item's private stack. The stack window [STACK_TOP-STACK_WINDOW, STACK_TOP) is no GPU memory (GPU virtual addresses have 48 bits)."),
		c("STACK_WINDOW", 1<<32, "Bytes below STACK_TOP that belong to the stack window: an access there but below the work-item's stack is SHADER_ERR_STACK_OVERFLOW."),
		c("STACK_DEFAULT", 512, "Stack bytes per work-item when the dispatch asks for none (eBPF's own stack size)."),
		c("STACK_MAX", 65536, "Most stack bytes per work-item."),
		c("REG_ARGS", 1, "R1 at entry: the kernel-argument pointer (COMPUTE_USER_DATA_0/1, a GPU virtual address)."),
		c("REG_GLOBAL_X", 2, "R2 at entry: the work-item's global id in X (group id × group size + local id)."),
		c("REG_GLOBAL_Y", 3, "R3 at entry: global id in Y."),
		c("REG_GLOBAL_Z", 4, "R4 at entry: global id in Z."),
		c("REG_LOCAL_LINEAR", 5, "R5 at entry: the work-item's linear index inside its workgroup (x + y·sx + z·sx·sy)."),
	)},
	{Prefix: "SHADER_HELPER_", Doc: "Helper calls (eBPF CALL imm): argument in R1, result in R0; R1-R5 keep their values (unlike Linux's convention), so a call clobbers only R0.", Consts: consts(
		c("GLOBAL_ID", 1, "R0 = global id in dimension R1 (0..2)."),
		c("LOCAL_ID", 2, "R0 = local id in dimension R1."),
		c("GROUP_ID", 3, "R0 = workgroup id in dimension R1."),
		c("LOCAL_SIZE", 4, "R0 = workgroup size in dimension R1."),
		c("NUM_GROUPS", 5, "R0 = number of workgroups in dimension R1."),
		c("BARRIER", 6, "Workgroup barrier: the work-item waits until every work-item of its workgroup reached a barrier (or exited). R0 = 0."),
		c("TRAP", 7, "Raises IH_SRC_SHADER_TRAP with code R1 and the program counter; the work-item continues. R0 = 0."),
		c("SLEEP", 8, "The work-item sleeps at least R1 ns (at most SHADER_SLEEP_MAX); other work runs meanwhile. R0 = 0."),
		c("SLEEP_MAX", 1000000, "Longest SLEEP in ns (1 ms): a longer request sleeps this long."),
	)},
	{Prefix: "SHADER_ERR_", Doc: "Why a shader ended its dispatch (IH_SRC_SHADER_ERROR DW4).", Consts: consts(
		c("NONE", 0, ""),
		c("ILLEGAL_INSTRUCTION", 1, "An opcode the ISA does not have (packet access, map loads, BPF-to-BPF calls, unknown classes), a reserved field set, or a write to R10."),
		c("JUMP_OUT_OF_RANGE", 2, "A jump whose target is outside the program or inside an LD_IMM64, or control falling off the end."),
		c("STACK_OVERFLOW", 3, "An access in the stack window below the work-item's stack (or reaching past STACK_TOP)."),
		c("MISALIGNED", 4, "A load, store or atomic whose address is not a multiple of its size."),
		c("BAD_HELPER", 5, "A CALL to a helper id that does not exist, or a helper argument out of range (a dimension > 2)."),
		c("MEMORY_FAULT", 6, "A load, store or atomic the memory path refused (translation or permission fault without retry, or a failed access)."),
		c("PROGRAM_SIZE", 7, "The program is empty or longer than SHADER_MAX_INSNS."),
		c("PROGRAM_FETCH", 8, "The program could not be read from its GPU address (a fault on the fetch)."),
	)},
	{Prefix: "SHADER_ITEM_", Doc: "A work-item's state in a context save area.", Consts: consts(
		c("READY", 0, "It runs from its PC when resumed."),
		c("BARRIER", 1, "It waits at a workgroup barrier (PC is after the call)."),
		c("SLEEPING", 2, "It sleeps for the item's remaining SLEEP_NS (PC is after the call)."),
		c("EXITED", 3, "It has executed EXIT."),
		c("RETRY", 4, "Parked on a retry fault (never saved: saved as READY, the access replays)."),
	)},
	{Prefix: "SHADER_CSA_", Doc: "The context save area of a preempted dispatch (vgpu's layout, little endian; docs/shader.md): a header, then each workgroup in flight: its index (u64) and its work-items, each REGS (11 u64, R0..R10), PC (u32), KIND (u32, SHADER_ITEM_*), SLEEP_NS (u64), then its stack.", Consts: consts(
		c("MAGIC", 0x41534356, "Header DW0: \"VCSA\" in memory order."),
		c("VERSION", 1, "Header DW1."),
		c("DW_NEXT", 2, "Header DW2-3: the first workgroup not started (u64)."),
		c("DW_TOTAL", 4, "Header DW4-5: the dispatch's workgroups (u64)."),
		c("DW_GROUPS", 6, "Header DW6: workgroups saved."),
		c("DW_GROUP_ITEMS", 7, "Header DW7: work-items per workgroup."),
		c("DW_STACK", 8, "Header DW8: stack bytes per work-item."),
		c("HEADER_BYTES", 64, "Header size; DW9-15 are 0."),
		c("GROUP_BYTES", 8, "Per saved workgroup, before its items: the index."),
		c("ITEM_BYTES", 104, "Per work-item, before its stack."),
	)},
	{Prefix: "SHADER_CSA_ERR_", Doc: "CP_ERROR_CONTEXT_SAVE's ERROR_INFO: why a queue's dispatches could not be saved or restored.", Consts: consts(
		c("TOO_SMALL", 1, "The MQD's CP_HQD_CTX_SAVE_SIZE is smaller than the dispatches in flight need (ERROR_ADDR: the CSA base)."),
		c("FAULT", 2, "A write or read of the context save area failed (ERROR_ADDR: the address)."),
		c("CORRUPT", 3, "The saved state read back does not decode or does not fit its dispatch (ERROR_ADDR: its address in the CSA)."),
		c("PROGRAM_CHANGED", 4, "The program of a preempted dispatch changed while the queue was unmapped (ERROR_ADDR: COMPUTE_PGM)."),
		c("TIMEOUT", 5, "The compute units did not stop the dispatch within the preemption bound."),
		c("TOO_MANY", 6, "More dispatches in flight than a context save may hold (cp.MaxSavedDispatches)."),
	)},
}
