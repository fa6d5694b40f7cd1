// SPDX-License-Identifier: GPL-2.0
/*
 * User-queue fences: the fence pages, their mappings, and the dma-fences of USERQ_SIGNAL
 * (see fence.h).
 */

#include <linux/slab.h>

#include <drm/drm_drv.h>

#include "vgpu_drm_dev.h"
#include "vm.h"

/* ---- fence pages ---- */

static void vgpu_fence_page_free_work(struct work_struct *w)
{
	struct vgpu_fence_page *p = container_of(w, struct vgpu_fence_page, free_work);
	struct vgpu_dev *vdev = p->vdev;

	vgpu_kbo_free(vdev, p->kbo);
	kfree(p);
	atomic_dec(&vdev->userq.pages_freeing);
	drm_dev_put(&vdev->drm);
}

/* A zeroed page of 512 slots; it is reached only by process VAs, so it needs no GART page. */
struct vgpu_fence_page *vgpu_fence_page_create(struct vgpu_dev *vdev)
{
	struct vgpu_fence_page *p = kzalloc(sizeof(*p), GFP_KERNEL);

	if (!p)
		return NULL;
	p->kbo = vgpu_kbo_alloc(vdev, VGPU_GPU_PAGE, 0);
	if (!p->kbo) {
		kfree(p);
		return NULL;
	}
	kref_init(&p->ref);
	p->vdev = vdev;
	INIT_WORK(&p->free_work, vgpu_fence_page_free_work);
	drm_dev_get(&vdev->drm);
	return p;
}

struct vgpu_fence_page *vgpu_fence_page_get(struct vgpu_fence_page *p)
{
	kref_get(&p->ref);
	return p;
}

static void vgpu_fence_page_release(struct kref *ref)
{
	struct vgpu_fence_page *p = container_of(ref, struct vgpu_fence_page, ref);

	/* dma_fence_put may drop the last reference in any context: free in a worker. */
	atomic_inc(&p->vdev->userq.pages_freeing);
	schedule_work(&p->free_work);
}

void vgpu_fence_page_put(struct vgpu_fence_page *p)
{
	if (p)
		kref_put(&p->ref, vgpu_fence_page_release);
}

u64 vgpu_fence_slot_read(const struct vgpu_fence_page *p, u32 slot)
{
	return vgpu_kbo_rd64(p->kbo, slot * 8);
}

void vgpu_fence_slot_write(struct vgpu_fence_page *p, u32 slot, u64 v)
{
	vgpu_kbo_wr64(p->kbo, slot * 8, v);
}

/* ---- fence pages mapped into a VM ---- */

u64 vgpu_fence_map_va(u32 i)
{
	return VGPU_VA_RESERVED_START + (u64)i * VGPU_GPU_PAGE;
}

/*
 * Maps p read-only into vm (once: a page already mapped gives its VA). Takes vm->lock (through
 * the VM's kernel-mapping call): the caller holds no user-queue lock.
 */
int vgpu_fence_maps_add(struct vgpu_fence_maps *m, struct vgpu_vm *vm,
			struct vgpu_fence_page *p, u64 *va)
{
	u32 i;
	int ret;

	for (i = 0; i < m->n; i++) {
		if (m->page[i] == p) {
			*va = vgpu_fence_map_va(i);
			return 0;
		}
	}
	if (m->n >= ARRAY_SIZE(m->page))
		return -ENOSPC;
	ret = vgpu_vm_map_kernel(vm, p->kbo, vgpu_fence_map_va(m->n), VGPU_VM_PAGE_READABLE);
	if (ret)
		return ret;
	m->page[m->n] = vgpu_fence_page_get(p);
	*va = vgpu_fence_map_va(m->n++);
	return 0;
}

/* Unmaps every fence page from vm (file close, before the VM goes) and drops them. */
void vgpu_fence_maps_release(struct vgpu_fence_maps *m, struct vgpu_vm *vm)
{
	u32 i;

	for (i = 0; i < m->n; i++) {
		if (vm)
			vgpu_vm_unmap_kernel(vm, vgpu_fence_map_va(i));
		vgpu_fence_page_put(m->page[i]);
		m->page[i] = NULL;
	}
	m->n = 0;
}

/* ---- dma-fences ---- */

static const char *vgpu_fence_driver_name(struct dma_fence *f)
{
	return "vgpu";
}

static const char *vgpu_fence_timeline_name(struct dma_fence *f)
{
	return "vgpu-userq";
}

/* amdgpu_userq_fence_signaled: the slot has reached the seqno. */
static bool vgpu_fence_signaled(struct dma_fence *f)
{
	struct vgpu_userq_fence *uf = container_of(f, struct vgpu_userq_fence, base);

	return vgpu_fence_slot_read(uf->page, uf->slot) >= f->seqno;
}

static void vgpu_fence_release(struct dma_fence *f)
{
	struct vgpu_userq_fence *uf = container_of(f, struct vgpu_userq_fence, base);

	vgpu_fence_page_put(uf->page);
	dma_fence_free(f);
}

