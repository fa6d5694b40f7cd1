// SPDX-License-Identifier: GPL-2.0
/*
 * The PCI function: regions and BAR mappings, bus mastering and the DMA mask, the IH's MSI-X
 * vector and its handler.
 */

#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/jiffies.h>

#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"

bool vgpu_poll(struct vgpu_dev *vdev, unsigned long off, u32 mask, u32 want)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(vgpu_hw_timeout_ms);

	for (;;) {
		bool done = (vgpu_rd(vdev, off) & mask) == want;

		if (done || time_after(jiffies, deadline))
			return done;
		usleep_range(10, 30);
	}
}

int vgpu_pci_init(struct vgpu_dev *vdev)
{
	static const int bars[] = { VGPU_BAR_VRAM, VGPU_BAR_DOORBELL, VGPU_BAR_REGS };
	struct pci_dev *pdev = vdev->pdev;
	unsigned int i;
	int ret;

	ret = pci_enable_device(pdev);
	if (ret)
		return ret;
	for (i = 0; i < ARRAY_SIZE(bars); i++) {
		if (!(pci_resource_flags(pdev, bars[i]) & IORESOURCE_MEM) ||
		    !pci_resource_len(pdev, bars[i])) {
			drm_err(&vdev->drm, "BAR%d is not an assigned memory BAR\n", bars[i]);
			ret = -ENODEV;
			goto err_disable;
		}
	}
	ret = pci_request_regions(pdev, KBUILD_MODNAME);
	if (ret)
		goto err_disable;
	ret = -ENOMEM;
	vdev->regs = pci_iomap(pdev, VGPU_BAR_REGS, 0);
	if (!vdev->regs)
		goto err_release;
	vdev->db = pci_iomap(pdev, VGPU_BAR_DOORBELL, 0);
	if (!vdev->db)
		goto err_unmap_regs;
	vdev->vram_bar = pci_resource_start(pdev, VGPU_BAR_VRAM);
	vdev->vram_window = pci_resource_len(pdev, VGPU_BAR_VRAM);
	vdev->db_bar = pci_resource_start(pdev, VGPU_BAR_DOORBELL);
	vdev->db_len = pci_resource_len(pdev, VGPU_BAR_DOORBELL);

	if (vgpu_rd(vdev, VGPU_REG_ID_MAGIC) != VGPU_ID_MAGIC_VALUE) {
		drm_err(&vdev->drm, "ID_MAGIC reads %#x: not a vgpu\n",
			vgpu_rd(vdev, VGPU_REG_ID_MAGIC));
		ret = -ENODEV;
		goto err_unmap_db;
	}
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(48));
	if (ret)
		goto err_unmap_db;
	pci_set_master(pdev);
	return 0;

err_unmap_db:
	pci_iounmap(pdev, vdev->db);
err_unmap_regs:
	pci_iounmap(pdev, vdev->regs);
err_release:
	pci_release_regions(pdev);
err_disable:
	pci_disable_device(pdev);
	return ret;
}

/* After every engine stopped: no DMA from here on. */
void vgpu_pci_fini(struct vgpu_dev *vdev)
{
	struct pci_dev *pdev = vdev->pdev;

	pci_clear_master(pdev);
	pci_iounmap(pdev, vdev->db);
	pci_iounmap(pdev, vdev->regs);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
}

static irqreturn_t vgpu_irq(int irq, void *data)
{
	/* MSI-X vectors are never shared, and the device has no status to read: it is ours. */
	vgpu_ih_process(data);
	return IRQ_HANDLED;
}

int vgpu_irq_init(struct vgpu_dev *vdev)
{
	struct pci_dev *pdev = vdev->pdev;
	int ret;

	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_MSIX);
	if (ret < 0)
		return ret;
	vdev->nvec = ret;
	ret = request_irq(pci_irq_vector(pdev, VGPU_IH_VECTOR), vgpu_irq, 0, "vgpu_drm-ih", vdev);
	if (ret) {
		pci_free_irq_vectors(pdev);
		return ret;
	}
	vdev->irq_on = true;
	return 0;
}

void vgpu_irq_fini(struct vgpu_dev *vdev)
{
	if (!vdev->irq_on)
		return;
	free_irq(pci_irq_vector(vdev->pdev, VGPU_IH_VECTOR), vdev);
	pci_free_irq_vectors(vdev->pdev);
	vdev->irq_on = false;
}
