// SPDX-License-Identifier: GPL-2.0
/*
 * Hang recovery as drivers do it. The hardware does not report a hang: the driver's job
 * timeout (sched.h) finds a job that has been pending too long, here B, the endless built-in
 * kernel on queue X behind a completed job A and in front of two innocent jobs C and D. The
 * driver then resets what B occupies — the queue (hang_queue_reset), the compute engine
 * (hang_engine_reset) or the whole function (hang_flr) —, re-initialises what the reset
 * cleared, emits C and D again (and the unfinished jobs of every other queue the reset
 * stopped), and reports B's fence as lost. Streams of jobs on queues the reset does not
 * concern keep completing meanwhile.
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/math64.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "cases.h"
#include "cp.h"
#include "sched.h"

#define VT_STREAMS		2	/* at most, per case */
#define VT_STREAM_DEPTH		4	/* jobs a stream keeps pending */
#define VT_STREAM_MIN		8	/* stream jobs that must complete while B hangs */
#define VT_STREAM_AFTER		16	/* stream jobs after the recovery */

/* Dwords of the case's page: X's jobs write markers, each stream its job numbers. */
enum { VT_OFF_A = 0, VT_OFF_C = 4, VT_OFF_D = 8, VT_OFF_GATE = 32, VT_OFF_STREAM = 64 };
#define VT_MARK(off)		(0x4A4B0000 | (off))

/* A queue that must keep completing jobs: each writes its number to its dword. */
struct vt_stream {
	struct vt_sched s;
	u32 off;		/* its dword in the page */
	u32 during;		/* jobs it completed while B hung */
	bool gated;		/* a job waits on the gate: the stream has work when reset */
};

struct vt_hang {
	struct vt_case *t;
	struct vgpu *vg;
	struct vgpu_cp *cp;
	struct vgpu_bo *mem;	/* one UC page */
	struct vt_sched x;	/* the queue B hangs */
	struct vt_stream st[VT_STREAMS];
	unsigned int nst;
	u32 seq_a, seq_b, seq_d;
	u64 pending_ms;		/* how long B was pending when the timeout fired */
};

static int vt_write_job(struct vt_case *t, struct vt_sched *s, struct vgpu_bo *mem, u32 off,
			u32 val, bool irq)
{
	u32 p[8];

	return vt_sched_submit(t, s, p, pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM,
						      VGPU_PM4_CACHE_POLICY_LRU, mem->gpu + off,
						      val), irq);
}

/* The job that never ends: one workgroup of the built-in endless kernel. */
static int vt_endless_job(struct vt_case *t, struct vt_sched *s)
{
	u32 p[16], kernel = VGPU_KERNEL_ENDLESS, n;

	n = pm4_set_sh(p, VGPU_SH_COMPUTE_USER_DATA_0, &kernel, 1);
	n += pm4_dispatch_direct(p + n, 1, 1, 1);
	return vt_sched_submit(t, s, p, n, true);
}

/* Retires a stream's finished jobs and keeps VT_STREAM_DEPTH of them pending. */
static int vt_stream_run(struct vt_hang *h, struct vt_stream *st)
{
	int ret = 0;

	vt_sched_poll(&st->s);
	while (!ret && st->s.count < VT_STREAM_DEPTH)
		ret = vt_write_job(h->t, &st->s, h->mem, st->off, st->s.submitted + 1, false);
	return ret;
}

/*
 * Gives a stream that a reset will stop work that is certain to be in flight then: a job that
 * waits (WAIT_REG_MEM) for the gate dword to become 1, and more jobs behind it. The driver
 * opens the gate after the recovery (vt_hang_check_streams), so these jobs must be emitted
 * again to complete.
 */
