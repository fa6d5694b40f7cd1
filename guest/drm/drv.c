// SPDX-License-Identifier: GPL-2.0
/*
 * vgpu_drm.ko: the render-node DRM driver of the vgpu virtual GPU. Module parameters, the
 * drm_driver and its ioctl table, open/close of the render node, INFO, the PCI driver's
 * probe (bring-up in dependency order) and remove (the same, backwards).
 */

#include <linux/module.h>
#include <linux/pci.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_gem_shmem_helper.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_prime.h>
#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"
#include "gem.h"
#include "vm.h"

unsigned int vgpu_kq_timeout_ms = 2000;
module_param_named(kq_timeout_ms, vgpu_kq_timeout_ms, uint, 0444);
MODULE_PARM_DESC(kq_timeout_ms, "kernel-queue job timeout before the queue is reset (ms)");

unsigned int vgpu_userq_timeout_ms = 2000;
module_param_named(userq_timeout_ms, vgpu_userq_timeout_ms, uint, 0644);
MODULE_PARM_DESC(userq_timeout_ms, "user queue without progress before it is reset (ms)");

unsigned int vgpu_hw_timeout_ms = 2000;
module_param_named(hw_timeout_ms, vgpu_hw_timeout_ms, uint, 0444);
MODULE_PARM_DESC(hw_timeout_ms, "how long a register handshake may take (ms)");

#define VGPU_MAX_QUEUES_PER_FILE	512	/* amdgpu's AMDGPU_MAX_USERQ_COUNT */
#define VGPU_EOP_BYTES			SZ_2K	/* the compute MQD's EOP buffer */
#define VGPU_EOP_ALIGN			256	/* CP_HQD_EOP_BASE_ADDR holds address >> 8 */

static int vgpu_info_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct vgpu_dev *vdev = to_vgpu_dev(drm);
	struct drm_vgpu_info *info = data;

	memset(info, 0, sizeof(*info));
	info->vram_size = vdev->vram_size;
	info->vram_visible_size = vdev->vram.visible;
	info->va_start = VGPU_VA_START;
	info->va_end = VGPU_VA_END;
	info->gpu_page_size = VGPU_GPU_PAGE;
	info->doorbell_page_size = VGPU_DOORBELL_PAGE;
	info->num_hqd_slots = vdev->mes.nslots;
	info->userq_ip_mask = BIT(VGPU_HW_IP_COMPUTE);
	info->eop_size = VGPU_EOP_BYTES;
	info->eop_alignment = VGPU_EOP_ALIGN;
	info->max_queues_per_file = VGPU_MAX_QUEUES_PER_FILE;
	return 0;
}

