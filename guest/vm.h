/* SPDX-License-Identifier: GPL-2.0 */
/*
 * GPUVM, driver side: process address spaces in VMIDs 1..15 as amdgpu builds them (vm.c).
 *
 *  - Page tables of 4 levels (PDB2 -> PDB1 -> PDB0 -> PTB, 9 bits each, 4 KiB pages, a 48-bit
 *    VA starting at 0), every table one coherent DMA page that the device walks by its DMA
 *    address (PDE_SYSTEM). Leaves map 4 KiB pages; PDE-as-PTE entries map 2 MiB (PDB0) and
 *    1 GiB (PDB1) huge pages, as amdgpu's PDE0-as-PTE does.
 *  - Tables can be built bound to no VMID (vgpu_vm_alloc): the MES scheduler binds them to a
 *    VMID of its choosing from the root PDE it is given (mes_queue.c).
 *  - The context registers (gfxhub_v3_0_setup_vmid_config), the PASID LUT
 *    (emit_pasid_mapping) and the invalidation engine handshake with the semaphore
 *    (gmc_v11_0_flush_vm_hub): take SEM, write REQ, poll ACK, release SEM.
 *  - Retry faults: the IH handler delegates each retry-fault IV to a work item (ih.c, as
 *    amdgpu_irq_delegate moves it to the soft ring); vgpu_vm_handle_retry then runs in process
 *    context like amdgpu_vm_handle_fault: it asks the VM's resolver for the page, writes the
 *    PTE, invalidates, and acknowledges the CAM entry (RETRY_CAM_ACK, amdgpu's retry_cam_ack).
 */
#ifndef VT_VM_H
#define VT_VM_H

#include <linux/bitfield.h>
#include <linux/mutex.h>
#include <linux/types.h>

#include "cp.h"

#define VT_VM_ENTRIES		512		/* entries per table: 9 bits a level */
#define VT_VM_LEVELS		4		/* PDB2, PDB1, PDB0, PTB */
#define VT_VM_DEPTH		3		/* CNTL.PAGE_TABLE_DEPTH: levels below root */
#define VT_VM_END_PAGE		((1ULL << (VGPU_GPU_VA_BITS - 12)) - 1)
#define VT_VM_ENGINE		4		/* amdgpu: engines 0, 1, 4..16 serve rings */
#define VT_VM_SHIFT(level)	(12 + 9 * (level))	/* bytes one entry of a level maps */
#define VT_SZ_2M		(1ULL << VT_VM_SHIFT(1))
#define VT_SZ_1G		(1ULL << VT_VM_SHIFT(2))

/* Fault policies of a context (CONTEXT_CNTL bits besides enable, depth and block size). */
#define VT_CNTL(f)		VGPU_REG_VM_CONTEXT_CNTL__##f##_MASK
#define VT_VM_INTERRUPTS	(VT_CNTL(RANGE_PROTECTION_FAULT_ENABLE_INTERRUPT) | \
				 VT_CNTL(DUMMY_PAGE_PROTECTION_FAULT_ENABLE_INTERRUPT) | \
				 VT_CNTL(PDE0_PROTECTION_FAULT_ENABLE_INTERRUPT) | \
				 VT_CNTL(VALID_PROTECTION_FAULT_ENABLE_INTERRUPT) | \
				 VT_CNTL(READ_PROTECTION_FAULT_ENABLE_INTERRUPT) | \
				 VT_CNTL(WRITE_PROTECTION_FAULT_ENABLE_INTERRUPT) | \
				 VT_CNTL(EXECUTE_PROTECTION_FAULT_ENABLE_INTERRUPT))
#define VT_VM_DEFAULTS		(VT_CNTL(RANGE_PROTECTION_FAULT_ENABLE_DEFAULT) | \
				 VT_CNTL(DUMMY_PAGE_PROTECTION_FAULT_ENABLE_DEFAULT) | \
				 VT_CNTL(PDE0_PROTECTION_FAULT_ENABLE_DEFAULT) | \
				 VT_CNTL(VALID_PROTECTION_FAULT_ENABLE_DEFAULT) | \
				 VT_CNTL(READ_PROTECTION_FAULT_ENABLE_DEFAULT) | \
				 VT_CNTL(WRITE_PROTECTION_FAULT_ENABLE_DEFAULT) | \
				 VT_CNTL(EXECUTE_PROTECTION_FAULT_ENABLE_DEFAULT))
/* No-retry faults interrupt and halt the queue (amdgpu_vm_fault_stop=always). */
#define VT_VM_HALT		VT_VM_INTERRUPTS
/* No-retry faults interrupt and go to the default page (amdgpu's default). */
#define VT_VM_DEFAULT_PAGE	(VT_VM_INTERRUPTS | VT_VM_DEFAULTS)
/* Invalid pages and permission faults wait for the driver (amdgpu noretry=0). */
#define VT_VM_RETRY		(VT_VM_INTERRUPTS | \
				 VT_CNTL(RETRY_PERMISSION_OR_INVALID_PAGE_FAULT))

