// SPDX-License-Identifier: GPL-2.0
/*
 * Interrupt-driven fence waits with the fallback every real driver has (see inject.h): the
 * interrupt is the fast path, the fence memory the truth.
 */

#include <linux/jiffies.h>
#include <linux/ktime.h>
#include <linux/wait.h>

#include "inject.h"

/* The slot's last EOP IV names seq or a later fence (ctxids are the fence seqs). */
static bool vgpu_eop_reached(struct vgpu_ring *r, u32 base, u32 seq)
{
	struct vgpu_ih_slot *s = &r->cp->ih.slot[r->slot];

	return READ_ONCE(s->eop) != base && (s32)(READ_ONCE(s->eop_ctxid) - seq) >= 0;
}

/*
 * Waits for fence seq of r, whose RELEASE_MEM interrupts, by its EOP interrupt for ms; then,
 * as amdgpu's fallback timer does, reads the fence memory. Call it with the fence committed
 * but not kicked: it kicks, so every IV of the fence comes after it looked. 0: the fence
 * signalled (out says how); -ETIMEDOUT: neither the interrupt nor the memory shows it (a hung
 * job: the job timeout's business).
 */
int vgpu_fence_wait_irq(struct vt_case *t, struct vgpu_ring *r, u32 seq, unsigned int ms,
			struct vgpu_fence_irq *out)
{
	struct vgpu_ih_slot *s = &r->cp->ih.slot[r->slot];
	struct vgpu *vg = r->cp->vg;
	ktime_t start = ktime_get();
	u32 base = READ_ONCE(s->eop), v;
	char st[VT_STATE_LEN];

	memset(out, 0, sizeof(*out));
	if (r->kicked != r->wptr)
		vgpu_ring_kick(r);
	if (wait_event_timeout(vg->wq, vgpu_eop_reached(r, base, seq), msecs_to_jiffies(ms))) {
		out->by_irq = true;
		out->waited_ms = ktime_ms_delta(ktime_get(), start);
		return 0;
	}
	out->waited_ms = ktime_ms_delta(ktime_get(), start);
	/* The fallback: the fence memory (INT_SEL 2 wrote it before the interrupt). */
	v = vgpu_fence_read(r);
	if ((s32)(v - seq) >= 0) {
		out->by_poll = true;
		out->lost = 1;
		dev_warn(&vg->pdev->dev,
			 "slot %u: fence %u signalled without its interrupt (found by polling after %llu ms)\n",
			 r->slot, seq, out->waited_ms);
		return 0;
	}
	vgpu_ring_describe(r, st, sizeof(st));
	return vt_reason(t, -ETIMEDOUT,
			 "fence %u: no EOP IV in %u ms and the fence reads %u (%s)", seq, ms, v, st);
}