static int vt_stream_gate(struct vt_hang *h, struct vt_stream *st)
{
	u32 p[16], n;
	int ret;

	n = pm4_wait_mem_eq(p, h->mem->gpu + VT_OFF_GATE, 1, 0xffffffff,
			    VGPU_PM4_CACHE_POLICY_BYPASS);
	n += pm4_write_one(p + n, VGPU_PM4_WRITE_DATA_DST_MEM, VGPU_PM4_CACHE_POLICY_LRU,
			   h->mem->gpu + st->off, st->s.submitted + 1);
	ret = vt_sched_submit(h->t, &st->s, p, n, false);
	if (ret)
		return ret;
	st->gated = true;
	ret = vt_stream_run(h, st);
	if (!ret && !vgpu_hqd_wait_state(h->vg, st->s.r->slot, VGPU_HQD_STATE_WAITING))
		ret = vt_reason(h->t, -EIO, "slot %u is %s, not WAITING on the gate",
				st->s.r->slot,
				vgpu_state_name(vgpu_hqd_state(h->vg, st->s.r->slot)));
	if (!ret)
		vt_note(h->t, "slot %u waits on the gate with %u jobs pending", st->s.r->slot,
			st->s.count);
	return ret;
}

/* Creates queue X on slot x and a stream on each of the nst slots. */
static int vt_hang_setup(struct vt_hang *h, struct vt_case *t, unsigned int x,
			 const unsigned int *streams, unsigned int nst)
{
	struct vgpu_ring *r;
	unsigned int i;

	memset(h, 0, sizeof(*h));
	h->t = t;
	h->vg = t->vg;
	h->cp = vgpu_cp_get(t);
	if (!h->cp)
		return -ENODEV;
	h->mem = vgpu_bo_alloc(t, h->cp, VT_GPU_PAGE, false);
	if (!h->mem)
		return -ENOMEM;
	r = vgpu_ring_create(t, h->cp, x, VT_RING_BYTES);
	if (!r)
		return -EIO;
	vt_sched_init(&h->x, r);
	for (i = 0; i < nst; i++) {
		r = vgpu_ring_create(t, h->cp, streams[i], VT_RING_BYTES);
		if (!r)
			return -EIO;
		vt_sched_init(&h->st[i].s, r);
		h->st[i].off = VT_OFF_STREAM + 64 * i;
		h->nst++;
	}
	return 0;
}

static void vt_hang_teardown(struct vt_hang *h)
{
	unsigned int i;

	if (!h->cp)
		return;
	for (i = 0; i < h->nst; i++)
		vgpu_ring_destroy(h->t, h->st[i].s.r);
	if (h->x.r)
		vgpu_ring_destroy(h->t, h->x.r);
	vgpu_bo_free(h->cp, h->mem);
}

/* A (which must complete), then B (endless), C and D on X; the streams start. */
static int vt_hang_start(struct vt_hang *h)
{
	struct vt_case *t = h->t;
	unsigned int i;
	int ret;

	ret = vt_write_job(t, &h->x, h->mem, VT_OFF_A, VT_MARK(VT_OFF_A), true);
	if (!ret)
		ret = vt_sched_drain(t, &h->x);
	if (!ret && vgpu_bo_rd(h->mem, VT_OFF_A) != VT_MARK(VT_OFF_A))
		ret = vt_reason(t, -EIO, "job A's fence signalled, but its marker reads %#010x",
				vgpu_bo_rd(h->mem, VT_OFF_A));
	if (ret)
		return ret;
	h->seq_a = h->x.r->seq;
	for (i = 0; i < h->nst && !ret; i++)
		ret = vt_stream_run(h, &h->st[i]);
	if (!ret)
		ret = vt_endless_job(t, &h->x);
	h->seq_b = h->x.r->seq;
	if (!ret)
		ret = vt_write_job(t, &h->x, h->mem, VT_OFF_C, VT_MARK(VT_OFF_C), true);
	if (!ret)
		ret = vt_write_job(t, &h->x, h->mem, VT_OFF_D, VT_MARK(VT_OFF_D), true);
	h->seq_d = h->x.r->seq;
	return ret;
}

