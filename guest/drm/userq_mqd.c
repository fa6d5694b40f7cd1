// SPDX-License-Identifier: GPL-2.0
/*
 * One user queue and MES: the v11 compute MQD the kernel builds from the user's arguments
 * (gfx_v11_0_compute_mqd_init for a user queue), ADD_QUEUE as mes_userq_map fills it and
 * REMOVE_QUEUE as mes_userq_unmap (with the RESET a hung queue needs first).
 */

#include <linux/bitfield.h>
#include <linux/log2.h>

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"
#include "vm.h"

static void vgpu_mqd_wr(struct vgpu_userq *q, u32 dw, u32 v)
{
	vgpu_kbo_wr(q->mqd, 4 * dw, v);
}

/*
 * Not active, VMID 0 (MES assigns the process's), the ring, the rptr report and the wptr
 * poll address (the user's VAs, in the process VMID), the EOP buffer, the doorbell, the
 * quantum, the context save area, and FENCE_ADDRESS = the queue's fence slot for
 * PROTECTED_FENCE_SIGNAL.
 */
int vgpu_userq_mqd_init(struct vgpu_userq *q)
{
	u64 ring = q->va[VGPU_USERQ_VA_RING].va >> 8;
	u64 eop = q->va[VGPU_USERQ_VA_EOP].va >> 8;
	u64 rptr = q->va[VGPU_USERQ_VA_RPTR].va;
	u64 wptr = q->va[VGPU_USERQ_VA_WPTR].va;
	u64 fence = q->fd.va;
	u64 csa = q->va[VGPU_USERQ_VA_CSA].va;

	memset(q->mqd->cpu, 0, q->mqd->size);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_HEADER, VGPU_MES_MQD_HEADER);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_MQD_BASE_ADDR_LO, lower_32_bits(q->mqd->gpu) & ~3U);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_MQD_BASE_ADDR_HI, upper_32_bits(q->mqd->gpu));
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_ACTIVE, 0);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_VMID, 0);
	/* regCP_HQD_PERSISTENT_STATE_DEFAULT with PRELOAD_SIZE 0x55. */
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PERSISTENT_STATE, 0x0be05501);
	/* amdgpu's user queues: pipe priority NORMAL, queue priority MINIMUM. */
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PIPE_PRIORITY, 1);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_QUEUE_PRIORITY, 0);
	/* QUANTUM_EN, QUANTUM_SCALE 1, QUANTUM_DURATION 10. */
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_QUANTUM, BIT(0) | BIT(4) | 10 << 8);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_BASE_LO, lower_32_bits(ring));
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_BASE_HI, upper_32_bits(ring));
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_RPTR, 0);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_RPTR_REPORT_ADDR_LO, lower_32_bits(rptr) & ~3U);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_RPTR_REPORT_ADDR_HI,
		    upper_32_bits(rptr) & 0xffff);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_WPTR_POLL_ADDR_LO, lower_32_bits(wptr) & ~7U);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_WPTR_POLL_ADDR_HI,
		    upper_32_bits(wptr) & 0xffff);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_DOORBELL_CONTROL,
		    FIELD_PREP(VGPU_REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK, q->doorbell) |
		    VGPU_REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK);
	/*
	 * QUEUE_SIZE (ring = 2^(n+1) dwords), RPTR_BLOCK_SIZE of a page (amdgpu's value),
	 * PRIV_STATE and KMD_QUEUE; vgpu reads QUEUE_SIZE and NO_UPDATE_RPTR (clear).
	 */
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_CONTROL,
		    FIELD_PREP(VGPU_REG_HQD_PQ_CONTROL__QUEUE_SIZE_MASK,
			       ilog2(q->queue_size / 4) - 1) |
		    (ilog2(VGPU_GPU_PAGE / 4) - 1) << 8 | BIT(30) | BIT(31));
	/* MIN_IB_AVAIL_SIZE 3; no IB in flight. */
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_IB_CONTROL, 3 << 20);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_EOP_BASE_ADDR_LO, lower_32_bits(eop));
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_EOP_BASE_ADDR_HI, upper_32_bits(eop));
	/* EOP_SIZE as log2(dwords) - 1. */
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_EOP_CONTROL, ilog2(VGPU_USERQ_EOP_SIZE / 4) - 1);
	/* The context save area of the queue's shader dispatches (0, 0: none). */
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_CTX_SAVE_BASE_ADDR_LO, lower_32_bits(csa));
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_CTX_SAVE_BASE_ADDR_HI, upper_32_bits(csa));
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_CTX_SAVE_SIZE, q->va[VGPU_USERQ_VA_CSA].size);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_DEQUEUE_REQUEST, 0);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_ERROR, 0);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_WPTR_LO, 0);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_WPTR_HI, 0);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_FENCE_ADDRESS_LO, lower_32_bits(fence));
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_FENCE_ADDRESS_HI, upper_32_bits(fence));
	return 0;
}

