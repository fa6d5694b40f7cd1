// SPDX-License-Identifier: GPL-2.0
/*
 * User queues: the USERQ ioctl (CREATE, FREE, QUERY_STATUS), the per-file manager, the GEM_VA
 * busy check and the interrupt hooks (see userq.h).
 */

#include <linux/bitfield.h>
#include <linux/capability.h>
#include <linux/delay.h>
#include <linux/log2.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_gem.h>
#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"
#include "gem.h"
#include "vm.h"

int vgpu_userq_dev_init(struct vgpu_dev *vdev)
{
	xa_init_flags(&vdev->userq.doorbells, XA_FLAGS_LOCK_IRQ);
	return vgpu_userq_fault_init(vdev);
}

void vgpu_userq_dev_fini(struct vgpu_dev *vdev)
{
	unsigned int ms;

	vgpu_userq_fault_fini(vdev);
	/* Fence pages whose last fence went just before: their frees run module code. */
	for (ms = 0; atomic_read(&vdev->userq.pages_freeing) && ms < 1000; ms++)
		msleep(1);
	WARN_ON(!xa_empty(&vdev->userq.doorbells));
	xa_destroy(&vdev->userq.doorbells);
}

void vgpu_userq_mgr_init(struct vgpu_file *vf)
{
	struct vgpu_userq_mgr *mgr = &vf->userq;

	mutex_init(&mgr->evict_lock);
	mutex_init(&mgr->maps_lock);
	mutex_init(&mgr->lock);
	INIT_LIST_HEAD(&mgr->queues);
	xa_init_flags(&mgr->ids, XA_FLAGS_ALLOC1);
}

/*
 * The file's fence page, mapped read-only at the bottom of its VM's reserved area (index 0 of
 * its maps, before any other file's page a WAIT maps). Takes maps_lock (and vm->lock inside).
 */
static int vgpu_userq_fences_get(struct vgpu_file *vf)
{
	struct vgpu_userq_mgr *mgr = &vf->userq;
	struct vgpu_fence_page *p;
	u64 va;
	int ret = 0;

	mutex_lock(&mgr->maps_lock);
	if (mgr->fences)
		goto out;
	p = vgpu_fence_page_create(vf->vdev);
	if (!p) {
		ret = -ENOMEM;
		goto out;
	}
	ret = vgpu_fence_maps_add(&mgr->maps, vf->vm, p, &va);
	if (ret) {
		vgpu_fence_page_put(p);
		goto out;
	}
	WARN_ON(va != vgpu_fence_map_va(0));
	mgr->fences = p;
out:
	mutex_unlock(&mgr->maps_lock);
	return ret;
}

/* ---- CREATE ---- */

static u32 vgpu_userq_mes_priority(u32 prio)
{
	static const u32 map[] = {
		[VGPU_USERQ_PRIORITY_NORMAL_LOW] = VGPU_MES_PRIORITY_NORMAL,
		[VGPU_USERQ_PRIORITY_LOW] = VGPU_MES_PRIORITY_LOW,
		[VGPU_USERQ_PRIORITY_NORMAL_HIGH] = VGPU_MES_PRIORITY_MEDIUM,
		[VGPU_USERQ_PRIORITY_HIGH] = VGPU_MES_PRIORITY_HIGH,
	};

	return map[prio & 3];
}