/*
 * The driver's job timeout: polls X and keeps the streams busy until X's oldest pending job
 * has waited job_timeout_ms. Returns that job, or NULL with t->err.
 */
static struct vt_job *vt_hang_watch(struct vt_hang *h)
{
	u64 timeout = (u64)job_timeout_ms * NSEC_PER_MSEC;
	u32 done0[VT_STREAMS];
	struct vt_job *j;
	unsigned int i;
	ktime_t now;

	for (i = 0; i < h->nst; i++)
		done0[i] = h->st[i].s.completed;
	for (;;) {
		vt_sched_poll(&h->x);
		for (i = 0; i < h->nst; i++) {
			if (vt_stream_run(h, &h->st[i]))
				return NULL;
		}
		now = ktime_get();
		for (i = 0; i < h->nst; i++) {
			j = vt_sched_timed_out(&h->st[i].s, now, timeout);
			if (j) {
				vt_reason(h->t, -ETIMEDOUT,
					  "the stream on slot %u timed out too: fence %u pending for %u ms",
					  h->st[i].s.r->slot, j->seq, job_timeout_ms);
				return NULL;
			}
		}
		if (!h->x.count) {
			vt_reason(h->t, -EIO, "every job on slot %u completed: the endless kernel ended",
				  h->x.r->slot);
			return NULL;
		}
		j = vt_sched_timed_out(&h->x, now, timeout);
		if (j)
			break;
		usleep_range(100, 200);
	}
	h->pending_ms = div_u64(ktime_to_ns(ktime_sub(now, h->x.head_since)), NSEC_PER_MSEC);
	for (i = 0; i < h->nst; i++)
		h->st[i].during = h->st[i].s.completed - done0[i];
	return j;
}

/*
 * Starts the case's jobs and waits for the job timeout; then checks that it picked B, which
 * is in the endless kernel, with C and D not run and only A's EOP IV seen.
 */
static bool vt_hang_detect(struct vt_hang *h, const char *name)
{
	struct vt_case *t = h->t;
	struct vgpu_ih_slot s;
	unsigned int slot = h->x.r->slot;
	struct vt_job *j = NULL;
	u32 state, c, d;
	unsigned int i;
	int ret;

	ret = vt_hang_start(h);
	if (!ret) {
		j = vt_hang_watch(h);
		if (!j)
			ret = -EIO;
	}
	if (ret)
		return vt_check(t, false, name, "%s", t->err);
	state = vgpu_hqd_state(h->vg, slot);
	vgpu_ih_slot_get(h->cp, slot, &s);
	c = vgpu_bo_rd(h->mem, VT_OFF_C);
	d = vgpu_bo_rd(h->mem, VT_OFF_D);
	vt_note(t, "job timeout: slot %u fence %u pending %llu ms (job_timeout_ms %u), queue %s",
		slot, j->seq, h->pending_ms, job_timeout_ms, vgpu_state_name(state));
	for (i = 0; i < h->nst; i++)
		vt_note(t, "meanwhile slot %u completed %u jobs", h->st[i].s.r->slot,
			h->st[i].during);
	return vt_check(t, j->seq == h->seq_b && state == VGPU_HQD_STATE_BUSY_KERNEL && !c && !d &&
			s.eop == 1 && s.eop_ctxid == h->seq_a, name,
			"timed out fence %u (want B's %u), queue %s (want BUSY_KERNEL), C %#x and D %#x (want 0), %u EOP IVs last ctxid %u (want A's %u only)",
			j->seq, h->seq_b, vgpu_state_name(state), c, d, s.eop, s.eop_ctxid,
			h->seq_a);
}

