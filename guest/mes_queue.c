// SPDX-License-Identifier: GPL-2.0
/*
 * User queues under MES (see mes.h): processes, the v11 compute MQD, ADD_QUEUE and the frames
 * about one queue, submission as a user-mode driver does it, the per-queue status registers.
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/io-64-nonatomic-lo-hi.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "mes.h"

/* An empty process (PASID, tables, context page) whose queues fault by halting. */
struct vgpu_mes_proc *vgpu_mes_proc_create(struct vt_case *t, struct vgpu_mes *m, u16 pasid)
{
	struct vgpu_mes_proc *p = kzalloc(sizeof(*p), GFP_KERNEL);

	if (!p) {
		vt_reason(t, -ENOMEM, "out of memory");
		return NULL;
	}
	p->m = m;
	p->quantum = VGPU_MES_DEFAULT_PROCESS_QUANTUM;
	p->policy = VT_VM_HALT;
	p->vm = vgpu_vm_alloc(t, m->cp, pasid);
	p->ctx = p->vm ? vgpu_bo_alloc(t, m->cp, VT_GPU_PAGE, false) : NULL;
	if (!p->ctx) {
		vgpu_mes_proc_destroy(p);
		return NULL;
	}
	return p;
}

/* Frees a process whose queues MES no longer runs (removed, or MES stopped). */
void vgpu_mes_proc_destroy(struct vgpu_mes_proc *p)
{
	if (!p)
		return;
	vgpu_vm_free(p->vm);
	vgpu_bo_free(p->m->cp, p->ctx);
	kfree(p);
}

int vgpu_mes_proc_map(struct vt_case *t, struct vgpu_mes_proc *p, u64 va, struct vgpu_bo *bo,
		      u64 rights)
{
	return vgpu_vm_map_bo(t, p->vm, va, bo, rights);
}

/* The queue's buffers in an address space: ring, aux pages, the fence page read-only. */
int vgpu_mes_queue_map_into(struct vt_case *t, struct vgpu_mes_queue *q, struct vgpu_vm *vm)
{
	/* The CP fetches the ring as instructions: EXECUTABLE, as the IB pages of vm.c. */
	return vgpu_vm_map_bo(t, vm, q->va, q->ring, VT_VM_RWX) ?:
	       vgpu_vm_map_bo(t, vm, q->va + VT_MQ_AUX_OFF, q->aux, VT_VM_RW) ?:
	       (q->fence ? vgpu_vm_map_bo(t, vm, q->va + VT_MQ_FENCE_OFF, q->fence,
					  VGPU_PTE_READABLE_MASK) : 0);
}

static void vgpu_mqd_wr(struct vgpu_mes_queue *q, u32 dw, u32 v)
{
	vgpu_bo_wr(q->mqd, 4 * dw, v);
}

/*
 * The v11 compute MQD as gfx_v11_0_compute_mqd_init builds it for a user queue (the fields of
 * MES_MQD_DW_*): not active, VMID 0 (MES assigns one), ring, rptr report and wptr poll address
 * and EOP buffer in the process's address space, the doorbell, the quantum, the protected fence.
 */
static void vgpu_mes_mqd_init(struct vgpu_mes_queue *q)
{
	u64 ring = q->va >> 8, eop = (q->va + VT_MQ_AUX_OFF + VT_MQ_AUX_EOP) >> 8;
	u64 rptr = q->va + VT_MQ_AUX_OFF + VT_MQ_AUX_RPTR;
	u64 wptr = q->va + VT_MQ_AUX_OFF + VT_MQ_AUX_WPTR;
	u64 fence = q->fence ? q->va + VT_MQ_FENCE_OFF : 0;

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
	 * QUEUE_SIZE, RPTR_BLOCK_SIZE of a page (as amdgpu writes it, shifted), PRIV_STATE and
	 * KMD_QUEUE: amdgpu's value; vgpu reads QUEUE_SIZE (and NO_UPDATE_RPTR, clear here).
	 */
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_CONTROL,
		    FIELD_PREP(VGPU_REG_HQD_PQ_CONTROL__QUEUE_SIZE_MASK, ilog2(q->size) - 1) |
		    (ilog2(VT_GPU_PAGE / 4) - 1) << 8 | BIT(30) | BIT(31));
	/* MIN_IB_AVAIL_SIZE 3; no IB in flight. */
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_IB_CONTROL, 3 << 20);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_EOP_BASE_ADDR_LO, lower_32_bits(eop));
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_EOP_BASE_ADDR_HI, upper_32_bits(eop));
	/* EOP_SIZE: 2 KiB, as log2(dwords) - 1. */
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_EOP_CONTROL, ilog2(VT_MQ_EOP_BYTES / 4) - 1);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_DEQUEUE_REQUEST, 0);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_ERROR, 0);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_WPTR_LO, 0);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_CP_HQD_PQ_WPTR_HI, 0);
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_FENCE_ADDRESS_LO, lower_32_bits(fence));
	vgpu_mqd_wr(q, VGPU_MES_MQD_DW_FENCE_ADDRESS_HI, upper_32_bits(fence));
}

