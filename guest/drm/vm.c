// SPDX-License-Identifier: GPL-2.0
/*
 * The GPU VM of an open file: PASID, mappings, TLB invalidation (see vm.h).
 */

#include <linux/atomic.h>
#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/dma-resv.h>
#include <linux/jiffies.h>
#include <linux/slab.h>

#include <drm/drm_gem.h>
#include <drm/drm_print.h>

#include "vgpu_drm_dev.h"
#include "gem.h"
#include "vm.h"

#define VGPU_VM_INV_ENGINE	4	/* the CPU's engine (kq.c's ring uses another) */
#define VGPU_VM_ADDRS_CHUNK	512	/* PTEs filled per vgpu_bo_addrs call */

static atomic64_t vgpu_vm_ids = ATOMIC64_INIT(0);

/*
 * The CONTEXT_CNTL of a process context: 4 levels, 4 KiB PTBs; no-retry faults interrupt and
 * halt the queue (amdgpu_vm_fault_stop=always), so a bad access is seen, never papered over.
 */
u32 vgpu_vm_context_cntl(void)
{
	return VGPU_REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK |
	       FIELD_PREP(VGPU_REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH_MASK, VGPU_VM_DEPTH) |
	       VGPU_REG_VM_CONTEXT_CNTL__RANGE_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK |
	       VGPU_REG_VM_CONTEXT_CNTL__DUMMY_PAGE_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK |
	       VGPU_REG_VM_CONTEXT_CNTL__PDE0_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK |
	       VGPU_REG_VM_CONTEXT_CNTL__VALID_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK |
	       VGPU_REG_VM_CONTEXT_CNTL__READ_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK |
	       VGPU_REG_VM_CONTEXT_CNTL__WRITE_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK |
	       VGPU_REG_VM_CONTEXT_CNTL__EXECUTE_PROTECTION_FAULT_ENABLE_INTERRUPT_MASK;
}

struct vgpu_vm *vgpu_vm_create(struct vgpu_dev *vdev)
{
	struct vgpu_vm *vm = kzalloc(sizeof(*vm), GFP_KERNEL);
	int pasid;

	if (!vm)
		return ERR_PTR(-ENOMEM);
	/* PASIDs are 16 bits in the LUT and the IVs; 0 means none. */
	pasid = ida_alloc_range(&vdev->pasids, 1, 0xffff, GFP_KERNEL);
	if (pasid < 0) {
		kfree(vm);
		return ERR_PTR(pasid == -ENOSPC ? -ENOSPC : pasid);
	}
	kref_init(&vm->ref);
	vm->vdev = vdev;
	vm->pasid = pasid;
	vm->id = atomic64_inc_return(&vgpu_vm_ids);
	mutex_init(&vm->lock);
	INIT_LIST_HEAD(&vm->mappings);
	vm->root = vgpu_pt_alloc(vm, true);
	if (!vm->root) {
		ida_free(&vdev->pasids, pasid);
		kfree(vm);
		return ERR_PTR(-ENOMEM);
	}
	return vm;
}

struct vgpu_vm *vgpu_vm_get(struct vgpu_vm *vm)
{
	kref_get(&vm->ref);
	return vm;
}

/*
 * The last user is gone: no queue and no kernel job can walk the tables any more (queues are
 * removed and kernel jobs finished before their references go).
 */
static void vgpu_vm_release(struct kref *ref)
{
	struct vgpu_vm *vm = container_of(ref, struct vgpu_vm, ref);
	struct vgpu_dev *vdev = vm->vdev;

	vgpu_vm_unmap_all(vm);
	/* A VMID still naming the PASID (MES keeps it until someone needs it) drops it all. */
	vgpu_vm_flush_tlb(vm);
	vgpu_pt_free(vm, vm->root, VGPU_VM_DEPTH);
	ida_free(&vdev->pasids, vm->pasid);
	mutex_destroy(&vm->lock);
	kfree(vm);
}

void vgpu_vm_put(struct vgpu_vm *vm)
{
	if (vm)
		kref_put(&vm->ref, vgpu_vm_release);
}

u64 vgpu_vm_pd_addr(struct vgpu_vm *vm)
{
	return vgpu_pt_pde(vm->root);
}

u16 vgpu_vm_pasid(struct vgpu_vm *vm)
{
	return vm->pasid;
}

void vgpu_vm_lock(struct vgpu_vm *vm)
{
	mutex_lock(&vm->lock);
}

