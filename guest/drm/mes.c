// SPDX-License-Identifier: GPL-2.0
/*
 * The MES API ring, its frames and amdgpu's submit protocol; bring-up and teardown (mes.h).
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/io-64-nonatomic-lo-hi.h>
#include <linux/jiffies.h>
#include <linux/log2.h>

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"
#include "mes_wb.h"

const char *vgpu_mes_err_name(u32 reason)
{
	static const char *const names[] = {
		[VGPU_MES_ERR_NONE] = "NONE",
		[VGPU_MES_ERR_BAD_HEADER] = "BAD_HEADER",
		[VGPU_MES_ERR_UNKNOWN_OPCODE] = "UNKNOWN_OPCODE",
		[VGPU_MES_ERR_NOT_INITIALIZED] = "NOT_INITIALIZED",
		[VGPU_MES_ERR_BAD_MASK] = "BAD_MASK",
		[VGPU_MES_ERR_BAD_ADDRESS] = "BAD_ADDRESS",
		[VGPU_MES_ERR_BAD_DOORBELL] = "BAD_DOORBELL",
		[VGPU_MES_ERR_DUPLICATE_QUEUE] = "DUPLICATE_QUEUE",
		[VGPU_MES_ERR_NO_SUCH_QUEUE] = "NO_SUCH_QUEUE",
		[VGPU_MES_ERR_QUEUE_HUNG] = "QUEUE_HUNG",
		[VGPU_MES_ERR_BAD_QUEUE_TYPE] = "BAD_QUEUE_TYPE",
		[VGPU_MES_ERR_BAD_MQD] = "BAD_MQD",
		[VGPU_MES_ERR_BAD_PRIORITY] = "BAD_PRIORITY",
		[VGPU_MES_ERR_BAD_FIELD] = "BAD_FIELD",
		[VGPU_MES_ERR_TOO_MANY_QUEUES] = "TOO_MANY_QUEUES",
		[VGPU_MES_ERR_PREEMPT_TIMEOUT] = "PREEMPT_TIMEOUT",
		[VGPU_MES_ERR_WAIT_TIMEOUT] = "WAIT_TIMEOUT",
		[VGPU_MES_ERR_REG_ACCESS] = "REG_ACCESS",
		[VGPU_MES_ERR_RING_CONFIG] = "RING_CONFIG",
		[VGPU_MES_ERR_BAD_WPTR] = "BAD_WPTR",
		[VGPU_MES_ERR_NOT_SUSPENDED] = "NOT_SUSPENDED",
		[VGPU_MES_ERR_BUSY] = "BUSY",
	};

	return reason < ARRAY_SIZE(names) && names[reason] ? names[reason] : "unknown";
}

const char *vgpu_mes_op_name(u32 op)
{
	static const char *const names[] = {
		[VGPU_MES_SCH_API_SET_HW_RSRC] = "SET_HW_RESOURCES",
		[VGPU_MES_SCH_API_ADD_QUEUE] = "ADD_QUEUE",
		[VGPU_MES_SCH_API_REMOVE_QUEUE] = "REMOVE_QUEUE",
		[VGPU_MES_SCH_API_SUSPEND] = "SUSPEND",
		[VGPU_MES_SCH_API_RESUME] = "RESUME",
		[VGPU_MES_SCH_API_RESET] = "RESET",
		[VGPU_MES_SCH_API_SET_LOG_BUFFER] = "SET_LOG_BUFFER",
		[VGPU_MES_SCH_API_CHANGE_GANG_PRIORITY] = "CHANGE_GANG_PRIORITY",
		[VGPU_MES_SCH_API_QUERY_SCHEDULER_STATUS] = "QUERY_SCHEDULER_STATUS",
		[VGPU_MES_SCH_API_MISC] = "MISC",
		[VGPU_MES_SCH_API_UPDATE_ROOT_PAGE_TABLE] = "UPDATE_ROOT_PAGE_TABLE",
	};

	return op < ARRAY_SIZE(names) && names[op] ? names[op] : "unknown opcode";
}

/* The dword of a frame's MES_API_STATUS, by opcode (v11 layout, pack(4)). */
static u32 vgpu_mes_status_dw(u32 op)
{
	switch (op) {
	case VGPU_MES_SCH_API_SET_HW_RSRC:
		return VGPU_MES_SET_HW_RSRC_DW_API_STATUS;
	case VGPU_MES_SCH_API_ADD_QUEUE:
		return VGPU_MES_ADD_QUEUE_DW_API_STATUS;
	case VGPU_MES_SCH_API_REMOVE_QUEUE:
		return VGPU_MES_REMOVE_QUEUE_DW_API_STATUS;
	case VGPU_MES_SCH_API_SUSPEND:
		return VGPU_MES_SUSPEND_DW_API_STATUS;
	case VGPU_MES_SCH_API_RESUME:
		return VGPU_MES_RESUME_DW_API_STATUS;
	case VGPU_MES_SCH_API_RESET:
		return VGPU_MES_RESET_DW_API_STATUS;
	case VGPU_MES_SCH_API_SET_LOG_BUFFER:
		return VGPU_MES_LOG_DW_API_STATUS;
	case VGPU_MES_SCH_API_CHANGE_GANG_PRIORITY:
		return VGPU_MES_CHANGE_PRIO_DW_API_STATUS;
	case VGPU_MES_SCH_API_QUERY_SCHEDULER_STATUS:
		return VGPU_MES_QUERY_DW_API_STATUS;
	case VGPU_MES_SCH_API_MISC:
		return VGPU_MES_MISC_DW_API_STATUS;
	case VGPU_MES_SCH_API_UPDATE_ROOT_PAGE_TABLE:
		return VGPU_MES_ROOT_PT_DW_API_STATUS;
	}
	return 2;
}

