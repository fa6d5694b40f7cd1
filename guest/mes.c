// SPDX-License-Identifier: GPL-2.0
/*
 * The MES API ring, its frames and amdgpu's submit protocol (see mes.h).
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/io-64-nonatomic-lo-hi.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/math64.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "mes.h"

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
		[VGPU_MES_SCH_API_SET_SCHEDULING_CONFIG] = "SET_SCHEDULING_CONFIG",
		[VGPU_MES_SCH_API_ADD_QUEUE] = "ADD_QUEUE",
		[VGPU_MES_SCH_API_REMOVE_QUEUE] = "REMOVE_QUEUE",
		[VGPU_MES_SCH_API_PERFORM_YIELD] = "PERFORM_YIELD",
		[VGPU_MES_SCH_API_SET_GANG_PRIORITY_LEVEL] = "SET_GANG_PRIORITY_LEVEL",
		[VGPU_MES_SCH_API_SUSPEND] = "SUSPEND",
		[VGPU_MES_SCH_API_RESUME] = "RESUME",
		[VGPU_MES_SCH_API_RESET] = "RESET",
		[VGPU_MES_SCH_API_SET_LOG_BUFFER] = "SET_LOG_BUFFER",
		[VGPU_MES_SCH_API_CHANGE_GANG_PRIORITY] = "CHANGE_GANG_PRIORITY",
		[VGPU_MES_SCH_API_QUERY_SCHEDULER_STATUS] = "QUERY_SCHEDULER_STATUS",
		[VGPU_MES_SCH_API_PROGRAM_GDS] = "PROGRAM_GDS",
		[VGPU_MES_SCH_API_SET_DEBUG_VMID] = "SET_DEBUG_VMID",
		[VGPU_MES_SCH_API_MISC] = "MISC",
		[VGPU_MES_SCH_API_UPDATE_ROOT_PAGE_TABLE] = "UPDATE_ROOT_PAGE_TABLE",
		[VGPU_MES_SCH_API_AMD_LOG] = "AMD_LOG",
		[VGPU_MES_SCH_API_SET_HW_RSRC_1] = "SET_HW_RSRC_1",
	};

	return op < ARRAY_SIZE(names) && names[op] ? names[op] : "unknown opcode";
}

/* The dword of a frame's MES_API_STATUS, by opcode (v11 layout, pack(4)). */
static u32 vgpu_mes_status_dw(u32 op)
{
	switch (op) {
	case VGPU_MES_SCH_API_SET_HW_RSRC:
		return VGPU_MES_SET_HW_RSRC_DW_API_STATUS;
	case VGPU_MES_SCH_API_SET_SCHEDULING_CONFIG:
		return VGPU_MES_SCHED_CFG_DW_API_STATUS;
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
	case VGPU_MES_SCH_API_SET_GANG_PRIORITY_LEVEL:
		return VGPU_MES_CHANGE_PRIO_DW_API_STATUS;
	case VGPU_MES_SCH_API_QUERY_SCHEDULER_STATUS:
		return VGPU_MES_QUERY_DW_API_STATUS;
	case VGPU_MES_SCH_API_MISC:
		return VGPU_MES_MISC_DW_API_STATUS;
	case VGPU_MES_SCH_API_UPDATE_ROOT_PAGE_TABLE:
		return VGPU_MES_ROOT_PT_DW_API_STATUS;
	}
	/* PERFORM_YIELD, SET_DEBUG_VMID, SET_HW_RSRC_1 and the unknown ones: right after the header. */
	return 2;
}

/* Starts a frame: 64 zero dwords and the header (scheduler type, opcode, 64 dwords). */
void vgpu_mes_frame(u32 *f, u32 opcode)
{
	memset(f, 0, VT_MES_FRAME_DW * sizeof(*f));
	f[0] = FIELD_PREP(VGPU_MES_API_HEADER_TYPE_MASK, VGPU_MES_API_TYPE_SCHEDULER) |
	       FIELD_PREP(VGPU_MES_API_HEADER_OPCODE_MASK, opcode) |
	       FIELD_PREP(VGPU_MES_API_HEADER_DWSIZE_MASK, VT_MES_FRAME_DW);
}

/* A u64 field at dword dw (pack(4): two dwords, low first). */
void vgpu_mes_put64(u32 *f, u32 dw, u64 v)
{
	f[dw] = lower_32_bits(v);
	f[dw + 1] = upper_32_bits(v);
}

u64 vgpu_mes_wb64(struct vgpu_mes *m, u32 off)
{
	return le64_to_cpu(READ_ONCE(*(__le64 *)((u8 *)m->wb->cpu + off)));
}

static void vgpu_mes_wb64_wr(struct vgpu_mes *m, u32 off, u64 v)
{
	WRITE_ONCE(*(__le64 *)((u8 *)m->wb->cpu + off), cpu_to_le64(v));
}