/* What a failed MES frame means for the ioctl that caused it. */
int vgpu_userq_mes_errno(u32 reason)
{
	switch (reason) {
	case VGPU_MES_ERR_TOO_MANY_QUEUES:
		return -ENOSPC;
	case VGPU_MES_ERR_BAD_MQD:
	case VGPU_MES_ERR_BAD_DOORBELL:
	case VGPU_MES_ERR_DUPLICATE_QUEUE:
	case VGPU_MES_ERR_BAD_FIELD:
	case VGPU_MES_ERR_BAD_PRIORITY:
	case VGPU_MES_ERR_BAD_ADDRESS:
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* ADD_QUEUE (mes_userq_map): the file's PASID, root and process context, the queue's gang. */
int vgpu_userq_map(struct vgpu_userq *q)
{
	struct vgpu_file *vf = q->vf;
	struct vgpu_dev *vdev = vf->vdev;
	struct vgpu_mes_add_queue in = {
		.pasid = vgpu_vm_pasid(vf->vm),
		.page_table_base = vgpu_vm_pd_addr(vf->vm),
		.va_end_page = VGPU_VM_END_PAGE,
		.vm_context_cntl = vgpu_vm_context_cntl(),
		.process_ctx = vf->userq.proc_ctx->gpu,
		.process_quantum = VGPU_USERQ_PROCESS_QUANTUM,
		.gang_ctx = q->gang->gpu,
		.gang_quantum = VGPU_USERQ_GANG_QUANTUM,
		.priority = q->mes_priority,
		.doorbell = q->doorbell,
		.mqd = q->mqd->gpu,
		.wptr = q->wptr_mc,
	};
	u32 reason = 0;
	int ret;

	ret = vgpu_mes_add_queue(vdev, &in, &reason, &q->mes_epoch);
	q->adds++;
	if (ret == -EIO) {
		q->last_reason = reason;
		drm_dbg_driver(&vdev->drm, "userq %u: ADD_QUEUE failed: %s\n", q->id,
			       vgpu_mes_err_name(reason));
		return vgpu_userq_mes_errno(reason);
	}
	if (ret)
		return ret;
	q->added = true;
	if (q->state != VGPU_USERQ_HUNG)
		q->state = VGPU_USERQ_MAPPED;
	return 0;
}

/*
 * REMOVE_QUEUE (mes_userq_unmap): the queue leaves its slot with its state saved in the MQD. A
 * queue MES holds hung (or that does not stop) is RESET first, its work discarded. A queue MES
 * does not know (it was never added, or MES restarted) is gone already.
 */
int vgpu_userq_unmap(struct vgpu_userq *q)
{
	struct vgpu_dev *vdev = q->vf->vdev;
	u32 reason = 0;
	int ret;

	if (!q->added)
		return 0;
	ret = vgpu_mes_remove_queue(vdev, q->doorbell, q->gang->gpu, &reason);
	q->removes++;
	if (ret == -EIO && (reason == VGPU_MES_ERR_QUEUE_HUNG ||
			    reason == VGPU_MES_ERR_PREEMPT_TIMEOUT)) {
		ret = vgpu_userq_reset(q);
		if (!ret)
			ret = vgpu_mes_remove_queue(vdev, q->doorbell, q->gang->gpu, &reason);
	}
	if (ret == -EIO && reason == VGPU_MES_ERR_NO_SUCH_QUEUE)
		ret = 0;
	if (ret == -EIO) {
		q->last_reason = reason;
		dev_warn_ratelimited(vdev->drm.dev, "userq %u (doorbell %#x): REMOVE_QUEUE failed: %s\n",
				     q->id, q->doorbell, vgpu_mes_err_name(reason));
	}
	if (ret)
		return ret;
	q->added = false;
	if (q->state == VGPU_USERQ_MAPPED)
		q->state = VGPU_USERQ_UNMAPPED;
	return ret;
}
