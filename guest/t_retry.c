// SPDX-License-Identifier: GPL-2.0
/*
 * Recoverable (retry) faults: an IB in a process VMID touches unmapped pages; the IH handler
 * delegates each retry-fault IV to a work item, which maps the page, invalidates and
 * acknowledges the CAM entry (vm.c); the access is replayed and the job completes.
 */

#include <linux/bitfield.h>
#include <linux/bitmap.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#include "cases.h"
#include "vm.h"

#define VT_RETRY_SLOT(cp)	vt_compute_slot(cp, 0, 6)
#define VT_VA_LAZY		0x0000700000005000ULL	/* mapped only when it faults */
#define VT_VA_LAZY2		0x0000700000006000ULL	/* nobody will serve it */
#define VT_RETRY_BYTES		256
#define VT_RETRY_MARK		0x7E7E0007

struct vt_retry_one {
	struct vgpu *vg;
	struct vgpu_bo *backing;
	unsigned int slot;
	u32 calls;
	u32 state;		/* the queue's HQD state while its fault was handled */
	bool write;
	bool gate_timeout;	/* the case never let the first fault be resolved */
	struct completion go;	/* the case has looked at the parked queue */
	u32 calls2;		/* faults on VT_VA_LAZY2, held until go2 */
	struct completion go2;
};

/*
 * Maps the lazy page to its backing page, noting what the faulting queue was doing. The first
 * fault is held until the case has seen the queue parked and another queue run.
 */
static u64 vt_retry_one_resolve(struct vgpu_vm *vm, u64 va, bool write, void *arg)
{
	struct vt_retry_one *c = arg;

	if (va == VT_VA_LAZY2) {
		smp_store_release(&c->calls2, c->calls2 + 1);
		if (!wait_for_completion_timeout(&c->go2, msecs_to_jiffies(timeout_ms)))
			c->gate_timeout = true;
		return 0;
	}
	c->state = vgpu_hqd_state(c->vg, c->slot);
	c->write = write;
	/* What was noted above is visible to whoever sees the count. */
	smp_store_release(&c->calls, c->calls + 1);
	if (c->calls == 1 && !wait_for_completion_timeout(&c->go, msecs_to_jiffies(timeout_ms)))
		c->gate_timeout = true;
	if (va != VT_VA_LAZY)
		return 0;
	return vt_vm_pte(c->backing->dma, true, VT_VM_RW);
}

/* Waits until the resolver has been called for a fault (*calls is its count). */
static int vt_retry_seen(struct vt_case *t, struct vt_retry_one *c, u32 *calls)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);

	while (!smp_load_acquire(calls)) {
		if (time_after(jiffies, deadline))
			return vt_reason(t, -ETIMEDOUT,
					 "no retry fault reached the work item in %u ms (IH decoded %u IVs, RETRY_FAULTS %u)",
					 timeout_ms, READ_ONCE(c->vg->cp->ih.ivs),
					 vgpu_rd(c->vg, VGPU_REG_VM_RETRY_FAULTS));
		usleep_range(50, 100);
	}
	return 0;
}

/* Waits for a fence while the fault work item makes progress (each fault restarts the wait). */
static int vt_retry_fence_wait(struct vt_case *t, struct vgpu_ring *r, struct vgpu_vm *vm,
			       u32 seq)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	struct vgpu_vm_retry_stats st;
	char desc[VT_STATE_LEN];
	u32 last = 0;

	if (r->kicked != r->wptr)
		vgpu_ring_kick(r);
	for (;;) {
		if (vgpu_fence_done(r, seq))
			return 0;
		vgpu_vm_retry_get(vm, &st);
		if (st.handled != last) {
			last = st.handled;
			deadline = jiffies + msecs_to_jiffies(timeout_ms);
		}
		if (time_after(jiffies, deadline))
			break;
		usleep_range(50, 100);
	}
	vgpu_ring_describe(r, desc, sizeof(desc));
	return vt_reason(t, -ETIMEDOUT,
			 "fence %u not reached %u ms after the last of %u retry faults handled (CAM_STATUS %#x, %s)",
			 seq, timeout_ms, last, vgpu_rd(r->cp->vg, VGPU_REG_VM_RETRY_CAM_STATUS),
			 desc);
}

