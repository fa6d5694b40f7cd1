// SPDX-License-Identifier: GPL-2.0
/*
 * USERQ_SIGNAL and USERQ_WAIT (amdgpu_userq_signal_ioctl, amdgpu_userq_wait_ioctl).
 *
 * SIGNAL: a fence with seqno = the queue's wptr now, which signals once the queue's fence slot
 * reaches it; it replaces the fence of each listed syncobj and joins the listed BOs'
 * reservations (read or write usage).
 *
 * WAIT: the fences of the listed syncobjs (plain and timeline points, containers unwrapped) and
 * of the BOs' reservations (read BOs: the writers; write BOs: everyone). A user-queue fence not
 * yet signalled becomes an {va, value} entry, the waiting queue's WAIT_REG_MEM64 target: the
 * fence slot's VA in the caller's VM (another file's fence page is mapped there read-only). Any
 * other fence is waited for here. num_fences 0 asks for the count only.
 */

#include <linux/dma-fence-unwrap.h>
#include <linux/dma-resv.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_gem.h>
#include <drm/drm_syncobj.h>

#include "vgpu_drm_dev.h"
#include "vm.h"

#define VGPU_USERQ_MAX_HANDLES	1024	/* per array of one call */
#define VGPU_USERQ_MAX_FENCES	4096	/* collected by one WAIT */
#define VGPU_USERQ_KFENCE_MS	10000	/* the longest WAIT waits for one kernel fence */

static int vgpu_copy_handles(u64 uptr, u32 n, u32 **out)
{
	u32 *h;

	*out = NULL;
	if (!n)
		return 0;
	if (n > VGPU_USERQ_MAX_HANDLES)
		return -EINVAL;
	h = memdup_user(u64_to_user_ptr(uptr), sizeof(u32) * n);
	if (IS_ERR(h))
		return PTR_ERR(h);
	*out = h;
	return 0;
}

static int vgpu_lookup_bos(struct drm_file *file, u64 uptr, u32 n, struct drm_gem_object ***objs)
{
	*objs = NULL;
	if (!n)
		return 0;
	if (n > VGPU_USERQ_MAX_HANDLES)
		return -EINVAL;
	return drm_gem_objects_lookup(file, u64_to_user_ptr(uptr), n, objs);
}

static void vgpu_put_bos(struct drm_gem_object **objs, u32 n)
{
	u32 i;

	if (!objs)
		return;
	for (i = 0; i < n; i++)
		drm_gem_object_put(objs[i]);
	kvfree(objs);
}

static int vgpu_resv_add(struct drm_gem_object **objs, u32 n, struct dma_fence *f,
			 enum dma_resv_usage usage)
{
	struct ww_acquire_ctx ctx;
	int ret;
	u32 i;

	if (!n)
		return 0;
	ret = drm_gem_lock_reservations(objs, n, &ctx);
	if (ret)
		return ret;
	for (i = 0; i < n && !ret; i++) {
		ret = dma_resv_reserve_fences(objs[i]->resv, 1);
		if (!ret)
			dma_resv_add_fence(objs[i]->resv, f, usage);
	}
	drm_gem_unlock_reservations(objs, n, &ctx);
	return ret;
}

