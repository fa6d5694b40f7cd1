/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel queue (kq.c, kq_sched.c, submit.c): one compute HQD the driver programs through
 * MMIO (a VMID-0 ring, as amdgpu's KIQ/kernel rings), driven by a drm_gpu_scheduler.
 *
 *  - Jobs: SUBMIT's (an empty job, or an IB in the file's VM run in the VMID the driver keeps
 *    for kernel-queue jobs, VGPU_KQ_VMID, whose context the ring points at the file's page
 *    tables first, with amdgpu's emit_vm_flush: WRITE_DATA of the context registers and the
 *    PASID LUT, then an invalidation request and a wait for its ACK), and the driver's own
 *    (VRAM clears, BO copies: DMA_DATA through the FB aperture or the GART).
 *  - The job's hardware fence is a RELEASE_MEM of its 64-bit seqno with an interrupt; the EOP
 *    IV (vgpu_kq_irq) signals every fence the memory has reached.
 *  - A lost EOP interrupt (kq_fallback.c): a timer reads the fence memory while fences are
 *    pending, as amdgpu's fence fallback timer, signals what the ring wrote long enough ago and
 *    counts it; the job completes, no reset.
 *  - The scheduler's job timeout (kq_timeout_ms), or a CP error IV of the slot, resets the HQD
 *    (DEQUEUE_RESET) and restarts the ring: the guilty job ends with -ETIME, the others run
 *    again in order.
 */
#ifndef VGPU_DRM_KQ_H
#define VGPU_DRM_KQ_H

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/timer.h>
#include <linux/types.h>

#include <drm/gpu_scheduler.h>

struct vgpu_dev;
struct vgpu_kbo;
struct vgpu_vm;

#define VGPU_KQ_VMID		1	/* kept from MES (SET_HW_RESOURCES) for kernel-queue IBs */
#define VGPU_KQ_SLOT		1	/* compute pipe 0 queue 0 */
#define VGPU_KQ_DOORBELL	0x03	/* 64-bit doorbell index in the kernel page (amdgpu: MEC ring 0) */
#define VGPU_KQ_RING_BYTES	SZ_64K
#define VGPU_KQ_INV_ENGINE	5	/* the ring's invalidation engine (the CPU uses 4) */
#define VGPU_KQ_JOB_MAX_DW	128	/* the most one job puts on the ring */
#define VGPU_KQ_CREDITS		64	/* jobs in flight: 64 x 128 dwords fit the ring twice */
#define VGPU_KQ_IB_MAX_DW	VGPU_PM4_IB_SIZE_MASK

struct vgpu_kq {
	unsigned int slot;
	struct vgpu_kbo *ring;
	struct vgpu_kbo *wb;		/* rptr report (u32) at 0, the fence (u64) at 8 */
	u32 size;			/* ring dwords */
	u64 wptr;			/* monotonic dwords */
	struct mutex hw_lock;		/* the ring and the HQD: run_job against a reset */
	spinlock_t fence_lock;		/* pending: taken by the IH handler */
	struct list_head pending;	/* hardware fences not yet signalled, in order */
	u64 fence_context;
	u64 seq;			/* the last fence emitted */
	u64 vm_id;			/* the VM the kernel VMID points at (0: none) */
	struct drm_gpu_scheduler sched;
	bool sched_on;
	struct drm_sched_entity kentity;	/* the driver's own jobs */
	struct mutex kentity_lock;	/* arm + push of kentity jobs in order */
	bool up;
	/* kq_fallback.c: fences the ring wrote whose interrupt never came. */
	struct timer_list fallback;
	u64 fallback_seen;		/* the fence memory at the timer's last look */
	/* Counters for debugfs. */
	u64 jobs;
	u32 timeouts, resets, errors;
	u32 lost_irqs;			/* fences signalled by the fallback timer */
};

/* A file's jobs on the kernel queue. */
struct vgpu_kq_entity {
	struct drm_sched_entity entity;
	struct mutex lock;		/* arm + push in order */
	bool init;
};

struct vgpu_kq_job {
	struct drm_sched_job base;
	struct vgpu_dev *vdev;
	struct vgpu_vm *vm;		/* the IB's VM (a reference), or NULL */
	u64 ib_va;
	u32 ib_dwords;
	bool guilty;			/* it timed out: it ends with -ETIME when run again */
	struct dma_fence *hw;		/* its hardware fence, the last time it was emitted */
	unsigned int npkts;
	u32 pkts[];			/* kernel jobs: packets put on the ring as they are */
};

int vgpu_kq_init(struct vgpu_dev *vdev);
void vgpu_kq_fini(struct vgpu_dev *vdev);
void vgpu_kq_irq(struct vgpu_dev *vdev);
void vgpu_kq_irq_error(struct vgpu_dev *vdev, u32 src, const u32 *data);
void vgpu_kq_fault(struct vgpu_dev *vdev);

/* kq.c: the ring (run_job and the reset) */
struct dma_fence *vgpu_kq_emit(struct vgpu_dev *vdev, struct vgpu_kq_job *job);
int vgpu_kq_hw_reset(struct vgpu_dev *vdev);
unsigned int vgpu_kq_signal(struct vgpu_kq *kq, u64 upto, int error);
u64 vgpu_kq_fence_mem(struct vgpu_kq *kq);

/* kq_fallback.c */
void vgpu_kq_fallback_init(struct vgpu_kq *kq);
void vgpu_kq_fallback_arm(struct vgpu_kq *kq);
void vgpu_kq_fallback_fini(struct vgpu_kq *kq);

/* kq_sched.c */
extern const struct drm_sched_backend_ops vgpu_kq_sched_ops;
int vgpu_kq_sched_init(struct vgpu_dev *vdev);
void vgpu_kq_sched_fini(struct vgpu_dev *vdev);
int vgpu_kq_entity_init(struct vgpu_dev *vdev, struct vgpu_kq_entity *e);
void vgpu_kq_entity_fini(struct vgpu_kq_entity *e);
struct vgpu_kq_job *vgpu_kq_job_alloc(struct vgpu_dev *vdev, unsigned int npkts);
void vgpu_kq_job_free(struct vgpu_kq_job *job);
struct dma_fence *vgpu_kq_kernel_job(struct vgpu_dev *vdev, struct vgpu_kq_job *job);
int vgpu_kq_clear_vram(struct vgpu_dev *vdev, struct list_head *blocks);
int vgpu_kq_copy(struct vgpu_dev *vdev, u64 src, u64 dst, u64 bytes);

/* submit.c */
int vgpu_submit_ioctl(struct drm_device *drm, void *data, struct drm_file *file);

#endif /* VGPU_DRM_KQ_H */
