// SPDX-License-Identifier: GPL-2.0
/*
 * VRAM placement with drm_buddy (see vram.h).
 */

#include "vgpu_drm_dev.h"

int vgpu_vram_init(struct vgpu_dev *vdev)
{
	struct vgpu_vram *v = &vdev->vram;
	int ret;

	mutex_init(&v->lock);
	v->visible = min_t(u64, vdev->vram_window, vdev->vram_size);
	ret = drm_buddy_init(&v->mm, vdev->vram_size, SZ_4K);
	if (ret)
		return ret;
	v->init = true;
	return 0;
}

void vgpu_vram_fini(struct vgpu_dev *vdev)
{
	struct vgpu_vram *v = &vdev->vram;

	if (!v->init)
		return;
	drm_buddy_fini(&v->mm);
	v->init = false;
}

static int vgpu_vram_range(struct vgpu_vram *v, u64 start, u64 end, u64 size,
			   struct list_head *blocks)
{
	if (start >= end || end - start < size)
		return -ENOSPC;
	return drm_buddy_alloc_blocks(&v->mm, start, end, size, SZ_4K, blocks,
				      DRM_BUDDY_RANGE_ALLOCATION);
}

/* size bytes (4 KiB multiple) of VRAM as buddy blocks, placed as asked; -ENOSPC when full. */
int vgpu_vram_alloc(struct vgpu_dev *vdev, u64 size, enum vgpu_vram_place place,
		    struct list_head *blocks)
{
	struct vgpu_vram *v = &vdev->vram;
	u64 all = vdev->vram_size;
	int ret;

	mutex_lock(&v->lock);
	switch (place) {
	case VGPU_VRAM_VISIBLE:
		ret = vgpu_vram_range(v, 0, v->visible, size, blocks);
		break;
	case VGPU_VRAM_INVISIBLE:
		ret = vgpu_vram_range(v, v->visible, all, size, blocks);
		if (ret)
			ret = vgpu_vram_range(v, 0, all, size, blocks);
		break;
	default:
		ret = vgpu_vram_range(v, 0, v->visible, size, blocks);
		if (ret)
			ret = vgpu_vram_range(v, 0, all, size, blocks);
		break;
	}
	if (!ret)
		v->used += size;
	mutex_unlock(&v->lock);
	return ret == -ENOSPC || ret == -ENOMEM ? -ENOSPC : ret;
}

void vgpu_vram_free(struct vgpu_dev *vdev, struct list_head *blocks)
{
	struct vgpu_vram *v = &vdev->vram;
	struct drm_buddy_block *b;

	mutex_lock(&v->lock);
	list_for_each_entry(b, blocks, link)
		v->used -= drm_buddy_block_size(&v->mm, b);
	drm_buddy_free_list(&v->mm, blocks);
	mutex_unlock(&v->lock);
}

/* Whether every block lies inside the BAR window. */
bool vgpu_vram_blocks_visible(struct vgpu_dev *vdev, struct list_head *blocks)
{
	struct drm_buddy_block *b;

	list_for_each_entry(b, blocks, link) {
		if (drm_buddy_block_offset(b) + drm_buddy_block_size(&vdev->vram.mm, b) >
		    vdev->vram.visible)
			return false;
	}
	return true;
}
