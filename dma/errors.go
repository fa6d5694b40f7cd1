package dma

import (
	"errors"
	"fmt"
	"syscall"
)

// Bounds on what the client and the engines can ask of a Space. Each is named so the reason it
// exists is written down once.
const (
	// MaxMappings bounds the number of live mappings. QEMU with a vIOMMU sends one 4 KiB
	// DMA_MAP per IOMMU page the guest maps, so a Space must cope with thousands; the bound keeps
	// a runaway client from growing the table (and the O(n) insert cost) without limit.
	MaxMappings = 65535

	// MaxAccess bounds one Read or Write. A copy through mmap holds the read lock, and DMA_UNMAP
	// cannot be answered while it is held, so this bounds how long one access can delay an unmap
	// reply (64 MiB is a few milliseconds of memcpy).
	MaxAccess = 64 << 20
)

// Sentinels. Access failures are returned as *FaultError whose Err is one of the first five (or
// the transport's own error for message DMA); errors.Is works through it.
var (
	// ErrUnmapped: some byte of the access is not covered by any mapping.
	ErrUnmapped = errors.New("dma: address not mapped")
	// ErrPermission: the mapping forbids this direction (a write to a read-only map, or a read
	// of a write-only one).
	ErrPermission = errors.New("dma: access not permitted by the mapping")
	// ErrBusMasterOff: the guest has not set Bus Master Enable; like hardware, no DMA happens.
	ErrBusMasterOff = errors.New("dma: bus master disabled")
	// ErrNoTransport: the memory is reachable only through DMA_READ/DMA_WRITE messages and no
	// client is connected.
	ErrNoTransport = errors.New("dma: no transport for message DMA")
	// ErrTooLarge: the access is longer than MaxAccess.
	ErrTooLarge = errors.New("dma: access longer than MaxAccess")
	// ErrRevoked: the device was cut off from guest memory (Bus Master cleared, reset,
	// disconnect) while a message access was in flight; its remaining messages were not sent.
	ErrRevoked = errors.New("dma: access revoked by a cut-off")

	// ErrMessageServed is returned (unwrapped, not counted as a fault) by ReadDirect and
	// WriteDirect when the memory is reachable only through DMA messages, which may wait.
	ErrMessageServed = errors.New("dma: memory served through messages")

	// ErrTooManyMappings is returned by Map when the map would leave more than MaxMappings
	// live mappings. It wraps ENOSPC so the transport replies with that errno.
	ErrTooManyMappings = fmt.Errorf("dma: more than %d mappings: %w", MaxMappings, syscall.ENOSPC)
)

// FaultError describes a DMA access that did not happen (or, for a multi-mapping access whose
// backing memory faulted midway, happened only in part). It is a guest-caused condition: the
// engine records it in device-visible state rather than passing it up as a host error.
type FaultError struct {
	IOVA   uint64 // start of the access
	Len    int    // length of the access
	Write  bool   // direction: true for Write, false for Read
	At     uint64 // first address that could not be accessed
	Reason string // human-readable detail for logs
	Err    error  // the sentinel (ErrUnmapped, ...) or the transport's error
}

func (e *FaultError) Error() string {
	dir := "read"
	if e.Write {
		dir = "write"
	}
	return fmt.Sprintf("dma: %s of %d bytes at %#x failed at %#x: %s: %v",
		dir, e.Len, e.IOVA, e.At, e.Reason, e.Err)
}

// Unwrap returns the cause, so errors.Is(err, ErrUnmapped) and friends work.
func (e *FaultError) Unwrap() error { return e.Err }