/* Each stream completed at least VT_STREAM_MIN jobs while B hung. */
static bool vt_hang_streams_ran(struct vt_hang *h, const char *name)
{
	unsigned int i;

	for (i = 0; i < h->nst; i++) {
		if (h->st[i].during < VT_STREAM_MIN)
			return vt_check(h->t, false, name,
					"slot %u completed %u jobs while B hung, want at least %u",
					h->st[i].s.r->slot, h->st[i].during, VT_STREAM_MIN);
	}
	return vt_check(h->t, true, name, "%s", "");
}

/* Prints the lost fences of a queue: "lost_fences: slot=<s> seqs=<n>[,<n>...]" or "none". */
static void vt_note_lost(struct vt_case *t, struct vt_sched *s)
{
	char buf[64];
	unsigned int i, n = 0;

	buf[0] = '\0';
	for (i = 0; i < min_t(unsigned int, s->nlost, VT_SCHED_LOST); i++)
		n += scnprintf(buf + n, sizeof(buf) - n, "%s%u", i ? "," : "", s->lost[i]);
	vt_note(t, "lost_fences: slot=%u seqs=%s", s->r->slot, s->nlost ? buf : "none");
}

/* Exactly B was lost: on X its fence alone, on the streams nothing. */
static void vt_hang_check_lost(struct vt_hang *h, const char *name)
{
	unsigned int i, other = 0;

	vt_note_lost(h->t, &h->x);
	for (i = 0; i < h->nst; i++) {
		vt_note_lost(h->t, &h->st[i].s);
		other += h->st[i].s.nlost;
	}
	vt_check(h->t, h->x.nlost == 1 && h->x.lost[0] == h->seq_b && !other, name,
		 "slot %u lost %u fences (first %u), want exactly B's %u; the streams lost %u",
		 h->x.r->slot, h->x.nlost, h->x.nlost ? h->x.lost[0] : 0, h->seq_b, other);
}

/*
 * X after the reset: B is dropped (its fence force-completed, reported lost), the ring is
 * restarted and C and D are emitted again.
 */
static int vt_hang_recover_x(struct vt_hang *h)
{
	int ret;

	vt_sched_drop_head(&h->x);
	ret = vgpu_ring_start(h->t, h->x.r);
	if (!ret)
		ret = vt_sched_resubmit(h->t, &h->x);
	return ret;
}

/* C and D ran after the recovery: markers, fence, their EOP IVs, no error IV. */
static void vt_hang_check_resubmitted(struct vt_hang *h, const char *name, int ret)
{
	struct vt_case *t = h->t;
	struct vgpu_ih_slot s;
	u32 c, d, f;

	if (!ret)
		ret = vt_sched_drain(t, &h->x);
	if (!ret)
		ret = vgpu_eop_wait(t, h->x.r, 2);
	if (ret) {
		vt_check(t, false, name, "%s", t->err);
		return;
	}
	vgpu_ih_slot_get(h->cp, h->x.r->slot, &s);
	c = vgpu_bo_rd(h->mem, VT_OFF_C);
	d = vgpu_bo_rd(h->mem, VT_OFF_D);
	f = vgpu_fence_read(h->x.r);
	vt_check(t, c == VT_MARK(VT_OFF_C) && d == VT_MARK(VT_OFF_D) && f == h->seq_d &&
		 h->x.resubmitted == 2 && s.eop == 2 && s.eop_ctxid == h->seq_d &&
		 !s.eop_unordered && !s.eop_early && !s.err && !h->x.r->fence_backwards, name,
		 "C %#x D %#x, fence %u (want %u), %u jobs emitted again (want 2), %u EOP IVs last ctxid %u (%u unordered, %u early), %u error IVs, fence backwards %u",
		 c, d, f, h->seq_d, h->x.resubmitted, s.eop, s.eop_ctxid, s.eop_unordered,
		 s.eop_early, s.err, h->x.r->fence_backwards);
}

/*
 * Opens the gate and runs VT_STREAM_AFTER more jobs on every stream: all complete, in order,
 * none lost; a stream that had work in flight at the reset had it emitted again.
 */
