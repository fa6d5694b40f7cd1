// SPDX-License-Identifier: GPL-2.0
/*
 * What the user-queue part needs of the VM beyond vm.h: the BO behind a user VA, a 64-bit read
 * of user memory (the wptr at SIGNAL), and the VMID-0 address of the wptr shadow that
 * ADD_QUEUE wants (amdgpu GART-maps the wptr BO: wptr_mc_addr).
 */

#include <linux/highmem.h>
#include <linux/io.h>
#include <linux/io-64-nonatomic-lo-hi.h>

#include "vgpu_drm_dev.h"
#include "gem.h"
#include "vm.h"

/* The BO and byte offset behind [va, va + size), inside one GEM mapping. vm->lock held. */
static int vgpu_userq_lookup(struct vgpu_vm *vm, u64 va, u64 size, struct vgpu_bo **bo,
			     u64 *off)
{
	const struct vgpu_mapping *m = vgpu_vm_find_locked(vm, va, size);

	if (!m || !m->obj)
		return -EINVAL;
	*bo = to_vgpu_bo(m->obj);
	*off = m->offset + (va - m->va);
	return 0;
}

/*
 * Reads the 64-bit little-endian value at a user VA (8-byte aligned) through the CPU: system
 * pages, the system pages of an evicted VRAM BO, or CPU-visible VRAM through BAR0. VRAM beyond
 * the window cannot be read (-EINVAL: CREATE refuses such a wptr). vm->lock held; moves of
 * the BO are excluded by mgr->evict_lock (an eviction holds it).
 */
int vgpu_userq_read_u64(struct vgpu_file *vf, u64 va, u64 *val)
{
	struct vgpu_dev *vdev = vf->vdev;
	struct vgpu_bo *bo;
	void __iomem *io;
	u64 off, addr;
	bool system;
	void *p;
	int ret;

	ret = vgpu_userq_lookup(vf->vm, va, 8, &bo, &off);
	if (ret)
		return ret;
	switch (bo->kind) {
	case VGPU_BO_SYSTEM:
		if (!bo->shmem.pages)
			return -EINVAL;
		p = kmap_local_page(bo->shmem.pages[off >> PAGE_SHIFT]);
		*val = le64_to_cpu(READ_ONCE(*(__le64 *)(p + (off & ~PAGE_MASK))));
		kunmap_local(p);
		return 0;
	case VGPU_BO_VRAM:
		if (bo->evicted) {
			p = kmap_local_page(bo->evicted->pages[off >> PAGE_SHIFT]);
			*val = le64_to_cpu(READ_ONCE(*(__le64 *)(p + (off & ~PAGE_MASK))));
			kunmap_local(p);
			return 0;
		}
		ret = vgpu_bo_addrs(bo, off & ~(u64)(VGPU_GPU_PAGE - 1), 1, &addr, &system);
		if (ret)
			return ret;
		if (addr + VGPU_GPU_PAGE > vdev->vram_window)
			return -EINVAL;
		io = ioremap_wc(vdev->vram_bar + addr, VGPU_GPU_PAGE);
		if (!io)
			return -ENOMEM;
		*val = readq(io + (off & (VGPU_GPU_PAGE - 1)));
		iounmap(io);
		return 0;
	default:
		return -EINVAL;
	}
}

/*
 * q->wptr_mc: the VMID-0 address of the queue's wptr shadow, from the wptr BO's current
 * placement (VRAM: the frame-buffer aperture; system memory: a GART page). vm->lock held.
 */
int vgpu_userq_wptr_mc(struct vgpu_userq *q)
{
	struct vgpu_dev *vdev = q->vf->vdev;
	u64 va = q->va[VGPU_USERQ_VA_WPTR].va, off, addr, gpu;
	u64 page_off, in_page;
	struct sg_table *sgt;
	struct vgpu_bo *bo;
	bool system;
	int ret;

	vgpu_userq_wptr_mc_put(q);
	ret = vgpu_userq_lookup(q->vf->vm, va, 8, &bo, &off);
	if (ret)
		return ret;
	page_off = off & ~(u64)(VGPU_GPU_PAGE - 1);
	in_page = off & (VGPU_GPU_PAGE - 1);
	ret = vgpu_bo_addrs(bo, page_off, 1, &addr, &system);
	if (ret)
		return ret;
	if (!system) {
		q->wptr_mc = vdev->fb_base + addr + in_page;
		return 0;
	}
	/* The page's GART window, from the BO's own DMA-mapped pages. */
	sgt = bo->kind == VGPU_BO_SYSTEM ? bo->shmem.sgt :
	      bo->evicted ? &bo->evicted->sgt : NULL;
	if (!sgt)
		return -EINVAL;
	ret = vgpu_gart_map_sgt(vdev, sgt, page_off, VGPU_GPU_PAGE, &gpu);
	if (ret)
		return ret;
	q->wptr_gart = gpu;
	q->wptr_mc = gpu + in_page;
	return 0;
}

void vgpu_userq_wptr_mc_put(struct vgpu_userq *q)
{
	if (q->wptr_gart)
		vgpu_gart_unmap(q->vf->vdev, q->wptr_gart, VGPU_GPU_PAGE);
	q->wptr_gart = 0;
	q->wptr_mc = 0;
}
