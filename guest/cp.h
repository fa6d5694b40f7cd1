/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The command processor, driver side: GART and buffers (cp.c), the IH ring (ih.c), HQD rings,
 * submission and fences (ring.c).
 *
 * What a GPU driver sets up before it can run anything on the CP, done once by the first CP
 * case (vgpu_cp_get) and torn down by remove:
 *
 *  - a flat GART of VT_GART_SIZE at VT_GART_START (above the frame-buffer aperture), its table
 *    in system memory (PDE with SYSTEM), and a page allocator that maps coherent DMA buffers
 *    into it (MTYPE UC for rings, IBs and fences; NC where a test wants the L2 involved);
 *  - a writeback page: the IH wptr and, per HQD slot, the rptr report and the fence dword;
 *  - the IH ring on MSI-X vector VT_IH_VECTOR, drained by that vector's handler, which keeps
 *    per-slot records of EOP and error IVs for the cases to check.
 *
 * Rings are per case: vgpu_ring_create() programs an HQD the way amdgpu does through MMIO and
 * vgpu_ring_destroy() stops it with DEQUEUE_RESET. Submission is alloc / put / commit / kick
 * (doorbell) with a 64-bit monotonic wptr in dwords; fences are RELEASE_MEM as gfx11 emits them.
 */
#ifndef VT_CP_H
#define VT_CP_H

#include <linux/bitmap.h>
#include <linux/ktime.h>
#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/workqueue.h>

#include "ktap.h"
#include "pm4.h"
#include "vgpu.h"

#define VT_GPU_PAGE		SZ_4K
#define VT_GART_START		0x0000010000000000ULL	/* 1 TiB, above the FB aperture */
#define VT_GART_SIZE		SZ_16M
#define VT_GART_PAGES		(VT_GART_SIZE / VT_GPU_PAGE)
/*
 * The IH ring holds 8192 entries (the device's largest; amdgpu also uses 256 KiB): the fences
 * case has 2,500 interrupting fences in flight, and under TCG on a busy host the handler can
 * fall behind that many (a 64 KiB ring overflowed in CI).
 */
#define VT_IH_BYTES		SZ_256K
#define VT_RING_BYTES		SZ_64K
#define VT_WB_BYTES		SZ_4K
/* Writeback page: the IH wptr at 0; per HQD slot the rptr report, the fence 8 bytes on. */
#define VT_WB_IH_WPTR		0
#define VT_WB_SLOT(s)		(64 + 64 * (s))
#define VT_DB_GFX		0x8b	/* qword doorbells: amdgpu's Navi10 GFX ring 0 ... */
#define VT_DB_MEC		0x03	/* ... and MEC ring 0 */
#define VT_STATE_LEN		128

#define VT_PTE_FLAGS		(VGPU_PTE_VALID_MASK | VGPU_PTE_SYSTEM_MASK | \
				 VGPU_PTE_SNOOPED_MASK | VGPU_PTE_EXECUTABLE_MASK | \
				 VGPU_PTE_READABLE_MASK | VGPU_PTE_WRITEABLE_MASK)

/* The ring sizes an HQD takes: 2^(QUEUE_SIZE+1) dwords, 256 B to 8 MiB. */
#define VT_RING_MIN_BYTES	(4U << (VGPU_CP_QUEUE_SIZE_MIN + 1))
#define VT_RING_MAX_BYTES	(4U << (VGPU_CP_QUEUE_SIZE_MAX + 1))

/* A coherent DMA buffer mapped into the GART. */
struct vgpu_bo {
	struct list_head node;
	void *cpu;
	dma_addr_t dma;
	size_t size;		/* whole GPU pages */
	u64 gpu;		/* GART address */
	unsigned int first;	/* first GART page */
	bool cached;		/* MTYPE NC: its lines may live in the L2 */
};