/* CAM_STATUS shows no entry in use and nobody waiting, and the IVs match RETRY_FAULTS. */
static void vt_retry_check_cam(struct vt_case *t, const char *name, struct vgpu_cp *cp,
			       const struct vgpu_ih_vmid *v, u32 retry0, u32 want, u32 bad_cam0)
{
	u32 cam = vgpu_rd(cp->vg, VGPU_REG_VM_RETRY_CAM_STATUS);
	u32 used = FIELD_GET(VGPU_REG_VM_RETRY_CAM_STATUS__USED_MASK, cam);
	u32 size = FIELD_GET(VGPU_REG_VM_RETRY_CAM_STATUS__SIZE_MASK, cam);
	u32 retries = vgpu_rd(cp->vg, VGPU_REG_VM_RETRY_FAULTS) - retry0;
	u32 bad = READ_ONCE(cp->ih.vm_bad_cam) - bad_cam0;

	vt_check(t, !used && size == VGPU_VM_RETRY_CAM_ENTRIES &&
		 !(cam & VGPU_REG_VM_RETRY_CAM_STATUS__WAITING_FULL_MASK) && retries == want &&
		 !v->cam_busy && !bad, name,
		 "RETRY_CAM_STATUS %#x (used %u, size %u, want 0 and %u), RETRY_FAULTS +%u (want +%u), %u IVs reused an unacknowledged CAM index, %u beyond the CAM",
		 cam, used, size, (u32)VGPU_VM_RETRY_CAM_ENTRIES, retries, want, v->cam_busy, bad);
}

enum vt_res t_retry_fault(struct vt_case *t)
{
	static const char *const names[] = {
		"parked_not_halted", "other_queue_runs", "job_completes", "right_data",
		"one_retry_iv", "handled_in_work", "cam_acked", "no_noretry_fault",
		"unserved_waits_until_reset", "unserved_gets_marker", "marker_noretry_halts",
	};
	struct vgpu *vg = t->vg;
	struct vgpu_bo *src = NULL, *other = NULL;
	struct vgpu_ring *r2 = NULL;
	struct vgpu_vm_job j = {};
	struct vt_retry_one c = {};
	struct vgpu_vm_retry_stats st;
	struct vgpu_vm_latch l;
	struct vgpu_ih_vmid v;
	char why[VT_WHY_LEN];
	u32 p[32], n, seq, i, pattern, retry0, faults0, bad0, bad, state, mark;
	struct vgpu_cp *cp;
	bool done;
	int ret;