static void vt_hang_check_streams(struct vt_hang *h, const char *name)
{
	struct vt_case *t = h->t;
	struct vgpu_ih_slot s;
	struct vt_stream *st;
	unsigned int i;
	u32 target, v;
	int ret = 0;

	vgpu_bo_wr(h->mem, VT_OFF_GATE, 1);
	for (i = 0; i < h->nst && !ret; i++) {
		st = &h->st[i];
		if (st->gated && !st->s.resubmitted) {
			ret = vt_reason(t, -EIO,
					"slot %u had jobs in flight at the reset, but none was emitted again",
					st->s.r->slot);
			break;
		}
		target = st->s.submitted + VT_STREAM_AFTER;
		while (!ret && st->s.submitted < target)
			ret = vt_stream_run(h, st);
		if (!ret)
			ret = vt_sched_drain(t, &st->s);
		if (ret)
			break;
		vgpu_ih_slot_get(h->cp, st->s.r->slot, &s);
		v = vgpu_bo_rd(h->mem, st->off);
		if (v != st->s.submitted || st->s.r->fence_backwards || s.err || st->s.nlost)
			ret = vt_reason(t, -EIO,
					"slot %u: dword %u after %u jobs, fence backwards %u, %u error IVs, %u lost",
					st->s.r->slot, v, st->s.submitted, st->s.r->fence_backwards,
					s.err, st->s.nlost);
	}
	vt_check(t, !ret, name, "%s", t->err);
}

enum vt_res t_hang_queue_reset(struct vt_case *t)
{
	static const char *const names[] = {
		"hang_detected", "other_queue_ran", "queue_reset", "resubmitted", "lost_fence",
		"other_queue_done",
	};
	struct vgpu_ring *y;
	struct vt_hang *h;
	unsigned int stream;
	ktime_t t0;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	h = kzalloc(sizeof(*h), GFP_KERNEL);
	if (!h) {
		vt_reason(t, -ENOMEM, "out of memory");
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		return VT_PASS;
	}
	/* X on pipe 0, the stream on pipe 1: the queue reset must touch X alone. */
	stream = vt_compute_slot(t->vg->cp, 1, 6);
	if (vt_hang_setup(h, t, vt_compute_slot(t->vg->cp, 0, 6), &stream, 1)) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	if (!vt_hang_detect(h, names[0])) {
		vt_sub_skip(t, names + 1, ARRAY_SIZE(names) - 1, "no hang detected");
		goto out;
	}
	vt_hang_streams_ran(h, names[1]);

	/* The queue reset (amdgpu's MMIO path): DEQUEUE_REQUEST = RESET, wait for ACTIVE = 0. */
	y = h->st[0].s.r;
	t0 = ktime_get();
	ret = vgpu_hqd_stop(t, h->cp, h->x.r->slot);
	vt_note(t, "DEQUEUE_RESET of slot %u: HQD_ACTIVE 0 after %lld us", h->x.r->slot,
		ktime_us_delta(ktime_get(), t0));
	if (!ret && !(vgpu_hqd_rd(h->vg, y->slot, VGPU_REG_HQD_ACTIVE) & 1))
		ret = vt_reason(t, -EIO, "the stream's queue (slot %u) stopped too", y->slot);
	vt_check(t, !ret, names[2], "%s", t->err);

	ret = ret ?: vt_hang_recover_x(h);
	vt_hang_check_resubmitted(h, names[3], ret);
	vt_hang_check_lost(h, names[4]);
	vt_hang_check_streams(h, names[5]);
out:
	vt_hang_teardown(h);
	kfree(h);
	return vt_cp_end(t, t->vg->cp);
}

