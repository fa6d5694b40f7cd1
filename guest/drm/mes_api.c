// SPDX-License-Identifier: GPL-2.0
/*
 * The MES calls of the user-queue part (see mes.h), as amdgpu's mes_v11_0 fills them.
 */

#include <linux/bitfield.h>

#include "vgpu_drm_dev.h"
#include "mes_wb.h"

/* ADD_QUEUE of one compute queue, one queue per gang (mes_userq_map). */
int vgpu_mes_add_queue(struct vgpu_dev *vdev, const struct vgpu_mes_add_queue *in,
		       u32 *reason, u64 *epoch)
{
	u32 f[VGPU_MES_FRAME_DW];
	int ret;

	vgpu_mes_frame(f, VGPU_MES_SCH_API_ADD_QUEUE);
	f[VGPU_MES_ADD_QUEUE_DW_PROCESS_ID] = in->pasid;
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_PAGE_TABLE_BASE_ADDR, in->page_table_base);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_PROCESS_VA_START, 0);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_PROCESS_VA_END, in->va_end_page);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_PROCESS_QUANTUM, in->process_quantum);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ADDR, in->process_ctx);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_GANG_QUANTUM, in->gang_quantum);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_GANG_CONTEXT_ADDR, in->gang_ctx);
	f[VGPU_MES_ADD_QUEUE_DW_INPROCESS_GANG_PRIORITY] = VGPU_MES_PRIORITY_NORMAL;
	f[VGPU_MES_ADD_QUEUE_DW_GANG_GLOBAL_PRIORITY_LEVEL] = in->priority;
	f[VGPU_MES_ADD_QUEUE_DW_DOORBELL_OFFSET] = in->doorbell;
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_MQD_ADDR, in->mqd);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_WPTR_ADDR, in->wptr);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_H_CONTEXT, in->process_ctx);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_H_QUEUE, in->mqd);
	f[VGPU_MES_ADD_QUEUE_DW_QUEUE_TYPE] = VGPU_MES_QUEUE_TYPE_COMPUTE;
	f[VGPU_MES_ADD_QUEUE_DW_VM_CONTEXT_CNTL] = in->vm_context_cntl;
	f[VGPU_MES_ADD_QUEUE_DW_FLAGS] =
		in->suspended ? VGPU_MES_ADD_QUEUE_FLAG_IS_GANG_SUSPENDED_MASK : 0;
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_UNMAP_FLAG_ADDR, in->unmap_flag);
	/* The scheduler's life the queue was added in: a reset forgets it (mes_reset.c). */
	mutex_lock(&vdev->mes.lock);
	ret = vgpu_mes_submit_locked(vdev, f, reason);
	*epoch = vdev->mes.epoch;
	mutex_unlock(&vdev->mes.lock);
	return ret;
}

/* REMOVE_QUEUE (mes_userq_unmap). A hung queue must be RESET first (MES_ERR_QUEUE_HUNG). */
int vgpu_mes_remove_queue(struct vgpu_dev *vdev, u32 doorbell, u64 gang_ctx, u32 *reason)
{
	u32 f[VGPU_MES_FRAME_DW];

	vgpu_mes_frame(f, VGPU_MES_SCH_API_REMOVE_QUEUE);
	f[VGPU_MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET] = doorbell;
	vgpu_mes_put64(f, VGPU_MES_REMOVE_QUEUE_DW_GANG_CONTEXT_ADDR, gang_ctx);
	f[VGPU_MES_REMOVE_QUEUE_DW_QUEUE_TYPE] = VGPU_MES_QUEUE_TYPE_COMPUTE;
	return vgpu_mes_submit(vdev, f, reason);
}

/*
 * SUSPEND of one gang, or of all with gang_ctx 0: completes once every queue of them is off the
 * hardware with its state saved (the suspend fence is written before the frame's status).
 */
int vgpu_mes_suspend(struct vgpu_dev *vdev, u64 gang_ctx, u32 *reason)
{
	struct vgpu_mes *m = &vdev->mes;
	u32 f[VGPU_MES_FRAME_DW];
	int ret;

	vgpu_mes_frame(f, VGPU_MES_SCH_API_SUSPEND);
	f[VGPU_MES_SUSPEND_DW_FLAGS] = gang_ctx ? 0 : 1;
	vgpu_mes_put64(f, VGPU_MES_SUSPEND_DW_GANG_CONTEXT_ADDR, gang_ctx);
	mutex_lock(&m->lock);
	if (m->wb) {
		vgpu_kbo_wr(m->wb, VGPU_MES_WB_SUSPEND, 0);
		vgpu_mes_put64(f, VGPU_MES_SUSPEND_DW_SUSPEND_FENCE_ADDR,
			       m->wb->gpu + VGPU_MES_WB_SUSPEND);
	}
	f[VGPU_MES_SUSPEND_DW_SUSPEND_FENCE_VALUE] = 1;
	ret = vgpu_mes_submit_locked(vdev, f, reason);
	mutex_unlock(&m->lock);
	return ret;
}

int vgpu_mes_resume(struct vgpu_dev *vdev, u64 gang_ctx, u32 *reason)
{
	u32 f[VGPU_MES_FRAME_DW];

	vgpu_mes_frame(f, VGPU_MES_SCH_API_RESUME);
	f[VGPU_MES_RESUME_DW_FLAGS] = gang_ctx ? 0 : 1;
	vgpu_mes_put64(f, VGPU_MES_RESUME_DW_GANG_CONTEXT_ADDR, gang_ctx);
	return vgpu_mes_submit(vdev, f, reason);
}

