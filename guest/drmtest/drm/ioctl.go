package drm

import "unsafe"

// Linux's _IOC encoding (asm-generic/ioctl.h, which x86 uses): nr [7:0], type [15:8],
// size [29:16], direction [31:30].
const (
	iocWrite = 1
	iocRead  = 2

	drmIoctlBase   = 'd'
	drmCommandBase = 0x40
)

func ioc(dir, nr, size uintptr) uintptr {
	return dir<<30 | size<<16 | drmIoctlBase<<8 | nr
}

func drmIOWR(nr, size uintptr) uintptr { return ioc(iocRead|iocWrite, nr, size) }
func drmIOW(nr, size uintptr) uintptr  { return ioc(iocWrite, nr, size) }

// syncIOCMagic is the sync_file ioctls' type (linux/sync_file.h).
const syncIOCMagic = '>'

func syncIOWR(nr, size uintptr) uintptr {
	return (iocRead|iocWrite)<<30 | size<<16 | syncIOCMagic<<8 | nr
}

// The ioctl codes, computed from the generated structs' sizes as DRM_IOWR does.
var (
	ioctlVgpuInfo        = drmIOWR(drmCommandBase+0x00, unsafe.Sizeof(Info{}))
	ioctlVgpuGemCreate   = drmIOWR(drmCommandBase+0x01, unsafe.Sizeof(GemCreate{}))
	ioctlVgpuGemMmap     = drmIOWR(drmCommandBase+0x02, unsafe.Sizeof(GemMmap{}))
	ioctlVgpuGemVA       = drmIOWR(drmCommandBase+0x03, unsafe.Sizeof(GemVA{}))
	ioctlVgpuUserq       = drmIOWR(drmCommandBase+0x04, sizeofUserq)
	ioctlVgpuUserqSignal = drmIOWR(drmCommandBase+0x05, unsafe.Sizeof(UserqSignal{}))
	ioctlVgpuUserqWait   = drmIOWR(drmCommandBase+0x06, unsafe.Sizeof(UserqWait{}))
	ioctlVgpuSubmit      = drmIOWR(drmCommandBase+0x07, unsafe.Sizeof(Submit{}))
	ioctlVgpuGemWaitIdle = drmIOWR(drmCommandBase+0x08, unsafe.Sizeof(GemWaitIdle{}))

	ioctlVersion           = drmIOWR(0x00, unsafe.Sizeof(Version{}))
	ioctlGemClose          = drmIOW(0x09, unsafe.Sizeof(GemClose{}))
	ioctlPrimeHandleToFD   = drmIOWR(0x2d, unsafe.Sizeof(PrimeHandle{}))
	ioctlSyncobjCreate     = drmIOWR(0xBF, unsafe.Sizeof(SyncobjCreate{}))
	ioctlSyncobjDestroy    = drmIOWR(0xC0, unsafe.Sizeof(SyncobjDestroy{}))
	ioctlSyncobjHandleToFD = drmIOWR(0xC1, unsafe.Sizeof(SyncobjHandle{}))
	ioctlSyncobjFDToHandle = drmIOWR(0xC2, unsafe.Sizeof(SyncobjHandle{}))
	ioctlSyncobjWait       = drmIOWR(0xC3, unsafe.Sizeof(SyncobjWait{}))
	ioctlSyncobjReset      = drmIOWR(0xC4, unsafe.Sizeof(SyncobjArray{}))
	ioctlSyncobjSignal     = drmIOWR(0xC5, unsafe.Sizeof(SyncobjArray{}))
	ioctlSyncFileInfo      = syncIOWR(4, unsafe.Sizeof(SyncFileInfo{}))
)
