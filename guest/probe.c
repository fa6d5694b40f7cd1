// SPDX-License-Identifier: GPL-2.0
/*
 * Bringing the PCI function up (regions, BAR mappings, bus mastering, the DMA mask,
 * every MSI-X vector with its own handler, coherent DMA buffers) and down again.
 */

#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "cp.h"
#include "vgpu.h"

/*
 * Brings the device up as a GPU driver would. On failure everything done so far is undone and
 * why says which step failed.
 */
int vgpu_setup(struct vgpu *vg, char *why, size_t whylen)
{
	static const int bars[] = { VGPU_BAR_VRAM, VGPU_BAR_DOORBELL, VGPU_BAR_REGS };
	struct pci_dev *pdev = vg->pdev;
	unsigned int i;
	int cap, ret;
	u32 n;

	ret = pci_enable_device(pdev);
	if (ret) {
		snprintf(why, whylen, "pci_enable_device: %d", ret);
		return ret;
	}
	for (i = 0; i < ARRAY_SIZE(bars); i++) {
		if (!(pci_resource_flags(pdev, bars[i]) & IORESOURCE_MEM) ||
		    !pci_resource_len(pdev, bars[i])) {
			snprintf(why, whylen, "BAR%d is not an assigned memory BAR", bars[i]);
			ret = -ENODEV;
			goto err_disable;
		}
	}
	ret = pci_request_regions(pdev, KBUILD_MODNAME);
	if (ret) {
		snprintf(why, whylen, "pci_request_regions: %d", ret);
		goto err_disable;
	}

	ret = -ENOMEM;
	vg->regs = pci_iomap(pdev, VGPU_BAR_REGS, 0);
	if (!vg->regs) {
		snprintf(why, whylen, "pci_iomap(BAR5) failed");
		goto err_release;
	}
	vg->vram_len = pci_resource_len(pdev, VGPU_BAR_VRAM);
	vg->vram = pci_iomap_wc(pdev, VGPU_BAR_VRAM, 0);
	if (!vg->vram) {
		snprintf(why, whylen, "pci_iomap_wc(BAR0) failed");
		goto err_unmap_regs;
	}
	vg->db = pci_iomap(pdev, VGPU_BAR_DOORBELL, 0);
	if (!vg->db) {
		snprintf(why, whylen, "pci_iomap(BAR2) failed");
		goto err_unmap_vram;
	}

	pci_set_master(pdev);
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret) {
		snprintf(why, whylen, "dma_set_mask_and_coherent(64): %d", ret);
		goto err_unmap_db;
	}

	n = vgpu_rd(vg, VGPU_REG_ID_MSIX_VECTORS);
	cap = pci_msix_vec_count(pdev);
	if (n < 1 || n > VGPU_REGS_MSIX_MAX_VECTORS || cap < 0 || n > (u32)cap) {
		snprintf(why, whylen,
			 "ID_MSIX_VECTORS=%u but the MSI-X capability has %d (ID_MAGIC=%#010x)",
			 n, cap, vgpu_rd(vg, VGPU_REG_ID_MAGIC));
		ret = -ENODEV;
		goto err_unmap_db;
	}
	ret = pci_alloc_irq_vectors(pdev, n, n, PCI_IRQ_MSIX);
	if (ret < 0) {
		snprintf(why, whylen, "pci_alloc_irq_vectors(%u, MSI-X): %d", n, ret);
		goto err_unmap_db;
	}
	vg->nvec = n;
	vg->vecs = kcalloc(n, sizeof(*vg->vecs), GFP_KERNEL);
	if (!vg->vecs) {
		snprintf(why, whylen, "out of memory");
		ret = -ENOMEM;
		goto err_free_vectors;
	}
	for (i = 0; i < n; i++) {
		struct vgpu_vec *v = &vg->vecs[i];

		v->vg = vg;
		v->index = i;
		atomic_set(&v->count, 0);
		snprintf(v->name, sizeof(v->name), "%s-%s-%u", KBUILD_MODNAME, pci_name(pdev), i);
		ret = request_irq(pci_irq_vector(pdev, i), vgpu_isr, 0, v->name, v);
		if (ret) {
			snprintf(why, whylen, "request_irq(vector %u): %d", i, ret);
			goto err_free_irqs;
		}
	}

	ret = -ENOMEM;
	vg->big = dma_alloc_coherent(&pdev->dev, VT_DMA_BIG, &vg->big_dma, GFP_KERNEL);
	if (!vg->big) {
		snprintf(why, whylen, "dma_alloc_coherent(%u) failed", VT_DMA_BIG);
		goto err_free_irqs;
	}
	vg->small = dma_alloc_coherent(&pdev->dev, VT_DMA_SMALL, &vg->small_dma, GFP_KERNEL);
	if (!vg->small) {
		snprintf(why, whylen, "dma_alloc_coherent(%u) failed", VT_DMA_SMALL);
		goto err_free_big;
	}
	return 0;

err_free_big:
	dma_free_coherent(&pdev->dev, VT_DMA_BIG, vg->big, vg->big_dma);
err_free_irqs:
	while (i--)
		free_irq(pci_irq_vector(pdev, i), &vg->vecs[i]);
	kfree(vg->vecs);
err_free_vectors:
	pci_free_irq_vectors(pdev);
err_unmap_db:
	pci_clear_master(pdev);
	pci_iounmap(pdev, vg->db);
err_unmap_vram:
	pci_iounmap(pdev, vg->vram);
err_unmap_regs:
	pci_iounmap(pdev, vg->regs);
err_release:
	pci_release_regions(pdev);
err_disable:
	pci_disable_device(pdev);
	return ret;
}

/*
 * Undoes vgpu_setup: the engines stopped, IH and GART off; no new DMA from there on; then a
 * running self-test transfer may end. Memory the device may still write is leaked.
 */
void vgpu_teardown(struct vgpu *vg)
{
	struct pci_dev *pdev = vg->pdev;
	unsigned int i;
	u32 st;

	vgpu_cp_stop(vg);
	pci_clear_master(pdev);
	st = vgpu_dma_wait_idle(vg);

	for (i = 0; i < vg->nvec; i++)
		free_irq(pci_irq_vector(pdev, i), &vg->vecs[i]);
	pci_free_irq_vectors(pdev);
	kfree(vg->vecs);
	vgpu_cp_free(vg);

	if (st == VGPU_SELFTEST_DMA_STATUS_BUSY) {
		dev_warn(&pdev->dev,
			 "self-test DMA still busy: leaking its buffers rather than freeing memory the device may write\n");
	} else {
		dma_free_coherent(&pdev->dev, VT_DMA_SMALL, vg->small, vg->small_dma);
		dma_free_coherent(&pdev->dev, VT_DMA_BIG, vg->big, vg->big_dma);
	}

	pci_iounmap(pdev, vg->db);
	pci_iounmap(pdev, vg->vram);
	pci_iounmap(pdev, vg->regs);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
}
