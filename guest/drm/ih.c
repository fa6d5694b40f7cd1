// SPDX-License-Identifier: GPL-2.0
/*
 * The IH ring and the interrupt dispatcher (see ih.h).
 */

#include <linux/bitfield.h>
#include <linux/interrupt.h>
#include <linux/log2.h>

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"

/* The HQD slot a CP ring id names, or -1. */
static int vgpu_ih_ring_slot(struct vgpu_dev *vdev, u32 ring_id)
{
	u32 me = FIELD_GET(VGPU_IH_RING_ID_ME_MASK, ring_id);
	u32 pipe = FIELD_GET(VGPU_IH_RING_ID_PIPE_MASK, ring_id);
	u32 queue = FIELD_GET(VGPU_IH_RING_ID_QUEUE_MASK, ring_id);
	u32 slot;

	if (me == 0)
		return pipe || queue ? -1 : 0;
	if (me != 1 || pipe >= vdev->pipes || queue >= vdev->qpp)
		return -1;
	slot = 1 + pipe * vdev->qpp + queue;
	return slot < vdev->hqds ? slot : -1;
}

/*
 * A VM fault: counted, logged (rate-limited: a process can fault as often as it likes) and
 * handed to the user-queue part. The driver asks for no retry faults; should one come anyway,
 * its CAM entry is acknowledged at once so the access faults again as a no-retry fault rather
 * than wait forever.
 */
static void vgpu_ih_vm_fault(struct vgpu_dev *vdev, u32 dw0, u32 dw3, const u32 *d)
{
	struct vgpu_ih *ih = &vdev->ih;
	struct vgpu_ih_fault f = {
		.addr = (u64)d[0] << 12 | (u64)FIELD_GET(VGPU_VM_IV_DW5_ADDR_HI_MASK, d[1]) << 44,
		.flags = d[1],
		.status = d[3],
		.pasid = FIELD_GET(VGPU_IH_DW3_PASID_MASK, dw3),
		.vmid = FIELD_GET(VGPU_IH_DW0_VMID_MASK, dw0),
	};

	ih->vm_faults++;
	ih->last_fault = f;
	drm_err_ratelimited(&vdev->drm,
			    "VM fault: vmid %u pasid %u at %#llx (%s%s%s) status %#x\n",
			    f.vmid, f.pasid, f.addr,
			    f.flags & VGPU_VM_IV_DW5_WRITE_MASK ? "write" : "",
			    f.flags & VGPU_VM_IV_DW5_READ_MASK ? "read" : "",
			    f.flags & VGPU_VM_IV_DW5_EXE_MASK ? "exec" : "", f.status);
	if (f.flags & VGPU_VM_IV_DW5_RETRY_MASK)
		vgpu_wr(vdev, VGPU_REG_VM_RETRY_CAM_ACK,
			FIELD_GET(VGPU_VM_IV_DW6_CAM_INDEX_MASK, d[2]));
	/* A fault latches VM_FAULT_STATUS; re-arm it so the next one is seen too. */
	vgpu_wr(vdev, VGPU_REG_VM_FAULT_CNTL,
		VGPU_REG_VM_FAULT_CNTL__CLEAR_PROTECTION_FAULT_STATUS_ADDR_MASK);
	/* The kernel queue halts on its job's fault: recover now, not at the timeout. */
	if (f.vmid == VGPU_KQ_VMID)
		vgpu_kq_fault(vdev);
	else if (f.vmid)
		vgpu_userq_irq_vm_fault(vdev, f.pasid, f.addr, f.flags);
}