static const struct drm_ioctl_desc vgpu_ioctls[] = {
	DRM_IOCTL_DEF_DRV(VGPU_INFO, vgpu_info_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(VGPU_GEM_CREATE, vgpu_gem_create_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(VGPU_GEM_MMAP, vgpu_gem_mmap_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(VGPU_GEM_VA, vgpu_gem_va_ioctl, DRM_RENDER_ALLOW),
	VGPU_USERQ_IOCTLS
	DRM_IOCTL_DEF_DRV(VGPU_SUBMIT, vgpu_submit_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(VGPU_GEM_WAIT_IDLE, vgpu_gem_wait_idle_ioctl, DRM_RENDER_ALLOW),
};

static int vgpu_open(struct drm_device *drm, struct drm_file *file)
{
	struct vgpu_dev *vdev = to_vgpu_dev(drm);
	struct vgpu_file *vf;
	int ret;

	vf = kzalloc(sizeof(*vf), GFP_KERNEL);
	if (!vf)
		return -ENOMEM;
	vf->vdev = vdev;
	vf->file = file;
	vf->pid = task_tgid_nr(current);
	vf->vm = vgpu_vm_create(vdev);
	if (IS_ERR(vf->vm)) {
		ret = PTR_ERR(vf->vm);
		goto err_free;
	}
	ret = vgpu_kq_entity_init(vdev, &vf->kq);
	if (ret)
		goto err_vm;
	vgpu_userq_mgr_init(vf);
	file->driver_priv = vf;
	mutex_lock(&vdev->clients_lock);
	list_add_tail(&vf->node, &vdev->clients);
	mutex_unlock(&vdev->clients_lock);
	return 0;

err_vm:
	vgpu_vm_put(vf->vm);
err_free:
	kfree(vf);
	return ret;
}

/*
 * The file is gone (closed, or its process died): its queues go first (FREE of each), then its
 * kernel-queue jobs (waited for, or killed), then the VM once the last job has let go of it —
 * a job already on the ring keeps its mappings until its fence signals. BOs go with their last
 * reference (handles were dropped by DRM before this, mappings with the VM).
 */
static void vgpu_postclose(struct drm_device *drm, struct drm_file *file)
{
	struct vgpu_dev *vdev = to_vgpu_dev(drm);
	struct vgpu_file *vf = to_vgpu_file(file);

	mutex_lock(&vdev->clients_lock);
	list_del(&vf->node);
	mutex_unlock(&vdev->clients_lock);
	vgpu_userq_mgr_fini(vf);
	vgpu_kq_entity_fini(&vf->kq);
	vgpu_vm_put(vf->vm);
	kfree(vf);
}

DEFINE_DRM_GEM_FOPS(vgpu_fops);

static const struct drm_driver vgpu_drm_driver = {
	.driver_features = DRIVER_GEM | DRIVER_RENDER | DRIVER_SYNCOBJ | DRIVER_SYNCOBJ_TIMELINE,
	.open = vgpu_open,
	.postclose = vgpu_postclose,
	.ioctls = vgpu_ioctls,
	.num_ioctls = ARRAY_SIZE(vgpu_ioctls),
	.fops = &vgpu_fops,
	.gem_create_object = vgpu_gem_create_object,
	.prime_handle_to_fd = drm_gem_prime_handle_to_fd,
	.prime_fd_to_handle = drm_gem_prime_fd_to_handle,
	.gem_prime_import_sg_table = drm_gem_shmem_prime_import_sg_table,
	.gem_prime_mmap = drm_gem_prime_mmap,
	.debugfs_init = vgpu_debugfs_init,
	.name = "vgpu",
	.desc = "vgpu virtual GPU",
	.date = "20261201",
	.major = 1,
	.minor = 0,
};

/* What the device says about itself, checked before anything relies on it. */
static int vgpu_read_identity(struct vgpu_dev *vdev)
{
	u32 ver = vgpu_rd(vdev, VGPU_REG_ID_VERSION);

	vdev->vram_size = vgpu_rd64(vdev, VGPU_REG_ID_VRAM_SIZE_LO, VGPU_REG_ID_VRAM_SIZE_HI);
	vdev->fb_base = vgpu_rd64(vdev, VGPU_REG_GMC_FB_BASE_LO, VGPU_REG_GMC_FB_BASE_HI);
	vdev->hqds = vgpu_rd(vdev, VGPU_REG_CP_HQD_COUNT);
	vdev->pipes = vgpu_rd(vdev, VGPU_REG_CP_COMPUTE_PIPES);
	vdev->qpp = vgpu_rd(vdev, VGPU_REG_CP_QUEUES_PER_PIPE);
	/* MES and PROTECTED_FENCE_SIGNAL came with 1.3. */
	if (ver < (1 << 16 | 3)) {
		drm_err(&vdev->drm, "ID_VERSION %#x: need 1.3 (MES)\n", ver);
		return -ENODEV;
	}
	if (vdev->hqds <= VGPU_KQ_SLOT + 1 || vdev->hqds > VGPU_BLOCK_HQD_COUNT ||
	    !vdev->pipes || !vdev->qpp || vdev->hqds > 1 + vdev->pipes * vdev->qpp) {
		drm_err(&vdev->drm, "CP_HQD_COUNT %u, COMPUTE_PIPES %u, QUEUES_PER_PIPE %u\n",
			vdev->hqds, vdev->pipes, vdev->qpp);
		return -ENODEV;
	}
	if (!vdev->vram_size || vdev->vram_size & (SZ_4K - 1) ||
	    vdev->vram_window > vdev->vram_size) {
		drm_err(&vdev->drm, "VRAM %#llx with a BAR0 window of %#llx\n", vdev->vram_size,
			(u64)vdev->vram_window);
		return -ENODEV;
	}
	vdev->kq.slot = VGPU_KQ_SLOT;
	return 0;
}

/* Stops every engine before anything they use is freed. */
static void vgpu_hw_fini(struct vgpu_dev *vdev)
{
	vgpu_userq_dev_fini(vdev);
	vgpu_mes_fini(vdev);
	vgpu_kq_fini(vdev);
	vgpu_ih_fini(vdev);
	vgpu_irq_fini(vdev);
	vgpu_gart_l2_flush(vdev);
	vgpu_vram_fini(vdev);
	vgpu_gart_fini(vdev);
	vgpu_doorbell_fini(vdev);
}

static int vgpu_hw_init(struct vgpu_dev *vdev)
{
	int ret;

	ret = vgpu_read_identity(vdev);
	if (ret)
		return ret;
	ret = vgpu_doorbell_init(vdev);
	if (ret)
		return ret;
	ret = vgpu_gart_init(vdev);
	if (ret)
		goto err;
	ret = vgpu_irq_init(vdev);
	if (ret)
		goto err;
	ret = vgpu_ih_init(vdev);
	if (ret)
		goto err;
	ret = vgpu_vram_init(vdev);
	if (ret)
		goto err;
	/* The kernel queue's slot is active before MES is given the others. */
	ret = vgpu_kq_init(vdev);
	if (ret)
		goto err;
	ret = vgpu_mes_init(vdev);
	if (ret)
		goto err;
	ret = vgpu_userq_dev_init(vdev);
	if (ret)
		goto err;
	return 0;
err:
	vgpu_hw_fini(vdev);
	return ret;
}

static int vgpu_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct vgpu_dev *vdev;
	int ret;

	vdev = devm_drm_dev_alloc(&pdev->dev, &vgpu_drm_driver, struct vgpu_dev, drm);
	if (IS_ERR(vdev))
		return PTR_ERR(vdev);
	vdev->pdev = pdev;
	ida_init(&vdev->pasids);
	mutex_init(&vdev->inv_lock);
	mutex_init(&vdev->clients_lock);
	INIT_LIST_HEAD(&vdev->clients);
	pci_set_drvdata(pdev, vdev);

	ret = vgpu_pci_init(vdev);
	if (ret)
		return ret;
	ret = vgpu_hw_init(vdev);
	if (ret)
		goto err_pci;
	ret = drm_dev_register(&vdev->drm, 0);
	if (ret)
		goto err_hw;
	drm_info(&vdev->drm, "vgpu: VRAM %llu MiB (%llu visible), %u doorbell pages, MES %u slots, kernel queue on slot %u\n",
		 vdev->vram_size >> 20, (u64)vdev->vram.visible >> 20, vdev->doorbells.pages,
		 vdev->mes.nslots, vdev->kq.slot);
	return 0;

err_hw:
	vgpu_hw_fini(vdev);
err_pci:
	vgpu_pci_fini(vdev);
	return ret;
}

static void vgpu_remove(struct pci_dev *pdev)
{
	struct vgpu_dev *vdev = pci_get_drvdata(pdev);

	/* No new ioctl from here on; open files keep the drm_device until closed. */
	drm_dev_unplug(&vdev->drm);
	vgpu_hw_fini(vdev);
	vgpu_pci_fini(vdev);
	ida_destroy(&vdev->pasids);
}

static const struct pci_device_id vgpu_ids[] = {
	{ PCI_DEVICE(VGPU_PCI_VENDOR_ID, VGPU_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, vgpu_ids);

/*
 * No unbind through sysfs: remove stops the engines and unmaps the registers, which files still
 * open would use as they close. rmmod cannot happen with files open (they hold the module).
 */
static struct pci_driver vgpu_pci_driver = {
	.name = KBUILD_MODNAME,
	.id_table = vgpu_ids,
	.probe = vgpu_probe,
	.remove = vgpu_remove,
	.driver.suppress_bind_attrs = true,
};
module_pci_driver(vgpu_pci_driver);

MODULE_DESCRIPTION("vgpu virtual GPU: render-node DRM driver");
MODULE_LICENSE("GPL");
