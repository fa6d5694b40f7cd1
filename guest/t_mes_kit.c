// SPDX-License-Identifier: GPL-2.0
/*
 * The MES cases' kit (see t_mes.h).
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/wait.h>

#include "t_mes.h"

/* A running scheduler (SET_HW_RESOURCES hw, or all compute slots) with its event log. */
struct vt_mes_kit *vt_kit_start(struct vt_case *t, const struct vgpu_mes_hw *hw)
{
	struct vgpu_cp *cp = vgpu_cp_get(t);
	struct vt_mes_kit *k;

	if (!cp)
		return NULL;
	k = kzalloc(sizeof(*k), GFP_KERNEL);
	if (!k) {
		vt_reason(t, -ENOMEM, "out of memory");
		return NULL;
	}
	k->t = t;
	k->cp = cp;
	k->m = vgpu_mes_start(t, cp, hw);
	if (!k->m) {
		kfree(k);
		return NULL;
	}
	return k;
}

/*
 * Halts the scheduler first (every queue it mapped stops, its VMIDs are disabled), then frees
 * the queues, the processes and the buffers. If the scheduler did not stop, the CP is wedged
 * and all of it is leaked.
 */
void vt_kit_end(struct vt_mes_kit *k)
{
	unsigned int i;

	if (!k)
		return;
	if (vgpu_mes_stop(k->t, k->m))
		vt_note(k->t, "mes: teardown: %s", k->t->err);
	for (i = 0; i < k->nq; i++)
		vgpu_mes_queue_destroy(k->q[i]);
	for (i = 0; i < k->nproc; i++)
		vgpu_mes_proc_destroy(k->proc[i]);
	for (i = 0; i < k->nbo; i++)
		vgpu_bo_free(k->cp, k->bo[i]);
	vgpu_mes_free(k->m);
	kfree(k);
}

struct vgpu_mes_proc *vt_kit_proc(struct vt_mes_kit *k, u16 pasid)
{
	struct vgpu_mes_proc *p;

	if (k->nproc == VT_KIT_PROCS) {
		vt_reason(k->t, -ENOSPC, "more than %u processes", VT_KIT_PROCS);
		return NULL;
	}
	p = vgpu_mes_proc_create(k->t, k->m, pasid);
	if (p)
		k->proc[k->nproc++] = p;
	return p;
}

/* Queue number k->nq (doorbell VT_MES_DB_QUEUE of it) in process p; added if add. */
struct vgpu_mes_queue *vt_kit_queue(struct vt_mes_kit *k, struct vgpu_mes_proc *p,
				    const struct vgpu_mes_queue_opts *o, bool add)
{
	struct vgpu_mes_queue *q;

	if (k->nq == VT_KIT_QUEUES) {
		vt_reason(k->t, -ENOSPC, "more than %u queues", VT_KIT_QUEUES);
		return NULL;
	}
	q = vgpu_mes_queue_create(k->t, p, VT_MES_DB_QUEUE(k->nq), o);
	if (!q)
		return NULL;
	k->q[k->nq++] = q;
	if (add && vgpu_mes_add(k->t, q))
		return NULL;
	return q;
}

/* A zeroed UC buffer, freed with the kit. */
struct vgpu_bo *vt_kit_bo(struct vt_mes_kit *k, size_t size)
{
	struct vgpu_bo *bo;

	if (k->nbo == VT_KIT_BOS) {
		vt_reason(k->t, -ENOSPC, "more than %u buffers", VT_KIT_BOS);
		return NULL;
	}
	bo = vgpu_bo_alloc(k->t, k->cp, size, false);
	if (bo)
		k->bo[k->nbo++] = bo;
	return bo;
}

/* What the scheduler says, and the tail of its event log: once per case, at the first failure. */
void vt_kit_dump(struct vt_mes_kit *k)
{
	char st[320];
	u32 err, hung, ueops;

	if (k->dumped)
		return;
	k->dumped = true;
	vgpu_mes_describe(k->m, st, sizeof(st));
	vt_note(k->t, "mes: %s", st);
	vgpu_ih_mes_counts(k->cp, &err, &hung, &ueops);
	vt_note(k->t, "mes: IVs: %u MES errors, %u hung queues, %u user-queue EOPs", err, hung,
		ueops);
	vgpu_mes_log_tail(k->t, k->m, VT_KIT_TAIL);
}

/* A subtest result; a failure also dumps the scheduler's state (once). */
bool vt_kit_check(struct vt_mes_kit *k, bool ok, const char *name, const char *why)
{
	if (!ok)
		vt_kit_dump(k);
	return vt_check(k->t, ok, name, "%s", why);
}

/* What vt_kit_expect_err compares with: FRAME_ERRORS, MES error IVs, events before a frame. */
void vt_kit_snap(struct vt_mes_kit *k)
{
	k->snap_errors = vgpu_rd(k->cp->vg, VGPU_REG_MES_FRAME_ERRORS);
	vgpu_ih_mes_counts(k->cp, &k->snap_ivs, NULL, NULL);
	k->snap_events = vgpu_mes_log_count(k->m);
}

/*
 * A frame that must have failed with MES_ERR_want (ret is its submit's): -EIO (the ring fence
 * came, the frame's status stayed 0), MES_LAST_ERROR names want and opcode op, FRAME_ERRORS
 * went up by one since vt_kit_snap, a MES error IV with the reason and opcode came, and the
 * event log has a FRAME_ERROR with the reason.
 */
