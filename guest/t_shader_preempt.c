// SPDX-License-Identifier: GPL-2.0
/*
 * Preemption of shaders (docs/shader.md, "Preemption"). shader_preempt: long shaders (spin_sum)
 * on more user queues than MES has slots, each queue's MQD with a context save area: MES
 * time-slices them, every unmap of a queue inside its shader saves the waves to the CSA and
 * the next map resumes them, and every result is that of an uninterrupted run; the event log
 * gives the preemption latency (PREEMPT to UNMAP of the same queue). shader_endless: an
 * endless shader on a kernel queue, which a drain cannot stop: the driver's job timeout
 * (sched.h) finds it, a queue reset ends it, and a shader stream on another kernel queue runs
 * and completes correctly throughout.
 */

#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/math64.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>

#include "cases.h"
#include "cp.h"
#include "sched.h"
#include "t_mes.h"
#include "vgpu_shaders.h"

#define VT_SP_MAXQ		16	/* queues at most */
#define VT_SP_ITEMS		32	/* work-items per workgroup */
#define VT_SP_GROUPS		2
#define VT_SP_N			(VT_SP_ITEMS * VT_SP_GROUPS)
#define VT_SP_LOOPS		200000	/* additions per work-item: ~0.6 M instructions */
#define VT_SP_VA		0x0000040000000000ULL	/* the process's shader buffers */
#define VT_SP_VA_ARGS		(VT_SP_VA + SZ_2M)
#define VT_SP_VA_OUT		(VT_SP_VA + 2 * SZ_2M)
#define VT_SP_VA_CSA		(VT_SP_VA + 4 * SZ_2M)
#define VT_SP_ENDLESS		(~0ULL)	/* spin_sum's loops: never ends */
/*
 * How long all the queues' shaders may take: 30 s at the default timeout_ms, longer in
 * proportion when the harness gives a slow device more (a race-detector server runs the
 * shaders several times slower).
 */
#define VT_SP_WAIT_MS		(15 * max_t(unsigned int, timeout_ms, 2000))

static void vt_put64(struct vgpu_bo *bo, u32 off, u64 v)
{
	vgpu_bo_wr(bo, off, lower_32_bits(v));
	vgpu_bo_wr(bo, off + 4, upper_32_bits(v));
}

static u64 vt_get64(struct vgpu_bo *bo, u32 off)
{
	return vgpu_bo_rd(bo, off) | (u64)vgpu_bo_rd(bo, off + 4) << 32;
}

/* Outputs of spin_sum at off in out that are not loops * (i+1): the count, and the first. */
static u32 vt_spin_bad(struct vgpu_bo *out, u32 off, u32 n, u64 loops, u32 *first)
{
	u32 i, bad = 0;

	for (i = 0; i < n; i++) {
		if (vt_get64(out, off + 8 * i) != loops * (i + 1) && !bad++)
			*first = i;
	}
	return bad;
}

/* The context save area a queue needs: every CU's workgroup in flight. */
static u32 vt_csa_bytes(struct vgpu *vg)
{
	u32 cus = vgpu_rd(vg, VGPU_REG_ID_COMPUTE_UNITS) ?: 8;
	u32 b = VGPU_SHADER_CSA_HEADER_BYTES + cus * (VGPU_SHADER_CSA_GROUP_BYTES +
		VT_SP_ITEMS * (VGPU_SHADER_CSA_ITEM_BYTES + VGPU_SHADER_STACK_DEFAULT));

	return ALIGN(b, VT_GPU_PAGE);
}

