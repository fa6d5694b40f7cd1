/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The VMID-0 GART and the kernel's own buffers (gart.c).
 *
 * The kernel's engines (the IH ring, the MES ring and its frames' memory, the kernel queue's ring
 * and fences, MQDs and gang contexts) address memory with VMID-0 GPU addresses. The GART is a flat
 * table of 8-byte PTEs in system memory (one per 4 KiB page) at a range above the frame-buffer
 * aperture; a kernel buffer (struct vgpu_kbo) is coherent DMA memory, optionally mapped into the
 * GART. Page tables of process VMs are kernel buffers too, walked by their DMA address, so they need
 * no GART pages.
 */
#ifndef VGPU_DRM_GART_H
#define VGPU_DRM_GART_H

#include <linux/mutex.h>
#include <linux/scatterlist.h>
#include <linux/types.h>

#define VGPU_GART_START		0x0000010000000000ULL	/* 1 TiB, above the FB aperture */
#define VGPU_GART_SIZE		SZ_64M
#define VGPU_GART_PAGES		(VGPU_GART_SIZE / SZ_4K)

struct vgpu_dev;

struct vgpu_gart {
	__le64 *table;
	dma_addr_t table_dma;
	u64 start;		/* GPU address of GART page 0 */
	struct mutex lock;	/* used, and the table */
	unsigned long *used;	/* VGPU_GART_PAGES bits */
	bool on;
};

/* A coherent DMA buffer of the kernel's, zeroed, optionally in the GART. */
struct vgpu_kbo {
	void *cpu;
	dma_addr_t dma;
	size_t size;		/* whole 4 KiB pages */
	u64 gpu;		/* GART address, 0 when not in the GART */
	unsigned int first;	/* first GART page */
};

#define VGPU_KBO_GART		BIT(0)	/* map into the GART (MTYPE UC) */

int vgpu_gart_init(struct vgpu_dev *vdev);
void vgpu_gart_fini(struct vgpu_dev *vdev);
void vgpu_gart_flush(struct vgpu_dev *vdev);
int vgpu_gart_l2_flush(struct vgpu_dev *vdev);

struct vgpu_kbo *vgpu_kbo_alloc(struct vgpu_dev *vdev, size_t size, u32 flags);
void vgpu_kbo_free(struct vgpu_dev *vdev, struct vgpu_kbo *kbo);

int vgpu_gart_map_sgt(struct vgpu_dev *vdev, struct sg_table *sgt, size_t size, u64 *gpu);
void vgpu_gart_unmap(struct vgpu_dev *vdev, u64 gpu, size_t size);

static inline u32 vgpu_kbo_rd(const struct vgpu_kbo *kbo, u32 off)
{
	return le32_to_cpu(READ_ONCE(((__le32 *)kbo->cpu)[off / 4]));
}

static inline void vgpu_kbo_wr(struct vgpu_kbo *kbo, u32 off, u32 val)
{
	WRITE_ONCE(((__le32 *)kbo->cpu)[off / 4], cpu_to_le32(val));
}

static inline u64 vgpu_kbo_rd64(const struct vgpu_kbo *kbo, u32 off)
{
	return le64_to_cpu(READ_ONCE(((__le64 *)kbo->cpu)[off / 8]));
}

static inline void vgpu_kbo_wr64(struct vgpu_kbo *kbo, u32 off, u64 val)
{
	WRITE_ONCE(((__le64 *)kbo->cpu)[off / 8], cpu_to_le64(val));
}

#endif /* VGPU_DRM_GART_H */