/* The checks that need nothing but the arguments (amdgpu_userq_input_args_validate). */
static int vgpu_userq_check_args(const struct drm_vgpu_userq_in *in,
				 struct drm_vgpu_userq_mqd_compute *mqd)
{
	if (in->flags & ~VGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_MASK)
		return -EINVAL;
	if (in->ip_type != VGPU_HW_IP_COMPUTE)
		return -EINVAL;
	if (!in->queue_va || (in->queue_va & 255))
		return -EINVAL;
	if (in->queue_size < VGPU_GPU_PAGE || !is_power_of_2(in->queue_size))
		return -EINVAL;
	if (!in->rptr_va || (in->rptr_va & 7) || !in->wptr_va || (in->wptr_va & 7))
		return -EINVAL;
	if ((in->mqd_size != sizeof(*mqd) && in->mqd_size != VGPU_USERQ_MQD_COMPUTE_SIZE_V1) ||
	    !in->mqd)
		return -EINVAL;
	memset(mqd, 0, sizeof(*mqd));
	if (copy_from_user(mqd, u64_to_user_ptr(in->mqd), in->mqd_size))
		return -EFAULT;
	if (!mqd->eop_va || (mqd->eop_va & (VGPU_USERQ_EOP_ALIGN - 1)))
		return -EINVAL;
	if (!mqd->csa_size != !mqd->csa_va || (mqd->csa_va & (VGPU_GPU_PAGE - 1)) ||
	    (mqd->csa_size & (VGPU_GPU_PAGE - 1)) || mqd->csa_size > VGPU_USERQ_CSA_MAX)
		return -EINVAL;
	return 0;
}

/* Every range inside one GEM mapping of the file's VM; the wptr readable by the CPU. vm->lock held. */
int vgpu_userq_check_vas(struct vgpu_file *vf, struct vgpu_userq *q)
{
	const struct vgpu_mapping *m;
	unsigned int i;
	u64 wptr;

	for (i = 0; i < VGPU_USERQ_VA_FENCE; i++) {
		if (!q->va[i].size)
			continue;	/* an optional range (the context save area) not given */
		m = vgpu_vm_find_locked(vf->vm, q->va[i].va, q->va[i].size);
		if (!m || !m->obj)
			return -EINVAL;
	}
	/* SIGNAL reads the wptr: not from VRAM beyond the BAR window. */
	return vgpu_userq_read_u64(vf, q->va[VGPU_USERQ_VA_WPTR].va, &wptr);
}

/* The doorbell: a DOORBELL BO of the caller, the index inside it. */
static int vgpu_userq_doorbell(struct vgpu_file *vf, const struct drm_vgpu_userq_in *in,
			       struct vgpu_userq *q)
{
	struct drm_gem_object *obj = drm_gem_object_lookup(vf->file, in->doorbell_handle);
	struct vgpu_bo *bo;

	if (!obj)
		return -EINVAL;
	bo = to_vgpu_bo(obj);
	if (bo->kind != VGPU_BO_DOORBELL || (u64)in->doorbell_offset * 8 + 8 > obj->size) {
		drm_gem_object_put(obj);
		return -EINVAL;
	}
	q->db_obj = obj;
	q->db_index = in->doorbell_offset;
	q->doorbell = vgpu_doorbell_dword(bo->db_page, in->doorbell_offset);
	return 0;
}

/* Frees what CREATE built; the queue is on no list and MES does not know it. */
static void vgpu_userq_free_parts(struct vgpu_dev *vdev, struct vgpu_userq *q)
{
	vgpu_userq_wptr_mc_put(q);
	vgpu_kbo_free(vdev, q->gang);
	vgpu_kbo_free(vdev, q->mqd);
	if (q->fd.page)
		vgpu_fence_drv_fini(&q->fd);
	if (q->db_obj)
		drm_gem_object_put(q->db_obj);
	kfree(q);
}

