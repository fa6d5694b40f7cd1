/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vgpu_drm.ko: the device and the open file, shared by every part of the driver.
 *
 * Each block of the driver keeps its own state in its own struct (gart.h, ih.h, mes.h, vram.h,
 * kq.h, vm.h, userq.h) and this header only puts them together: a part adds fields to its own
 * struct in its own header, never here.
 */
#ifndef VGPU_DRM_DEV_H
#define VGPU_DRM_DEV_H

#include <linux/idr.h>
#include <linux/io.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/types.h>

#include <drm/drm_device.h>
#include <drm/drm_file.h>

#include "vgpu_abi.h"
#include "uapi/vgpu_drm.h"

#include "doorbell.h"
#include "gart.h"
#include "ih.h"
#include "kq.h"
#include "mes.h"
#include "userq.h"
#include "vram.h"

#define VGPU_GPU_PAGE		SZ_4K
#define VGPU_IH_VECTOR		0	/* the MSI-X vector the IH ring raises */

/* Module parameters (drv.c). */
extern unsigned int vgpu_kq_timeout_ms;
extern unsigned int vgpu_userq_timeout_ms;
extern unsigned int vgpu_hw_timeout_ms;

/* What the driver counts of its GEM objects, per domain (gem.c; shown in vgpu_bos). */
struct vgpu_bo_stats {
	atomic_t count[3];	/* system, VRAM, doorbell */
	atomic64_t bytes[3];
};

struct vgpu_dev {
	struct drm_device drm;
	struct pci_dev *pdev;
	void __iomem *regs;	/* BAR5 */
	void __iomem *db;	/* BAR2 */
	resource_size_t vram_bar;	/* BAR0 bus address ... */
	resource_size_t vram_window;	/* ... and length: the CPU-visible VRAM */
	resource_size_t db_bar;
	resource_size_t db_len;
	u64 vram_size;
	u64 fb_base;		/* GMC_FB_BASE: GPU address of VRAM offset 0 */
	u32 hqds, pipes, qpp;	/* CP_HQD_COUNT, COMPUTE_PIPES, QUEUES_PER_PIPE */
	unsigned int nvec;
	bool irq_on;

	/*
	 * The device stopped answering as it must (a queue that does not stop, an L2 write-back
	 * that does not finish): memory it may still use is leaked, never freed under it.
	 */
	bool wedged;

	struct vgpu_gart gart;
	struct vgpu_ih ih;
	struct vgpu_mes mes;
	struct vgpu_vram vram;
	struct vgpu_doorbells doorbells;
	struct vgpu_kq kq;
	struct vgpu_userq_dev userq;

	struct ida pasids;
	struct mutex inv_lock;	/* the invalidation engine the CPU drives */
	struct vgpu_bo_stats bos;

	struct mutex clients_lock;
	struct list_head clients;	/* struct vgpu_file, for debugfs */
};

struct vgpu_vm;

/* One open file of the render node: a process's context. */
struct vgpu_file {
	struct vgpu_dev *vdev;
	struct drm_file *file;
	struct list_head node;	/* vdev->clients */
	pid_t pid;
	struct vgpu_vm *vm;
	struct vgpu_kq_entity kq;	/* its kernel-queue jobs (kq.h) */
	struct vgpu_userq_mgr userq;	/* its user queues (userq.h) */
};

static inline struct vgpu_dev *to_vgpu_dev(struct drm_device *drm)
{
	return container_of(drm, struct vgpu_dev, drm);
}

static inline struct vgpu_file *to_vgpu_file(struct drm_file *file)
{
	return file->driver_priv;
}

/* ---- register access ---- */

static inline u32 vgpu_rd(struct vgpu_dev *vdev, unsigned long off)
{
	return ioread32(vdev->regs + off);
}

static inline void vgpu_wr(struct vgpu_dev *vdev, unsigned long off, u32 val)
{
	iowrite32(val, vdev->regs + off);
}

static inline u64 vgpu_rd64(struct vgpu_dev *vdev, unsigned long lo, unsigned long hi)
{
	return (u64)vgpu_rd(vdev, hi) << 32 | vgpu_rd(vdev, lo);
}

static inline void vgpu_wr64(struct vgpu_dev *vdev, unsigned long lo, unsigned long hi, u64 val)
{
	vgpu_wr(vdev, lo, lower_32_bits(val));
	vgpu_wr(vdev, hi, upper_32_bits(val));
}

static inline u32 vgpu_hqd_rd(struct vgpu_dev *vdev, unsigned int slot, u32 reg)
{
	return vgpu_rd(vdev, VGPU_HQD_REG(slot, reg));
}

static inline void vgpu_hqd_wr(struct vgpu_dev *vdev, unsigned int slot, u32 reg, u32 val)
{
	vgpu_wr(vdev, VGPU_HQD_REG(slot, reg), val);
}

/* Polls a register until (value & mask) == want, for at most vgpu_hw_timeout_ms. */
bool vgpu_poll(struct vgpu_dev *vdev, unsigned long off, u32 mask, u32 want);

/* ---- pci.c: the PCI function ---- */

int vgpu_pci_init(struct vgpu_dev *vdev);
void vgpu_pci_fini(struct vgpu_dev *vdev);
int vgpu_irq_init(struct vgpu_dev *vdev);
void vgpu_irq_fini(struct vgpu_dev *vdev);

/* ---- debugfs.c ---- */

void vgpu_debugfs_init(struct drm_minor *minor);

#endif /* VGPU_DRM_DEV_H */