/* Everything the registers say about the scheduler, for failure reasons. */
void vgpu_mes_describe(struct vgpu_mes *m, char *buf, size_t len)
{
	struct vgpu *vg = m->vg;
	u32 st = vgpu_rd(vg, VGPU_REG_MES_STATUS);
	u32 le = vgpu_rd(vg, VGPU_REG_MES_LAST_ERROR);

	snprintf(buf, len,
		 "MES_STATUS %#x (state %u, hw %u, error %s), RPTR %u, wptr %llu, ring fence %llu of %llu, FRAMES %u, FRAME_ERRORS %u, LAST_ERROR %s op %u sub %u, QUEUES %u MAPPED %u HUNG %u MAPS %u UNMAPS %u",
		 st, (u32)FIELD_GET(VGPU_REG_MES_STATUS__STATE_MASK, st),
		 (u32)FIELD_GET(VGPU_REG_MES_STATUS__HW_RESOURCES_MASK, st),
		 vgpu_mes_err_name(FIELD_GET(VGPU_REG_MES_STATUS__ERROR_MASK, st)),
		 vgpu_rd(vg, VGPU_REG_MES_RING_RPTR), m->wptr, vgpu_mes_wb64(m, VT_MES_WB_FENCE),
		 m->seq, vgpu_rd(vg, VGPU_REG_MES_FRAMES), vgpu_rd(vg, VGPU_REG_MES_FRAME_ERRORS),
		 vgpu_mes_err_name(FIELD_GET(VGPU_REG_MES_LAST_ERROR__REASON_MASK, le)),
		 (u32)FIELD_GET(VGPU_REG_MES_LAST_ERROR__OPCODE_MASK, le),
		 (u32)FIELD_GET(VGPU_REG_MES_LAST_ERROR__SUB_MASK, le),
		 vgpu_rd(vg, VGPU_REG_MES_QUEUES), vgpu_rd(vg, VGPU_REG_MES_MAPPED),
		 vgpu_rd(vg, VGPU_REG_MES_HUNG), vgpu_rd(vg, VGPU_REG_MES_MAPS),
		 vgpu_rd(vg, VGPU_REG_MES_UNMAPS));
}

/* Tells MES about the frames written: the 64-bit doorbell, or MES_RING_WPTR (LO then HI). */
static void vgpu_mes_kick(struct vgpu_mes *m)
{
	/* The frames are in memory before the scheduler hears of them. */
	wmb();
	if (m->mmio) {
		vgpu_wr(m->vg, VGPU_REG_MES_RING_WPTR_LO, lower_32_bits(m->wptr));
		vgpu_wr(m->vg, VGPU_REG_MES_RING_WPTR_HI, upper_32_bits(m->wptr));
	} else {
		writeq(m->wptr, m->vg->db + VT_MES_DB_RING * 4);
	}
}

/* Polls the ring fence until it reaches seq or ms pass. */
static bool vgpu_mes_fence_wait(struct vgpu_mes *m, u64 seq, unsigned int ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(ms);

	for (;;) {
		bool done = vgpu_mes_wb64(m, VT_MES_WB_FENCE) >= seq;

		if (done || time_after(jiffies, deadline))
			return done;
		usleep_range(10, 30);
	}
}

/*
 * amdgpu's mes_v11_0_submit_pkt_and_poll_completion: the frame's api_status points at a zeroed
 * slot with value 1, a QUERY_SCHEDULER_STATUS frame behind it carries the ring fence (++seq);
 * wait for the ring fence, then the slot tells success. On failure MES_LAST_ERROR names the
 * reason (m->last_reason, and t->err says it all): -EIO. No answer at all: -ETIMEDOUT.
 */
int vgpu_mes_submit(struct vt_case *t, struct vgpu_mes *m, u32 *f)
{
	return vgpu_mes_submit_skewed(t, m, f, 0);
}

/*
 * The same with the frame's api_status fence address moved by skew bytes: a misaligned fence
 * for the cases (0: vgpu_mes_submit).
 */