/* A queue of process p on doorbell (a dword index): buffers mapped, MQD built, not added. */
struct vgpu_mes_queue *vgpu_mes_queue_create(struct vt_case *t, struct vgpu_mes_proc *p,
					     u32 doorbell,
					     const struct vgpu_mes_queue_opts *o)
{
	struct vgpu_cp *cp = p->m->cp;
	struct vgpu_mes_queue *q;
	u32 bytes;

	q = kzalloc(sizeof(*q), GFP_KERNEL);
	if (!q) {
		vt_reason(t, -ENOMEM, "out of memory");
		return NULL;
	}
	if (o)
		q->o = *o;
	bytes = q->o.ring_bytes ?: VT_MQ_RING_BYTES;
	if (!is_power_of_2(bytes) || bytes < VT_RING_MIN_BYTES || bytes > SZ_512K) {
		vt_reason(t, -EINVAL, "a ring of %u bytes: want a power of two, %u to %u", bytes,
			  VT_RING_MIN_BYTES, SZ_512K);
		kfree(q);
		return NULL;
	}
	q->m = p->m;
	q->p = p;
	q->doorbell = doorbell;
	q->size = bytes / 4;
	q->va = VT_MQ_VA(p->nqueues++);
	q->mqd = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	q->gang = q->mqd ? vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false) : NULL;
	q->ring = q->gang ? vgpu_bo_alloc(t, cp, bytes, false) : NULL;
	q->aux = q->ring ? vgpu_bo_alloc(t, cp, VT_MQ_AUX_BYTES, false) : NULL;
	if (q->aux && q->o.protected_fence)
		q->fence = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	if (!q->aux || (q->o.protected_fence && !q->fence) ||
	    vgpu_mes_queue_map_into(t, q, p->vm)) {
		vgpu_mes_queue_destroy(q);
		return NULL;
	}
	vgpu_mes_mqd_init(q);
	return q;
}

/* Frees a queue MES no longer runs (removed, or MES stopped); while wedged it is leaked. */
void vgpu_mes_queue_destroy(struct vgpu_mes_queue *q)
{
	struct vgpu_cp *cp;

	if (!q)
		return;
	cp = q->m->cp;
	vgpu_bo_free(cp, q->fence);
	vgpu_bo_free(cp, q->aux);
	vgpu_bo_free(cp, q->ring);
	vgpu_bo_free(cp, q->gang);
	vgpu_bo_free(cp, q->mqd);
	kfree(q);
}

/* The ADD_QUEUE frame of q, as mes_userq_map fills mes_add_queue_input (API >= 2). */
void vgpu_mes_add_frame(struct vgpu_mes_queue *q, u32 *f)
{
	struct vgpu_mes_proc *p = q->p;

	vgpu_mes_frame(f, VGPU_MES_SCH_API_ADD_QUEUE);
	f[VGPU_MES_ADD_QUEUE_DW_PROCESS_ID] = p->vm->pasid;
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_PAGE_TABLE_BASE_ADDR, vgpu_vm_root_pde(p->vm));
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_PROCESS_VA_START, 0);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_PROCESS_VA_END, VT_VM_END_PAGE);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_PROCESS_QUANTUM, p->quantum);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ADDR, p->ctx->gpu);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_GANG_QUANTUM, q->o.gang_quantum);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_GANG_CONTEXT_ADDR, q->gang->gpu);
	f[VGPU_MES_ADD_QUEUE_DW_INPROCESS_GANG_PRIORITY] = VGPU_MES_PRIORITY_NORMAL;
	f[VGPU_MES_ADD_QUEUE_DW_GANG_GLOBAL_PRIORITY_LEVEL] = q->o.priority;
	f[VGPU_MES_ADD_QUEUE_DW_DOORBELL_OFFSET] = q->doorbell;
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_MQD_ADDR, q->mqd->gpu);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_WPTR_ADDR, q->aux->gpu + VT_MQ_AUX_WPTR);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_H_CONTEXT, p->ctx->gpu);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_H_QUEUE, q->mqd->gpu);
	f[VGPU_MES_ADD_QUEUE_DW_QUEUE_TYPE] = VGPU_MES_QUEUE_TYPE_COMPUTE;
	f[VGPU_MES_ADD_QUEUE_DW_VM_CONTEXT_CNTL] = vgpu_vm_cntl(p->policy);
	f[VGPU_MES_ADD_QUEUE_DW_FLAGS] = q->o.flags;
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_UNMAP_FLAG_ADDR, q->aux->gpu + VT_MQ_AUX_UNMAP);
}