const char *vgpu_shader_err_name(u32 reason)
{
	static const char * const names[] = {
		[VGPU_SHADER_ERR_NONE] = "SHADER_ERR_NONE",
		[VGPU_SHADER_ERR_ILLEGAL_INSTRUCTION] = "SHADER_ERR_ILLEGAL_INSTRUCTION",
		[VGPU_SHADER_ERR_JUMP_OUT_OF_RANGE] = "SHADER_ERR_JUMP_OUT_OF_RANGE",
		[VGPU_SHADER_ERR_STACK_OVERFLOW] = "SHADER_ERR_STACK_OVERFLOW",
		[VGPU_SHADER_ERR_MISALIGNED] = "SHADER_ERR_MISALIGNED",
		[VGPU_SHADER_ERR_BAD_HELPER] = "SHADER_ERR_BAD_HELPER",
		[VGPU_SHADER_ERR_MEMORY_FAULT] = "SHADER_ERR_MEMORY_FAULT",
		[VGPU_SHADER_ERR_PROGRAM_SIZE] = "SHADER_ERR_PROGRAM_SIZE",
		[VGPU_SHADER_ERR_PROGRAM_FETCH] = "SHADER_ERR_PROGRAM_FETCH",
	};

	return reason < ARRAY_SIZE(names) && names[reason] ? names[reason] : "unknown";
}

/*
 * A shader ended its dispatch and its queue halted with CP_ERROR_SHADER; the device adds no
 * CP halt IV, so this one is the queue's error interrupt: kept for vgpu_mes, then the fault
 * paths as for a bad packet (the kernel queue recovers now; a user queue of the PASID is
 * reset once MES has saved its error). ih.lock held.
 */
static void vgpu_ih_shader_error(struct vgpu_dev *vdev, u32 dw0, u16 pasid, int slot, const u32 *d)
{
	struct vgpu_ih *ih = &vdev->ih;

	ih->shader_errors++;
	ih->last_shader = (struct vgpu_ih_shader_error){
		.reason = d[0], .pc = d[1], .addr = (u64)d[3] << 32 | d[2], .pasid = pasid,
		.vmid = FIELD_GET(VGPU_IH_DW0_VMID_MASK, dw0),
	};
	drm_err_ratelimited(&vdev->drm, "shader error %s at slot %u (address %#llx): vmid %u pasid %u\n",
			    vgpu_shader_err_name(d[0]), d[1], ih->last_shader.addr,
			    ih->last_shader.vmid, pasid);
	if (slot >= 0 && (unsigned int)slot == vdev->kq.slot) {
		vdev->kq.errors++;
		vgpu_kq_fault(vdev);
	} else {
		vgpu_userq_irq_error(vdev, VGPU_IH_SRC_SHADER_ERROR, pasid, d);
	}
}

/* Decodes one IV (amdgpu_ih_decode_iv_helper layout) and dispatches it. ih.lock held. */
static void vgpu_ih_decode(struct vgpu_dev *vdev, const __le32 *e)
{
	struct vgpu_ih *ih = &vdev->ih;
	u32 dw0 = le32_to_cpu(e[0]), dw3 = le32_to_cpu(e[3]);
	u32 client = FIELD_GET(VGPU_IH_DW0_CLIENT_ID_MASK, dw0);
	u32 src = FIELD_GET(VGPU_IH_DW0_SOURCE_ID_MASK, dw0);
	int slot = vgpu_ih_ring_slot(vdev, FIELD_GET(VGPU_IH_DW0_RING_ID_MASK, dw0));
	u16 pasid = FIELD_GET(VGPU_IH_DW3_PASID_MASK, dw3);
	u32 d[4];
	unsigned int i;

	for (i = 0; i < 4; i++)
		d[i] = le32_to_cpu(e[4 + i]);
	ih->ivs++;

	if (client == VGPU_IH_CLIENT_GFX && src == VGPU_IH_SRC_VM_FAULT) {
		vgpu_ih_vm_fault(vdev, dw0, dw3, d);
		return;
	}
	if (client != VGPU_IH_CLIENT_GRBM_CP)
		goto unknown;
	switch (src) {
	case VGPU_IH_SRC_CP_EOP:
		if (slot >= 0 && (unsigned int)slot == vdev->kq.slot)
			vgpu_kq_irq(vdev);
		else
			vgpu_userq_irq_eop(vdev, d[0], pasid);
		return;
	case VGPU_IH_SRC_CP_BAD_OPCODE:
	case VGPU_IH_SRC_CP_RESERVED_BITS:
	case VGPU_IH_SRC_CP_GPF:
		ih->cp_errors++;
		if (slot >= 0 && (unsigned int)slot == vdev->kq.slot)
			vgpu_kq_irq_error(vdev, src, d);
		else
			vgpu_userq_irq_error(vdev, src, pasid, d);
		return;
	case VGPU_IH_SRC_MES_ERROR:
		ih->mes_errors++;
		memcpy(ih->mes_err_data, d, sizeof(d));
		return;
	case VGPU_IH_SRC_SHADER_ERROR:
		vgpu_ih_shader_error(vdev, dw0, pasid, slot, d);
		return;
	case VGPU_IH_SRC_MES_QUEUE_HUNG:
		ih->mes_hung++;
		vgpu_userq_irq_hung(vdev, d[0], pasid);
		return;
	}
unknown:
	ih->unknown++;
}

