// SPDX-License-Identifier: GPL-2.0
/*
 * CP set-up and tear-down: the GART, its buffers and the write-back page (see cp.h).
 */

#include <linux/bitfield.h>
#include <linux/bitmap.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/jiffies.h>
#include <linux/list.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "cp.h"

static void vgpu_gart_flush(struct vgpu_cp *cp)
{
	/* The PTEs are in memory before the device drops its cached translations. */
	wmb();
	vgpu_wr(cp->vg, VGPU_REG_GMC_VM_INVALIDATE, BIT(0));
}

/*
 * Writes back and invalidates the whole L2 over MMIO and waits until that is done: the
 * L2_CONTROL write only starts it, L2_STATUS.BUSY says when it has finished (a device whose
 * maintenance is synchronous reads 0 there). A flush still busy after timeout_ms may write
 * into memory later, so the CP state is wedged (nothing is freed under it). L2_STATUS.ERROR
 * (dirty lines dropped because their write-back failed) is -EIO.
 */
int vgpu_l2_flush(struct vt_case *t, struct vgpu_cp *cp)
{
	struct vgpu *vg = cp->vg;
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	u32 st;

	vgpu_wr(vg, VGPU_REG_L2_CONTROL,
		VGPU_REG_L2_CONTROL__WB_MASK | VGPU_REG_L2_CONTROL__INV_MASK);
	/* Each read also orders the (posted) write before whatever comes next. */
	for (;;) {
		st = vgpu_rd(vg, VGPU_REG_L2_STATUS);
		if (!(st & VGPU_REG_L2_STATUS__BUSY_MASK))
			break;
		if (time_after(jiffies, deadline)) {
			cp->wedged = true;
			return vt_reason(t, -ETIMEDOUT,
					 "L2_STATUS %#x: write-back and invalidate still BUSY %u ms after L2_CONTROL (%u dirty lines)",
					 st, timeout_ms, vgpu_rd(vg, VGPU_REG_L2_DIRTY_LINES));
		}
		usleep_range(10, 20);
	}
	if (st & VGPU_REG_L2_STATUS__ERROR_MASK)
		return vt_reason(t, -EIO,
				 "L2_STATUS.ERROR after L2_CONTROL: dirty lines dropped (L2_WB_ERRORS %u)",
				 vgpu_rd(vg, VGPU_REG_L2_WB_ERRORS));
	return 0;
}

/* A zeroed coherent buffer of size bytes mapped into the GART, MTYPE NC if cached else UC. */
struct vgpu_bo *vgpu_bo_alloc(struct vt_case *t, struct vgpu_cp *cp, size_t size,
			      bool cached)
{
	struct device *dev = &cp->vg->pdev->dev;
	u64 mtype = cached ? VGPU_PTE_MTYPE_NC : VGPU_PTE_MTYPE_UC;
	unsigned long first;
	struct vgpu_bo *bo;
	unsigned int n, i;

	size = ALIGN(size, VT_GPU_PAGE);
	n = size / VT_GPU_PAGE;
	first = bitmap_find_next_zero_area(cp->gart_used, VT_GART_PAGES, 0, n, 0);
	if (first >= VT_GART_PAGES) {
		vt_reason(t, -ENOSPC, "GART full: no %u free pages of %u", n, VT_GART_PAGES);
		return NULL;
	}
	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo) {
		vt_reason(t, -ENOMEM, "out of memory");
		return NULL;
	}
	bo->cpu = dma_alloc_coherent(dev, size, &bo->dma, GFP_KERNEL);
	if (!bo->cpu) {
		vt_reason(t, -ENOMEM, "dma_alloc_coherent(%zu) failed", size);
		kfree(bo);
		return NULL;
	}
	if ((bo->dma & (VT_GPU_PAGE - 1)) || bo->dma + size - 1 > VGPU_PTE_ADDRESS_MASK) {
		vt_reason(t, -ERANGE,
			  "DMA address %pad of %zu bytes: a PTE holds 4 KiB pages below 2^48",
			  &bo->dma, size);
		dma_free_coherent(dev, size, bo->cpu, bo->dma);
		kfree(bo);
		return NULL;
	}
	memset(bo->cpu, 0, size);
	bo->size = size;
	bo->first = first;
	bo->cached = cached;
	bo->gpu = cp->gart_start + (u64)first * VT_GPU_PAGE;
	for (i = 0; i < n; i++)
		cp->gart[first + i] =
			cpu_to_le64(((bo->dma + (u64)i * VT_GPU_PAGE) & VGPU_PTE_ADDRESS_MASK) |
				    VT_PTE_FLAGS | FIELD_PREP(VGPU_PTE_MTYPE_MASK, mtype));
	bitmap_set(cp->gart_used, first, n);
	list_add(&bo->node, &cp->bos);
	vgpu_gart_flush(cp);
	return bo;
}