/* Starts a frame: 64 zero dwords and the header (scheduler type, opcode, 64 dwords). */
void vgpu_mes_frame(u32 *f, u32 opcode)
{
	memset(f, 0, VGPU_MES_FRAME_DW * sizeof(*f));
	f[0] = FIELD_PREP(VGPU_MES_API_HEADER_TYPE_MASK, VGPU_MES_API_TYPE_SCHEDULER) |
	       FIELD_PREP(VGPU_MES_API_HEADER_OPCODE_MASK, opcode) |
	       FIELD_PREP(VGPU_MES_API_HEADER_DWSIZE_MASK, VGPU_MES_FRAME_DW);
}

/* A u64 field at dword dw (pack(4): two dwords, low first). */
void vgpu_mes_put64(u32 *f, u32 dw, u64 v)
{
	f[dw] = lower_32_bits(v);
	f[dw + 1] = upper_32_bits(v);
}

/* Polls the ring fence until it reaches seq or ms pass. */
static bool vgpu_mes_fence_wait(struct vgpu_mes *m, u64 seq, unsigned int ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(ms);

	for (;;) {
		bool done = vgpu_kbo_rd64(m->wb, VGPU_MES_WB_FENCE) >= seq;

		if (done || time_after(jiffies, deadline))
			return done;
		usleep_range(10, 30);
	}
}

static void vgpu_mes_put_frame(struct vgpu_mes *m, const u32 *f)
{
	__le32 *ring = m->ring->cpu;
	u32 at = m->wptr & (m->size - 1);
	unsigned int i;

	for (i = 0; i < VGPU_MES_FRAME_DW; i++)
		ring[at + i] = cpu_to_le32(f[i]);
	m->wptr += VGPU_MES_FRAME_DW;
}

/*
 * amdgpu's mes_v11_0_submit_pkt_and_poll_completion (see mes.h), mes.lock held. A frame that
 * failed: -EIO and *reason (if given) its MES_ERR_*.
 */
