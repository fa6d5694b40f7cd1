/*
 * The part of Linux's DRM core uAPI (include/uapi/drm/drm.h) that vgpu-drmtest uses: the ioctl
 * macros, GEM close, PRIME and syncobj. The Go mirror is generated from this with cgo -godefs,
 * so the program needs no libdrm headers on the build host (Debian's linux-libc-dev has none).
 * The layouts and numbers are the kernel's ABI (stable); the ioctl codes below were compared
 * with those Linux 6.1's include/uapi/drm/drm.h gives for every one the program uses (equal), and
 * gen_test.go checks the Go side against these macros.
 */
#ifndef _DRM_H_
#define _DRM_H_

#include <linux/types.h>
#include <asm/ioctl.h>

#define DRM_IOCTL_BASE   'd'
#define DRM_IO(nr)       _IO(DRM_IOCTL_BASE, nr)
#define DRM_IOR(nr, t)   _IOR(DRM_IOCTL_BASE, nr, t)
#define DRM_IOW(nr, t)   _IOW(DRM_IOCTL_BASE, nr, t)
#define DRM_IOWR(nr, t)  _IOWR(DRM_IOCTL_BASE, nr, t)
#define DRM_COMMAND_BASE 0x40
#define DRM_COMMAND_END  0xA0

struct drm_version {
	int version_major;
	int version_minor;
	int version_patchlevel;
	__kernel_size_t name_len;
	char *name;
	__kernel_size_t date_len;
	char *date;
	__kernel_size_t desc_len;
	char *desc;
};

struct drm_gem_close {
	__u32 handle;
	__u32 pad;
};

struct drm_prime_handle {
	__u32 handle;
	__u32 flags;
	__s32 fd;
};

#define DRM_SYNCOBJ_CREATE_SIGNALED (1 << 0)
struct drm_syncobj_create {
	__u32 handle;
	__u32 flags;
};

struct drm_syncobj_destroy {
	__u32 handle;
	__u32 pad;
};

#define DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE (1 << 0)
#define DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE (1 << 0)
struct drm_syncobj_handle {
	__u32 handle;
	__u32 flags;
	__s32 fd;
	__u32 pad;
};

#define DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL        (1 << 0)
#define DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT (1 << 1)
struct drm_syncobj_wait {
	__u64 handles;
	__s64 timeout_nsec; /* absolute, CLOCK_MONOTONIC */
	__u32 count_handles;
	__u32 flags;
	__u32 first_signaled;
	__u32 pad;
};

struct drm_syncobj_array {
	__u64 handles;
	__u32 count_handles;
	__u32 pad;
};

#define DRM_IOCTL_VERSION              DRM_IOWR(0x00, struct drm_version)
#define DRM_IOCTL_GEM_CLOSE            DRM_IOW(0x09, struct drm_gem_close)
#define DRM_IOCTL_PRIME_HANDLE_TO_FD   DRM_IOWR(0x2d, struct drm_prime_handle)
#define DRM_IOCTL_PRIME_FD_TO_HANDLE   DRM_IOWR(0x2e, struct drm_prime_handle)
#define DRM_IOCTL_SYNCOBJ_CREATE       DRM_IOWR(0xBF, struct drm_syncobj_create)
#define DRM_IOCTL_SYNCOBJ_DESTROY      DRM_IOWR(0xC0, struct drm_syncobj_destroy)
#define DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD DRM_IOWR(0xC1, struct drm_syncobj_handle)
#define DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE DRM_IOWR(0xC2, struct drm_syncobj_handle)
#define DRM_IOCTL_SYNCOBJ_WAIT         DRM_IOWR(0xC3, struct drm_syncobj_wait)
#define DRM_IOCTL_SYNCOBJ_RESET        DRM_IOWR(0xC4, struct drm_syncobj_array)
#define DRM_IOCTL_SYNCOBJ_SIGNAL       DRM_IOWR(0xC5, struct drm_syncobj_array)

#endif
