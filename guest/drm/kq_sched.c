// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel queue's drm_gpu_scheduler: run_job, the job timeout (hang recovery), entities,
 * and the driver's own jobs (see kq.h).
 */

#include <linux/bitfield.h>
#include <linux/dma-fence.h>
#include <linux/slab.h>

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"
#include "pm4.h"
#include "vm.h"

#define VGPU_KQ_FILL_CHUNK	SZ_32M	/* DMA_DATA's BYTE_COUNT holds less than 64 MiB */
#define VGPU_KQ_KJOB_PKTS	12	/* DMA_DATA packets per kernel job */

static struct vgpu_kq_job *to_kq_job(struct drm_sched_job *j)
{
	return container_of(j, struct vgpu_kq_job, base);
}

static struct dma_fence *vgpu_kq_run_job(struct drm_sched_job *sched_job)
{
	struct vgpu_kq_job *job = to_kq_job(sched_job);
	struct dma_fence *finished = &sched_job->s_fence->finished;
	struct dma_fence *hw;

	/*
	 * Emitted before a reset: a job whose fence the ring wrote before it stopped has run, and
	 * is not run twice; the others' fences ended with -ECANCELED (vgpu_kq_hw_reset).
	 */
	if (job->hw) {
		if (dma_fence_is_signaled(job->hw) && !job->hw->error)
			return dma_fence_get(job->hw);
		dma_fence_put(job->hw);
		job->hw = NULL;
	}
	/* The job that hung is not run again: it ends with -ETIME. */
	if (job->guilty)
		return ERR_PTR(-ETIME);
	/* Cancelled (its entity was killed): its fence completes with that error. */
	if (finished->error)
		return ERR_PTR(finished->error);
	hw = vgpu_kq_emit(job->vdev, job);
	if (!IS_ERR(hw))
		job->hw = dma_fence_get(hw);
	return hw;
}

/*
 * The job timed out, or the queue halted (drm_sched_fault): amdgpu_job_timedout's recovery on
 * one ring. Stop the scheduler, reset the HQD, mark the job guilty, let the scheduler emit every
 * pending job again (the guilty one ends with -ETIME, see run_job), start it again.
 */
static enum drm_gpu_sched_stat vgpu_kq_timedout_job(struct drm_sched_job *sched_job)
{
	struct vgpu_kq_job *job = to_kq_job(sched_job);
	struct vgpu_dev *vdev = job->vdev;
	struct drm_gpu_scheduler *sched = &vdev->kq.sched;

	u32 st = vgpu_hqd_rd(vdev, vdev->kq.slot, VGPU_REG_HQD_STATUS);

	vdev->kq.timeouts++;
	if (FIELD_GET(VGPU_REG_HQD_STATUS__STATE_MASK, st) == VGPU_HQD_STATE_HALTED)
		drm_err_ratelimited(&vdev->drm, "kernel queue: job %llu halted the queue (CP error %u): resetting it\n",
				    sched_job->s_fence->finished.seqno,
				    (u32)FIELD_GET(VGPU_REG_HQD_STATUS__ERROR_MASK, st));
	else
		drm_err_ratelimited(&vdev->drm, "kernel queue: job %llu timed out (HQD_STATUS %#x): resetting the queue\n",
				    sched_job->s_fence->finished.seqno, st);
	drm_sched_stop(sched, sched_job);
	job->guilty = true;
	if (vgpu_kq_hw_reset(vdev))
		drm_err(&vdev->drm, "kernel queue: reset failed, the queue is down\n");
	drm_sched_resubmit_jobs(sched);
	drm_sched_start(sched, true);
	return DRM_GPU_SCHED_STAT_NOMINAL;
}

static void vgpu_kq_free_job(struct drm_sched_job *sched_job)
{
	struct vgpu_kq_job *job = to_kq_job(sched_job);

	drm_sched_job_cleanup(sched_job);
	vgpu_kq_job_free(job);
}

const struct drm_sched_backend_ops vgpu_kq_sched_ops = {
	.run_job = vgpu_kq_run_job,
	.timedout_job = vgpu_kq_timedout_job,
	.free_job = vgpu_kq_free_job,
};

int vgpu_kq_sched_init(struct vgpu_dev *vdev)
{
	struct vgpu_kq *kq = &vdev->kq;
	struct drm_gpu_scheduler *list[] = { &kq->sched };
	const struct drm_sched_init_args args = {
		.ops = &vgpu_kq_sched_ops,
		.credit_limit = VGPU_KQ_CREDITS,
		.hang_limit = 0,
		.timeout = msecs_to_jiffies(vgpu_kq_timeout_ms),
		.name = "vgpu_kq",
		.dev = vdev->drm.dev,
	};
	int ret;

	ret = drm_sched_init(&kq->sched, &args);
	if (ret)
		return ret;
	kq->sched_on = true;
	ret = drm_sched_entity_init(&kq->kentity, DRM_SCHED_PRIORITY_KERNEL, list, 1, NULL);
	if (ret) {
		drm_sched_fini(&kq->sched);
		kq->sched_on = false;
	}
	return ret;
}

void vgpu_kq_sched_fini(struct vgpu_dev *vdev)
{
	struct vgpu_kq *kq = &vdev->kq;

	if (!kq->sched_on)
		return;
	drm_sched_entity_destroy(&kq->kentity);
	drm_sched_fini(&kq->sched);
	kq->sched_on = false;
}

