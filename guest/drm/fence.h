/* SPDX-License-Identifier: GPL-2.0 */
/*
 * User-queue fences (fence.c).
 *
 * Each file has one fence page: a kernel page of 512 64-bit slots, one per queue (slot =
 * queue id - 1), mapped read-only into the file's VM at VGPU_VA_RESERVED_START. The queue's MQD
 * names its slot as FENCE_ADDRESS; PROTECTED_FENCE_SIGNAL writes the ring position there (the
 * page is not writable from the queue) and raises an EOP IV with the queue's doorbell.
 *
 * USERQ_SIGNAL makes a dma_fence with seqno = the queue's wptr; it signals once the slot is at
 * least that (amdgpu_userq_fence_driver_process). Fences outlive their queue (syncobjs, BO
 * reservations): each has its own lock and a reference on the fence page, so a WAIT of another
 * file can still map that page read-only into its own VM (at the next free page of its
 * reserved area, struct vgpu_fence_maps) and tell its queue where to wait.
 */
#ifndef VGPU_DRM_FENCE_H
#define VGPU_DRM_FENCE_H

#include <linux/dma-fence.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/workqueue.h>

struct vgpu_dev;
struct vgpu_kbo;
struct vgpu_vm;

#define VGPU_FENCE_SLOTS	512
/* Fence pages of other files one VM can map (beyond its own), for USERQ_WAIT. */
#define VGPU_FENCE_MAPS		255

struct vgpu_fence_page {
	struct kref ref;		/* the owner file, each fence, each VM that maps it */
	struct vgpu_dev *vdev;
	struct vgpu_kbo *kbo;
	struct work_struct free_work;	/* the last put may come from IRQ context */
};

/* One queue's fence slot and its pending fences. */
struct vgpu_userq_fence_drv {
	spinlock_t lock;		/* pending */
	struct list_head pending;	/* unsignalled vgpu_userq_fence, by seqno */
	u64 context;
	struct vgpu_fence_page *page;	/* a reference */
	u32 slot;
	u64 va;				/* the slot in the owner's VM */
	struct dma_fence *last;		/* the last SIGNAL fence (a reference) */
	u64 signals;
};

struct vgpu_userq_fence {
	struct dma_fence base;		/* first: dma_fence_free() frees the whole */
	spinlock_t lock;		/* the fence's own: it outlives the queue */
	struct list_head node;		/* fd->pending */
	struct vgpu_fence_page *page;
	u32 slot;
};

/* Fence pages mapped into one VM: its own at index 0, others' after it. */
struct vgpu_fence_maps {
	struct vgpu_fence_page *page[1 + VGPU_FENCE_MAPS];
	u32 n;
};

extern const struct dma_fence_ops vgpu_userq_fence_ops;

struct vgpu_fence_page *vgpu_fence_page_create(struct vgpu_dev *vdev);
struct vgpu_fence_page *vgpu_fence_page_get(struct vgpu_fence_page *p);
void vgpu_fence_page_put(struct vgpu_fence_page *p);
u64 vgpu_fence_slot_read(const struct vgpu_fence_page *p, u32 slot);
void vgpu_fence_slot_write(struct vgpu_fence_page *p, u32 slot, u64 v);

/* The VA of fence page i of a VM's maps. */
u64 vgpu_fence_map_va(u32 i);
int vgpu_fence_maps_add(struct vgpu_fence_maps *m, struct vgpu_vm *vm,
			struct vgpu_fence_page *p, u64 *va);
void vgpu_fence_maps_release(struct vgpu_fence_maps *m, struct vgpu_vm *vm);

void vgpu_fence_drv_init(struct vgpu_userq_fence_drv *fd, struct vgpu_fence_page *p, u32 slot);
void vgpu_fence_drv_fini(struct vgpu_userq_fence_drv *fd);
struct dma_fence *vgpu_fence_create(struct vgpu_userq_fence_drv *fd, u64 seqno);
bool vgpu_fence_process(struct vgpu_userq_fence_drv *fd, bool *pending);
void vgpu_fence_force_complete(struct vgpu_userq_fence_drv *fd, int error);
bool vgpu_fence_drv_idle(struct vgpu_userq_fence_drv *fd);
struct dma_fence *vgpu_fence_last(struct vgpu_userq_fence_drv *fd);

static inline struct vgpu_userq_fence *to_vgpu_userq_fence(struct dma_fence *f)
{
	return f->ops == &vgpu_userq_fence_ops ? container_of(f, struct vgpu_userq_fence, base) :
						 NULL;
}

#endif /* VGPU_DRM_FENCE_H */