/* What the IH handler saw for one HQD slot; written under ih.lock. */
struct vgpu_ih_slot {
	u32 eop;		/* end-of-pipe IVs */
	u32 eop_ctxid;		/* DW4 (INT_CTXID) of the last one */
	ktime_t eop_time;	/* when the handler decoded it */
	u32 eop_unordered;	/* ctxids are fence seqs: one not above the one before */
	u32 eop_early;		/* decoded while the fence memory was below its ctxid */
	const __le32 *fence;	/* the ring's fence dword, sampled on every EOP IV */
	u32 fence_seen;		/* the last sample */
	u32 fence_backwards;	/* samples lower than the one before */
	u32 eop_proc;		/* EOP IVs of work in a process VMID (not counted in eop) */
	u32 eop_proc_ctxid;	/* ... the last one's DW4, VMID and PASID */
	u8 eop_proc_vmid;
	u16 eop_proc_pasid;
	u32 err;		/* CP error IVs (bad opcode, reserved bits, GPF) */
	u32 err_src;		/* source and data of the last one */
	u32 err_data[4];
};

/* One VM-fault IV as gmc_v11_0_process_interrupt decodes it. */
struct vgpu_vm_fault {
	u64 addr;		/* DW4 << 12 | (DW5 & 0xF) << 44 */
	u32 status;		/* DW7: the fault's VM_FAULT_STATUS word */
	u32 flags;		/* DW5 (VM_IV_DW5_*: EXE, WRITE, READ, RETRY) */
	u32 cam;		/* DW6 CAM index (retry faults) */
	u16 pasid;		/* DW3 */
	u8 vmid;		/* DW0 */
	ktime_t time;		/* when the handler decoded it */
};

/* The VM-fault IVs of one VMID; written under ih.lock. */
struct vgpu_ih_vmid {
	u32 faults;		/* VM-fault IVs */
	u32 retry;		/* ... with RETRY */
	u32 cam_busy;		/* retry IVs whose CAM index was still unacknowledged */
	u32 cam_dup_page;	/* retry IVs for a page with an unacknowledged CAM entry */
	struct vgpu_vm_fault first, last;
};

/* Retry faults delegated to process context (amdgpu's soft IH ring). */
#define VT_IH_SOFT_ENTRIES	256

struct vgpu_ih_soft {
	struct vgpu_vm_fault e[VT_IH_SOFT_ENTRIES];
	u32 head, tail;		/* free-running; under ih.lock */
	u32 dropped;		/* the ring was full: a fault nobody will acknowledge */
	u32 max_queued;
	DECLARE_BITMAP(cam_out, VGPU_VM_RETRY_CAM_ENTRIES);	/* IV seen, not yet acked */
	u64 cam_page[VGPU_VM_RETRY_CAM_ENTRIES];		/* ... for this page */
	u8 cam_vmid[VGPU_VM_RETRY_CAM_ENTRIES];			/* ... of this VMID */
	struct work_struct work;
};

/*
 * An end-of-pipe IV of a user queue (one MES maps: work in a process VMID, or on a slot no
 * kernel ring uses). Such a queue moves between slots, so these are kept in one log, not per slot.
 */
struct vgpu_ih_ueop {
	u32 ctxid;		/* DW4: INT_CTXID, or the doorbell offset (PROTECTED_FENCE_SIGNAL) */
	u16 pasid;		/* DW3 */
	u8 vmid;		/* DW0 */
	u8 slot;		/* from the ring id */
	ktime_t time;
};

#define VT_IH_UEOPS		256

/* The scheduler's IVs (MES_ERROR, MES_QUEUE_HUNG) and the user queues' EOP IVs. */
struct vgpu_ih_mes {
	u32 errors;		/* IH_SRC_MES_ERROR IVs */
	u32 err_data[4];	/* ... the last one's DW4..7: reason, opcode, ring offset, doorbell */
	u32 hung;		/* IH_SRC_MES_QUEUE_HUNG IVs */
	u32 hung_data[4];	/* ... the last one's DW4..7: doorbell, slot, rptr lo, hi */
	u16 hung_pasid;
	u32 ueops;		/* user-queue EOP IVs; the last VT_IH_UEOPS are in ueop[n % ...] */
	struct vgpu_ih_ueop ueop[VT_IH_UEOPS];
};

