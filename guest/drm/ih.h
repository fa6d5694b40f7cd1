/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The IH ring and the interrupt dispatcher (ih.c).
 *
 * One MSI-X vector (VGPU_IH_VECTOR) says "new IVs in the IH ring". Its handler decodes them in
 * interrupt context, as amdgpu_ih_process does, and hands each to the part it belongs to:
 *
 *  - end-of-pipe IVs of the kernel queue's slot → vgpu_kq_irq() (kq.c): job fences;
 *  - other end-of-pipe IVs (user queues MES maps anywhere; DW4 is the queue's doorbell offset
 *    for PROTECTED_FENCE_SIGNAL, as gfx_v11_0_eop_irq reads it) → vgpu_userq_irq_eop();
 *  - MES_QUEUE_HUNG → vgpu_userq_irq_hung(); CP errors of a user slot → vgpu_userq_irq_error();
 *  - shader errors (a dispatch ended, its queue halted with CP_ERROR_SHADER) → the last one
 *    kept for vgpu_mes, then as a CP error: the kernel queue's fault path, or the user queues';
 *  - VM faults → a rate-limited log line, per-device counters, and vgpu_userq_irq_vm_fault();
 *  - MES errors → counted here, shown by vgpu_mes.
 */
#ifndef VGPU_DRM_IH_H
#define VGPU_DRM_IH_H

#include <linux/spinlock.h>
#include <linux/types.h>

#define VGPU_IH_BYTES		SZ_256K	/* 8192 IVs: the device's largest ring, as amdgpu */
/*
 * IH_RB_RPTR is written once this much was consumed since the last write, not at every
 * interrupt: each write is a trapped register access (a message to the device), and the device
 * raises the vector for every new IV whatever rptr says. It only needs rptr for room, and a
 * 1/32 ring of slack costs nothing until the ring is 31/32 full.
 */
#define VGPU_IH_RPTR_SLACK	(VGPU_IH_BYTES / 32)

struct vgpu_dev;
struct vgpu_kbo;

/* The last VM fault, as gmc_v11_0_process_interrupt decodes it. */
struct vgpu_ih_fault {
	u64 addr;
	u32 status;		/* DW7 */
	u32 flags;		/* DW5: EXE, WRITE, READ, RETRY */
	u16 pasid;
	u8 vmid;
};

/* The last shader error (IH_SRC_SHADER_ERROR): DW4 reason, DW5 program counter, DW6/7 address. */
struct vgpu_ih_shader_error {
	u64 addr;
	u32 reason;		/* VGPU_SHADER_ERR_* */
	u32 pc;			/* instruction slot */
	u16 pasid;
	u8 vmid;
};

struct vgpu_ih {
	spinlock_t lock;	/* everything below; taken by the vector's handler */
	bool enabled;
	struct vgpu_kbo *ring;
	struct vgpu_kbo *wb;	/* the written-back wptr */
	u32 mask;
	u32 rptr;		/* bytes */
	u32 rptr_told;		/* the last rptr written to IH_RB_RPTR */
	u32 cntl;
	/* Counters for debugfs. */
	u64 ivs;
	u32 overflows;
	u32 unknown;
	u32 vm_faults;
	struct vgpu_ih_fault last_fault;
	u32 mes_errors;
	u32 mes_err_data[4];	/* DW4..7 of the last: reason, opcode, ring offset, doorbell */
	u32 mes_hung;
	u32 cp_errors;
	u32 shader_errors;
	struct vgpu_ih_shader_error last_shader;
};

int vgpu_ih_init(struct vgpu_dev *vdev);
void vgpu_ih_fini(struct vgpu_dev *vdev);
void vgpu_ih_process(struct vgpu_dev *vdev);
const char *vgpu_shader_err_name(u32 reason);

#endif /* VGPU_DRM_IH_H */
