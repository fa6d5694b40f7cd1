// SPDX-License-Identifier: GPL-2.0
/*
 * The driver's job scheduler for the hang recovery cases (see sched.h).
 */

#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/string.h>

#include "sched.h"

void vt_sched_init(struct vt_sched *s, struct vgpu_ring *r)
{
	memset(s, 0, sizeof(*s));
	s->r = r;
}

/* The i-th pending job, 0 being the oldest. */
static struct vt_job *vt_sched_job(struct vt_sched *s, unsigned int i)
{
	return &s->jobs[(s->head + i) % VT_SCHED_JOBS];
}

/* Emits a job's packets and its fence (a new one, or its own again) and commits them. */
static int vt_sched_emit(struct vt_case *t, struct vt_sched *s, struct vt_job *j, bool again)
{
	int ret = vgpu_ring_alloc(t, s->r, j->ndw + VT_FENCE_DW);

	if (ret)
		return ret;
	vgpu_ring_put(s->r, j->dw, j->ndw);
	if (again)
		vgpu_ring_fence_again(s->r, j->seq, j->irq);
	else
		j->seq = vgpu_ring_fence(s->r, j->irq);
	vgpu_ring_commit(s->r);
	return 0;
}

/* Submits a job of ndw dwords of packets plus a fence and rings the doorbell. */
int vt_sched_submit(struct vt_case *t, struct vt_sched *s, const u32 *dw, unsigned int ndw,
		    bool irq)
{
	struct vt_job *j;
	int ret;

	if (ndw > VT_JOB_MAX_DW)
		return vt_reason(t, -EINVAL, "a job of %u dwords: at most %u", ndw, VT_JOB_MAX_DW);
	if (s->count == VT_SCHED_JOBS)
		return vt_reason(t, -ENOSPC, "slot %u: %u jobs pending already", s->r->slot,
				 s->count);
	j = vt_sched_job(s, s->count);
	memcpy(j->dw, dw, ndw * sizeof(*dw));
	j->ndw = ndw;
	j->irq = irq;
	ret = vt_sched_emit(t, s, j, false);
	if (ret)
		return ret;
	vgpu_ring_kick(s->r);
	/* The job timeout runs from when a job becomes the oldest pending one. */
	if (!s->count++)
		s->head_since = ktime_get();
	s->submitted++;
	return 0;
}

/* Retires the jobs whose fences signalled (fences signal in order); returns how many. */
unsigned int vt_sched_poll(struct vt_sched *s)
{
	u32 fence = vgpu_fence_read(s->r);
	unsigned int n = 0;

	while (s->count && (s32)(fence - vt_sched_job(s, 0)->seq) >= 0) {
		s->head = (s->head + 1) % VT_SCHED_JOBS;
		s->count--;
		n++;
	}
	if (n) {
		s->completed += n;
		s->head_since = ktime_get();
	}
	return n;
}

/* The oldest pending job, or NULL. */
struct vt_job *vt_sched_head(struct vt_sched *s)
{
	return s->count ? vt_sched_job(s, 0) : NULL;
}

/* The oldest pending job if it has been that for longer than timeout_ns (the TDR), or NULL. */
struct vt_job *vt_sched_timed_out(struct vt_sched *s, ktime_t now, u64 timeout_ns)
{
	if (!s->count || ktime_to_ns(ktime_sub(now, s->head_since)) <= (s64)timeout_ns)
		return NULL;
	return vt_sched_job(s, 0);
}

/*
 * Drops the hung oldest job once its queue no longer runs: its fence is force-completed (the
 * CPU writes its sequence number, as amdgpu_fence_driver_force_completion does) so nothing
 * waits on it, and it is recorded as lost.
 */
void vt_sched_drop_head(struct vt_sched *s)
{
	struct vt_job *j = vt_sched_head(s);
	__le32 *fence = s->r->fence_cpu;

	if (!j)
		return;
	if ((s32)(le32_to_cpu(READ_ONCE(*fence)) - j->seq) < 0)
		WRITE_ONCE(*fence, cpu_to_le32(j->seq));
	if (s->nlost < VT_SCHED_LOST)
		s->lost[s->nlost] = j->seq;
	s->nlost++;
	s->head = (s->head + 1) % VT_SCHED_JOBS;
	s->count--;
}

/*
 * Emits every pending job again, oldest first, each with its own fence, on the ring its owner
 * restarted after a reset (rptr and wptr 0), then rings the doorbell once. Jobs whose fence
 * signalled before the reset are retired first, not run again. The job timeout starts again.
 */
int vt_sched_resubmit(struct vt_case *t, struct vt_sched *s)
{
	unsigned int i;
	int ret;

	vt_sched_poll(s);
	for (i = 0; i < s->count; i++) {
		ret = vt_sched_emit(t, s, vt_sched_job(s, i), true);
		if (ret)
			return ret;
		s->resubmitted++;
	}
	if (s->count)
		vgpu_ring_kick(s->r);
	s->head_since = ktime_get();
	return 0;
}

/* Waits until every pending job completed, at most timeout_ms without progress. */
int vt_sched_drain(struct vt_case *t, struct vt_sched *s)
{
	int ret;

	if (!s->count)
		return 0;
	ret = vgpu_fence_wait(t, s->r, vt_sched_job(s, s->count - 1)->seq);
	if (ret)
		return ret;
	vt_sched_poll(s);
	return 0;
}
