// SPDX-License-Identifier: GPL-2.0
/*
 * Failed DMA (rules dma.fail:iova=0-0xffffffffffffffff,dir=write,n=1 and the same with n=3:
 * the device's first and third memory writes of the boot fail, as a DMA the IOMMU or the bus
 * refused). A failure is reported, never a hang: the self-test engine ends its transfer with
 * STATUS ERR_FAULT and leaves the buffer untouched; a CP queue whose write fails halts with
 * CP_ERROR_MEMORY and raises a GPF IV, its fence never written; after DEQUEUE_RESET and a
 * restart the queue runs again. The case runs first in its boot (the writes are counted from
 * the device's start): write 1 is its first self-test transfer, write 2 the second, write 3
 * the queue's WRITE_DATA (MTYPE UC: through the L2 to memory at once).
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/kernel.h>

#include "cases.h"
#include "inject.h"

#define VT_DMA_RULE	"dma.fail:iova=0-0xffffffffffffffff,dir=write,n=1; dma.fail:iova=0-0xffffffffffffffff,dir=write,n=3"
#define VT_DMA_MARK	0xD3A0FA11
#define VT_DMA_MARK2	0xD3A0600D

enum vt_res t_inject_dma_fail(struct vt_case *t)
{
	static const char *const names[] = {
		"selftest_error", "selftest_next", "queue_halted", "gpf_iv", "fence_not_written",
		"queue_recovers",
	};
	struct vgpu *vg = t->vg;
	char why[VT_WHY_LEN];
	struct vgpu_ih_slot s;
	struct vgpu_bo *dst;
	struct vgpu_ring *r;
	struct vgpu_cp *cp;
	enum vt_res res;
	u32 p[8], n, seq = 0, st, v;
	bool ok;
	int ret;

	if (vt_inject_skip(t, VT_DMA_RULE, &res))
		return res;
	vt_sub_begin(t, ARRAY_SIZE(names));
	why[0] = '\0';
	ok = vgpu_dma_refused(vg, VT_DMA_SMALL, VGPU_SELFTEST_DMA_STATUS_ERR_FAULT, why, sizeof(why));
	vt_check(t, ok, names[0], "%s (is the rule in force?)", why);
	why[0] = '\0';
	ok = vgpu_dma_check(vg, vg->small, vg->small_dma, VT_DMA_SMALL, VT_DMA_SMALL, 1, why,
			    sizeof(why));
	vt_check(t, ok, names[1], "%s", why);

	cp = vgpu_cp_get(t);
	if (!cp) {
		vt_sub_fail_all(t, names + 2, ARRAY_SIZE(names) - 2);
		return vt_case_end(t, VT_FAIL);
	}
	dst = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	r = dst ? vgpu_ring_create(t, cp, vt_compute_slot(cp, 0, 0), VT_RING_BYTES) : NULL;
	if (!r) {
		vt_sub_fail_all(t, names + 2, ARRAY_SIZE(names) - 2);
		goto out;
	}
	n = pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM, VGPU_PM4_CACHE_POLICY_LRU, dst->gpu,
			  VT_DMA_MARK);
	ret = vgpu_ring_alloc(t, r, n + VT_FENCE_DW);
	if (!ret) {
		vgpu_ring_put(r, p, n);
		seq = vgpu_ring_fence(r, true);
		vgpu_ring_commit(r);
		vgpu_ring_kick(r);
	}
	ok = !ret && vgpu_hqd_wait_state(vg, r->slot, VGPU_HQD_STATE_HALTED);
	st = vgpu_hqd_rd(vg, r->slot, VGPU_REG_HQD_STATUS);
	v = FIELD_GET(VGPU_REG_HQD_STATUS__ERROR_MASK, st);
	vt_check(t, ok && v == VGPU_CP_ERROR_MEMORY, names[2],
		 "slot %u: %s, STATUS.ERROR %u (want HALTED with CP_ERROR_MEMORY %u)", r->slot,
		 vgpu_state_name(FIELD_GET(VGPU_REG_HQD_STATUS__STATE_MASK, st)), v,
		 (u32)VGPU_CP_ERROR_MEMORY);

	why[0] = '\0';
	if (vgpu_err_wait(t, r, 1)) {
		snprintf(why, sizeof(why), "%s", t->err);
	} else {
		vgpu_ih_slot_get(cp, r->slot, &s);
		if (s.err_src != VGPU_IH_SRC_CP_GPF || s.err_data[0] != VGPU_CP_ERROR_MEMORY)
			snprintf(why, sizeof(why), "IV source %#x with DW4 %u, want CP_GPF %#x with %u",
				 s.err_src, s.err_data[0], (u32)VGPU_IH_SRC_CP_GPF,
				 (u32)VGPU_CP_ERROR_MEMORY);
	}
	vt_check(t, !why[0], names[3], "%s", why);

	msleep(VT_SETTLE_MS);
	vgpu_ih_slot_get(cp, r->slot, &s);
	v = vgpu_bo_rd(dst, 0);
	vt_check(t, !ret && !vgpu_fence_done(r, seq) && !s.eop && v != VT_DMA_MARK, names[4],
		 "fence reads %u (want below %u), %u EOP IVs, the write reads %#x", vgpu_fence_read(r),
		 seq, s.eop, v);

	/* Recovery: the queue is reset and restarted; the same work now succeeds. */
	ret = vgpu_ring_start(t, r);
	if (!ret)
		ret = vgpu_submit_wait(t, r, p, pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM,
							    VGPU_PM4_CACHE_POLICY_LRU, dst->gpu,
							    VT_DMA_MARK2));
	v = vgpu_bo_rd(dst, 0);
	vt_check(t, !ret && v == VT_DMA_MARK2, names[5], "%s; the write reads %#x, want %#x",
		 ret ? t->err : "fence reached", v, VT_DMA_MARK2);
	vgpu_ring_destroy(t, r);
out:
	vgpu_bo_free(cp, dst);
	return vt_cp_end(t, cp);
}