struct vgpu_ih {
	spinlock_t lock;	/* the ring state below; taken by the vector's handler */
	bool enabled;
	struct vgpu_bo *bo;
	const __le32 *ring;
	u32 mask;		/* ring bytes - 1 */
	u32 rptr;		/* bytes */
	u32 cntl;		/* IH_RB_CNTL while enabled */
	__le32 *wptr_wb;
	u32 ivs;		/* entries decoded */
	u32 overflows;		/* RB_OVERFLOW seen: entries were lost */
	u32 unknown;		/* IVs from no known client/source/ring */
	u32 unknown_dw0;
	u32 vm_faults;		/* VM-fault IVs of every VMID */
	u32 vm_bad_cam;		/* retry IVs with a CAM index beyond the CAM */
	struct vgpu_ih_vmid vm[VGPU_VM_CONTEXTS];
	struct vgpu_ih_soft soft;
	struct vgpu_ih_slot slot[VGPU_BLOCK_HQD_COUNT];
	struct vgpu_ih_mes mes;
};

struct vgpu_vm;

struct vgpu_ring {
	struct vgpu_cp *cp;
	unsigned int slot;
	u32 ring_id;		/* IV RING_ID: me, pipe, queue */
	unsigned int doorbell;	/* qword index in BAR2 */
	struct vgpu_bo *bo;
	__le32 *ring;
	u32 size;		/* dwords, a power of two */
	u64 wptr;		/* committed; all positions are monotonic dwords */
	u64 wpos;		/* written so far in the current reservation */
	u64 wend;		/* end of the current reservation */
	u64 kicked;		/* the last wptr the device was given */
	u64 rptr;		/* consumed, extended from the 32-bit report */
	u64 fence_wptr;		/* just past the last fence written */
	u32 seq;		/* the last fence sequence number written */
	u32 fence_seen;		/* driver-side samples of the fence memory ... */
	u32 fence_backwards;	/* ... and how often one went down */
	bool overrun;		/* more written than reserved: a bug in the test */
	__le32 *rptr_cpu;
	u64 rptr_gpu;
	__le32 *fence_cpu;
	u64 fence_gpu;
};

struct vgpu_cp {
	struct vgpu *vg;
	u32 hqds, pipes, qpp;
	u64 fb_base, vram_size;
	__le64 *gart;
	dma_addr_t gart_dma;
	u64 gart_start;
	DECLARE_BITMAP(gart_used, VT_GART_PAGES);
	struct list_head bos;
	struct vgpu_bo *wb;
	struct vgpu_ih ih;
	struct vgpu_ring *rings[VGPU_BLOCK_HQD_COUNT];
	struct vgpu_vm *vms[VGPU_VM_CONTEXTS];	/* process address spaces, by VMID (vm.c) */
	u32 vm_orphans;		/* retry faults of no VM we know (acknowledged anyway) */
	bool wedged;		/* a queue did not stop: its memory must never be freed */
};

static inline u32 vgpu_bo_rd(struct vgpu_bo *bo, u32 off)
{
	return le32_to_cpu(READ_ONCE(((__le32 *)bo->cpu)[off / 4]));
}

static inline void vgpu_bo_wr(struct vgpu_bo *bo, u32 off, u32 val)
{
	WRITE_ONCE(((__le32 *)bo->cpu)[off / 4], cpu_to_le32(val));
}

/* Writes n dwords of packets into an IB at dword offset off. */
static inline void vgpu_ib_put(struct vgpu_bo *bo, u32 off, const u32 *p, unsigned int n)
{
	__le32 *d = (__le32 *)bo->cpu + off;

	while (n--)
		*d++ = cpu_to_le32(*p++);
}

/* The compute HQD slot of pipe/queue (ME 1), numbered as the CP does. */
static inline unsigned int vt_compute_slot(struct vgpu_cp *cp, unsigned int pipe,
					   unsigned int queue)
{
	return 1 + (pipe % cp->pipes) * cp->qpp + queue % cp->qpp;
}

/* ---- cp.c: set-up and tear-down, GART, buffers ---- */

int vgpu_l2_flush(struct vt_case *t, struct vgpu_cp *cp);
struct vgpu_bo *vgpu_bo_alloc(struct vt_case *t, struct vgpu_cp *cp, size_t size,
			      bool cached);
void vgpu_bo_free(struct vgpu_cp *cp, struct vgpu_bo *bo);
struct vgpu_cp *vgpu_cp_get(struct vt_case *t);
void vgpu_cp_stop(struct vgpu *vg);
void vgpu_cp_suspend(struct vgpu_cp *cp);
int vgpu_cp_resume(struct vt_case *t, struct vgpu_cp *cp);
void vgpu_cp_free(struct vgpu *vg);
enum vt_res vt_cp_unavailable(struct vt_case *t, const char *const *names,
			      unsigned int count);