void vgpu_vm_unlock(struct vgpu_vm *vm)
{
	mutex_unlock(&vm->lock);
}

/*
 * gmc_v11_0_flush_vm_hub on the CPU's engine for every VMID whose PASID LUT entry is the VM's:
 * take the semaphore, write REQ (every level), poll ACK, release. -ETIMEDOUT if the device does
 * not answer (the caller then must not free what the old entries pointed at).
 */
int vgpu_vm_flush_tlb(struct vgpu_vm *vm)
{
	struct vgpu_dev *vdev = vm->vdev;
	unsigned int eng = VGPU_VM_INV_ENGINE, v;
	u32 vmids = 0, req, ack;
	unsigned long deadline;
	int ret = 0;

	mutex_lock(&vdev->inv_lock);
	for (v = 1; v < VGPU_VM_CONTEXTS; v++)
		if ((vgpu_rd(vdev, VGPU_REG_VM_PASID_LUT_0 + 4 * v) & 0xffff) == vm->pasid)
			vmids |= BIT(v);
	vm->flushes++;
	if (!vmids)
		goto out;
	deadline = jiffies + msecs_to_jiffies(vgpu_hw_timeout_ms);
	while (!(vgpu_rd(vdev, VGPU_VM_INV_ENG_REG(eng, VGPU_REG_VM_INV_ENG_SEM)) & 1)) {
		if (time_after(jiffies, deadline)) {
			ret = -ETIMEDOUT;
			goto out;
		}
		usleep_range(5, 10);
	}
	vgpu_wr(vdev, VGPU_VM_INV_ENG_REG(eng, VGPU_REG_VM_INV_ENG_ADDR_RANGE_LO), 0xffffffff);
	vgpu_wr(vdev, VGPU_VM_INV_ENG_REG(eng, VGPU_REG_VM_INV_ENG_ADDR_RANGE_HI), 0x1f);
	req = FIELD_PREP(VGPU_REG_VM_INV_ENG_REQ__PER_VMID_INVALIDATE_REQ_MASK, vmids) |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PTES_MASK |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE0_MASK |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE1_MASK |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE2_MASK |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L1_PTES_MASK;
	/* The page tables are in memory before the device drops what it cached of them. */
	wmb();
	vgpu_wr(vdev, VGPU_VM_INV_ENG_REG(eng, VGPU_REG_VM_INV_ENG_REQ), req);
	for (;;) {
		ack = vgpu_rd(vdev, VGPU_VM_INV_ENG_REG(eng, VGPU_REG_VM_INV_ENG_ACK));
		if ((ack & vmids) == vmids)
			break;
		if (time_after(jiffies, deadline)) {
			ret = -ETIMEDOUT;
			break;
		}
		usleep_range(5, 10);
	}
	vgpu_wr(vdev, VGPU_VM_INV_ENG_REG(eng, VGPU_REG_VM_INV_ENG_SEM), 0);
out:
	mutex_unlock(&vdev->inv_lock);
	if (ret) {
		drm_err(&vdev->drm, "TLB invalidation of PASID %u (VMIDs %#x) timed out: wedged\n",
			vm->pasid, vmids);
		vdev->wedged = true;
	}
	return ret;
}

/* The mapping that holds all of [va, va + size), or NULL. vm->lock held. */
const struct vgpu_mapping *vgpu_vm_find_locked(struct vgpu_vm *vm, u64 va, u64 size)
{
	struct vgpu_mapping *m;

	if (!size || va + size < va)
		return NULL;
	list_for_each_entry(m, &vm->mappings, node) {
		if (m->va > va)
			break;
		if (va + size <= m->va + m->size)
			return m;
	}
	return NULL;
}

/* Where a new mapping goes in the sorted list, or NULL if it overlaps one. vm->lock held. */
static struct list_head *vgpu_vm_insert_pos(struct vgpu_vm *vm, u64 va, u64 size)
{
	struct vgpu_mapping *m;

	list_for_each_entry(m, &vm->mappings, node) {
		if (va + size <= m->va)
			return &m->node;
		if (va < m->va + m->size)
			return NULL;
	}
	return &vm->mappings;
}

/* Clears the PTEs of [va, va + size). vm->lock held. */
static void vgpu_vm_clear(struct vgpu_vm *vm, u64 va, u64 size)
{
	u64 off;

	for (off = 0; off < size; off += VGPU_GPU_PAGE)
		vgpu_pt_write(vm, va + off, 0);
}

