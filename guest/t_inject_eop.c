// SPDX-License-Identifier: GPL-2.0
/*
 * A lost end-of-pipe interrupt (rule iv.drop:src=CP_EOP,n=1: the first EOP IV never reaches
 * the IH ring). The driver waits for the job's fence by its interrupt; none comes, and after
 * the timeout its fallback reads the fence memory, finds the job done, signals the fence and
 * counts the lost interrupt. The next job's interrupt comes as usual.
 */

#include <linux/delay.h>
#include <linux/kernel.h>

#include "cases.h"
#include "inject.h"

#define VT_EOP_RULE	"iv.drop:src=CP_EOP,n=1"
#define VT_EOP_MARK(i)	(0x10570000 | (i))

/* One job: WRITE_DATA of its mark to dword i of dst, then an interrupting fence. */
static int vt_eop_job(struct vt_case *t, struct vgpu_ring *r, struct vgpu_bo *dst, u32 i,
		      unsigned int ms, struct vgpu_fence_irq *w)
{
	u32 p[8], n, seq;
	int ret;

	n = pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM, VGPU_PM4_CACHE_POLICY_LRU,
			  dst->gpu + 4 * i, VT_EOP_MARK(i));
	ret = vgpu_ring_alloc(t, r, n + VT_FENCE_DW);
	if (ret)
		return ret;
	vgpu_ring_put(r, p, n);
	seq = vgpu_ring_fence(r, true);
	vgpu_ring_commit(r);
	return vgpu_fence_wait_irq(t, r, seq, ms, w);
}

enum vt_res t_inject_eop_lost(struct vt_case *t)
{
	static const char *const names[] = { "fallback_poll", "work_done", "iv_never_came", "irq_again" };
	struct vgpu_fence_irq w1, w2;
	struct vgpu_ih_slot s;
	struct vgpu_bo *dst;
	struct vgpu_ring *r;
	struct vgpu_cp *cp;
	enum vt_res res;
	u32 v, eops;
	int ret;

	if (vt_inject_skip(t, VT_EOP_RULE, &res))
		return res;
	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	dst = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	r = dst ? vgpu_ring_create(t, cp, vt_compute_slot(cp, 0, 0), VT_RING_BYTES) : NULL;
	if (!r) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}

	/* The driver's fence timeout: the fallback polls after it. */
	ret = vt_eop_job(t, r, dst, 0, job_timeout_ms, &w1);
	vt_check(t, !ret && w1.by_poll && w1.lost == 1, names[0],
		 "%s", ret ? t->err : w1.by_irq ?
		 "the EOP IV came: no interrupt was lost (is the rule " VT_EOP_RULE " in force?)" :
		 "the wait ended neither by interrupt nor by polling");
	v = vgpu_bo_rd(dst, 0);
	vt_check(t, v == VT_EOP_MARK(0), names[1], "the job's write reads %#010x, want %#010x",
		 v, VT_EOP_MARK(0));
	/* Dropped, not late: after a settle the slot still has seen no EOP IV. */
	msleep(VT_SETTLE_MS);
	vgpu_ih_slot_get(cp, r->slot, &s);
	eops = s.eop;
	vt_check(t, eops == 0, names[2], "%u EOP IVs decoded for the slot, want 0 (the one was dropped)",
		 eops);

	/* Its interrupt must come: a generous wait (TCG on a busy host is slow). */
	ret = vt_eop_job(t, r, dst, 1, max_t(unsigned int, timeout_ms, 4 * job_timeout_ms), &w2);
	v = vgpu_bo_rd(dst, 4);
	vt_check(t, !ret && w2.by_irq && v == VT_EOP_MARK(1), names[3],
		 "%s; write reads %#010x", ret ? t->err : w2.by_poll ?
		 "the second job's interrupt was lost too" : "signalled", v);
	vt_note(t, "job 1: found by polling after %llu ms (job timeout %u ms); job 2: interrupt after %llu ms",
		w1.waited_ms, job_timeout_ms, w2.waited_ms);
	vgpu_ring_destroy(t, r);
out:
	vgpu_bo_free(cp, dst);
	return vt_cp_end(t, cp);
}
