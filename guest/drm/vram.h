/* SPDX-License-Identifier: GPL-2.0 */
/*
 * VRAM placement (vram.c): a drm_buddy over all of VRAM in 4 KiB pages. [0, window) is inside
 * BAR0 (CPU-visible), the rest GPU-only.
 */
#ifndef VGPU_DRM_VRAM_H
#define VGPU_DRM_VRAM_H

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/types.h>

#include <drm/drm_buddy.h>

struct vgpu_dev;

struct vgpu_vram {
	struct mutex lock;
	struct drm_buddy mm;
	bool init;
	u64 visible;		/* bytes inside BAR0 */
	u64 used;		/* bytes allocated */
};

/* Where a VRAM allocation may go. */
enum vgpu_vram_place {
	VGPU_VRAM_ANY,		/* visible first, then anywhere */
	VGPU_VRAM_VISIBLE,	/* only inside the BAR window */
	VGPU_VRAM_INVISIBLE,	/* beyond the window first, then anywhere */
};

int vgpu_vram_init(struct vgpu_dev *vdev);
void vgpu_vram_fini(struct vgpu_dev *vdev);
int vgpu_vram_alloc(struct vgpu_dev *vdev, u64 size, enum vgpu_vram_place place,
		    struct list_head *blocks);
void vgpu_vram_free(struct vgpu_dev *vdev, struct list_head *blocks);
bool vgpu_vram_blocks_visible(struct vgpu_dev *vdev, struct list_head *blocks);

#endif /* VGPU_DRM_VRAM_H */
