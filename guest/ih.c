// SPDX-License-Identifier: GPL-2.0
/*
 * The interrupt handler (IH) ring: set-up, and the IH vector's work of decoding IVs
 * into per-slot records for the cases to check.
 */

#include <linux/bitfield.h>
#include <linux/interrupt.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/log2.h>
#include <linux/spinlock.h>
#include <linux/string.h>

#include "cp.h"
#include "vm.h"

/* The HQD slot a CP ring id names, or -1. */
static int vgpu_ring_id_slot(struct vgpu_cp *cp, u32 ring_id)
{
	u32 me = FIELD_GET(VGPU_IH_RING_ID_ME_MASK, ring_id);
	u32 pipe = FIELD_GET(VGPU_IH_RING_ID_PIPE_MASK, ring_id);
	u32 queue = FIELD_GET(VGPU_IH_RING_ID_QUEUE_MASK, ring_id);
	u32 slot;

	if (me == 0)
		return pipe || queue ? -1 : 0;
	if (me != 1 || pipe >= cp->pipes || queue >= cp->qpp)
		return -1;
	slot = 1 + pipe * cp->qpp + queue;
	return slot < cp->hqds ? slot : -1;
}

u32 vgpu_slot_ring_id(struct vgpu_cp *cp, unsigned int slot)
{
	if (!slot)
		return 0;
	return FIELD_PREP(VGPU_IH_RING_ID_ME_MASK, 1) |
	       FIELD_PREP(VGPU_IH_RING_ID_PIPE_MASK, (slot - 1) / cp->qpp) |
	       FIELD_PREP(VGPU_IH_RING_ID_QUEUE_MASK, (slot - 1) % cp->qpp);
}

/*
 * A VM-fault IV, decoded as gmc_v11_0_process_interrupt does, recorded per VMID. A retry fault
 * is delegated to the soft ring's work item (amdgpu_irq_delegate): mapping the page needs
 * process context, and the CAM entry is acknowledged there. Called with ih.lock held.
 */
static void vgpu_ih_vm_fault(struct vgpu_cp *cp, u32 dw0, u32 dw3, const u32 *data, ktime_t now)
{
	struct vgpu_ih *ih = &cp->ih;
	struct vgpu_ih_soft *soft = &ih->soft;
	struct vgpu_vm_fault f = {
		.addr = (u64)data[0] << 12 |
			(u64)FIELD_GET(VGPU_VM_IV_DW5_ADDR_HI_MASK, data[1]) << 44,
		.flags = data[1],
		.cam = FIELD_GET(VGPU_VM_IV_DW6_CAM_INDEX_MASK, data[2]),
		.status = data[3],
		.pasid = FIELD_GET(VGPU_IH_DW3_PASID_MASK, dw3),
		.vmid = FIELD_GET(VGPU_IH_DW0_VMID_MASK, dw0),
		.time = now,
	};
	struct vgpu_ih_vmid *v = &ih->vm[f.vmid];
	unsigned int i;

	ih->vm_faults++;
	if (!v->faults++)
		v->first = f;
	v->last = f;
	if (!(f.flags & VGPU_VM_IV_DW5_RETRY_MASK))
		return;
	v->retry++;
	if (f.cam >= VGPU_VM_RETRY_CAM_ENTRIES) {
		ih->vm_bad_cam++;
		return;
	}
	/*
	 * The CAM sends no second IV with an index until that index was acknowledged, and none
	 * for a page that has an entry outstanding (its faults wait on that entry).
	 */
	for_each_set_bit(i, soft->cam_out, VGPU_VM_RETRY_CAM_ENTRIES) {
		if (soft->cam_vmid[i] == f.vmid && soft->cam_page[i] == f.addr >> 12)
			v->cam_dup_page++;
	}
	if (test_and_set_bit(f.cam, soft->cam_out))
		v->cam_busy++;
	soft->cam_page[f.cam] = f.addr >> 12;
	soft->cam_vmid[f.cam] = f.vmid;
	if (soft->head - soft->tail >= VT_IH_SOFT_ENTRIES) {
		soft->dropped++;
		return;
	}
	soft->e[soft->head++ % VT_IH_SOFT_ENTRIES] = f;
	soft->max_queued = max(soft->max_queued, soft->head - soft->tail);
	schedule_work(&soft->work);
}