void vgpu_bo_free(struct vgpu_cp *cp, struct vgpu_bo *bo)
{
	unsigned int i, n;

	/* A queue that did not stop may still use any of it: leak it (vgpu_cp_free). */
	if (!bo || cp->wedged)
		return;
	n = bo->size / VT_GPU_PAGE;
	/* No dirty line of it may be written back into memory that is no longer ours. */
	if (bo->cached && vgpu_l2_flush(NULL, cp) == -ETIMEDOUT)
		return;		/* wedged: the write-back may still reach it */
	for (i = 0; i < n; i++)
		cp->gart[bo->first + i] = 0;
	vgpu_gart_flush(cp);
	bitmap_clear(cp->gart_used, bo->first, n);
	list_del(&bo->node);
	dma_free_coherent(&cp->vg->pdev->dev, bo->size, bo->cpu, bo->dma);
	kfree(bo);
}

/* Programs the GART registers for the table: off while reprogrammed, then on, TLB flushed. */
static void vgpu_gart_hw_init(struct vgpu_cp *cp)
{
	struct vgpu *vg = cp->vg;

	vgpu_wr(vg, VGPU_REG_GMC_GART_CNTL, 0);
	vgpu_wr64(vg, VGPU_REG_GMC_GART_START_LO, VGPU_REG_GMC_GART_START_HI, cp->gart_start);
	vgpu_wr64(vg, VGPU_REG_GMC_GART_END_LO, VGPU_REG_GMC_GART_END_HI,
		  cp->gart_start + VT_GART_SIZE - 1);
	vgpu_wr64(vg, VGPU_REG_GMC_GART_TABLE_LO, VGPU_REG_GMC_GART_TABLE_HI,
		  (cp->gart_dma & VGPU_PTE_ADDRESS_MASK) | VGPU_PTE_VALID_MASK |
		  VGPU_PTE_SYSTEM_MASK);
	vgpu_wr(vg, VGPU_REG_GMC_GART_CNTL, VGPU_REG_GMC_GART_CNTL__ENABLE_MASK);
	vgpu_gart_flush(cp);
	vgpu_wr(vg, VGPU_REG_GMC_VM_FAULT_CNTL, VGPU_REG_GMC_VM_FAULT_CNTL__CLEAR_MASK);
}

