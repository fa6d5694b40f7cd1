// SPDX-License-Identifier: GPL-2.0
/*
 * A scheduler that stops answering (rule mes.hang:op=MISC,n=1: the first MISC frame never
 * completes). The driver's submit times out ("MES failed to respond"); the frame's api_status
 * was never written and the ring did not move past it. The driver resets the scheduler
 * (mes_recover.c), after which the same frame succeeds.
 */

#include <linux/kernel.h>

#include "cases.h"
#include "inject.h"

#define VT_MES_RULE	"mes.hang:op=MISC,n=1"
#define VT_MES_VAL(i)	(0x3E5A0000 | (i))

enum vt_res t_inject_mes_hang(struct vt_case *t)
{
	static const char *const names[] = { "timeout", "not_completed", "scheduler_reset", "frame_after_reset" };
	struct vgpu *vg = t->vg;
	struct vgpu_mes *m;
	struct vgpu_cp *cp;
	enum vt_res res;
	u32 rptr, wptr, frames, v;
	int ret;

	if (vt_inject_skip(t, VT_MES_RULE, &res))
		return res;
	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	m = vgpu_mes_start(t, cp, NULL);
	if (!m) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		return vt_cp_end(t, cp);
	}

	vgpu_wr(vg, VGPU_REG_SCRATCH_1, 0);
	frames = vgpu_rd(vg, VGPU_REG_MES_FRAMES);
	ret = vgpu_mes_misc_write_reg(t, m, VGPU_REG_SCRATCH_1, VT_MES_VAL(1));
	vt_check(t, ret == -ETIMEDOUT, names[0], "%s",
		 ret ? t->err : "MISC WRITE_REG completed: the frame was not held (is the rule " VT_MES_RULE " in force?)");
	/*
	 * Stuck in the frame: the register write it carries not done, no frame completed since
	 * (neither it nor the QUERY behind it), the ring's rptr two frames behind the wptr.
	 */
	rptr = vgpu_rd(vg, VGPU_REG_MES_RING_RPTR);
	wptr = m->wptr & (m->size - 1);
	v = vgpu_rd(vg, VGPU_REG_SCRATCH_1);
	vt_check(t, ret == -ETIMEDOUT && v == 0 && vgpu_rd(vg, VGPU_REG_MES_FRAMES) == frames &&
		 ((wptr - rptr) & (m->size - 1)) == 2 * VT_MES_FRAME_DW, names[1],
		 "SCRATCH_1 %#x (want 0), MES_FRAMES %u -> %u (want unchanged), rptr %u wptr %u (want 2 frames apart)",
		 v, frames, vgpu_rd(vg, VGPU_REG_MES_FRAMES), rptr, wptr);

	ret = vgpu_mes_recover(t, m);
	vt_check(t, !ret, names[2], "%s", t->err);
	if (!ret)
		ret = vgpu_mes_misc_write_reg(t, m, VGPU_REG_SCRATCH_1, VT_MES_VAL(2));
	v = vgpu_rd(vg, VGPU_REG_SCRATCH_1);
	vt_check(t, !ret && v == VT_MES_VAL(2), names[3], "%s; SCRATCH_1 reads %#x, want %#x",
		 ret ? t->err : "completed", v, VT_MES_VAL(2));
	vgpu_mes_end(t, m);
	return vt_cp_end(t, cp);
}