	init_completion(&c.go);
	init_completion(&c.go2);
	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	vgpu_vm_latch_clear(vg);
	src = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	c.backing = src ? vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false) : NULL;
	ret = c.backing ? 0 : -ENOMEM;
	ret = ret ?: vgpu_vm_job_init(t, cp, &j, 10, 0x10a, VT_VM_RETRY, VT_RETRY_SLOT(cp));
	ret = ret ?: vgpu_vm_map_bo(t, j.vm, VT_VA_DATA, src, VGPU_PTE_READABLE_MASK);
	if (!ret) {
		other = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
		r2 = other ? vgpu_ring_create(t, cp, vt_compute_slot(cp, 1, 6), VT_RING_BYTES) :
			     NULL;
		ret = r2 ? 0 : -EIO;
	}
	if (ret) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	c.vg = vg;
	c.slot = j.ring->slot;
	vgpu_vm_set_resolver(j.vm, vt_retry_one_resolve, &c);
	pattern = vgpu_dma_pattern();
	for (i = 0; i < VT_RETRY_BYTES / 4; i++)
		vgpu_bo_wr(src, 4 * i, pattern + i);
	retry0 = vgpu_rd(vg, VGPU_REG_VM_RETRY_FAULTS);
	faults0 = vgpu_rd(vg, VGPU_REG_VM_FAULTS);
	bad0 = READ_ONCE(cp->ih.vm_bad_cam);
	vt_note(t, "VMID 10 copies %u bytes to %#llx, which no page table maps; slot %u",
		VT_RETRY_BYTES, VT_VA_LAZY, c.slot);

	n = vt_copy(p, VT_VA_DATA, VT_VA_LAZY, VT_RETRY_BYTES);
	n += vt_wr(p + n, VT_VA_LAZY + 0x200, VT_RETRY_MARK);
	ret = vgpu_vm_job_emit(t, &j, p, n, &seq) ?: vt_retry_seen(t, &c, &c.calls);
	/* The driver holds the fault: the queue waits, another queue gets on with its work. */
	if (!ret)
		msleep(VT_SETTLE_MS);
	state = vgpu_hqd_state(vg, c.slot);
	done = vgpu_fence_done(j.ring, seq);
	vt_note(t, "fault held by the driver: slot %u %s when the work item took it, %s %u ms later",
		c.slot, vgpu_state_name(c.state), vgpu_state_name(state), VT_SETTLE_MS);
	vt_check(t, !ret && !done && c.state != VGPU_HQD_STATE_HALTED &&
		 c.state != VGPU_HQD_STATE_IDLE && state != VGPU_HQD_STATE_HALTED &&
		 state != VGPU_HQD_STATE_IDLE, names[0],
		 "%s; the queue was %s when the fault was handled, %s %u ms later, its fence %s (want it parked: active, not halted, not done)",
		 ret ? t->err : "fault seen", vgpu_state_name(c.state), vgpu_state_name(state),
		 VT_SETTLE_MS, done ? "reached" : "not reached");
	ret = ret ?: vgpu_submit_wait(t, r2, p, vt_wr(p, other->gpu, VT_RETRY_MARK));
	mark = vgpu_bo_rd(other, 0);
	vt_check(t, !ret && mark == VT_RETRY_MARK, names[1],
		 "%s; slot %u's dword reads %#010x, want %#010x", ret ? t->err : "fence reached",
		 r2->slot, mark, VT_RETRY_MARK);
	complete(&c.go);
	ret = ret ?: vt_retry_fence_wait(t, j.ring, j.vm, seq);
	vt_check(t, !ret && !c.gate_timeout, names[2], "%s",
		 ret ? t->err : "the work item gave up waiting for the case (a slow host?)");
	for (i = 0, bad = 0; i < VT_RETRY_BYTES / 4; i++)
		bad += vgpu_bo_rd(c.backing, 4 * i) != pattern + i;
	vt_check(t, !ret && !bad && vgpu_bo_rd(c.backing, 0x200) == VT_RETRY_MARK, names[3],
		 "the page mapped on the fault: %u of %u copied dwords wrong, mark %#010x (want %#010x)",
		 bad, VT_RETRY_BYTES / 4, vgpu_bo_rd(c.backing, 0x200), VT_RETRY_MARK);

	msleep(VT_SETTLE_MS);
	vgpu_ih_vmid_get(cp, j.vm->vmid, &v);
	why[0] = '\0';
	if (v.faults != 1 || v.retry != 1)
		snprintf(why, sizeof(why), "VMID %u: %u VM-fault IVs, %u with RETRY; want exactly 1",
			 j.vm->vmid, v.faults, v.retry);
	else
		vgpu_vm_fault_is(&v.first, j.vm, VT_VA_LAZY, VGPU_VM_IV_DW5_WRITE_MASK, true, 0,
				 false, why, sizeof(why));
	vt_check(t, !why[0], names[4], "%s", why);
	vgpu_vm_retry_get(j.vm, &st);
	vt_check(t, st.handled == 1 && st.resolved == 1 && !st.not_in_task && !st.surplus &&
		 !st.flush_failed && c.calls == 1 && c.write, names[5],
		 "work item: %u handled, %u resolved, %u outside process context, %u surplus, %u flushes failed; resolver called %u times (write %d)",
		 st.handled, st.resolved, st.not_in_task, st.surplus, st.flush_failed, c.calls,
		 c.write);
	vt_retry_check_cam(t, names[6], cp, &v, retry0, 1, bad0);
	vgpu_vm_latch_read(vg, &l);
	vt_check(t, !l.status && vgpu_rd(vg, VGPU_REG_VM_FAULTS) == faults0, names[7],
		 "VM_FAULT_STATUS %#x, VM_FAULTS %u -> %u: a retry fault is not a no-retry fault",
		 l.status, faults0, vgpu_rd(vg, VGPU_REG_VM_FAULTS));

	/*
	 * A page nobody serves: while the driver has not answered, the queue waits, and only a
	 * dequeue reset ends that; nothing is written anywhere. The answer then is amdgpu's
	 * no-retry marker, so the same access run again is a no-retry fault that halts.
	 */
	n = vt_wr(p, VT_VA_LAZY2, 0xBAD0BAD0);
	ret = vgpu_vm_job_emit(t, &j, p, n, &seq) ?: vt_retry_seen(t, &c, &c.calls2);
	if (!ret)
		msleep(VT_SETTLE_MS);
	state = vgpu_hqd_state(vg, c.slot);
	done = vgpu_fence_done(j.ring, seq);
	ret = ret ?: vgpu_hqd_stop(t, cp, c.slot);
	vt_check(t, !ret && !done && state != VGPU_HQD_STATE_HALTED &&
		 state != VGPU_HQD_STATE_IDLE && !vgpu_fence_done(j.ring, seq), names[8],
		 "%s; the queue was %s %u ms after the fault, its fence %s (want it waiting, then stopped by DEQUEUE_RESET)",
		 ret ? t->err : "DEQUEUE_RESET stopped it", vgpu_state_name(state), VT_SETTLE_MS,
		 done ? "reached" : "not reached");
	complete(&c.go2);
	vgpu_ih_soft_flush(cp);
	vgpu_vm_retry_get(j.vm, &st);
	vgpu_ih_vmid_get(cp, j.vm->vmid, &v);
	i = FIELD_GET(VGPU_REG_VM_RETRY_CAM_STATUS__USED_MASK,
		      vgpu_rd(vg, VGPU_REG_VM_RETRY_CAM_STATUS));
	vt_check(t, st.unresolved == 1 && st.handled == 2 && v.retry == 2 && !i &&
		 vgpu_vm_read_pte(j.vm, VT_VA_LAZY2) == VT_VM_PTE_NORETRY, names[9],
		 "work item: %u handled, %u unserved (want 2, 1); %u retry IVs (want 2); CAM entries used %u; PTE %#llx (want %#llx)",
		 st.handled, st.unresolved, v.retry, i, vgpu_vm_read_pte(j.vm, VT_VA_LAZY2),
		 (u64)VT_VM_PTE_NORETRY);
	vgpu_vm_latch_clear(vg);
	ret = vgpu_ring_start(t, j.ring) ?: vgpu_vm_job_emit(t, &j, p, n, &seq) ?:
	      vgpu_vm_halt_wait(t, j.ring) ?: vgpu_vm_fault_wait(t, cp, j.vm->vmid, 3);
	vgpu_ih_vmid_get(cp, j.vm->vmid, &v);
	vgpu_vm_latch_read(vg, &l);
	i = FIELD_PREP(VGPU_REG_VM_FAULT_STATUS__WALKER_ERROR_MASK,
		       VGPU_VM_WALKER_NO_RETRY_MARKER) |
	    VGPU_REG_VM_FAULT_STATUS__PRT_MASK | vgpu_vm_status(0, VGPU_VM_CID_CPC, true, 10);
	why[0] = '\0';
	if (ret)
		snprintf(why, sizeof(why), "%s", t->err);
	else if (v.retry != 2 || l.status != i || l.addr != VT_VA_LAZY2)
		snprintf(why, sizeof(why),
			 "%u retry IVs (want still 2); VM_FAULT_STATUS %#x at %#llx, want %#x (NO_RETRY_MARKER, PRT) at %#llx",
			 v.retry, l.status, l.addr, i, VT_VA_LAZY2);
	else
		vgpu_vm_fault_is(&v.last, j.vm, VT_VA_LAZY2, VGPU_VM_IV_DW5_WRITE_MASK, false, i,
				 true, why, sizeof(why));
	vt_check(t, !why[0], names[10], "%s", why);
