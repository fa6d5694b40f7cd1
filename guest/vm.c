// SPDX-License-Identifier: GPL-2.0
/*
 * GPUVM, driver side (see vm.h): the page-table builder, context programming, the PASID LUT,
 * the invalidation engine handshake, process IB submission and the retry-fault handler.
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/preempt.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/wait.h>

#include "vm.h"

static unsigned int vt_vm_index(u64 va, unsigned int level)
{
	return (va >> VT_VM_SHIFT(level)) & (VT_VM_ENTRIES - 1);
}

static struct vgpu_pt *vgpu_pt_alloc(struct vgpu_vm *vm)
{
	struct device *dev = &vm->cp->vg->pdev->dev;
	struct vgpu_pt *pt;

	pt = kzalloc(sizeof(*pt), GFP_KERNEL);
	if (!pt)
		return NULL;
	pt->cpu = dma_alloc_coherent(dev, VT_GPU_PAGE, &pt->dma, GFP_KERNEL);
	if (!pt->cpu) {
		kfree(pt);
		return NULL;
	}
	/* A PDE holds a 64-byte aligned address below 2^48. */
	if (pt->dma & ~(dma_addr_t)VGPU_PDE_TABLE_ADDRESS_MASK) {
		dma_free_coherent(dev, VT_GPU_PAGE, pt->cpu, pt->dma);
		kfree(pt);
		return NULL;
	}
	memset(pt->cpu, 0, VT_GPU_PAGE);
	vm->tables++;
	return pt;
}

static void vgpu_pt_free(struct vgpu_vm *vm, struct vgpu_pt *pt)
{
	unsigned int i;

	if (!pt)
		return;
	for (i = 0; i < VT_VM_ENTRIES; i++)
		vgpu_pt_free(vm, pt->child[i]);
	dma_free_coherent(&vm->cp->vg->pdev->dev, VT_GPU_PAGE, pt->cpu, pt->dma);
	kfree(pt);
}

/* The PDE that points at a table (amdgpu_gmc_get_pde_for_bo of a GTT table). */
static u64 vgpu_pde(struct vgpu_pt *pt)
{
	return (pt->dma & VGPU_PDE_TABLE_ADDRESS_MASK) | VGPU_PDE_SYSTEM_MASK | VGPU_PDE_VALID_MASK;
}

u64 vgpu_vm_root_pde(struct vgpu_vm *vm)
{
	return vgpu_pde(vm->root);
}

/*
 * The table of level on va's path (3 is the root PDB2, 0 a PTB), allocating the tables on the
 * way if alloc. NULL: not there (or no memory), or a huge page maps the range. vm->lock held.
 */
static struct vgpu_pt *vgpu_vm_table(struct vgpu_vm *vm, u64 va, unsigned int level, bool alloc)
{
	struct vgpu_pt *pt = vm->root, *c;
	unsigned int l, i;

	for (l = VT_VM_DEPTH; l > level; l--) {
		i = vt_vm_index(va, l);
		c = pt->child[i];
		if (!c) {
			if (!alloc || (le64_to_cpu(READ_ONCE(pt->cpu[i])) & VGPU_PDE_PTE_MASK))
				return NULL;
			c = vgpu_pt_alloc(vm);
			if (!c)
				return NULL;
			pt->child[i] = c;
			/* The new table's zeros are in memory before the PDE that points at it. */
			wmb();
			WRITE_ONCE(pt->cpu[i], cpu_to_le64(vgpu_pde(c)));
		}
		pt = c;
	}
	return pt;
}

static int __vgpu_vm_map(struct vgpu_vm *vm, u64 va, u64 pte)
{
	struct vgpu_pt *pt = vgpu_vm_table(vm, va, 0, true);

	if (!pt)
		return -ENOMEM;
	WRITE_ONCE(pt->cpu[vt_vm_index(va, 0)], cpu_to_le64(pte));
	return 0;
}