/* Overflow as ih_v6_0_get_wptr handles it: resume after the oldest entry left, clear the flag. */
static u32 vgpu_ih_overflow(struct vgpu_dev *vdev)
{
	struct vgpu_ih *ih = &vdev->ih;
	u32 wptr = vgpu_rd(vdev, VGPU_REG_IH_RB_WPTR);

	if (!(wptr & VGPU_REG_IH_RB_WPTR__RB_OVERFLOW_MASK))
		return wptr;
	ih->overflows++;
	dev_warn_ratelimited(vdev->drm.dev, "IH ring overflow: IVs were lost\n");
	ih->rptr = ((wptr & VGPU_REG_IH_RB_WPTR__OFFSET_MASK) + VGPU_IH_ENTRY_BYTES) & ih->mask;
	vgpu_wr(vdev, VGPU_REG_IH_RB_RPTR, ih->rptr);
	ih->rptr_told = ih->rptr;
	vgpu_wr(vdev, VGPU_REG_IH_RB_CNTL, ih->cntl | VGPU_REG_IH_RB_CNTL__WPTR_OVERFLOW_CLEAR_MASK);
	vgpu_wr(vdev, VGPU_REG_IH_RB_CNTL, ih->cntl);
	return wptr;
}

/* The IH vector's work (amdgpu_ih_process): decode entries up to the written-back wptr. */
void vgpu_ih_process(struct vgpu_dev *vdev)
{
	struct vgpu_ih *ih = &vdev->ih;
	unsigned int pass, n;
	u32 wptr;

	spin_lock(&ih->lock);
	if (!ih->enabled)
		goto out;
	/* Bounded: a device that keeps writing cannot hold the CPU here. */
	for (pass = 0; pass < 4; pass++) {
		wptr = vgpu_kbo_rd(ih->wb, 0);
		if (wptr & VGPU_REG_IH_RB_WPTR__RB_OVERFLOW_MASK)
			wptr = vgpu_ih_overflow(vdev);
		wptr &= VGPU_REG_IH_RB_WPTR__OFFSET_MASK & ih->mask & ~(VGPU_IH_ENTRY_BYTES - 1);
		if (wptr == ih->rptr)
			break;
		/* The entries are read after the wptr that covers them. */
		rmb();
		for (n = 0; ih->rptr != wptr && n <= ih->mask / VGPU_IH_ENTRY_BYTES; n++) {
			vgpu_ih_decode(vdev, (const __le32 *)ih->ring->cpu + ih->rptr / 4);
			ih->rptr = (ih->rptr + VGPU_IH_ENTRY_BYTES) & ih->mask;
		}
		if (((ih->rptr - ih->rptr_told) & ih->mask) >= VGPU_IH_RPTR_SLACK) {
			vgpu_wr(vdev, VGPU_REG_IH_RB_RPTR, ih->rptr);
			ih->rptr_told = ih->rptr;
		}
	}
out:
	spin_unlock(&ih->lock);
}

