/* SPDX-License-Identifier: GPL-2.0 */
/*
 * User queues (userq*.c, fence*.c, evict.c; this part of the driver owns this header).
 *
 * A queue is a process's compute ring in its own VM, run by MES: CREATE validates the user's
 * VAs (each range inside one GEM_VA mapping), builds the v11 compute MQD in a kernel page,
 * gives it a gang-context page and the file's process-context page, and sends ADD_QUEUE with
 * the file's PASID and page-table root. Its 64-bit fence slot lives in the file's fence page
 * (fence.h), mapped read-only at the bottom of the VM's reserved area; PROTECTED_FENCE_SIGNAL
 * writes it and raises an EOP IV with the doorbell, which signals the SIGNAL dma-fences.
 *
 * What the rest of the driver calls:
 *  - vgpu_userq_va_busy() from GEM_VA UNMAP (vm->lock held);
 *  - vgpu_userq_mgr_init/fini() from file open/close (fini before the VM goes);
 *  - the vgpu_userq_irq_*() hooks from the interrupt dispatcher (hard-IRQ context);
 *  - the ioctls (VGPU_USERQ_IOCTLS) and vgpu_userq_debugfs_file() for vgpu_clients;
 *  - vgpu_evict_pid() from debugfs vgpu_evict (evict.h).
 *
 * Locking, outermost first: mgr->evict_lock (the ioctls that change queues, and an eviction),
 * mgr->maps_lock (the fence pages mapped into the VM), vm->lock (vm.h: GEM_VA UNMAP asks
 * vgpu_userq_va_busy with it held), mgr->lock. No path holding mgr->lock calls into the VM
 * functions that take vm->lock; the hang worker only try-locks mgr->lock, so a free can cancel
 * it while holding that lock. vdev->userq.doorbells (an IRQ-safe xarray) maps a doorbell
 * to its queue; the EOP handler runs under its lock, so a queue erased from it is never seen
 * by a handler again.
 */
#ifndef VGPU_DRM_USERQ_H
#define VGPU_DRM_USERQ_H

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/types.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

#include "evict.h"
#include "fence.h"

struct drm_device;
struct drm_file;
struct drm_gem_object;
struct seq_file;
struct vgpu_dev;
struct vgpu_file;
struct vgpu_kbo;

/* The compute MQD's EOP buffer (what INFO reports as eop_size, eop_alignment). */
#define VGPU_USERQ_EOP_SIZE	2048
#define VGPU_USERQ_EOP_ALIGN	256
#define VGPU_USERQ_MAX_PER_FILE	512	/* amdgpu's AMDGPU_MAX_USERQ_COUNT: one fence page */
/* Quanta in 100 ns, as mes_userq_map: process 10 ms, gang 1 ms. */
#define VGPU_USERQ_PROCESS_QUANTUM	100000
#define VGPU_USERQ_GANG_QUANTUM		10000

/*
 * The VA ranges of a queue that UNMAP must not take away: ring, rptr, wptr, eop, the context
 * save area (size 0: none), fence.
 */
enum {
	VGPU_USERQ_VA_RING,
	VGPU_USERQ_VA_RPTR,
	VGPU_USERQ_VA_WPTR,
	VGPU_USERQ_VA_EOP,
	VGPU_USERQ_VA_CSA,
	VGPU_USERQ_VA_FENCE,
	VGPU_USERQ_VA_RANGES
};

struct vgpu_userq_va {
	u64 va;
	u64 size;
};

/* amdgpu_userq_state. */
enum vgpu_userq_state {
	VGPU_USERQ_UNMAPPED,	/* not added to MES (eviction in progress, or ADD failed) */
	VGPU_USERQ_MAPPED,	/* added to MES (which maps it onto a slot when it has work) */
	VGPU_USERQ_HUNG,	/* reset by MES; stays added, its fences completed -ETIME */
	VGPU_USERQ_INVALID_VA,	/* restore found its VAs gone: not added again */
};

struct vgpu_userq {
	struct list_head node;		/* vgpu_userq_mgr.queues */
	struct vgpu_file *vf;
	u32 id;
	u32 doorbell;			/* dword index in BAR2 (MES's identity of the queue) */
	u32 db_index;			/* doorbell_offset: the index inside the doorbell BO */
	struct drm_gem_object *db_obj;	/* the DOORBELL BO (a reference) */
	u32 priority;			/* VGPU_USERQ_PRIORITY_* */
	u32 mes_priority;		/* MES_PRIORITY_* */
	enum vgpu_userq_state state;
	u32 status_flags;		/* VGPU_USERQ_QUERY_STATUS_FLAGS_*, sticky */
	bool mes_hung;			/* MES said so (IV): reset at the next hang check */
	bool added;			/* MES knows it (ADD_QUEUE done, no REMOVE since) */
	bool evicted;			/* removed by an eviction, to be added back */
	u64 mes_epoch;			/* the scheduler life it was added in (mes_reset.c) */
	u64 queue_size;
	struct vgpu_userq_va va[VGPU_USERQ_VA_RANGES];
	struct vgpu_kbo *mqd;		/* v11 compute MQD, VMID 0 (GART) */
	struct vgpu_kbo *gang;		/* gang context page, MES's */
	u64 wptr_mc;			/* ADD_QUEUE's WPTR_ADDR: VMID-0 address of the shadow */
	u64 wptr_gart;			/* its GART mapping (0 when VRAM or none) */
	u32 adds, removes, resets;	/* MES calls made for it */
	u32 last_reason;		/* MES_ERR_* of its last failed call */