static int vt_u64_cmp(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/*
 * The preemption latencies in the event log since event from: for each quantum preemption
 * (a queue with work: here, inside its shader or its fence behind it), the time to that
 * queue's next UNMAP, which MES logs once it has seen the save complete. Sorted.
 */
static unsigned int vt_preempt_latencies(struct vgpu_mes *m, u32 from, u64 *lat, unsigned int max)
{
	u32 end = vgpu_mes_log_count(m), n, k;
	struct vgpu_mes_evt e, u;
	unsigned int cnt = 0;

	for (n = from; n < end && cnt < max; n++) {
		if (!vgpu_mes_log_get(m, n, &e) || e.kind != VGPU_MES_EVT_PREEMPT ||
		    e.reason != VGPU_MES_UNMAP_QUANTUM)
			continue;
		for (k = n + 1; k < end; k++) {
			if (vgpu_mes_log_get(m, k, &u) && u.kind == VGPU_MES_EVT_UNMAP &&
			    u.doorbell == e.doorbell) {
				lat[cnt++] = u.time_ns - e.time_ns;
				break;
			}
		}
	}
	sort(lat, cnt, sizeof(*lat), vt_u64_cmp, NULL);
	return cnt;
}

enum vt_res t_shader_preempt(struct vt_case *t)
{
	static const char *const names[] = { "queues_added", "all_complete", "results", "saved_mid_shader" };
	const unsigned int nn = ARRAY_SIZE(names);
	struct vgpu_mes_queue_opts o = { .priority = VGPU_MES_PRIORITY_NORMAL };
	struct vgpu_bo *prog, *args, *out, *csa[VT_SP_MAXQ] = { };
	struct vgpu_mes_queue *qs[VT_SP_MAXQ];
	u32 seq[VT_SP_MAXQ], p[VT_SHADER_DW + 8], n, csab, ev0, unmaps0, bad = 0, first = 0, badq = 0;
	unsigned int nq, i = 0, j, saved = 0, nlat;
	struct vgpu_mes_proc *proc;
	struct vgpu_mes_hw hw;
	struct vgpu *vg = t->vg;
	struct vt_mes_kit *k;
	u64 *lat = NULL;
	ktime_t t0;
	int ret = 0;

	vt_sub_begin(t, nn);
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, nn);
	/* Four compute slots (two per pipe), twice as many queues. */
	vgpu_mes_hw_default(t->vg->cp, &hw);
	hw.compute_mask[0] = hw.compute_mask[1] = 0x3;
	k = vt_kit_start(t, &hw);
	if (!k) {
		vt_sub_fail_all(t, names, nn);
		return vt_cp_end(t, t->vg->cp);
	}
	nq = min_t(unsigned int, 2 * k->m->nslots, VT_SP_MAXQ);
	csab = vt_csa_bytes(vg);
	proc = vt_kit_proc(k, 0x501);
	prog = proc ? vt_kit_bo(k, VT_GPU_PAGE) : NULL;
	args = prog ? vt_kit_bo(k, VT_GPU_PAGE) : NULL;
	out = args ? vt_kit_bo(k, ALIGN(nq * VT_SP_N * 8, VT_GPU_PAGE)) : NULL;
	ret = out ? 0 : -ENOMEM;
	if (!ret) {
		memcpy(prog->cpu, vgpu_shader_spin_sum, sizeof(vgpu_shader_spin_sum));
		ret = vgpu_mes_proc_map(t, proc, VT_SP_VA, prog, VT_VM_RWX) ?:
		      vgpu_mes_proc_map(t, proc, VT_SP_VA_ARGS, args, VT_VM_RW) ?:
		      vgpu_mes_proc_map(t, proc, VT_SP_VA_OUT, out, VT_VM_RW);
	}
	for (j = 0; j < nq && !ret; j++) {
		u64 csa_va = VT_SP_VA_CSA + (u64)j * csab;

		csa[j] = vt_kit_bo(k, csab);
		ret = csa[j] ? vgpu_mes_proc_map(t, proc, csa_va, csa[j], VT_VM_RW) : -ENOMEM;
		qs[j] = ret ? NULL : vt_kit_queue(k, proc, &o, false);
		if (!qs[j]) {
			ret = ret ?: -EIO;
			break;
		}
		/* The MQD's context save area (gfx_v11_0_compute_mqd_init sets it from the CWSR area). */
		vgpu_bo_wr(qs[j]->mqd, 4 * VGPU_MES_MQD_DW_CP_HQD_CTX_SAVE_BASE_ADDR_LO, lower_32_bits(csa_va));
		vgpu_bo_wr(qs[j]->mqd, 4 * VGPU_MES_MQD_DW_CP_HQD_CTX_SAVE_BASE_ADDR_HI, upper_32_bits(csa_va));
		vgpu_bo_wr(qs[j]->mqd, 4 * VGPU_MES_MQD_DW_CP_HQD_CTX_SAVE_SIZE, csab);
		ret = vgpu_mes_add(t, qs[j]);
		vt_put64(args, 16 * j + VGPU_SHADER_SPIN_SUM_ARG_OUT, VT_SP_VA_OUT + 8ULL * VT_SP_N * j);
		vt_put64(args, 16 * j + VGPU_SHADER_SPIN_SUM_ARG_LOOPS, VT_SP_LOOPS);
	}
	if (!vt_kit_check(k, !ret, names[i++], t->err)) {
		vt_sub_skip(t, names + i, nn - i, "the queues were not added");
		goto out;
	}

	/* Every queue gets its shader at once: twice as many as slots, so MES time-slices them. */
	ev0 = vgpu_mes_log_count(k->m);
	unmaps0 = vgpu_rd(vg, VGPU_REG_MES_UNMAPS);
	t0 = ktime_get();
	for (j = 0; j < nq && !ret; j++) {
		n = pm4_shader(p, VT_SP_VA, VGPU_SHADER_SPIN_SUM_SLOTS, VT_SP_ITEMS, 1, 1, VT_SP_VA_ARGS + 16 * j);
		n += pm4_dispatch_direct(p + n, VT_SP_GROUPS, 1, 1);
		ret = vgpu_mq_submit(t, qs[j], p, n, false, true, &seq[j]);
	}
	for (j = 0; j < nq && !ret; j++)
		ret = vgpu_mq_wait(t, qs[j], seq[j], VT_SP_WAIT_MS);
	vt_note(t, "%u queues on %u slots, %u spin_sum work-items of %u additions each: done in %lld ms, MES_UNMAPS +%u",
		nq, k->m->nslots, VT_SP_N, VT_SP_LOOPS, ktime_ms_delta(ktime_get(), t0),
		vgpu_rd(vg, VGPU_REG_MES_UNMAPS) - unmaps0);
	vt_kit_check(k, !ret, names[i++], t->err);

	for (j = 0; j < nq && !ret; j++) {
		u32 f = 0, b = vt_spin_bad(out, 8 * VT_SP_N * j, VT_SP_N, VT_SP_LOOPS, &f);

		if (b && !bad) {
			badq = j;
			first = f;
		}
		bad += b;
		saved += vgpu_bo_rd(csa[j], 0) == VGPU_SHADER_CSA_MAGIC;
	}
	{
		char why[VT_WHY_LEN];

		snprintf(why, sizeof(why), "%u of %u outputs wrong, the first queue %u out[%u] = %llu (want %llu)",
			 bad, nq * VT_SP_N, badq, first, vt_get64(out, 8 * (VT_SP_N * badq + first)),
			 (u64)VT_SP_LOOPS * (first + 1));
		vt_kit_check(k, !ret && !bad, names[i++], why);
	}

	lat = kcalloc(1024, sizeof(*lat), GFP_KERNEL);
	nlat = lat ? vt_preempt_latencies(k->m, ev0, lat, 1024) : 0;
	if (nlat)
		vt_note(t, "preemption latency (quantum PREEMPT to UNMAP in the event log, %u preemptions): min %llu us, median %llu us, max %llu us",
			nlat, div_u64(lat[0], 1000), div_u64(lat[nlat / 2], 1000), div_u64(lat[nlat - 1], 1000));
	{
		char why[VT_WHY_LEN];

		snprintf(why, sizeof(why), "%u of %u queues' context save areas hold a saved dispatch, want at least one",
			 saved, nq);
		vt_note(t, "%u of %u queues were saved inside their shader at least once", saved, nq);
		vt_kit_check(k, !ret && saved > 0, names[i++], why);
	}
	kfree(lat);
out:
	vt_kit_end(k);
	return vt_cp_end(t, t->vg->cp);
}