/* Writes the leaf PTE of the 4 KiB page at va, allocating tables as needed. */
int vgpu_vm_map(struct vt_case *t, struct vgpu_vm *vm, u64 va, u64 pte)
{
	int ret;

	mutex_lock(&vm->lock);
	ret = __vgpu_vm_map(vm, va, pte);
	mutex_unlock(&vm->lock);
	if (ret)
		return vt_reason(t, ret, "VMID %u: no page table for %#llx (%u tables, out of memory or a huge page there)",
				 vm->vmid, va, vm->tables);
	return 0;
}

/* Maps size bytes at va to pa.. (DMA addresses or VRAM offsets per flags) with 4 KiB PTEs. */
int vgpu_vm_map_range(struct vt_case *t, struct vgpu_vm *vm, u64 va, u64 pa, u64 size,
		      u64 flags)
{
	u64 off;
	int ret;

	for (off = 0; off < size; off += VT_GPU_PAGE) {
		ret = vgpu_vm_map(t, vm, va + off, ((pa + off) & VGPU_PTE_ADDRESS_MASK) | flags);
		if (ret)
			return ret;
	}
	return 0;
}

/* Maps a coherent buffer at va with the rights given (PTE_READABLE and so on). */
int vgpu_vm_map_bo(struct vt_case *t, struct vgpu_vm *vm, u64 va, struct vgpu_bo *bo,
		   u64 rights)
{
	return vgpu_vm_map_range(t, vm, va, bo->dma, bo->size, VT_VM_PTE_SYS | rights);
}

/*
 * A PDE-as-PTE huge page: at PDB0 (level 1) it maps 2 MiB, at PDB1 (level 2) 1 GiB. va and the
 * address in pte are aligned to that size; no smaller table may map the range already.
 */
int vgpu_vm_map_huge(struct vt_case *t, struct vgpu_vm *vm, u64 va, unsigned int level,
		     u64 pte)
{
	u64 size = 1ULL << VT_VM_SHIFT(level);
	struct vgpu_pt *pt;
	unsigned int i;
	int ret = 0;

	if ((level != 1 && level != 2) || (va & (size - 1)) ||
	    ((pte & VGPU_PTE_ADDRESS_MASK) & (size - 1)))
		return vt_reason(t, -EINVAL, "huge page at level %u, VA %#llx, PTE %#llx: not aligned to %#llx",
				 level, va, pte, size);
	mutex_lock(&vm->lock);
	pt = vgpu_vm_table(vm, va, level, true);
	i = vt_vm_index(va, level);
	if (!pt)
		ret = -ENOMEM;
	else if (pt->child[i])
		ret = -EBUSY;
	else
		WRITE_ONCE(pt->cpu[i], cpu_to_le64(pte | VGPU_PDE_PTE_MASK));
	mutex_unlock(&vm->lock);
	if (ret)
		return vt_reason(t, ret, "VMID %u: no level-%u entry for a huge page at %#llx",
				 vm->vmid, level, va);
	return 0;
}

/* Allocates the tables down to va's PTB, so that its PTE can be written without allocating. */
int vgpu_vm_prepare(struct vt_case *t, struct vgpu_vm *vm, u64 va)
{
	struct vgpu_pt *pt;

	mutex_lock(&vm->lock);
	pt = vgpu_vm_table(vm, va, 0, true);
	mutex_unlock(&vm->lock);
	return pt ? 0 : vt_reason(t, -ENOMEM, "VMID %u: no PTB for %#llx", vm->vmid, va);
}

static u64 __vgpu_vm_read_pte(struct vgpu_vm *vm, u64 va)
{
	struct vgpu_pt *pt = vgpu_vm_table(vm, va, 0, false);

	return pt ? le64_to_cpu(READ_ONCE(pt->cpu[vt_vm_index(va, 0)])) : 0;
}

