// SPDX-License-Identifier: GPL-2.0
/*
 * User queues after a scheduler reset (mes_reset.c), as amdgpu_userq_pre_reset/post_reset
 * around a GPU reset: every queue MES knew before is gone from it, stopped unsaved. Each is
 * added again (ADD_QUEUE) with its MQD built afresh at the user's current wptr — the work it
 * had pending is lost, its pending fences complete with -ETIME — and QUERY_STATUS reports
 * RESET (not HUNG: the queue did nothing wrong). A queue that cannot be added again (its VAs
 * are gone, or MES refuses it) stays off MES with HUNG | RESET: the application frees it and
 * creates another. Queues removed for an eviction are added by its restore, as always.
 */

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"
#include "vm.h"

/* One queue added in an earlier life of the scheduler. vm->lock and mgr->lock held. */
static void vgpu_userq_readd(struct vgpu_userq *q)
{
	struct vgpu_file *vf = q->vf;
	u32 wrap = q->queue_size / 4 - 1;
	u64 wptr;
	int ret;

	q->added = false;
	q->status_flags |= VGPU_USERQ_QUERY_STATUS_FLAGS_RESET;
	vgpu_fence_force_complete(&q->fd, -ETIME);
	ret = vgpu_userq_check_vas(vf, q) ?:
	      vgpu_userq_read_u64(vf, q->va[VGPU_USERQ_VA_WPTR].va, &wptr);
	if (!ret) {
		/* Its work so far discarded: it starts where the user's wptr is. */
		vgpu_userq_mqd_init(q);
		vgpu_kbo_wr(q->mqd, 4 * VGPU_MES_MQD_DW_CP_HQD_PQ_RPTR, lower_32_bits(wptr) & wrap);
		vgpu_kbo_wr(q->mqd, 4 * VGPU_MES_MQD_DW_CP_HQD_PQ_WPTR_LO, lower_32_bits(wptr));
		vgpu_kbo_wr(q->mqd, 4 * VGPU_MES_MQD_DW_CP_HQD_PQ_WPTR_HI, upper_32_bits(wptr));
		ret = vgpu_userq_map(q);
	}
	q->hang_seen = vgpu_fence_slot_read(q->fd.page, q->fd.slot);
	if (ret) {
		q->status_flags |= VGPU_USERQ_QUERY_STATUS_FLAGS_HUNG;
		q->state = VGPU_USERQ_HUNG;
		drm_err(&vf->vdev->drm, "userq %u of pid %d: not added again after the MES reset (%d): marked hung\n",
			q->id, vf->pid, ret);
		return;
	}
	vf->vdev->userq.readds++;
	drm_info(&vf->vdev->drm, "userq %u of pid %d (doorbell %#x): added again after the MES reset\n",
		 q->id, vf->pid, q->doorbell);
}

/* The recovery work: every file's queues of an earlier scheduler life. */
void vgpu_userq_mes_restarted(struct vgpu_dev *vdev)
{
	struct vgpu_userq_mgr *mgr;
	struct vgpu_userq *q;
	struct vgpu_file *vf;

	/* clients_lock keeps each file from its release (the order of the fault worker). */
	mutex_lock(&vdev->clients_lock);
	list_for_each_entry(vf, &vdev->clients, node) {
		mgr = &vf->userq;
		mutex_lock(&mgr->evict_lock);
		vgpu_vm_lock(vf->vm);
		mutex_lock(&mgr->lock);
		list_for_each_entry(q, &mgr->queues, node)
			if (q->added && q->mes_epoch != READ_ONCE(vdev->mes.epoch))
				vgpu_userq_readd(q);
		mutex_unlock(&mgr->lock);
		vgpu_vm_unlock(vf->vm);
		mutex_unlock(&mgr->evict_lock);
	}
	mutex_unlock(&vdev->clients_lock);
}
