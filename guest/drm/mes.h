/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The MES scheduler, driver side, as amdgpu's mes_v11_0 drives it.
 *
 * mes.c: the API ring (MES registers, kicked by its doorbell), 64-dword frames in AMD's v11
 * layout and amdgpu's submit protocol — each frame's api_status fence points at a zeroed slot
 * (value 1) and a QUERY_SCHEDULER_STATUS frame behind it carries the ring fence (++seq); the
 * driver waits for the ring fence and the slot then says whether the frame succeeded
 * (MES_LAST_ERROR says why not). Bring-up: ring, SET_HW_RESOURCES (the user VMIDs and every
 * compute slot but the kernel queue's), the event log, QUERY_SCHEDULER_STATUS.
 *
 * mes_api.c: the calls the user-queue part makes: ADD_QUEUE, REMOVE_QUEUE, SUSPEND, RESUME,
 * RESET (one queue, or detect-and-reset), UPDATE_ROOT_PAGE_TABLE, CHANGE_GANG_PRIORITY, and
 * the per-queue status registers (MES_QUERY_*). Every call sleeps (process context) and is
 * serialised by mes.lock; errors: -EIO (the frame failed: *reason gets the MES_ERR_*),
 * -ETIMEDOUT (MES did not answer: the scheduler has been reset, the frame is gone, and the user
 * queues are being added again, see mes_reset.c), -ENODEV (MES is not running).
 */
#ifndef VGPU_DRM_MES_H
#define VGPU_DRM_MES_H

#include <linux/mutex.h>
#include <linux/types.h>
#include <linux/workqueue.h>

struct vgpu_dev;
struct vgpu_kbo;

#define VGPU_MES_FRAME_DW	64
#define VGPU_MES_RING_BYTES	SZ_16K		/* 64 frames */
/* Doorbell dword indexes in the kernel's doorbell page (page 0 of BAR2). */
#define VGPU_MES_DB_RING	0x200		/* the API ring (amdgpu: mes_ring0 << 1) */
#define VGPU_MES_DB_AGG(level)	(0x3e0 + 2 * (level))	/* aggregated doorbells */
#define VGPU_MES_LOG_ENTRIES	2047		/* + the header record: 64 KiB */
#define VGPU_MES_TIMEOUT_MS	2100		/* amdgpu's MES timeout */

struct vgpu_mes {
	struct mutex lock;	/* the ring and everything below */
	struct vgpu_kbo *ring;
	struct vgpu_kbo *wb;	/* fences, status slots, hung array (mes.c) */
	struct vgpu_kbo *log;	/* the event log */
	struct vgpu_kbo *sch_ctx;
	u32 size;		/* ring dwords */
	u64 wptr;		/* monotonic dwords */
	u64 seq;		/* the last ring fence submitted */
	u32 nstatus;
	bool running;
	u32 vmid_mask;		/* what SET_HW_RESOURCES gave */
	u32 compute_mask[2];
	u32 nslots;		/* compute slots MES owns */
	u32 frames, failures;	/* frames this driver sent, and failed */
	u32 last_reason;	/* MES_ERR_* of the last failed frame */
	u32 last_op;
	/* mes_reset.c: the scheduler reset after a frame MES did not answer. */
	bool resetting;		/* a reset's own frames are being sent */
	u32 resets, reset_failures;
	u32 last_hung_op;	/* the opcode of the last frame MES did not answer */
	u64 epoch;		/* the scheduler's lives: +1 at each reset */
	struct work_struct recover_work;	/* adds the user queues again */
};

/* What ADD_QUEUE needs (mes_add_queue_input, API version 2: addresses are MC addresses). */
struct vgpu_mes_add_queue {
	u16 pasid;
	u64 page_table_base;	/* the root PDE (vgpu_vm_pd_addr) */
	u64 va_end_page;	/* PROCESS_VA_END, inclusive; START is 0 */
	u32 vm_context_cntl;	/* vgpu_vm_context_cntl() */
	u64 process_ctx;	/* PROCESS_CONTEXT_ADDR: a page of the process's, VMID 0 */
	u64 process_quantum;	/* 100 ns, 0 = the level's */
	u64 gang_ctx;		/* GANG_CONTEXT_ADDR: a page MES owns, VMID 0 */
	u64 gang_quantum;	/* 100 ns, 0 = MES's default */
	u32 priority;		/* MES_PRIORITY_* */
	u32 doorbell;		/* dword index in BAR2, even */
	u64 mqd;		/* the v11 compute MQD, VMID 0 */
	u64 wptr;		/* the 64-bit wptr shadow, VMID 0 (0 = none) */
	u64 unmap_flag;		/* VMID 0 dword MES writes 1 at unmap, 0 at map (0 = none) */
	bool suspended;		/* the gang starts suspended */
};

/* MES_QUERY_* of one queue. */
struct vgpu_mes_queue_status {
	u32 status;		/* MES_QUERY_STATUS (VGPU_REG_MES_QUERY_STATUS__*) */
	u32 maps, preempts;
	u64 rptr;
};

int vgpu_mes_init(struct vgpu_dev *vdev);
void vgpu_mes_fini(struct vgpu_dev *vdev);
/* mes.c, for mes_reset.c: bring-up steps (mes.lock held) and the stop. */
int vgpu_mes_ring_start(struct vgpu_dev *vdev);
int vgpu_mes_set_hw_resources(struct vgpu_dev *vdev);
int vgpu_mes_set_log(struct vgpu_dev *vdev);
int vgpu_mes_query_sched(struct vgpu_dev *vdev);
void vgpu_mes_stop(struct vgpu_dev *vdev);
/* mes_reset.c */
void vgpu_mes_reset_init(struct vgpu_dev *vdev);
void vgpu_mes_reset_fini(struct vgpu_dev *vdev);
int vgpu_mes_reset_locked(struct vgpu_dev *vdev, u32 op);
int vgpu_mes_submit(struct vgpu_dev *vdev, u32 *frame, u32 *reason);
void vgpu_mes_frame(u32 *f, u32 opcode);
void vgpu_mes_put64(u32 *f, u32 dw, u64 v);
const char *vgpu_mes_err_name(u32 reason);
const char *vgpu_mes_op_name(u32 op);

/* mes_api.c */
int vgpu_mes_add_queue(struct vgpu_dev *vdev, const struct vgpu_mes_add_queue *in,
		       u32 *reason, u64 *epoch);
int vgpu_mes_remove_queue(struct vgpu_dev *vdev, u32 doorbell, u64 gang_ctx, u32 *reason);
int vgpu_mes_suspend(struct vgpu_dev *vdev, u64 gang_ctx, u32 *reason);
int vgpu_mes_resume(struct vgpu_dev *vdev, u64 gang_ctx, u32 *reason);
int vgpu_mes_reset_queue(struct vgpu_dev *vdev, u32 doorbell, u32 *reason);
int vgpu_mes_detect_hung(struct vgpu_dev *vdev, bool then_reset, u32 *hung, u32 *reason);
int vgpu_mes_update_root(struct vgpu_dev *vdev, u64 pd_addr, u64 process_ctx, u32 *reason);
int vgpu_mes_change_priority(struct vgpu_dev *vdev, u64 gang_ctx, u32 priority,
			     u64 gang_quantum, u32 *reason);
void vgpu_mes_query_queue(struct vgpu_dev *vdev, u32 doorbell,
			  struct vgpu_mes_queue_status *s);

#endif /* VGPU_DRM_MES_H */