int vgpu_mes_submit_locked(struct vgpu_dev *vdev, u32 *f, u32 *reason)
{
	struct vgpu_mes *m = &vdev->mes;
	u32 op = FIELD_GET(VGPU_MES_API_HEADER_OPCODE_MASK, f[0]);
	u32 sd = vgpu_mes_status_dw(op);
	u32 slot = VGPU_MES_WB_STATUS + 8 * (m->nstatus++ % VGPU_MES_WB_STATUS_SLOTS);
	u32 frames = m->size / VGPU_MES_FRAME_DW, le, r;
	u32 q[VGPU_MES_FRAME_DW];

	if (reason)
		*reason = 0;
	if (!m->running)
		return -ENODEV;
	/* Room for two frames: at most frames/2 - 1 submissions in flight (here: one). */
	if (m->seq + 2 > frames / 2 &&
	    !vgpu_mes_fence_wait(m, m->seq + 2 - frames / 2, VGPU_MES_TIMEOUT_MS)) {
		m->failures++;
		vgpu_mes_reset_locked(vdev, op);
		return -ETIMEDOUT;
	}
	vgpu_kbo_wr64(m->wb, slot, 0);
	vgpu_mes_put64(f, sd + VGPU_MES_API_STATUS_FENCE_ADDR, m->wb->gpu + slot);
	vgpu_mes_put64(f, sd + VGPU_MES_API_STATUS_FENCE_VALUE, 1);
	vgpu_mes_frame(q, VGPU_MES_SCH_API_QUERY_SCHEDULER_STATUS);
	vgpu_mes_put64(q, VGPU_MES_QUERY_DW_API_STATUS + VGPU_MES_API_STATUS_FENCE_ADDR,
		       m->wb->gpu + VGPU_MES_WB_FENCE);
	vgpu_mes_put64(q, VGPU_MES_QUERY_DW_API_STATUS + VGPU_MES_API_STATUS_FENCE_VALUE,
		       ++m->seq);
	vgpu_mes_put_frame(m, f);
	vgpu_mes_put_frame(m, q);
	m->frames++;
	/* The frames are in memory before the scheduler hears of them. */
	wmb();
	writeq(m->wptr, vdev->db + VGPU_MES_DB_RING * 4);

	if (!vgpu_mes_fence_wait(m, m->seq, VGPU_MES_TIMEOUT_MS)) {
		drm_err_ratelimited(&vdev->drm, "MES failed to respond to %s in %u ms (MES_STATUS %#x)\n",
				    vgpu_mes_op_name(op), VGPU_MES_TIMEOUT_MS,
				    vgpu_rd(vdev, VGPU_REG_MES_STATUS));
		m->failures++;
		/* amdgpu's "MES failed to respond": reset the scheduler (mes_reset.c). */
		vgpu_mes_reset_locked(vdev, op);
		return -ETIMEDOUT;
	}
	/* The ring fence is written after the frame's own status. */
	rmb();
	if (vgpu_kbo_rd64(m->wb, slot))
		return 0;
	le = vgpu_rd(vdev, VGPU_REG_MES_LAST_ERROR);
	r = FIELD_GET(VGPU_REG_MES_LAST_ERROR__REASON_MASK, le);
	m->failures++;
	m->last_reason = r;
	m->last_op = op;
	if (reason)
		*reason = r;
	return -EIO;
}

int vgpu_mes_submit(struct vgpu_dev *vdev, u32 *f, u32 *reason)
{
	int ret;

	mutex_lock(&vdev->mes.lock);
	ret = vgpu_mes_submit_locked(vdev, f, reason);
	mutex_unlock(&vdev->mes.lock);
	return ret;
}

static bool vgpu_mes_wait_state(struct vgpu_dev *vdev, u32 state)
{
	return vgpu_poll(vdev, VGPU_REG_MES_STATUS, VGPU_REG_MES_STATUS__STATE_MASK,
			 FIELD_PREP(VGPU_REG_MES_STATUS__STATE_MASK, state));
}