int vgpu_mes_submit_skewed(struct vt_case *t, struct vgpu_mes *m, u32 *f, u32 skew)
{
	u32 op = FIELD_GET(VGPU_MES_API_HEADER_OPCODE_MASK, f[0]);
	u32 sd = vgpu_mes_status_dw(op);
	u32 slot = VT_MES_WB_STATUS + 8 * (m->nstatus++ % VT_MES_STATUS_SLOTS);
	u32 frames = m->size / VT_MES_FRAME_DW, at, le, reason;
	__le32 *ring = m->ring->cpu;
	u32 q[VT_MES_FRAME_DW];
	char st[320];
	unsigned int i;

	if (!m->running)
		return vt_reason(t, -ENODEV, "%s: MES is not running", vgpu_mes_op_name(op));
	/* Room for two frames: at most frames/2 - 1 submissions may be in flight. */
	if (m->seq + 2 > frames / 2 &&
	    !vgpu_mes_fence_wait(m, m->seq + 2 - frames / 2, vt_mes_ms())) {
		vgpu_mes_describe(m, st, sizeof(st));
		return vt_reason(t, -ETIMEDOUT, "%s: no room on the MES ring (%s)",
				 vgpu_mes_op_name(op), st);
	}
	vgpu_mes_wb64_wr(m, slot, 0);
	vgpu_mes_put64(f, sd + VGPU_MES_API_STATUS_FENCE_ADDR, m->wb->gpu + slot + skew);
	vgpu_mes_put64(f, sd + VGPU_MES_API_STATUS_FENCE_VALUE, 1);
	vgpu_mes_frame(q, VGPU_MES_SCH_API_QUERY_SCHEDULER_STATUS);
	vgpu_mes_put64(q, VGPU_MES_QUERY_DW_API_STATUS + VGPU_MES_API_STATUS_FENCE_ADDR,
		       m->wb->gpu + VT_MES_WB_FENCE);
	vgpu_mes_put64(q, VGPU_MES_QUERY_DW_API_STATUS + VGPU_MES_API_STATUS_FENCE_VALUE,
		       ++m->seq);

	at = m->wptr & (m->size - 1);
	for (i = 0; i < VT_MES_FRAME_DW; i++)
		ring[at + i] = cpu_to_le32(f[i]);
	m->wptr += VT_MES_FRAME_DW;
	at = m->wptr & (m->size - 1);
	for (i = 0; i < VT_MES_FRAME_DW; i++)
		ring[at + i] = cpu_to_le32(q[i]);
	m->wptr += VT_MES_FRAME_DW;
	vgpu_mes_kick(m);

	if (!vgpu_mes_fence_wait(m, m->seq, vt_mes_ms())) {
		vgpu_mes_describe(m, st, sizeof(st));
		m->last_reason = VT_MES_ANY;
		return vt_reason(t, -ETIMEDOUT, "MES failed to respond to %s in %u ms (%s)",
				 vgpu_mes_op_name(op), vt_mes_ms(), st);
	}
	/* The ring fence is written after the frame's own status. */
	rmb();
	if (vgpu_mes_wb64(m, slot)) {
		m->last_reason = 0;
		return 0;
	}
	le = vgpu_rd(m->vg, VGPU_REG_MES_LAST_ERROR);
	reason = FIELD_GET(VGPU_REG_MES_LAST_ERROR__REASON_MASK, le);
	m->last_reason = reason ?: VT_MES_ANY;
	return vt_reason(t, -EIO,
			 "%s failed: MES_LAST_ERROR %s (%u), opcode %u sub %u, at ring dword %u; FRAME_ERRORS %u",
			 vgpu_mes_op_name(op), vgpu_mes_err_name(reason), reason,
			 (u32)FIELD_GET(VGPU_REG_MES_LAST_ERROR__OPCODE_MASK, le),
			 (u32)FIELD_GET(VGPU_REG_MES_LAST_ERROR__SUB_MASK, le),
			 vgpu_rd(m->vg, VGPU_REG_MES_LAST_ERROR_RPTR),
			 vgpu_rd(m->vg, VGPU_REG_MES_FRAME_ERRORS));
}

/* All compute slots of pipes 0 and 1 (those SET_HW_RESOURCES can name), no gfx slot. */
void vgpu_mes_hw_default(struct vgpu_cp *cp, struct vgpu_mes_hw *hw)
{
	unsigned int p, l;

	memset(hw, 0, sizeof(*hw));
	hw->vmid_mask = GENMASK(VGPU_VM_CONTEXTS - 1, 1);
	for (p = 0; p < min_t(u32, cp->pipes, ARRAY_SIZE(hw->compute_mask)); p++)
		hw->compute_mask[p] = GENMASK(min_t(u32, cp->qpp, 8) - 1, 0);
	for (l = 0; l < VGPU_MES_PRIORITY_LEVELS; l++)
		hw->agg[l] = VT_MES_DB_AGG(l);
	hw->oversub_us = 50;	/* amdgpu's */
}

struct vgpu_mes *vgpu_mes_alloc(struct vt_case *t, struct vgpu_cp *cp)
{
	struct vgpu_mes *m = kzalloc(sizeof(*m), GFP_KERNEL);

	if (!m) {
		vt_reason(t, -ENOMEM, "out of memory");
		return NULL;
	}
	m->cp = cp;
	m->vg = cp->vg;
	m->size = VT_MES_RING_BYTES / 4;
	m->doorbells = 2 * vgpu_rd(cp->vg, VGPU_REG_ID_DOORBELL_COUNT);
	m->ring = vgpu_bo_alloc(t, cp, VT_MES_RING_BYTES, false);
	m->wb = m->ring ? vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false) : NULL;
	m->log = m->wb ? vgpu_bo_alloc(t, cp, (VT_MES_LOG_ENTRIES + 1) * VGPU_MES_EVENT_BYTES,
				       false) : NULL;
	m->sch_ctx = m->log ? vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false) : NULL;
	if (!m->sch_ctx) {
		vgpu_mes_free(m);
		return NULL;
	}
	return m;
}

/* Waits until MES_STATUS.STATE reads state (or ms pass). */
static bool vgpu_mes_wait_state(struct vgpu_mes *m, u32 state, unsigned int ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(ms);

	for (;;) {
		u32 st = FIELD_GET(VGPU_REG_MES_STATUS__STATE_MASK,
				   vgpu_rd(m->vg, VGPU_REG_MES_STATUS));

		if (st == state || time_after(jiffies, deadline))
			return st == state;
		usleep_range(20, 50);
	}
}

/*
 * Brings the API ring up as mes_v11_0_queue_init does for the scheduler pipe: base, size, rptr
 * report, doorbell while inactive, then MES_RING_ACTIVE = 1; the scheduler then runs.
 */
