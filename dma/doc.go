// Package dma is the device's view of guest memory: an IOVA → memory table built from the
// client's DMA_MAP and DMA_UNMAP commands, read and written by the engines.
//
// # Data flow
//
// The device layer turns each vfiouser.DMAMapping into a Mapping and calls Space.Map; DMA_UNMAP
// becomes Space.Unmap (or UnmapAll for the ALL flag and on disconnect). Engines call Space.Read
// and Space.Write with IOVAs taken from guest-programmed registers and packets. An access is
// served in one of two ways, per mapping:
//
//   - the mapping came with an fd: the backing file is mmapped once (MAP_SHARED, whole file)
//     and the access is a memcpy (an engine's direct copy of 16 KiB or more between guest
//     memory and VRAM streams: non-temporal stores, as a DMA engine's writes bypass the CPU
//     caches; stream.go);
//   - the mapping came without an fd (guest RAM not shared with us), or its fd could not be
//     mmapped: the access becomes DMA_READ/DMA_WRITE messages through the MessageTransport
//     (vfiouser.Peer), which the client serves from its main loop.
//
// One access may span several IOVA-adjacent mappings (with a vIOMMU QEMU maps guest buffers
// 4 KiB at a time), and may mix both kinds. It must be wholly covered, with the needed
// permission, or it fails with a *FaultError before any byte moves.
//
// # Backing files
//
// Every DMA_MAP carries its own dup of the client's fd; with a vIOMMU that is thousands of
// descriptors for one memfd. Backing files are keyed by (st_dev, st_ino): the first descriptor
// of a file is mmapped and kept, later ones are closed at once, and a reference count per file
// (one per mapping) unmaps and closes it with its last mapping. Map checks Offset+Size against
// the file size. A descriptor that is not a regular file, cannot be mmapped, or is read-only for
// a writable mapping does not fail the map — QEMU aborts the VM when a guest-RAM DMA_MAP fails
// after realize — it is served through messages instead and a warning is logged. A copy that
// faults because the client shrank the file is recovered (runtime/debug.SetPanicOnFault) and
// reported as a fault.
//
// # Client input
//
// Unmap is range-based and forgiving, as QEMU needs: it removes or trims every mapping inside
// the range, splits one that straddles both edges, treats a range running past 2^64 as "to the
// end", and succeeds when nothing matches. Map of a range that overlaps live mappings replaces
// the overlapped parts (logged); an identical re-map is a no-op. The table is bounded by
// MaxMappings and an access by MaxAccess.
//
// # Threading and the unmap contract
//
// Every method is safe for concurrent use. The server's worker calls Map/Unmap/SetBusMaster
// while engine goroutines call Read/Write.
//
// A sync.RWMutex guards the table. Accesses hold the read lock while they look up the route
// and copy through mmap; Map, Unmap, UnmapAll, SetBusMaster and SetTransport take the write
// lock. So when Unmap returns, no copy through the removed memory is in flight and none will
// start: the device may reply to DMA_UNMAP and the client may reuse the memory. (Lookups are a
// binary search over a sorted slice; table edits are O(n) memmoves of pointers.)
//
// No lock is held across message DMA. The access copies the transport and the route under the
// read lock, releases it, then sends DMA_READ/DMA_WRITE. Holding it would deadlock: the client
// serves those messages from its main loop, and that loop may be blocked waiting for our reply
// to a DMA_UNMAP, which needs the write lock. For message-served memory the client is the
// arbiter of what is still mapped (it answers an access to unmapped memory with an error, which
// comes back as a *FaultError wrapping the transport's error).
//
// # Cut-off
//
// Turning Bus Master off, UnmapAll and SetTransport are the device's cut-off from guest
// memory (reset, FLR, disconnect). Each takes the write lock, so it returns only when no copy
// through mmap is in flight, and advances a revocation count that a message access checks
// before each message it sends: an access that began before the cut-off sends nothing after it
// (ErrRevoked). One waiting for the client's answer returns at once with ErrRevoked: each
// message runs on its own goroutine with private buffers, whose late answer is dropped. So a
// cut-off, and the engine stop that follows it, never waits on the client. A message already
// sent is a write the device made before the cut-off.
//
// ReadDirect and WriteDirect are the path for callers that must never wait (the L2 holds its
// lock across them): they serve only mmapped memory and return ErrMessageServed, uncounted,
// when any byte would need a message.
//
// # Errors
//
// Guest-caused failures are values: *FaultError, with errors.Is matching ErrUnmapped,
// ErrPermission, ErrBusMasterOff, ErrNoTransport, ErrTooLarge or ErrRevoked. The engine records them in
// device state; they are counted in Stats and logged only at debug level. Map errors wrap the
// errno the transport should reply with (EINVAL, ENOSPC).
package dma
