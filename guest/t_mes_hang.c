// SPDX-License-Identifier: GPL-2.0
/*
 * A queue that does not preempt: queue E runs the endless kernel on one of MES's two slots
 * while three queues with streams of ordered jobs share the other. When E's quantum ends MES
 * asks it to stop; it does not within its preemption grace (short, by SET_SCHEDULING_CONFIG),
 * so MES marks it hung (IV, event) and keeps scheduling the others. The driver's recovery, as
 * amdgpu's: REMOVE of the hung queue fails; RESET hang detection names its doorbell; detect-
 * then-reset clears it; a per-queue RESET stops the endless kernel at once; every other job
 * completes, in order.
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/string.h>

#include "cases.h"
#include "t_mes.h"

#define VT_HANG_STREAMS		3
#define VT_HANG_PENDING		16
#define VT_HANG_GRACE_US	20000	/* the preemption timeout of every level */
#define VT_HANG_AFTER		8	/* stream jobs each must complete while E is hung */

struct vt_mes_hang {
	struct vt_mes_kit *k;
	struct vgpu_mes_queue *e, *o[VT_HANG_STREAMS];
};

/* Keeps the streams busy. */
static int vt_hang_feed(struct vt_mes_hang *h)
{
	unsigned int j;
	int ret = 0;

	for (j = 0; j < VT_HANG_STREAMS && !ret; j++)
		ret = vt_kit_stream(h->k, h->o[j], VT_HANG_PENDING);
	return ret;
}

/* Feeds the streams until (E's status & mask) == want or ms pass; s gets E's last status. */
static int vt_hang_until(struct vt_mes_hang *h, u32 mask, u32 want, unsigned int ms,
			 struct vgpu_mq_status *s)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(ms);
	int ret;

	for (;;) {
		ret = vt_hang_feed(h);
		if (ret)
			return ret;
		vgpu_mes_status(h->k->m, h->e->doorbell, s);
		if ((s->st & mask) == want)
			return 0;
		if (time_after(jiffies, deadline))
			return -ETIMEDOUT;
		usleep_range(200, 400);
	}
}

/* The hung-doorbell array names exactly E's doorbell, and its slot beside it. */
static bool vt_hang_array_is(const u32 *arr, u32 db, u32 slot)
{
	unsigned int j;

	if (arr[0] != db || arr[VGPU_MES_RESET_DW_HUNG_DB_ENTRIES] != slot)
		return false;
	for (j = 1; j < VGPU_MES_RESET_DW_HUNG_DB_ENTRIES; j++)
		if (arr[j] != VGPU_MES_HUNG_DB_INVALID)
			return false;
	return true;
}

enum vt_res t_mes_hang(struct vt_case *t)
{
	static const char *const names[] = {
		"endless_mapped", "hang_detected", "hang_iv_event", "others_ran",
		"remove_hung_fails", "detect_only", "detect_then_reset", "reset_queue",
		"remove_after_reset", "others_complete",
	};
	const unsigned int nn = ARRAY_SIZE(names);
	struct vgpu_mes_queue_opts o = { .priority = VGPU_MES_PRIORITY_NORMAL };
	u32 arr[2 * VGPU_MES_RESET_DW_HUNG_DB_ENTRIES], f0[VT_HANG_STREAMS], data[4];
	u32 seq_e = 0, seq, hung0, hung1, log0, slot, pk[8], mn;
	u64 grace[VGPU_MES_PRIORITY_LEVELS];
	struct vgpu_mes_proc *pe, *po;
	struct vt_mes_hang h = {};
	struct vgpu_mq_status s;
	struct vgpu_bo *d = NULL;
	struct vgpu_mes_evt e;
	struct vgpu_mes_hw hw;
	char why[VT_WHY_LEN];
	struct vgpu *vg = t->vg;
	unsigned int i = 0, j;
	u16 pasid = 0;
	ktime_t t0;
	s64 ms;
	bool ok;
	int ret = 0;

