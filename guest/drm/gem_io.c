// SPDX-License-Identifier: GPL-2.0
/*
 * VRAM and doorbell objects: GEM objects without shmem, mapped to userspace from BAR0
 * (write-combined) or BAR2 (uncached), see gem.h.
 */

#include <linux/mm.h>

#include <drm/drm_print.h>
#include <drm/drm_vma_manager.h>

#include "vgpu_drm_dev.h"
#include "gem.h"

static const struct vm_operations_struct vgpu_io_vm_ops = {
	.open = drm_gem_vm_open,
	.close = drm_gem_vm_close,
};

static int vgpu_io_remap(struct vm_area_struct *vma, unsigned long uaddr, resource_size_t bus,
			 unsigned long size, pgprot_t prot)
{
	return io_remap_pfn_range(vma, uaddr, bus >> PAGE_SHIFT, size, prot);
}

/* Maps the VRAM blocks that cover [off, off + size) of the BO at the VMA's start. */
static int vgpu_vram_mmap(struct vgpu_dev *vdev, struct vgpu_bo *bo, struct vm_area_struct *vma,
			  u64 off)
{
	pgprot_t prot = pgprot_writecombine(vm_get_page_prot(vma->vm_flags));
	u64 size = vma->vm_end - vma->vm_start, pos = 0, done = 0;
	struct drm_buddy_block *b;
	int ret;

	list_for_each_entry(b, &bo->blocks, link) {
		u64 len = drm_buddy_block_size(&vdev->vram.mm, b), start, n;

		if (pos + len <= off) {
			pos += len;
			continue;
		}
		start = off + done - pos;
		n = min(len - start, size - done);
		/* cpu_access says every block is inside BAR0: the window holds this range. */
		ret = vgpu_io_remap(vma, vma->vm_start + done,
				    vdev->vram_bar + drm_buddy_block_offset(b) + start, n, prot);
		if (ret)
			return ret;
		done += n;
		pos += len;
		if (done == size)
			return 0;
	}
	return -EINVAL;
}

static int vgpu_io_mmap(struct drm_gem_object *obj, struct vm_area_struct *vma)
{
	struct vgpu_dev *vdev = to_vgpu_dev(obj->dev);
	struct vgpu_bo *bo = to_vgpu_bo(obj);
	u64 off = (u64)(vma->vm_pgoff - drm_vma_node_start(&obj->vma_node)) << PAGE_SHIFT;

	if (!bo->cpu_access)
		return -EPERM;
	/* Contents moved to system memory by an eviction are not reachable through BAR0. */
	if (bo->evicted)
		return -EBUSY;
	vma->vm_flags |= VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP;
	vma->vm_ops = &vgpu_io_vm_ops;
	if (bo->kind == VGPU_BO_DOORBELL)
		return vgpu_io_remap(vma, vma->vm_start,
				     vdev->db_bar + (resource_size_t)bo->db_page * VGPU_DOORBELL_PAGE,
				     vma->vm_end - vma->vm_start,
				     pgprot_noncached(vm_get_page_prot(vma->vm_flags)));
	return vgpu_vram_mmap(vdev, bo, vma, off);
}

static void vgpu_io_free(struct drm_gem_object *obj)
{
	struct vgpu_dev *vdev = to_vgpu_dev(obj->dev);
	struct vgpu_bo *bo = to_vgpu_bo(obj);

	vgpu_bo_account(vdev, bo, false);
	if (bo->kind == VGPU_BO_DOORBELL)
		vgpu_doorbell_page_put(vdev, bo->db_page);
	else
		vgpu_vram_free(vdev, &bo->blocks);
	vgpu_kbo_free(vdev, bo->evicted);
	drm_gem_object_release(obj);
	kfree(bo);
}

/*
 * BAR pages have no struct page and no sg table to give another device: such a BO is not
 * shared by dma-buf (without this, PRIME would export it and warn at the first attach).
 */
static struct dma_buf *vgpu_io_export(struct drm_gem_object *obj, int flags)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static const struct drm_gem_object_funcs vgpu_io_funcs = {
	.free = vgpu_io_free,
	.mmap = vgpu_io_mmap,
	.export = vgpu_io_export,
};

static struct vgpu_bo *vgpu_io_bo_alloc(struct vgpu_dev *vdev, u64 size, enum vgpu_bo_kind kind)
{
	struct vgpu_bo *bo = kzalloc(sizeof(*bo), GFP_KERNEL);

	if (!bo)
		return NULL;
	bo->kind = kind;
	INIT_LIST_HEAD(&bo->blocks);
	bo->shmem.base.funcs = &vgpu_io_funcs;
	drm_gem_private_object_init(&vdev->drm, &bo->shmem.base, size);
	return bo;
}

/*
 * A VRAM BO: placed by the flags (CPU_ACCESS_REQUIRED inside the BAR window, NO_CPU_ACCESS
 * beyond it if there is room), cleared by the kernel queue before anyone can see it.
 */
struct vgpu_bo *vgpu_bo_create_vram(struct vgpu_dev *vdev, u64 size, u32 flags)
{
	enum vgpu_vram_place place = VGPU_VRAM_ANY;
	struct vgpu_bo *bo;
	int ret;

	if (size > vdev->vram_size)
		return ERR_PTR(-ENOSPC);
	if (flags & VGPU_GEM_CREATE_CPU_ACCESS_REQUIRED)
		place = VGPU_VRAM_VISIBLE;
	else if (flags & VGPU_GEM_CREATE_NO_CPU_ACCESS)
		place = VGPU_VRAM_INVISIBLE;
	bo = vgpu_io_bo_alloc(vdev, size, VGPU_BO_VRAM);
	if (!bo)
		return ERR_PTR(-ENOMEM);
	bo->flags = flags;
	ret = vgpu_vram_alloc(vdev, size, place, &bo->blocks);
	if (ret)
		goto err;
	bo->cpu_access = !(flags & VGPU_GEM_CREATE_NO_CPU_ACCESS) &&
			 vgpu_vram_blocks_visible(vdev, &bo->blocks);
	/* VRAM keeps what the last owner left there: no process may read another's data. */
	ret = vgpu_kq_clear_vram(vdev, &bo->blocks);
	if (ret) {
		vgpu_vram_free(vdev, &bo->blocks);
		goto err;
	}
	vgpu_bo_account(vdev, bo, true);
	return bo;
err:
	drm_gem_object_release(&bo->shmem.base);
	kfree(bo);
	return ERR_PTR(ret);
}

/* A doorbell BO: exactly one doorbell page of BAR2 beyond the kernel's. */
struct vgpu_bo *vgpu_bo_create_doorbell(struct vgpu_dev *vdev, u64 size)
{
	struct vgpu_bo *bo;
	int ret;

	if (size != VGPU_DOORBELL_PAGE)
		return ERR_PTR(-EINVAL);
	bo = vgpu_io_bo_alloc(vdev, size, VGPU_BO_DOORBELL);
	if (!bo)
		return ERR_PTR(-ENOMEM);
	ret = vgpu_doorbell_page_get(vdev, &bo->db_page);
	if (ret) {
		drm_gem_object_release(&bo->shmem.base);
		kfree(bo);
		return ERR_PTR(ret);
	}
	bo->cpu_access = true;
	vgpu_bo_account(vdev, bo, true);
	return bo;
}
