// SPDX-License-Identifier: GPL-2.0
/*
 * The VMID-0 GART and kernel buffers (see gart.h).
 */

#include <linux/bitfield.h>
#include <linux/bitmap.h>
#include <linux/dma-mapping.h>
#include <linux/slab.h>

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"

/* Kernel pages bypass the L2: the CPU reads fences, rptrs and IVs the engines write. */
#define VGPU_GART_PTE_FLAGS	(VGPU_PTE_VALID_MASK | VGPU_PTE_SYSTEM_MASK | \
				 VGPU_PTE_SNOOPED_MASK | VGPU_PTE_EXECUTABLE_MASK | \
				 VGPU_PTE_READABLE_MASK | VGPU_PTE_WRITEABLE_MASK | \
				 FIELD_PREP(VGPU_PTE_MTYPE_MASK, VGPU_PTE_MTYPE_UC))

void vgpu_gart_flush(struct vgpu_dev *vdev)
{
	/* The PTEs are in memory before the device drops its cached translations. */
	wmb();
	vgpu_wr(vdev, VGPU_REG_GMC_VM_INVALIDATE, BIT(0));
}

/*
 * Writes back and invalidates the whole L2 and waits for it (L2_CONTROL starts it, L2_STATUS.BUSY
 * says when it is done): nothing an earlier driver left there may reach our memory, and nothing
 * of ours may be written back into memory we no longer own. Still busy: the device is wedged.
 */
int vgpu_gart_l2_flush(struct vgpu_dev *vdev)
{
	vgpu_wr(vdev, VGPU_REG_L2_CONTROL,
		VGPU_REG_L2_CONTROL__WB_MASK | VGPU_REG_L2_CONTROL__INV_MASK);
	if (vgpu_poll(vdev, VGPU_REG_L2_STATUS, VGPU_REG_L2_STATUS__BUSY_MASK, 0))
		return 0;
	drm_err(&vdev->drm, "L2 write-back did not finish: wedged\n");
	vdev->wedged = true;
	return -ETIMEDOUT;
}

static void vgpu_gart_hw_init(struct vgpu_dev *vdev)
{
	struct vgpu_gart *g = &vdev->gart;

	vgpu_wr(vdev, VGPU_REG_GMC_GART_CNTL, 0);
	vgpu_wr64(vdev, VGPU_REG_GMC_GART_START_LO, VGPU_REG_GMC_GART_START_HI, g->start);
	vgpu_wr64(vdev, VGPU_REG_GMC_GART_END_LO, VGPU_REG_GMC_GART_END_HI,
		  g->start + VGPU_GART_SIZE - 1);
	vgpu_wr64(vdev, VGPU_REG_GMC_GART_TABLE_LO, VGPU_REG_GMC_GART_TABLE_HI,
		  (g->table_dma & VGPU_PTE_ADDRESS_MASK) | VGPU_PTE_VALID_MASK |
		  VGPU_PTE_SYSTEM_MASK);
	vgpu_wr(vdev, VGPU_REG_GMC_GART_CNTL, VGPU_REG_GMC_GART_CNTL__ENABLE_MASK);
	vgpu_gart_flush(vdev);
	vgpu_wr(vdev, VGPU_REG_GMC_VM_FAULT_CNTL, VGPU_REG_GMC_VM_FAULT_CNTL__CLEAR_MASK);
}

int vgpu_gart_init(struct vgpu_dev *vdev)
{
	struct vgpu_gart *g = &vdev->gart;
	struct device *dev = &vdev->pdev->dev;

	mutex_init(&g->lock);
	g->start = VGPU_GART_START;
	/* Outside the frame-buffer aperture, whatever VRAM size the server was given. */
	if (g->start < vdev->fb_base + vdev->vram_size &&
	    vdev->fb_base < g->start + VGPU_GART_SIZE)
		g->start = ALIGN(vdev->fb_base + vdev->vram_size, SZ_1G);
	if (g->start + VGPU_GART_SIZE > BIT_ULL(VGPU_GPU_VA_BITS)) {
		drm_err(&vdev->drm, "no room for the GART above FB %#llx + %#llx\n",
			vdev->fb_base, vdev->vram_size);
		return -ENOSPC;
	}
	g->used = bitmap_zalloc(VGPU_GART_PAGES, GFP_KERNEL);
	if (!g->used)
		return -ENOMEM;
	g->table = dma_alloc_coherent(dev, VGPU_GART_PAGES * sizeof(u64), &g->table_dma,
				      GFP_KERNEL);
	if (!g->table) {
		bitmap_free(g->used);
		return -ENOMEM;
	}
	if ((g->table_dma & (SZ_4K - 1)) || g->table_dma > VGPU_PTE_ADDRESS_MASK) {
		drm_err(&vdev->drm, "GART table at DMA address %pad: not a PDE address\n",
			&g->table_dma);
		dma_free_coherent(dev, VGPU_GART_PAGES * sizeof(u64), g->table, g->table_dma);
		bitmap_free(g->used);
		return -ERANGE;
	}
	memset(g->table, 0, VGPU_GART_PAGES * sizeof(u64));
	vgpu_gart_hw_init(vdev);
	g->on = true;
	vgpu_wr(vdev, VGPU_REG_L2_CNTL, 0);
	return vgpu_gart_l2_flush(vdev);
}