/* ---- shader_endless ---- */

#define VT_SE_STREAM_LOOPS	20000	/* the stream's shaders: short */
#define VT_SE_MIN		4	/* stream dispatches that must complete while X hangs */
#define VT_SE_DEPTH		2	/* stream dispatches kept pending */

struct vt_se {
	struct vt_case *t;
	struct vgpu_cp *cp;
	struct vgpu_bo *prog, *args, *out;
	struct vt_sched x, y;	/* X: the endless shader; Y: a stream of short ones */
};

/* The SH state of a spin_sum dispatch with argument block a, on r's ring (no fence). */
static int vt_se_state(struct vt_se *s, struct vgpu_ring *r, u32 a)
{
	u32 p[VT_SHADER_DW];
	unsigned int n = pm4_shader(p, s->prog->gpu, VGPU_SHADER_SPIN_SUM_SLOTS, VT_SP_ITEMS, 1, 1,
				    s->args->gpu + a);
	int ret = vgpu_ring_alloc(s->t, r, n);

	if (!ret) {
		vgpu_ring_put(r, p, n);
		vgpu_ring_commit(r);
	}
	return ret;
}

static int vt_se_dispatch(struct vt_se *s, struct vt_sched *q)
{
	u32 p[8];

	return vt_sched_submit(s->t, q, p, pm4_dispatch_direct(p, VT_SP_GROUPS, 1, 1), false);
}