/* RESET of one compute queue by doorbell (amdgpu_mes_reset_user_queue): work discarded. */
int vgpu_mes_reset_queue(struct vgpu_dev *vdev, u32 doorbell, u32 *reason)
{
	u32 f[VGPU_MES_FRAME_DW];

	vgpu_mes_frame(f, VGPU_MES_SCH_API_RESET);
	f[VGPU_MES_RESET_DW_FLAGS] = VGPU_MES_RESET_FLAG_RESET_QUEUE_ONLY_MASK;
	f[VGPU_MES_RESET_DW_DOORBELL_OFFSET] = doorbell;
	f[VGPU_MES_RESET_DW_QUEUE_TYPE] = VGPU_MES_QUEUE_TYPE_COMPUTE;
	return vgpu_mes_submit(vdev, f, reason);
}

/*
 * amdgpu_mes_detect_and_reset_hung_queues for compute: hung gets 2 x
 * MES_RESET_DW_HUNG_DB_ENTRIES dwords (doorbells, then slots; MES_HUNG_DB_INVALID where none).
 */
int vgpu_mes_detect_hung(struct vgpu_dev *vdev, bool then_reset, u32 *hung, u32 *reason)
{
	struct vgpu_mes *m = &vdev->mes;
	u32 f[VGPU_MES_FRAME_DW];
	unsigned int i;
	int ret;

	vgpu_mes_frame(f, VGPU_MES_SCH_API_RESET);
	f[VGPU_MES_RESET_DW_FLAGS] = then_reset ? VGPU_MES_RESET_FLAG_HANG_DETECT_THEN_RESET_MASK :
						  VGPU_MES_RESET_FLAG_HANG_DETECT_ONLY_MASK;
	f[VGPU_MES_RESET_DW_QUEUE_TYPE] = VGPU_MES_QUEUE_TYPE_COMPUTE;
	mutex_lock(&m->lock);
	if (!m->wb) {
		mutex_unlock(&m->lock);
		return -ENODEV;
	}
	for (i = 0; i < 2 * VGPU_MES_RESET_DW_HUNG_DB_ENTRIES; i++)
		vgpu_kbo_wr(m->wb, VGPU_MES_WB_HUNG + 4 * i, VGPU_MES_HUNG_DB_INVALID);
	vgpu_mes_put64(f, VGPU_MES_RESET_DW_DOORBELL_OFFSET_ADDR, m->wb->gpu + VGPU_MES_WB_HUNG);
	ret = vgpu_mes_submit_locked(vdev, f, reason);
	for (i = 0; i < 2 * VGPU_MES_RESET_DW_HUNG_DB_ENTRIES; i++)
		hung[i] = vgpu_kbo_rd(m->wb, VGPU_MES_WB_HUNG + 4 * i);
	mutex_unlock(&m->lock);
	return ret;
}

/* UPDATE_ROOT_PAGE_TABLE: the process's new root (its VMID is rewritten and invalidated). */
int vgpu_mes_update_root(struct vgpu_dev *vdev, u64 pd_addr, u64 process_ctx, u32 *reason)
{
	u32 f[VGPU_MES_FRAME_DW];

	vgpu_mes_frame(f, VGPU_MES_SCH_API_UPDATE_ROOT_PAGE_TABLE);
	vgpu_mes_put64(f, VGPU_MES_ROOT_PT_DW_PAGE_TABLE_BASE_ADDR, pd_addr);
	vgpu_mes_put64(f, VGPU_MES_ROOT_PT_DW_PROCESS_CONTEXT_ADDR, process_ctx);
	return vgpu_mes_submit(vdev, f, reason);
}

int vgpu_mes_change_priority(struct vgpu_dev *vdev, u64 gang_ctx, u32 priority,
			     u64 gang_quantum, u32 *reason)
{
	u32 f[VGPU_MES_FRAME_DW];

	vgpu_mes_frame(f, VGPU_MES_SCH_API_CHANGE_GANG_PRIORITY);
	f[VGPU_MES_CHANGE_PRIO_DW_INPROCESS_GANG_PRIORITY] = VGPU_MES_PRIORITY_NORMAL;
	f[VGPU_MES_CHANGE_PRIO_DW_GANG_GLOBAL_PRIORITY_LEVEL] = priority;
	vgpu_mes_put64(f, VGPU_MES_CHANGE_PRIO_DW_GANG_QUANTUM, gang_quantum);
	vgpu_mes_put64(f, VGPU_MES_CHANGE_PRIO_DW_GANG_CONTEXT_ADDR, gang_ctx);
	return vgpu_mes_submit(vdev, f, reason);
}

/* MES_QUERY_* of the queue with that doorbell (all 0 for a doorbell no queue has). */
void vgpu_mes_query_queue(struct vgpu_dev *vdev, u32 doorbell, struct vgpu_mes_queue_status *s)
{
	/* The select register and the reads behind it are one transaction. */
	mutex_lock(&vdev->mes.lock);
	vgpu_wr(vdev, VGPU_REG_MES_QUERY_DOORBELL, doorbell);
	s->status = vgpu_rd(vdev, VGPU_REG_MES_QUERY_STATUS);
	s->maps = vgpu_rd(vdev, VGPU_REG_MES_QUERY_MAPS);
	s->preempts = vgpu_rd(vdev, VGPU_REG_MES_QUERY_PREEMPTS);
	s->rptr = vgpu_rd64(vdev, VGPU_REG_MES_QUERY_RPTR_LO, VGPU_REG_MES_QUERY_RPTR_HI);
	mutex_unlock(&vdev->mes.lock);
}