int vgpu_userq_signal_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct drm_vgpu_userq_signal *args = data;
	struct vgpu_file *vf = to_vgpu_file(file);
	struct vgpu_userq_mgr *mgr = &vf->userq;
	struct drm_gem_object **rd = NULL, **wr = NULL;
	struct drm_syncobj **syncobjs = NULL;
	struct dma_fence *fence = NULL;
	u32 *handles = NULL, i, nsync;
	struct vgpu_userq *q;
	u64 wptr;
	int ret;

	if (args->pad || args->num_syncobj_handles > VGPU_USERQ_MAX_HANDLES)
		return -EINVAL;
	nsync = args->num_syncobj_handles;
	ret = vgpu_copy_handles(args->syncobj_handles, nsync, &handles);
	if (ret)
		return ret;
	if (nsync) {
		syncobjs = kcalloc(nsync, sizeof(*syncobjs), GFP_KERNEL);
		if (!syncobjs) {
			ret = -ENOMEM;
			goto out;
		}
	}
	for (i = 0; i < nsync; i++) {
		syncobjs[i] = drm_syncobj_find(file, handles[i]);
		if (!syncobjs[i]) {
			ret = -ENOENT;
			goto out;
		}
	}
	ret = vgpu_lookup_bos(file, args->bo_read_handles, args->num_bo_read_handles, &rd);
	if (ret)
		goto out;
	ret = vgpu_lookup_bos(file, args->bo_write_handles, args->num_bo_write_handles, &wr);
	if (ret)
		goto out;

	mutex_lock(&mgr->evict_lock);
	vgpu_vm_lock(vf->vm);
	mutex_lock(&mgr->lock);
	q = xa_load(&mgr->ids, args->queue_id);
	if (!q || list_empty(&q->node))
		ret = -ENOENT;
	else
		ret = vgpu_userq_read_u64(vf, q->va[VGPU_USERQ_VA_WPTR].va, &wptr);
	if (!ret) {
		fence = vgpu_fence_create(&q->fd, wptr);
		if (IS_ERR(fence)) {
			ret = PTR_ERR(fence);
			fence = NULL;
		} else if (!dma_fence_is_signaled(fence)) {
			vgpu_userq_hang_arm(q);
		}
	}
	mutex_unlock(&mgr->lock);
	vgpu_vm_unlock(vf->vm);
	mutex_unlock(&mgr->evict_lock);
	if (ret)
		goto out;

	for (i = 0; i < nsync; i++)
		drm_syncobj_replace_fence(syncobjs[i], fence);
	ret = vgpu_resv_add(rd, args->num_bo_read_handles, fence, DMA_RESV_USAGE_READ);
	if (!ret)
		ret = vgpu_resv_add(wr, args->num_bo_write_handles, fence, DMA_RESV_USAGE_WRITE);
out:
	dma_fence_put(fence);
	vgpu_put_bos(wr, args->num_bo_write_handles);
	vgpu_put_bos(rd, args->num_bo_read_handles);
	for (i = 0; syncobjs && i < nsync; i++)
		if (syncobjs[i])
			drm_syncobj_put(syncobjs[i]);
	kfree(syncobjs);
	kfree(handles);
	return ret;
}

/* ---- WAIT ---- */

struct vgpu_fence_set {
	struct dma_fence **f;
	u32 n, cap;
};

/* Adds a reference to f (a leaf: containers are unwrapped by the caller), unless signalled. */
static int vgpu_set_add(struct vgpu_fence_set *s, struct dma_fence *f)
{
	struct dma_fence **nf;

	if (dma_fence_is_signaled(f))
		return 0;
	if (s->n == s->cap) {
		if (s->cap >= VGPU_USERQ_MAX_FENCES)
			return -EINVAL;
		s->cap = s->cap ? 2 * s->cap : 16;
		nf = krealloc_array(s->f, s->cap, sizeof(*nf), GFP_KERNEL);
		if (!nf)
			return -ENOMEM;
		s->f = nf;
	}
	s->f[s->n++] = dma_fence_get(f);
	return 0;
}

static int vgpu_set_add_unwrap(struct vgpu_fence_set *s, struct dma_fence *head)
{
	struct dma_fence_unwrap it;
	struct dma_fence *f;
	int ret = 0;

	dma_fence_unwrap_for_each(f, &it, head) {
		ret = vgpu_set_add(s, f);
		if (ret)
			break;
	}
	return ret;
}

static void vgpu_set_free(struct vgpu_fence_set *s)
{
	u32 i;

	for (i = 0; i < s->n; i++)
		dma_fence_put(s->f[i]);
	kfree(s->f);
}

