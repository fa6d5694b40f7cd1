// SPDX-License-Identifier: GPL-2.0
/*
 * The scheduler reset after a frame MES did not answer (amdgpu's "MES failed to respond").
 *
 * amdgpu gives up on the frame (-ETIMEDOUT) and recovers through a GPU reset: MES is brought up
 * again (hw_init: SET_HW_RESOURCES ...) and amdgpu_userq_post_reset adds the user queues back.
 * vgpu can reset the scheduler alone: MES_RING_ACTIVE = 0 stops it from any state, the stuck
 * frame and every table with it (docs/device.md, "Stop"); the ring starts again clean, then
 * SET_HW_RESOURCES, the event log and a status query, as at probe. The queues MES knew are
 * forgotten: the recovery work adds each again (userq_reset.c). Without this, the frame stays
 * stuck at the ring's head and every later frame times out behind it.
 *
 * The frame that timed out is not retried: its caller gets -ETIMEDOUT, and since the stop
 * dropped the frame, MES will never act on it later (its pages can be freed). A frame of the
 * reset itself that is not answered does not reset again: the scheduler is then down
 * (-ENODEV for every later call) and the device needs a reload.
 */

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"

static void vgpu_mes_recover_work(struct work_struct *w)
{
	struct vgpu_mes *m = container_of(w, struct vgpu_mes, recover_work);
	struct vgpu_dev *vdev = container_of(m, struct vgpu_dev, mes);

	vgpu_userq_mes_restarted(vdev);
}

void vgpu_mes_reset_init(struct vgpu_dev *vdev)
{
	INIT_WORK(&vdev->mes.recover_work, vgpu_mes_recover_work);
}

/* Before the scheduler goes: no recovery runs after this (the files are gone by then). */
void vgpu_mes_reset_fini(struct vgpu_dev *vdev)
{
	cancel_work_sync(&vdev->mes.recover_work);
}

/*
 * MES did not answer a frame of opcode op: stop it, bring it up again and queue the recovery of
 * the user queues. mes.lock held. 0 when MES runs again.
 */
int vgpu_mes_reset_locked(struct vgpu_dev *vdev, u32 op)
{
	struct vgpu_mes *m = &vdev->mes;
	int ret;

	m->last_hung_op = op;
	if (m->resetting)
		return -ETIMEDOUT;	/* the reset's own frame: give up (see above) */
	m->resetting = true;
	m->resets++;
	drm_warn(&vdev->drm, "MES: %s not answered: resetting the scheduler (reset %u)\n",
		 vgpu_mes_op_name(op), m->resets);
	/* Stop submitting: nothing goes to the ring until it is up again. */
	vgpu_mes_stop(vdev);
	ret = vdev->wedged ? -EIO : 0;
	if (!ret)
		ret = vgpu_mes_ring_start(vdev);
	if (!ret)
		ret = vgpu_mes_set_hw_resources(vdev);
	if (!ret)
		ret = vgpu_mes_set_log(vdev);
	if (!ret)
		ret = vgpu_mes_query_sched(vdev);
	m->resetting = false;
	if (ret) {
		m->reset_failures++;
		drm_err(&vdev->drm, "MES: the scheduler reset failed (%d, MES_STATUS %#x): user queues are down\n",
			ret, vgpu_rd(vdev, VGPU_REG_MES_STATUS));
		vgpu_mes_stop(vdev);
		return ret;
	}
	m->epoch++;
	schedule_work(&m->recover_work);
	return 0;
}