enum vt_res t_hang_engine_reset(struct vt_case *t)
{
	static const char *const names[] = {
		"hang_detected", "streams_ran", "engine_reset", "compute_stopped",
		"gfx_kept_running", "resubmitted", "lost_fence", "streams_done",
	};
	u32 resets0, resets1, st, gfx_during, base_lo, base_hi, dbc;
	unsigned int streams[2], slot;
	char why[VT_WHY_LEN];
	struct vgpu *vg = t->vg;
	struct vgpu_ring *g, *y;
	unsigned long deadline;
	struct vt_hang *h;
	bool ok;
	ktime_t t0;
	s64 us;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	h = kzalloc(sizeof(*h), GFP_KERNEL);
	if (!h) {
		vt_reason(t, -ENOMEM, "out of memory");
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		return VT_PASS;
	}
	/* Stream 0 on the graphics queue (another engine), stream 1 on compute pipe 1. */
	streams[0] = 0;
	streams[1] = vt_compute_slot(vg->cp, 1, 7);
	if (vt_hang_setup(h, t, vt_compute_slot(vg->cp, 0, 7), streams, 2)) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	g = h->st[0].s.r;
	y = h->st[1].s.r;
	if (!vt_hang_detect(h, names[0])) {
		vt_sub_skip(t, names + 1, ARRAY_SIZE(names) - 1, "no hang detected");
		goto out;
	}
	vt_hang_streams_ran(h, names[1]);

	/*
	 * Reset the compute engine, with work in flight on the compute stream; the graphics stream
	 * keeps running while the reset completes.
	 */
	ret = vt_stream_gate(h, &h->st[1]);
	resets0 = vgpu_rd(vg, VGPU_REG_CP_ENGINE_RESETS);
	gfx_during = h->st[0].s.completed;
	t0 = ktime_get();
	vgpu_wr(vg, VGPU_REG_CP_ENGINE_RESET, VGPU_REG_CP_ENGINE_RESET__COMPUTE_MASK);
	deadline = jiffies + msecs_to_jiffies(timeout_ms);
	for (;;) {
		st = vgpu_rd(vg, VGPU_REG_CP_ENGINE_RESET_STATUS);
		if (!(st & VGPU_REG_CP_ENGINE_RESET__COMPUTE_MASK) || time_after(jiffies, deadline))
			break;
		if (!ret)
			ret = vt_stream_run(h, &h->st[0]);
		usleep_range(10, 20);
	}
	us = ktime_us_delta(ktime_get(), t0);
	gfx_during = h->st[0].s.completed - gfx_during;
	resets1 = vgpu_rd(vg, VGPU_REG_CP_ENGINE_RESETS);
	vt_note(t,
		"CP_ENGINE_RESET COMPUTE: STATUS %#x after %lld us, ENGINE_RESETS %u -> %u, %u graphics jobs completed meanwhile",
		st, us, resets0, resets1, gfx_during);
	why[0] = '\0';
	if (ret)
		snprintf(why, sizeof(why), "%s", t->err);
	else if (st & VGPU_REG_CP_ENGINE_RESET__COMPUTE_MASK)
		snprintf(why, sizeof(why), "ENGINE_RESET_STATUS %#x: COMPUTE still resetting after %u ms",
			 st, timeout_ms);
	else if (resets1 != resets0 + 1)
		snprintf(why, sizeof(why), "ENGINE_RESET_STATUS clear, but ENGINE_RESETS went %u -> %u (want +1)",
			 resets0, resets1);
	vt_check(t, !why[0], names[2], "%s", why);

	/* Every compute queue stopped, its registers back at their power-on values. */
	for (slot = 1, ok = true; slot < h->cp->hqds && ok; slot++)
		ok = !(vgpu_hqd_rd(vg, slot, VGPU_REG_HQD_ACTIVE) & 1);
	slot--;
	base_lo = vgpu_hqd_rd(vg, h->x.r->slot, VGPU_REG_HQD_PQ_BASE_LO);
	base_hi = vgpu_hqd_rd(vg, h->x.r->slot, VGPU_REG_HQD_PQ_BASE_HI);
	dbc = vgpu_hqd_rd(vg, h->x.r->slot, VGPU_REG_HQD_PQ_DOORBELL_CONTROL);
	vt_check(t, ok && !base_lo && !base_hi && !dbc, names[3],
		 "slot %u HQD_ACTIVE %u; slot %u PQ_BASE %#x:%08x, PQ_DOORBELL_CONTROL %#x (want all 0)",
		 slot, vgpu_hqd_rd(vg, slot, VGPU_REG_HQD_ACTIVE) & 1, h->x.r->slot, base_hi,
		 base_lo, dbc);

