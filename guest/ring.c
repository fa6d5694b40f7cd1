// SPDX-License-Identifier: GPL-2.0
/*
 * HQD rings as amdgpu programs them through MMIO, submission with a 64-bit monotonic
 * wptr, fences and the waits on them.
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/io-64-nonatomic-lo-hi.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/wait.h>

#include "cp.h"

const char *vgpu_state_name(u32 state)
{
	switch (state) {
	case VGPU_HQD_STATE_IDLE:
		return "IDLE";
	case VGPU_HQD_STATE_RUNNING:
		return "RUNNING";
	case VGPU_HQD_STATE_WAITING:
		return "WAITING";
	case VGPU_HQD_STATE_HALTED:
		return "HALTED";
	case VGPU_HQD_STATE_BUSY_KERNEL:
		return "BUSY_KERNEL";
	}
	return "unknown";
}

u32 vgpu_hqd_state(struct vgpu *vg, unsigned int slot)
{
	return FIELD_GET(VGPU_REG_HQD_STATUS__STATE_MASK,
			 vgpu_hqd_rd(vg, slot, VGPU_REG_HQD_STATUS));
}

/* One line about a queue (and a latched VM fault) for failure reasons. */
void vgpu_ring_describe(struct vgpu_ring *r, char *buf, size_t len)
{
	struct vgpu *vg = r->cp->vg;
	u32 st = vgpu_hqd_rd(vg, r->slot, VGPU_REG_HQD_STATUS);
	u32 fault = vgpu_rd(vg, VGPU_REG_GMC_VM_FAULT_STATUS);
	u32 vmf = vgpu_rd(vg, VGPU_REG_VM_FAULT_STATUS);
	int n;

	n = snprintf(buf, len, "slot %u %s error %u, PQ_RPTR %u, rptr report %u, wptr %llu",
		     r->slot, vgpu_state_name(FIELD_GET(VGPU_REG_HQD_STATUS__STATE_MASK, st)),
		     (u32)FIELD_GET(VGPU_REG_HQD_STATUS__ERROR_MASK, st),
		     vgpu_hqd_rd(vg, r->slot, VGPU_REG_HQD_PQ_RPTR),
		     le32_to_cpu(READ_ONCE(*r->rptr_cpu)), r->kicked);
	if ((fault & VGPU_REG_GMC_VM_FAULT_STATUS__VALID_MASK) && n >= 0 && n < len)
		n += snprintf(buf + n, len - n, "; VM fault %#x at %#llx", fault,
			      vgpu_rd64(vg, VGPU_REG_GMC_VM_FAULT_ADDR_LO,
					VGPU_REG_GMC_VM_FAULT_ADDR_HI));
	/* The AMD-format latch of every VMID (VM_FAULT_ADDR holds a page number). */
	if (vmf && n >= 0 && n < len)
		snprintf(buf + n, len - n, "; VM_FAULT_STATUS %#x (vmid %u) at %#llx", vmf,
			 (u32)FIELD_GET(VGPU_REG_VM_FAULT_STATUS__VMID_MASK, vmf),
			 vgpu_rd64(vg, VGPU_REG_VM_FAULT_ADDR_LO, VGPU_REG_VM_FAULT_ADDR_HI) << 12);
}

/* Polls an HQD register until (value & mask) == want or timeout_ms pass. */
bool vgpu_hqd_wait(struct vgpu *vg, unsigned int slot, u32 reg, u32 mask, u32 want)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);

	for (;;) {
		bool done = (vgpu_hqd_rd(vg, slot, reg) & mask) == want;

		if (done || time_after(jiffies, deadline))
			return done;
		usleep_range(20, 50);
	}
}

bool vgpu_hqd_wait_state(struct vgpu *vg, unsigned int slot, u32 state)
{
	return vgpu_hqd_wait(vg, slot, VGPU_REG_HQD_STATUS, VGPU_REG_HQD_STATUS__STATE_MASK,
			     FIELD_PREP(VGPU_REG_HQD_STATUS__STATE_MASK, state));
}