int vgpu_mes_add(struct vt_case *t, struct vgpu_mes_queue *q)
{
	u32 f[VT_MES_FRAME_DW];
	int ret;

	vgpu_mes_add_frame(q, f);
	ret = vgpu_mes_submit(t, q->m, f);
	if (!ret)
		q->added = true;
	return ret;
}

/* REMOVE_QUEUE as mes_userq_unmap sends it. */
int vgpu_mes_remove(struct vt_case *t, struct vgpu_mes_queue *q)
{
	u32 f[VT_MES_FRAME_DW];
	int ret;

	vgpu_mes_frame(f, VGPU_MES_SCH_API_REMOVE_QUEUE);
	f[VGPU_MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET] = q->doorbell;
	vgpu_mes_put64(f, VGPU_MES_REMOVE_QUEUE_DW_GANG_CONTEXT_ADDR, q->gang->gpu);
	f[VGPU_MES_REMOVE_QUEUE_DW_QUEUE_TYPE] = VGPU_MES_QUEUE_TYPE_COMPUTE;
	ret = vgpu_mes_submit(t, q->m, f);
	if (!ret)
		q->added = false;
	return ret;
}

/* UPDATE_ROOT_PAGE_TABLE: the process's new root directory (a PDE). */
int vgpu_mes_update_root(struct vt_case *t, struct vgpu_mes_proc *p, u64 root_pde)
{
	u32 f[VT_MES_FRAME_DW];

	vgpu_mes_frame(f, VGPU_MES_SCH_API_UPDATE_ROOT_PAGE_TABLE);
	vgpu_mes_put64(f, VGPU_MES_ROOT_PT_DW_PAGE_TABLE_BASE_ADDR, root_pde);
	vgpu_mes_put64(f, VGPU_MES_ROOT_PT_DW_PROCESS_CONTEXT_ADDR, p->ctx->gpu);
	return vgpu_mes_submit(t, p->m, f);
}

/* CHANGE_GANG_PRIORITY: the queue's gang to another global level (its quantum kept). */
int vgpu_mes_change_priority(struct vt_case *t, struct vgpu_mes_queue *q, u32 level)
{
	u32 f[VT_MES_FRAME_DW];
	int ret;

	vgpu_mes_frame(f, VGPU_MES_SCH_API_CHANGE_GANG_PRIORITY);
	f[VGPU_MES_CHANGE_PRIO_DW_INPROCESS_GANG_PRIORITY] = VGPU_MES_PRIORITY_NORMAL;
	f[VGPU_MES_CHANGE_PRIO_DW_GANG_GLOBAL_PRIORITY_LEVEL] = level;
	vgpu_mes_put64(f, VGPU_MES_CHANGE_PRIO_DW_GANG_QUANTUM, q->o.gang_quantum);
	vgpu_mes_put64(f, VGPU_MES_CHANGE_PRIO_DW_GANG_CONTEXT_ADDR, q->gang->gpu);
	ret = vgpu_mes_submit(t, q->m, f);
	if (!ret)
		q->o.priority = level;
	return ret;
}

u32 vgpu_mq_rd(struct vgpu_bo *bo, u32 dw)
{
	return vgpu_bo_rd(bo, 4 * dw);
}

u32 vgpu_mq_mqd(struct vgpu_mes_queue *q, u32 dw)
{
	return vgpu_bo_rd(q->mqd, 4 * dw);
}

u64 vgpu_mq_mqd64(struct vgpu_mes_queue *q, u32 dw_lo)
{
	return (u64)vgpu_mq_mqd(q, dw_lo + 1) << 32 | vgpu_mq_mqd(q, dw_lo);
}