	/* The graphics queue was not touched: still active, as programmed, and working. */
	base_lo = vgpu_hqd_rd(vg, g->slot, VGPU_REG_HQD_PQ_BASE_LO);
	base_hi = vgpu_hqd_rd(vg, g->slot, VGPU_REG_HQD_PQ_BASE_HI);
	ok = (vgpu_hqd_rd(vg, g->slot, VGPU_REG_HQD_ACTIVE) & 1) &&
	     ((u64)base_hi << 32 | base_lo) == g->bo->gpu;
	ret = ret ?: vt_sched_drain(t, &h->st[0].s);
	vt_check(t, ok && !ret, names[4],
		 "graphics queue: HQD_ACTIVE %u, PQ_BASE %#x:%08x (want %#llx); %s",
		 vgpu_hqd_rd(vg, g->slot, VGPU_REG_HQD_ACTIVE) & 1, base_hi, base_lo, g->bo->gpu,
		 ret ? t->err : "its pending jobs completed");

	/* Re-initialise the compute queues; emit the innocent jobs again. */
	ret = vt_hang_recover_x(h);
	if (!ret)
		ret = vgpu_ring_start(t, y);
	if (!ret)
		ret = vt_sched_resubmit(t, &h->st[1].s);
	vt_note(t, "after the engine reset: %u jobs emitted again on slot %u, %u on slot %u",
		h->x.resubmitted, h->x.r->slot, h->st[1].s.resubmitted, y->slot);
	vt_hang_check_resubmitted(h, names[5], ret);
	vt_hang_check_lost(h, names[6]);
	vt_hang_check_streams(h, names[7]);
out:
	vt_hang_teardown(h);
	kfree(h);
	return vt_cp_end(t, t->vg->cp);
}

enum vt_res t_hang_flr(struct vt_case *t)
{
	static const char *const names[] = {
		"hang_detected", "streams_ran", "flr", "engines_stopped", "reinit_ring_test",
		"resubmitted", "lost_fence", "streams_done",
	};
	u32 fence[1 + VT_STREAMS], fence2[1 + VT_STREAMS], ih0, ih1, magic, active = 0;
	struct vgpu *vg = t->vg;
	struct pci_dev *pdev = vg->pdev;
	unsigned int streams[2], i, slot;
	struct vgpu_ring *rings[1 + VT_STREAMS];
	struct vt_hang *h;
	bool ok;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	h = kzalloc(sizeof(*h), GFP_KERNEL);
	if (!h) {
		vt_reason(t, -ENOMEM, "out of memory");
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		return VT_PASS;
	}
	streams[0] = 0;
	streams[1] = vt_compute_slot(vg->cp, 1, 6);
	if (vt_hang_setup(h, t, vt_compute_slot(vg->cp, 0, 6), streams, 2)) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	rings[0] = h->x.r;
	for (i = 0; i < h->nst; i++)
		rings[1 + i] = h->st[i].s.r;
	if (!vt_hang_detect(h, names[0])) {
		vt_sub_skip(t, names + 1, ARRAY_SIZE(names) - 1, "no hang detected");
		goto out;
	}
	vt_hang_streams_ran(h, names[1]);