static int vgpu_userq_create(struct vgpu_file *vf, union drm_vgpu_userq *args)
{
	struct drm_vgpu_userq_in *in = &args->in;
	struct vgpu_userq_mgr *mgr = &vf->userq;
	struct vgpu_dev *vdev = vf->vdev;
	struct drm_vgpu_userq_mqd_compute mqd;
	struct vgpu_userq *q;
	u32 prio, id;
	int ret;

	ret = vgpu_userq_check_args(in, &mqd);
	if (ret)
		return ret;
	prio = FIELD_GET(VGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_MASK, in->flags);
	if (prio == VGPU_USERQ_PRIORITY_HIGH && !capable(CAP_SYS_NICE))
		return -EACCES;
	ret = vgpu_userq_fences_get(vf);
	if (ret)
		return ret;

	q = kzalloc(sizeof(*q), GFP_KERNEL);
	if (!q)
		return -ENOMEM;
	INIT_LIST_HEAD(&q->node);
	q->vf = vf;
	q->priority = prio;
	q->mes_priority = vgpu_userq_mes_priority(prio);
	q->queue_size = in->queue_size;
	q->va[VGPU_USERQ_VA_RING] = (struct vgpu_userq_va){ in->queue_va, in->queue_size };
	q->va[VGPU_USERQ_VA_RPTR] = (struct vgpu_userq_va){ in->rptr_va, 8 };
	q->va[VGPU_USERQ_VA_WPTR] = (struct vgpu_userq_va){ in->wptr_va, 8 };
	q->va[VGPU_USERQ_VA_EOP] = (struct vgpu_userq_va){ mqd.eop_va, VGPU_USERQ_EOP_SIZE };
	q->va[VGPU_USERQ_VA_CSA] = (struct vgpu_userq_va){ mqd.csa_va, mqd.csa_size };
	vgpu_userq_hang_init(q);
	ret = vgpu_userq_doorbell(vf, in, q);
	if (ret)
		goto err_free;
	q->mqd = vgpu_kbo_alloc(vdev, VGPU_GPU_PAGE, VGPU_KBO_GART);
	q->gang = q->mqd ? vgpu_kbo_alloc(vdev, VGPU_GPU_PAGE, VGPU_KBO_GART) : NULL;
	if (!q->gang) {
		ret = -ENOMEM;
		goto err_free;
	}

	mutex_lock(&mgr->evict_lock);
	vgpu_vm_lock(vf->vm);
	mutex_lock(&mgr->lock);
	if (!mgr->proc_ctx)
		mgr->proc_ctx = vgpu_kbo_alloc(vdev, VGPU_GPU_PAGE, VGPU_KBO_GART);
	if (!mgr->proc_ctx) {
		ret = -ENOMEM;
		goto err_unlock;
	}
	ret = vgpu_userq_check_vas(vf, q);
	if (ret)
		goto err_unlock;
	ret = xa_alloc(&mgr->ids, &id, q, XA_LIMIT(1, VGPU_USERQ_MAX_PER_FILE), GFP_KERNEL);
	if (ret) {
		ret = ret == -EBUSY ? -ENOSPC : ret;
		goto err_unlock;
	}
	q->id = id;
	vgpu_fence_drv_init(&q->fd, mgr->fences, id - 1);
	q->va[VGPU_USERQ_VA_FENCE] = (struct vgpu_userq_va){ q->fd.va, 8 };
	q->hang_seen = 0;
	/* A doorbell another live queue uses (of this file or another) is refused. */
	ret = xa_insert_irq(&vdev->userq.doorbells, q->doorbell, q, GFP_KERNEL);
	if (ret) {
		ret = ret == -EBUSY ? -EINVAL : ret;
		goto err_id;
	}
	ret = vgpu_userq_wptr_mc(q);
	if (ret)
		goto err_db;
	vgpu_userq_mqd_init(q);
	ret = vgpu_userq_map(q);
	if (ret == -ETIMEDOUT && !READ_ONCE(vdev->mes.running)) {
		/*
		 * MES may still run the frame later: it must not find freed pages then. (When the
		 * scheduler reset worked, the frame is gone with the old ring: mes_reset.c.)
		 */
		drm_err(&vdev->drm, "userq: ADD_QUEUE not answered: MQD, gang context and wptr window leaked\n");
		q->mqd = NULL;
		q->gang = NULL;
		q->wptr_gart = 0;
		q->wptr_mc = 0;
	}
	if (ret)
		goto err_db;
	list_add_tail(&q->node, &mgr->queues);
	mgr->nqueues++;
	mutex_unlock(&mgr->lock);
	vgpu_vm_unlock(vf->vm);
	mutex_unlock(&mgr->evict_lock);

	memset(&args->out, 0, sizeof(args->out));
	args->out.queue_id = id;
	args->out.fence_va = q->fd.va;
	return 0;

err_db:
	xa_erase_irq(&vdev->userq.doorbells, q->doorbell);
err_id:
	xa_erase(&mgr->ids, id);
err_unlock:
	mutex_unlock(&mgr->lock);
	vgpu_vm_unlock(vf->vm);
	mutex_unlock(&mgr->evict_lock);
err_free:
	vgpu_userq_free_parts(vdev, q);
	return ret;
}

