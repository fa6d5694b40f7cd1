// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel queue's ring: HQD bring-up through MMIO, job emission, hardware fences, the EOP
 * interrupt and the HQD reset (see kq.h).
 */

#include <linux/bitfield.h>
#include <linux/dma-fence.h>
#include <linux/io-64-nonatomic-lo-hi.h>
#include <linux/log2.h>
#include <linux/slab.h>

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"
#include "pm4.h"
#include "vm.h"

#define VGPU_KQ_WB_RPTR		0
#define VGPU_KQ_WB_FENCE	8

struct vgpu_kq_fence {
	struct dma_fence base;
	struct list_head node;		/* kq.pending */
};

static const char *vgpu_kq_fence_driver(struct dma_fence *f)
{
	return "vgpu_drm";
}

static const char *vgpu_kq_fence_timeline(struct dma_fence *f)
{
	return "kernel-queue";
}

static const struct dma_fence_ops vgpu_kq_fence_ops = {
	.get_driver_name = vgpu_kq_fence_driver,
	.get_timeline_name = vgpu_kq_fence_timeline,
};

static void __iomem *vgpu_kq_doorbell(struct vgpu_dev *vdev)
{
	return vdev->db + VGPU_KQ_DOORBELL * VGPU_DOORBELL_STRIDE;
}

/* Stops the HQD with DEQUEUE_RESET; a queue that does not stop wedges the device. */
static int vgpu_kq_hqd_stop(struct vgpu_dev *vdev)
{
	unsigned int s = vdev->kq.slot;

	if (!(vgpu_hqd_rd(vdev, s, VGPU_REG_HQD_ACTIVE) & 1))
		return 0;
	vgpu_hqd_wr(vdev, s, VGPU_REG_HQD_DEQUEUE_REQUEST, VGPU_HQD_DEQUEUE_RESET);
	if (vgpu_poll(vdev, VGPU_HQD_REG(s, VGPU_REG_HQD_ACTIVE), 1, 0))
		return 0;
	drm_err(&vdev->drm, "kernel queue: HQD_ACTIVE still 1 after DEQUEUE_RESET: wedged\n");
	vdev->wedged = true;
	return -ETIMEDOUT;
}

/* Programs and activates the HQD as amdgpu does through MMIO; rptr = wptr = 0. hw_lock held. */
static int vgpu_kq_hqd_start(struct vgpu_dev *vdev)
{
	struct vgpu_kq *kq = &vdev->kq;
	unsigned int s = kq->slot;
	int ret;

	ret = vgpu_kq_hqd_stop(vdev);
	if (ret)
		return ret;
	vgpu_hqd_wr(vdev, s, VGPU_REG_HQD_PQ_DOORBELL_CONTROL, 0);
	/* A polled doorbell shows only changes: no stale value may equal a future wptr. */
	writeq(0, vgpu_kq_doorbell(vdev));
	kq->wptr = 0;
	kq->vm_id = 0;
	vgpu_kbo_wr(kq->wb, VGPU_KQ_WB_RPTR, 0);
	vgpu_hqd_wr(vdev, s, VGPU_REG_HQD_VMID, 0);
	vgpu_hqd_wr(vdev, s, VGPU_REG_HQD_PQ_BASE_LO, lower_32_bits(kq->ring->gpu));
	vgpu_hqd_wr(vdev, s, VGPU_REG_HQD_PQ_BASE_HI, upper_32_bits(kq->ring->gpu));
	vgpu_hqd_wr(vdev, s, VGPU_REG_HQD_PQ_CONTROL,
		    FIELD_PREP(VGPU_REG_HQD_PQ_CONTROL__QUEUE_SIZE_MASK, ilog2(kq->size) - 1));
	vgpu_hqd_wr(vdev, s, VGPU_REG_HQD_PQ_RPTR_REPORT_ADDR_LO,
		    lower_32_bits(kq->wb->gpu + VGPU_KQ_WB_RPTR));
	vgpu_hqd_wr(vdev, s, VGPU_REG_HQD_PQ_RPTR_REPORT_ADDR_HI,
		    upper_32_bits(kq->wb->gpu + VGPU_KQ_WB_RPTR));
	vgpu_hqd_wr(vdev, s, VGPU_REG_HQD_PQ_WPTR_POLL_CNTL, 0);
	vgpu_hqd_wr(vdev, s, VGPU_REG_HQD_PQ_DOORBELL_CONTROL,
		    FIELD_PREP(VGPU_REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK,
			       VGPU_KQ_DOORBELL * (VGPU_DOORBELL_STRIDE / 4)) |
		    VGPU_REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK);
	vgpu_hqd_wr(vdev, s, VGPU_REG_HQD_ACTIVE, 1);
	if (!vgpu_poll(vdev, VGPU_HQD_REG(s, VGPU_REG_HQD_ACTIVE), 1, 1))
		return -EIO;
	return 0;
}

