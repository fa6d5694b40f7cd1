/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The recovery paths a driver takes when the hardware misbehaves, and the cases that run them
 * against a device with fault-injection rules (vgpu serve/run --inject, docs/inject.md).
 *
 * fence_irq.c: an interrupt-driven fence wait with amdgpu's fallback: a fence is signalled by
 * its end-of-pipe interrupt; when none comes within the timeout the driver reads the fence
 * memory itself (amdgpu_fence_fallback -> amdgpu_fence_process) and, if the work is done,
 * signals it and counts the interrupt as lost.
 *
 * mes_recover.c: what amdgpu does when MES stops answering ("MES failed to respond"): the
 * scheduler is reset (its ring halted with MES_RING_ACTIVE = 0, brought up again from a clean
 * ring, SET_HW_RESOURCES and the log buffer given again), after which frames work again.
 *
 * t_inject_*.c: the cases. Each needs the device to run with its rule; `vgpu run` boots each
 * rule set in a boot of its own and sets inject_rules=1. Without it the cases are skipped
 * ("needs injection"); with it and without the rule they fail (the fault did not happen).
 */
#ifndef VT_INJECT_H
#define VT_INJECT_H

#include "cp.h"
#include "mes.h"

/* Module parameter (t_inject.c): the device runs with the inject_* cases' rules. */
extern bool inject_rules;

/* Skips a case (returns VT_SKIP) unless inject_rules says the device has rule. */
bool vt_inject_skip(struct vt_case *t, const char *rule, enum vt_res *res);

/* How an interrupt-driven fence wait ended. */
struct vgpu_fence_irq {
	bool by_irq;		/* an EOP IV for the fence (or a later one) came in time */
	bool by_poll;		/* the fallback read of the fence memory found it signalled */
	u32 lost;		/* interrupts the driver counted as lost (by_poll) */
	u64 waited_ms;
};

int vgpu_fence_wait_irq(struct vt_case *t, struct vgpu_ring *r, u32 seq, unsigned int ms,
			struct vgpu_fence_irq *out);

int vgpu_mes_recover(struct vt_case *t, struct vgpu_mes *m);

#endif /* VT_INJECT_H */