/* ---- FREE, and file close ---- */

/*
 * Removes a queue: off the lists, REMOVE_QUEUE (after a RESET if MES holds it hung), its
 * pending fences completed (-ECANCELED), its pages freed. If MES could not remove it, the pages
 * MES may still write (MQD, gang context, the wptr's GART page) are leaked, never freed under
 * it. mgr->lock held.
 */
static int vgpu_userq_destroy(struct vgpu_userq *q)
{
	struct vgpu_userq_mgr *mgr = &q->vf->userq;
	struct vgpu_dev *vdev = q->vf->vdev;
	int ret;

	list_del_init(&q->node);
	xa_erase(&mgr->ids, q->id);
	mgr->nqueues--;
	ret = vgpu_userq_unmap(q);
	/* No EOP or hung IV finds it from here, so nothing re-arms the timer. */
	xa_erase_irq(&vdev->userq.doorbells, q->doorbell);
	cancel_delayed_work_sync(&q->hang_work);
	vgpu_fence_force_complete(&q->fd, -ECANCELED);
	if (ret) {
		drm_err(&vdev->drm, "userq %u of pid %d: MES did not remove it (%d): its MQD, gang context and wptr page are leaked\n",
			q->id, q->vf->pid, ret);
		q->mqd = NULL;
		q->gang = NULL;
		q->wptr_gart = 0;
		q->wptr_mc = 0;
	}
	vgpu_userq_free_parts(vdev, q);
	return ret;
}

static int vgpu_userq_free(struct vgpu_file *vf, union drm_vgpu_userq *args)
{
	struct drm_vgpu_userq_in *in = &args->in;
	struct vgpu_userq_mgr *mgr = &vf->userq;
	struct vgpu_userq *q;
	int ret;

	if (in->ip_type || in->doorbell_handle || in->doorbell_offset || in->flags ||
	    in->queue_va || in->queue_size || in->rptr_va || in->wptr_va || in->mqd ||
	    in->mqd_size)
		return -EINVAL;
	mutex_lock(&mgr->evict_lock);
	mutex_lock(&mgr->lock);
	q = xa_load(&mgr->ids, in->queue_id);
	if (!q || list_empty(&q->node)) {
		ret = -ENOENT;
	} else {
		vgpu_userq_destroy(q);
		/* The queue is gone whatever MES said: FREE succeeded. */
		ret = 0;
	}
	mutex_unlock(&mgr->lock);
	mutex_unlock(&mgr->evict_lock);
	if (!ret)
		memset(&args->out, 0, sizeof(args->out));
	return ret;
}

/* File close: FREE of every queue, the fence pages out of the VM; the VM goes after. */
void vgpu_userq_mgr_fini(struct vgpu_file *vf)
{
	struct vgpu_userq_mgr *mgr = &vf->userq;
	struct vgpu_userq *q, *tmp;
	bool leak = false;

	mutex_lock(&mgr->evict_lock);
	mutex_lock(&mgr->lock);
	list_for_each_entry_safe(q, tmp, &mgr->queues, node)
		leak |= vgpu_userq_destroy(q) != 0;
	mutex_unlock(&mgr->lock);
	mutex_unlock(&mgr->evict_lock);

	mutex_lock(&mgr->maps_lock);
	vgpu_fence_maps_release(&mgr->maps, vf->vm);
	vgpu_fence_page_put(mgr->fences);
	mgr->fences = NULL;
	mutex_unlock(&mgr->maps_lock);
	/* MES names the process by this page while it has a queue of it. */
	if (!leak)
		vgpu_kbo_free(vf->vdev, mgr->proc_ctx);
	mgr->proc_ctx = NULL;
	xa_destroy(&mgr->ids);
	mutex_destroy(&mgr->lock);
	mutex_destroy(&mgr->maps_lock);
	mutex_destroy(&mgr->evict_lock);
}