/* The soft ring's work item: each delegated retry fault, in process context. */
static void vgpu_ih_soft_work(struct work_struct *w)
{
	struct vgpu_cp *cp = container_of(w, struct vgpu_cp, ih.soft.work);
	struct vgpu_ih *ih = &cp->ih;
	struct vgpu_vm_fault f;

	for (;;) {
		spin_lock_irq(&ih->lock);
		if (ih->soft.tail == ih->soft.head) {
			spin_unlock_irq(&ih->lock);
			return;
		}
		f = ih->soft.e[ih->soft.tail++ % VT_IH_SOFT_ENTRIES];
		spin_unlock_irq(&ih->lock);
		vgpu_vm_handle_retry(cp, &f);
	}
}

/* Decodes one IV (amdgpu_ih_decode_iv_helper layout). Called with ih.lock held. */
static void vgpu_ih_decode(struct vgpu_cp *cp, const __le32 *e, ktime_t now)
{
	struct vgpu_ih *ih = &cp->ih;
	u32 dw0 = le32_to_cpu(e[0]);
	u32 client = FIELD_GET(VGPU_IH_DW0_CLIENT_ID_MASK, dw0);
	u32 src = FIELD_GET(VGPU_IH_DW0_SOURCE_ID_MASK, dw0);
	int slot = vgpu_ring_id_slot(cp, FIELD_GET(VGPU_IH_DW0_RING_ID_MASK, dw0));
	struct vgpu_ih_slot *s;
	u32 data[4], f;
	unsigned int i;

	for (i = 0; i < 4; i++)
		data[i] = le32_to_cpu(e[4 + i]);
	ih->ivs++;

	if (client == VGPU_IH_CLIENT_GFX && src == VGPU_IH_SRC_VM_FAULT) {
		vgpu_ih_vm_fault(cp, dw0, le32_to_cpu(e[3]), data, now);
		return;
	}
	if (client == VGPU_IH_CLIENT_GRBM_CP && src == VGPU_IH_SRC_MES_ERROR) {
		ih->mes.errors++;
		memcpy(ih->mes.err_data, data, sizeof(data));
		return;
	}
	if (client == VGPU_IH_CLIENT_GRBM_CP && src == VGPU_IH_SRC_MES_QUEUE_HUNG) {
		ih->mes.hung++;
		memcpy(ih->mes.hung_data, data, sizeof(data));
		ih->mes.hung_pasid = FIELD_GET(VGPU_IH_DW3_PASID_MASK, le32_to_cpu(e[3]));
		return;
	}
	/* A user queue's (MES maps it onto any of its slots): into the one log. */
	if (client == VGPU_IH_CLIENT_GRBM_CP && src == VGPU_IH_SRC_CP_EOP &&
	    (FIELD_GET(VGPU_IH_DW0_VMID_MASK, dw0) || slot < 0 || !READ_ONCE(cp->rings[slot]))) {
		struct vgpu_ih_ueop *u = &ih->mes.ueop[ih->mes.ueops++ % VT_IH_UEOPS];

		u->ctxid = data[0];
		u->pasid = FIELD_GET(VGPU_IH_DW3_PASID_MASK, le32_to_cpu(e[3]));
		u->vmid = FIELD_GET(VGPU_IH_DW0_VMID_MASK, dw0);
		u->slot = slot < 0 ? 0xff : slot;
		u->time = now;
		if (slot < 0)
			return;
	}
	if (client != VGPU_IH_CLIENT_GRBM_CP || slot < 0)
		goto unknown;
	s = &ih->slot[slot];
	switch (src) {
	case VGPU_IH_SRC_CP_EOP:
		/* A RELEASE_MEM in a process IB: not one of the ring's fences. */
		if (FIELD_GET(VGPU_IH_DW0_VMID_MASK, dw0)) {
			s->eop_proc++;
			s->eop_proc_ctxid = data[0];
			s->eop_proc_vmid = FIELD_GET(VGPU_IH_DW0_VMID_MASK, dw0);
			s->eop_proc_pasid = FIELD_GET(VGPU_IH_DW3_PASID_MASK, le32_to_cpu(e[3]));
			return;
		}
		if (s->eop && (s32)(data[0] - s->eop_ctxid) <= 0)
			s->eop_unordered++;
		s->eop++;
		s->eop_ctxid = data[0];
		s->eop_time = now;
		if (s->fence) {
			/* INT_SEL 2: the fence data is in memory before the interrupt. */
			f = le32_to_cpu(READ_ONCE(*s->fence));
			if ((s32)(f - s->fence_seen) < 0)
				s->fence_backwards++;
			s->fence_seen = f;
			if ((s32)(f - data[0]) < 0)
				s->eop_early++;
		}
		return;
	case VGPU_IH_SRC_CP_BAD_OPCODE:
	case VGPU_IH_SRC_CP_RESERVED_BITS:
	case VGPU_IH_SRC_CP_GPF:
		s->err++;
		s->err_src = src;
		memcpy(s->err_data, data, sizeof(data));
		return;
	}
unknown:
	ih->unknown++;
	ih->unknown_dw0 = dw0;
}