/* Stops a queue with DEQUEUE_RESET; a queue that does not stop wedges the CP state. */
int vgpu_hqd_stop(struct vt_case *t, struct vgpu_cp *cp, unsigned int slot)
{
	struct vgpu *vg = cp->vg;

	if (!(vgpu_hqd_rd(vg, slot, VGPU_REG_HQD_ACTIVE) & 1))
		return 0;
	vgpu_hqd_wr(vg, slot, VGPU_REG_HQD_DEQUEUE_REQUEST, VGPU_HQD_DEQUEUE_RESET);
	if (vgpu_hqd_wait(vg, slot, VGPU_REG_HQD_ACTIVE, 1, 0))
		return 0;
	cp->wedged = true;
	return vt_reason(t, -ETIMEDOUT,
			 "slot %u: HQD_ACTIVE still 1 %u ms after DEQUEUE_RESET (STATUS %#x)",
			 slot, timeout_ms, vgpu_hqd_rd(vg, slot, VGPU_REG_HQD_STATUS));
}

static void __iomem *vgpu_doorbell(struct vgpu_ring *r)
{
	return r->cp->vg->db + (unsigned long)r->doorbell * VGPU_DOORBELL_STRIDE;
}

/*
 * (Re)starts the ring's HQD as amdgpu programs one through MMIO: stop it if it runs, program
 * ring base and size, rptr report address and doorbell while HQD_ACTIVE is 0, then activate.
 * rptr and wptr start at 0; the fence sequence carries on.
 */
int vgpu_ring_start(struct vt_case *t, struct vgpu_ring *r)
{
	struct vgpu_cp *cp = r->cp;
	struct vgpu *vg = cp->vg;
	unsigned int s = r->slot;
	char st[VT_STATE_LEN];
	unsigned long flags;
	int ret;

	ret = vgpu_hqd_stop(t, cp, s);
	if (ret)
		return ret;
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_DOORBELL_CONTROL, 0);
	/* A polled doorbell shows only changes: no stale value may equal a future wptr. */
	writeq(0, vgpu_doorbell(r));

	r->wptr = 0;
	r->wpos = 0;
	r->wend = 0;
	r->kicked = 0;
	r->rptr = 0;
	r->fence_wptr = 0;
	r->overrun = false;
	WRITE_ONCE(*r->rptr_cpu, 0);
	spin_lock_irqsave(&cp->ih.lock, flags);
	memset(&cp->ih.slot[s], 0, sizeof(cp->ih.slot[s]));
	cp->ih.slot[s].fence = r->fence_cpu;
	cp->ih.slot[s].fence_seen = le32_to_cpu(READ_ONCE(*r->fence_cpu));
	spin_unlock_irqrestore(&cp->ih.lock, flags);

	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_VMID, 0);
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_BASE_LO, lower_32_bits(r->bo->gpu));
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_BASE_HI, upper_32_bits(r->bo->gpu));
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_CONTROL,
		    FIELD_PREP(VGPU_REG_HQD_PQ_CONTROL__QUEUE_SIZE_MASK, ilog2(r->size) - 1));
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_RPTR_REPORT_ADDR_LO, lower_32_bits(r->rptr_gpu));
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_RPTR_REPORT_ADDR_HI, upper_32_bits(r->rptr_gpu));
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_WPTR_POLL_CNTL, 0);
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_WPTR_POLL_ADDR_LO, 0);
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_WPTR_POLL_ADDR_HI, 0);
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_DOORBELL_CONTROL,
		    FIELD_PREP(VGPU_REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK,
			       r->doorbell * (VGPU_DOORBELL_STRIDE / 4)) |
		    VGPU_REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK);
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_ACTIVE, 1);

	if (!vgpu_hqd_wait(vg, s, VGPU_REG_HQD_ACTIVE, 1, 1)) {
		vgpu_ring_describe(r, st, sizeof(st));
		return vt_reason(t, -EIO, "HQD_ACTIVE reads 0 after writing 1 (%s)", st);
	}
	if (vgpu_hqd_state(vg, s) == VGPU_HQD_STATE_HALTED) {
		vgpu_ring_describe(r, st, sizeof(st));
		return vt_reason(t, -EIO, "queue halted as it started (%s)", st);
	}
	return 0;
}

void vgpu_ring_destroy(struct vt_case *t, struct vgpu_ring *r)
{
	struct vgpu_cp *cp;
	unsigned long flags;

	if (!r)
		return;
	cp = r->cp;
	if (vgpu_hqd_stop(t, cp, r->slot))
		return;		/* wedged: everything stays, vgpu_cp_free leaks it */
	vgpu_hqd_wr(cp->vg, r->slot, VGPU_REG_HQD_PQ_DOORBELL_CONTROL, 0);
	spin_lock_irqsave(&cp->ih.lock, flags);
	cp->ih.slot[r->slot].fence = NULL;
	spin_unlock_irqrestore(&cp->ih.lock, flags);
	cp->rings[r->slot] = NULL;
	vgpu_bo_free(cp, r->bo);
	kfree(r);
}

