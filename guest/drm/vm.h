/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The GPU VM of an open file (vm.c, vm_pt.c, va.c).
 *
 * One address space per file: a PASID (ida), 4-level page tables (PDB2 -> PDB1 -> PDB0 -> PTB,
 * 9 bits each, 4 KiB pages, 48-bit VA) in kernel buffers the device walks by DMA address, and
 * the list of mappings GEM_VA made. The tables are bound to no VMID by the driver: MES gives the
 * process a VMID when one of its queues is mapped (from ADD_QUEUE's vgpu_vm_pd_addr), and the
 * kernel queue points its reserved VMID at them before a job of the file (kq.c).
 *
 * TLB invalidation is by PASID: every VMID whose VM_PASID_LUT entry holds the VM's PASID (what
 * MES gave it, and the kernel queue's VMID while it runs the file's job) is invalidated through
 * the invalidation engine. A VMID MES gives later is invalidated by MES as it gives it.
 *
 * Locking: vm->lock covers the tables and the mappings. GEM_VA UNMAP asks the user-queue part
 * (vgpu_userq_va_busy) with vm->lock held, so a user queue created with vm->lock held
 * (vgpu_vm_lock, the _locked lookups) cannot race an UNMAP of its ranges: lock order vm->lock,
 * then the user-queue lock.
 */
#ifndef VGPU_DRM_VM_H
#define VGPU_DRM_VM_H

#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/types.h>

struct dma_fence;
struct drm_gem_object;
struct vgpu_dev;
struct vgpu_file;
struct vgpu_kbo;
struct vgpu_bo;

#define VGPU_VM_LEVELS		4
#define VGPU_VM_ENTRIES		512
#define VGPU_VM_DEPTH		3		/* CNTL.PAGE_TABLE_DEPTH: levels below the root */
#define VGPU_VM_END_PAGE	((1ULL << (VGPU_GPU_VA_BITS - 12)) - 1)
/* The user VA range: the first page never (VA 0 is invalid), the canonical lower half. */
#define VGPU_VA_START		SZ_4K
#define VGPU_VA_TOP		(1ULL << 47)
/* The top GiB of the lower half is the driver's: per-queue fence pages (vgpu_vm_map_kernel). */
#define VGPU_VA_RESERVED_SIZE	SZ_1G
#define VGPU_VA_RESERVED_START	(VGPU_VA_TOP - VGPU_VA_RESERVED_SIZE)
#define VGPU_VA_END		VGPU_VA_RESERVED_START

#define VGPU_VM_PAGE_MASK	(VGPU_VM_PAGE_READABLE | VGPU_VM_PAGE_WRITEABLE | \
				 VGPU_VM_PAGE_EXECUTABLE)

/* One page table or directory. */
struct vgpu_pt {
	struct vgpu_kbo *kbo;		/* 512 entries */
	struct vgpu_pt **child;		/* directories: the next level's tables */
};

/* One GEM_VA mapping (obj) or a kernel page the driver mapped (kbo). */
struct vgpu_mapping {
	struct list_head node;		/* vm->mappings, sorted by va */
	u64 va, size, offset;
	u32 flags;			/* VGPU_VM_PAGE_* */
	struct drm_gem_object *obj;	/* holds a reference */
	struct vgpu_kbo *kbo;		/* not owned */
};

struct vgpu_vm {
	struct kref ref;		/* the file, and kernel-queue jobs in flight */
	struct vgpu_dev *vdev;
	u64 id;				/* unique for the module's life (kq.c compares it) */
	u16 pasid;
	struct mutex lock;
	struct vgpu_pt *root;
	struct list_head mappings;
	u32 nmappings;
	u32 tables;
	u32 flushes;
};

struct vgpu_vm *vgpu_vm_create(struct vgpu_dev *vdev);
struct vgpu_vm *vgpu_vm_get(struct vgpu_vm *vm);
void vgpu_vm_put(struct vgpu_vm *vm);
void vgpu_vm_unmap_all(struct vgpu_vm *vm);

u64 vgpu_vm_pd_addr(struct vgpu_vm *vm);
u16 vgpu_vm_pasid(struct vgpu_vm *vm);
u32 vgpu_vm_context_cntl(void);
int vgpu_vm_flush_tlb(struct vgpu_vm *vm);

void vgpu_vm_lock(struct vgpu_vm *vm);
void vgpu_vm_unlock(struct vgpu_vm *vm);
const struct vgpu_mapping *vgpu_vm_find_locked(struct vgpu_vm *vm, u64 va, u64 size);

int vgpu_vm_map_bo(struct vgpu_vm *vm, struct drm_gem_object *obj, u64 va, u64 offset,
		   u64 size, u32 flags);
int vgpu_vm_unmap_bo(struct vgpu_file *vf, struct drm_gem_object *obj, u64 va, u64 size);
int vgpu_vm_map_kernel(struct vgpu_vm *vm, struct vgpu_kbo *kbo, u64 va, u32 flags);
int vgpu_vm_unmap_kernel(struct vgpu_vm *vm, u64 va);
int vgpu_vm_remap_bo(struct vgpu_vm *vm, struct vgpu_bo *bo);
int vgpu_vm_add_fence(struct vgpu_vm *vm, struct dma_fence *fence);

/* vm_pt.c: the page-table builder (vm->lock held) */
struct vgpu_pt *vgpu_pt_alloc(struct vgpu_vm *vm, bool dir);
void vgpu_pt_free(struct vgpu_vm *vm, struct vgpu_pt *pt, unsigned int level);
u64 vgpu_pt_pde(const struct vgpu_pt *pt);
int vgpu_pt_write(struct vgpu_vm *vm, u64 va, u64 pte);
u64 vgpu_pt_pte(u64 addr, bool system, u32 flags);

/* va.c */
int vgpu_gem_va_ioctl(struct drm_device *drm, void *data, struct drm_file *file);

#endif /* VGPU_DRM_VM_H */