int vgpu_mes_ring_start(struct vt_case *t, struct vgpu_mes *m)
{
	struct vgpu *vg = m->vg;
	char st[320];

	vgpu_wr(vg, VGPU_REG_MES_RING_ACTIVE, 0);
	m->running = false;
	if (!vgpu_mes_wait_state(m, VGPU_MES_STATE_OFF, timeout_ms)) {
		vgpu_mes_describe(m, st, sizeof(st));
		return vt_reason(t, -EIO, "MES_RING_ACTIVE = 0 did not stop the scheduler (%s)", st);
	}
	vgpu_wr(vg, VGPU_REG_MES_RING_DOORBELL, 0);
	/* A polled doorbell shows only changes: no stale value may equal a future wptr. */
	writeq(0, vg->db + VT_MES_DB_RING * 4);
	memset(m->ring->cpu, 0, m->ring->size);
	memset(m->wb->cpu, 0, m->wb->size);
	m->wptr = 0;
	m->seq = 0;
	vgpu_wr64(vg, VGPU_REG_MES_RING_BASE_LO, VGPU_REG_MES_RING_BASE_HI, m->ring->gpu);
	vgpu_wr(vg, VGPU_REG_MES_RING_CONTROL,
		FIELD_PREP(VGPU_REG_MES_RING_CONTROL__QUEUE_SIZE_MASK, ilog2(m->size) - 1));
	vgpu_wr64(vg, VGPU_REG_MES_RING_RPTR_REPORT_ADDR_LO, VGPU_REG_MES_RING_RPTR_REPORT_ADDR_HI,
		  m->wb->gpu + VT_MES_WB_RPTR);
	vgpu_wr(vg, VGPU_REG_MES_RING_WPTR_LO, 0);
	vgpu_wr(vg, VGPU_REG_MES_RING_WPTR_HI, 0);
	vgpu_wr(vg, VGPU_REG_MES_RING_DOORBELL,
		FIELD_PREP(VGPU_REG_MES_RING_DOORBELL__OFFSET_MASK, VT_MES_DB_RING) |
		VGPU_REG_MES_RING_DOORBELL__EN_MASK);
	vgpu_wr(vg, VGPU_REG_MES_CNTL, 0);
	vgpu_wr(vg, VGPU_REG_MES_RING_ACTIVE, 1);
	if (!vgpu_mes_wait_state(m, VGPU_MES_STATE_RUNNING, timeout_ms)) {
		vgpu_mes_describe(m, st, sizeof(st));
		return vt_reason(t, -EIO, "MES_RING_ACTIVE = 1: the scheduler is not RUNNING after %u ms (%s)",
				 timeout_ms, st);
	}
	m->running = true;
	return 0;
}

/*
 * Halts the scheduler (MES_RING_ACTIVE = 0): every queue it mapped stops and its slots return
 * to the kernel. Then the VMIDs it may have bound are disabled and invalidated, so that no
 * context walks the process tables the cases free next. A slot that stays active wedges the CP.
 */
int vgpu_mes_stop(struct vt_case *t, struct vgpu_mes *m)
{
	struct vgpu_cp *cp = m->cp;
	struct vgpu *vg = m->vg;
	u32 vmids = 0, v, p, q;
	char st[320];
	int ret = 0;

	vgpu_wr(vg, VGPU_REG_MES_RING_ACTIVE, 0);
	m->running = false;
	if (!vgpu_mes_wait_state(m, VGPU_MES_STATE_OFF, timeout_ms) ||
	    (vgpu_rd(vg, VGPU_REG_MES_RING_ACTIVE) & 1)) {
		vgpu_mes_describe(m, st, sizeof(st));
		cp->wedged = true;
		return vt_reason(t, -ETIMEDOUT, "MES_RING_ACTIVE = 0: the scheduler did not stop in %u ms (%s)",
				 timeout_ms, st);
	}
	for (p = 0; p < ARRAY_SIZE(m->hw.compute_mask); p++) {
		for (q = 0; q < 8; q++) {
			unsigned int s = 1 + 8 * p + q;

			if (!(m->hw.compute_mask[p] & BIT(q)) || s >= cp->hqds)
				continue;
			if (!vgpu_hqd_wait(vg, s, VGPU_REG_HQD_ACTIVE, 1, 0)) {
				cp->wedged = true;
				ret = vt_reason(t, -ETIMEDOUT,
						"slot %u still HQD_ACTIVE %u ms after MES_RING_ACTIVE = 0 (STATUS %#x)",
						s, timeout_ms, vgpu_hqd_rd(vg, s, VGPU_REG_HQD_STATUS));
			}
		}
	}
	vgpu_wr(vg, VGPU_REG_MES_RING_DOORBELL, 0);
	vgpu_wr(vg, VGPU_REG_MES_CNTL, 0);
	for (v = 1; v < VGPU_VM_CONTEXTS; v++) {
		if (!(m->hw.vmid_mask & BIT(v)) || cp->vms[v])
			continue;
		vgpu_wr(vg, VGPU_VM_CONTEXT_REG(v, VGPU_REG_VM_CONTEXT_CNTL), 0);
		vgpu_wr(vg, VGPU_REG_VM_PASID_LUT_0 + 4 * v, 0);
		vmids |= BIT(v);
	}
	if (vmids && vgpu_vm_flush_engine(ret ? NULL : t, cp, VT_VM_ENGINE, vmids) && !ret)
		ret = -ETIMEDOUT;
	return ret;
}