/* A ring of bytes (a power of two, VT_RING_MIN_BYTES..VT_RING_MAX_BYTES) on HQD slot, started. */
struct vgpu_ring *vgpu_ring_create(struct vt_case *t, struct vgpu_cp *cp,
				   unsigned int slot, u32 bytes)
{
	struct vgpu_ring *r;
	u32 off;

	if (!is_power_of_2(bytes) || bytes < VT_RING_MIN_BYTES || bytes > VT_RING_MAX_BYTES) {
		vt_reason(t, -EINVAL, "a ring of %u bytes: want a power of two, %u to %u",
			  bytes, VT_RING_MIN_BYTES, VT_RING_MAX_BYTES);
		return NULL;
	}
	if (slot >= cp->hqds) {
		vt_reason(t, -ENODEV, "HQD slot %u: the device has %u", slot, cp->hqds);
		return NULL;
	}
	if (cp->rings[slot]) {
		vt_reason(t, -EBUSY, "HQD slot %u is already in use", slot);
		return NULL;
	}
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r) {
		vt_reason(t, -ENOMEM, "out of memory");
		return NULL;
	}
	r->cp = cp;
	r->slot = slot;
	r->size = bytes / 4;
	r->ring_id = vgpu_slot_ring_id(cp, slot);
	r->doorbell = slot ? VT_DB_MEC + slot - 1 : VT_DB_GFX;
	r->bo = vgpu_bo_alloc(t, cp, bytes, false);
	if (!r->bo) {
		kfree(r);
		return NULL;
	}
	r->ring = r->bo->cpu;
	off = VT_WB_SLOT(slot);
	r->rptr_cpu = (__le32 *)((u8 *)cp->wb->cpu + off);
	r->rptr_gpu = cp->wb->gpu + off;
	r->fence_cpu = (__le32 *)((u8 *)cp->wb->cpu + off + 8);
	r->fence_gpu = cp->wb->gpu + off + 8;
	WRITE_ONCE(*r->fence_cpu, 0);
	cp->rings[slot] = r;
	if (vgpu_ring_start(t, r)) {
		vgpu_ring_destroy(NULL, r);
		return NULL;
	}
	return r;
}

/* Driver-side fence sample: counts values that went backwards. */
u32 vgpu_fence_read(struct vgpu_ring *r)
{
	u32 v = le32_to_cpu(READ_ONCE(*r->fence_cpu));

	if ((s32)(v - r->fence_seen) < 0)
		r->fence_backwards++;
	r->fence_seen = v;
	return v;
}

bool vgpu_fence_done(struct vgpu_ring *r, u32 seq)
{
	return (s32)(vgpu_fence_read(r) - seq) >= 0;
}

/*
 * Extends the 32-bit rptr report (dwords, wrapping with the ring) to the monotonic count. The
 * report alone cannot tell a full ring from a consumed one; when the last thing given to the
 * device was a fence and that fence has landed, all of it was consumed.
 */
static void vgpu_ring_update_rptr(struct vgpu_ring *r)
{
	u32 rep = le32_to_cpu(READ_ONCE(*r->rptr_cpu));
	u32 delta = (rep - (u32)r->rptr) & (r->size - 1);
	u64 inflight = r->kicked - r->rptr;

	if (delta && delta <= inflight)
		r->rptr += delta;
	else if (!delta && inflight == r->size && r->fence_wptr == r->kicked &&
		 vgpu_fence_done(r, r->seq))
		r->rptr = r->kicked;
}

/* Tells the device about the committed packets through the doorbell. */
void vgpu_ring_kick(struct vgpu_ring *r)
{
	/* The packets are in memory before the device hears of them. */
	wmb();
	r->kicked = r->wptr;
	writeq(r->wptr, vgpu_doorbell(r));
}