/* Leaf PTE flags of process pages: system memory, snooped, MTYPE UC (no L2 in the way). */
#define VT_VM_PTE_SYS		(VGPU_PTE_VALID_MASK | VGPU_PTE_SYSTEM_MASK | \
				 VGPU_PTE_SNOOPED_MASK | \
				 FIELD_PREP(VGPU_PTE_MTYPE_MASK, VGPU_PTE_MTYPE_UC))
#define VT_VM_PTE_VRAM		(VGPU_PTE_VALID_MASK | \
				 FIELD_PREP(VGPU_PTE_MTYPE_MASK, VGPU_PTE_MTYPE_UC))
#define VT_VM_RW		(VGPU_PTE_READABLE_MASK | VGPU_PTE_WRITEABLE_MASK)
#define VT_VM_RWX		(VT_VM_RW | VGPU_PTE_EXECUTABLE_MASK)
/*
 * What amdgpu_vm_handle_fault writes for a retry fault it cannot serve on gfx11
 * (AMDGPU_VM_NORETRY_FLAGS_TF): an invalid combination the walker takes as a no-retry fault.
 */
#define VT_VM_PTE_NORETRY	(VGPU_PTE_VALID_MASK | VGPU_PTE_SYSTEM_MASK | VGPU_PTE_PRT_MASK)
/* A PRT page as gmc_v11_0_get_vm_pte writes it: VALID clear. */
#define VT_VM_PTE_PRT		(VGPU_PTE_PRT_MASK | VGPU_PTE_SNOOPED_MASK | \
				 VGPU_PTE_LOG_MASK | VGPU_PTE_SYSTEM_MASK)

/* One page table or directory: 512 entries in a coherent DMA page. */
struct vgpu_pt {
	__le64 *cpu;
	dma_addr_t dma;
	struct vgpu_pt *child[VT_VM_ENTRIES];	/* the next level's tables */
};

struct vgpu_vm;

/*
 * Gives the PTE a retry fault at va (page aligned) should be resolved with, or 0 if the page
 * cannot be served (it then gets VT_VM_PTE_NORETRY). Called from the fault work item with
 * vm->lock held.
 */
typedef u64 (*vgpu_vm_resolve_fn)(struct vgpu_vm *vm, u64 va, bool write, void *arg);

/* What the fault work item did for one VM; read by the cases. */
struct vgpu_vm_retry_stats {
	u32 handled;		/* retry-fault IVs handled (each acknowledged) */
	u32 resolved;		/* ... that mapped the page */
	u32 unresolved;		/* ... nobody could serve (the no-retry marker written) */
	u32 surplus;		/* ... whose page was already mapped: the IV was not needed */
	u32 flush_failed;	/* invalidations that timed out */
	u32 not_in_task;	/* ... not run in process context (a bug in the delegation) */
	u64 last_va;
};

struct vgpu_vm {
	struct vgpu_cp *cp;
	unsigned int vmid;	/* 0: bound to no VMID by the driver (vgpu_vm_alloc) */
	u16 pasid;
	u32 cntl;		/* CONTEXT_CNTL while enabled */
	struct mutex lock;	/* the tables, against the fault work item */
	struct vgpu_pt *root;	/* PDB2 */
	unsigned int tables;
	vgpu_vm_resolve_fn resolve;
	void *resolve_arg;
	struct vgpu_vm_retry_stats retry;
};

struct vgpu_vm *vgpu_vm_create(struct vt_case *t, struct vgpu_cp *cp, unsigned int vmid,
			       u16 pasid, u32 policy);
void vgpu_vm_destroy(struct vt_case *t, struct vgpu_vm *vm);
struct vgpu_vm *vgpu_vm_alloc(struct vt_case *t, struct vgpu_cp *cp, u16 pasid);
void vgpu_vm_free(struct vgpu_vm *vm);
u32 vgpu_vm_cntl(u32 policy);
int vgpu_vm_set_policy(struct vt_case *t, struct vgpu_vm *vm, u32 policy);
void vgpu_vm_set_resolver(struct vgpu_vm *vm, vgpu_vm_resolve_fn fn, void *arg);
u64 vgpu_vm_root_pde(struct vgpu_vm *vm);

int vgpu_vm_map(struct vt_case *t, struct vgpu_vm *vm, u64 va, u64 pte);
int vgpu_vm_map_range(struct vt_case *t, struct vgpu_vm *vm, u64 va, u64 pa, u64 size,
		      u64 flags);
int vgpu_vm_map_bo(struct vt_case *t, struct vgpu_vm *vm, u64 va, struct vgpu_bo *bo,
		   u64 rights);