int vgpu_kq_entity_init(struct vgpu_dev *vdev, struct vgpu_kq_entity *e)
{
	struct drm_gpu_scheduler *list[] = { &vdev->kq.sched };
	int ret;

	if (!vdev->kq.sched_on)
		return -ENODEV;
	mutex_init(&e->lock);
	ret = drm_sched_entity_init(&e->entity, DRM_SCHED_PRIORITY_NORMAL, list, 1, NULL);
	e->init = !ret;
	return ret;
}

/* File close: waits a bounded time for the file's jobs, kills the rest (-ESRCH). */
void vgpu_kq_entity_fini(struct vgpu_kq_entity *e)
{
	if (!e->init)
		return;
	drm_sched_entity_destroy(&e->entity);
	e->init = false;
}

struct vgpu_kq_job *vgpu_kq_job_alloc(struct vgpu_dev *vdev, unsigned int npkts)
{
	struct vgpu_kq_job *job = kzalloc(struct_size(job, pkts, npkts), GFP_KERNEL);

	if (job)
		job->vdev = vdev;
	return job;
}

void vgpu_kq_job_free(struct vgpu_kq_job *job)
{
	dma_fence_put(job->hw);
	vgpu_vm_put(job->vm);
	kfree(job);
}

/* Pushes a driver job (packets only) on the kernel entity; returns its finished fence. */
struct dma_fence *vgpu_kq_kernel_job(struct vgpu_dev *vdev, struct vgpu_kq_job *job)
{
	struct vgpu_kq *kq = &vdev->kq;
	struct dma_fence *fence;
	int ret;

	if (!kq->sched_on) {
		vgpu_kq_job_free(job);
		return ERR_PTR(-ENODEV);
	}
	ret = drm_sched_job_init(&job->base, &kq->kentity, NULL);
	if (ret) {
		vgpu_kq_job_free(job);
		return ERR_PTR(ret);
	}
	mutex_lock(&kq->kentity_lock);
	drm_sched_job_arm(&job->base);
	fence = dma_fence_get(&job->base.s_fence->finished);
	drm_sched_entity_push_job(&job->base);
	mutex_unlock(&kq->kentity_lock);
	return fence;
}

/* Waits for a driver job's fence and gives its result. */
static int vgpu_kq_wait(struct dma_fence *fence)
{
	long ret;

	if (IS_ERR(fence))
		return PTR_ERR(fence);
	ret = dma_fence_wait(fence, false);
	if (!ret)
		ret = fence->error;
	dma_fence_put(fence);
	return ret;
}

/* DMA_DATA bypassing the L2 on both sides, from src (or of the value src, fill) to dst. */
static unsigned int vgpu_kq_dma(u32 *p, bool fill, u64 src, u64 dst, u32 bytes)
{
	u32 sel = fill ? VGPU_PM4_DMA_DATA_SEL_DATA : VGPU_PM4_DMA_DATA_SEL_ADDR;

	return pm4_dma_data(p, vt_dma_ctl(sel, VGPU_PM4_CACHE_POLICY_BYPASS,
					  VGPU_PM4_DMA_DATA_SEL_ADDR, VGPU_PM4_CACHE_POLICY_BYPASS),
			    src, dst, bytes);
}

/*
 * Runs DMA_DATA over [dst, dst + bytes) as driver jobs of at most VGPU_KQ_KJOB_PKTS packets
 * and waits for the last (jobs of one entity complete in order).
 */
static int vgpu_kq_dma_range(struct vgpu_dev *vdev, bool fill, u64 src, u64 dst, u64 bytes)
{
	struct dma_fence *last = NULL;
	struct vgpu_kq_job *job;
	int ret = 0;

	while (bytes && !ret) {
		unsigned int k;

		job = vgpu_kq_job_alloc(vdev, VGPU_KQ_KJOB_PKTS * 7);
		if (!job) {
			ret = -ENOMEM;
			break;
		}
		for (k = 0; k < VGPU_KQ_KJOB_PKTS && bytes; k++) {
			u32 n = min_t(u64, bytes, VGPU_KQ_FILL_CHUNK);

			job->npkts += vgpu_kq_dma(job->pkts + job->npkts, fill, src, dst, n);
			if (!fill)
				src += n;
			dst += n;
			bytes -= n;
		}
		if (last)
			dma_fence_put(last);
		last = vgpu_kq_kernel_job(vdev, job);
		if (IS_ERR(last)) {
			ret = PTR_ERR(last);
			last = NULL;
		}
	}
	if (last) {
		int r = vgpu_kq_wait(last);

		ret = ret ?: r;
	}
	return ret;
}

/* Zeroes VRAM blocks through the frame-buffer aperture. */
int vgpu_kq_clear_vram(struct vgpu_dev *vdev, struct list_head *blocks)
{
	struct drm_buddy_block *b;
	int ret;

	list_for_each_entry(b, blocks, link) {
		ret = vgpu_kq_dma_range(vdev, true, 0, vdev->fb_base + drm_buddy_block_offset(b),
					drm_buddy_block_size(&vdev->vram.mm, b));
		if (ret)
			return ret;
	}
	return 0;
}

/* Copies bytes between VMID-0 GPU addresses (FB aperture or GART), and waits. */
int vgpu_kq_copy(struct vgpu_dev *vdev, u64 src, u64 dst, u64 bytes)
{
	return vgpu_kq_dma_range(vdev, false, src, dst, bytes);
}