/* The leaf PTE of va as memory holds it (0: none). */
u64 vgpu_vm_read_pte(struct vgpu_vm *vm, u64 va)
{
	u64 pte;

	mutex_lock(&vm->lock);
	pte = __vgpu_vm_read_pte(vm, va);
	mutex_unlock(&vm->lock);
	return pte;
}

/* Rewrites an existing leaf PTE in memory, and nothing else: no invalidation. */
int vgpu_vm_write_pte(struct vgpu_vm *vm, u64 va, u64 pte)
{
	struct vgpu_pt *pt;

	mutex_lock(&vm->lock);
	pt = vgpu_vm_table(vm, va, 0, false);
	if (pt)
		WRITE_ONCE(pt->cpu[vt_vm_index(va, 0)], cpu_to_le64(pte));
	mutex_unlock(&vm->lock);
	/* The entry is in memory before anything the caller does next reaches the device. */
	wmb();
	return pt ? 0 : -ENOENT;
}

/*
 * The invalidation handshake of gmc_v11_0_flush_vm_hub on engine eng for the VMIDs in vmids:
 * take the engine's semaphore (a read returns 1 once it is ours), write REQ (every level,
 * legacy flush), poll ACK until the VMIDs' bits are set, release the semaphore. The fault
 * work item flushes on the same engine, so the semaphore is what keeps the two apart.
 */
int vgpu_vm_flush_engine(struct vt_case *t, struct vgpu_cp *cp, unsigned int eng, u32 vmids)
{
	struct vgpu *vg = cp->vg;
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	u32 req, ack;

	while (!(vgpu_rd(vg, VGPU_VM_INV_ENG_REG(eng, VGPU_REG_VM_INV_ENG_SEM)) & 1)) {
		if (time_after(jiffies, deadline))
			return vt_reason(t, -ETIMEDOUT,
					 "invalidation engine %u: SEM still taken after %u ms (ACK %#x)",
					 eng, timeout_ms,
					 vgpu_rd(vg, VGPU_VM_INV_ENG_REG(eng,
									 VGPU_REG_VM_INV_ENG_ACK)));
		usleep_range(5, 10);
	}
	/* The whole range, as gfxhub_v3_0_program_invalidation sets every engine. */
	vgpu_wr(vg, VGPU_VM_INV_ENG_REG(eng, VGPU_REG_VM_INV_ENG_ADDR_RANGE_LO), 0xffffffff);
	vgpu_wr(vg, VGPU_VM_INV_ENG_REG(eng, VGPU_REG_VM_INV_ENG_ADDR_RANGE_HI), 0x1f);
	req = FIELD_PREP(VGPU_REG_VM_INV_ENG_REQ__PER_VMID_INVALIDATE_REQ_MASK, vmids) |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PTES_MASK |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE0_MASK |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE1_MASK |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE2_MASK |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L1_PTES_MASK;
	/* The page tables are in memory before the device drops what it cached of them. */
	wmb();
	vgpu_wr(vg, VGPU_VM_INV_ENG_REG(eng, VGPU_REG_VM_INV_ENG_REQ), req);
	for (;;) {
		ack = vgpu_rd(vg, VGPU_VM_INV_ENG_REG(eng, VGPU_REG_VM_INV_ENG_ACK));
		if ((ack & vmids) == vmids)
			break;
		if (time_after(jiffies, deadline)) {
			vgpu_wr(vg, VGPU_VM_INV_ENG_REG(eng, VGPU_REG_VM_INV_ENG_SEM), 0);
			return vt_reason(t, -ETIMEDOUT,
					 "invalidation engine %u: ACK %#x %u ms after REQ %#x, want bits %#x",
					 eng, ack, timeout_ms, req, vmids);
		}
		usleep_range(5, 10);
	}
	vgpu_wr(vg, VGPU_VM_INV_ENG_REG(eng, VGPU_REG_VM_INV_ENG_SEM), 0);
	return 0;
}

int vgpu_vm_flush(struct vt_case *t, struct vgpu_vm *vm)
{
	return vgpu_vm_flush_engine(t, vm->cp, VT_VM_ENGINE, BIT(vm->vmid));
}