int vgpu_vm_map_huge(struct vt_case *t, struct vgpu_vm *vm, u64 va, unsigned int level,
		     u64 pte);
int vgpu_vm_prepare(struct vt_case *t, struct vgpu_vm *vm, u64 va);
u64 vgpu_vm_read_pte(struct vgpu_vm *vm, u64 va);
int vgpu_vm_write_pte(struct vgpu_vm *vm, u64 va, u64 pte);

/* VM_FAULT_STATUS and FAULT_ADDR (as a byte address). */
struct vgpu_vm_latch {
	u32 status;
	u64 addr;
};

int vgpu_vm_flush_engine(struct vt_case *t, struct vgpu_cp *cp, unsigned int eng, u32 vmids);
int vgpu_vm_flush(struct vt_case *t, struct vgpu_vm *vm);
void vgpu_vm_handle_retry(struct vgpu_cp *cp, const struct vgpu_vm_fault *f);
void vgpu_vm_retry_get(struct vgpu_vm *vm, struct vgpu_vm_retry_stats *out);

int vgpu_vm_emit_ib(struct vt_case *t, struct vgpu_ring *r, struct vgpu_vm *vm, u64 va, u32 ndw,
		    u32 *seq);
int vgpu_vm_run_ib(struct vt_case *t, struct vgpu_ring *r, struct vgpu_vm *vm, u64 va, u32 ndw);

void vgpu_vm_latch_read(struct vgpu *vg, struct vgpu_vm_latch *l);
void vgpu_vm_latch_clear(struct vgpu *vg);
u32 vgpu_vm_status(u32 perm, u32 cid, bool write, unsigned int vmid);
void vgpu_vm_status_str(u32 st, char *buf, size_t len);
bool vgpu_vm_fault_is(const struct vgpu_vm_fault *f, const struct vgpu_vm *vm, u64 addr,
		      u32 access, bool retry, u32 want_status, bool check_status, char *why,
		      size_t len);

/*
 * The cases' kit: a VM, a code page mapped RWX at VT_VA_CODE for its IBs, and a kernel ring
 * (VMID 0) on which the IBs are submitted with the VM's VMID.
 */
#define VT_VA_CODE		0x0000100000000000ULL	/* 16 TiB: PDB2 entry 32 */
#define VT_VA_DATA		0x0000200000200000ULL	/* a data page of the cases */
#define VT_CODE_BYTES		SZ_16K

struct vgpu_vm_job {
	struct vgpu_cp *cp;
	struct vgpu_vm *vm;
	struct vgpu_bo *code;
	struct vgpu_ring *ring;
	u32 used;		/* dwords of code written so far */
};

int vgpu_vm_job_init(struct vt_case *t, struct vgpu_cp *cp, struct vgpu_vm_job *j,
		     unsigned int vmid, u16 pasid, u32 policy, unsigned int slot);
void vgpu_vm_job_fini(struct vt_case *t, struct vgpu_vm_job *j);
int vgpu_vm_job_ib(struct vt_case *t, struct vgpu_vm_job *j, const u32 *p, u32 n, u64 *va);
int vgpu_vm_job_emit(struct vt_case *t, struct vgpu_vm_job *j, const u32 *p, u32 n, u32 *seq);
int vgpu_vm_job_run(struct vt_case *t, struct vgpu_vm_job *j, const u32 *p, u32 n);
int vgpu_vm_fault_wait(struct vt_case *t, struct vgpu_cp *cp, unsigned int vmid, u32 count);
int vgpu_vm_halt_wait(struct vt_case *t, struct vgpu_ring *r);

/* A WRITE_DATA of one dword, bypassing the L2. */
static inline unsigned int vt_wr(u32 *p, u64 va, u32 val)
{
	return pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM, VGPU_PM4_CACHE_POLICY_BYPASS, va,
			     val);
}

/* A DMA_DATA copy of bytes, bypassing the L2 on both sides. */
static inline unsigned int vt_copy(u32 *p, u64 src, u64 dst, u32 bytes)
{
	return pm4_dma_data(p, vt_dma_ctl(VGPU_PM4_DMA_DATA_SEL_ADDR, VGPU_PM4_CACHE_POLICY_BYPASS,
					  VGPU_PM4_DMA_DATA_SEL_ADDR, VGPU_PM4_CACHE_POLICY_BYPASS),
			    src, dst, bytes);
}

/* A leaf PTE for a page at pa (a DMA address if system, else a VRAM offset). */
static inline u64 vt_vm_pte(u64 pa, bool system, u64 rights)
{
	return (pa & VGPU_PTE_ADDRESS_MASK) | (system ? VT_VM_PTE_SYS : VT_VM_PTE_VRAM) | rights;
}

#endif /* VT_VM_H */
