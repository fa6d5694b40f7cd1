// SPDX-License-Identifier: GPL-2.0
/*
 * Resetting the scheduler after it stopped answering (see inject.h). amdgpu reaches this from
 * a frame's timeout through a GPU reset; here only the scheduler is reset: its queues (none in
 * the case that uses it) are gone with it and would be added again by their owners.
 */

#include "inject.h"

int vgpu_mes_recover(struct vt_case *t, struct vgpu_mes *m)
{
	struct vgpu_mes_hw hw = m->hw;
	int ret;

	/* RING_ACTIVE = 0: the firmware's state, the stuck frame with it, is dropped. */
	ret = vgpu_mes_stop(t, m);
	if (ret)
		return ret;
	ret = vgpu_mes_ring_start(t, m);
	if (ret)
		return ret;
	ret = vgpu_mes_set_hw_resources(t, m, &hw);
	if (!ret)
		ret = vgpu_mes_set_log(t, m, VT_MES_LOG_ENTRIES);
	if (!ret)
		ret = vgpu_mes_query(t, m);
	return ret;
}