/* The same through the PQ_WPTR registers. */
void vgpu_ring_kick_mmio(struct vgpu_ring *r)
{
	struct vgpu *vg = r->cp->vg;

	/* The packets are in memory before the device hears of them. */
	wmb();
	r->kicked = r->wptr;
	/* High half first, so the low write moves the pointer (the high half stays 0 here). */
	vgpu_hqd_wr(vg, r->slot, VGPU_REG_HQD_PQ_WPTR_HI, upper_32_bits(r->wptr));
	vgpu_hqd_wr(vg, r->slot, VGPU_REG_HQD_PQ_WPTR_LO, lower_32_bits(r->wptr));
}

/* Reserves ndw dwords, waiting (with a progress timeout) for the CP to free space. */
int vgpu_ring_alloc(struct vt_case *t, struct vgpu_ring *r, u32 ndw)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	char st[VT_STATE_LEN];
	u64 last = r->rptr;

	if (ndw > r->size)
		return vt_reason(t, -EINVAL, "%u dwords do not fit a ring of %u", ndw, r->size);
	for (;;) {
		vgpu_ring_update_rptr(r);
		if (r->size - (r->wptr - r->rptr) >= ndw)
			break;
		/* What is committed but not kicked can never be consumed. */
		if (r->kicked != r->wptr)
			vgpu_ring_kick(r);
		if (r->rptr != last) {
			last = r->rptr;
			deadline = jiffies + msecs_to_jiffies(timeout_ms);
		}
		if (time_after(jiffies, deadline)) {
			vgpu_ring_describe(r, st, sizeof(st));
			return vt_reason(t, -ETIMEDOUT,
					 "no room for %u dwords: rptr stuck at %llu for %u ms (%s)",
					 ndw, r->rptr, timeout_ms, st);
		}
		usleep_range(10, 20);
	}
	r->wpos = r->wptr;
	r->wend = r->wptr + ndw;
	return 0;
}

void vgpu_ring_put(struct vgpu_ring *r, const u32 *p, unsigned int n)
{
	while (n--) {
		if (r->wpos >= r->wend) {
			r->overrun = true;
			return;
		}
		r->ring[r->wpos++ & (r->size - 1)] = cpu_to_le32(*p++);
	}
}

void vgpu_ring_commit(struct vgpu_ring *r)
{
	r->wptr = r->wpos;
}

static void vgpu_ring_emit_fence(struct vgpu_ring *r, u32 gcr, bool irq, u32 seq)
{
	u32 p[VT_FENCE_DW];

	vgpu_ring_put(r, p, pm4_release_mem(p, gcr, VGPU_PM4_RELEASE_MEM_DATA_SEL_32,
					    irq ? VGPU_PM4_RELEASE_MEM_INT_SEL_IRQ_CONFIRM :
						  VGPU_PM4_RELEASE_MEM_INT_SEL_NONE,
					    r->fence_gpu, seq, seq));
	r->fence_wptr = r->wpos;
}

/* Writes a fence with cache actions gcr and the next sequence number (also its ctxid). */
u32 vgpu_ring_fence_gcr(struct vgpu_ring *r, u32 gcr, bool irq)
{
	r->seq++;
	vgpu_ring_emit_fence(r, gcr, irq, r->seq);
	return r->seq;
}

/*
 * Writes the fence of a job emitted before, with its own sequence number, when the job is
 * emitted again after a reset. Jobs are emitted again in their order, so the last one is the
 * last job submitted and r->seq stays the newest sequence number.
 */
void vgpu_ring_fence_again(struct vgpu_ring *r, u32 seq, bool irq)
{
	vgpu_ring_emit_fence(r, VT_GCR_FENCE, irq, seq);
}

/* The fence gfx11 emits: L2 written back, then the seq, then (irq) the EOP interrupt. */
u32 vgpu_ring_fence(struct vgpu_ring *r, bool irq)
{
	return vgpu_ring_fence_gcr(r, VT_GCR_FENCE, irq);
}

/* Polls the fence memory until it reaches seq; gives up after timeout_ms without progress. */
int vgpu_fence_wait(struct vt_case *t, struct vgpu_ring *r, u32 seq)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	char st[VT_STATE_LEN];
	u32 v, last;

	if (r->kicked != r->wptr)
		vgpu_ring_kick(r);
	last = vgpu_fence_read(r);
	for (;;) {
		v = vgpu_fence_read(r);
		if ((s32)(v - seq) >= 0)
			return 0;
		if (v != last) {
			last = v;
			deadline = jiffies + msecs_to_jiffies(timeout_ms);
		}
		if (time_after(jiffies, deadline))
			break;
		usleep_range(10, 20);
	}
	vgpu_ring_describe(r, st, sizeof(st));
	return vt_reason(t, -ETIMEDOUT, "fence %u not reached in %u ms, it reads %u (%s)",
			 seq, timeout_ms, v, st);
}