/* MES_QUERY_* of the queue with that doorbell. */
void vgpu_mes_status(struct vgpu_mes *m, u32 doorbell, struct vgpu_mq_status *s)
{
	struct vgpu *vg = m->vg;

	vgpu_wr(vg, VGPU_REG_MES_QUERY_DOORBELL, doorbell);
	s->st = vgpu_rd(vg, VGPU_REG_MES_QUERY_STATUS);
	s->maps = vgpu_rd(vg, VGPU_REG_MES_QUERY_MAPS);
	s->preempts = vgpu_rd(vg, VGPU_REG_MES_QUERY_PREEMPTS);
	s->rptr = vgpu_rd64(vg, VGPU_REG_MES_QUERY_RPTR_LO, VGPU_REG_MES_QUERY_RPTR_HI);
}

u32 vgpu_mq_aux(struct vgpu_mes_queue *q, u32 off)
{
	return vgpu_bo_rd(q->aux, off);
}

/* The process address of an aux offset. */
u64 vgpu_mq_aux_va(struct vgpu_mes_queue *q, u32 off)
{
	return q->va + VT_MQ_AUX_OFF + off;
}

/* One line about a queue: what MES says, what the driver wrote, what the MQD holds. */
void vgpu_mq_describe(struct vgpu_mes_queue *q, char *buf, size_t len)
{
	struct vgpu_mq_status s;

	vgpu_mes_status(q->m, q->doorbell, &s);
	snprintf(buf, len,
		 "db %#x: QUERY_STATUS %#x (known %u mapped %u slot %#x hung %u susp %u work %u prio %u vmid %u) maps %u preempts %u rptr %llu; wptr %llu, report %u, fence %u of %u; MQD active %u rptr %u wptr %llu error %u unmap %u",
		 q->doorbell, s.st, VT_MQ_ST(s.st, KNOWN), VT_MQ_ST(s.st, MAPPED),
		 VT_MQ_ST(s.st, SLOT), VT_MQ_ST(s.st, HUNG), VT_MQ_ST(s.st, SUSPENDED),
		 VT_MQ_ST(s.st, HAS_WORK), VT_MQ_ST(s.st, PRIORITY), VT_MQ_ST(s.st, VMID), s.maps,
		 s.preempts, s.rptr, q->wptr, vgpu_mq_aux(q, VT_MQ_AUX_RPTR), vgpu_mq_fence_read(q),
		 q->seq, vgpu_mq_mqd(q, VGPU_MES_MQD_DW_CP_HQD_ACTIVE),
		 vgpu_mq_mqd(q, VGPU_MES_MQD_DW_CP_HQD_PQ_RPTR),
		 vgpu_mq_mqd64(q, VGPU_MES_MQD_DW_CP_HQD_PQ_WPTR_LO),
		 vgpu_mq_mqd(q, VGPU_MES_MQD_DW_CP_HQD_ERROR),
		 vgpu_mq_mqd(q, VGPU_MES_MQD_DW_IS_QUEUE_UNMAP));
}

/* Polls the queue's MES_QUERY_STATUS until (st & mask) == want or ms pass; s gets the last read. */
bool vgpu_mq_wait_status(struct vgpu_mes_queue *q, u32 mask, u32 want, unsigned int ms,
			 struct vgpu_mq_status *s)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(ms);

	for (;;) {
		vgpu_mes_status(q->m, q->doorbell, s);
		if ((s->st & mask) == want)
			return true;
		if (time_after(jiffies, deadline))
			return false;
		usleep_range(50, 100);
	}
}

/* Extends the 32-bit rptr report (wrapping with the ring) to the monotonic count. */
static void vgpu_mq_update_rptr(struct vgpu_mes_queue *q)
{
	u32 rep = vgpu_mq_aux(q, VT_MQ_AUX_RPTR);
	u32 delta = (rep - (u32)q->rptr) & (q->size - 1);

	if (delta && delta <= q->wptr - q->rptr)
		q->rptr += delta;
}

/*
 * Waits (with a progress timeout) until ndw more dwords fit behind what is written. The ring is
 * never filled completely, so that a report equal to the wptr always means empty.
 */
int vgpu_mq_alloc(struct vt_case *t, struct vgpu_mes_queue *q, u32 ndw)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(vt_mes_ms());
	char st[320];
	u64 last = q->rptr;

	if (ndw >= q->size)
		return vt_reason(t, -EINVAL, "%u dwords do not fit a ring of %u", ndw, q->size);
	for (;;) {
		vgpu_mq_update_rptr(q);
		if (q->size - (q->wpos - q->rptr) > ndw)
			return 0;
		if (q->rptr != last) {
			last = q->rptr;
			deadline = jiffies + msecs_to_jiffies(vt_mes_ms());
		}
		if (time_after(jiffies, deadline)) {
			vgpu_mq_describe(q, st, sizeof(st));
			return vt_reason(t, -ETIMEDOUT, "no room for %u dwords: rptr stuck at %llu (%s)",
					 ndw, q->rptr, st);
		}
		usleep_range(20, 50);
	}
}