out:
	/* The work item never waits on a case that has gone. */
	complete(&c.go);
	complete(&c.go2);
	vgpu_ring_destroy(t, r2);
	vgpu_vm_job_fini(t, &j);
	vgpu_vm_latch_clear(vg);
	vgpu_bo_free(cp, other);
	vgpu_bo_free(cp, c.backing);
	vgpu_bo_free(cp, src);
	return vt_cp_end(t, cp);
}

#define VT_STORM_PAGES		512
#define VT_STORM_BYTES		(VT_STORM_PAGES * VT_GPU_PAGE)
#define VT_VA_STORM_SRC		0x0000500000000000ULL	/* a 2 MiB page over VRAM */
#define VT_VA_STORM_DST		0x0000700000200000ULL	/* 512 pages, none mapped */
#define VT_VA_STORM_DST2	0x0000700000400000ULL	/* 512 more, for two queues at once */

/* The destination of one storm: VA pages mapped to VRAM as they fault. */
struct vt_storm {
	u64 va;
	u64 dst;		/* VRAM offset page k is mapped to on its fault */
	DECLARE_BITMAP(seen, VT_STORM_PAGES);
	u32 again;		/* a page resolved a second time */
	u32 outside;		/* a fault outside the destination */
};

static u64 vt_storm_resolve(struct vgpu_vm *vm, u64 va, bool write, void *arg)
{
	struct vt_storm *s = arg;
	u64 k = (va - s->va) / VT_GPU_PAGE;

	if (va < s->va || k >= VT_STORM_PAGES) {
		s->outside++;
		return 0;
	}
	if (test_and_set_bit(k, s->seen))
		s->again++;
	return vt_vm_pte(s->dst + k * VT_GPU_PAGE, false, VT_VM_RW);
}