/* Frees what the ring used; the scheduler must be stopped (while wedged it is leaked). */
void vgpu_mes_free(struct vgpu_mes *m)
{
	if (!m)
		return;
	vgpu_bo_free(m->cp, m->sch_ctx);
	vgpu_bo_free(m->cp, m->log);
	vgpu_bo_free(m->cp, m->wb);
	vgpu_bo_free(m->cp, m->ring);
	kfree(m);
}

/*
 * amdgpu's bring-up order (mes_v11_0_hw_init): the ring, SET_HW_RESOURCES (hw, or the default),
 * then vgpu's event log, then QUERY_SCHEDULER_STATUS. NULL with t->err on failure.
 */
struct vgpu_mes *vgpu_mes_start(struct vt_case *t, struct vgpu_cp *cp,
				const struct vgpu_mes_hw *hw)
{
	struct vgpu_mes_hw def;
	struct vgpu_mes *m;
	char why[VT_WHY_LEN];

	if (!hw) {
		vgpu_mes_hw_default(cp, &def);
		hw = &def;
	}
	m = vgpu_mes_alloc(t, cp);
	if (!m)
		return NULL;
	if (vgpu_mes_ring_start(t, m) || vgpu_mes_set_hw_resources(t, m, hw) ||
	    vgpu_mes_set_log(t, m, VT_MES_LOG_ENTRIES) || vgpu_mes_query(t, m)) {
		strscpy(why, t->err, sizeof(why));
		vgpu_mes_end(NULL, m);
		vt_reason(t, -EIO, "MES bring-up: %s", why);
		return NULL;
	}
	return m;
}

/* Stops the scheduler and frees the ring. */
void vgpu_mes_end(struct vt_case *t, struct vgpu_mes *m)
{
	if (!m)
		return;
	if (m->running || (vgpu_rd(m->vg, VGPU_REG_MES_RING_ACTIVE) & 1))
		vgpu_mes_stop(t, m);
	vgpu_mes_free(m);
}

static u32 vgpu_mes_count_slots(const struct vgpu_mes_hw *hw, u32 hqds)
{
	u32 n = 0, p, q;

	for (p = 0; p < ARRAY_SIZE(hw->compute_mask); p++)
		for (q = 0; q < 8; q++)
			n += (hw->compute_mask[p] & BIT(q)) && 1 + 8 * p + q < hqds;
	return n;
}

int vgpu_mes_set_hw_resources(struct vt_case *t, struct vgpu_mes *m,
			      const struct vgpu_mes_hw *hw)
{
	u32 f[VT_MES_FRAME_DW];
	unsigned int i;
	int ret;

	vgpu_mes_frame(f, VGPU_MES_SCH_API_SET_HW_RSRC);
	f[VGPU_MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB] = hw->vmid_mask;
	for (i = 0; i < ARRAY_SIZE(hw->compute_mask); i++)
		f[VGPU_MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK + i] = hw->compute_mask[i];
	f[VGPU_MES_SET_HW_RSRC_DW_GFX_HQD_MASK] = hw->gfx_mask;
	for (i = 0; i < VGPU_MES_PRIORITY_LEVELS; i++)
		f[VGPU_MES_SET_HW_RSRC_DW_AGGREGATED_DOORBELLS + i] = hw->agg[i];
	vgpu_mes_put64(f, VGPU_MES_SET_HW_RSRC_DW_G_SCH_CTX_GPU_MC_PTR, m->sch_ctx->gpu);
	vgpu_mes_put64(f, VGPU_MES_SET_HW_RSRC_DW_QUERY_STATUS_FENCE_GPU_MC_PTR,
		       m->wb->gpu + VT_MES_WB_QUERY);
	/*
	 * FLAGS stay 0: amdgpu's disable_reset and disable_mes_log would turn off what these
	 * cases test, and vgpu's scheduler has no use for the hardware workarounds.
	 */
	f[VGPU_MES_SET_HW_RSRC_DW_OVERSUBSCRIPTION_TIMER] = hw->oversub_us;
	ret = vgpu_mes_submit(t, m, f);
	if (!ret) {
		m->hw = *hw;
		m->nslots = vgpu_mes_count_slots(hw, m->cp->hqds);
	}
	return ret;
}

/* Per-level arrays of 5 u64 (NULL: all 0, the defaults). */
int vgpu_mes_set_sched_config(struct vt_case *t, struct vgpu_mes *m, const u64 *grace_other,
			      const u64 *quantum, const u64 *idle_grace, u32 yield_percent)
{
	u32 f[VT_MES_FRAME_DW];
	unsigned int l;

	vgpu_mes_frame(f, VGPU_MES_SCH_API_SET_SCHEDULING_CONFIG);
	for (l = 0; l < VGPU_MES_PRIORITY_LEVELS; l++) {
		vgpu_mes_put64(f, VGPU_MES_SCHED_CFG_DW_GRACE_PERIOD_OTHER_LEVELS + 2 * l,
			       grace_other ? grace_other[l] : 0);
		vgpu_mes_put64(f, VGPU_MES_SCHED_CFG_DW_PROCESS_QUANTUM_FOR_LEVEL + 2 * l,
			       quantum ? quantum[l] : 0);
		vgpu_mes_put64(f, VGPU_MES_SCHED_CFG_DW_PROCESS_GRACE_PERIOD_SAME_LEVEL + 2 * l,
			       idle_grace ? idle_grace[l] : 0);
	}
	f[VGPU_MES_SCHED_CFG_DW_NORMAL_YIELD_PERCENT] = yield_percent;
	return vgpu_mes_submit(t, m, f);
}