/* mes_v11_0_queue_init for the scheduler pipe: ring registers while inactive, then active. */
int vgpu_mes_ring_start(struct vgpu_dev *vdev)
{
	struct vgpu_mes *m = &vdev->mes;

	vgpu_wr(vdev, VGPU_REG_MES_RING_ACTIVE, 0);
	if (!vgpu_mes_wait_state(vdev, VGPU_MES_STATE_OFF))
		return -EIO;
	vgpu_wr(vdev, VGPU_REG_MES_RING_DOORBELL, 0);
	/* A polled doorbell shows only changes: no stale value may equal a future wptr. */
	writeq(0, vdev->db + VGPU_MES_DB_RING * 4);
	m->wptr = 0;
	m->seq = 0;
	/* The ring fence starts again from 0 (after a reset it holds the old ring's). */
	vgpu_kbo_wr64(m->wb, VGPU_MES_WB_FENCE, 0);
	vgpu_wr64(vdev, VGPU_REG_MES_RING_BASE_LO, VGPU_REG_MES_RING_BASE_HI, m->ring->gpu);
	vgpu_wr(vdev, VGPU_REG_MES_RING_CONTROL,
		FIELD_PREP(VGPU_REG_MES_RING_CONTROL__QUEUE_SIZE_MASK, ilog2(m->size) - 1));
	vgpu_wr64(vdev, VGPU_REG_MES_RING_RPTR_REPORT_ADDR_LO,
		  VGPU_REG_MES_RING_RPTR_REPORT_ADDR_HI, m->wb->gpu + VGPU_MES_WB_RPTR);
	vgpu_wr(vdev, VGPU_REG_MES_RING_WPTR_LO, 0);
	vgpu_wr(vdev, VGPU_REG_MES_RING_WPTR_HI, 0);
	vgpu_wr(vdev, VGPU_REG_MES_RING_DOORBELL,
		FIELD_PREP(VGPU_REG_MES_RING_DOORBELL__OFFSET_MASK, VGPU_MES_DB_RING) |
		VGPU_REG_MES_RING_DOORBELL__EN_MASK);
	vgpu_wr(vdev, VGPU_REG_MES_CNTL, 0);
	vgpu_wr(vdev, VGPU_REG_MES_RING_ACTIVE, 1);
	if (!vgpu_mes_wait_state(vdev, VGPU_MES_STATE_RUNNING))
		return -EIO;
	m->running = true;
	return 0;
}

/*
 * SET_HW_RESOURCES: every VMID but 0 (GART) and the kernel queue's, every compute slot of
 * pipes 0 and 1 but the kernel queue's, no gfx slot, an aggregated doorbell per level and
 * amdgpu's 50 us wptr-shadow poll.
 */
int vgpu_mes_set_hw_resources(struct vgpu_dev *vdev)
{
	struct vgpu_mes *m = &vdev->mes;
	u32 f[VGPU_MES_FRAME_DW];
	unsigned int p, q, l;

	m->vmid_mask = GENMASK(VGPU_VM_CONTEXTS - 1, 1) & ~BIT(VGPU_KQ_VMID);
	m->nslots = 0;
	for (p = 0; p < min_t(u32, vdev->pipes, ARRAY_SIZE(m->compute_mask)); p++) {
		m->compute_mask[p] = 0;
		for (q = 0; q < min_t(u32, vdev->qpp, 8); q++) {
			unsigned int s = 1 + p * vdev->qpp + q;

			if (s < vdev->hqds && s != vdev->kq.slot) {
				m->compute_mask[p] |= BIT(q);
				m->nslots++;
			}
		}
	}
	vgpu_mes_frame(f, VGPU_MES_SCH_API_SET_HW_RSRC);
	f[VGPU_MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB] = m->vmid_mask;
	for (p = 0; p < ARRAY_SIZE(m->compute_mask); p++)
		f[VGPU_MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK + p] = m->compute_mask[p];
	f[VGPU_MES_SET_HW_RSRC_DW_GFX_HQD_MASK] = 0;
	for (l = 0; l < VGPU_MES_PRIORITY_LEVELS; l++)
		f[VGPU_MES_SET_HW_RSRC_DW_AGGREGATED_DOORBELLS + l] = VGPU_MES_DB_AGG(l);
	vgpu_mes_put64(f, VGPU_MES_SET_HW_RSRC_DW_G_SCH_CTX_GPU_MC_PTR, m->sch_ctx->gpu);
	vgpu_mes_put64(f, VGPU_MES_SET_HW_RSRC_DW_QUERY_STATUS_FENCE_GPU_MC_PTR,
		       m->wb->gpu + VGPU_MES_WB_QUERY);
	f[VGPU_MES_SET_HW_RSRC_DW_OVERSUBSCRIPTION_TIMER] = 50;
	return vgpu_mes_submit_locked(vdev, f, NULL);
}