static void vgpu_ih_hw_init(struct vgpu_dev *vdev)
{
	struct vgpu_ih *ih = &vdev->ih;
	u32 w;

	vgpu_wr(vdev, VGPU_REG_IH_RB_CNTL, 0);
	vgpu_wr64(vdev, VGPU_REG_IH_RB_BASE_LO, VGPU_REG_IH_RB_BASE_HI, ih->ring->gpu);
	vgpu_wr64(vdev, VGPU_REG_IH_RB_WPTR_ADDR_LO, VGPU_REG_IH_RB_WPTR_ADDR_HI, ih->wb->gpu);
	vgpu_wr(vdev, VGPU_REG_IH_DOORBELL_RPTR, 0);
	vgpu_wr(vdev, VGPU_REG_IH_MSIX_VECTOR, VGPU_IH_VECTOR);
	ih->cntl = FIELD_PREP(VGPU_REG_IH_RB_CNTL__RB_SIZE_MASK, ilog2(VGPU_IH_BYTES / 4)) |
		   VGPU_REG_IH_RB_CNTL__WPTR_WRITEBACK_ENABLE_MASK |
		   VGPU_REG_IH_RB_CNTL__WPTR_OVERFLOW_ENABLE_MASK;
	vgpu_wr(vdev, VGPU_REG_IH_RB_CNTL, ih->cntl | VGPU_REG_IH_RB_CNTL__WPTR_OVERFLOW_CLEAR_MASK);
	vgpu_wr(vdev, VGPU_REG_IH_RB_CNTL, ih->cntl);
	ih->cntl |= VGPU_REG_IH_RB_CNTL__RB_ENABLE_MASK | VGPU_REG_IH_RB_CNTL__ENABLE_INTR_MASK;
	vgpu_wr(vdev, VGPU_REG_IH_RB_CNTL, ih->cntl);

	/* Nothing can raise an IV yet (no queue runs): start reading where the device writes. */
	spin_lock_irq(&ih->lock);
	w = vgpu_rd(vdev, VGPU_REG_IH_RB_WPTR) & VGPU_REG_IH_RB_WPTR__OFFSET_MASK & ih->mask;
	ih->rptr = w;
	ih->rptr_told = w;
	vgpu_kbo_wr(ih->wb, 0, w);
	vgpu_wr(vdev, VGPU_REG_IH_RB_RPTR, w);
	ih->enabled = true;
	spin_unlock_irq(&ih->lock);
}

int vgpu_ih_init(struct vgpu_dev *vdev)
{
	struct vgpu_ih *ih = &vdev->ih;

	spin_lock_init(&ih->lock);
	ih->ring = vgpu_kbo_alloc(vdev, VGPU_IH_BYTES, VGPU_KBO_GART);
	ih->wb = vgpu_kbo_alloc(vdev, SZ_4K, VGPU_KBO_GART);
	if (!ih->ring || !ih->wb) {
		vgpu_kbo_free(vdev, ih->wb);
		vgpu_kbo_free(vdev, ih->ring);
		return -ENOMEM;
	}
	ih->mask = VGPU_IH_BYTES - 1;
	vgpu_ih_hw_init(vdev);
	return 0;
}

/* Stops the ring and the handler's use of it (a running handler finishes first). */
void vgpu_ih_fini(struct vgpu_dev *vdev)
{
	struct vgpu_ih *ih = &vdev->ih;

	if (!ih->ring)
		return;
	spin_lock_irq(&ih->lock);
	ih->enabled = false;
	spin_unlock_irq(&ih->lock);
	vgpu_wr(vdev, VGPU_REG_IH_RB_CNTL, 0);
	if (vdev->irq_on)
		synchronize_irq(pci_irq_vector(vdev->pdev, VGPU_IH_VECTOR));
	vgpu_kbo_free(vdev, ih->wb);
	vgpu_kbo_free(vdev, ih->ring);
	ih->ring = NULL;
	ih->wb = NULL;
}