/* Counters before a storm, to see what it added. */
struct vt_storm_base {
	struct vgpu_vm_retry_stats st;
	struct vgpu_ih_vmid v;
	u32 retry, bad_cam, dropped;
};

static void vt_storm_base(struct vgpu_cp *cp, struct vgpu_vm *vm, struct vt_storm_base *b)
{
	vgpu_vm_retry_get(vm, &b->st);
	vgpu_ih_vmid_get(cp, vm->vmid, &b->v);
	b->retry = vgpu_rd(cp->vg, VGPU_REG_VM_RETRY_FAULTS);
	b->bad_cam = READ_ONCE(cp->ih.vm_bad_cam);
	b->dropped = READ_ONCE(cp->ih.soft.dropped);
}

/* The destination in VRAM holds the source pattern. */
static void vt_storm_check_data(struct vt_case *t, const char *name, int ret, u32 *buf, u64 off,
				u32 pattern)
{
	u32 i, bad = 0, first = 0;

	vgpu_hdp_invalidate(t->vg);
	memcpy_fromio(buf, t->vg->vram + off, VT_STORM_BYTES);
	for (i = 0; i < VT_STORM_BYTES / 4; i++) {
		if (buf[i] != pattern + i && !bad++)
			first = i;
	}
	vt_check(t, !ret && !bad, name,
		 "%s; %u of %u destination dwords wrong, the first at byte %#x: %#010x, want %#010x",
		 ret ? t->err : "fence reached", bad, VT_STORM_BYTES / 4, 4 * first, buf[first],
		 pattern + first);
}

