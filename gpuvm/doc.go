// Package gpuvm is the GPU's virtual memory for process address spaces: VM contexts 1..15
// beside the kernel's VMID 0 (package gpummu), each with a multi-level page table the driver
// builds in memory and the hub walks, TLBs and a PDE cache that go stale until invalidated,
// AMD's invalidation engines, protection faults the driver sees (a latch, IVs), recoverable
// retry faults with a retry CAM, and a strict mode that names every use of a stale
// translation. Register layouts and memory formats are AMD gfx10/11's (abi: VM, VM_CONTEXT,
// VM_INV_ENG, PTE_*, PDE_*, VM_IV_*); docs/device.md describes them for the driver writer.
//
// # Walk
//
// A context's VA range is pages START..END (inclusive); the walk indexes by the offset from
// START. PAGE_TABLE_DEPTH d gives d+1 levels, counted here from the leaf: 0 the PTB (9+block
// size bits), 1 PDB0, 2 PDB1, 3 PDB2 (9 bits each); the root takes every VA bit above its
// level. The root PDE is VM_CONTEXT_PAGE_TABLE_BASE. Each level's entry is read through the
// TableReader (8 bytes, never with a lock held); the level goes down by one per read, so a
// walk reads at most four entries whatever the tables hold — a table that points at itself
// is just a wrong translation, never a loop. A PDE must be valid and have no reserved bits; a
// PDE_PTE entry at PDB0 or PDB1 is a huge page (2 MiB, 1 GiB); anywhere else it is a walker
// error. A leaf with reserved bits is a walker error, TF (or PDE_PTE in a PTB) or VALID with
// PRT is amdgpu's no-retry marker, PRT without VALID reads zeros and drops writes without a
// fault. Entries in VRAM must lie inside VRAM (checked before the read); system-memory
// entries are DMA addresses the reader may refuse. Every failure is a named fault class.
//
// # Caches
//
// Each VMID has a TLB of TLBEntries translations (a page, a fragment run — PTE_FRAGMENT — or
// a huge page, so one entry covers a whole contiguous run) and a PDE cache of
// PDECacheEntries, both 4-way set-associative with the ways of a set replaced in turn. Nothing but an invalidation (an engine's
// REQ, INVALIDATE_TLBS by PASID, InvalidateVMIDs, Reset) drops them: a PTE the driver changes
// keeps being served from the TLB, as on hardware. A walk that raced an invalidation does not
// insert its result (a per-VMID generation). Register writes take effect for the next walk.
// Strict mode re-walks from the root on every use of cached state and reports a difference:
// counted, latched in VM_STALE_*, logged (rate-limited); the cached translation is still used.
//
// # Faults
//
// Every fault has a class that selects the context's CNTL bits: a retry fault (RETRY_*
// enabled for its class) allocates a retry-CAM entry for its page and sends one IV with the
// RETRY flag and the CAM index; later faults on that page, and all faults while the CAM is
// full, wait without an IV. The returned *RetryFault's channel closes on RETRY_CAM_ACK (or a
// free entry, a context reprogramming, Reset); the engine then replays. A no-retry fault is
// latched (first one; MORE_FAULTS after), sent as an IV if the class's ENABLE_INTERRUPT bit is
// set, and either redirected to the default page (ENABLE_DEFAULT: reads the page at
// FAULT_DEFAULT_ADDR, or zeros while it is 0; writes dropped) or returned as a *Fault that
// halts the engine. VMID 0's faults (detected by gpummu) use the same latch and IV through
// ReportFault.
//
// # Threading
//
// All methods are safe for concurrent use. Decoded context registers are immutable snapshots
// behind atomic pointers; each VMID's caches have their own mutex, held only for map
// operations; one hub mutex guards registers, the latch, the CAM and the stale event. No lock
// is held across a table read, the IV sink, the VMID-0 flush hook or a log line, so register
// reads and writes never wait for memory.
package gpuvm
