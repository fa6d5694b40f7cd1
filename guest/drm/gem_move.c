// SPDX-License-Identifier: GPL-2.0
/*
 * Eviction of VRAM BOs: their contents move to system pages and back through the kernel queue
 * (DMA_DATA between the FB aperture and a GART window onto the pages), as amdgpu's TTM moves do
 * with SDMA. The caller (eviction, evict*.c) has stopped everything that uses the BO on the GPU
 * (its queues suspended); the move waits for the BO's fences anyway.
 *
 * Order of a move, so that no GPU access and no CPU mapping ever reaches memory that is gone:
 * copy to the new backing; zap CPU mappings (the next access faults in the new pages);
 * switch the backing; rewrite the VM's PTEs and invalidate (vgpu_vm_remap_bo); only then free
 * the old backing. A VRAM BO cannot leave its file (no dma-buf export), so the one VM that can map
 * it is its file's, given by the caller.
 */

#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include <drm/drm_vma_manager.h>

#include "vgpu_drm_dev.h"
#include "gem.h"
#include "vm.h"

#define VGPU_MOVE_WINDOW	SZ_4M	/* GART pages one copy step maps */
#define VGPU_MOVE_WAIT_MS	10000	/* the longest a move waits for the BO's fences */

void vgpu_bo_sys_free(struct vgpu_dev *vdev, struct vgpu_bo_sys *sys)
{
	unsigned int i;

	if (!sys)
		return;
	if (sys->sgt.sgl) {
		dma_unmap_sgtable(&vdev->pdev->dev, &sys->sgt, DMA_BIDIRECTIONAL, 0);
		sg_free_table(&sys->sgt);
	}
	for (i = 0; i < sys->n; i++)
		if (sys->pages[i])
			__free_page(sys->pages[i]);
	kvfree(sys->pages);
	kfree(sys);
}

/* size bytes of zeroed system pages, mapped for the device. */
static struct vgpu_bo_sys *vgpu_bo_sys_alloc(struct vgpu_dev *vdev, u64 size)
{
	struct vgpu_bo_sys *sys = kzalloc(sizeof(*sys), GFP_KERNEL);
	unsigned int i;

	if (!sys)
		return NULL;
	sys->n = size >> PAGE_SHIFT;
	sys->pages = kvcalloc(sys->n, sizeof(*sys->pages), GFP_KERNEL);
	if (!sys->pages)
		goto err;
	for (i = 0; i < sys->n; i++) {
		sys->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!sys->pages[i])
			goto err;
	}
	if (sg_alloc_table_from_pages(&sys->sgt, sys->pages, sys->n, 0, size, GFP_KERNEL))
		goto err;
	if (dma_map_sgtable(&vdev->pdev->dev, &sys->sgt, DMA_BIDIRECTIONAL, 0)) {
		sg_free_table(&sys->sgt);
		sys->sgt.sgl = NULL;
		goto err;
	}
	return sys;
err:
	vgpu_bo_sys_free(vdev, sys);
	return NULL;
}

/* Copies the whole BO between VRAM blocks and system pages, a GART window at a time. */
static int vgpu_bo_copy(struct vgpu_dev *vdev, struct list_head *blocks,
			struct vgpu_bo_sys *sys, u64 size, bool to_sys)
{
	struct drm_buddy_block *b;
	u64 w, gsys;
	int ret = 0;

	for (w = 0; w < size && !ret; w += VGPU_MOVE_WINDOW) {
		u64 len = min_t(u64, VGPU_MOVE_WINDOW, size - w), pos = 0;

		ret = vgpu_gart_map_sgt(vdev, &sys->sgt, w, len, &gsys);
		if (ret)
			break;
		list_for_each_entry(b, blocks, link) {
			u64 bl = drm_buddy_block_size(&vdev->vram.mm, b);
			u64 s = max(pos, w), e = min(pos + bl, w + len), vram;

			if (s < e) {
				vram = vdev->fb_base + drm_buddy_block_offset(b) + (s - pos);
				ret = to_sys ? vgpu_kq_copy(vdev, vram, gsys + (s - w), e - s) :
					       vgpu_kq_copy(vdev, gsys + (s - w), vram, e - s);
				if (ret)
					break;
			}
			pos += bl;
		}
		vgpu_gart_unmap(vdev, gsys, len);
	}
	return ret;
}

