// SPDX-License-Identifier: GPL-2.0
/*
 * The page-table builder of a file's GPU VM (see vm.h), in AMD's gfx11 formats: PDEs point at
 * the next table by DMA address (PDE_SYSTEM), leaves map 4 KiB pages of system memory (a DMA
 * address, snooped) or VRAM (an offset). Pages bypass the L2 (MTYPE UC): userspace polls what
 * the engines write without cache maintenance.
 */

#include <linux/bitfield.h>
#include <linux/slab.h>

#include "vgpu_drm_dev.h"
#include "vm.h"

#define VGPU_VM_SHIFT(level)	(12 + 9 * (level))

static unsigned int vgpu_pt_index(u64 va, unsigned int level)
{
	return (va >> VGPU_VM_SHIFT(level)) & (VGPU_VM_ENTRIES - 1);
}

struct vgpu_pt *vgpu_pt_alloc(struct vgpu_vm *vm, bool dir)
{
	struct vgpu_pt *pt = kzalloc(sizeof(*pt), GFP_KERNEL);

	if (!pt)
		return NULL;
	pt->kbo = vgpu_kbo_alloc(vm->vdev, SZ_4K, 0);
	if (!pt->kbo)
		goto err;
	if (dir) {
		pt->child = kcalloc(VGPU_VM_ENTRIES, sizeof(*pt->child), GFP_KERNEL);
		if (!pt->child)
			goto err_kbo;
	}
	vm->tables++;
	return pt;
err_kbo:
	vgpu_kbo_free(vm->vdev, pt->kbo);
err:
	kfree(pt);
	return NULL;
}

/* Frees a table and everything below it (level: 3 the root ... 0 a PTB). */
void vgpu_pt_free(struct vgpu_vm *vm, struct vgpu_pt *pt, unsigned int level)
{
	unsigned int i;

	if (!pt)
		return;
	if (pt->child) {
		for (i = 0; i < VGPU_VM_ENTRIES; i++)
			vgpu_pt_free(vm, pt->child[i], level - 1);
		kfree(pt->child);
	}
	vgpu_kbo_free(vm->vdev, pt->kbo);
	kfree(pt);
	vm->tables--;
}

/* The PDE that points at a table (amdgpu_gmc_get_pde_for_bo of a GTT table). */
u64 vgpu_pt_pde(const struct vgpu_pt *pt)
{
	return (pt->kbo->dma & VGPU_PDE_TABLE_ADDRESS_MASK) | VGPU_PDE_SYSTEM_MASK |
	       VGPU_PDE_VALID_MASK;
}

/* A leaf PTE for a page at addr (a DMA address if system, else a VRAM offset). */
u64 vgpu_pt_pte(u64 addr, bool system, u32 flags)
{
	u64 pte = (addr & VGPU_PTE_ADDRESS_MASK) | VGPU_PTE_VALID_MASK |
		  FIELD_PREP(VGPU_PTE_MTYPE_MASK, VGPU_PTE_MTYPE_UC);

	if (system)
		pte |= VGPU_PTE_SYSTEM_MASK | VGPU_PTE_SNOOPED_MASK;
	if (flags & VGPU_VM_PAGE_READABLE)
		pte |= VGPU_PTE_READABLE_MASK;
	if (flags & VGPU_VM_PAGE_WRITEABLE)
		pte |= VGPU_PTE_WRITEABLE_MASK;
	if (flags & VGPU_VM_PAGE_EXECUTABLE)
		pte |= VGPU_PTE_EXECUTABLE_MASK;
	return pte;
}

/*
 * Writes the leaf entry of the 4 KiB page at va, allocating the tables on the way (a pte of
 * 0 never allocates: there is nothing to clear where no table is). vm->lock held.
 */
int vgpu_pt_write(struct vgpu_vm *vm, u64 va, u64 pte)
{
	struct vgpu_pt *pt = vm->root, *c;
	unsigned int level, i;

	for (level = VGPU_VM_DEPTH; level > 0; level--) {
		i = vgpu_pt_index(va, level);
		c = pt->child[i];
		if (!c) {
			if (!pte)
				return 0;
			c = vgpu_pt_alloc(vm, level > 1);
			if (!c)
				return -ENOMEM;
			pt->child[i] = c;
			/* The new table's zeros are in memory before the PDE that points at it. */
			wmb();
			vgpu_kbo_wr64(pt->kbo, 8 * i, vgpu_pt_pde(c));
		}
		pt = c;
	}
	vgpu_kbo_wr64(pt->kbo, 8 * vgpu_pt_index(va, 0), pte);
	return 0;
}