	struct vgpu_userq_fence_drv fd;	/* fence slot and pending dma-fences (fence.h) */
	struct delayed_work hang_work;	/* the hang timer (userq_hang.c) */
	u64 hang_seen;			/* slot value at the last hang check */
};

/* Per file. */
struct vgpu_userq_mgr {
	struct mutex evict_lock;	/* outermost: CREATE, FREE, SIGNAL against an eviction */
	struct mutex maps_lock;		/* fences, maps (before vm->lock) */
	struct mutex lock;		/* queues, their states, MES calls about them */
	bool evicting;			/* queues removed for an eviction, not yet back */
	struct list_head queues;
	struct xarray ids;		/* id -> queue */
	u32 nqueues;
	struct vgpu_kbo *proc_ctx;	/* PROCESS_CONTEXT_ADDR: one page per file */
	struct vgpu_fence_page *fences;	/* the file's fence page (512 slots) */
	struct vgpu_fence_maps maps;	/* fence pages mapped into this file's VM (fence.h) */
	u32 evictions;
};

/* Per device. */
struct vgpu_userq_dev {
	struct xarray doorbells;	/* doorbell dword -> queue (IRQ lock) */
	/* PASIDs whose queues faulted or halted (CP error, VM fault IVs): userq_hang.c. */
	spinlock_t fault_lock;
	unsigned long *fault_pasids;	/* 1 << 16 bits, fault_lock */
	unsigned long *fault_work_pasids; /* the worker's copy */
	struct delayed_work fault_work;
	u32 fault_tries;
	u32 faults;			/* CP error and VM fault IVs of user PASIDs */
	u32 eop_irqs;			/* user-queue EOP IVs seen */
	u32 eop_unknown;		/* ... for no queue of ours */
	u32 hung_irqs;
	u32 resets;			/* queues reset for a hang */
	u32 readds;			/* queues added again after a scheduler reset */
	atomic_t pages_freeing;		/* fence-page frees queued (fence.c) */
};

int vgpu_userq_dev_init(struct vgpu_dev *vdev);
void vgpu_userq_dev_fini(struct vgpu_dev *vdev);
void vgpu_userq_mgr_init(struct vgpu_file *vf);
void vgpu_userq_mgr_fini(struct vgpu_file *vf);

bool vgpu_userq_va_busy(struct vgpu_file *vf, u64 va, u64 size);

void vgpu_userq_irq_eop(struct vgpu_dev *vdev, u32 doorbell, u16 pasid);
void vgpu_userq_irq_hung(struct vgpu_dev *vdev, u32 doorbell, u16 pasid);
void vgpu_userq_irq_error(struct vgpu_dev *vdev, u32 src, u16 pasid, const u32 *data);
void vgpu_userq_irq_vm_fault(struct vgpu_dev *vdev, u16 pasid, u64 addr, u32 flags);

int vgpu_userq_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int vgpu_userq_signal_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int vgpu_userq_wait_ioctl(struct drm_device *drm, void *data, struct drm_file *file);

/* debugfs vgpu_clients: one line per queue of the file. */
void vgpu_userq_debugfs_file(struct seq_file *m, struct vgpu_file *vf);

/* userq_mqd.c: the MQD, ADD_QUEUE and REMOVE_QUEUE of one queue (mgr->lock held). */
int vgpu_userq_mqd_init(struct vgpu_userq *q);
int vgpu_userq_map(struct vgpu_userq *q);
int vgpu_userq_unmap(struct vgpu_userq *q);
int vgpu_userq_mes_errno(u32 reason);

/* userq_hang.c */
int vgpu_userq_fault_init(struct vgpu_dev *vdev);
void vgpu_userq_fault_fini(struct vgpu_dev *vdev);
void vgpu_userq_fault(struct vgpu_dev *vdev, u16 pasid);
void vgpu_userq_hang_init(struct vgpu_userq *q);
void vgpu_userq_hang_arm(struct vgpu_userq *q);
void vgpu_userq_hang_progress(struct vgpu_userq *q, bool pending);
int vgpu_userq_reset(struct vgpu_userq *q);

/* userq_reset.c: after a scheduler reset, the queues MES forgot (process context). */
void vgpu_userq_mes_restarted(struct vgpu_dev *vdev);

/* userq_vm.c: reading the user's wptr, finding the BO behind a VA (vm->lock held). */
int vgpu_userq_read_u64(struct vgpu_file *vf, u64 va, u64 *val);
int vgpu_userq_wptr_mc(struct vgpu_userq *q);
int vgpu_userq_check_vas(struct vgpu_file *vf, struct vgpu_userq *q);
void vgpu_userq_wptr_mc_put(struct vgpu_userq *q);

/* Entries of drv.c's ioctl table (each with its comma). */
#define VGPU_USERQ_IOCTLS \
	DRM_IOCTL_DEF_DRV(VGPU_USERQ, vgpu_userq_ioctl, DRM_RENDER_ALLOW), \
	DRM_IOCTL_DEF_DRV(VGPU_USERQ_SIGNAL, vgpu_userq_signal_ioctl, DRM_RENDER_ALLOW), \
	DRM_IOCTL_DEF_DRV(VGPU_USERQ_WAIT, vgpu_userq_wait_ioctl, DRM_RENDER_ALLOW),

#endif /* VGPU_DRM_USERQ_H */