/* The event log: a header record and entries records, zeroed first. */
int vgpu_mes_set_log(struct vt_case *t, struct vgpu_mes *m, u32 entries)
{
	u32 f[VT_MES_FRAME_DW];

	entries = min_t(u32, entries, VT_MES_LOG_ENTRIES);
	memset(m->log->cpu, 0, m->log->size);
	vgpu_mes_frame(f, VGPU_MES_SCH_API_SET_LOG_BUFFER);
	vgpu_mes_put64(f, VGPU_MES_LOG_DW_BUFFER_ADDR, m->log->gpu);
	f[VGPU_MES_LOG_DW_NUMBER_OF_ENTRIES] = entries;
	return vgpu_mes_submit(t, m, f);
}

/* QUERY_SCHEDULER_STATUS on its own: the barrier (its own status, then the ring fence). */
int vgpu_mes_query(struct vt_case *t, struct vgpu_mes *m)
{
	u32 f[VT_MES_FRAME_DW];

	vgpu_mes_frame(f, VGPU_MES_SCH_API_QUERY_SCHEDULER_STATUS);
	return vgpu_mes_submit(t, m, f);
}

static void vgpu_mes_misc(u32 *f, u32 op)
{
	vgpu_mes_frame(f, VGPU_MES_SCH_API_MISC);
	f[VGPU_MES_MISC_DW_OPCODE] = op;
}

/* MISC WRITE_REG of a register given by its byte offset in the register BAR. */
int vgpu_mes_misc_write_reg(struct vt_case *t, struct vgpu_mes *m, u32 reg, u32 val)
{
	u32 f[VT_MES_FRAME_DW];

	vgpu_mes_misc(f, VGPU_MES_MISC_OP_WRITE_REG);
	f[VGPU_MES_MISC_DW_REG_OFFSET] = reg / 4;
	f[VGPU_MES_MISC_DW_WRITE_REG_VALUE] = val;
	return vgpu_mes_submit(t, m, f);
}

/* MISC READ_REG (amdgpu_mes_rreg): MES writes the value into the write-back page. */
int vgpu_mes_misc_read_reg(struct vt_case *t, struct vgpu_mes *m, u32 reg, u32 *val)
{
	__le32 *buf = (__le32 *)((u8 *)m->wb->cpu + VT_MES_WB_READ);
	u32 f[VT_MES_FRAME_DW];
	int ret;

	WRITE_ONCE(*buf, cpu_to_le32(0xDEADBEEF));
	vgpu_mes_misc(f, VGPU_MES_MISC_OP_READ_REG);
	f[VGPU_MES_MISC_DW_REG_OFFSET] = reg / 4;
	vgpu_mes_put64(f, VGPU_MES_MISC_DW_READ_REG_BUFFER_ADDR, m->wb->gpu + VT_MES_WB_READ);
	ret = vgpu_mes_submit(t, m, f);
	*val = le32_to_cpu(READ_ONCE(*buf));
	return ret;
}

/* MISC WAIT_REG_MEM (op WAIT or WRITE_WAIT_WRITE) on registers given by byte offsets. */
int vgpu_mes_misc_wait(struct vt_case *t, struct vgpu_mes *m, u32 op, u32 ref, u32 mask,
		       u32 reg1, u32 reg2)
{
	u32 f[VT_MES_FRAME_DW];

	vgpu_mes_misc(f, VGPU_MES_MISC_OP_WAIT_REG_MEM);
	f[VGPU_MES_MISC_DW_WAIT_OP] = op;
	f[VGPU_MES_MISC_DW_WAIT_REFERENCE] = ref;
	f[VGPU_MES_MISC_DW_WAIT_MASK] = mask;
	f[VGPU_MES_MISC_DW_WAIT_REG_OFFSET1] = reg1 / 4;
	f[VGPU_MES_MISC_DW_WAIT_REG_OFFSET2] = reg2 / 4;
	return vgpu_mes_submit(t, m, f);
}

/* MISC NOTIFY_WORK_ON_UNMAPPED_QUEUE (amdgpu_mes_notify_unmap_queue). */
int vgpu_mes_misc_notify(struct vt_case *t, struct vgpu_mes *m)
{
	u32 f[VT_MES_FRAME_DW];

	vgpu_mes_misc(f, VGPU_MES_MISC_OP_NOTIFY_WORK_ON_UNMAPPED_QUEUE);
	return vgpu_mes_submit(t, m, f);
}