/* The CONTEXT_CNTL value of a context with the fault policy given (4 levels, 4 KiB PTBs). */
u32 vgpu_vm_cntl(u32 policy)
{
	return VGPU_REG_VM_CONTEXT_CNTL__ENABLE_CONTEXT_MASK |
	       FIELD_PREP(VGPU_REG_VM_CONTEXT_CNTL__PAGE_TABLE_DEPTH_MASK, VT_VM_DEPTH) |
	       FIELD_PREP(VGPU_REG_VM_CONTEXT_CNTL__PAGE_TABLE_BLOCK_SIZE_MASK, 0) | policy;
}

/* Changes the context's fault policy (CNTL); cached translations are not affected. */
int vgpu_vm_set_policy(struct vt_case *t, struct vgpu_vm *vm, u32 policy)
{
	vm->cntl = vgpu_vm_cntl(policy);
	vgpu_wr(vm->cp->vg, VGPU_VM_CONTEXT_REG(vm->vmid, VGPU_REG_VM_CONTEXT_CNTL), vm->cntl);
	return 0;
}

void vgpu_vm_set_resolver(struct vgpu_vm *vm, vgpu_vm_resolve_fn fn, void *arg)
{
	mutex_lock(&vm->lock);
	vm->resolve = fn;
	vm->resolve_arg = arg;
	mutex_unlock(&vm->lock);
}

/*
 * The page tables of a process address space with PASID pasid, bound to no VMID (vm->vmid 0):
 * an empty root directory. A scheduler (MES) binds it, given the root PDE, when one of the
 * process's queues is mapped; vgpu_vm_create binds it to a fixed VMID.
 */
struct vgpu_vm *vgpu_vm_alloc(struct vt_case *t, struct vgpu_cp *cp, u16 pasid)
{
	struct vgpu_vm *vm;

	vm = kzalloc(sizeof(*vm), GFP_KERNEL);
	if (!vm) {
		vt_reason(t, -ENOMEM, "out of memory");
		return NULL;
	}
	vm->cp = cp;
	vm->pasid = pasid;
	mutex_init(&vm->lock);
	vm->root = vgpu_pt_alloc(vm);
	if (!vm->root) {
		vt_reason(t, -ENOMEM, "no page for the root directory (or its DMA address does not fit a PDE)");
		kfree(vm);
		return NULL;
	}
	return vm;
}

/*
 * Frees the tables of a VM that no VMID uses any more (unbound, or its context disabled and
 * invalidated). While the CP is wedged (a queue did not stop) they are leaked, as the rest of
 * the CP memory is.
 */
void vgpu_vm_free(struct vgpu_vm *vm)
{
	if (!vm)
		return;
	if (vm->cp->wedged) {
		dev_warn(&vm->cp->vg->pdev->dev, "PASID %#x: leaking %u page tables a queue that did not stop may walk\n",
			 vm->pasid, vm->tables);
		return;
	}
	vgpu_pt_free(vm, vm->root);
	kfree(vm);
}

/*
 * A process address space in vmid with PASID pasid: an empty root directory, the context
 * programmed as gfxhub_v3_0_setup_vmid_config does (range 0..2^48, 4 levels, 4 KiB PTBs) with
 * the fault policy given, the PASID in the LUT, and the VMID's TLB invalidated.
 */