/* The kernel VMID's context: range and fault policy fixed; the ring sets base and PASID. */
static void vgpu_kq_vmid_init(struct vgpu_dev *vdev)
{
	unsigned int v = VGPU_KQ_VMID;

	vgpu_wr(vdev, VGPU_REG_VM_PASID_LUT_0 + 4 * v, 0);
	vgpu_wr(vdev, VGPU_VM_CONTEXT_REG(v, VGPU_REG_VM_CONTEXT_CNTL), 0);
	vgpu_wr64(vdev, VGPU_VM_CONTEXT_REG(v, VGPU_REG_VM_CONTEXT_PAGE_TABLE_BASE_LO),
		  VGPU_VM_CONTEXT_REG(v, VGPU_REG_VM_CONTEXT_PAGE_TABLE_BASE_HI), 0);
	vgpu_wr64(vdev, VGPU_VM_CONTEXT_REG(v, VGPU_REG_VM_CONTEXT_START_LO),
		  VGPU_VM_CONTEXT_REG(v, VGPU_REG_VM_CONTEXT_START_HI), 0);
	vgpu_wr64(vdev, VGPU_VM_CONTEXT_REG(v, VGPU_REG_VM_CONTEXT_END_LO),
		  VGPU_VM_CONTEXT_REG(v, VGPU_REG_VM_CONTEXT_END_HI), VGPU_VM_END_PAGE);
	vgpu_wr(vdev, VGPU_VM_CONTEXT_REG(v, VGPU_REG_VM_CONTEXT_CNTL), vgpu_vm_context_cntl());
}

/* Puts n dwords on the ring at wptr. hw_lock held. */
static void vgpu_kq_put(struct vgpu_kq *kq, const u32 *p, unsigned int n)
{
	__le32 *ring = kq->ring->cpu;

	while (n--)
		ring[kq->wptr++ & (kq->size - 1)] = cpu_to_le32(*p++);
}

/* A register-space WAIT_REG_MEM that writes ref to reg1, then waits for (reg2 & mask) == ref. */
static unsigned int vgpu_pm4_write_wait_reg(u32 *p, u32 reg1, u32 reg2, u32 ref, u32 mask)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_WAIT_REG_MEM, 5);
	p[1] = FIELD_PREP(VGPU_PM4_WAIT_REG_MEM_FUNCTION_MASK, VGPU_PM4_WAIT_REG_MEM_FUNCTION_EQ) |
	       FIELD_PREP(VGPU_PM4_WAIT_REG_MEM_MEM_SPACE_MASK,
			  VGPU_PM4_WAIT_REG_MEM_MEM_SPACE_REG) |
	       FIELD_PREP(VGPU_PM4_WAIT_REG_MEM_OPERATION_MASK,
			  VGPU_PM4_WAIT_REG_MEM_OPERATION_WRITE_WAIT);
	p[2] = reg1 / 4;
	p[3] = reg2 / 4;
	p[4] = ref;
	p[5] = mask;
	p[6] = FIELD_PREP(VGPU_PM4_WAIT_REG_MEM_POLL_INTERVAL_MASK, 10);
	return 7;
}

/* A WRITE_DATA of n consecutive registers from reg (a register-BAR byte offset). */
static unsigned int vgpu_pm4_write_regs(u32 *p, u32 reg, const u32 *v, unsigned int n)
{
	return pm4_write_data(p, VGPU_PM4_WRITE_DATA_DST_REG, 0, reg / 4, v, n);
}

/*
 * amdgpu's emit_vm_flush on this ring: point the kernel VMID at the VM's root and PASID, then
 * invalidate it (write REQ, wait for ACK), all in ring order before the IB.
 */