void vgpu_mq_put(struct vgpu_mes_queue *q, const u32 *p, unsigned int n)
{
	__le32 *ring = q->ring->cpu;

	while (n--)
		ring[q->wpos++ & (q->size - 1)] = cpu_to_le32(*p++);
}

/* A RELEASE_MEM of the next sequence number to the aux fence, in the process's VMID. */
u32 vgpu_mq_fence(struct vgpu_mes_queue *q, bool irq)
{
	u32 p[VT_FENCE_DW];

	q->seq++;
	vgpu_mq_put(q, p, pm4_release_mem(p, VT_GCR_FENCE, VGPU_PM4_RELEASE_MEM_DATA_SEL_32,
					  irq ? VGPU_PM4_RELEASE_MEM_INT_SEL_IRQ_CONFIRM :
						VGPU_PM4_RELEASE_MEM_INT_SEL_NONE,
					  vgpu_mq_aux_va(q, VT_MQ_AUX_FENCE), q->seq, q->seq));
	return q->seq;
}

/* Publishes what is written: the 64-bit wptr shadow (what MES reads for an unmapped queue). */
void vgpu_mq_commit(struct vgpu_mes_queue *q)
{
	q->wptr = q->wpos;
	/* The packets are in memory before the wptr that covers them. */
	wmb();
	WRITE_ONCE(*(__le64 *)((u8 *)q->aux->cpu + VT_MQ_AUX_WPTR), cpu_to_le64(q->wptr));
}

/* The queue's doorbell (64-bit), as a user-mode driver rings it after the shadow. */
void vgpu_mq_kick(struct vgpu_mes_queue *q)
{
	wmb();
	writeq(q->wptr, q->m->vg->db + (unsigned long)q->doorbell * 4);
}

/* Packets, a fence, the wptr shadow and (kick) the doorbell; *seq gets the fence's value. */
int vgpu_mq_submit(struct vt_case *t, struct vgpu_mes_queue *q, const u32 *p, unsigned int n,
		   bool irq, bool kick, u32 *seq)
{
	int ret = vgpu_mq_alloc(t, q, n + VT_FENCE_DW);

	if (ret)
		return ret;
	vgpu_mq_put(q, p, n);
	*seq = vgpu_mq_fence(q, irq);
	vgpu_mq_commit(q);
	if (kick)
		vgpu_mq_kick(q);
	return 0;
}

u32 vgpu_mq_fence_read(struct vgpu_mes_queue *q)
{
	return vgpu_mq_aux(q, VT_MQ_AUX_FENCE);
}

bool vgpu_mq_done(struct vgpu_mes_queue *q, u32 seq)
{
	return (s32)(vgpu_mq_fence_read(q) - seq) >= 0;
}

/* Polls the queue's fence until it reaches seq; gives up after ms without progress. */
int vgpu_mq_wait(struct vt_case *t, struct vgpu_mes_queue *q, u32 seq, unsigned int ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(ms);
	u32 v, last = vgpu_mq_fence_read(q);
	char st[320];

	for (;;) {
		v = vgpu_mq_fence_read(q);
		if ((s32)(v - seq) >= 0)
			return 0;
		if (v != last) {
			last = v;
			deadline = jiffies + msecs_to_jiffies(ms);
		}
		if (time_after(jiffies, deadline))
			break;
		usleep_range(20, 50);
	}
	vgpu_mq_describe(q, st, sizeof(st));
	return vt_reason(t, -ETIMEDOUT, "fence %u not reached in %u ms (%s)", seq, ms, st);
}

/*
 * Job k of an ordered sequence: copy the counter to log[k], then write k to the counter. After
 * jobs 1..n ran in order, log[k] == k - 1 for each and the counter is n.
 */
unsigned int vgpu_mq_ordered_job(struct vgpu_mes_queue *q, u32 *p, u32 k)
{
	unsigned int n;

	n = vt_copy(p, vgpu_mq_aux_va(q, VT_MQ_AUX_COUNTER),
		    vgpu_mq_aux_va(q, VT_MQ_AUX_LOG + 4 * (k % VT_MQ_LOG_MAX)), 4);
	n += vt_wr(p + n, vgpu_mq_aux_va(q, VT_MQ_AUX_COUNTER), k);
	return n;
}