enum vt_res t_fault_storm(struct vt_case *t)
{
	static const char *const names[] = {
		"job_completes", "every_page_once", "no_lost_ivs", "no_surplus_ivs", "cam_rules",
		"right_data", "shared_jobs_complete", "shared_every_page_once", "shared_cam_dedup",
		"shared_right_data",
	};
	struct vgpu *vg = t->vg;
	struct vgpu_vm_job j = {};
	struct vgpu_ring *r2 = NULL;
	struct vgpu_vm_retry_stats st;
	struct vt_storm_base b;
	struct vgpu_ih_vmid v;
	struct vt_storm *s = NULL, *s2 = NULL;
	u32 p[16], n, seq, seq2, i, pattern, pages, ivs, surplus;
	u32 *buf = NULL;
	struct vgpu_cp *cp;
	ktime_t start;
	u64 src;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	src = ALIGN_DOWN(vg->vram_len / 2, VT_SZ_2M);
	if (src < VT_SZ_2M || src + 3 * VT_SZ_2M > vg->vram_len) {
		vt_reason(t, -ENOSPC, "BAR0 is %#llx bytes: no room for 3 x 2 MiB of VRAM",
			  (u64)vg->vram_len);
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		return vt_cp_end(t, cp);
	}
	s = kzalloc(sizeof(*s), GFP_KERNEL);
	s2 = kzalloc(sizeof(*s2), GFP_KERNEL);
	buf = vmalloc(VT_STORM_BYTES);
	ret = s && s2 && buf ? 0 : vt_reason(t, -ENOMEM, "out of memory");
	ret = ret ?: vgpu_vm_job_init(t, cp, &j, 11, 0x10b, VT_VM_RETRY, VT_RETRY_SLOT(cp));
	ret = ret ?: vgpu_vm_map_huge(t, j.vm, VT_VA_STORM_SRC, 1,
				      vt_vm_pte(src, false, VGPU_PTE_READABLE_MASK));
	if (!ret) {
		r2 = vgpu_ring_create(t, cp, vt_compute_slot(cp, 1, 6), VT_RING_BYTES);
		ret = r2 ? 0 : -EIO;
	}
	if (ret) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	s->va = VT_VA_STORM_DST;
	s->dst = src + VT_SZ_2M;
	s2->va = VT_VA_STORM_DST2;
	s2->dst = src + 2 * VT_SZ_2M;
	pattern = vgpu_dma_pattern();
	for (i = 0; i < VT_STORM_BYTES / 4; i++)
		buf[i] = pattern + i;
	memcpy_toio(vg->vram + src, buf, VT_STORM_BYTES);
	memset_io(vg->vram + s->dst, 0, 2 * VT_STORM_BYTES);
	vgpu_hdp_flush(vg);
	vt_note(t, "VMID 11 copies 2 MiB from a 2 MiB page (VRAM %#llx) to %u unmapped pages at %#llx, mapped to VRAM %#llx.. as they fault",
		src, VT_STORM_PAGES, s->va, s->dst);

	/* One queue: every page faults once, one at a time. */
	vgpu_vm_set_resolver(j.vm, vt_storm_resolve, s);
	vt_storm_base(cp, j.vm, &b);
	start = ktime_get();
	n = vt_copy(p, VT_VA_STORM_SRC, s->va, VT_STORM_BYTES);
	ret = vgpu_vm_job_emit(t, &j, p, n, &seq) ?: vt_retry_fence_wait(t, j.ring, j.vm, seq);
	vt_note(t, "fault_storm: %lld ms for the copy", ktime_ms_delta(ktime_get(), start));
	vt_check(t, !ret, names[0], "%s", t->err);

	msleep(VT_SETTLE_MS);
	vgpu_vm_retry_get(j.vm, &st);
	vgpu_ih_vmid_get(cp, j.vm->vmid, &v);
	pages = bitmap_weight(s->seen, VT_STORM_PAGES);
	vt_note(t, "retry IVs %u, handled %u, resolved %u, surplus %u, soft ring at most %u queued",
		v.retry, st.handled, st.resolved, st.surplus, READ_ONCE(cp->ih.soft.max_queued));
	vt_check(t, pages == VT_STORM_PAGES && !s->again && !s->outside, names[1],
		 "%u of %u pages faulted and were mapped, %u twice, %u faults outside the copy",
		 pages, VT_STORM_PAGES, s->again, s->outside);
	vt_check(t, v.retry == VT_STORM_PAGES && st.handled == v.retry &&
		 READ_ONCE(cp->ih.soft.dropped) == b.dropped, names[2],
		 "%u retry IVs for %u faulting pages, %u handled, %u lost by the soft ring",
		 v.retry, VT_STORM_PAGES, st.handled, READ_ONCE(cp->ih.soft.dropped) - b.dropped);
	vt_check(t, !st.surplus && !st.unresolved && v.faults == v.retry, names[3],
		 "%u IVs for pages already mapped, %u unresolved, %u no-retry IVs",
		 st.surplus, st.unresolved, v.faults - v.retry);
	vt_retry_check_cam(t, names[4], cp, &v, b.retry, VT_STORM_PAGES, b.bad_cam);
	vt_storm_check_data(t, names[5], ret, buf, s->dst, pattern);

