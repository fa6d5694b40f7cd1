// SPDX-License-Identifier: GPL-2.0
/*
 * SUBMIT: a job on the driver's kernel queue through drm_sched (see kq.h), with an optional
 * syncobj to wait on first and one that gets the job's fence.
 */

#include <drm/drm_print.h>
#include <drm/drm_syncobj.h>

#include "vgpu_drm_dev.h"
#include "vm.h"

static int vgpu_submit_check(const struct drm_vgpu_submit *args)
{
	u64 end;

	if (args->flags)
		return -EINVAL;
	if (!args->ib_dwords)
		return args->ib_va ? -EINVAL : 0;
	if (args->ib_dwords > VGPU_KQ_IB_MAX_DW || (args->ib_va & 3))
		return -EINVAL;
	end = args->ib_va + 4ULL * args->ib_dwords;
	/* Inside the user range; whether it is mapped is the GPU's to find (a fault). */
	if (args->ib_va < VGPU_VA_START || end > VGPU_VA_END || end < args->ib_va)
		return -EINVAL;
	return 0;
}

int vgpu_submit_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct vgpu_dev *vdev = to_vgpu_dev(drm);
	struct vgpu_file *vf = to_vgpu_file(file);
	struct drm_vgpu_submit *args = data;
	struct drm_syncobj *out = NULL;
	struct dma_fence *in = NULL, *fence;
	struct vgpu_kq_job *job;
	int ret;

	ret = vgpu_submit_check(args);
	if (ret)
		return ret;
	if (!vf->kq.init)
		return -ENODEV;
	if (args->out_syncobj) {
		out = drm_syncobj_find(file, args->out_syncobj);
		if (!out)
			return -ENOENT;
	}
	if (args->in_syncobj) {
		ret = drm_syncobj_find_fence(file, args->in_syncobj, 0, 0, &in);
		if (ret)
			goto out_put;
	}
	job = vgpu_kq_job_alloc(vdev, 0);
	if (!job) {
		ret = -ENOMEM;
		goto out_fence;
	}
	job->ib_va = args->ib_va;
	job->ib_dwords = args->ib_dwords;
	if (args->ib_dwords)
		job->vm = vgpu_vm_get(vf->vm);
	ret = drm_sched_job_init(&job->base, &vf->kq.entity, vf);
	if (ret) {
		vgpu_kq_job_free(job);
		goto out_fence;
	}
	if (in) {
		/* The job owns the reference from here on. */
		ret = drm_sched_job_add_dependency(&job->base, in);
		in = NULL;
		if (ret) {
			drm_sched_job_cleanup(&job->base);
			vgpu_kq_job_free(job);
			goto out_put;
		}
	}
	mutex_lock(&vf->kq.lock);
	drm_sched_job_arm(&job->base);
	fence = dma_fence_get(&job->base.s_fence->finished);
	args->seqno = fence->seqno;
	drm_sched_entity_push_job(&job->base);
	mutex_unlock(&vf->kq.lock);
	if (out)
		drm_syncobj_replace_fence(out, fence);
	/* An IB may touch any BO of the VM; the job is queued whatever this says. */
	if (args->ib_dwords && vgpu_vm_add_fence(vf->vm, fence))
		drm_warn_once(drm, "SUBMIT: no room for a fence in a BO's reservation\n");
	dma_fence_put(fence);
	ret = 0;
out_fence:
	dma_fence_put(in);
out_put:
	if (out)
		drm_syncobj_put(out);
	return ret;
}
