// SPDX-License-Identifier: GPL-2.0
/*
 * Hang detection of user queues (amdgpu_userq_start_hang_detect_work and its worker).
 *
 * SIGNAL starts the queue's timer (module parameter userq_timeout_ms); each EOP IV that
 * signals a fence re-arms it while fences are pending, or stops it. When it fires with fences
 * pending and the slot has not moved since the last check, the queue is hung: MES RESET of its
 * doorbell (its pending work discarded), HUNG and RESET in QUERY_STATUS, its fences completed
 * with -ETIME. The queue stays added, so work submitted after the reset runs; the file's other
 * queues are not touched. MES's own hung-queue IV marks the queue and runs the check at once.
 */

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"

static unsigned long vgpu_userq_timeout(void)
{
	return msecs_to_jiffies(vgpu_userq_timeout_ms ?: 1);
}

/* From SIGNAL: start the timer unless it runs (process context). */
void vgpu_userq_hang_arm(struct vgpu_userq *q)
{
	queue_delayed_work(system_wq, &q->hang_work, vgpu_userq_timeout());
}

/* From the EOP IV (any context): fences were signalled; re-arm while some are pending. */
void vgpu_userq_hang_progress(struct vgpu_userq *q, bool pending)
{
	if (pending)
		mod_delayed_work(system_wq, &q->hang_work, vgpu_userq_timeout());
	else
		cancel_delayed_work(&q->hang_work);
}

/*
 * MES RESET of the queue (amdgpu_mes_reset_user_queue): stopped at once, its pending work
 * discarded, left added. Its fences can no longer be reached: completed with -ETIME. mgr->lock
 * held.
 */
int vgpu_userq_reset(struct vgpu_userq *q)
{
	struct vgpu_dev *vdev = q->vf->vdev;
	u32 reason = 0;
	int ret;

	ret = vgpu_mes_reset_queue(vdev, q->doorbell, &reason);
	q->resets++;
	q->status_flags |= VGPU_USERQ_QUERY_STATUS_FLAGS_HUNG;
	q->state = VGPU_USERQ_HUNG;
	q->mes_hung = false;
	if (!ret) {
		q->status_flags |= VGPU_USERQ_QUERY_STATUS_FLAGS_RESET;
		vdev->userq.resets++;
	} else {
		q->last_reason = reason;
		dev_warn_ratelimited(vdev->drm.dev, "userq %u (doorbell %#x): RESET failed: %d %s\n",
				     q->id, q->doorbell, ret,
				     ret == -EIO ? vgpu_mes_err_name(reason) : "");
	}
	vgpu_fence_force_complete(&q->fd, -ETIME);
	q->hang_seen = vgpu_fence_slot_read(q->fd.page, q->fd.slot);
	return ret;
}

/* The timer fired (or MES said hung): mgr->lock held. */
static void vgpu_userq_hang_check(struct vgpu_userq *q)
{
	bool pending;
	u64 v;

	/* An EOP IV may have been lost (IH overflow): the slot is the truth. */
	vgpu_fence_process(&q->fd, &pending);
	if (!pending && !q->mes_hung)
		return;
	v = vgpu_fence_slot_read(q->fd.page, q->fd.slot);
	if (!q->mes_hung && v != q->hang_seen) {
		q->hang_seen = v;
		vgpu_userq_hang_arm(q);
		return;
	}
	if (!q->added) {
		/* Not on MES (its VAs are gone): nothing will ever signal them. */
		vgpu_fence_force_complete(&q->fd, -ETIME);
		q->mes_hung = false;
		return;
	}
	dev_info_ratelimited(q->vf->vdev->drm.dev,
			     "userq %u of pid %d (doorbell %#x): %s, resetting\n", q->id,
			     q->vf->pid, q->doorbell,
			     q->mes_hung ? "MES reports it hung" : "no progress within the timeout");
	vgpu_userq_reset(q);
}

static void vgpu_userq_hang_work(struct work_struct *w)
{
	struct vgpu_userq *q = container_of(to_delayed_work(w), struct vgpu_userq, hang_work);
	struct vgpu_userq_mgr *mgr = &q->vf->userq;

	/*
	 * Only a try: the free path cancels this work (synchronously) with mgr->lock held. A
	 * queue being freed is off the list; one whose file is evicting is looked at afterwards.
	 */
	if (!mutex_trylock(&mgr->lock)) {
		queue_delayed_work(system_wq, &q->hang_work, 1);
		return;
	}
	if (mgr->evicting)
		vgpu_userq_hang_arm(q);
	else if (!list_empty(&q->node))
		vgpu_userq_hang_check(q);
	mutex_unlock(&mgr->lock);
}

void vgpu_userq_hang_init(struct vgpu_userq *q)
{
	INIT_DELAYED_WORK(&q->hang_work, vgpu_userq_hang_work);
}
