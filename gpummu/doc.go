// Package gpummu is the GPU's memory path for engine accesses: it translates GPU addresses of
// VMID 0 to physical addresses, sends the access through the L2 (package l2) or around it, and
// owns the GMC register block (apertures, GART, fault latch, TLB invalidation).
//
// # Address space (VMID 0)
//
// GPU addresses are 48 bits. Two apertures translate; everything else faults:
//
//   - Frame buffer: [abi.GPU_FB_BASE, GPU_FB_BASE + VRAM size) is VRAM, linearly (VRAM size is
//     rounded down to whole pages). Always readable and writeable, cached.
//   - GART: pages GMC_GART_START>>12 .. GMC_GART_END>>12 (END is the inclusive last address),
//     translated through a flat table of 8-byte AMD PTEs at GMC_GART_TABLE (PDE format:
//     address bits [47:12], PTE_VALID, PTE_SYSTEM when the table is in system memory). A PTE
//     needs PTE_VALID; PTE_SYSTEM makes its address a DMA address, otherwise a VRAM offset;
//     PTE_READABLE / PTE_WRITEABLE are enforced; MTYPE_UC pages bypass the L2. GART_CNTL.ENABLE
//     must be set. Where the apertures overlap the frame buffer wins. END < START means no GART
//     aperture; one larger than MaxGARTPages is cut to that size.
//
// Only VMID 0 has apertures. VMIDs 1..15 are process address spaces translated by package
// gpuvm (SetVM): each page-table translation is then accessed like a VMID-0 page (through the
// L2 unless Bypass or MTYPE_UC; PRT and default-page translations read zeros or the default
// page and drop writes), and gpuvm's *Fault and *RetryFault errors are returned as they are.
// Without SetVM an access naming another VMID faults (VM_FAULT_OUTSIDE). VMID 0's
// translation faults are also reported to gpuvm (ReportFault: the AMD-format latch and the
// VM-fault IV), except those of accesses without a queue slot (the IH's own ring writes).
//
// # Data flow
//
// Read and Write split an access at page boundaries and translate each page. A translated page
// goes to l2.Cache.Read/Write (which splits further into lines), or to ReadUncached /
// WriteUncached when the access is Bypass (packet cache policy BYPASS: fences, IH entries, ring
// fetch) or the page is MTYPE_UC. GART entries are read straight from memory, never through
// the L2: the CPU writes the table. CacheOp translates a range the same way and applies an
// l2.Op to each physical piece. After a Write the OnWrite hook runs, so the CP can re-check
// WAIT_REG_MEMs parked on memory.
//
// # Translation cache
//
// Valid GART entries are cached per VMID (MaxTLBEntries entries, direct-mapped by page number)
// and dropped only by GMC_VM_INVALIDATE (a bit per VMID), a write to any GART register, or
// Reset. So a driver that rewrites a PTE without invalidating keeps using the old page, as on
// hardware, where the TLB is only coherent with the table through explicit invalidation.
// Invalid entries and table read failures are not cached: the next access reads the table
// again.
//
// # Faults and errors
//
// Guest mistakes are values, never panics: a translation failure is a *Fault (reason
// VM_FAULT_OUTSIDE, INVALID_PTE, NO_READ, NO_WRITE, TABLE or GART_DISABLED); an access that
// translated but that memory refused (DMA unmapped, Bus Master off, past the end of VRAM) or a
// write-back that failed is an *AccessError wrapping the cause. Both are latched in
// GMC_VM_FAULT_STATUS/ADDR (AccessError as VM_FAULT_BACKING): the first since the last
// VM_FAULT_CNTL.CLEAR is kept with its reason, VMID, slot and direction; later ones set MORE.
// Each is counted and logged at Warn, rate-limited. Every guest-programmed number is bounded
// before use (48-bit addresses, MaxGARTPages, VRAM size), so no arithmetic overflows.
//
// # Threading
//
// All methods are safe for concurrent use: register accesses come from the server's worker,
// memory accesses from many queue goroutines. Translation takes no lock: the decoded GART
// configuration is published as an immutable snapshot with its TLB generation, and TLB
// entries are read through per-entry sequence counters. One mutex guards the registers, TLB
// fills and flushes, and the fault latch; it is never held across a memory access. A TLB miss
// reads the PTE without the lock and inserts it only if no invalidation happened meanwhile
// (the generation of its snapshot still current), so an invalidation is never undone by a
// fill that started before it. ReadReg and WriteReg therefore never wait for memory. The L2
// has its own locking (see package l2); the MMU never holds its own lock while calling the L2
// or the Backing, and the OnWrite hook is called with no lock held.
package gpummu
