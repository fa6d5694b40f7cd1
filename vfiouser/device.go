package vfiouser

import (
	"os"
)

// Region flags, from include/uapi/linux/vfio.h (VFIO_REGION_INFO_FLAG_*), as carried by
// DEVICE_GET_REGION_INFO.
const (
	RegionFlagRead  = 1 << 0
	RegionFlagWrite = 1 << 1
	RegionFlagMmap  = 1 << 2
	RegionFlagCaps  = 1 << 3
)

// Device info flags (VFIO_DEVICE_FLAGS_*).
const (
	DeviceFlagReset = 1 << 0
	DeviceFlagPCI   = 1 << 1
)

// IRQ info flags (VFIO_IRQ_INFO_*).
const (
	IRQInfoEventfd    = 1 << 0
	IRQInfoMaskable   = 1 << 1
	IRQInfoAutomasked = 1 << 2
	IRQInfoNoResize   = 1 << 3
)

// SET_IRQS flags (VFIO_IRQ_SET_*): exactly one DATA_* and one ACTION_* per request.
const (
	IRQSetDataNone      = 1 << 0
	IRQSetDataBool      = 1 << 1
	IRQSetDataEventfd   = 1 << 2
	IRQSetActionMask    = 1 << 3
	IRQSetActionUnmask  = 1 << 4
	IRQSetActionTrigger = 1 << 5

	IRQSetDataTypeMask   = IRQSetDataNone | IRQSetDataBool | IRQSetDataEventfd
	IRQSetActionTypeMask = IRQSetActionMask | IRQSetActionUnmask | IRQSetActionTrigger
)

// PCI IRQ indexes (VFIO_PCI_*_IRQ_INDEX).
const (
	IRQIndexINTx = 0
	IRQIndexMSI  = 1
	IRQIndexMSIX = 2
	IRQIndexErr  = 3
	IRQIndexReq  = 4
)

// DMA_MAP flags.
const (
	DMAFlagRead  = 1 << 0
	DMAFlagWrite = 1 << 1
)

// SparseArea is one mmap-able window inside a region, as an offset from the region start.
type SparseArea struct {
	Offset, Size uint64
}

// RegionInfo describes one region for DEVICE_GET_REGION_INFO.
type RegionInfo struct {
	Flags uint32 // RegionFlagRead|Write|Mmap; the server adds RegionFlagCaps itself
	Size  uint64
	// File backs the mmap-able part of the region; it is sent (dup'ed) with every reply that
	// carries RegionFlagMmap. Nil when the region cannot be mmapped. The Device keeps ownership.
	File *os.File
	// FileOffset is where the region starts inside File (the reply's "offset" field).
	FileOffset uint64
	// Sparse lists the mmap-able areas. Empty with File set means the whole region.
	Sparse []SparseArea
}

// IRQInfo describes one IRQ index for DEVICE_GET_IRQ_INFO.
type IRQInfo struct {
	Flags uint32
	Count uint32
}

// DeviceInfo is what DEVICE_GET_INFO, GET_REGION_INFO and GET_IRQ_INFO report.
type DeviceInfo struct {
	Flags   uint32 // DeviceFlagReset|DeviceFlagPCI
	Regions []RegionInfo
	IRQs    []IRQInfo
}

// DMAMapping is one DMA_MAP request. File is nil when the client sent no fd (guest memory
// not shareable): then the memory is reachable only through Peer.DMARead/DMAWrite.
type DMAMapping struct {
	IOVA, Size uint64
	Offset     uint64 // offset of IOVA inside File
	Flags      uint32 // DMAFlagRead|DMAFlagWrite
	File       *os.File
}

// SetIRQs is one DEVICE_SET_IRQS request, already validated for shape: exactly one data type and
// one action, Bools has Count entries for IRQSetDataBool, Files has at most Count entries for
// IRQSetDataEventfd (fewer — typically zero — means "de-assign the rest").
type SetIRQs struct {
	Flags uint32
	Index uint32
	Start uint32
	Count uint32
	Bools []bool
	Files []*os.File // ownership passes to the Device
}

// Peer is the client as seen from the device: the server→client requests. Methods block until
// the client replies (or the connection drops), so they must never be called from inside a
// Device method: QEMU serves them from its main loop, which may itself be waiting for our reply.
type Peer interface {
	DMARead(iova uint64, p []byte) error
	DMAWrite(iova uint64, p []byte) error
}

// Device is the whole of what the server needs from the thing it serves. The server calls its
// methods one at a time, never concurrently, in the order the client's commands arrived (from
// whichever goroutine holds the executor role; see the package doc).
// Errors wrapping a syscall.Errno are replied with that errno; any other error replies EINVAL.
type Device interface {
	Info() DeviceInfo
	RegionRead(region uint32, offset uint64, p []byte) error
	RegionWrite(region uint32, offset uint64, p []byte) error
	DMAMap(m DMAMapping) error
	// DMAUnmap removes every mapping inside [iova, iova+size); size 0 with all=true drops
	// everything. It must not return before no engine can touch that memory any more.
	DMAUnmap(iova, size uint64, all bool) error
	SetIRQs(req SetIRQs) error
	Reset() error
	// Connected is called when a client has negotiated a version; Disconnected when it goes away
	// (drop DMA maps and interrupt fds, keep device state).
	Connected(p Peer)
	Disconnected()
}