static int vgpu_set_syncobj(struct vgpu_fence_set *s, struct drm_file *file, u32 handle,
			    u64 point)
{
	struct dma_fence *f;
	int ret;

	ret = drm_syncobj_find_fence(file, handle, point, 0, &f);
	if (ret)
		return ret;
	ret = vgpu_set_add_unwrap(s, f);
	dma_fence_put(f);
	return ret;
}

static int vgpu_set_resv(struct vgpu_fence_set *s, struct drm_gem_object **objs, u32 n,
			 enum dma_resv_usage usage)
{
	struct dma_resv_iter it;
	struct dma_fence *f;
	int ret = 0;
	u32 i;

	for (i = 0; i < n && !ret; i++) {
		ret = dma_resv_lock_interruptible(objs[i]->resv, NULL);
		if (ret)
			break;
		dma_resv_for_each_fence(&it, objs[i]->resv, usage, f) {
			ret = vgpu_set_add_unwrap(s, f);
			if (ret)
				break;
		}
		dma_resv_unlock(objs[i]->resv);
	}
	return ret;
}

/* A user-queue fence of this device, or NULL for a fence to wait for here. */
static struct vgpu_userq_fence *vgpu_userq_fence_of(struct vgpu_file *vf, struct dma_fence *f)
{
	struct vgpu_userq_fence *uf = to_vgpu_userq_fence(f);

	return uf && uf->page->vdev == vf->vdev ? uf : NULL;
}

static int vgpu_collect(struct vgpu_fence_set *s, struct drm_file *file,
			struct drm_vgpu_userq_wait *args)
{
	struct drm_gem_object **rd = NULL, **wr = NULL;
	u32 *h = NULL, *th = NULL, i;
	u64 *points = NULL;
	int ret;

	ret = vgpu_copy_handles(args->syncobj_handles, args->num_syncobj_handles, &h);
	for (i = 0; !ret && i < args->num_syncobj_handles; i++)
		ret = vgpu_set_syncobj(s, file, h[i], 0);
	if (!ret)
		ret = vgpu_copy_handles(args->syncobj_timeline_handles,
					args->num_syncobj_timeline_handles, &th);
	if (!ret && args->num_syncobj_timeline_handles) {
		points = memdup_user(u64_to_user_ptr(args->syncobj_timeline_points),
				     sizeof(u64) * args->num_syncobj_timeline_handles);
		if (IS_ERR(points)) {
			ret = PTR_ERR(points);
			points = NULL;
		}
	}
	for (i = 0; !ret && i < args->num_syncobj_timeline_handles; i++)
		ret = vgpu_set_syncobj(s, file, th[i], points[i]);
	if (!ret)
		ret = vgpu_lookup_bos(file, args->bo_read_handles, args->num_bo_read_handles, &rd);
	if (!ret)
		ret = vgpu_lookup_bos(file, args->bo_write_handles, args->num_bo_write_handles, &wr);
	/* A reader waits for the writers, a writer for everyone. */
	if (!ret)
		ret = vgpu_set_resv(s, rd, args->num_bo_read_handles, DMA_RESV_USAGE_WRITE);
	if (!ret)
		ret = vgpu_set_resv(s, wr, args->num_bo_write_handles, DMA_RESV_USAGE_READ);
	vgpu_put_bos(wr, args->num_bo_write_handles);
	vgpu_put_bos(rd, args->num_bo_read_handles);
	kfree(points);
	kfree(th);
	kfree(h);
	return ret;
}

/*
 * Folds the user-queue fences to one per slot (the latest seqno) at the front of the set and
 * returns how many; the other fences follow.
 */
