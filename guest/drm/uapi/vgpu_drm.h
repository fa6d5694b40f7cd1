/* SPDX-License-Identifier: MIT */
/*
 * vgpu_drm.h - the uAPI of vgpu_drm.ko, the render-node DRM driver for the vgpu
 * virtual GPU. This header is the one source of truth: the guest Go program
 * generates its mirror from it (cgo -godefs) and docs/uapi.md explains it.
 *
 * Conventions: structs hold only __u16/__u32/__u64 (and one __s64), naturally
 * aligned, sizes a multiple of 8; every pad field must be 0 (else -EINVAL);
 * user pointers are __u64. Shapes follow amdgpu's where amdgpu has one.
 */
#ifndef VGPU_DRM_UAPI_H
#define VGPU_DRM_UAPI_H

#include <drm/drm.h>

#if defined(__cplusplus)
extern "C" {
#endif

#define DRM_VGPU_INFO          0x00
#define DRM_VGPU_GEM_CREATE    0x01
#define DRM_VGPU_GEM_MMAP      0x02
#define DRM_VGPU_GEM_VA        0x03
#define DRM_VGPU_USERQ         0x04
#define DRM_VGPU_USERQ_SIGNAL  0x05
#define DRM_VGPU_USERQ_WAIT    0x06
#define DRM_VGPU_SUBMIT        0x07
#define DRM_VGPU_GEM_WAIT_IDLE 0x08

#define DRM_IOCTL_VGPU_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_VGPU_INFO, struct drm_vgpu_info)
#define DRM_IOCTL_VGPU_GEM_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_VGPU_GEM_CREATE, struct drm_vgpu_gem_create)
#define DRM_IOCTL_VGPU_GEM_MMAP \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_VGPU_GEM_MMAP, struct drm_vgpu_gem_mmap)
#define DRM_IOCTL_VGPU_GEM_VA \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_VGPU_GEM_VA, struct drm_vgpu_gem_va)
#define DRM_IOCTL_VGPU_USERQ \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_VGPU_USERQ, union drm_vgpu_userq)
#define DRM_IOCTL_VGPU_USERQ_SIGNAL \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_VGPU_USERQ_SIGNAL, struct drm_vgpu_userq_signal)
#define DRM_IOCTL_VGPU_USERQ_WAIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_VGPU_USERQ_WAIT, struct drm_vgpu_userq_wait)
#define DRM_IOCTL_VGPU_SUBMIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_VGPU_SUBMIT, struct drm_vgpu_submit)
#define DRM_IOCTL_VGPU_GEM_WAIT_IDLE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_VGPU_GEM_WAIT_IDLE, struct drm_vgpu_gem_wait_idle)

/* ---- INFO ---- */

struct drm_vgpu_info {
	__u64 vram_size;          /* bytes of VRAM */
	__u64 vram_visible_size;  /* bytes of VRAM inside the BAR0 window (CPU-mappable) */
	__u64 va_start;           /* the user VA range GEM_VA accepts: [va_start, va_end) */
	__u64 va_end;
	__u32 gpu_page_size;      /* 4096 */
	__u32 doorbell_page_size; /* bytes of one doorbell object (4096: 512 doorbells of 8 bytes) */
	__u32 num_hqd_slots;      /* compute HQD slots MES schedules user queues on */
	__u32 userq_ip_mask;      /* 1 << VGPU_HW_IP_COMPUTE (| 1 << VGPU_HW_IP_GFX) */
	__u32 eop_size;           /* the compute MQD's eop buffer: bytes */
	__u32 eop_alignment;      /* and alignment of its VA */
	__u32 max_queues_per_file;
	__u32 pad;
};

/* ---- GEM ---- */

#define VGPU_GEM_DOMAIN_SYSTEM   (1 << 0) /* shmem pages, GPU access by DMA (through the IOMMU) */
#define VGPU_GEM_DOMAIN_VRAM     (1 << 1) /* buddy allocator over VRAM */
#define VGPU_GEM_DOMAIN_DOORBELL (1 << 2) /* one doorbell page (size must be doorbell_page_size) */

#define VGPU_GEM_CREATE_CPU_ACCESS_REQUIRED (1 << 0) /* VRAM: place inside the BAR window */
#define VGPU_GEM_CREATE_NO_CPU_ACCESS       (1 << 1) /* VRAM: place beyond the window if it can */

struct drm_vgpu_gem_create {
	__u64 size;   /* non-zero, rounded up to 4 KiB */
	__u32 domain; /* exactly one VGPU_GEM_DOMAIN_* */
	__u32 flags;  /* VGPU_GEM_CREATE_* */
	__u32 handle; /* out */
	__u32 pad;
};

struct drm_vgpu_gem_mmap {
	__u32 handle;
	__u32 pad;
	__u64 offset; /* out: the fake offset for mmap(2) on the render node */
};

struct drm_vgpu_gem_wait_idle {
	__u32 handle;
	__u32 pad;
	__s64 timeout_ns; /* relative; 0 = poll */
};

/* ---- GEM_VA ---- */

#define VGPU_VA_OP_MAP   1
#define VGPU_VA_OP_UNMAP 2

#define VGPU_VM_PAGE_READABLE   (1 << 0)
#define VGPU_VM_PAGE_WRITEABLE  (1 << 1)
#define VGPU_VM_PAGE_EXECUTABLE (1 << 2)

struct drm_vgpu_gem_va {
	__u32 handle;
	__u32 op;    /* VGPU_VA_OP_* */
	__u32 flags; /* VGPU_VM_PAGE_*; UNMAP: 0 */
	__u32 pad;
	__u64 va;
	__u64 offset_in_bo;
	__u64 size;
};

/* ---- USERQ ---- */

#define VGPU_HW_IP_GFX     0
#define VGPU_HW_IP_COMPUTE 1

#define VGPU_USERQ_OP_CREATE       1
#define VGPU_USERQ_OP_FREE         2
#define VGPU_USERQ_OP_QUERY_STATUS 3

#define VGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_MASK  0x3
#define VGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_SHIFT 0
#define VGPU_USERQ_PRIORITY_NORMAL_LOW  0 /* MES NORMAL */
#define VGPU_USERQ_PRIORITY_LOW         1 /* MES LOW */
#define VGPU_USERQ_PRIORITY_NORMAL_HIGH 2 /* MES MEDIUM */
#define VGPU_USERQ_PRIORITY_HIGH        3 /* MES HIGH; needs CAP_SYS_NICE, else -EACCES */

#define VGPU_USERQ_QUERY_STATUS_FLAGS_HUNG  (1 << 0)
#define VGPU_USERQ_QUERY_STATUS_FLAGS_RESET (1 << 1) /* the queue was reset (MES RESET) */

/*
 * The per-IP MQD of a compute queue, pointed to by drm_vgpu_userq_in.mqd. mqd_size is the
 * whole struct, or VGPU_USERQ_MQD_COMPUTE_SIZE_V1 (eop_va only: no context save area).
 */
struct drm_vgpu_userq_mqd_compute {
	__u64 eop_va;   /* eop_size bytes, eop_alignment aligned, inside one mapping */
	/*
	 * The context save area (as KFD's ctx_save_restore_address): where a preemption writes
	 * the state of the queue's shader dispatches in flight, so they resume exactly. 0 and 0:
	 * none (a queue preempted with a dispatch in flight then halts). Else csa_va 4096-byte
	 * aligned, csa_size a multiple of 4096 up to VGPU_USERQ_CSA_MAX, inside one mapping.
	 */
	__u64 csa_va;
	__u64 csa_size;
};
#define VGPU_USERQ_MQD_COMPUTE_SIZE_V1 8
#define VGPU_USERQ_CSA_MAX             (1ULL << 30)

struct drm_vgpu_userq_in {
	__u32 op;              /* VGPU_USERQ_OP_* */
	__u32 queue_id;        /* FREE, QUERY_STATUS */
	__u32 ip_type;         /* VGPU_HW_IP_* */
	__u32 doorbell_handle; /* a DOORBELL BO of the caller */
	__u32 doorbell_offset; /* index of the queue's 64-bit doorbell in that BO */
	__u32 flags;           /* VGPU_USERQ_CREATE_FLAGS_* */
	__u64 queue_va;        /* ring: 256-byte aligned */
	__u64 queue_size;      /* bytes: a power of two >= 4096 */
	__u64 rptr_va;         /* 64-bit rptr (dwords), 8-byte aligned */
	__u64 wptr_va;         /* 64-bit wptr (dwords), 8-byte aligned */
	__u64 mqd;             /* user pointer to the IP's MQD struct */
	__u64 mqd_size;        /* sizeof that struct */
};

struct drm_vgpu_userq_out {
	__u32 queue_id;
	__u32 pad;
	__u64 fence_va;     /* the queue's 64-bit fence slot, read-only in the caller's VM */
	__u32 status_flags; /* QUERY_STATUS: VGPU_USERQ_QUERY_STATUS_FLAGS_* */
	__u32 pad2;
};

union drm_vgpu_userq {
	struct drm_vgpu_userq_in in;
	struct drm_vgpu_userq_out out;
};

/* ---- USERQ_SIGNAL / USERQ_WAIT ---- */

struct drm_vgpu_userq_signal {
	__u32 queue_id;
	__u32 pad;
	__u64 syncobj_handles;     /* user pointer to __u32[num_syncobj_handles] */
	__u64 num_syncobj_handles;
	__u64 bo_read_handles;     /* user pointer to __u32[num_bo_read_handles] */
	__u64 bo_write_handles;    /* user pointer to __u32[num_bo_write_handles] */
	__u32 num_bo_read_handles;
	__u32 num_bo_write_handles;
};

struct drm_vgpu_userq_fence_info {
	__u64 va;
	__u64 value;
};

struct drm_vgpu_userq_wait {
	__u32 waitq_id;
	__u32 pad;
	__u64 syncobj_handles;          /* user pointer to __u32[num_syncobj_handles] */
	__u64 syncobj_timeline_handles; /* user pointer to __u32[num_syncobj_timeline_handles] */
	__u64 syncobj_timeline_points;  /* user pointer to __u64[num_syncobj_timeline_handles] */
	__u64 bo_read_handles;          /* user pointer to __u32[num_bo_read_handles] */
	__u64 bo_write_handles;         /* user pointer to __u32[num_bo_write_handles] */
	__u16 num_syncobj_timeline_handles;
	__u16 num_fences;               /* in: room in out_fences; out: entries (or needed) */
	__u32 num_syncobj_handles;
	__u32 num_bo_read_handles;
	__u32 num_bo_write_handles;
	__u64 out_fences;               /* user pointer to drm_vgpu_userq_fence_info[num_fences] */
};

/* ---- SUBMIT (the driver's kernel queue, through drm_sched) ---- */

struct drm_vgpu_submit {
	__u64 ib_va;       /* an IB in the caller's VM (0 with ib_dwords 0: an empty job) */
	__u32 ib_dwords;
	__u32 in_syncobj;  /* 0 or a syncobj to wait on first */
	__u32 out_syncobj; /* 0 or a syncobj that gets the job's fence */
	__u32 flags;       /* 0 */
	__u64 seqno;       /* out: the job's fence seqno */
};

#if defined(__cplusplus)
}
#endif

#endif /* VGPU_DRM_UAPI_H */