/* Keeps the stream going: completed dispatches counted, VT_SE_DEPTH pending. */
static int vt_se_stream(struct vt_se *s)
{
	int ret = 0;

	vt_sched_poll(&s->y);
	while (!ret && s->y.count < VT_SE_DEPTH)
		ret = vt_se_dispatch(s, &s->y);
	return ret;
}

enum vt_res t_shader_endless(struct vt_case *t)
{
	static const char *const names[] = {
		"hang_detected", "other_queue_ran", "queue_reset", "recovered", "other_results",
	};
	const unsigned int nn = ARRAY_SIZE(names);
	u64 timeout = (u64)job_timeout_ms * NSEC_PER_MSEC;
	struct vgpu_ring *rx = NULL, *ry = NULL;
	u32 during = 0, state, b, first = 0, p[VT_SHADER_DW + 8];
	struct vt_se *s;
	struct vt_job *j = NULL;
	unsigned int i = 0, n;
	ktime_t t0;
	int ret;

	vt_sub_begin(t, nn);
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, nn);
	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s) {
		vt_reason(t, -ENOMEM, "out of memory");
		vt_sub_fail_all(t, names, nn);
		return vt_cp_end(t, t->vg->cp);
	}
	s->t = t;
	s->cp = t->vg->cp;
	s->prog = vgpu_bo_alloc(t, s->cp, VT_GPU_PAGE, false);
	s->args = s->prog ? vgpu_bo_alloc(t, s->cp, VT_GPU_PAGE, false) : NULL;
	s->out = s->args ? vgpu_bo_alloc(t, s->cp, VT_GPU_PAGE, false) : NULL;
	if (s->out) {
		memcpy(s->prog->cpu, vgpu_shader_spin_sum, sizeof(vgpu_shader_spin_sum));
		/* Argument blocks: 0 X's endless, 16 the stream's, 32 X's after the reset. */
		vt_put64(s->args, 0 + VGPU_SHADER_SPIN_SUM_ARG_OUT, s->out->gpu);
		vt_put64(s->args, 0 + VGPU_SHADER_SPIN_SUM_ARG_LOOPS, VT_SP_ENDLESS);
		vt_put64(s->args, 16 + VGPU_SHADER_SPIN_SUM_ARG_OUT, s->out->gpu + 8 * VT_SP_N);
		vt_put64(s->args, 16 + VGPU_SHADER_SPIN_SUM_ARG_LOOPS, VT_SE_STREAM_LOOPS);
		vt_put64(s->args, 32 + VGPU_SHADER_SPIN_SUM_ARG_OUT, s->out->gpu + 16 * VT_SP_N);
		vt_put64(s->args, 32 + VGPU_SHADER_SPIN_SUM_ARG_LOOPS, VT_SE_STREAM_LOOPS);
		rx = vgpu_ring_create(t, s->cp, vt_compute_slot(s->cp, 0, 3), VT_RING_BYTES);
	}
	if (rx)
		ry = vgpu_ring_create(t, s->cp, vt_compute_slot(s->cp, 1, 3), VT_RING_BYTES);
	ret = ry ? 0 : -ENOMEM;
	if (!ret) {
		vt_sched_init(&s->x, rx);
		vt_sched_init(&s->y, ry);
		ret = vt_se_state(s, rx, 0) ?: vt_se_state(s, ry, 16) ?: vt_se_dispatch(s, &s->x);
	}

	/* The job timeout: X's dispatch never completes; the stream's keep completing. */
	for (t0 = ktime_get(); !ret;) {
		u32 done = s->y.completed;

		ret = vt_se_stream(s);
		during += s->y.completed - done;
		vt_sched_poll(&s->x);
		if (!s->x.count) {
			ret = vt_reason(t, -EIO, "the endless shader's dispatch completed");
			break;
		}
		if (vt_sched_timed_out(&s->y, ktime_get(), timeout)) {
			ret = vt_reason(t, -ETIMEDOUT, "the stream timed out too (%u completed)", during);
			break;
		}
		if (!j)
			j = vt_sched_timed_out(&s->x, ktime_get(), timeout);
		/*
		 * X hangs from its job timeout on, until the reset below: on a loaded host the
		 * stream gets up to ten job timeouts in all to show VT_SE_MIN dispatches done.
		 */
		if (j && (during >= VT_SE_MIN || ktime_to_ns(ktime_sub(ktime_get(), t0)) > (s64)(10 * timeout)))
			break;
		usleep_range(100, 200);
	}
	state = ret ? 0 : vgpu_hqd_state(t->vg, rx->slot);
	if (!ret)
		vt_note(t, "job timeout after %lld ms: slot %u fence %u, queue %s; the stream on slot %u completed %u dispatches meanwhile",
			ktime_ms_delta(ktime_get(), t0), rx->slot, j->seq, vgpu_state_name(state), ry->slot, during);
	if (!vt_check(t, !ret && state == VGPU_HQD_STATE_BUSY_KERNEL, names[i++],
		      "%s; queue %s (want BUSY_KERNEL: a kernel queue's drain waits for its dispatches)",
		      ret ? t->err : "timed out", vgpu_state_name(state))) {
		vt_sub_skip(t, names + i, nn - i, "no hang detected");
		goto out;
	}
	vt_check(t, during >= VT_SE_MIN, names[i++], "%u stream dispatches completed while X hung, want at least %u",
		 during, VT_SE_MIN);

	/* The queue reset kills the endless shader; the stream's queue stays active. */
	t0 = ktime_get();
	ret = vgpu_hqd_stop(t, s->cp, rx->slot);
	vt_note(t, "DEQUEUE_RESET of slot %u: HQD_ACTIVE 0 after %lld us", rx->slot, ktime_us_delta(ktime_get(), t0));
	if (!ret && !(vgpu_hqd_rd(t->vg, ry->slot, VGPU_REG_HQD_ACTIVE) & 1))
		ret = vt_reason(t, -EIO, "the stream's queue (slot %u) stopped too", ry->slot);
	vt_check(t, !ret, names[i++], "%s", t->err);

	/* X restarted runs a finite shader: its SH state is programmed again, as after any reset. */
	if (!ret) {
		vt_sched_drop_head(&s->x);
		ret = vgpu_ring_start(t, rx);
	}
	if (!ret) {
		n = pm4_shader(p, s->prog->gpu, VGPU_SHADER_SPIN_SUM_SLOTS, VT_SP_ITEMS, 1, 1, s->args->gpu + 32);
		n += pm4_dispatch_direct(p + n, VT_SP_GROUPS, 1, 1);
		ret = vgpu_submit_wait(t, rx, p, n);
	}
	b = ret ? 0 : vt_spin_bad(s->out, 16 * VT_SP_N, VT_SP_N, VT_SE_STREAM_LOOPS, &first);
	vt_check(t, !ret && !b, names[i++], "%s; %u outputs wrong after the reset", ret ? t->err : "ran", b);

	ret = vt_sched_drain(t, &s->y);
	b = ret ? 0 : vt_spin_bad(s->out, 8 * VT_SP_N, VT_SP_N, VT_SE_STREAM_LOOPS, &first);
	vt_check(t, !ret && !b, names[i++], "%s; %u of the stream's outputs wrong, the first out[%u] = %llu",
		 ret ? t->err : "drained", b, first, vt_get64(s->out, 8 * (VT_SP_N + first)));
out:
	vgpu_ring_destroy(t, ry);
	vgpu_ring_destroy(t, rx);
	vgpu_bo_free(s->cp, s->out);
	vgpu_bo_free(s->cp, s->args);
	vgpu_bo_free(s->cp, s->prog);
	kfree(s);
	return vt_cp_end(t, t->vg->cp);
}