/* Waits (on the interrupt waitqueue) until the slot has seen count EOP IVs. */
int vgpu_eop_wait(struct vt_case *t, struct vgpu_ring *r, u32 count)
{
	struct vgpu_cp *cp = r->cp;
	struct vgpu *vg = cp->vg;
	struct vgpu_ih_slot *s = &cp->ih.slot[r->slot];

	if (wait_event_timeout(vg->wq, (s32)(READ_ONCE(s->eop) - count) >= 0,
			       msecs_to_jiffies(timeout_ms)))
		return 0;
	return vt_reason(t, -ETIMEDOUT,
			 "slot %u (ring id %#x): %u EOP IVs after %u ms, want %u (vector %u: %d interrupts, IH_ENTRIES %u, decoded %u)",
			 r->slot, r->ring_id, READ_ONCE(s->eop), timeout_ms, count, VT_IH_VECTOR,
			 atomic_read(&vg->vecs[VT_IH_VECTOR].count),
			 vgpu_rd(vg, VGPU_REG_IH_ENTRIES), READ_ONCE(cp->ih.ivs));
}

/* Waits until the slot has seen count CP error IVs. */
int vgpu_err_wait(struct vt_case *t, struct vgpu_ring *r, u32 count)
{
	struct vgpu_cp *cp = r->cp;
	struct vgpu_ih_slot *s = &cp->ih.slot[r->slot];

	if (wait_event_timeout(cp->vg->wq, (s32)(READ_ONCE(s->err) - count) >= 0,
			       msecs_to_jiffies(timeout_ms)))
		return 0;
	return vt_reason(t, -ETIMEDOUT,
			 "slot %u (ring id %#x): %u error IVs after %u ms, want %u (IH_ENTRIES %u, unknown IVs %u, last %#010x)",
			 r->slot, r->ring_id, READ_ONCE(s->err), timeout_ms, count,
			 vgpu_rd(cp->vg, VGPU_REG_IH_ENTRIES), READ_ONCE(cp->ih.unknown),
			 READ_ONCE(cp->ih.unknown_dw0));
}

/* Submits n dwords of packets plus an interrupting fence and waits for the fence. */
int vgpu_submit_wait(struct vt_case *t, struct vgpu_ring *r, const u32 *p, unsigned int n)
{
	int ret = vgpu_ring_alloc(t, r, n + VT_FENCE_DW);
	u32 seq;

	if (ret)
		return ret;
	vgpu_ring_put(r, p, n);
	seq = vgpu_ring_fence(r, true);
	vgpu_ring_commit(r);
	vgpu_ring_kick(r);
	return vgpu_fence_wait(t, r, seq);
}

/* One ring test (gfx_v11_0_ring_test_ring): SET_UCONFIG_REG SCRATCH_0, read back over MMIO. */
int vgpu_ring_test(struct vt_case *t, struct vgpu_ring *r, bool mmio)
{
	struct vgpu *vg = r->cp->vg;
	unsigned long deadline;
	char st[VT_STATE_LEN];
	u32 p[3], v;
	int ret;

	vgpu_wr(vg, VGPU_REG_SCRATCH_0, 0xCAFEDEAD);
	ret = vgpu_ring_alloc(t, r, 3);
	if (ret)
		return ret;
	vgpu_ring_put(r, p, pm4_set_uconfig(p, VGPU_REG_SCRATCH_0, 0xDEADBEEF));
	vgpu_ring_commit(r);
	if (mmio)
		vgpu_ring_kick_mmio(r);
	else
		vgpu_ring_kick(r);
	deadline = jiffies + msecs_to_jiffies(timeout_ms);
	for (;;) {
		v = vgpu_rd(vg, VGPU_REG_SCRATCH_0);
		if (v == 0xDEADBEEF)
			return 0;
		if (time_after(jiffies, deadline))
			break;
		usleep_range(10, 20);
	}
	vgpu_ring_describe(r, st, sizeof(st));
	return vt_reason(t, -ETIMEDOUT,
			 "SCRATCH_0 reads %#010x %u ms after the %s, want 0xdeadbeef (%s)",
			 v, timeout_ms, mmio ? "PQ_WPTR write" : "doorbell", st);
}