	/*
	 * Two queues of the VMID copy onto the same unmapped pages at once. A page both fault on
	 * while its CAM entry is outstanding gets one IV; a queue that faults on it after the
	 * acknowledgement raced the driver's mapping and gets a fresh entry, whose IV finds the
	 * page mapped (a surplus IV, as amdgpu's fault filter sees them). No IV may name a page
	 * whose entry is still outstanding.
	 */
	vgpu_vm_set_resolver(j.vm, vt_storm_resolve, s2);
	vt_storm_base(cp, j.vm, &b);
	n = vt_copy(p, VT_VA_STORM_SRC, s2->va, VT_STORM_BYTES);
	ret = vgpu_vm_job_emit(t, &j, p, n, &seq);
	if (!ret) {
		ret = vgpu_vm_emit_ib(t, r2, j.vm, VT_VA_CODE + 4ULL * (j.used - n), n, &seq2) ?:
		      vt_retry_fence_wait(t, j.ring, j.vm, seq) ?:
		      vt_retry_fence_wait(t, r2, j.vm, seq2);
	}
	vt_check(t, !ret, names[6], "%s", t->err);
	msleep(VT_SETTLE_MS);
	vgpu_vm_retry_get(j.vm, &st);
	vgpu_ih_vmid_get(cp, j.vm->vmid, &v);
	pages = bitmap_weight(s2->seen, VT_STORM_PAGES);
	ivs = v.retry - b.v.retry;
	surplus = st.surplus - b.st.surplus;
	vt_note(t, "two queues: retry IVs %u, resolved %u, surplus %u, soft ring at most %u queued",
		ivs, st.resolved - b.st.resolved, surplus, READ_ONCE(cp->ih.soft.max_queued));
	vt_check(t, pages == VT_STORM_PAGES && !s2->again && !s2->outside, names[7],
		 "%u of %u pages faulted and were mapped, %u twice, %u faults outside the copy",
		 pages, VT_STORM_PAGES, s2->again, s2->outside);
	vt_check(t, !v.cam_dup_page && !v.cam_busy && ivs == VT_STORM_PAGES + surplus &&
		 st.handled - b.st.handled == ivs && st.unresolved == b.st.unresolved &&
		 vgpu_rd(vg, VGPU_REG_VM_RETRY_FAULTS) - b.retry == ivs &&
		 READ_ONCE(cp->ih.soft.dropped) == b.dropped, names[8],
		 "%u retry IVs for %u pages (%u surplus), %u for a page and %u for an index with an outstanding CAM entry, %u handled, RETRY_FAULTS +%u, %u lost",
		 ivs, VT_STORM_PAGES, surplus, v.cam_dup_page, v.cam_busy,
		 st.handled - b.st.handled,
		 vgpu_rd(vg, VGPU_REG_VM_RETRY_FAULTS) - b.retry,
		 READ_ONCE(cp->ih.soft.dropped) - b.dropped);
	vt_storm_check_data(t, names[9], ret, buf, s2->dst, pattern);
out:
	vgpu_ring_destroy(t, r2);
	vgpu_vm_job_fini(t, &j);
	vgpu_vm_latch_clear(vg);
	vfree(buf);
	kfree(s2);
	kfree(s);
	return vt_cp_end(t, cp);
}