static unsigned int vgpu_kq_vm_flush(u32 *p, struct vgpu_vm *vm)
{
	unsigned int v = VGPU_KQ_VMID, n = 0;
	u64 pd = vgpu_vm_pd_addr(vm);
	u32 base[2] = { lower_32_bits(pd), upper_32_bits(pd) };
	u32 pasid = vgpu_vm_pasid(vm);
	u32 req = FIELD_PREP(VGPU_REG_VM_INV_ENG_REQ__PER_VMID_INVALIDATE_REQ_MASK, BIT(v)) |
		  VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PTES_MASK |
		  VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE0_MASK |
		  VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE1_MASK |
		  VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE2_MASK |
		  VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L1_PTES_MASK;

	n += vgpu_pm4_write_regs(p + n,
				 VGPU_VM_CONTEXT_REG(v, VGPU_REG_VM_CONTEXT_PAGE_TABLE_BASE_LO),
				 base, 2);
	n += vgpu_pm4_write_regs(p + n, VGPU_REG_VM_PASID_LUT_0 + 4 * v, &pasid, 1);
	n += vgpu_pm4_write_wait_reg(p + n,
				     VGPU_VM_INV_ENG_REG(VGPU_KQ_INV_ENGINE, VGPU_REG_VM_INV_ENG_REQ),
				     VGPU_VM_INV_ENG_REG(VGPU_KQ_INV_ENGINE, VGPU_REG_VM_INV_ENG_ACK),
				     req, BIT(v));
	return n;
}

/*
 * Puts a job on the ring (scheduler's run_job, or its resubmission after a reset) and returns
 * its hardware fence: VM flush if the kernel VMID points elsewhere, the IB or the packets,
 * RELEASE_MEM of the seqno with an interrupt, the doorbell.
 */
struct dma_fence *vgpu_kq_emit(struct vgpu_dev *vdev, struct vgpu_kq_job *job)
{
	struct vgpu_kq *kq = &vdev->kq;
	struct vgpu_kq_fence *f;
	u32 p[32];
	unsigned long flags;

	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return ERR_PTR(-ENOMEM);
	mutex_lock(&kq->hw_lock);
	if (!kq->up) {
		mutex_unlock(&kq->hw_lock);
		kfree(f);
		return ERR_PTR(-ENODEV);
	}
	if (job->vm && job->vm->id != kq->vm_id) {
		vgpu_kq_put(kq, p, vgpu_kq_vm_flush(p, job->vm));
		kq->vm_id = job->vm->id;
	}
	if (job->ib_dwords)
		vgpu_kq_put(kq, p, pm4_ib_vmid(p, job->ib_va, job->ib_dwords, VGPU_KQ_VMID));
	vgpu_kq_put(kq, job->pkts, job->npkts);

	dma_fence_init(&f->base, &vgpu_kq_fence_ops, &kq->fence_lock, kq->fence_context,
		       ++kq->seq);
	vgpu_kq_put(kq, p, pm4_release_mem(p, VT_GCR_FENCE, VGPU_PM4_RELEASE_MEM_DATA_SEL_64,
					   VGPU_PM4_RELEASE_MEM_INT_SEL_IRQ_CONFIRM,
					   kq->wb->gpu + VGPU_KQ_WB_FENCE, kq->seq,
					   lower_32_bits(kq->seq)));
	/* One reference for the pending list, one for the scheduler. */
	dma_fence_get(&f->base);
	spin_lock_irqsave(&kq->fence_lock, flags);
	list_add_tail(&f->node, &kq->pending);
	spin_unlock_irqrestore(&kq->fence_lock, flags);
	vgpu_kq_fallback_arm(kq);
	kq->jobs++;
	/* The packets are in memory before the device hears of them. */
	wmb();
	writeq(kq->wptr, vgpu_kq_doorbell(vdev));
	mutex_unlock(&kq->hw_lock);
	return &f->base;
}

/*
 * Signals, in order, every pending fence up to seqno upto (or all, with error); how many.
 * fence_lock held.
 */
unsigned int vgpu_kq_signal(struct vgpu_kq *kq, u64 upto, int error)
{
	struct vgpu_kq_fence *f, *tmp;
	unsigned int n = 0;

	list_for_each_entry_safe(f, tmp, &kq->pending, node) {
		if (!error && f->base.seqno > upto)
			break;
		list_del(&f->node);
		if (error)
			dma_fence_set_error(&f->base, error);
		dma_fence_signal_locked(&f->base);
		dma_fence_put(&f->base);
		n++;
	}
	return n;
}

/* The last seqno the ring's RELEASE_MEM wrote. */
u64 vgpu_kq_fence_mem(struct vgpu_kq *kq)
{
	return vgpu_kbo_rd64(kq->wb, VGPU_KQ_WB_FENCE);
}

/* The EOP IV of the kernel queue's slot (interrupt context). */
void vgpu_kq_irq(struct vgpu_dev *vdev)
{
	struct vgpu_kq *kq = &vdev->kq;

	spin_lock(&kq->fence_lock);
	vgpu_kq_signal(kq, vgpu_kbo_rd64(kq->wb, VGPU_KQ_WB_FENCE), 0);
	spin_unlock(&kq->fence_lock);
}

/* The queue halted (a fault of its job's VMID): recover now rather than at the timeout. */
void vgpu_kq_fault(struct vgpu_dev *vdev)
{
	if (vdev->kq.sched_on)
		drm_sched_fault(&vdev->kq.sched);
}

