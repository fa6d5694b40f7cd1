// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel queue's fence fallback (amdgpu_fence_fallback): while fences are pending, a timer
 * looks at the fence memory every kq_fallback_ms. A fence the memory had already reached at the
 * previous look and that is still pending has waited a whole period for its EOP interrupt: the
 * interrupt was lost (an IV the IH dropped, an MSI that never came). The timer signals it — the
 * ring did write it, so the job is done, not hung — counts it (debugfs vgpu_mes: "kernel queue
 * fallback") and logs it. A fence is signalled at most two periods after its write, well
 * before the scheduler's job timeout (kq_timeout_ms), which is left for jobs that never finish.
 */

#include <linux/jiffies.h>
#include <linux/moduleparam.h>

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"

static unsigned int vgpu_kq_fallback_ms = 250;
module_param_named(kq_fallback_ms, vgpu_kq_fallback_ms, uint, 0444);
MODULE_PARM_DESC(kq_fallback_ms,
		 "kernel-queue fence fallback: how often the fence memory is read while fences are pending (ms; amdgpu 500)");

static unsigned long vgpu_kq_fallback_period(void)
{
	return msecs_to_jiffies(clamp(vgpu_kq_fallback_ms, 10U, 10000U));
}

static void vgpu_kq_fallback_fire(struct timer_list *t)
{
	struct vgpu_kq *kq = from_timer(kq, t, fallback);
	struct vgpu_dev *vdev = container_of(kq, struct vgpu_dev, kq);
	unsigned long flags;
	unsigned int n;
	bool pending;
	u64 mem;

	spin_lock_irqsave(&kq->fence_lock, flags);
	mem = vgpu_kq_fence_mem(kq);
	/* Only what was written a period ago: a fence just written may have its IV on the way. */
	n = vgpu_kq_signal(kq, min(kq->fallback_seen, mem), 0);
	kq->fallback_seen = mem;
	kq->lost_irqs += n;
	pending = !list_empty(&kq->pending);
	spin_unlock_irqrestore(&kq->fence_lock, flags);
	if (n)
		dev_warn_ratelimited(vdev->drm.dev, "kernel queue: %u fence(s) up to %llu written without an EOP interrupt: signalled from memory (%u lost so far)\n",
				     n, mem, kq->lost_irqs);
	if (pending)
		mod_timer(&kq->fallback, jiffies + vgpu_kq_fallback_period());
}

void vgpu_kq_fallback_init(struct vgpu_kq *kq)
{
	timer_setup(&kq->fallback, vgpu_kq_fallback_fire, 0);
}

/* A fence was added to the pending list: look at it in a period, unless a look is due. */
void vgpu_kq_fallback_arm(struct vgpu_kq *kq)
{
	if (!timer_pending(&kq->fallback))
		mod_timer(&kq->fallback, jiffies + vgpu_kq_fallback_period());
}

/* Nothing is pending any more (the caller signalled every fence). */
void vgpu_kq_fallback_fini(struct vgpu_kq *kq)
{
	del_timer_sync(&kq->fallback);
}