int vgpu_mes_set_log(struct vgpu_dev *vdev)
{
	struct vgpu_mes *m = &vdev->mes;
	u32 f[VGPU_MES_FRAME_DW];

	vgpu_mes_frame(f, VGPU_MES_SCH_API_SET_LOG_BUFFER);
	vgpu_mes_put64(f, VGPU_MES_LOG_DW_BUFFER_ADDR, m->log->gpu);
	f[VGPU_MES_LOG_DW_NUMBER_OF_ENTRIES] = VGPU_MES_LOG_ENTRIES;
	return vgpu_mes_submit_locked(vdev, f, NULL);
}

int vgpu_mes_query_sched(struct vgpu_dev *vdev)
{
	u32 f[VGPU_MES_FRAME_DW];

	vgpu_mes_frame(f, VGPU_MES_SCH_API_QUERY_SCHEDULER_STATUS);
	return vgpu_mes_submit_locked(vdev, f, NULL);
}

static void vgpu_mes_free(struct vgpu_dev *vdev)
{
	struct vgpu_mes *m = &vdev->mes;

	vgpu_kbo_free(vdev, m->sch_ctx);
	vgpu_kbo_free(vdev, m->log);
	vgpu_kbo_free(vdev, m->wb);
	vgpu_kbo_free(vdev, m->ring);
	m->ring = m->wb = m->log = m->sch_ctx = NULL;
}

/* Stops the scheduler: its queues stop, its slots return to the kernel. */
void vgpu_mes_stop(struct vgpu_dev *vdev)
{
	struct vgpu_mes *m = &vdev->mes;

	vgpu_wr(vdev, VGPU_REG_MES_RING_ACTIVE, 0);
	m->running = false;
	if (!vgpu_mes_wait_state(vdev, VGPU_MES_STATE_OFF)) {
		drm_err(&vdev->drm, "MES did not stop: the device is wedged\n");
		vdev->wedged = true;
	}
	vgpu_wr(vdev, VGPU_REG_MES_RING_DOORBELL, 0);
}

/* amdgpu's order (mes_v11_0_hw_init): ring, SET_HW_RESOURCES, the log, a status query. */
int vgpu_mes_init(struct vgpu_dev *vdev)
{
	struct vgpu_mes *m = &vdev->mes;
	int ret;

	mutex_init(&m->lock);
	vgpu_mes_reset_init(vdev);
	m->size = VGPU_MES_RING_BYTES / 4;
	m->ring = vgpu_kbo_alloc(vdev, VGPU_MES_RING_BYTES, VGPU_KBO_GART);
	m->wb = vgpu_kbo_alloc(vdev, SZ_4K, VGPU_KBO_GART);
	m->log = vgpu_kbo_alloc(vdev, (VGPU_MES_LOG_ENTRIES + 1) * VGPU_MES_EVENT_BYTES,
				VGPU_KBO_GART);
	m->sch_ctx = vgpu_kbo_alloc(vdev, SZ_4K, VGPU_KBO_GART);
	if (!m->ring || !m->wb || !m->log || !m->sch_ctx) {
		vgpu_mes_free(vdev);
		return -ENOMEM;
	}
	mutex_lock(&m->lock);
	ret = vgpu_mes_ring_start(vdev);
	if (!ret)
		ret = vgpu_mes_set_hw_resources(vdev);
	if (!ret)
		ret = vgpu_mes_set_log(vdev);
	if (!ret)
		ret = vgpu_mes_query_sched(vdev);
	mutex_unlock(&m->lock);
	if (ret) {
		drm_err(&vdev->drm, "MES bring-up failed: %d (last error %s, MES_STATUS %#x)\n",
			ret, vgpu_mes_err_name(m->last_reason), vgpu_rd(vdev, VGPU_REG_MES_STATUS));
		vgpu_mes_stop(vdev);
		vgpu_mes_free(vdev);
		return ret;
	}
	return 0;
}

void vgpu_mes_fini(struct vgpu_dev *vdev)
{
	if (!vdev->mes.ring)
		return;
	vgpu_mes_reset_fini(vdev);
	vgpu_mes_stop(vdev);
	vgpu_mes_free(vdev);
}