const struct dma_fence_ops vgpu_userq_fence_ops = {
	.get_driver_name = vgpu_fence_driver_name,
	.get_timeline_name = vgpu_fence_timeline_name,
	.signaled = vgpu_fence_signaled,
	.release = vgpu_fence_release,
};

void vgpu_fence_drv_init(struct vgpu_userq_fence_drv *fd, struct vgpu_fence_page *p, u32 slot)
{
	spin_lock_init(&fd->lock);
	INIT_LIST_HEAD(&fd->pending);
	fd->context = dma_fence_context_alloc(1);
	fd->page = vgpu_fence_page_get(p);
	fd->slot = slot;
	fd->va = vgpu_fence_map_va(0) + slot * 8;
	fd->last = NULL;
	vgpu_fence_slot_write(p, slot, 0);
}

/* The queue is gone (its fences were completed): drop what the driver holds. */
void vgpu_fence_drv_fini(struct vgpu_userq_fence_drv *fd)
{
	WARN_ON(!list_empty(&fd->pending));
	dma_fence_put(fd->last);
	fd->last = NULL;
	vgpu_fence_page_put(fd->page);
	fd->page = NULL;
}

/*
 * A fence for seqno: signalled at once if the slot is there already, else pending until an
 * EOP IV (or a hang check) sees the slot reach it. Returns a reference.
 */
struct dma_fence *vgpu_fence_create(struct vgpu_userq_fence_drv *fd, u64 seqno)
{
	struct vgpu_userq_fence *uf = kzalloc(sizeof(*uf), GFP_KERNEL);
	unsigned long flags;

	if (!uf)
		return ERR_PTR(-ENOMEM);
	spin_lock_init(&uf->lock);
	uf->page = vgpu_fence_page_get(fd->page);
	uf->slot = fd->slot;
	dma_fence_init(&uf->base, &vgpu_userq_fence_ops, &uf->lock, fd->context, seqno);

	spin_lock_irqsave(&fd->lock, flags);
	if (vgpu_fence_slot_read(fd->page, fd->slot) >= seqno) {
		dma_fence_signal(&uf->base);
	} else {
		/* The list's reference. */
		list_add_tail(&uf->node, &fd->pending);
		dma_fence_get(&uf->base);
	}
	dma_fence_put(fd->last);
	fd->last = dma_fence_get(&uf->base);
	fd->signals++;
	spin_unlock_irqrestore(&fd->lock, flags);
	return &uf->base;
}

/*
 * amdgpu_userq_fence_driver_process: signals every pending fence the slot has reached. Any
 * context. Returns whether one was signalled; *pending says whether some are left.
 */
bool vgpu_fence_process(struct vgpu_userq_fence_drv *fd, bool *pending)
{
	struct vgpu_userq_fence *uf, *tmp;
	unsigned long flags;
	bool progress = false;
	u64 v;

	spin_lock_irqsave(&fd->lock, flags);
	v = vgpu_fence_slot_read(fd->page, fd->slot);
	/*
	 * In SIGNAL order, which is seqno order for a monotonic wptr: stop at the first not
	 * reached, so the interrupt handler's work is what it signals (a process that writes a
	 * wptr going backwards only delays its own fences, until the hang timer completes them).
	 */
	list_for_each_entry_safe(uf, tmp, &fd->pending, node) {
		if (uf->base.seqno > v)
			break;
		list_del_init(&uf->node);
		dma_fence_signal(&uf->base);
		dma_fence_put(&uf->base);
		progress = true;
	}
	*pending = !list_empty(&fd->pending);
	spin_unlock_irqrestore(&fd->lock, flags);
	return progress;
}

/* Completes every pending fence with error (-ETIME for a hang, -ECANCELED for a free). */
void vgpu_fence_force_complete(struct vgpu_userq_fence_drv *fd, int error)
{
	struct vgpu_userq_fence *uf, *tmp;
	unsigned long flags;

	spin_lock_irqsave(&fd->lock, flags);
	list_for_each_entry_safe(uf, tmp, &fd->pending, node) {
		list_del_init(&uf->node);
		dma_fence_set_error(&uf->base, error);
		dma_fence_signal(&uf->base);
		dma_fence_put(&uf->base);
	}
	spin_unlock_irqrestore(&fd->lock, flags);
}

bool vgpu_fence_drv_idle(struct vgpu_userq_fence_drv *fd)
{
	unsigned long flags;
	bool idle;

	spin_lock_irqsave(&fd->lock, flags);
	idle = list_empty(&fd->pending);
	spin_unlock_irqrestore(&fd->lock, flags);
	return idle;
}

/* A reference on the queue's last SIGNAL fence, or NULL. */
struct dma_fence *vgpu_fence_last(struct vgpu_userq_fence_drv *fd)
{
	struct dma_fence *f;
	unsigned long flags;

	spin_lock_irqsave(&fd->lock, flags);
	f = dma_fence_get(fd->last);
	spin_unlock_irqrestore(&fd->lock, flags);
	return f;
}
