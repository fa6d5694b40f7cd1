/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The driver's job scheduler, shaped after drm_sched and amdgpu's job timeout, for the hang
 * recovery cases. The hardware does not report a hang: every submitted job stays on its ring's
 * pending list until its fence signals, and a job that has been the oldest pending one for
 * longer than the job timeout is taken as hung. After the driver has reset the hardware (one
 * queue, an engine or the whole function) and restarted the ring, the hung job's fence is
 * force-completed and reported lost, and every other pending job is emitted again with its own
 * fence (amdgpu re-emits the unprocessed commands of the innocent jobs).
 */
#ifndef VT_SCHED_H
#define VT_SCHED_H

#include <linux/ktime.h>
#include <linux/types.h>

#include "cp.h"
#include "ktap.h"

#define VT_SCHED_JOBS		16	/* pending jobs per ring */
#define VT_JOB_MAX_DW		16	/* a job's packets, without its fence */
#define VT_SCHED_LOST		4	/* lost fences remembered per ring */

/* A job as the scheduler keeps it until its fence signals: enough to emit it again. */
struct vt_job {
	u32 dw[VT_JOB_MAX_DW];
	unsigned int ndw;
	u32 seq;		/* its fence's sequence number */
	bool irq;		/* its fence interrupts */
};

struct vt_sched {
	struct vgpu_ring *r;
	struct vt_job jobs[VT_SCHED_JOBS];	/* pending, oldest first, from head (circular) */
	unsigned int head, count;
	ktime_t head_since;	/* when the head job became the oldest pending one */
	u32 submitted;		/* jobs submitted */
	u32 completed;		/* jobs whose fence signalled */
	u32 resubmitted;	/* jobs emitted again after a reset */
	u32 lost[VT_SCHED_LOST];	/* fences of the jobs dropped as hung */
	unsigned int nlost;
};

void vt_sched_init(struct vt_sched *s, struct vgpu_ring *r);
int vt_sched_submit(struct vt_case *t, struct vt_sched *s, const u32 *dw, unsigned int ndw,
		    bool irq);
unsigned int vt_sched_poll(struct vt_sched *s);
struct vt_job *vt_sched_head(struct vt_sched *s);
struct vt_job *vt_sched_timed_out(struct vt_sched *s, ktime_t now, u64 timeout_ns);
void vt_sched_drop_head(struct vt_sched *s);
int vt_sched_resubmit(struct vt_case *t, struct vt_sched *s);
int vt_sched_drain(struct vt_case *t, struct vt_sched *s);

#endif /* VT_SCHED_H */