	vt_sub_begin(t, nn);
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, nn);
	/* Two slots: E keeps one when hung, the streams share the other. */
	vgpu_mes_hw_default(vg->cp, &hw);
	hw.compute_mask[0] = GENMASK(1, 0);
	hw.compute_mask[1] = 0;
	h.k = vt_kit_start(t, &hw);
	for (j = 0; j < VGPU_MES_PRIORITY_LEVELS; j++)
		grace[j] = VT_MES_100NS(VT_HANG_GRACE_US);
	if (h.k) {
		ret = vgpu_mes_set_sched_config(t, h.k->m, grace, NULL, NULL,
						VGPU_MES_DEFAULT_NORMAL_YIELD_PERCENT);
		pe = ret ? NULL : vt_kit_proc(h.k, 0x611);
		po = pe ? vt_kit_proc(h.k, 0x612) : NULL;
		d = po ? vt_kit_bo(h.k, VT_GPU_PAGE) : NULL;
		h.e = d && !vgpu_mes_proc_map(t, pe, VT_VA_DATA, d, VT_VM_RW) ?
		      vt_kit_queue(h.k, pe, &o, true) : NULL;
		for (j = 0; h.e && j < VT_HANG_STREAMS; j++) {
			h.o[j] = vt_kit_queue(h.k, po, &o, true);
			if (!h.o[j])
				break;
		}
	}
	if (!h.e || j < VT_HANG_STREAMS) {
		vt_sub_fail_all(t, names, nn);
		goto out;
	}

	ret = vt_kit_endless(h.k, h.e, &seq_e);
	ok = !ret && vgpu_mq_wait_status(h.e, VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK,
					 VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK, vt_mes_ms(), &s);
	snprintf(why, sizeof(why), "%s; QUERY_STATUS %#x (want MAPPED)",
		 ret ? t->err : "submitted", s.st);
	if (!vt_kit_check(h.k, ok, names[i++], why)) {
		vt_sub_skip(t, names + i, nn - i, "the endless kernel never ran");
		goto out;
	}

	/* The streams want the slots: E's quantum ends, it does not stop, it is marked hung. */
	vgpu_ih_mes_counts(h.k->cp, NULL, &hung0, NULL);
	log0 = vgpu_mes_log_count(h.k->m);
	t0 = ktime_get();
	ret = vt_hang_until(&h, VGPU_REG_MES_QUERY_STATUS__HUNG_MASK,
			    VGPU_REG_MES_QUERY_STATUS__HUNG_MASK, 2 * vt_mes_ms(), &s);
	ms = ktime_ms_delta(ktime_get(), t0);
	slot = VT_MQ_ST(s.st, SLOT);
	snprintf(why, sizeof(why), "%s after %lld ms; QUERY_STATUS %#x (want HUNG and still MAPPED), MES_HUNG %u (want 1)",
		 ret == -ETIMEDOUT ? "not hung" : ret ? t->err : "hung", ms, s.st,
		 vgpu_rd(vg, VGPU_REG_MES_HUNG));
	if (!vt_kit_check(h.k, !ret && VT_MQ_ST(s.st, MAPPED) &&
			  vgpu_rd(vg, VGPU_REG_MES_HUNG) == 1, names[i++], why)) {
		vt_sub_skip(t, names + i, nn - i, "no hang detected");
		goto out;
	}
	vt_note(t, "db %#x (endless kernel) marked hung in slot %u %lld ms after the streams started (grace %u us)",
		h.e->doorbell, slot, ms, VT_HANG_GRACE_US);

	/* The IV and the event say which queue. */
	wait_event_timeout(vg->wq, (vgpu_ih_mes_counts(h.k->cp, NULL, &hung1, NULL),
				    hung1 != hung0), msecs_to_jiffies(timeout_ms));
	vgpu_ih_mes_counts(h.k->cp, NULL, &hung1, NULL);
	vgpu_ih_mes_last(h.k->cp, NULL, data, &pasid);
	ok = vgpu_mes_log_find(h.k->m, log0, VGPU_MES_EVT_HANG, VT_MES_ANY, h.e->doorbell, &e);
	snprintf(why, sizeof(why), "hung-queue IVs %u -> %u (want +1), DW4 %#x DW5 %u PASID %#x (want %#x, slot %u, 0x611); %s",
		 hung0, hung1, data[0], data[1], pasid, h.e->doorbell, slot,
		 ok ? "HANG logged" : "no HANG event for it");
	vt_kit_check(h.k, hung1 == hung0 + 1 && data[0] == h.e->doorbell && data[1] == slot &&
		     pasid == 0x611 && ok, names[i++], why);

	/* The others keep being scheduled on the other slot. */
	for (j = 0; j < VT_HANG_STREAMS; j++)
		f0[j] = vgpu_mq_fence_read(h.o[j]);
	t0 = ktime_get();
	for (mn = 0; !ret && mn < VT_HANG_AFTER &&
	     ktime_ms_delta(ktime_get(), t0) < 2 * vt_mes_ms();) {
		ret = vt_hang_feed(&h);
		for (j = 0, mn = ~0U; j < VT_HANG_STREAMS; j++)
			mn = min(mn, vgpu_mq_fence_read(h.o[j]) - f0[j]);
		usleep_range(200, 400);
	}
	snprintf(why, sizeof(why), "%s; the slowest stream completed %u jobs while E was hung (want %u)",
		 ret ? t->err : "fed", mn, VT_HANG_AFTER);
	vt_kit_check(h.k, !ret && mn >= VT_HANG_AFTER, names[i++], why);

	vt_kit_snap(h.k);
	ret = vgpu_mes_remove(t, h.e);
	vt_kit_expect_err(h.k, names[i++], ret, VGPU_MES_SCH_API_REMOVE_QUEUE,
			  VGPU_MES_ERR_QUEUE_HUNG);

	ret = vgpu_mes_detect_hung(t, h.k->m, false, VGPU_MES_QUEUE_TYPE_COMPUTE, arr);
	vgpu_mes_status(h.k->m, h.e->doorbell, &s);
	snprintf(why, sizeof(why), "%s; array %#x %#x %#x %#x | %#x (want %#x and INVALID, slot %u); QUERY_STATUS %#x (want still HUNG)",
		 ret ? t->err : "completed", arr[0], arr[1], arr[2], arr[3],
		 arr[VGPU_MES_RESET_DW_HUNG_DB_ENTRIES], h.e->doorbell, slot, s.st);
	vt_kit_check(h.k, !ret && vt_hang_array_is(arr, h.e->doorbell, slot) &&
		     VT_MQ_ST(s.st, HUNG), names[i++], why);

	log0 = vgpu_mes_log_count(h.k->m);
	ret = vgpu_mes_detect_hung(t, h.k->m, true, VGPU_MES_QUEUE_TYPE_COMPUTE, arr);
	vgpu_mes_status(h.k->m, h.e->doorbell, &s);
	ok = vgpu_mes_log_find(h.k->m, log0, VGPU_MES_EVT_RESET, VT_MES_ANY, h.e->doorbell, &e);
	if (ret)
		snprintf(why, sizeof(why), "%s", t->err);
	else if (!vt_hang_array_is(arr, h.e->doorbell, slot))
		snprintf(why, sizeof(why), "array %#x %#x %#x %#x | %#x, want %#x and INVALID, slot %u",
			 arr[0], arr[1], arr[2], arr[3], arr[VGPU_MES_RESET_DW_HUNG_DB_ENTRIES],
			 h.e->doorbell, slot);
	else if (VT_MQ_ST(s.st, HUNG) || VT_MQ_ST(s.st, MAPPED) || s.rptr != h.e->wptr ||
		 vgpu_mq_done(h.e, seq_e))
		snprintf(why, sizeof(why), "QUERY_STATUS %#x (want neither HUNG nor MAPPED), rptr %llu (want %llu: work dropped), fence %u (want below %u)",
			 s.st, s.rptr, h.e->wptr, vgpu_mq_fence_read(h.e), seq_e);
	else if (vgpu_rd(vg, VGPU_REG_MES_HUNG))
		snprintf(why, sizeof(why), "MES_HUNG reads %u after the reset, want 0 (the queue itself is no longer HUNG)",
			 vgpu_rd(vg, VGPU_REG_MES_HUNG));
	else if (!ok)
		snprintf(why, sizeof(why), "no RESET event for db %#x", h.e->doorbell);
	else
		why[0] = '\0';
	vt_kit_check(h.k, !why[0], names[i++], why);

	/* The endless kernel again: a per-queue RESET stops it at once; then E works. */
	ret = vt_kit_endless(h.k, h.e, &seq_e);
	ret = ret ?: vt_hang_until(&h, VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK,
				   VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK, vt_mes_ms(), &s);
	ret = ret ?: vgpu_mes_reset_queue(t, h.k->m, h.e->doorbell);
	vgpu_mes_status(h.k->m, h.e->doorbell, &s);
	ok = !ret && !VT_MQ_ST(s.st, HUNG) && !VT_MQ_ST(s.st, MAPPED) && s.rptr == h.e->wptr;
	snprintf(why, sizeof(why), "%s; QUERY_STATUS %#x (want neither HUNG nor MAPPED), rptr %llu (want %llu)",
		 ret ? t->err : "reset", s.st, s.rptr, h.e->wptr);
	if (ok) {
		ret = vgpu_mq_submit(t, h.e, pk, vt_wr(pk, VT_VA_DATA, 0xE0E00001), false, true,
				     &seq) ?: vgpu_mq_wait(t, h.e, seq, vt_mes_ms());
		snprintf(why, sizeof(why), "after the reset: %s, marker %#x (want 0xe0e00001)",
			 ret ? t->err : "a job completed", vgpu_bo_rd(d, 0));
		ok = !ret && vgpu_bo_rd(d, 0) == 0xE0E00001;
	}
	vt_kit_check(h.k, ok, names[i++], why);

	ret = vgpu_mes_remove(t, h.e);
	vgpu_mes_status(h.k->m, h.e->doorbell, &s);
	snprintf(why, sizeof(why), "%s; QUERY_STATUS %#x (want not KNOWN)",
		 ret ? t->err : "removed", s.st);
	vt_kit_check(h.k, !ret && !VT_MQ_ST(s.st, KNOWN), names[i++], why);

	/* No more feeding: every stream job completes, in order. */
	why[0] = '\0';
	for (j = 0, ret = 0; j < VT_HANG_STREAMS && !ret && !why[0]; j++) {
		ret = vt_kit_drain(h.k, h.o[j]);
		if (ret)
			snprintf(why, sizeof(why), "%s", t->err);
		else
			vt_kit_ordered(h.o[j], h.o[j]->seq, why, sizeof(why));
	}
	vt_note(t, "streams: %u, %u, %u jobs", h.o[0]->seq, h.o[1]->seq, h.o[2]->seq);
	vt_kit_check(h.k, !why[0], names[i++], why);
out:
	vt_kit_end(h.k);
	return vt_cp_end(t, t->vg->cp);
}
