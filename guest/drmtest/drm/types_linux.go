//go:build ignore

// Input to cgo -godefs (see gen.go): the uAPI of vgpu_drm.ko from its one source of truth,
// guest/drm/uapi/vgpu_drm.h, and the DRM core ioctls the program uses (include/drm/drm.h).
// The C ioctl macros are carried into the generated file as cIoctl* so a test can check the
// codes ioctl.go computes against them.

package drm

/*
#include <linux/types.h>
#include <drm/drm.h>
#include <linux/sync_file.h>
#include "vgpu_drm.h"
*/
import "C"

// The uAPI structs (vgpu_drm.h).
type (
	Info           C.struct_drm_vgpu_info
	GemCreate      C.struct_drm_vgpu_gem_create
	GemMmap        C.struct_drm_vgpu_gem_mmap
	GemWaitIdle    C.struct_drm_vgpu_gem_wait_idle
	GemVA          C.struct_drm_vgpu_gem_va
	MQDCompute     C.struct_drm_vgpu_userq_mqd_compute
	UserqIn        C.struct_drm_vgpu_userq_in
	UserqOut       C.struct_drm_vgpu_userq_out
	UserqSignal    C.struct_drm_vgpu_userq_signal
	UserqFenceInfo C.struct_drm_vgpu_userq_fence_info
	UserqWait      C.struct_drm_vgpu_userq_wait
	Submit         C.struct_drm_vgpu_submit
)

// The DRM core structs (drm/drm.h).
type (
	Version        C.struct_drm_version
	GemClose       C.struct_drm_gem_close
	PrimeHandle    C.struct_drm_prime_handle
	SyncobjCreate  C.struct_drm_syncobj_create
	SyncobjDestroy C.struct_drm_syncobj_destroy
	SyncobjHandle  C.struct_drm_syncobj_handle
	SyncobjWait    C.struct_drm_syncobj_wait
	SyncobjArray   C.struct_drm_syncobj_array
	SyncFileInfo   C.struct_sync_file_info
)

// sizeofUserq is the size of union drm_vgpu_userq (its in and out halves overlap).
const sizeofUserq = C.sizeof_union_drm_vgpu_userq

const (
	VGPU_GEM_DOMAIN_SYSTEM              = C.VGPU_GEM_DOMAIN_SYSTEM
	VGPU_GEM_DOMAIN_VRAM                = C.VGPU_GEM_DOMAIN_VRAM
	VGPU_GEM_DOMAIN_DOORBELL            = C.VGPU_GEM_DOMAIN_DOORBELL
	VGPU_GEM_CREATE_CPU_ACCESS_REQUIRED = C.VGPU_GEM_CREATE_CPU_ACCESS_REQUIRED
	VGPU_GEM_CREATE_NO_CPU_ACCESS       = C.VGPU_GEM_CREATE_NO_CPU_ACCESS

	VGPU_VA_OP_MAP          = C.VGPU_VA_OP_MAP
	VGPU_VA_OP_UNMAP        = C.VGPU_VA_OP_UNMAP
	VGPU_VM_PAGE_READABLE   = C.VGPU_VM_PAGE_READABLE
	VGPU_VM_PAGE_WRITEABLE  = C.VGPU_VM_PAGE_WRITEABLE
	VGPU_VM_PAGE_EXECUTABLE = C.VGPU_VM_PAGE_EXECUTABLE

	VGPU_HW_IP_GFX     = C.VGPU_HW_IP_GFX
	VGPU_HW_IP_COMPUTE = C.VGPU_HW_IP_COMPUTE

	VGPU_USERQ_OP_CREATE       = C.VGPU_USERQ_OP_CREATE
	VGPU_USERQ_OP_FREE         = C.VGPU_USERQ_OP_FREE
	VGPU_USERQ_OP_QUERY_STATUS = C.VGPU_USERQ_OP_QUERY_STATUS

	VGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_MASK  = C.VGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_MASK
	VGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_SHIFT = C.VGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_SHIFT
	VGPU_USERQ_PRIORITY_NORMAL_LOW               = C.VGPU_USERQ_PRIORITY_NORMAL_LOW
	VGPU_USERQ_PRIORITY_LOW                      = C.VGPU_USERQ_PRIORITY_LOW
	VGPU_USERQ_PRIORITY_NORMAL_HIGH              = C.VGPU_USERQ_PRIORITY_NORMAL_HIGH
	VGPU_USERQ_PRIORITY_HIGH                     = C.VGPU_USERQ_PRIORITY_HIGH

	VGPU_USERQ_MQD_COMPUTE_SIZE_V1 = C.VGPU_USERQ_MQD_COMPUTE_SIZE_V1
	VGPU_USERQ_CSA_MAX             = C.VGPU_USERQ_CSA_MAX

	VGPU_USERQ_QUERY_STATUS_FLAGS_HUNG  = C.VGPU_USERQ_QUERY_STATUS_FLAGS_HUNG
	VGPU_USERQ_QUERY_STATUS_FLAGS_RESET = C.VGPU_USERQ_QUERY_STATUS_FLAGS_RESET

	DRM_SYNCOBJ_CREATE_SIGNALED            = C.DRM_SYNCOBJ_CREATE_SIGNALED
	DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL        = C.DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL
	DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT = C.DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT

	DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE = C.DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE
)

// The ioctl codes as the C macros compute them (ioctl.go computes its own; a test compares).
const (
	cIoctlVgpuInfo          = C.DRM_IOCTL_VGPU_INFO
	cIoctlVgpuGemCreate     = C.DRM_IOCTL_VGPU_GEM_CREATE
	cIoctlVgpuGemMmap       = C.DRM_IOCTL_VGPU_GEM_MMAP
	cIoctlVgpuGemVA         = C.DRM_IOCTL_VGPU_GEM_VA
	cIoctlVgpuUserq         = C.DRM_IOCTL_VGPU_USERQ
	cIoctlVgpuUserqSignal   = C.DRM_IOCTL_VGPU_USERQ_SIGNAL
	cIoctlVgpuUserqWait     = C.DRM_IOCTL_VGPU_USERQ_WAIT
	cIoctlVgpuSubmit        = C.DRM_IOCTL_VGPU_SUBMIT
	cIoctlVgpuGemWaitIdle   = C.DRM_IOCTL_VGPU_GEM_WAIT_IDLE
	cIoctlVersion           = C.DRM_IOCTL_VERSION
	cIoctlGemClose          = C.DRM_IOCTL_GEM_CLOSE
	cIoctlPrimeHandleToFD   = C.DRM_IOCTL_PRIME_HANDLE_TO_FD
	cIoctlSyncobjCreate     = C.DRM_IOCTL_SYNCOBJ_CREATE
	cIoctlSyncobjDestroy    = C.DRM_IOCTL_SYNCOBJ_DESTROY
	cIoctlSyncobjHandleToFD = C.DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD
	cIoctlSyncobjFDToHandle = C.DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE
	cIoctlSyncobjWait       = C.DRM_IOCTL_SYNCOBJ_WAIT
	cIoctlSyncobjReset      = C.DRM_IOCTL_SYNCOBJ_RESET
	cIoctlSyncobjSignal     = C.DRM_IOCTL_SYNCOBJ_SIGNAL
	cIoctlSyncFileInfo      = C.SYNC_IOC_FILE_INFO
)