/* ---- QUERY_STATUS ---- */

static int vgpu_userq_query(struct vgpu_file *vf, union drm_vgpu_userq *args)
{
	struct vgpu_userq_mgr *mgr = &vf->userq;
	struct vgpu_mes_queue_status st;
	struct vgpu_userq *q;
	u32 flags;
	u64 fence_va;

	mutex_lock(&mgr->lock);
	q = xa_load(&mgr->ids, args->in.queue_id);
	if (!q || list_empty(&q->node)) {
		mutex_unlock(&mgr->lock);
		return -ENOENT;
	}
	/* MES may know before the IV is handled: it marked the queue hung. */
	if (q->added) {
		vgpu_mes_query_queue(vf->vdev, q->doorbell, &st);
		if (st.status & VGPU_REG_MES_QUERY_STATUS__HUNG_MASK)
			q->status_flags |= VGPU_USERQ_QUERY_STATUS_FLAGS_HUNG;
	}
	flags = q->status_flags;
	fence_va = q->fd.va;
	mutex_unlock(&mgr->lock);

	memset(&args->out, 0, sizeof(args->out));
	args->out.queue_id = q->id;
	args->out.fence_va = fence_va;
	args->out.status_flags = flags;
	return 0;
}

int vgpu_userq_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	union drm_vgpu_userq *args = data;
	struct vgpu_file *vf = to_vgpu_file(file);

	switch (args->in.op) {
	case VGPU_USERQ_OP_CREATE:
		return vgpu_userq_create(vf, args);
	case VGPU_USERQ_OP_FREE:
		return vgpu_userq_free(vf, args);
	case VGPU_USERQ_OP_QUERY_STATUS:
		return vgpu_userq_query(vf, args);
	default:
		return -EINVAL;
	}
}

/* ---- GEM_VA UNMAP ---- */

static bool vgpu_range_overlaps(u64 a, u64 asize, u64 b, u64 bsize)
{
	return a < b + bsize && b < a + asize;
}

/* Whether a live queue of the file uses any byte of [va, va + size). vm->lock held. */
bool vgpu_userq_va_busy(struct vgpu_file *vf, u64 va, u64 size)
{
	struct vgpu_userq *q;
	bool busy = false;
	unsigned int i;

	mutex_lock(&vf->userq.lock);
	list_for_each_entry(q, &vf->userq.queues, node) {
		for (i = 0; i < VGPU_USERQ_VA_RANGES && !busy; i++)
			busy = vgpu_range_overlaps(va, size, q->va[i].va, q->va[i].size);
		if (busy)
			break;
	}
	mutex_unlock(&vf->userq.lock);
	return busy;
}

/* ---- interrupts (hard-IRQ context, the IH lock held) ---- */

/* PROTECTED_FENCE_SIGNAL's EOP IV: DW4 is the queue's doorbell (gfx_v11_0_eop_irq). */
void vgpu_userq_irq_eop(struct vgpu_dev *vdev, u32 doorbell, u16 pasid)
{
	struct vgpu_userq *q;
	bool pending;

	vdev->userq.eop_irqs++;
	xa_lock(&vdev->userq.doorbells);
	q = xa_load(&vdev->userq.doorbells, doorbell);
	if (q) {
		if (vgpu_fence_process(&q->fd, &pending))
			vgpu_userq_hang_progress(q, pending);
	} else {
		vdev->userq.eop_unknown++;
	}
	xa_unlock(&vdev->userq.doorbells);
}