/* SUSPEND of one gang (its context address) or, with gang 0, of all; the fence is zeroed first. */
int vgpu_mes_suspend(struct vt_case *t, struct vgpu_mes *m, u64 gang, u32 fence_value)
{
	u32 f[VT_MES_FRAME_DW];

	WRITE_ONCE(*(__le32 *)((u8 *)m->wb->cpu + VT_MES_WB_SUSPEND), 0);
	vgpu_mes_frame(f, VGPU_MES_SCH_API_SUSPEND);
	f[VGPU_MES_SUSPEND_DW_FLAGS] = gang ? 0 : 1;
	vgpu_mes_put64(f, VGPU_MES_SUSPEND_DW_GANG_CONTEXT_ADDR, gang);
	vgpu_mes_put64(f, VGPU_MES_SUSPEND_DW_SUSPEND_FENCE_ADDR, m->wb->gpu + VT_MES_WB_SUSPEND);
	f[VGPU_MES_SUSPEND_DW_SUSPEND_FENCE_VALUE] = fence_value;
	return vgpu_mes_submit(t, m, f);
}

int vgpu_mes_resume(struct vt_case *t, struct vgpu_mes *m, u64 gang)
{
	u32 f[VT_MES_FRAME_DW];

	vgpu_mes_frame(f, VGPU_MES_SCH_API_RESUME);
	f[VGPU_MES_RESUME_DW_FLAGS] = gang ? 0 : 1;
	vgpu_mes_put64(f, VGPU_MES_RESUME_DW_GANG_CONTEXT_ADDR, gang);
	return vgpu_mes_submit(t, m, f);
}

/* RESET of one compute queue by doorbell (amdgpu_mes_reset_user_queue). */
int vgpu_mes_reset_queue(struct vt_case *t, struct vgpu_mes *m, u32 doorbell)
{
	u32 f[VT_MES_FRAME_DW];

	vgpu_mes_frame(f, VGPU_MES_SCH_API_RESET);
	f[VGPU_MES_RESET_DW_FLAGS] = VGPU_MES_RESET_FLAG_RESET_QUEUE_ONLY_MASK;
	f[VGPU_MES_RESET_DW_DOORBELL_OFFSET] = doorbell;
	f[VGPU_MES_RESET_DW_QUEUE_TYPE] = VGPU_MES_QUEUE_TYPE_COMPUTE;
	return vgpu_mes_submit(t, m, f);
}

/*
 * amdgpu_mes_detect_and_reset_hung_queues: the array pre-filled with MES_HUNG_DB_INVALID,
 * RESET with HANG_DETECT_ONLY or HANG_DETECT_THEN_RESET; hung gets the array (doorbells, then
 * slots: 2 x MES_RESET_DW_HUNG_DB_ENTRIES dwords).
 */
int vgpu_mes_detect_hung(struct vt_case *t, struct vgpu_mes *m, bool then_reset, u32 type,
			 u32 *hung)
{
	__le32 *arr = (__le32 *)((u8 *)m->wb->cpu + VT_MES_WB_HUNG);
	u32 f[VT_MES_FRAME_DW];
	unsigned int i;
	int ret;

	for (i = 0; i < 2 * VGPU_MES_RESET_DW_HUNG_DB_ENTRIES; i++)
		WRITE_ONCE(arr[i], cpu_to_le32(VGPU_MES_HUNG_DB_INVALID));
	vgpu_mes_frame(f, VGPU_MES_SCH_API_RESET);
	f[VGPU_MES_RESET_DW_FLAGS] = then_reset ? VGPU_MES_RESET_FLAG_HANG_DETECT_THEN_RESET_MASK :
						  VGPU_MES_RESET_FLAG_HANG_DETECT_ONLY_MASK;
	vgpu_mes_put64(f, VGPU_MES_RESET_DW_DOORBELL_OFFSET_ADDR, m->wb->gpu + VT_MES_WB_HUNG);
	f[VGPU_MES_RESET_DW_QUEUE_TYPE] = type;
	ret = vgpu_mes_submit(t, m, f);
	for (i = 0; i < 2 * VGPU_MES_RESET_DW_HUNG_DB_ENTRIES; i++)
		hung[i] = le32_to_cpu(READ_ONCE(arr[i]));
	return ret;
}

/* A write to the aggregated doorbell of a level: MES looks at every unmapped queue's wptr. */
void vgpu_mes_kick_aggregated(struct vgpu_mes *m, u32 level)
{
	/* The wptr shadows are in memory first; a polled doorbell must change to be seen. */
	wmb();
	writeq(++m->agg_kicks, m->vg->db + m->hw.agg[level % VGPU_MES_PRIORITY_LEVELS] * 4);
}

/* ---- the event log ---- */

static u32 vgpu_mes_log_dw(struct vgpu_mes *m, u32 rec, u32 dw)
{
	return vgpu_bo_rd(m->log, rec * VGPU_MES_EVENT_BYTES + 4 * dw);
}

/* Events written so far (the header record's DW0). */
u32 vgpu_mes_log_count(struct vgpu_mes *m)
{
	return vgpu_mes_log_dw(m, 0, 0);
}