struct vgpu_vm *vgpu_vm_create(struct vt_case *t, struct vgpu_cp *cp, unsigned int vmid,
			       u16 pasid, u32 policy)
{
	struct vgpu *vg = cp->vg;
	struct vgpu_vm *vm;

	if (!vmid || vmid >= VGPU_VM_CONTEXTS || cp->vms[vmid]) {
		vt_reason(t, -EBUSY, "VMID %u is not a free process VMID", vmid);
		return NULL;
	}
	vm = vgpu_vm_alloc(t, cp, pasid);
	if (!vm)
		return NULL;
	vm->vmid = vmid;
	vgpu_ih_vmid_reset(cp, vmid);
	vgpu_wr(vg, VGPU_REG_VM_PASID_LUT_0 + 4 * vmid, pasid);
	vgpu_wr(vg, VGPU_VM_CONTEXT_REG(vmid, VGPU_REG_VM_CONTEXT_CNTL), 0);
	vgpu_wr64(vg, VGPU_VM_CONTEXT_REG(vmid, VGPU_REG_VM_CONTEXT_PAGE_TABLE_BASE_LO),
		  VGPU_VM_CONTEXT_REG(vmid, VGPU_REG_VM_CONTEXT_PAGE_TABLE_BASE_HI),
		  vgpu_pde(vm->root));
	vgpu_wr64(vg, VGPU_VM_CONTEXT_REG(vmid, VGPU_REG_VM_CONTEXT_START_LO),
		  VGPU_VM_CONTEXT_REG(vmid, VGPU_REG_VM_CONTEXT_START_HI), 0);
	vgpu_wr64(vg, VGPU_VM_CONTEXT_REG(vmid, VGPU_REG_VM_CONTEXT_END_LO),
		  VGPU_VM_CONTEXT_REG(vmid, VGPU_REG_VM_CONTEXT_END_HI), VT_VM_END_PAGE);
	vgpu_vm_set_policy(t, vm, policy);
	WRITE_ONCE(cp->vms[vmid], vm);
	/* Nothing an earlier user of the VMID left in its TLB may serve our addresses. */
	if (vgpu_vm_flush(t, vm)) {
		vgpu_vm_destroy(NULL, vm);
		return NULL;
	}
	return vm;
}

/*
 * Disables the context, invalidates its TLB, clears its PASID and frees the tables. The
 * queues that used the VMID must be stopped first.
 */
void vgpu_vm_destroy(struct vt_case *t, struct vgpu_vm *vm)
{
	struct vgpu_cp *cp;
	struct vgpu *vg;

	if (!vm)
		return;
	cp = vm->cp;
	vg = cp->vg;
	vgpu_wr(vg, VGPU_VM_CONTEXT_REG(vm->vmid, VGPU_REG_VM_CONTEXT_CNTL), 0);
	vgpu_vm_flush(t, vm);
	vgpu_wr64(vg, VGPU_VM_CONTEXT_REG(vm->vmid, VGPU_REG_VM_CONTEXT_PAGE_TABLE_BASE_LO),
		  VGPU_VM_CONTEXT_REG(vm->vmid, VGPU_REG_VM_CONTEXT_PAGE_TABLE_BASE_HI), 0);
	vgpu_wr(vg, VGPU_REG_VM_PASID_LUT_0 + 4 * vm->vmid, 0);
	WRITE_ONCE(cp->vms[vm->vmid], NULL);
	/* A fault work item that already found this VM finishes before it goes. */
	vgpu_ih_soft_flush(cp);
	vgpu_vm_free(vm);
}

/*
 * A delegated retry fault, in process context (amdgpu_vm_handle_fault, then retry_cam_ack):
 * the VM of the IV's VMID and PASID maps the page if its resolver gives a PTE — else writes
 * the no-retry marker, as amdgpu does for compute contexts, so that the replay is a no-retry
 * fault — invalidates, and the CAM entry is acknowledged. An IV of no VM we know is
 * acknowledged too (the access then faults again).
 */