/* Writes the PTEs of a BO mapping from the BO's current placement. vm->lock held. */
static int vgpu_vm_fill(struct vgpu_vm *vm, struct vgpu_bo *bo, u64 va, u64 offset, u64 size,
			u32 flags)
{
	u64 *addrs, done, i;
	bool system;
	int ret = 0;

	addrs = kmalloc_array(VGPU_VM_ADDRS_CHUNK, sizeof(*addrs), GFP_KERNEL);
	if (!addrs)
		return -ENOMEM;
	for (done = 0; done < size && !ret;) {
		unsigned int n = min_t(u64, (size - done) / VGPU_GPU_PAGE, VGPU_VM_ADDRS_CHUNK);

		ret = vgpu_bo_addrs(bo, offset + done, n, addrs, &system);
		for (i = 0; i < n && !ret; i++)
			ret = vgpu_pt_write(vm, va + done + i * VGPU_GPU_PAGE,
					    vgpu_pt_pte(addrs[i], system, flags));
		done += (u64)n * VGPU_GPU_PAGE;
	}
	kfree(addrs);
	return ret;
}

/* Maps size bytes of a BO from offset at va; the caller validated the numbers. */
int vgpu_vm_map_bo(struct vgpu_vm *vm, struct drm_gem_object *obj, u64 va, u64 offset,
		   u64 size, u32 flags)
{
	struct vgpu_bo *bo = to_vgpu_bo(obj);
	struct vgpu_mapping *m;
	struct list_head *pos;
	int ret;

	if (bo->kind == VGPU_BO_DOORBELL)
		return -EINVAL;	/* userspace writes doorbells through its CPU mapping */
	ret = vgpu_bo_pin_pages(bo);
	if (ret)
		return ret;
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	m->va = va;
	m->size = size;
	m->offset = offset;
	m->flags = flags;
	m->obj = obj;

	mutex_lock(&vm->lock);
	pos = vgpu_vm_insert_pos(vm, va, size);
	if (!pos) {
		ret = -EINVAL;	/* no implicit replace */
		goto err_unlock;
	}
	ret = vgpu_vm_fill(vm, bo, va, offset, size, flags);
	if (ret) {
		vgpu_vm_clear(vm, va, size);
		goto err_unlock;
	}
	drm_gem_object_get(obj);
	atomic_inc(&bo->va_maps);
	list_add_tail(&m->node, pos);
	vm->nmappings++;
	mutex_unlock(&vm->lock);
	/* Only invalid entries became valid (never cached); the contract flushes anyway. */
	return vgpu_vm_flush_tlb(vm);

err_unlock:
	mutex_unlock(&vm->lock);
	kfree(m);
	return ret;
}

/* Takes a mapping out: PTEs cleared and invalidated before the BO can go. vm->lock held. */
static void vgpu_vm_remove(struct vgpu_vm *vm, struct vgpu_mapping *m)
{
	vgpu_vm_clear(vm, m->va, m->size);
	list_del(&m->node);
	vm->nmappings--;
}

static void vgpu_mapping_free(struct vgpu_mapping *m)
{
	if (m->obj) {
		atomic_dec(&to_vgpu_bo(m->obj)->va_maps);
		drm_gem_object_put(m->obj);
	}
	kfree(m);
}

/* GEM_VA UNMAP: exactly one existing mapping (-ENOENT), not used by a live queue (-EBUSY). */
int vgpu_vm_unmap_bo(struct vgpu_file *vf, struct drm_gem_object *obj, u64 va, u64 size)
{
	struct vgpu_vm *vm = vf->vm;
	struct vgpu_mapping *m, *found = NULL;
	int ret;

	mutex_lock(&vm->lock);
	list_for_each_entry(m, &vm->mappings, node) {
		if (m->va == va && m->size == size && m->obj == obj) {
			found = m;
			break;
		}
	}
	if (!found) {
		mutex_unlock(&vm->lock);
		return -ENOENT;
	}
	if (vgpu_userq_va_busy(vf, va, size)) {
		mutex_unlock(&vm->lock);
		return -EBUSY;
	}
	vgpu_vm_remove(vm, found);
	mutex_unlock(&vm->lock);
	ret = vgpu_vm_flush_tlb(vm);
	/* A device that did not confirm the invalidation may still reach the pages: keep them. */
	if (!ret)
		vgpu_mapping_free(found);
	return ret;
}

