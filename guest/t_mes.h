/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The MES cases' kit (t_mes_kit.c): a running scheduler, the processes and queues a case made,
 * and the buffers it mapped, all torn down together (the scheduler is halted first, so nothing
 * runs on memory that is freed); streams of ordered jobs; failure dumps.
 */
#ifndef VT_T_MES_H
#define VT_T_MES_H

#include "mes.h"

#define VT_KIT_PROCS		24
#define VT_KIT_QUEUES		72
#define VT_KIT_BOS		32
#define VT_KIT_TAIL		24	/* event-log records a failure dump prints */

struct vt_mes_kit {
	struct vt_case *t;
	struct vgpu_cp *cp;
	struct vgpu_mes *m;
	unsigned int nproc, nq, nbo;
	struct vgpu_mes_proc *proc[VT_KIT_PROCS];
	struct vgpu_mes_queue *q[VT_KIT_QUEUES];
	struct vgpu_bo *bo[VT_KIT_BOS];
	bool dumped;
	u32 snap_errors, snap_ivs, snap_events;	/* vt_kit_snap */
};

struct vt_mes_kit *vt_kit_start(struct vt_case *t, const struct vgpu_mes_hw *hw);
void vt_kit_end(struct vt_mes_kit *k);
struct vgpu_mes_proc *vt_kit_proc(struct vt_mes_kit *k, u16 pasid);
struct vgpu_mes_queue *vt_kit_queue(struct vt_mes_kit *k, struct vgpu_mes_proc *p,
				    const struct vgpu_mes_queue_opts *o, bool add);
struct vgpu_bo *vt_kit_bo(struct vt_mes_kit *k, size_t size);
void vt_kit_dump(struct vt_mes_kit *k);
bool vt_kit_check(struct vt_mes_kit *k, bool ok, const char *name, const char *why);
void vt_kit_snap(struct vt_mes_kit *k);
bool vt_kit_expect_err(struct vt_mes_kit *k, const char *name, int ret, u32 op, u32 want);
int vt_kit_stream(struct vt_mes_kit *k, struct vgpu_mes_queue *q, u32 pending);
int vt_kit_drain(struct vt_mes_kit *k, struct vgpu_mes_queue *q);
bool vt_kit_ordered(struct vgpu_mes_queue *q, u32 jobs, char *why, size_t len);
bool vt_kit_wait_mapped(struct vt_mes_kit *k, u32 want, unsigned int ms);
int vt_kit_endless(struct vt_mes_kit *k, struct vgpu_mes_queue *q, u32 *seq);

/* The endless kernel (t_hang.c's job B): USER_DATA_0 = ENDLESS, DISPATCH_DIRECT 1x1x1. */
static inline unsigned int vt_endless(u32 *p)
{
	u32 kernel = VGPU_KERNEL_ENDLESS;
	unsigned int n = pm4_set_sh(p, VGPU_SH_COMPUTE_USER_DATA_0, &kernel, 1);

	return n + pm4_dispatch_direct(p + n, 1, 1, 1);
}

/* WAIT_REG_MEM on a dword of the process until it reads ref (a gate the CPU opens). */
static inline unsigned int vt_gate(u32 *p, u64 va, u32 ref)
{
	return pm4_wait_mem_eq(p, va, ref, 0xffffffff, VGPU_PM4_CACHE_POLICY_BYPASS);
}

/* Jain's fairness index of n counts, in thousandths: (sum x)^2 / (n * sum x^2). */
static inline u32 vt_jain_milli(const u32 *x, unsigned int n)
{
	u64 s = 0, ss = 0;
	unsigned int i;

	for (i = 0; i < n; i++) {
		s += x[i];
		ss += (u64)x[i] * x[i];
	}
	return ss ? div64_u64(s * s * 1000, (u64)n * ss) : 0;
}

#endif /* VT_T_MES_H */