void vgpu_vm_handle_retry(struct vgpu_cp *cp, const struct vgpu_vm_fault *f)
{
	struct vgpu_vm *vm = READ_ONCE(cp->vms[f->vmid % VGPU_VM_CONTEXTS]);
	u64 va = f->addr & ~(u64)(VT_GPU_PAGE - 1);
	bool write = f->flags & VGPU_VM_IV_DW5_WRITE_MASK;
	u64 pte;

	if (vm && vm->pasid == f->pasid) {
		mutex_lock(&vm->lock);
		vm->retry.handled++;
		vm->retry.last_va = va;
		if (!in_task())
			vm->retry.not_in_task++;
		if (__vgpu_vm_read_pte(vm, va) & VGPU_PTE_VALID_MASK) {
			vm->retry.surplus++;
		} else {
			pte = vm->resolve ? vm->resolve(vm, va, write, vm->resolve_arg) : 0;
			if (pte)
				vm->retry.resolved++;
			else
				vm->retry.unresolved++;
			/* A page nobody serves faults again as a no-retry fault, not forever. */
			if (!__vgpu_vm_map(vm, va, pte ?: VT_VM_PTE_NORETRY) &&
			    vgpu_vm_flush(NULL, vm))
				vm->retry.flush_failed++;
		}
		mutex_unlock(&vm->lock);
	} else {
		cp->vm_orphans++;
	}
	vgpu_ih_cam_acked(cp, f->cam);
	vgpu_wr(cp->vg, VGPU_REG_VM_RETRY_CAM_ACK, f->cam);
}

/* The retry statistics of a VM, consistent with each other. */
void vgpu_vm_retry_get(struct vgpu_vm *vm, struct vgpu_vm_retry_stats *out)
{
	mutex_lock(&vm->lock);
	*out = vm->retry;
	mutex_unlock(&vm->lock);
}

/*
 * Emits an INDIRECT_BUFFER of ndw dwords at va run in the VM's VMID (amdgpu submits a
 * process's IB on a kernel ring this way), then an interrupting fence on the ring.
 */
int vgpu_vm_emit_ib(struct vt_case *t, struct vgpu_ring *r, struct vgpu_vm *vm, u64 va, u32 ndw,
		    u32 *seq)
{
	u32 p[4];
	int ret;

	ret = vgpu_ring_alloc(t, r, 4 + VT_FENCE_DW);
	if (ret)
		return ret;
	vgpu_ring_put(r, p, pm4_ib_vmid(p, va, ndw, vm->vmid));
	*seq = vgpu_ring_fence(r, true);
	vgpu_ring_commit(r);
	vgpu_ring_kick(r);
	return 0;
}

/* The same, and waits for the fence. */
int vgpu_vm_run_ib(struct vt_case *t, struct vgpu_ring *r, struct vgpu_vm *vm, u64 va, u32 ndw)
{
	u32 seq;
	int ret = vgpu_vm_emit_ib(t, r, vm, va, ndw, &seq);

	return ret ?: vgpu_fence_wait(t, r, seq);
}

/* VM_FAULT_STATUS and the address it latched. */
void vgpu_vm_latch_read(struct vgpu *vg, struct vgpu_vm_latch *l)
{
	l->status = vgpu_rd(vg, VGPU_REG_VM_FAULT_STATUS);
	l->addr = ((u64)(vgpu_rd(vg, VGPU_REG_VM_FAULT_ADDR_HI) & 0xf) << 32 |
		   vgpu_rd(vg, VGPU_REG_VM_FAULT_ADDR_LO)) << 12;
}

/* Clears and re-arms the latch (amdgpu: WREG32_P(vm_l2_pro_fault_cntl, 1, ~1)). */
void vgpu_vm_latch_clear(struct vgpu *vg)
{
	vgpu_wr(vg, VGPU_REG_VM_FAULT_CNTL,
		VGPU_REG_VM_FAULT_CNTL__CLEAR_PROTECTION_FAULT_STATUS_ADDR_MASK);
}

/* The VM_FAULT_STATUS word of a fault (without MORE_FAULTS). */
u32 vgpu_vm_status(u32 perm, u32 cid, bool write, unsigned int vmid)
{
	return FIELD_PREP(VGPU_REG_VM_FAULT_STATUS__PERMISSION_FAULTS_MASK, perm) |
	       FIELD_PREP(VGPU_REG_VM_FAULT_STATUS__CID_MASK, cid) |
	       (write ? VGPU_REG_VM_FAULT_STATUS__RW_MASK : 0) |
	       FIELD_PREP(VGPU_REG_VM_FAULT_STATUS__VMID_MASK, vmid);
}