/*
 * Maps a kernel buffer (a queue's fence page, for instance) into the VM at va, inside the
 * driver's reserved range; the caller keeps the buffer until vgpu_vm_unmap_kernel.
 */
int vgpu_vm_map_kernel(struct vgpu_vm *vm, struct vgpu_kbo *kbo, u64 va, u32 flags)
{
	struct vgpu_mapping *m;
	struct list_head *pos;
	u64 off;
	int ret = 0;

	if (va < VGPU_VA_RESERVED_START || va + kbo->size > VGPU_VA_TOP || (va & (SZ_4K - 1)))
		return -EINVAL;
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	m->va = va;
	m->size = kbo->size;
	m->flags = flags;
	m->kbo = kbo;
	mutex_lock(&vm->lock);
	pos = vgpu_vm_insert_pos(vm, va, kbo->size);
	if (!pos)
		ret = -EBUSY;
	for (off = 0; !ret && off < kbo->size; off += VGPU_GPU_PAGE)
		ret = vgpu_pt_write(vm, va + off, vgpu_pt_pte(kbo->dma + off, true, flags));
	if (ret) {
		if (pos)
			vgpu_vm_clear(vm, va, kbo->size);
		mutex_unlock(&vm->lock);
		kfree(m);
		return ret;
	}
	list_add_tail(&m->node, pos);
	vm->nmappings++;
	mutex_unlock(&vm->lock);
	return vgpu_vm_flush_tlb(vm);
}

int vgpu_vm_unmap_kernel(struct vgpu_vm *vm, u64 va)
{
	struct vgpu_mapping *m, *found = NULL;

	mutex_lock(&vm->lock);
	list_for_each_entry(m, &vm->mappings, node) {
		if (m->va == va && m->kbo) {
			found = m;
			vgpu_vm_remove(vm, m);
			break;
		}
	}
	mutex_unlock(&vm->lock);
	if (!found)
		return -ENOENT;
	kfree(found);
	return vgpu_vm_flush_tlb(vm);
}

/* Rewrites the PTEs of every mapping of bo from its current placement (after a move). */
int vgpu_vm_remap_bo(struct vgpu_vm *vm, struct vgpu_bo *bo)
{
	struct vgpu_mapping *m;
	int ret = 0;

	mutex_lock(&vm->lock);
	list_for_each_entry(m, &vm->mappings, node) {
		if (m->obj == &bo->shmem.base && !ret)
			ret = vgpu_vm_fill(vm, bo, m->va, m->offset, m->size, m->flags);
	}
	mutex_unlock(&vm->lock);
	return ret ?: vgpu_vm_flush_tlb(vm);
}

/* Takes every mapping out (file close; release). */
void vgpu_vm_unmap_all(struct vgpu_vm *vm)
{
	struct vgpu_mapping *m, *tmp;
	LIST_HEAD(gone);

	mutex_lock(&vm->lock);
	list_for_each_entry_safe(m, tmp, &vm->mappings, node) {
		vgpu_vm_remove(vm, m);
		list_add_tail(&m->node, &gone);
	}
	mutex_unlock(&vm->lock);
	if (list_empty(&gone) || vgpu_vm_flush_tlb(vm))
		return;	/* nothing to free, or the device may still use it: leaked */
	list_for_each_entry_safe(m, tmp, &gone, node)
		vgpu_mapping_free(m);
}

/*
 * Adds a kernel-queue job's fence to every BO mapped in the VM (the job may touch any of them:
 * SUBMIT names no BOs), as bookkeeping, so that GEM_WAIT_IDLE waits for it.
 */
int vgpu_vm_add_fence(struct vgpu_vm *vm, struct dma_fence *fence)
{
	struct vgpu_mapping *m;
	int ret = 0;

	mutex_lock(&vm->lock);
	list_for_each_entry(m, &vm->mappings, node) {
		if (!m->obj)
			continue;
		dma_resv_lock(m->obj->resv, NULL);
		ret = dma_resv_reserve_fences(m->obj->resv, 1);
		if (!ret)
			dma_resv_add_fence(m->obj->resv, fence, DMA_RESV_USAGE_BOOKKEEP);
		dma_resv_unlock(m->obj->resv);
		if (ret)
			break;
	}
	mutex_unlock(&vm->lock);
	return ret;
}
