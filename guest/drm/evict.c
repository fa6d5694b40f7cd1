// SPDX-License-Identifier: GPL-2.0
/*
 * Eviction of a client as amdgpu does it (amdgpu_eviction_fence.c's suspend worker, then
 * amdgpu_userq_vm_validate_and_restore_queue), for the debugfs knob vgpu_evict:
 *
 *  1. suspend: wait for each queue's last SIGNAL fence (bounded by userq_timeout_ms), then
 *     REMOVE_QUEUE every queue of the file (MES saves each in its MQD);
 *     (a queue whose work is still pending then is removed all the same: MES saves where it
 *     is, and it continues after the restore);
 *  2. move every VRAM BO the file's VM maps to system memory and, once all are out, back into
 *     VRAM (the core's vgpu_bo_evict / vgpu_bo_restore: DMA_DATA on the kernel queue between the
 *     frame-buffer aperture and GART windows onto system pages, so CPU-invisible VRAM moves
 *     too; CPU mappings zapped and faulted in again; the VM's PTEs rewritten and invalidated
 *     each way);
 *  3. restore: each queue's VAs validated again (gone: INVALID_VA, not added), its wptr shadow
 *     address recomputed (the BO under it moved), ADD_QUEUE: it resumes at the rptr its MQD
 *     saved, and MES takes the work submitted meanwhile from the wptr shadow.
 */

#include <linux/debugfs.h>
#include <linux/dma-resv.h>
#include <linux/fs.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_file.h>
#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"
#include "gem.h"
#include "vm.h"

static unsigned long vgpu_evict_timeout(void)
{
	return msecs_to_jiffies(vgpu_userq_timeout_ms ?: 1);
}

/* ---- 1. suspend ---- */

/* What is left of a bound that started at start (at least a jiffy: a last look). */
static long vgpu_evict_left(unsigned long start)
{
	long left = (long)(start + vgpu_evict_timeout() - jiffies);

	return max(left, 1L);
}

/* amdgpu_userq_wait_for_signal: the queue's last SIGNAL fence, bounded with the others. */
static void vgpu_evict_wait_last(struct vgpu_userq *q, unsigned long start,
				 struct vgpu_evict_stats *st)
{
	struct dma_fence *f = vgpu_fence_last(&q->fd);

	if (!f)
		return;
	if (dma_fence_wait_timeout(f, false, vgpu_evict_left(start)) <= 0)
		st->fences_timed_out++;
	dma_fence_put(f);
}

/*
 * Whether the BO's fences have signalled, waiting a bounded time: a SIGNAL fence of a queue
 * removed with its work pending cannot signal before the restore, and the move waits for every
 * fence without a bound. Such a BO stays where it is this time.
 */
static bool vgpu_evict_bo_idle(struct vgpu_bo *bo, unsigned long start)
{
	return dma_resv_wait_timeout(bo->shmem.base.resv, DMA_RESV_USAGE_BOOKKEEP, false,
				     vgpu_evict_left(start)) > 0;
}

/* Adds back the queues an eviction removed. vm->lock and mgr->lock held. */
static void vgpu_evict_restore_queues(struct vgpu_file *vf, struct vgpu_evict_stats *st)
{
	struct vgpu_userq *q;
	int ret;

	list_for_each_entry(q, &vf->userq.queues, node) {
		if (!q->evicted)
			continue;
		q->evicted = false;
		ret = vgpu_userq_check_vas(vf, q) ?: vgpu_userq_wptr_mc(q);
		if (ret) {
			/* amdgpu_userq_restore_all: a queue whose buffers are gone stays off. */
			q->state = VGPU_USERQ_INVALID_VA;
			st->queues_invalid++;
			continue;
		}
		ret = vgpu_userq_map(q);
		if (ret) {
			drm_err(&vf->vdev->drm, "userq %u of pid %d: ADD_QUEUE after eviction failed: %d\n",
				q->id, vf->pid, ret);
			q->state = VGPU_USERQ_INVALID_VA;
			st->queues_invalid++;
			continue;
		}
		st->queues_added++;
		/* Time off MES is not time without progress: the hang clock starts again. */
		if (!vgpu_fence_drv_idle(&q->fd))
			vgpu_userq_hang_progress(q, true);
	}
}

/* REMOVE_QUEUE of every added queue after its last fence. mgr->lock held. */
static int vgpu_evict_suspend(struct vgpu_file *vf, struct vgpu_evict_stats *st)
{
	struct vgpu_userq *q;
	int ret;

	list_for_each_entry(q, &vf->userq.queues, node)
		if (q->added)
			vgpu_evict_wait_last(q, st->start, st);
	list_for_each_entry(q, &vf->userq.queues, node) {
		if (!q->added)
			continue;
		ret = vgpu_userq_unmap(q);
		if (ret)
			return ret;
		q->evicted = true;
		st->queues_removed++;
	}
	return 0;
}

/* ---- 2. moving VRAM BOs ---- */