/* Event n, if the log still holds it (and it is whole: its SEQ is n). */
bool vgpu_mes_log_get(struct vgpu_mes *m, u32 n, struct vgpu_mes_evt *e)
{
	u32 count = vgpu_mes_log_count(m), entries = vgpu_mes_log_dw(m, 0, 1), rec, k, v;

	if (!entries || entries > VT_MES_LOG_ENTRIES || n >= count || count - n > entries)
		return false;
	rec = 1 + n % entries;
	k = vgpu_mes_log_dw(m, rec, VGPU_MES_EVT_DW_KIND);
	v = vgpu_mes_log_dw(m, rec, VGPU_MES_EVT_DW_VMID_PASID);
	e->n = vgpu_mes_log_dw(m, rec, VGPU_MES_EVT_DW_SEQ);
	e->kind = FIELD_GET(VGPU_MES_EVT_KIND_MASK, k);
	e->reason = FIELD_GET(VGPU_MES_EVT_REASON_MASK, k);
	e->slot = FIELD_GET(VGPU_MES_EVT_SLOT_MASK, k);
	e->prio = FIELD_GET(VGPU_MES_EVT_PRIORITY_MASK, k);
	e->doorbell = vgpu_mes_log_dw(m, rec, VGPU_MES_EVT_DW_DOORBELL);
	e->time_ns = (u64)vgpu_mes_log_dw(m, rec, VGPU_MES_EVT_DW_TIME_HI) << 32 |
		     vgpu_mes_log_dw(m, rec, VGPU_MES_EVT_DW_TIME_LO);
	e->rptr = (u64)vgpu_mes_log_dw(m, rec, VGPU_MES_EVT_DW_RPTR_HI) << 32 |
		  vgpu_mes_log_dw(m, rec, VGPU_MES_EVT_DW_RPTR_LO);
	e->pasid = v & 0xffff;
	e->vmid = (v >> 16) & 0xf;
	return e->n == n;
}

static bool vgpu_mes_evt_is(const struct vgpu_mes_evt *e, u32 kind, u32 reason, u32 doorbell)
{
	return (kind == VT_MES_ANY || e->kind == kind) &&
	       (reason == VT_MES_ANY || e->reason == reason) &&
	       (doorbell == VT_MES_ANY || e->doorbell == doorbell);
}

/* The first event numbered from or later that matches (VT_MES_ANY matches anything). */
bool vgpu_mes_log_find(struct vgpu_mes *m, u32 from, u32 kind, u32 reason, u32 doorbell,
		       struct vgpu_mes_evt *e)
{
	u32 count = vgpu_mes_log_count(m), n;

	if (count > VT_MES_LOG_ENTRIES && from < count - VT_MES_LOG_ENTRIES)
		from = count - VT_MES_LOG_ENTRIES;
	for (n = from; n < count; n++) {
		if (vgpu_mes_log_get(m, n, e) && vgpu_mes_evt_is(e, kind, reason, doorbell))
			return true;
	}
	return false;
}

/* How many events numbered from or later (still in the log) match. */
u32 vgpu_mes_log_tally(struct vgpu_mes *m, u32 from, u32 kind, u32 reason, u32 doorbell)
{
	u32 count = vgpu_mes_log_count(m), n, hits = 0;
	struct vgpu_mes_evt e;

	if (count > VT_MES_LOG_ENTRIES && from < count - VT_MES_LOG_ENTRIES)
		from = count - VT_MES_LOG_ENTRIES;
	for (n = from; n < count; n++)
		hits += vgpu_mes_log_get(m, n, &e) && vgpu_mes_evt_is(&e, kind, reason, doorbell);
	return hits;
}

static const char *vgpu_mes_evt_name(u32 kind)
{
	static const char *const names[] = {
		[VGPU_MES_EVT_FRAME] = "FRAME", [VGPU_MES_EVT_FRAME_ERROR] = "FRAME_ERROR",
		[VGPU_MES_EVT_MAP] = "MAP", [VGPU_MES_EVT_UNMAP] = "UNMAP",
		[VGPU_MES_EVT_PREEMPT] = "PREEMPT", [VGPU_MES_EVT_HANG] = "HANG",
		[VGPU_MES_EVT_RESET] = "RESET", [VGPU_MES_EVT_DOORBELL] = "DOORBELL",
		[VGPU_MES_EVT_VMID] = "VMID",
	};

	return kind < ARRAY_SIZE(names) && names[kind] ? names[kind] : "?";
}

/* Prints the last count events as diagnostics (what a failure saw). */
void vgpu_mes_log_tail(struct vt_case *t, struct vgpu_mes *m, u32 count)
{
	u32 total = vgpu_mes_log_count(m), n;
	struct vgpu_mes_evt e;

	n = total > count ? total - count : 0;
	vt_note(t, "mes log: %u events, the last %u:", total, total - n);
	for (; n < total; n++) {
		if (!vgpu_mes_log_get(m, n, &e)) {
			vt_note(t, "mes log #%u: not in the log", n);
			continue;
		}
		vt_note(t, "mes log #%u %llu us %s reason %u slot %u prio %u db %#x rptr %llu vmid %u pasid %#x",
			n, div_u64(e.time_ns, 1000), vgpu_mes_evt_name(e.kind), e.reason, e.slot,
			e.prio, e.doorbell, e.rptr, e.vmid, e.pasid);
	}
}