static u32 vgpu_set_fold_userq(struct vgpu_file *vf, struct vgpu_fence_set *s)
{
	struct vgpu_userq_fence *a, *b;
	u32 i, j, nu = 0;

	for (i = 0; i < s->n; i++) {
		a = vgpu_userq_fence_of(vf, s->f[i]);
		if (!a)
			continue;
		for (j = 0; j < nu; j++) {
			b = vgpu_userq_fence_of(vf, s->f[j]);
			if (b->page == a->page && b->slot == a->slot)
				break;
		}
		if (j < nu) {
			if (s->f[i]->seqno > s->f[j]->seqno)
				swap(s->f[i], s->f[j]);
			dma_fence_put(s->f[i]);
			s->f[i] = s->f[--s->n];
			i--;
			continue;
		}
		swap(s->f[i], s->f[nu]);
		nu++;
	}
	return nu;
}

/* The VA of a fence page in the caller's VM: its own at index 0, another's mapped now. */
static int vgpu_fence_page_va(struct vgpu_file *vf, struct vgpu_fence_page *p, u64 *va)
{
	struct vgpu_userq_mgr *mgr = &vf->userq;
	int ret;

	mutex_lock(&mgr->maps_lock);
	if (!mgr->maps.n)
		ret = -ENOENT;	/* no queue was ever created: nothing could wait */
	else
		ret = vgpu_fence_maps_add(&mgr->maps, vf->vm, p, va);
	mutex_unlock(&mgr->maps_lock);
	return ret;
}

int vgpu_userq_wait_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct drm_vgpu_userq_wait *args = data;
	struct vgpu_file *vf = to_vgpu_file(file);
	struct vgpu_userq_mgr *mgr = &vf->userq;
	struct drm_vgpu_userq_fence_info *info = NULL;
	struct vgpu_fence_set s = {};
	struct vgpu_userq_fence *uf;
	struct vgpu_userq *q;
	long left;
	u32 nu, i;
	u64 va;
	int ret;

	if (args->pad || args->num_syncobj_handles > VGPU_USERQ_MAX_HANDLES ||
	    args->num_bo_read_handles > VGPU_USERQ_MAX_HANDLES ||
	    args->num_bo_write_handles > VGPU_USERQ_MAX_HANDLES)
		return -EINVAL;
	mutex_lock(&mgr->lock);
	q = xa_load(&mgr->ids, args->waitq_id);
	ret = q && !list_empty(&q->node) ? 0 : -ENOENT;
	mutex_unlock(&mgr->lock);
	if (ret)
		return ret;

	ret = vgpu_collect(&s, file, args);
	if (ret)
		goto out;
	nu = vgpu_set_fold_userq(vf, &s);
	if (!args->num_fences) {
		args->num_fences = nu;
		goto out;
	}
	if (nu > args->num_fences) {
		ret = -EINVAL;
		goto out;
	}
	/* Kernel fences: waited for here, bounded. */
	for (i = nu; i < s.n; i++) {
		left = dma_fence_wait_timeout(s.f[i], true,
					      msecs_to_jiffies(VGPU_USERQ_KFENCE_MS));
		if (left < 0) {
			ret = left;
			goto out;
		}
		if (!left) {
			ret = -ETIME;
			goto out;
		}
	}
	if (nu) {
		info = kcalloc(nu, sizeof(*info), GFP_KERNEL);
		if (!info) {
			ret = -ENOMEM;
			goto out;
		}
	}
	for (i = 0; i < nu; i++) {
		uf = vgpu_userq_fence_of(vf, s.f[i]);
		ret = vgpu_fence_page_va(vf, uf->page, &va);
		if (ret)
			goto out;
		info[i].va = va + uf->slot * 8;
		info[i].value = s.f[i]->seqno;
	}
	if (nu && copy_to_user(u64_to_user_ptr(args->out_fences), info, nu * sizeof(*info))) {
		ret = -EFAULT;
		goto out;
	}
	args->num_fences = nu;
out:
	kfree(info);
	vgpu_set_free(&s);
	return ret;
}