/* Overflow as ih_v6_0_get_wptr handles it: resume after the oldest entry left, clear the flag. */
static u32 vgpu_ih_overflow(struct vgpu_cp *cp, u32 wptr)
{
	struct vgpu *vg = cp->vg;
	struct vgpu_ih *ih = &cp->ih;

	wptr = vgpu_rd(vg, VGPU_REG_IH_RB_WPTR);
	if (!(wptr & VGPU_REG_IH_RB_WPTR__RB_OVERFLOW_MASK))
		return wptr;
	ih->overflows++;
	ih->rptr = ((wptr & VGPU_REG_IH_RB_WPTR__OFFSET_MASK) + VGPU_IH_ENTRY_BYTES) & ih->mask;
	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, ih->cntl | VGPU_REG_IH_RB_CNTL__WPTR_OVERFLOW_CLEAR_MASK);
	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, ih->cntl);
	return wptr;
}

/* The IH vector's work (amdgpu_ih_process): decode entries up to the written-back wptr. */
void vgpu_ih_process(struct vgpu_cp *cp)
{
	struct vgpu_ih *ih = &cp->ih;
	ktime_t now = ktime_get();
	unsigned int pass, n;
	u32 wptr;

	spin_lock(&ih->lock);
	if (!ih->enabled)
		goto out;
	for (pass = 0; pass < 4; pass++) {
		wptr = le32_to_cpu(READ_ONCE(*ih->wptr_wb));
		if (wptr & VGPU_REG_IH_RB_WPTR__RB_OVERFLOW_MASK)
			wptr = vgpu_ih_overflow(cp, wptr);
		wptr &= VGPU_REG_IH_RB_WPTR__OFFSET_MASK & ih->mask & ~(VGPU_IH_ENTRY_BYTES - 1);
		if (wptr == ih->rptr)
			break;
		/* The entries are read after the wptr that covers them. */
		rmb();
		for (n = 0; ih->rptr != wptr && n <= ih->mask / VGPU_IH_ENTRY_BYTES; n++) {
			vgpu_ih_decode(cp, ih->ring + ih->rptr / 4, now);
			ih->rptr = (ih->rptr + VGPU_IH_ENTRY_BYTES) & ih->mask;
		}
		vgpu_wr(cp->vg, VGPU_REG_IH_RB_RPTR, ih->rptr);
	}
out:
	spin_unlock(&ih->lock);
}

/* Allocates the IH ring and starts it. */
int vgpu_ih_init(struct vt_case *t, struct vgpu_cp *cp)
{
	struct vgpu_ih *ih = &cp->ih;

	INIT_WORK(&ih->soft.work, vgpu_ih_soft_work);

	ih->bo = vgpu_bo_alloc(t, cp, VT_IH_BYTES, false);
	if (!ih->bo)
		return -ENOMEM;
	ih->ring = ih->bo->cpu;
	ih->mask = VT_IH_BYTES - 1;
	ih->wptr_wb = (__le32 *)((u8 *)cp->wb->cpu + VT_WB_IH_WPTR);
	vgpu_ih_hw_init(cp);
	return 0;
}