/* Switches the GART off; the table is freed unless the device may still walk it. */
void vgpu_gart_fini(struct vgpu_dev *vdev)
{
	struct vgpu_gart *g = &vdev->gart;

	if (!g->table)
		return;
	vgpu_wr(vdev, VGPU_REG_GMC_GART_CNTL, 0);
	vgpu_wr64(vdev, VGPU_REG_GMC_GART_TABLE_LO, VGPU_REG_GMC_GART_TABLE_HI, 0);
	vgpu_gart_flush(vdev);
	g->on = false;
	if (vdev->wedged) {
		drm_warn(&vdev->drm, "device wedged: leaking the GART table\n");
		return;
	}
	dma_free_coherent(&vdev->pdev->dev, VGPU_GART_PAGES * sizeof(u64), g->table,
			  g->table_dma);
	g->table = NULL;
	bitmap_free(g->used);
}

/* Finds n free GART pages; gart.lock held. */
static int vgpu_gart_reserve(struct vgpu_gart *g, unsigned int n, unsigned int *first)
{
	unsigned long f = bitmap_find_next_zero_area(g->used, VGPU_GART_PAGES, 0, n, 0);

	if (f >= VGPU_GART_PAGES)
		return -ENOSPC;
	bitmap_set(g->used, f, n);
	*first = f;
	return 0;
}

/* A zeroed kernel buffer of size bytes (rounded up to pages), in the GART if flags say so. */
struct vgpu_kbo *vgpu_kbo_alloc(struct vgpu_dev *vdev, size_t size, u32 flags)
{
	struct vgpu_gart *g = &vdev->gart;
	struct vgpu_kbo *kbo;
	unsigned int n, i;

	size = ALIGN(size, SZ_4K);
	if (!size)
		return NULL;
	kbo = kzalloc(sizeof(*kbo), GFP_KERNEL);
	if (!kbo)
		return NULL;
	kbo->cpu = dma_alloc_coherent(&vdev->pdev->dev, size, &kbo->dma, GFP_KERNEL);
	if (!kbo->cpu)
		goto err_free;
	/* A PTE or PDE holds a 4 KiB aligned address below 2^48. */
	if ((kbo->dma & (SZ_4K - 1)) || kbo->dma + size - 1 > VGPU_PTE_ADDRESS_MASK)
		goto err_dma;
	memset(kbo->cpu, 0, size);
	kbo->size = size;
	if (!(flags & VGPU_KBO_GART))
		return kbo;

	n = size / SZ_4K;
	mutex_lock(&g->lock);
	if (vgpu_gart_reserve(g, n, &kbo->first)) {
		mutex_unlock(&g->lock);
		goto err_dma;
	}
	for (i = 0; i < n; i++)
		g->table[kbo->first + i] =
			cpu_to_le64(((kbo->dma + (u64)i * SZ_4K) & VGPU_PTE_ADDRESS_MASK) |
				    VGPU_GART_PTE_FLAGS);
	mutex_unlock(&g->lock);
	kbo->gpu = g->start + (u64)kbo->first * SZ_4K;
	/* Pages that were invalid are never cached: no flush needed to map new ones. */
	wmb();
	return kbo;

err_dma:
	dma_free_coherent(&vdev->pdev->dev, size, kbo->cpu, kbo->dma);
err_free:
	kfree(kbo);
	return NULL;
}

/* Unmaps size bytes of GART at gpu and invalidates, so the pages can be reused. */
void vgpu_gart_unmap(struct vgpu_dev *vdev, u64 gpu, size_t size)
{
	struct vgpu_gart *g = &vdev->gart;
	unsigned int first = (gpu - g->start) / SZ_4K, n = size / SZ_4K, i;

	mutex_lock(&g->lock);
	for (i = 0; i < n; i++)
		g->table[first + i] = 0;
	vgpu_gart_flush(vdev);
	bitmap_clear(g->used, first, n);
	mutex_unlock(&g->lock);
}

/*
 * Frees a kernel buffer the device no longer uses. While the device is wedged it may still
 * use any of them: leaked.
 */
void vgpu_kbo_free(struct vgpu_dev *vdev, struct vgpu_kbo *kbo)
{
	if (!kbo || vdev->wedged)
		return;
	if (kbo->gpu)
		vgpu_gart_unmap(vdev, kbo->gpu, kbo->size);
	dma_free_coherent(&vdev->pdev->dev, kbo->size, kbo->cpu, kbo->dma);
	kfree(kbo);
}

/*
 * Maps the first size bytes of a DMA-mapped scatter list into the GART (for the kernel queue's
 * copies and fills of system BOs); *gpu gets the address. Undo with vgpu_gart_unmap.
 */
int vgpu_gart_map_sgt(struct vgpu_dev *vdev, struct sg_table *sgt, size_t size, u64 *gpu)
{
	struct vgpu_gart *g = &vdev->gart;
	unsigned int n = size / SZ_4K, first, i = 0;
	struct scatterlist *sg;
	unsigned int k;
	u64 off;
	int ret;

	mutex_lock(&g->lock);
	ret = vgpu_gart_reserve(g, n, &first);
	if (ret)
		goto out;
	for_each_sgtable_dma_sg(sgt, sg, k) {
		dma_addr_t a = sg_dma_address(sg);

		for (off = 0; off < sg_dma_len(sg) && i < n; off += SZ_4K, i++)
			g->table[first + i] = cpu_to_le64(((a + off) & VGPU_PTE_ADDRESS_MASK) |
							  VGPU_GART_PTE_FLAGS);
	}
	if (i < n) {
		for (k = 0; k < i; k++)
			g->table[first + k] = 0;
		bitmap_clear(g->used, first, n);
		ret = -EINVAL;
		goto out;
	}
	*gpu = g->start + (u64)first * SZ_4K;
	wmb();
out:
	mutex_unlock(&g->lock);
	return ret;
}
