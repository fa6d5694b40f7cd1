// SPDX-License-Identifier: GPL-2.0
/*
 * User queues: the per-file queue list and the interrupt hooks (see userq.h).
 */

#include <linux/seq_file.h>

#include "vgpu_drm_dev.h"

int vgpu_userq_dev_init(struct vgpu_dev *vdev)
{
	return 0;
}

void vgpu_userq_dev_fini(struct vgpu_dev *vdev)
{
}

void vgpu_userq_mgr_init(struct vgpu_file *vf)
{
	mutex_init(&vf->userq.lock);
	INIT_LIST_HEAD(&vf->userq.queues);
}

/* Removes every queue of the file (closing it is FREE of each); the VM goes after. */
void vgpu_userq_mgr_fini(struct vgpu_file *vf)
{
	WARN_ON(!list_empty(&vf->userq.queues));
	mutex_destroy(&vf->userq.lock);
}

static bool vgpu_range_overlaps(u64 a, u64 asize, u64 b, u64 bsize)
{
	return a < b + bsize && b < a + asize;
}

/* Whether a live queue of the file uses any byte of [va, va + size). */
bool vgpu_userq_va_busy(struct vgpu_file *vf, u64 va, u64 size)
{
	struct vgpu_userq *q;
	bool busy = false;
	unsigned int i;

	mutex_lock(&vf->userq.lock);
	list_for_each_entry(q, &vf->userq.queues, node) {
		for (i = 0; i < q->nva && !busy; i++)
			busy = vgpu_range_overlaps(va, size, q->va[i].va, q->va[i].size);
		if (busy)
			break;
	}
	mutex_unlock(&vf->userq.lock);
	return busy;
}

void vgpu_userq_irq_eop(struct vgpu_dev *vdev, u32 doorbell, u16 pasid)
{
	vdev->userq.eop_irqs++;
}

void vgpu_userq_irq_hung(struct vgpu_dev *vdev, u32 doorbell, u16 pasid)
{
	vdev->userq.hung_irqs++;
}

void vgpu_userq_irq_error(struct vgpu_dev *vdev, u32 src, u16 pasid, const u32 *data)
{
}

void vgpu_userq_irq_vm_fault(struct vgpu_dev *vdev, u16 pasid, u64 addr, u32 flags)
{
}

/* The file's queues, for vgpu_clients: one line each. */
void vgpu_userq_debugfs_file(struct seq_file *m, struct vgpu_file *vf)
{
	struct vgpu_userq *q;
	unsigned int n = 0;

	mutex_lock(&vf->userq.lock);
	list_for_each_entry(q, &vf->userq.queues, node) {
		seq_printf(m, "  queue %u doorbell %#x\n", q->id, q->doorbell);
		n++;
	}
	mutex_unlock(&vf->userq.lock);
	seq_printf(m, "  queues: %u\n", n);
}