/*
 * Programs the IH registers for the allocated ring and enables the vector's handler: at set-up,
 * and again after a reset returned them to their power-on values.
 */
void vgpu_ih_hw_init(struct vgpu_cp *cp)
{
	struct vgpu *vg = cp->vg;
	struct vgpu_ih *ih = &cp->ih;
	u64 wb = cp->wb->gpu + VT_WB_IH_WPTR;
	u32 w;

	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, 0);
	vgpu_wr64(vg, VGPU_REG_IH_RB_BASE_LO, VGPU_REG_IH_RB_BASE_HI, ih->bo->gpu);
	vgpu_wr64(vg, VGPU_REG_IH_RB_WPTR_ADDR_LO, VGPU_REG_IH_RB_WPTR_ADDR_HI, wb);
	vgpu_wr(vg, VGPU_REG_IH_DOORBELL_RPTR, 0);
	vgpu_wr(vg, VGPU_REG_IH_MSIX_VECTOR, VT_IH_VECTOR);
	ih->cntl = FIELD_PREP(VGPU_REG_IH_RB_CNTL__RB_SIZE_MASK, ilog2(VT_IH_BYTES / 4)) |
		   VGPU_REG_IH_RB_CNTL__WPTR_WRITEBACK_ENABLE_MASK |
		   VGPU_REG_IH_RB_CNTL__WPTR_OVERFLOW_ENABLE_MASK;
	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, ih->cntl | VGPU_REG_IH_RB_CNTL__WPTR_OVERFLOW_CLEAR_MASK);
	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, ih->cntl);
	ih->cntl |= VGPU_REG_IH_RB_CNTL__RB_ENABLE_MASK | VGPU_REG_IH_RB_CNTL__ENABLE_INTR_MASK;
	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, ih->cntl);

	/* Nothing can raise an IV yet (no queue runs): start reading where the device writes. */
	spin_lock_irq(&ih->lock);
	w = vgpu_rd(vg, VGPU_REG_IH_RB_WPTR) & VGPU_REG_IH_RB_WPTR__OFFSET_MASK & ih->mask;
	ih->rptr = w;
	WRITE_ONCE(*ih->wptr_wb, cpu_to_le32(w));
	vgpu_wr(vg, VGPU_REG_IH_RB_RPTR, w);
	ih->enabled = true;
	spin_unlock_irq(&ih->lock);
}

/* Stops the vector's handler from touching the ring, and waits for a running one. */
void vgpu_ih_disable(struct vgpu_cp *cp)
{
	spin_lock_irq(&cp->ih.lock);
	cp->ih.enabled = false;
	spin_unlock_irq(&cp->ih.lock);
	synchronize_irq(pci_irq_vector(cp->vg->pdev, VT_IH_VECTOR));
}

void vgpu_ih_slot_get(struct vgpu_cp *cp, unsigned int slot, struct vgpu_ih_slot *out)
{
	unsigned long flags;

	spin_lock_irqsave(&cp->ih.lock, flags);
	*out = cp->ih.slot[slot];
	spin_unlock_irqrestore(&cp->ih.lock, flags);
}

void vgpu_ih_vmid_get(struct vgpu_cp *cp, unsigned int vmid, struct vgpu_ih_vmid *out)
{
	unsigned long flags;

	spin_lock_irqsave(&cp->ih.lock, flags);
	*out = cp->ih.vm[vmid % VGPU_VM_CONTEXTS];
	spin_unlock_irqrestore(&cp->ih.lock, flags);
}

/* Forgets the VMID's fault records: a new address space starts counting from zero. */
void vgpu_ih_vmid_reset(struct vgpu_cp *cp, unsigned int vmid)
{
	unsigned long flags;

	spin_lock_irqsave(&cp->ih.lock, flags);
	memset(&cp->ih.vm[vmid % VGPU_VM_CONTEXTS], 0, sizeof(cp->ih.vm[0]));
	spin_unlock_irqrestore(&cp->ih.lock, flags);
}