/* Describes a VM_FAULT_STATUS word: "vmid 1 cid 5 write perm 0x4 walker 0 map 0 more 0". */
void vgpu_vm_status_str(u32 st, char *buf, size_t len)
{
	snprintf(buf, len, "%#x (vmid %u cid %u %s perm %#x walker %u map %u prt %u more %u)", st,
		 (u32)FIELD_GET(VGPU_REG_VM_FAULT_STATUS__VMID_MASK, st),
		 (u32)FIELD_GET(VGPU_REG_VM_FAULT_STATUS__CID_MASK, st),
		 st & VGPU_REG_VM_FAULT_STATUS__RW_MASK ? "write" : "read",
		 (u32)FIELD_GET(VGPU_REG_VM_FAULT_STATUS__PERMISSION_FAULTS_MASK, st),
		 (u32)FIELD_GET(VGPU_REG_VM_FAULT_STATUS__WALKER_ERROR_MASK, st),
		 (u32)FIELD_GET(VGPU_REG_VM_FAULT_STATUS__MAPPING_ERROR_MASK, st),
		 (u32)FIELD_GET(VGPU_REG_VM_FAULT_STATUS__PRT_MASK, st),
		 (u32)FIELD_GET(VGPU_REG_VM_FAULT_STATUS__MORE_FAULTS_MASK, st));
}

/*
 * Whether a fault IV is the one expected: VMID, PASID, page address, access flag (one of
 * VM_IV_DW5_EXE/WRITE/READ), RETRY as given, and (if want_status) DW7. why says what differs.
 */
bool vgpu_vm_fault_is(const struct vgpu_vm_fault *f, const struct vgpu_vm *vm, u64 addr,
		      u32 access, bool retry, u32 want_status, bool check_status, char *why,
		      size_t len)
{
	u32 kinds = VGPU_VM_IV_DW5_EXE_MASK | VGPU_VM_IV_DW5_WRITE_MASK | VGPU_VM_IV_DW5_READ_MASK;
	bool is_retry = f->flags & VGPU_VM_IV_DW5_RETRY_MASK;
	char st[64];

	if (f->vmid == vm->vmid && f->pasid == vm->pasid && f->addr == (addr & ~0xfffULL) &&
	    (f->flags & kinds) == access && is_retry == retry &&
	    (!check_status || f->status == want_status))
		return true;
	vgpu_vm_status_str(f->status, st, sizeof(st));
	snprintf(why, len,
		 "IV vmid %u pasid %#x addr %#llx DW5 %#x status %s; want vmid %u pasid %#x addr %#llx access %#x%s",
		 f->vmid, f->pasid, f->addr, f->flags, st, vm->vmid, vm->pasid, addr & ~0xfffULL,
		 access, retry ? " RETRY" : "");
	return false;
}

/* ---- the cases' kit ---- */

/* A VM with the policy given, its code page mapped RWX, and a started ring on slot. */
int vgpu_vm_job_init(struct vt_case *t, struct vgpu_cp *cp, struct vgpu_vm_job *j,
		     unsigned int vmid, u16 pasid, u32 policy, unsigned int slot)
{
	memset(j, 0, sizeof(*j));
	j->cp = cp;
	j->vm = vgpu_vm_create(t, cp, vmid, pasid, policy);
	if (!j->vm)
		return -EIO;
	j->code = vgpu_bo_alloc(t, cp, VT_CODE_BYTES, false);
	if (!j->code || vgpu_vm_map_bo(t, j->vm, VT_VA_CODE, j->code, VT_VM_RWX))
		return -ENOMEM;
	j->ring = vgpu_ring_create(t, cp, slot, VT_RING_BYTES);
	return j->ring ? 0 : -EIO;
}

