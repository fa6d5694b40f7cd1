// Package l2 models the GPU's shared L2 cache (GL2): a deterministic write-back cache of
// 128-byte lines between the engines and physical memory.
//
// # Why a cache model
//
// A real GL2 is write-back and not coherent with the CPU: engine writes reach memory only on
// a write-back (RELEASE_MEM/ACQUIRE_MEM GCR_GL2_WB) or an eviction, and a line the L2 already
// holds hides later CPU writes until it is invalidated (GCR_GL2_INV). A driver that forgets
// either works on a device that writes through and fails on hardware. vgpu models the cache so
// those mistakes show up under test, deterministically (no random eviction, no timing), and in
// strict mode names them.
//
// # Data flow
//
// The MMU (package gpummu) translates a GPU address to an engine.PhysAddr — a Domain (system
// memory by DMA address, or VRAM by offset) and an address — and calls Read or Write for
// cached pages, ReadUncached or WriteUncached for MTYPE_UC pages and BYPASS accesses, and
// Apply (WriteBack, Invalidate, Discard) for cache actions. The cache reaches memory through
// a Backing, which the device implements with dma.Space (system) and the VRAM memfd (VRAM).
// Host (CPU) accesses go straight to memory and never see the cache.
//
//   - Read: a hit is served from the line; a miss fills the whole line from memory first. If
//     the line cannot be filled as a whole (it straddles the end of VRAM or of a DMA mapping),
//     nothing is allocated and the requested bytes are read uncached.
//   - Write: write-allocate (fill, then modify). The written bytes are marked dirty in a
//     per-line byte mask and the writing queue slot is remembered. Write-back writes only dirty
//     bytes, so CPU data in other bytes of a shared line survives (as with GL2's byte masks).
//   - Replacement: at most Capacity lines (MaxLines by default, 4 MiB) in MaxWays-way sets
//     (the set is chosen by the line's address and domain); a fill into a full set evicts that
//     set's least recently used line, writing it back if dirty. The order depends only on the
//     sequence of accesses.
//   - WriteBack leaves lines resident and clean. Invalidate drops lines but writes dirty ones
//     back first: dropping data is never a side effect of invalidation, only of Discard (or of
//     a write-back whose memory is gone — counted and logged). Reset (device reset) drops
//     everything without writing back.
//   - Uncached accesses do not allocate, but the GPU stays coherent with itself: an uncached
//     read returns dirty bytes from a resident line, and an uncached write updates a resident
//     line. So a fence written with BYPASS is seen by another queue's cached WAIT_REG_MEM; only
//     CPU writes are hidden by the cache.
//
// # Strict mode
//
// With SetStrict(true) (L2_CNTL.STRICT) every read hit compares the bytes it returns that are
// not dirty with memory. A difference means memory changed behind the cache and the engine got
// old data: an L2_EVENT_STALE_READ (the stale data is still returned — that is the point).
// While an engine's uncached write to the same 64 KiB area is in progress a difference is not
// reported: that read is concurrent with the write, and either data is right. And
// FenceCheck, called by the CP before a fence write, reports an L2_EVENT_DIRTY_FENCE when lines
// written by that queue are still dirty. Events are counted (Stats, L2_STALE_READS,
// L2_DIRTY_FENCES), the last one is kept (kind, slot, GPU address) and each is logged at Warn,
// at most logBurst per second. Strict mode costs a memory read per hit; it is a debugging aid.
//
// # Threading
//
// Every method is safe for concurrent use by the queue goroutines and the server's worker, and
// no lock is ever held across a memory access. Each set has its own small lock, held only
// while an access looks at or copies the bytes of a line it holds, so queues touching lines of
// different sets never wait for each other. A line whose bytes move to or from memory is busy:
// owned by the one goroutine doing it (a fill, a write-back or eviction, an uncached access
// that overlaps it, a strict-mode check), which drops the set's lock across the copy; anyone
// else who needs that line waits for its release, and eviction passes it over. So a miss, a
// write-back or an eviction stays atomic with the line state it changes (no concurrent access
// can refill a line from memory before its dirty data got there), without a lock. An uncached
// write owns the lines it overlaps across its memory write and then updates them; a line
// filled meanwhile (which may hold the older bytes) is written back if dirty and dropped, as an
// eviction would. An uncached read owns the dirty lines it overlaps, so none is written back
// between its memory read and the merge of their bytes. Owners take several lines only in
// address order and never wait while owning a line above the one they wait for, so they cannot
// wait on each other in a cycle.
//
// Lines are owned only across direct memory copies. A Backing that can wait (system memory
// served through vfio-user DMA messages, answered by the client) also implements
// DirectBacking, whose methods only copy memory or refuse with ErrNotDirect; fills and
// write-backs use only those. Memory that is not direct is never cached: its accesses are
// served uncached, with no line owned (Stats.SlowAccesses). A line filled while its memory
// was direct and written back after the memory was replaced by message-served memory is lost
// like any failed write-back. So a queue waiting for the client never stalls other queues on
// the cache, and every wait for a line ends within a bounded memory copy.
//
// Per-area counters (hashed 64 KiB areas, atomics) say when no line can overlap a range, so
// uncached accesses and direct copies of memory the cache does not hold (rings, fences, IH
// entries, DMA copies) never look at a set.
//
// Strict and ReadReg use atomics and small locks only, and Stats takes each set's lock only to
// sum its counters, so a register read never waits for memory. L2_CONTROL (WriteReg) only records a request: the
// write-back/invalidate runs on a goroutine of the cache (StartMaintenance), L2_STATUS.BUSY
// says when it is done, and requests written meanwhile are merged. Reset forgets the request
// and status; Close refuses new requests and waits for a pass in progress.
//
// DropLost drops lines whose memory went away (a DMA_UNMAP, the client's disconnect) without
// writing them back, counting the dirty ones (L2_DISCARDED, kept across Reset).
package l2