enum vt_res vt_cp_end(struct vt_case *t, struct vgpu_cp *cp);

/* ---- ih.c: the interrupt handler ring ---- */

u32 vgpu_slot_ring_id(struct vgpu_cp *cp, unsigned int slot);
void vgpu_ih_process(struct vgpu_cp *cp);
int vgpu_ih_init(struct vt_case *t, struct vgpu_cp *cp);
void vgpu_ih_hw_init(struct vgpu_cp *cp);
void vgpu_ih_disable(struct vgpu_cp *cp);
void vgpu_ih_slot_get(struct vgpu_cp *cp, unsigned int slot, struct vgpu_ih_slot *out);
void vgpu_ih_vmid_get(struct vgpu_cp *cp, unsigned int vmid, struct vgpu_ih_vmid *out);
void vgpu_ih_vmid_reset(struct vgpu_cp *cp, unsigned int vmid);
void vgpu_ih_cam_acked(struct vgpu_cp *cp, u32 cam);
void vgpu_ih_soft_flush(struct vgpu_cp *cp);
void vgpu_ih_mes_counts(struct vgpu_cp *cp, u32 *errors, u32 *hung, u32 *ueops);
void vgpu_ih_mes_last(struct vgpu_cp *cp, u32 *err_data, u32 *hung_data, u16 *hung_pasid);
bool vgpu_ih_ueop_find(struct vgpu_cp *cp, u32 from, u32 ctxid, u16 pasid,
		       struct vgpu_ih_ueop *out);
u32 vgpu_ih_pasid_faults(struct vgpu_cp *cp, u16 pasid, struct vgpu_vm_fault *last);

/* ---- ring.c: HQD rings, submission, fences ---- */

const char *vgpu_state_name(u32 state);
u32 vgpu_hqd_state(struct vgpu *vg, unsigned int slot);
void vgpu_ring_describe(struct vgpu_ring *r, char *buf, size_t len);
bool vgpu_hqd_wait(struct vgpu *vg, unsigned int slot, u32 reg, u32 mask, u32 want);
bool vgpu_hqd_wait_state(struct vgpu *vg, unsigned int slot, u32 state);
int vgpu_hqd_stop(struct vt_case *t, struct vgpu_cp *cp, unsigned int slot);
int vgpu_ring_start(struct vt_case *t, struct vgpu_ring *r);
void vgpu_ring_destroy(struct vt_case *t, struct vgpu_ring *r);
struct vgpu_ring *vgpu_ring_create(struct vt_case *t, struct vgpu_cp *cp,
				   unsigned int slot, u32 bytes);
u32 vgpu_fence_read(struct vgpu_ring *r);
bool vgpu_fence_done(struct vgpu_ring *r, u32 seq);
void vgpu_ring_kick(struct vgpu_ring *r);
void vgpu_ring_kick_mmio(struct vgpu_ring *r);
int vgpu_ring_alloc(struct vt_case *t, struct vgpu_ring *r, u32 ndw);
void vgpu_ring_put(struct vgpu_ring *r, const u32 *p, unsigned int n);
void vgpu_ring_commit(struct vgpu_ring *r);
u32 vgpu_ring_fence_gcr(struct vgpu_ring *r, u32 gcr, bool irq);
u32 vgpu_ring_fence(struct vgpu_ring *r, bool irq);
void vgpu_ring_fence_again(struct vgpu_ring *r, u32 seq, bool irq);
int vgpu_fence_wait(struct vt_case *t, struct vgpu_ring *r, u32 seq);
int vgpu_eop_wait(struct vt_case *t, struct vgpu_ring *r, u32 count);
int vgpu_err_wait(struct vt_case *t, struct vgpu_ring *r, u32 count);
int vgpu_submit_wait(struct vt_case *t, struct vgpu_ring *r, const u32 *p, unsigned int n);
int vgpu_ring_test(struct vt_case *t, struct vgpu_ring *r, bool mmio);

#endif /* VT_CP_H */