static int vgpu_cp_init(struct vt_case *t)
{
	struct vgpu *vg = t->vg;
	struct device *dev = &vg->pdev->dev;
	struct vgpu_bo *bo, *tmp;
	struct vgpu_cp *cp;
	u64 end;
	int ret;

	BUILD_BUG_ON(VT_GPU_PAGE != VGPU_PTE_PAGE_SIZE);
	cp = kzalloc(sizeof(*cp), GFP_KERNEL);
	if (!cp)
		return vt_reason(t, -ENOMEM, "out of memory");
	cp->vg = vg;
	INIT_LIST_HEAD(&cp->bos);
	spin_lock_init(&cp->ih.lock);

	cp->hqds = vgpu_rd(vg, VGPU_REG_CP_HQD_COUNT);
	cp->pipes = vgpu_rd(vg, VGPU_REG_CP_COMPUTE_PIPES);
	cp->qpp = vgpu_rd(vg, VGPU_REG_CP_QUEUES_PER_PIPE);
	/* Pipes and queues must fit an IV's RING_ID (vgpu_ring_id_slot). */
	if (cp->hqds < 2 || cp->hqds > VGPU_BLOCK_HQD_COUNT || !cp->pipes || !cp->qpp ||
	    cp->pipes > FIELD_MAX(VGPU_IH_RING_ID_PIPE_MASK) + 1 ||
	    cp->qpp > FIELD_MAX(VGPU_IH_RING_ID_QUEUE_MASK) + 1 ||
	    cp->hqds > 1 + cp->pipes * cp->qpp) {
		ret = vt_reason(t, -ENODEV,
				"CP_HQD_COUNT %u, COMPUTE_PIPES %u, QUEUES_PER_PIPE %u: want 2..%u slots, 1 + pipes x queues",
				cp->hqds, cp->pipes, cp->qpp, (u32)VGPU_BLOCK_HQD_COUNT);
		goto err_free;
	}
	cp->fb_base = vgpu_rd64(vg, VGPU_REG_GMC_FB_BASE_LO, VGPU_REG_GMC_FB_BASE_HI);
	cp->vram_size = vgpu_rd64(vg, VGPU_REG_ID_VRAM_SIZE_LO, VGPU_REG_ID_VRAM_SIZE_HI);
	cp->gart_start = VT_GART_START;
	if (cp->gart_start < cp->fb_base + cp->vram_size &&
	    cp->fb_base < cp->gart_start + VT_GART_SIZE)
		cp->gart_start = ALIGN(cp->fb_base + cp->vram_size, SZ_1G);
	end = cp->gart_start + VT_GART_SIZE - 1;
	if (end >= BIT_ULL(VGPU_GPU_VA_BITS)) {
		ret = vt_reason(t, -ENOSPC, "no room for the GART above FB %#llx + %#llx",
				cp->fb_base, cp->vram_size);
		goto err_free;
	}

	cp->gart = dma_alloc_coherent(dev, VT_GART_PAGES * VGPU_PTE_BYTES, &cp->gart_dma,
				      GFP_KERNEL);
	if (!cp->gart) {
		ret = vt_reason(t, -ENOMEM, "dma_alloc_coherent(GART table) failed");
		goto err_free;
	}
	if ((cp->gart_dma & (VT_GPU_PAGE - 1)) || cp->gart_dma > VGPU_PTE_ADDRESS_MASK) {
		ret = vt_reason(t, -ERANGE, "GART table at DMA address %pad: not a PDE address",
				&cp->gart_dma);
		goto err_table;
	}
	memset(cp->gart, 0, VT_GART_PAGES * VGPU_PTE_BYTES);

	vgpu_gart_hw_init(cp);
	/*
	 * Nothing an earlier driver left in the L2 may reach our memory or our reads. Lines it
	 * left for memory that is gone are dropped (L2_STATUS.ERROR): that is not our failure.
	 */
	vgpu_wr(vg, VGPU_REG_L2_CNTL, 0);
	if (vgpu_l2_flush(t, cp) == -ETIMEDOUT) {
		/* It may still write back: leak the table rather than free it under the device. */
		vgpu_wr(vg, VGPU_REG_GMC_GART_CNTL, 0);
		dev_warn(dev, "L2 flush did not finish: leaking the GART table\n");
		return -ETIMEDOUT;
	}

	cp->wb = vgpu_bo_alloc(t, cp, VT_WB_BYTES, false);
	if (!cp->wb) {
		ret = -ENOMEM;
		goto err_gart;
	}
	/* From here on the IH vector's handler looks at cp (it does nothing until enabled). */
	smp_store_release(&vg->cp, cp);
	ret = vgpu_ih_init(t, cp);
	if (ret)
		goto err_unpublish;

	vt_note(t,
		"cp: %u HQDs (gfx + %u pipes x %u queues), FB %#llx + %#llx, GART %#llx-%#llx (table %pad), IH %u KiB at %#llx on vector %u",
		cp->hqds, cp->pipes, cp->qpp, cp->fb_base, cp->vram_size, cp->gart_start, end,
		&cp->gart_dma, VT_IH_BYTES / SZ_1K, cp->ih.bo->gpu, VT_IH_VECTOR);
	return 0;

err_unpublish:
	WRITE_ONCE(vg->cp, NULL);
	synchronize_irq(pci_irq_vector(vg->pdev, VT_IH_VECTOR));
err_gart:
	vgpu_wr(vg, VGPU_REG_GMC_GART_CNTL, 0);
	vgpu_wr64(vg, VGPU_REG_GMC_GART_TABLE_LO, VGPU_REG_GMC_GART_TABLE_HI, 0);
	vgpu_gart_flush(cp);
	list_for_each_entry_safe(bo, tmp, &cp->bos, node) {
		dma_free_coherent(dev, bo->size, bo->cpu, bo->dma);
		kfree(bo);
	}
err_table:
	dma_free_coherent(dev, VT_GART_PAGES * VGPU_PTE_BYTES, cp->gart, cp->gart_dma);
err_free:
	kfree(cp);
	return ret;
}

/* The CP state, set up by the first caller. On failure t->err says why. */
struct vgpu_cp *vgpu_cp_get(struct vt_case *t)
{
	struct vgpu *vg = t->vg;

