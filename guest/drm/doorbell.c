// SPDX-License-Identifier: GPL-2.0
/*
 * Doorbell pages (see doorbell.h).
 */

#include <linux/bitmap.h>
#include <linux/io-64-nonatomic-lo-hi.h>

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"

int vgpu_doorbell_init(struct vgpu_dev *vdev)
{
	struct vgpu_doorbells *d = &vdev->doorbells;
	u32 count = vgpu_rd(vdev, VGPU_REG_ID_DOORBELL_COUNT);

	mutex_init(&d->lock);
	/* The BAR must hold what the register says (a register cannot make us map beyond it). */
	if (!count || (u64)count * 8 > vdev->db_len || count % VGPU_DOORBELLS_PER_PAGE) {
		drm_err(&vdev->drm, "ID_DOORBELL_COUNT %u does not fit BAR2 of %llu bytes in pages\n",
			count, (u64)vdev->db_len);
		return -ENODEV;
	}
	d->pages = count / VGPU_DOORBELLS_PER_PAGE;
	d->used = bitmap_zalloc(d->pages, GFP_KERNEL);
	if (!d->used)
		return -ENOMEM;
	set_bit(0, d->used);
	return 0;
}

void vgpu_doorbell_fini(struct vgpu_dev *vdev)
{
	bitmap_free(vdev->doorbells.used);
	vdev->doorbells.used = NULL;
}

/* A free user doorbell page, its doorbells zeroed; -ENOSPC when every page is taken. */
int vgpu_doorbell_page_get(struct vgpu_dev *vdev, u32 *page)
{
	struct vgpu_doorbells *d = &vdev->doorbells;
	unsigned long p;
	unsigned int i;

	mutex_lock(&d->lock);
	p = find_first_zero_bit(d->used, d->pages);
	if (p >= d->pages) {
		mutex_unlock(&d->lock);
		return -ENOSPC;
	}
	set_bit(p, d->used);
	mutex_unlock(&d->lock);
	/* Nothing the page's last owner wrote may look like a new wptr to a polled doorbell. */
	for (i = 0; i < VGPU_DOORBELLS_PER_PAGE; i++)
		writeq(0, vdev->db + p * VGPU_DOORBELL_PAGE + i * 8);
	*page = p;
	return 0;
}

void vgpu_doorbell_page_put(struct vgpu_dev *vdev, u32 page)
{
	struct vgpu_doorbells *d = &vdev->doorbells;

	if (!page || page >= d->pages)
		return;
	mutex_lock(&d->lock);
	clear_bit(page, d->used);
	mutex_unlock(&d->lock);
}
