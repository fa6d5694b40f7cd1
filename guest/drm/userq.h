/* SPDX-License-Identifier: GPL-2.0 */
/*
 * User queues (userq*.c; the userq part of the driver owns this header and extends it).
 *
 * What the rest of the driver needs from them:
 *  - per file: the list of live queues, so that GEM_VA UNMAP can refuse (-EBUSY) a range a
 *    live queue uses (vgpu_userq_va_busy), and file close removes them first
 *    (vgpu_userq_mgr_fini, before the VM goes);
 *  - from the interrupt dispatcher (ih.c, interrupt context, IH lock held): the EOP IV of a
 *    queue's doorbell, MES's hung-queue IV, CP errors and VM faults of user VMIDs;
 *  - debugfs: the lines of a file's queues in vgpu_clients (vgpu_userq_debugfs_file);
 *  - the ioctl table entries of USERQ, USERQ_SIGNAL and USERQ_WAIT (VGPU_USERQ_IOCTLS).
 */
#ifndef VGPU_DRM_USERQ_H
#define VGPU_DRM_USERQ_H

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/types.h>

struct seq_file;
struct vgpu_dev;
struct vgpu_file;

/* The VA ranges of a queue that UNMAP must not take away: ring, rptr, wptr, eop, fence. */
#define VGPU_USERQ_VA_RANGES	5

struct vgpu_userq_va {
	u64 va;
	u64 size;
};

struct vgpu_userq {
	struct list_head node;		/* vgpu_userq_mgr.queues */
	u32 id;
	u32 doorbell;			/* dword index in BAR2 (MES's identity of the queue) */
	struct vgpu_userq_va va[VGPU_USERQ_VA_RANGES];
	unsigned int nva;
};

/* Per file. */
struct vgpu_userq_mgr {
	struct mutex lock;		/* queues */
	struct list_head queues;
};

/* Per device. */
struct vgpu_userq_dev {
	u32 eop_irqs;			/* user-queue EOP IVs seen */
	u32 hung_irqs;
};

int vgpu_userq_dev_init(struct vgpu_dev *vdev);
void vgpu_userq_dev_fini(struct vgpu_dev *vdev);
void vgpu_userq_mgr_init(struct vgpu_file *vf);
void vgpu_userq_mgr_fini(struct vgpu_file *vf);

bool vgpu_userq_va_busy(struct vgpu_file *vf, u64 va, u64 size);
void vgpu_userq_debugfs_file(struct seq_file *m, struct vgpu_file *vf);

void vgpu_userq_irq_eop(struct vgpu_dev *vdev, u32 doorbell, u16 pasid);
void vgpu_userq_irq_hung(struct vgpu_dev *vdev, u32 doorbell, u16 pasid);
void vgpu_userq_irq_error(struct vgpu_dev *vdev, u32 src, u16 pasid, const u32 *data);
void vgpu_userq_irq_vm_fault(struct vgpu_dev *vdev, u16 pasid, u64 addr, u32 flags);

/* Entries of drv.c's ioctl table: DRM_IOCTL_DEF_DRV(VGPU_USERQ, ...) and so on. */
#define VGPU_USERQ_IOCTLS

#endif /* VGPU_DRM_USERQ_H */