/*
 * The BO's fences (user-queue SIGNALs, kernel jobs) have signalled. Bounded: a fence of a queue
 * nobody resets must not hold the move (and its caller) forever; the BO then stays (-EBUSY).
 */
static int vgpu_bo_wait(struct vgpu_bo *bo)
{
	long ret = dma_resv_wait_timeout(bo->shmem.base.resv, DMA_RESV_USAGE_BOOKKEEP, false,
					 msecs_to_jiffies(VGPU_MOVE_WAIT_MS));

	if (ret < 0)
		return ret;
	return ret ? 0 : -EBUSY;
}

/* CPU mappings of the BO fault again, and find the new backing. */
static void vgpu_bo_zap(struct vgpu_dev *vdev, struct vgpu_bo *bo)
{
	drm_vma_node_unmap(&bo->shmem.base.vma_node, vdev->drm.anon_inode->i_mapping);
}

/* Moves a VRAM BO's contents to system memory; its PTEs in vm then point there. */
int vgpu_bo_evict(struct vgpu_bo *bo, struct vgpu_vm *vm)
{
	struct vgpu_dev *vdev = to_vgpu_dev(bo->shmem.base.dev);
	u64 size = bo->shmem.base.size;
	struct vgpu_bo_sys *sys;
	LIST_HEAD(old);
	int ret;

	if (bo->kind != VGPU_BO_VRAM)
		return -EINVAL;
	mutex_lock(&bo->move_lock);
	if (bo->evicted) {
		ret = 0;
		goto out;
	}
	ret = vgpu_bo_wait(bo);
	if (ret)
		goto out;
	sys = vgpu_bo_sys_alloc(vdev, size);
	if (!sys) {
		ret = -ENOMEM;
		goto out;
	}
	ret = vgpu_bo_copy(vdev, &bo->blocks, sys, size, true);
	if (ret) {
		vgpu_bo_sys_free(vdev, sys);
		goto out;
	}
	vgpu_bo_zap(vdev, bo);
	if (vm)
		vgpu_vm_lock(vm);
	list_splice_init(&bo->blocks, &old);
	WRITE_ONCE(bo->evicted, sys);
	if (vm)
		vgpu_vm_unlock(vm);
	ret = vm ? vgpu_vm_remap_bo(vm, bo) : 0;
	/* A device that did not take the new PTEs may still use the old pages: keep them. */
	if (!ret)
		vgpu_vram_free(vdev, &old);
out:
	mutex_unlock(&bo->move_lock);
	return ret;
}

/*
 * Moves an evicted BO back into VRAM, placed as at creation; a BO the CPU could map before
 * goes inside the BAR window again (-ENOSPC if there is no room: it stays evicted).
 */
int vgpu_bo_restore(struct vgpu_bo *bo, struct vgpu_vm *vm)
{
	struct vgpu_dev *vdev = to_vgpu_dev(bo->shmem.base.dev);
	enum vgpu_vram_place place = VGPU_VRAM_ANY;
	u64 size = bo->shmem.base.size;
	struct vgpu_bo_sys *sys;
	LIST_HEAD(blocks);
	int ret;

	if (bo->kind != VGPU_BO_VRAM)
		return -EINVAL;
	mutex_lock(&bo->move_lock);
	sys = bo->evicted;
	if (!sys) {
		ret = 0;
		goto out;
	}
	ret = vgpu_bo_wait(bo);
	if (ret)
		goto out;
	if (bo->cpu_access)
		place = VGPU_VRAM_VISIBLE;
	else if (bo->flags & VGPU_GEM_CREATE_NO_CPU_ACCESS)
		place = VGPU_VRAM_INVISIBLE;
	ret = vgpu_vram_alloc(vdev, size, place, &blocks);
	if (ret)
		goto out;
	ret = vgpu_bo_copy(vdev, &blocks, sys, size, false);
	if (ret) {
		vgpu_vram_free(vdev, &blocks);
		goto out;
	}
	vgpu_bo_zap(vdev, bo);
	if (vm)
		vgpu_vm_lock(vm);
	list_splice_init(&blocks, &bo->blocks);
	WRITE_ONCE(bo->evicted, NULL);
	if (vm)
		vgpu_vm_unlock(vm);
	ret = vm ? vgpu_vm_remap_bo(vm, bo) : 0;
	if (!ret)
		vgpu_bo_sys_free(vdev, sys);
out:
	mutex_unlock(&bo->move_lock);
	return ret;
}
