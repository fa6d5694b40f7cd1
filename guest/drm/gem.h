/* SPDX-License-Identifier: GPL-2.0 */
/*
 * GEM objects (gem.c, gem_io.c).
 *
 * Every object is a struct vgpu_bo. It embeds a drm_gem_shmem_object because the shmem helper
 * allocates system objects through drm_driver.gem_create_object; VRAM and doorbell objects use
 * only its drm_gem_object (drm_gem_private_object_init: no shmem file) and their own
 * funcs (gem_io.c), mapping BAR0 (write-combined) or BAR2 (uncached) pages on mmap.
 *
 * The GPU sees a BO page by page through vgpu_bo_addrs(): DMA addresses (system pages,
 * through the DMA API so that both IOMMU modes work) or VRAM offsets.
 */
#ifndef VGPU_DRM_GEM_H
#define VGPU_DRM_GEM_H

#include <linux/list.h>
#include <linux/types.h>

#include <drm/drm_gem.h>
#include <drm/drm_gem_shmem_helper.h>

struct vgpu_dev;
struct vgpu_kbo;

enum vgpu_bo_kind {
	VGPU_BO_SYSTEM,
	VGPU_BO_VRAM,
	VGPU_BO_DOORBELL,
	VGPU_BO_KINDS
};

struct vgpu_bo {
	struct drm_gem_shmem_object shmem;	/* base: shmem.base is the GEM object */
	enum vgpu_bo_kind kind;
	u32 flags;			/* VGPU_GEM_CREATE_* */
	bool cpu_access;		/* mmap allowed (VRAM: inside the BAR window) */
	struct list_head blocks;	/* VRAM: drm_buddy blocks */
	struct vgpu_kbo *evicted;	/* VRAM: its contents in system memory while evicted */
	u32 db_page;			/* DOORBELL: the BAR2 page */
	atomic_t va_maps;		/* GPU VA mappings of it (vm.c) */
};

static inline struct vgpu_bo *to_vgpu_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct vgpu_bo, shmem.base);
}

struct drm_gem_object *vgpu_gem_create_object(struct drm_device *drm, size_t size);
int vgpu_gem_create_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int vgpu_gem_mmap_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int vgpu_gem_wait_idle_ioctl(struct drm_device *drm, void *data, struct drm_file *file);

int vgpu_bo_pin_pages(struct vgpu_bo *bo);
int vgpu_bo_addrs(struct vgpu_bo *bo, u64 off, unsigned int n, u64 *addrs, bool *system);
void vgpu_bo_account(struct vgpu_dev *vdev, struct vgpu_bo *bo, bool add);

/* gem_io.c: VRAM and doorbell objects */
struct vgpu_bo *vgpu_bo_create_vram(struct vgpu_dev *vdev, u64 size, u32 flags);
struct vgpu_bo *vgpu_bo_create_doorbell(struct vgpu_dev *vdev, u64 size);

#endif /* VGPU_DRM_GEM_H */