/* The queue halted on a packet it could not run (DW4: the CP_ERROR_*). */
void vgpu_kq_irq_error(struct vgpu_dev *vdev, u32 src, const u32 *data)
{
	vdev->kq.errors++;
	drm_err_ratelimited(&vdev->drm, "kernel queue halted: IV source %u, CP error %u\n", src,
			    data[0]);
	vgpu_kq_fault(vdev);
}

/*
 * After a job timeout, with the scheduler stopped: the HQD is reset (DEQUEUE_RESET stops it at
 * once, whatever it runs), the fences it will never write are completed with -ECANCELED
 * (the scheduler has let go of them), and the ring starts again empty.
 */
int vgpu_kq_hw_reset(struct vgpu_dev *vdev)
{
	struct vgpu_kq *kq = &vdev->kq;
	unsigned long flags;
	int ret;

	mutex_lock(&kq->hw_lock);
	kq->resets++;
	ret = vgpu_kq_hqd_start(vdev);
	/* Whatever the memory says now is all the old ring will ever write. */
	spin_lock_irqsave(&kq->fence_lock, flags);
	vgpu_kq_signal(kq, vgpu_kbo_rd64(kq->wb, VGPU_KQ_WB_FENCE), 0);
	vgpu_kq_signal(kq, 0, -ECANCELED);
	spin_unlock_irqrestore(&kq->fence_lock, flags);
	if (ret)
		kq->up = false;
	mutex_unlock(&kq->hw_lock);
	return ret;
}

int vgpu_kq_init(struct vgpu_dev *vdev)
{
	struct vgpu_kq *kq = &vdev->kq;
	int ret;

	mutex_init(&kq->hw_lock);
	mutex_init(&kq->kentity_lock);
	spin_lock_init(&kq->fence_lock);
	INIT_LIST_HEAD(&kq->pending);
	kq->fence_context = dma_fence_context_alloc(1);
	vgpu_kq_fallback_init(kq);
	kq->size = VGPU_KQ_RING_BYTES / 4;
	kq->ring = vgpu_kbo_alloc(vdev, VGPU_KQ_RING_BYTES, VGPU_KBO_GART);
	kq->wb = vgpu_kbo_alloc(vdev, SZ_4K, VGPU_KBO_GART);
	if (!kq->ring || !kq->wb) {
		ret = -ENOMEM;
		goto err;
	}
	vgpu_kq_vmid_init(vdev);
	mutex_lock(&kq->hw_lock);
	ret = vgpu_kq_hqd_start(vdev);
	kq->up = !ret;
	mutex_unlock(&kq->hw_lock);
	if (ret)
		goto err;
	ret = vgpu_kq_sched_init(vdev);
	if (ret)
		goto err_stop;
	return 0;

err_stop:
	mutex_lock(&kq->hw_lock);
	kq->up = false;
	vgpu_kq_hqd_stop(vdev);
	mutex_unlock(&kq->hw_lock);
err:
	vgpu_kbo_free(vdev, kq->wb);
	vgpu_kbo_free(vdev, kq->ring);
	kq->wb = kq->ring = NULL;
	return ret;
}

/* After every entity is gone: the scheduler, then the HQD, then its memory. */
void vgpu_kq_fini(struct vgpu_dev *vdev)
{
	struct vgpu_kq *kq = &vdev->kq;
	unsigned long flags;

	if (!kq->ring)
		return;
	vgpu_kq_sched_fini(vdev);
	mutex_lock(&kq->hw_lock);
	kq->up = false;
	vgpu_kq_hqd_stop(vdev);
	vgpu_hqd_wr(vdev, kq->slot, VGPU_REG_HQD_PQ_DOORBELL_CONTROL, 0);
	spin_lock_irqsave(&kq->fence_lock, flags);
	vgpu_kq_signal(kq, 0, -ENODEV);
	spin_unlock_irqrestore(&kq->fence_lock, flags);
	mutex_unlock(&kq->hw_lock);
	/* Nothing is pending: the timer does not arm itself again. */
	vgpu_kq_fallback_fini(kq);
	vgpu_wr(vdev, VGPU_VM_CONTEXT_REG(VGPU_KQ_VMID, VGPU_REG_VM_CONTEXT_CNTL), 0);
	vgpu_wr(vdev, VGPU_REG_VM_PASID_LUT_0 + 4 * VGPU_KQ_VMID, 0);
	vgpu_kbo_free(vdev, kq->wb);
	vgpu_kbo_free(vdev, kq->ring);
	kq->wb = kq->ring = NULL;
}
