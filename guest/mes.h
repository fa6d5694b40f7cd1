/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The MES scheduler, driver side, as amdgpu's mes_v11_0 drives it.
 *
 * mes.c: the API ring (programmed through the MES registers, kicked by its doorbell or by
 * MES_RING_WPTR), 64-dword frames in AMD's v11 layout, and amdgpu's submit protocol: every API
 * frame carries an api_status fence (a zeroed slot in coherent memory, value 1) and is followed
 * by a QUERY_SCHEDULER_STATUS frame whose fence is the ring's (value ++seq). The driver waits
 * for the ring fence; the frame's own slot then says whether it succeeded, and MES_LAST_ERROR
 * why not. On top: SET_HW_RESOURCES, SET_SCHEDULING_CONFIG, SET_LOG_BUFFER (the event log),
 * MISC, SUSPEND/RESUME, RESET, and teardown (MES_RING_ACTIVE = 0).
 *
 * mes_queue.c: processes (a PASID and page tables — vm.c's builder, bound to no VMID: MES gives
 * the process one when it maps a queue, from ADD_QUEUE's root, VA range and VM_CONTEXT_CNTL),
 * user queues (MQD in AMD's v11 compute layout, gang context, ring, rptr report, wptr shadow,
 * EOP buffer, optionally a read-only protected-fence page), ADD_QUEUE / REMOVE_QUEUE /
 * UPDATE_ROOT_PAGE_TABLE, submission as a user-mode driver does it (packets, the wptr shadow,
 * the doorbell) and the per-queue status registers.
 */
#ifndef VT_MES_H
#define VT_MES_H

#include <linux/bitfield.h>
#include <linux/types.h>

#include "cp.h"
#include "vm.h"

#define VT_MES_FRAME_DW		VGPU_MES_API_FRAME_DWORDS
#define VT_MES_RING_BYTES	SZ_16K		/* 64 frames */
/* Doorbell dword indexes (64-bit doorbell k is dword 2k), clear of the kernel rings' 0x06..0x116. */
#define VT_MES_DB_RING		0x200		/* the API ring (amdgpu: mes_ring0 << 1) */
#define VT_MES_DB_AGG(level)	(0x3e0 + 2 * (level))	/* the aggregated doorbells */
#define VT_MES_DB_QUEUE(i)	(0x400 + 2 * (i))	/* user queue i */
#define VT_MES_LOG_ENTRIES	2047		/* + the header record: 64 KiB */
#define VT_MES_STATUS_SLOTS	256

/* The write-back page: ring fence, rptr report, READ_REG buffer, suspend fence, hung array. */
#define VT_MES_WB_FENCE		0		/* u64, the QUERY_SCHEDULER_STATUS fences */
#define VT_MES_WB_RPTR		8
#define VT_MES_WB_READ		16		/* u32, MISC READ_REG */
#define VT_MES_WB_SUSPEND	24		/* u32, SUSPEND's fence */
#define VT_MES_WB_QUERY		32		/* u64, SET_HW_RESOURCES' query-status fence */
#define VT_MES_WB_HUNG		64		/* 2 x MES_RESET_DW_HUNG_DB_ENTRIES dwords */
#define VT_MES_WB_STATUS	2048		/* VT_MES_STATUS_SLOTS u64 api_status slots */

/* The quanta and graces of SET_SCHEDULING_CONFIG, in 100 ns units (0: keep the default). */
#define VT_MES_100NS(us)	((u64)(us) * 10)

/* What SET_HW_RESOURCES gives MES. */
struct vgpu_mes_hw {
	u32 vmid_mask;		/* VMIDs for processes */
	u32 compute_mask[2];	/* per pipe: bit q = HQD slot 1 + 8p + q */
	u32 gfx_mask;		/* bit 0: HQD slot 0 */
	u32 agg[VGPU_MES_PRIORITY_LEVELS];	/* aggregated doorbell per level (0: none) */
	u32 oversub_us;		/* OVERSUBSCRIPTION_TIMER (0: no periodic poll) */
};

struct vgpu_mes {
	struct vgpu_cp *cp;
	struct vgpu *vg;
	struct vgpu_bo *ring;	/* the API ring */
	struct vgpu_bo *wb;	/* VT_MES_WB_* */
	struct vgpu_bo *log;	/* the event log (SET_LOG_BUFFER) */
	struct vgpu_bo *sch_ctx;	/* G_SCH_CTX: the scheduler's own context page */
	u32 size;		/* ring dwords */
	u64 wptr;		/* monotonic dwords, a multiple of 64 */
	u64 seq;		/* the last ring fence value submitted */
	u32 nstatus;		/* api_status slots used so far */
	u32 doorbells;		/* dword doorbell indexes the BAR holds */
	u32 agg_kicks;		/* writes to aggregated doorbells (each a new value) */
	bool mmio;		/* kick by MES_RING_WPTR_LO/HI instead of the doorbell */
	bool running;		/* MES_RING_ACTIVE = 1 was written and seen */
	struct vgpu_mes_hw hw;	/* as last accepted */
	u32 nslots;		/* compute HQD slots MES owns */
	u32 last_reason;	/* MES_ERR_* of the last frame that failed (0: it succeeded) */
};

/* One event-log record (MES_EVT_*). */
struct vgpu_mes_evt {
	u32 n;			/* event number (MES_EVT_DW_SEQ) */
	u32 kind, reason, slot, prio;
	u32 doorbell;		/* frames: the opcode */
	u64 time_ns, rptr;
	u16 pasid;
	u8 vmid;
};

#define VT_MES_ANY		0xffffffffU	/* vgpu_mes_log_find: any value */

/* ---- mes.c: ring, frames, protocol ---- */

const char *vgpu_mes_err_name(u32 reason);
const char *vgpu_mes_op_name(u32 op);
void vgpu_mes_hw_default(struct vgpu_cp *cp, struct vgpu_mes_hw *hw);
struct vgpu_mes *vgpu_mes_alloc(struct vt_case *t, struct vgpu_cp *cp);
int vgpu_mes_ring_start(struct vt_case *t, struct vgpu_mes *m);
int vgpu_mes_stop(struct vt_case *t, struct vgpu_mes *m);
void vgpu_mes_free(struct vgpu_mes *m);
struct vgpu_mes *vgpu_mes_start(struct vt_case *t, struct vgpu_cp *cp,
				const struct vgpu_mes_hw *hw);
void vgpu_mes_end(struct vt_case *t, struct vgpu_mes *m);
void vgpu_mes_describe(struct vgpu_mes *m, char *buf, size_t len);

void vgpu_mes_frame(u32 *f, u32 opcode);
void vgpu_mes_put64(u32 *f, u32 dw, u64 v);
int vgpu_mes_submit(struct vt_case *t, struct vgpu_mes *m, u32 *f);
int vgpu_mes_submit_skewed(struct vt_case *t, struct vgpu_mes *m, u32 *f, u32 skew);
u64 vgpu_mes_wb64(struct vgpu_mes *m, u32 off);

int vgpu_mes_set_hw_resources(struct vt_case *t, struct vgpu_mes *m,
			      const struct vgpu_mes_hw *hw);
int vgpu_mes_set_sched_config(struct vt_case *t, struct vgpu_mes *m, const u64 *grace_other,
			      const u64 *quantum, const u64 *idle_grace, u32 yield_percent);
int vgpu_mes_set_log(struct vt_case *t, struct vgpu_mes *m, u32 entries);
int vgpu_mes_query(struct vt_case *t, struct vgpu_mes *m);
int vgpu_mes_misc_write_reg(struct vt_case *t, struct vgpu_mes *m, u32 reg, u32 val);
int vgpu_mes_misc_read_reg(struct vt_case *t, struct vgpu_mes *m, u32 reg, u32 *val);
int vgpu_mes_misc_wait(struct vt_case *t, struct vgpu_mes *m, u32 op, u32 ref, u32 mask,
		       u32 reg1, u32 reg2);
int vgpu_mes_misc_notify(struct vt_case *t, struct vgpu_mes *m);
int vgpu_mes_suspend(struct vt_case *t, struct vgpu_mes *m, u64 gang, u32 fence_value);
int vgpu_mes_resume(struct vt_case *t, struct vgpu_mes *m, u64 gang);
int vgpu_mes_reset_queue(struct vt_case *t, struct vgpu_mes *m, u32 doorbell);
int vgpu_mes_detect_hung(struct vt_case *t, struct vgpu_mes *m, bool then_reset, u32 type,
			 u32 *hung);
void vgpu_mes_kick_aggregated(struct vgpu_mes *m, u32 level);

u32 vgpu_mes_log_count(struct vgpu_mes *m);
bool vgpu_mes_log_get(struct vgpu_mes *m, u32 n, struct vgpu_mes_evt *e);
bool vgpu_mes_log_find(struct vgpu_mes *m, u32 from, u32 kind, u32 reason, u32 doorbell,
		       struct vgpu_mes_evt *e);
u32 vgpu_mes_log_tally(struct vgpu_mes *m, u32 from, u32 kind, u32 reason, u32 doorbell);
void vgpu_mes_log_tail(struct vt_case *t, struct vgpu_mes *m, u32 count);

/* ---- mes_queue.c: processes, queues, MQDs, submission ---- */

/* Where a process's queues live in its address space: queue i at VT_MQ_VA(i). */
#define VT_MQ_VA(i)		(0x0000080000000000ULL + (u64)(i) * SZ_2M)
#define VT_MQ_AUX_OFF		SZ_1M		/* the aux pages, from the ring */
#define VT_MQ_FENCE_OFF		(SZ_1M + SZ_512K)	/* the protected-fence page */
/* The aux pages (mapped RW in the process, the wptr shadow also read by MES in VMID 0). */
#define VT_MQ_AUX_RPTR		0		/* u32 rptr report */
#define VT_MQ_AUX_WPTR		8		/* u64 wptr shadow */
#define VT_MQ_AUX_FENCE		64		/* u32 RELEASE_MEM fence */
#define VT_MQ_AUX_UNMAP		96		/* u32 UNMAP_FLAG (VMID 0) */
#define VT_MQ_AUX_COUNTER	128		/* u32 the ordered jobs' counter */
#define VT_MQ_AUX_LOG		1024		/* u32[VT_MQ_LOG_MAX] the ordered jobs' log */
#define VT_MQ_LOG_MAX		((SZ_4K - VT_MQ_AUX_LOG) / 4)
#define VT_MQ_AUX_EOP		SZ_4K		/* the EOP buffer, 2 KiB */
#define VT_MQ_AUX_BYTES		SZ_8K
#define VT_MQ_EOP_BYTES		SZ_2K
#define VT_MQ_RING_BYTES	SZ_4K

/* A process: its address space (PASID, tables) and its context page. */
struct vgpu_mes_proc {
	struct vgpu_mes *m;
	struct vgpu_vm *vm;
	struct vgpu_bo *ctx;	/* PROCESS_CONTEXT_ADDR: one page, MES's */
	u64 quantum;		/* PROCESS_QUANTUM, 100 ns */
	u32 policy;		/* the fault policy of VM_CONTEXT_CNTL */
	unsigned int nqueues;	/* queues created in it (VA slots used) */
};

struct vgpu_mes_queue_opts {
	u32 priority;		/* MES_PRIORITY_* */
	u32 ring_bytes;		/* 0: VT_MQ_RING_BYTES */
	u64 gang_quantum;	/* 100 ns (0: MES's default) */
	u32 flags;		/* MES_ADD_QUEUE_FLAG_* */
	bool protected_fence;	/* give it a fence page, read-only in the process */
};

struct vgpu_mes_queue {
	struct vgpu_mes *m;
	struct vgpu_mes_proc *p;
	u32 doorbell;		/* dword index: the queue's identity */
	struct vgpu_mes_queue_opts o;
	struct vgpu_bo *mqd;	/* one page: the 512-dword MQD, then wptr_saved, is_queue_unmap */
	struct vgpu_bo *gang;	/* GANG_CONTEXT_ADDR: one page, MES's */
	struct vgpu_bo *ring;
	struct vgpu_bo *aux;	/* VT_MQ_AUX_* */
	struct vgpu_bo *fence;	/* the protected fence page, or NULL */
	u64 va;			/* the ring in the process; aux and fence follow */
	u32 size;		/* ring dwords */
	u64 wptr;		/* committed, monotonic dwords */
	u64 wpos;		/* written so far */
	u64 rptr;		/* consumed, extended from the report */
	u32 seq;		/* the last RELEASE_MEM fence value written */
	bool added;
};

/* MES_QUERY_* of one queue. */
struct vgpu_mq_status {
	u32 st;			/* MES_QUERY_STATUS */
	u32 maps, preempts;
	u64 rptr;
};

#define VT_MQ_ST(st, f)		((u32)FIELD_GET(VGPU_REG_MES_QUERY_STATUS__##f##_MASK, (st)))

struct vgpu_mes_proc *vgpu_mes_proc_create(struct vt_case *t, struct vgpu_mes *m, u16 pasid);
void vgpu_mes_proc_destroy(struct vgpu_mes_proc *p);
int vgpu_mes_proc_map(struct vt_case *t, struct vgpu_mes_proc *p, u64 va, struct vgpu_bo *bo,
		      u64 rights);
struct vgpu_mes_queue *vgpu_mes_queue_create(struct vt_case *t, struct vgpu_mes_proc *p,
					     u32 doorbell,
					     const struct vgpu_mes_queue_opts *o);
void vgpu_mes_queue_destroy(struct vgpu_mes_queue *q);
int vgpu_mes_queue_map_into(struct vt_case *t, struct vgpu_mes_queue *q, struct vgpu_vm *vm);
void vgpu_mes_add_frame(struct vgpu_mes_queue *q, u32 *f);
int vgpu_mes_add(struct vt_case *t, struct vgpu_mes_queue *q);
int vgpu_mes_remove(struct vt_case *t, struct vgpu_mes_queue *q);
int vgpu_mes_update_root(struct vt_case *t, struct vgpu_mes_proc *p, u64 root_pde);
int vgpu_mes_change_priority(struct vt_case *t, struct vgpu_mes_queue *q, u32 level);

u32 vgpu_mq_rd(struct vgpu_bo *bo, u32 dw);
u32 vgpu_mq_mqd(struct vgpu_mes_queue *q, u32 dw);
u64 vgpu_mq_mqd64(struct vgpu_mes_queue *q, u32 dw_lo);
void vgpu_mes_status(struct vgpu_mes *m, u32 doorbell, struct vgpu_mq_status *s);
void vgpu_mq_describe(struct vgpu_mes_queue *q, char *buf, size_t len);
bool vgpu_mq_wait_status(struct vgpu_mes_queue *q, u32 mask, u32 want, unsigned int ms,
			 struct vgpu_mq_status *s);

u32 vgpu_mq_aux(struct vgpu_mes_queue *q, u32 off);
u64 vgpu_mq_aux_va(struct vgpu_mes_queue *q, u32 off);
int vgpu_mq_alloc(struct vt_case *t, struct vgpu_mes_queue *q, u32 ndw);
void vgpu_mq_put(struct vgpu_mes_queue *q, const u32 *p, unsigned int n);
u32 vgpu_mq_fence(struct vgpu_mes_queue *q, bool irq);
void vgpu_mq_commit(struct vgpu_mes_queue *q);
void vgpu_mq_kick(struct vgpu_mes_queue *q);
int vgpu_mq_submit(struct vt_case *t, struct vgpu_mes_queue *q, const u32 *p, unsigned int n,
		   bool irq, bool kick, u32 *seq);
u32 vgpu_mq_fence_read(struct vgpu_mes_queue *q);
bool vgpu_mq_done(struct vgpu_mes_queue *q, u32 seq);
int vgpu_mq_wait(struct vt_case *t, struct vgpu_mes_queue *q, u32 seq, unsigned int ms);
unsigned int vgpu_mq_ordered_job(struct vgpu_mes_queue *q, u32 *p, u32 k);

/* The generous wait of the MES cases: never below amdgpu's 2.1 s MES timeout. */
static inline unsigned int vt_mes_ms(void)
{
	return max_t(unsigned int, timeout_ms, 2100);
}

#endif /* VT_MES_H */