	/*
	 * The full reset while X is in the endless kernel and the streams have jobs in flight:
	 * interrupt processing off first, then FLR as a driver's reset path does it.
	 */
	for (i = 0, ret = 0; i < h->nst && !ret; i++)
		ret = vt_stream_gate(h, &h->st[i]);
	if (ret) {
		vt_check(t, false, names[2], "%s", t->err);
		vt_sub_skip(t, names + 3, ARRAY_SIZE(names) - 3, "no work in flight");
		goto out;
	}
	vgpu_cp_suspend(h->cp);
	pci_save_state(pdev);
	ret = pcie_flr(pdev);
	pci_restore_state(pdev);
	magic = vgpu_rd(vg, VGPU_REG_ID_MAGIC);
	vt_note(t, "pcie_flr while slot %u ran the endless kernel and slots %u, %u streamed: %d",
		h->x.r->slot, rings[1]->slot, rings[2]->slot, ret);
	if (!vt_check(t, !ret && magic == VGPU_ID_MAGIC_VALUE, names[2],
		      "pcie_flr() = %d, ID_MAGIC reads %#010x after pci_restore_state()",
		      ret, magic)) {
		vt_sub_skip(t, names + 3, ARRAY_SIZE(names) - 3, "device not back after FLR");
		goto out;
	}

	/* Nothing runs after the reset: no queue active, no fence or IH write for a while. */
	for (slot = 0; slot < h->cp->hqds; slot++)
		active += vgpu_hqd_rd(vg, slot, VGPU_REG_HQD_ACTIVE) & 1;
	for (i = 0; i < ARRAY_SIZE(rings); i++)
		fence[i] = le32_to_cpu(READ_ONCE(*rings[i]->fence_cpu));
	ih0 = le32_to_cpu(READ_ONCE(*h->cp->ih.wptr_wb));
	msleep(VT_SETTLE_MS);
	ih1 = le32_to_cpu(READ_ONCE(*h->cp->ih.wptr_wb));
	for (i = 0, ok = true; i < ARRAY_SIZE(rings); i++) {
		fence2[i] = le32_to_cpu(READ_ONCE(*rings[i]->fence_cpu));
		ok = ok && fence2[i] == fence[i];
	}
	vt_check(t, !active && ok && ih0 == ih1, names[3],
		 "%u queues active after FLR; fences %u/%u/%u -> %u/%u/%u, IH wptr %#x -> %#x in %u ms (want no change)",
		 active, fence[0], fence[1], fence[2], fence2[0], fence2[1], fence2[2], ih0, ih1,
		 VT_SETTLE_MS);

	/* Re-initialise as after probe, then amdgpu's ring tests on both engines. */
	pci_set_master(pdev);
	ret = vgpu_cp_resume(t, h->cp);
	for (i = 0; i < ARRAY_SIZE(rings) && !ret; i++)
		ret = vgpu_ring_start(t, rings[i]);
	if (!ret)
		ret = vgpu_ring_test(t, h->st[0].s.r, false);
	if (!ret)
		ret = vgpu_ring_test(t, h->x.r, false);
	vt_check(t, !ret, names[4], "%s", t->err);

	/* B is lost; everything else pending is emitted again on the fresh rings. */
	if (!ret) {
		vt_sched_drop_head(&h->x);
		ret = vt_sched_resubmit(t, &h->x);
	}
	for (i = 0; i < h->nst && !ret; i++)
		ret = vt_sched_resubmit(t, &h->st[i].s);
	vt_note(t, "after the FLR: %u jobs emitted again on slot %u, %u on slot %u, %u on slot %u",
		h->x.resubmitted, h->x.r->slot, h->st[0].s.resubmitted, rings[1]->slot,
		h->st[1].s.resubmitted, rings[2]->slot);
	vt_hang_check_resubmitted(h, names[5], ret);
	vt_hang_check_lost(h, names[6]);
	vt_hang_check_streams(h, names[7]);
out:
	vt_hang_teardown(h);
	kfree(h);
	return vt_cp_end(t, t->vg->cp);
}