/* MES_QUEUE_HUNG: DW4 the doorbell. The reset runs in the hang worker, at once. */
void vgpu_userq_irq_hung(struct vgpu_dev *vdev, u32 doorbell, u16 pasid)
{
	struct vgpu_userq *q;

	vdev->userq.hung_irqs++;
	xa_lock(&vdev->userq.doorbells);
	q = xa_load(&vdev->userq.doorbells, doorbell);
	if (q) {
		WRITE_ONCE(q->mes_hung, true);
		mod_delayed_work(system_wq, &q->hang_work, 0);
	}
	xa_unlock(&vdev->userq.doorbells);
}

/*
 * A CP error or a VM fault of a user queue: the queue halts (MES keeps it unmapped until a
 * RESET). The IVs name the PASID, not the doorbell: the fault worker finds the halted queue by
 * the error MES saved in its MQD and resets it (amdgpu_userq_process_reset_irq).
 */
void vgpu_userq_irq_error(struct vgpu_dev *vdev, u32 src, u16 pasid, const u32 *data)
{
	vgpu_userq_fault(vdev, pasid);
}

void vgpu_userq_irq_vm_fault(struct vgpu_dev *vdev, u16 pasid, u64 addr, u32 flags)
{
	vgpu_userq_fault(vdev, pasid);
}

/* ---- debugfs ---- */

static const char *vgpu_userq_state_name(const struct vgpu_userq *q, u32 mes_status)
{
	if (q->state == VGPU_USERQ_INVALID_VA)
		return "invalid_va";
	if (q->status_flags & VGPU_USERQ_QUERY_STATUS_FLAGS_HUNG ||
	    mes_status & VGPU_REG_MES_QUERY_STATUS__HUNG_MASK)
		return "hung";
	if (!q->added)
		return "removed";
	return mes_status & VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK ? "mapped" : "unmapped";
}

/*
 * One line per queue: id, doorbell, priority, state (mapped: in an HQD slot now; unmapped:
 * added, waiting for work or a slot; removed: off MES for an eviction; hung; invalid_va), the
 * slot and the counters MES_QUERY_* reports, the fence slot and the last SIGNAL seqno.
 */
void vgpu_userq_debugfs_file(struct seq_file *m, struct vgpu_file *vf)
{
	static const char * const prio[] = { "normal_low", "low", "normal_high", "high" };
	struct vgpu_userq_mgr *mgr = &vf->userq;
	struct vgpu_mes_queue_status st;
	struct dma_fence *last;
	struct vgpu_userq *q;
	u32 slot;

	mutex_lock(&mgr->lock);
	seq_printf(m, "  userqs: %u, evictions %u\n", mgr->nqueues, mgr->evictions);
	list_for_each_entry(q, &mgr->queues, node) {
		memset(&st, 0, sizeof(st));
		if (q->added)
			vgpu_mes_query_queue(vf->vdev, q->doorbell, &st);
		slot = FIELD_GET(VGPU_REG_MES_QUERY_STATUS__SLOT_MASK, st.status);
		last = vgpu_fence_last(&q->fd);
		seq_printf(m, "  queue %u: doorbell %#x priority %s state %s slot ", q->id,
			   q->doorbell, prio[q->priority & 3], vgpu_userq_state_name(q, st.status));
		if (q->added && slot != 0xff)
			seq_printf(m, "%u", slot);
		else
			seq_puts(m, "-");
		seq_printf(m, " vmid %u maps %u preempts %u rptr %llu fence %llu last_signal %llu%s resets %u\n",
			   (u32)FIELD_GET(VGPU_REG_MES_QUERY_STATUS__VMID_MASK, st.status), st.maps,
			   st.preempts, st.rptr, vgpu_fence_slot_read(q->fd.page, q->fd.slot),
			   last ? last->seqno : 0,
			   last && !dma_fence_is_signaled(last) ? " (pending)" : "", q->resets);
		dma_fence_put(last);
	}
	mutex_unlock(&mgr->lock);
}