bool vt_kit_expect_err(struct vt_mes_kit *k, const char *name, int ret, u32 op, u32 want)
{
	u32 frame_errors = k->snap_errors, ivs = k->snap_ivs, events = k->snap_events;
	struct vgpu *vg = k->cp->vg;
	u32 le = vgpu_rd(vg, VGPU_REG_MES_LAST_ERROR), fe, data[4], n;
	char why[VT_WHY_LEN];
	struct vgpu_mes_evt e;

	fe = vgpu_rd(vg, VGPU_REG_MES_FRAME_ERRORS);
	if (ret == -EIO)
		wait_event_timeout(vg->wq, (vgpu_ih_mes_counts(k->cp, &n, NULL, NULL), n != ivs),
				   msecs_to_jiffies(timeout_ms));
	vgpu_ih_mes_counts(k->cp, &n, NULL, NULL);
	vgpu_ih_mes_last(k->cp, data, NULL, NULL);
	why[0] = '\0';
	if (ret != -EIO)
		snprintf(why, sizeof(why), "%s %s: want it to fail with %s, got %d (%s)",
			 vgpu_mes_op_name(op), ret ? "did not complete" : "succeeded",
			 vgpu_mes_err_name(want), ret, ret ? k->t->err : "api_status written");
	else if (FIELD_GET(VGPU_REG_MES_LAST_ERROR__REASON_MASK, le) != want ||
		 FIELD_GET(VGPU_REG_MES_LAST_ERROR__OPCODE_MASK, le) != op)
		snprintf(why, sizeof(why), "MES_LAST_ERROR %#x: %s opcode %u, want %s opcode %u",
			 le, vgpu_mes_err_name(FIELD_GET(VGPU_REG_MES_LAST_ERROR__REASON_MASK, le)),
			 (u32)FIELD_GET(VGPU_REG_MES_LAST_ERROR__OPCODE_MASK, le),
			 vgpu_mes_err_name(want), op);
	else if (fe != frame_errors + 1)
		snprintf(why, sizeof(why), "MES_FRAME_ERRORS %u -> %u, want +1", frame_errors, fe);
	else if (n != ivs + 1 || data[0] != want || data[1] != op)
		snprintf(why, sizeof(why),
			 "MES error IVs %u -> %u (want +1), the last DW4 %u DW5 %u (want %u, %u)",
			 ivs, n, data[0], data[1], want, op);
	else if (vgpu_bo_rd(k->m->log, 4) &&	/* the log is set up */
		 !vgpu_mes_log_find(k->m, events, VGPU_MES_EVT_FRAME_ERROR, want, VT_MES_ANY, &e))
		snprintf(why, sizeof(why), "no FRAME_ERROR event with reason %u in the log since #%u",
			 want, events);
	return vt_kit_check(k, !why[0], name, why);
}

/*
 * Keeps pending ordered jobs on q (vgpu_mq_ordered_job + a fence each, job k's fence is k),
 * then rings the doorbell once if it wrote any.
 */
int vt_kit_stream(struct vt_mes_kit *k, struct vgpu_mes_queue *q, u32 pending)
{
	u32 p[32], n, seq, done = vgpu_mq_fence_read(q), wrote = 0;
	int ret;

	while (q->seq - done < pending) {
		n = vgpu_mq_ordered_job(q, p, q->seq + 1);
		ret = vgpu_mq_submit(k->t, q, p, n, false, false, &seq);
		if (ret)
			return ret;
		wrote++;
	}
	if (wrote)
		vgpu_mq_kick(q);
	return 0;
}

/* Waits for every fence written on q. */
int vt_kit_drain(struct vt_mes_kit *k, struct vgpu_mes_queue *q)
{
	return vgpu_mq_wait(k->t, q, q->seq, vt_mes_ms());
}

/* After jobs ordered jobs 1..jobs (the last VT_MQ_LOG_MAX of them logged): all ran, in order. */
bool vt_kit_ordered(struct vgpu_mes_queue *q, u32 jobs, char *why, size_t len)
{
	u32 c = vgpu_mq_aux(q, VT_MQ_AUX_COUNTER), f = vgpu_mq_fence_read(q), j, v;

	if (c != jobs || f != jobs) {
		snprintf(why, len, "db %#x: counter %u, fence %u after %u jobs", q->doorbell, c, f,
			 jobs);
		return false;
	}
	for (j = jobs > VT_MQ_LOG_MAX ? jobs - VT_MQ_LOG_MAX + 1 : 1; j <= jobs; j++) {
		v = vgpu_mq_aux(q, VT_MQ_AUX_LOG + 4 * (j % VT_MQ_LOG_MAX));
		if (v != j - 1) {
			snprintf(why, len, "db %#x: job %u saw the counter at %u, want %u (out of order)",
				 q->doorbell, j, v, j - 1);
			return false;
		}
	}
	return true;
}

/* Waits until MES_MAPPED reads want (or ms pass). */
bool vt_kit_wait_mapped(struct vt_mes_kit *k, u32 want, unsigned int ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(ms);

	for (;;) {
		if (vgpu_rd(k->cp->vg, VGPU_REG_MES_MAPPED) == want)
			return true;
		if (time_after(jiffies, deadline))
			return false;
		usleep_range(100, 200);
	}
}

/* The endless kernel and a fence behind it (never reached) on q, doorbell rung. */
int vt_kit_endless(struct vt_mes_kit *k, struct vgpu_mes_queue *q, u32 *seq)
{
	u32 p[16];

	return vgpu_mq_submit(k->t, q, p, vt_endless(p), false, true, seq);
}