/* The VRAM BOs the VM maps, each once, with a reference. */
static int vgpu_evict_collect(struct vgpu_vm *vm, struct vgpu_bo ***out, u32 *n)
{
	const struct vgpu_mapping *m;
	struct vgpu_bo **bos, *bo;
	u32 cnt = 0, i;

	*out = NULL;
	*n = 0;
	vgpu_vm_lock(vm);
	bos = kcalloc(vm->nmappings ?: 1, sizeof(*bos), GFP_KERNEL);
	if (!bos) {
		vgpu_vm_unlock(vm);
		return -ENOMEM;
	}
	list_for_each_entry(m, &vm->mappings, node) {
		if (!m->obj)
			continue;
		bo = to_vgpu_bo(m->obj);
		if (bo->kind != VGPU_BO_VRAM || READ_ONCE(bo->evicted))
			continue;
		for (i = 0; i < cnt && bos[i] != bo; i++)
			;
		if (i < cnt || cnt >= vm->nmappings)
			continue;
		drm_gem_object_get(m->obj);
		bos[cnt++] = bo;
	}
	vgpu_vm_unlock(vm);
	*out = bos;
	*n = cnt;
	return 0;
}

static int vgpu_evict_move(struct vgpu_file *vf, struct vgpu_evict_stats *st)
{
	struct vgpu_bo **bos;
	int ret, r;
	u32 n, i;

	ret = vgpu_evict_collect(vf->vm, &bos, &n);
	if (ret)
		return ret;
	/* All out, then all back, as a restore after a memory event would. */
	for (i = 0; i < n && !ret; i++) {
		if (!vgpu_evict_bo_idle(bos[i], st->start)) {
			st->bos_busy++;
			continue;
		}
		ret = vgpu_bo_evict(bos[i], vf->vm);
	}
	for (i = 0; i < n; i++) {
		if (!READ_ONCE(bos[i]->evicted))
			continue;	/* not moved (or the one that failed to) */
		r = vgpu_bo_restore(bos[i], vf->vm);
		ret = ret ?: r;
		if (!r) {
			st->bos_moved++;
			st->bytes_moved += bos[i]->shmem.base.size;
		}
	}
	for (i = 0; i < n; i++)
		drm_gem_object_put(&bos[i]->shmem.base);
	kfree(bos);
	return ret;
}

/* ---- one file, every file ---- */

int vgpu_evict_file(struct vgpu_file *vf, struct vgpu_evict_stats *st)
{
	struct vgpu_userq_mgr *mgr = &vf->userq;
	int ret;

	memset(st, 0, sizeof(*st));
	st->start = jiffies;	/* one bound for every wait of this eviction */
	mutex_lock(&mgr->evict_lock);
	mutex_lock(&mgr->lock);
	mgr->evicting = true;
	ret = vgpu_evict_suspend(vf, st);
	mutex_unlock(&mgr->lock);

	/* The VM calls take vm->lock: not under mgr->lock. A queue still on MES: no move. */
	if (!ret)
		ret = vgpu_evict_move(vf, st);

	vgpu_vm_lock(vf->vm);
	mutex_lock(&mgr->lock);
	vgpu_evict_restore_queues(vf, st);
	mgr->evicting = false;
	mgr->evictions++;
	mutex_unlock(&mgr->lock);
	vgpu_vm_unlock(vf->vm);
	mutex_unlock(&mgr->evict_lock);

	drm_info(&vf->vdev->drm,
		 "evicted pid %d: %u queues removed, %u BOs (%llu bytes) to system memory and back (%u busy, left), %u queues added, %u invalid, %u last fences timed out: %d\n",
		 vf->pid, st->queues_removed, st->bos_moved, st->bytes_moved, st->bos_busy,
		 st->queues_added, st->queues_invalid, st->fences_timed_out, ret);
	return ret;
}

/* Evicts every client of pid (0: every client); -ESRCH if there is none. */
int vgpu_evict_pid(struct vgpu_dev *vdev, pid_t pid)
{
	struct vgpu_evict_stats st;
	struct vgpu_file *vf;
	int ret = 0, r;
	u32 n = 0;

	/* clients_lock keeps each file from its release while it is evicted. */
	mutex_lock(&vdev->clients_lock);
	list_for_each_entry(vf, &vdev->clients, node) {
		if (pid && vf->pid != pid)
			continue;
		n++;
		r = vgpu_evict_file(vf, &st);
		ret = ret ?: r;
	}
	mutex_unlock(&vdev->clients_lock);
	return n ? ret : -ESRCH;
}

static ssize_t vgpu_evict_write(struct file *f, const char __user *buf, size_t len,
				loff_t *ppos)
{
	struct vgpu_dev *vdev = file_inode(f)->i_private;
	int pid, ret;

	ret = kstrtoint_from_user(buf, len, 0, &pid);
	if (ret)
		return ret;
	if (pid < 0)
		return -EINVAL;
	ret = vgpu_evict_pid(vdev, pid);
	return ret ?: len;
}

static const struct file_operations vgpu_evict_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = vgpu_evict_write,
	.llseek = no_llseek,
};

void vgpu_evict_debugfs_init(struct drm_minor *minor)
{
	debugfs_create_file("vgpu_evict", 0200, minor->debugfs_root, to_vgpu_dev(minor->dev),
			    &vgpu_evict_fops);
}