/* Stops the ring before the VM and the code page go. */
void vgpu_vm_job_fini(struct vt_case *t, struct vgpu_vm_job *j)
{
	vgpu_ring_destroy(t, j->ring);
	j->ring = NULL;
	vgpu_vm_destroy(t, j->vm);
	j->vm = NULL;
	vgpu_bo_free(j->cp, j->code);
	j->code = NULL;
}

/* Copies an IB of n dwords into the code page; *va is its address in the VM. */
int vgpu_vm_job_ib(struct vt_case *t, struct vgpu_vm_job *j, const u32 *p, u32 n, u64 *va)
{
	u32 at = ALIGN(j->used, 8);

	if (at + n > VT_CODE_BYTES / 4)
		return vt_reason(t, -ENOSPC, "code page full: %u + %u dwords of %u", at, n,
				 (u32)(VT_CODE_BYTES / 4));
	vgpu_ib_put(j->code, at, p, n);
	j->used = at + n;
	*va = VT_VA_CODE + 4ULL * at;
	return 0;
}

/* Submits packets as an IB in the job's VMID, followed by a fence on the ring. */
int vgpu_vm_job_emit(struct vt_case *t, struct vgpu_vm_job *j, const u32 *p, u32 n, u32 *seq)
{
	u64 va;

	return vgpu_vm_job_ib(t, j, p, n, &va) ?:
	       vgpu_vm_emit_ib(t, j->ring, j->vm, va, n, seq);
}

/* The same, waiting for the fence. */
int vgpu_vm_job_run(struct vt_case *t, struct vgpu_vm_job *j, const u32 *p, u32 n)
{
	u32 seq;

	return vgpu_vm_job_emit(t, j, p, n, &seq) ?: vgpu_fence_wait(t, j->ring, seq);
}

/* Waits until the IH handler has seen count VM-fault IVs of vmid. */
int vgpu_vm_fault_wait(struct vt_case *t, struct vgpu_cp *cp, unsigned int vmid, u32 count)
{
	struct vgpu_ih_vmid *v = &cp->ih.vm[vmid % VGPU_VM_CONTEXTS];

	if (wait_event_timeout(cp->vg->wq, READ_ONCE(v->faults) >= count,
			       msecs_to_jiffies(timeout_ms)))
		return 0;
	return vt_reason(t, -ETIMEDOUT,
			 "VMID %u: %u VM-fault IVs after %u ms, want %u (all VMIDs %u, VM_FAULTS %u, IH_ENTRIES %u)",
			 vmid, READ_ONCE(v->faults), timeout_ms, count, READ_ONCE(cp->ih.vm_faults),
			 vgpu_rd(cp->vg, VGPU_REG_VM_FAULTS), vgpu_rd(cp->vg, VGPU_REG_IH_ENTRIES));
}

/* Waits for the ring's queue to halt with CP_ERROR_TRANSLATION. */
int vgpu_vm_halt_wait(struct vt_case *t, struct vgpu_ring *r)
{
	struct vgpu *vg = r->cp->vg;
	bool halted = vgpu_hqd_wait_state(vg, r->slot, VGPU_HQD_STATE_HALTED);
	u32 st = vgpu_hqd_rd(vg, r->slot, VGPU_REG_HQD_STATUS);
	u32 err = FIELD_GET(VGPU_REG_HQD_STATUS__ERROR_MASK, st);

	if (halted && err == VGPU_CP_ERROR_TRANSLATION)
		return 0;
	return vt_reason(t, -EIO,
			 "slot %u is %s with error %u %u ms after the fault, want HALTED with CP_ERROR_TRANSLATION (%u)",
			 r->slot, vgpu_state_name(FIELD_GET(VGPU_REG_HQD_STATUS__STATE_MASK, st)),
			 err, timeout_ms, (u32)VGPU_CP_ERROR_TRANSLATION);
}
