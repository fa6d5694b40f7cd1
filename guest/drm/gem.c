// SPDX-License-Identifier: GPL-2.0
/*
 * GEM objects: system objects on the shmem helper, the GEM ioctls, the GPU's view of a BO
 * (see gem.h).
 */

#include <linux/dma-resv.h>
#include <linux/sched/signal.h>

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"
#include "gem.h"

/* The largest BO anyone may ask for; the allocation itself may still fail. */
#define VGPU_BO_MAX_SIZE	(1ULL << 36)

void vgpu_bo_account(struct vgpu_dev *vdev, struct vgpu_bo *bo, bool add)
{
	u64 size = bo->shmem.base.size;

	if (add) {
		atomic_inc(&vdev->bos.count[bo->kind]);
		atomic64_add(size, &vdev->bos.bytes[bo->kind]);
	} else {
		atomic_dec(&vdev->bos.count[bo->kind]);
		atomic64_sub(size, &vdev->bos.bytes[bo->kind]);
	}
}

static void vgpu_shmem_free(struct drm_gem_object *obj)
{
	struct vgpu_bo *bo = to_vgpu_bo(obj);

	vgpu_bo_account(to_vgpu_dev(obj->dev), bo, false);
	/* Unmaps the pages from the device (DMA API) and puts them. */
	drm_gem_shmem_free(&bo->shmem);
}

static const struct drm_gem_object_funcs vgpu_shmem_funcs = {
	.free = vgpu_shmem_free,
	.print_info = drm_gem_shmem_object_print_info,
	.pin = drm_gem_shmem_object_pin,
	.unpin = drm_gem_shmem_object_unpin,
	.get_sg_table = drm_gem_shmem_object_get_sg_table,
	.vmap = drm_gem_shmem_object_vmap,
	.vunmap = drm_gem_shmem_object_vunmap,
	.mmap = drm_gem_shmem_object_mmap,
	.vm_ops = &drm_gem_shmem_vm_ops,
};

/* drm_driver.gem_create_object: every shmem object (created or imported) is a system BO. */
struct drm_gem_object *vgpu_gem_create_object(struct drm_device *drm, size_t size)
{
	struct vgpu_bo *bo = kzalloc(sizeof(*bo), GFP_KERNEL);

	if (!bo)
		return ERR_PTR(-ENOMEM);
	bo->kind = VGPU_BO_SYSTEM;
	bo->cpu_access = true;
	INIT_LIST_HEAD(&bo->blocks);
	/* Cached CPU mappings: the device snoops system memory (PTE_SNOOPED). */
	bo->shmem.map_wc = false;
	bo->shmem.base.funcs = &vgpu_shmem_funcs;
	return &bo->shmem.base;
}

static struct vgpu_bo *vgpu_bo_create_system(struct vgpu_dev *vdev, u64 size)
{
	struct drm_gem_shmem_object *shmem = drm_gem_shmem_create(&vdev->drm, size);
	struct vgpu_bo *bo;

	if (IS_ERR(shmem))
		return ERR_CAST(shmem);
	bo = to_vgpu_bo(&shmem->base);
	vgpu_bo_account(vdev, bo, true);
	return bo;
}

int vgpu_gem_create_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct vgpu_dev *vdev = to_vgpu_dev(drm);
	struct drm_vgpu_gem_create *args = data;
	u32 vram_flags = VGPU_GEM_CREATE_CPU_ACCESS_REQUIRED | VGPU_GEM_CREATE_NO_CPU_ACCESS;
	struct vgpu_bo *bo;
	u64 size;
	int ret;

	if (args->pad || !args->size || args->size > VGPU_BO_MAX_SIZE)
		return -EINVAL;
	size = ALIGN(args->size, VGPU_GPU_PAGE);
	switch (args->domain) {
	case VGPU_GEM_DOMAIN_SYSTEM:
		if (args->flags)
			return -EINVAL;
		bo = vgpu_bo_create_system(vdev, size);
		break;
	case VGPU_GEM_DOMAIN_VRAM:
		/* Both placements at once contradict each other. */
		if ((args->flags & ~vram_flags) || (args->flags & vram_flags) == vram_flags)
			return -EINVAL;
		bo = vgpu_bo_create_vram(vdev, size, args->flags);
		break;
	case VGPU_GEM_DOMAIN_DOORBELL:
		if (args->flags)
			return -EINVAL;
		bo = vgpu_bo_create_doorbell(vdev, size);
		break;
	default:
		return -EINVAL;
	}
	if (IS_ERR(bo))
		return PTR_ERR(bo);
	ret = drm_gem_handle_create(file, &bo->shmem.base, &args->handle);
	/* The handle holds the object now (or it goes with this put). */
	drm_gem_object_put(&bo->shmem.base);
	return ret;
}