/* The driver is about to acknowledge CAM entry cam: the device may reuse the index. */
void vgpu_ih_cam_acked(struct vgpu_cp *cp, u32 cam)
{
	unsigned long flags;

	if (cam >= VGPU_VM_RETRY_CAM_ENTRIES)
		return;
	spin_lock_irqsave(&cp->ih.lock, flags);
	clear_bit(cam, cp->ih.soft.cam_out);
	spin_unlock_irqrestore(&cp->ih.lock, flags);
}

/* Waits until every retry fault delegated so far has been handled. */
void vgpu_ih_soft_flush(struct vgpu_cp *cp)
{
	flush_work(&cp->ih.soft.work);
}

/* How many MES error, hung-queue and user-queue EOP IVs the handler has decoded. */
void vgpu_ih_mes_counts(struct vgpu_cp *cp, u32 *errors, u32 *hung, u32 *ueops)
{
	unsigned long flags;

	spin_lock_irqsave(&cp->ih.lock, flags);
	if (errors)
		*errors = cp->ih.mes.errors;
	if (hung)
		*hung = cp->ih.mes.hung;
	if (ueops)
		*ueops = cp->ih.mes.ueops;
	spin_unlock_irqrestore(&cp->ih.lock, flags);
}

/* The data dwords of the last MES error IV and the last hung-queue IV (4 each). */
void vgpu_ih_mes_last(struct vgpu_cp *cp, u32 *err_data, u32 *hung_data, u16 *hung_pasid)
{
	unsigned long flags;

	spin_lock_irqsave(&cp->ih.lock, flags);
	if (err_data)
		memcpy(err_data, cp->ih.mes.err_data, sizeof(cp->ih.mes.err_data));
	if (hung_data)
		memcpy(hung_data, cp->ih.mes.hung_data, sizeof(cp->ih.mes.hung_data));
	if (hung_pasid)
		*hung_pasid = cp->ih.mes.hung_pasid;
	spin_unlock_irqrestore(&cp->ih.lock, flags);
}

/*
 * Finds a user-queue EOP IV numbered from or later (still in the log) with DW4 ctxid and
 * PASID pasid; out gets it.
 */
bool vgpu_ih_ueop_find(struct vgpu_cp *cp, u32 from, u32 ctxid, u16 pasid,
		       struct vgpu_ih_ueop *out)
{
	struct vgpu_ih_mes *m = &cp->ih.mes;
	unsigned long flags;
	bool found = false;
	u32 n;

	spin_lock_irqsave(&cp->ih.lock, flags);
	if (m->ueops - from > VT_IH_UEOPS)
		from = m->ueops - VT_IH_UEOPS;
	for (n = from; n != m->ueops && !found; n++) {
		const struct vgpu_ih_ueop *u = &m->ueop[n % VT_IH_UEOPS];

		if (u->ctxid == ctxid && u->pasid == pasid) {
			*out = *u;
			found = true;
		}
	}
	spin_unlock_irqrestore(&cp->ih.lock, flags);
	return found;
}

/*
 * VM-fault IVs of a PASID, whichever VMID the scheduler gave it (counted from the VMIDs whose
 * last fault names the PASID); last gets the latest of them.
 */
u32 vgpu_ih_pasid_faults(struct vgpu_cp *cp, u16 pasid, struct vgpu_vm_fault *last)
{
	unsigned long flags;
	unsigned int v;
	u32 n = 0;

	spin_lock_irqsave(&cp->ih.lock, flags);
	for (v = 1; v < VGPU_VM_CONTEXTS; v++) {
		const struct vgpu_ih_vmid *r = &cp->ih.vm[v];

		if (!r->faults || r->last.pasid != pasid)
			continue;
		if (last && (!n || ktime_after(r->last.time, last->time)))
			*last = r->last;
		n += r->faults;
	}
	spin_unlock_irqrestore(&cp->ih.lock, flags);
	return n;
}