	if (vg->cp)
		return vg->cp;
	if (vg->cp_failed) {
		vt_reason(t, -EIO, "%s", vg->cp_why);
		return NULL;
	}
	if (vgpu_cp_init(t)) {
		vg->cp_failed = true;
		strscpy(vg->cp_why, t->err, sizeof(vg->cp_why));
		return NULL;
	}
	return vg->cp;
}

/*
 * Before a reset of the whole function (FLR) while queues run: the IH vector's handler stops
 * touching the ring and the registers (amdgpu disables its interrupt sources first).
 */
void vgpu_cp_suspend(struct vgpu_cp *cp)
{
	vgpu_ih_disable(cp);
}

/*
 * After a reset returned every register to its power-on value: the GART, the L2 and the IH ring
 * are programmed again with the memory the driver kept. Rings are restarted by their owners.
 */
int vgpu_cp_resume(struct vt_case *t, struct vgpu_cp *cp)
{
	vgpu_gart_hw_init(cp);
	vgpu_wr(cp->vg, VGPU_REG_L2_CNTL, 0);
	if (vgpu_l2_flush(t, cp) == -ETIMEDOUT)
		return -ETIMEDOUT;
	vgpu_ih_hw_init(cp);
	return 0;
}

/* Quiesces the engines before remove clears bus mastering. */
void vgpu_cp_stop(struct vgpu *vg)
{
	struct vgpu_cp *cp = vg->cp;
	unsigned int s;

	if (!cp)
		return;
	/* A scheduler a case left running halts first: its slots return to the kernel. */
	if (vgpu_rd(vg, VGPU_REG_MES_RING_ACTIVE) & 1)
		vgpu_wr(vg, VGPU_REG_MES_RING_ACTIVE, 0);
	for (s = 0; s < cp->hqds; s++) {
		if (cp->rings[s])
			vgpu_ring_destroy(NULL, cp->rings[s]);
		else
			vgpu_hqd_stop(NULL, cp, s);
	}
	vgpu_ih_disable(cp);
	/* No retry fault is handled any more: nothing may touch the tables or the CAM. */
	cancel_work_sync(&cp->ih.soft.work);
	/* A process address space a case left behind walks no table that is about to be freed. */
	for (s = 1; s < VGPU_VM_CONTEXTS; s++) {
		if (cp->vms[s])
			vgpu_wr(vg, VGPU_VM_CONTEXT_REG(s, VGPU_REG_VM_CONTEXT_CNTL), 0);
	}
	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, 0);
	vgpu_wr(vg, VGPU_REG_L2_CNTL, 0);
	vgpu_l2_flush(NULL, cp);
	vgpu_wr(vg, VGPU_REG_GMC_GART_CNTL, 0);
	vgpu_wr64(vg, VGPU_REG_GMC_GART_TABLE_LO, VGPU_REG_GMC_GART_TABLE_HI, 0);
	vgpu_gart_flush(cp);
}

/* Frees the CP memory once no interrupt handler can run. */
void vgpu_cp_free(struct vgpu *vg)
{
	struct vgpu_cp *cp = vg->cp;
	struct device *dev = &vg->pdev->dev;
	struct vgpu_bo *bo, *tmp;

	if (!cp)
		return;
	vg->cp = NULL;
	if (cp->wedged) {
		dev_warn(dev, "the device did not stop (a queue or an L2 write-back): leaking the GART, IH and ring memory rather than freeing memory it may use\n");
		return;
	}
	list_for_each_entry_safe(bo, tmp, &cp->bos, node) {
		dma_free_coherent(dev, bo->size, bo->cpu, bo->dma);
		kfree(bo);
	}
	dma_free_coherent(dev, VT_GART_PAGES * VGPU_PTE_BYTES, cp->gart, cp->gart_dma);
	kfree(cp);
}

/* A CP case's subtests when the CP could not be set up. */
enum vt_res vt_cp_unavailable(struct vt_case *t, const char *const *names,
			      unsigned int count)
{
	vt_sub_skip(t, names, count, "no CP");
	return vt_fail(t, "CP setup failed: %s", t->err);
}

enum vt_res vt_cp_end(struct vt_case *t, struct vgpu_cp *cp)
{
	if (cp->wedged)
		return vt_fail(t, "the device may still use CP memory (it is leaked): %s", t->err);
	return VT_PASS;
}
