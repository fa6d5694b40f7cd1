/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Doorbell pages (doorbell.c). BAR2 holds ID_DOORBELL_COUNT 64-bit doorbells, 512 to a 4 KiB
 * page. Page 0 is the kernel's (the MES ring, the aggregated doorbells, the kernel queue);
 * every other page can back one DOORBELL GEM object, which a process mmaps and whose doorbells
 * its user queues use.
 */
#ifndef VGPU_DRM_DOORBELL_H
#define VGPU_DRM_DOORBELL_H

#include <linux/mutex.h>
#include <linux/types.h>

#define VGPU_DOORBELL_PAGE	SZ_4K
#define VGPU_DOORBELLS_PER_PAGE	(VGPU_DOORBELL_PAGE / 8)

struct vgpu_dev;

struct vgpu_doorbells {
	struct mutex lock;
	unsigned long *used;	/* one bit a page; page 0 always set */
	u32 pages;
};

int vgpu_doorbell_init(struct vgpu_dev *vdev);
void vgpu_doorbell_fini(struct vgpu_dev *vdev);
int vgpu_doorbell_page_get(struct vgpu_dev *vdev, u32 *page);
void vgpu_doorbell_page_put(struct vgpu_dev *vdev, u32 page);

/* The dword index (MES's and the HQD's doorbell offset) of doorbell index in page. */
static inline u32 vgpu_doorbell_dword(u32 page, u32 index)
{
	return (page * VGPU_DOORBELLS_PER_PAGE + index) * 2;
}

#endif /* VGPU_DRM_DOORBELL_H */