int vgpu_gem_mmap_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct drm_vgpu_gem_mmap *args = data;
	struct drm_gem_object *obj;
	int ret;

	if (args->pad)
		return -EINVAL;
	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	if (!to_vgpu_bo(obj)->cpu_access) {
		ret = -EPERM;	/* amdgpu's answer for a BO the CPU cannot reach */
		goto out;
	}
	ret = drm_gem_create_mmap_offset(obj);
	if (!ret)
		args->offset = drm_vma_node_offset_addr(&obj->vma_node);
out:
	drm_gem_object_put(obj);
	return ret;
}

int vgpu_gem_wait_idle_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct drm_vgpu_gem_wait_idle *args = data;
	struct drm_gem_object *obj;
	unsigned long timeout;
	long ret;

	if (args->pad || args->timeout_ns < 0)
		return -EINVAL;
	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	timeout = min_t(u64, nsecs_to_jiffies64(args->timeout_ns), MAX_SCHEDULE_TIMEOUT);
	ret = dma_resv_wait_timeout(obj->resv, DMA_RESV_USAGE_BOOKKEEP, true, timeout);
	drm_gem_object_put(obj);
	if (ret < 0)
		return ret;
	if (!ret)
		return -ETIME;
	return 0;
}

/* System BOs: pins the pages and maps them for the device (DMA API), once. */
int vgpu_bo_pin_pages(struct vgpu_bo *bo)
{
	struct sg_table *sgt;

	if (bo->kind != VGPU_BO_SYSTEM)
		return 0;
	sgt = drm_gem_shmem_get_pages_sgt(&bo->shmem);
	return PTR_ERR_OR_ZERO(sgt);
}

static int vgpu_bo_addrs_sgt(struct sg_table *sgt, u64 off, unsigned int n, u64 *addrs)
{
	struct scatterlist *sg;
	unsigned int i = 0, k;
	u64 pos = 0, o;

	for_each_sgtable_dma_sg(sgt, sg, k) {
		u64 len = sg_dma_len(sg);

		if (pos + len <= off) {
			pos += len;
			continue;
		}
		for (o = off > pos ? off - pos : 0; o < len && i < n; o += VGPU_GPU_PAGE)
			addrs[i++] = sg_dma_address(sg) + o;
		pos += len;
		if (i == n)
			return 0;
	}
	return -EINVAL;
}

static int vgpu_bo_addrs_vram(struct vgpu_dev *vdev, struct list_head *blocks, u64 off,
			      unsigned int n, u64 *addrs)
{
	struct drm_buddy_block *b;
	unsigned int i = 0;
	u64 pos = 0, o;

	list_for_each_entry(b, blocks, link) {
		u64 len = drm_buddy_block_size(&vdev->vram.mm, b);

		if (pos + len <= off) {
			pos += len;
			continue;
		}
		for (o = off > pos ? off - pos : 0; o < len && i < n; o += VGPU_GPU_PAGE)
			addrs[i++] = drm_buddy_block_offset(b) + o;
		pos += len;
		if (i == n)
			return 0;
	}
	return -EINVAL;
}

/*
 * The device addresses of n pages of the BO from byte off (page aligned, inside the BO): DMA
 * addresses (*system true) or VRAM offsets. System pages must be pinned (vgpu_bo_pin_pages).
 */
int vgpu_bo_addrs(struct vgpu_bo *bo, u64 off, unsigned int n, u64 *addrs, bool *system)
{
	struct vgpu_dev *vdev = to_vgpu_dev(bo->shmem.base.dev);
	unsigned int i;

	if (off + (u64)n * VGPU_GPU_PAGE > bo->shmem.base.size)
		return -EINVAL;
	switch (bo->kind) {
	case VGPU_BO_SYSTEM:
		if (!bo->shmem.sgt)
			return -EINVAL;
		*system = true;
		return vgpu_bo_addrs_sgt(bo->shmem.sgt, off, n, addrs);
	case VGPU_BO_VRAM:
		if (bo->evicted) {
			*system = true;
			for (i = 0; i < n; i++)
				addrs[i] = bo->evicted->dma + off + (u64)i * VGPU_GPU_PAGE;
			return 0;
		}
		*system = false;
		return vgpu_bo_addrs_vram(vdev, &bo->blocks, off, n, addrs);
	default:
		return -EINVAL;
	}
}
