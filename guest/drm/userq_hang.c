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

#include <linux/bitmap.h>

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"
#include "vm.h"

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

/*
 * Faults (amdgpu's priv-fault path): a queue that halted on a bad packet or a VM fault is
 * unmapped by MES with CP_HQD_ERROR saved in its MQD and is never mapped again until a RESET,
 * so its fences would wait for the hang timer, and with no SIGNAL nothing would notice. The
 * IVs carry the PASID: the worker looks at that file's queues, resets each whose MQD holds an
 * error (HUNG | RESET, fences -ETIME), and looks again for a while if none shows it yet (MES
 * saves the MQD once the queue has left its slot).
 */
#define VGPU_USERQ_FAULT_PASIDS		(1U << 16)
#define VGPU_USERQ_FAULT_RETRY_MS	20
#define VGPU_USERQ_FAULT_TRIES		50

/* Resets the file's halted queues; whether one was found. mgr->lock held. */
static bool vgpu_userq_reset_halted(struct vgpu_file *vf)
{
	struct vgpu_userq *q;
	bool found = false;
	u32 err;

	list_for_each_entry(q, &vf->userq.queues, node) {
		if (!q->added)
			continue;
		err = vgpu_kbo_rd(q->mqd, 4 * VGPU_MES_MQD_DW_CP_HQD_ERROR);
		if (!err)
			continue;
		dev_info_ratelimited(vf->vdev->drm.dev,
				     "userq %u of pid %d (doorbell %#x): halted (CP error %#x), resetting\n",
				     q->id, vf->pid, q->doorbell, err);
		vgpu_userq_reset(q);
		found = true;
	}
	return found;
}

static void vgpu_userq_fault_work(struct work_struct *w)
{
	struct vgpu_userq_dev *ud = container_of(to_delayed_work(w), struct vgpu_userq_dev,
						 fault_work);
	struct vgpu_dev *vdev = container_of(ud, struct vgpu_dev, userq);
	bool again = false;
	struct vgpu_file *vf;
	u16 pasid;

	spin_lock_irq(&ud->fault_lock);
	bitmap_copy(ud->fault_work_pasids, ud->fault_pasids, VGPU_USERQ_FAULT_PASIDS);
	bitmap_zero(ud->fault_pasids, VGPU_USERQ_FAULT_PASIDS);
	spin_unlock_irq(&ud->fault_lock);

	/* clients_lock keeps each file from its release while its queues are looked at. */
	mutex_lock(&vdev->clients_lock);
	list_for_each_entry(vf, &vdev->clients, node) {
		pasid = vgpu_vm_pasid(vf->vm);
		if (!test_bit(pasid, ud->fault_work_pasids))
			continue;
		mutex_lock(&vf->userq.lock);
		if (vf->userq.evicting || !vgpu_userq_reset_halted(vf)) {
			spin_lock_irq(&ud->fault_lock);
			set_bit(pasid, ud->fault_pasids);
			spin_unlock_irq(&ud->fault_lock);
			again = true;
		}
		mutex_unlock(&vf->userq.lock);
	}
	mutex_unlock(&vdev->clients_lock);

	if (again && ++ud->fault_tries < VGPU_USERQ_FAULT_TRIES) {
		queue_delayed_work(system_wq, &ud->fault_work,
				   msecs_to_jiffies(VGPU_USERQ_FAULT_RETRY_MS));
		return;
	}
	/* Given up on, or done: a later fault starts afresh. */
	spin_lock_irq(&ud->fault_lock);
	if (again)
		bitmap_zero(ud->fault_pasids, VGPU_USERQ_FAULT_PASIDS);
	ud->fault_tries = 0;
	spin_unlock_irq(&ud->fault_lock);
}

/* From the IV handler (hard-IRQ context). */
void vgpu_userq_fault(struct vgpu_dev *vdev, u16 pasid)
{
	struct vgpu_userq_dev *ud = &vdev->userq;

	if (!pasid)
		return;
	spin_lock(&ud->fault_lock);
	if (!ud->fault_pasids) {
		spin_unlock(&ud->fault_lock);
		return;
	}
	ud->faults++;
	set_bit(pasid, ud->fault_pasids);
	spin_unlock(&ud->fault_lock);
	queue_delayed_work(system_wq, &ud->fault_work,
			   msecs_to_jiffies(VGPU_USERQ_FAULT_RETRY_MS));
}

int vgpu_userq_fault_init(struct vgpu_dev *vdev)
{
	struct vgpu_userq_dev *ud = &vdev->userq;

	spin_lock_init(&ud->fault_lock);
	INIT_DELAYED_WORK(&ud->fault_work, vgpu_userq_fault_work);
	ud->fault_pasids = bitmap_zalloc(VGPU_USERQ_FAULT_PASIDS, GFP_KERNEL);
	ud->fault_work_pasids = bitmap_zalloc(VGPU_USERQ_FAULT_PASIDS, GFP_KERNEL);
	if (!ud->fault_pasids || !ud->fault_work_pasids) {
		vgpu_userq_fault_fini(vdev);
		return -ENOMEM;
	}
	return 0;
}

void vgpu_userq_fault_fini(struct vgpu_dev *vdev)
{
	struct vgpu_userq_dev *ud = &vdev->userq;
	unsigned long *p = ud->fault_pasids;

	spin_lock_irq(&ud->fault_lock);
	ud->fault_pasids = NULL;	/* no IV queues the work from here */
	spin_unlock_irq(&ud->fault_lock);
	cancel_delayed_work_sync(&ud->fault_work);
	bitmap_free(p);
	bitmap_free(ud->fault_work_pasids);
	ud->fault_work_pasids = NULL;
}
