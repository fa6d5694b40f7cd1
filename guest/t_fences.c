// SPDX-License-Identifier: GPL-2.0
/*
 * Fences: throughput and ordering on several queues, fence latency, and a semaphore
 * between two queues.
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/slab.h>
#include <linux/sort.h>

#include "cases.h"
#include "cp.h"

#define VT_FENCE_QUEUES		4
#define VT_FENCE_PER_PIPE	(VT_FENCE_QUEUES / VGPU_CP_COMPUTE_PIPES)	/* on each pipe */
#define VT_FENCE_IRQ_EVERY	4	/* every 4th fence (and its last) interrupts */
#define VT_FENCE_KICK_EVERY	8	/* doorbell every 8 jobs of a queue */
#define VT_LAT_SAMPLES		200
#define VT_REG_SAMPLES		1000	/* register reads of the baseline */

static int vt_cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/*
 * The baseline the fence latency is quoted beside, measured in the same boot: the round trip
 * of a trapped register read (ID_MAGIC: read-only, no side effect), each read timed alone.
 */
static int vgpu_reg_read_latency(struct vt_case *t, struct vgpu *vg, u64 *lat, unsigned int n)
{
	unsigned int i;
	ktime_t t0;
	u32 v;

	for (i = 0; i < n; i++) {
		t0 = ktime_get();
		v = vgpu_rd(vg, VGPU_REG_ID_MAGIC);
		lat[i] = ktime_to_ns(ktime_sub(ktime_get(), t0));
		if (v != VGPU_ID_MAGIC_VALUE)
			return vt_reason(t, -EIO, "read %u of ID_MAGIC returned %#010x", i, v);
	}
	return 0;
}

/* Single interrupting fences on r: doorbell -> the IH handler decoding the EOP IV. */
static int vgpu_fence_latency(struct vt_case *t, struct vgpu_ring *r, u64 *lat, unsigned int n)
{
	struct vgpu_cp *cp = r->cp;
	struct vgpu_ih_slot s;
	unsigned int i;
	u32 eop, seq;
	ktime_t t0;
	int ret;

	for (i = 0; i < n; i++) {
		ret = vgpu_ring_alloc(t, r, VT_FENCE_DW);
		if (ret)
			return ret;
		eop = READ_ONCE(cp->ih.slot[r->slot].eop);
		seq = vgpu_ring_fence(r, true);
		vgpu_ring_commit(r);
		t0 = ktime_get();
		vgpu_ring_kick(r);
		ret = vgpu_eop_wait(t, r, eop + 1);
		if (ret)
			return ret;
		vgpu_ih_slot_get(cp, r->slot, &s);
		if (s.eop_ctxid != seq)
			return vt_reason(t, -EIO, "sample %u: EOP ctxid %#x, want %#x",
					 i, s.eop_ctxid, seq);
		lat[i] = ktime_to_ns(ktime_sub(s.eop_time, t0));
		ret = vgpu_fence_wait(t, r, seq);
		if (ret)
			return ret;
	}
	return 0;
}

enum vt_res t_fences(struct vt_case *t)
{
	static const char *const names[] = {
		"queue_0", "queue_1", "queue_2", "queue_3", "no_lost_interrupts",
		"reg_read_baseline", "latency",
	};
	struct vgpu_ring *r[VT_FENCE_QUEUES] = { };
	u32 jobs[VT_FENCE_QUEUES] = { }, irqs[VT_FENCE_QUEUES] = { };
	u32 dropped0, ov0, unk0, vmf0, total, j, k, v, hw, p[VT_JOB_DW], nvec0;
	struct vgpu *vg = t->vg;
	struct vgpu_bo *scratch;
	char why[VT_WHY_LEN];
	struct vgpu_ih_slot s;
	unsigned int i, n;
	u64 ns, *lat = NULL;
	struct vgpu_cp *cp;
	ktime_t start;
	bool last, irq;
	int ret = 0, base;

	BUILD_BUG_ON(ARRAY_SIZE(names) != VT_FENCE_QUEUES + 3);
	BUILD_BUG_ON(VT_REG_SAMPLES < VT_LAT_SAMPLES);
	BUILD_BUG_ON(VT_FENCE_QUEUES % VGPU_CP_COMPUTE_PIPES);
	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	scratch = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	lat = kcalloc(VT_REG_SAMPLES, sizeof(*lat), GFP_KERNEL);
	if (!lat)
		vt_reason(t, -ENOMEM, "out of memory");
	for (i = 0; i < VT_FENCE_QUEUES && scratch && lat; i++) {
		r[i] = vgpu_ring_create(t, cp,
					vt_compute_slot(cp, i / VT_FENCE_PER_PIPE,
							i % VT_FENCE_PER_PIPE),
					VT_RING_BYTES);
		if (!r[i])
			break;
	}
	if (i < VT_FENCE_QUEUES) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	total = max_t(u32, fence_jobs, VT_FENCE_QUEUES);
	vt_note(t,
		"%u jobs on slots %u, %u, %u, %u: WRITE_DATA + fence, every %uth fence (and the last) interrupting, a doorbell every %u jobs",
		total, r[0]->slot, r[1]->slot, r[2]->slot, r[3]->slot, VT_FENCE_IRQ_EVERY,
		VT_FENCE_KICK_EVERY);

	dropped0 = vgpu_rd(vg, VGPU_REG_IH_DROPPED);
	ov0 = READ_ONCE(cp->ih.overflows);
	unk0 = READ_ONCE(cp->ih.unknown);
	vmf0 = READ_ONCE(cp->ih.vm_faults);
	nvec0 = atomic_read(&vg->vecs[VT_IH_VECTOR].count);
	start = ktime_get();
	for (j = 0; j < total && !ret; j++) {
		struct vgpu_ring *q;

		i = j % VT_FENCE_QUEUES;
		q = r[i];
		k = ++jobs[i];
		last = j + VT_FENCE_QUEUES >= total;
		ret = vgpu_ring_alloc(t, q, VT_JOB_DW);
		if (ret)
			break;
		vgpu_ring_put(q, p, pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM,
						  VGPU_PM4_CACHE_POLICY_LRU, scratch->gpu + 64 * i,
						  k));
		irq = !(k % VT_FENCE_IRQ_EVERY) || last;
		irqs[i] += irq;
		vgpu_ring_fence(q, irq);
		vgpu_ring_commit(q);
		if (!(k % VT_FENCE_KICK_EVERY) || last)
			vgpu_ring_kick(q);
		/* Sample the fence while submitting: it must never go backwards. */
		vgpu_fence_read(q);
	}
	for (i = 0; i < VT_FENCE_QUEUES && !ret; i++)
		ret = vgpu_fence_wait(t, r[i], r[i]->seq);
	ns = ktime_to_ns(ktime_sub(ktime_get(), start));
	for (i = 0; i < VT_FENCE_QUEUES && !ret; i++)
		ret = vgpu_eop_wait(t, r[i], irqs[i]);
	/* Let a late duplicate show up. */
	msleep(VT_SETTLE_MS);
	if (ret) {
		vt_note(t, "stopped at job %u of %u: %s", j, total, t->err);
	} else {
		n = 0;
		for (i = 0; i < VT_FENCE_QUEUES; i++)
			n += irqs[i];
		vt_note(t,
			"fences: %u jobs in %llu ms: %llu jobs/s; %u interrupting fences, %d interrupts on vector %u",
			total, div_u64(ns, NSEC_PER_MSEC),
			div64_u64((u64)total * NSEC_PER_SEC, max_t(u64, ns, 1)), n,
			atomic_read(&vg->vecs[VT_IH_VECTOR].count) - nvec0, VT_IH_VECTOR);
		vt_note(t, "fence_jobs_per_s: %llu",
			div64_u64((u64)total * NSEC_PER_SEC, max_t(u64, ns, 1)));
	}

	for (i = 0; i < VT_FENCE_QUEUES; i++) {
		struct vgpu_ring *q = r[i];

		vgpu_ih_slot_get(cp, q->slot, &s);
		v = vgpu_fence_read(q);
		k = vgpu_bo_rd(scratch, 64 * i);
		hw = vgpu_hqd_rd(vg, q->slot, VGPU_REG_HQD_FENCES);
		why[0] = '\0';
		if (ret)
			snprintf(why, sizeof(why), "%s", t->err);
		else if (v != jobs[i] || k != jobs[i])
			snprintf(why, sizeof(why), "slot %u: fence %u, scratch %u, want %u",
				 q->slot, v, k, jobs[i]);
		else if (hw != jobs[i])
			snprintf(why, sizeof(why), "slot %u: HQD_FENCES %u, want %u", q->slot, hw,
				 jobs[i]);
		else if (s.eop != irqs[i] || s.eop_ctxid != jobs[i])
			snprintf(why, sizeof(why),
				 "slot %u: %u EOP IVs (last ctxid %u), want %u (last %u)",
				 q->slot, s.eop, s.eop_ctxid, irqs[i], jobs[i]);
		else if (s.eop_unordered || s.eop_early)
			snprintf(why, sizeof(why),
				 "slot %u: %u EOP IVs out of order, %u decoded before their fence data",
				 q->slot, s.eop_unordered, s.eop_early);
		else if (s.fence_backwards || q->fence_backwards)
			snprintf(why, sizeof(why),
				 "slot %u: the fence went backwards %u times (IH handler samples), %u times (driver samples)",
				 q->slot, s.fence_backwards, q->fence_backwards);
		else if (s.err || q->overrun)
			snprintf(why, sizeof(why), "slot %u: %u error IVs (source %u, DW4 %u)%s",
				 q->slot, s.err, s.err_src, s.err_data[0],
				 q->overrun ? ", ring reservation overrun" : "");
		vt_check(t, !why[0], names[i], "%s", why);
	}

	v = vgpu_rd(vg, VGPU_REG_IH_DROPPED) - dropped0;
	k = READ_ONCE(cp->ih.overflows) - ov0;
	n = READ_ONCE(cp->ih.unknown) - unk0;
	j = READ_ONCE(cp->ih.vm_faults) - vmf0;
	vt_check(t, !v && !k && !n && !j, names[4],
		 "IH_DROPPED +%u, IH ring overflows %u, IVs of no known source %u (last DW0 %#010x), VM fault IVs %u",
		 v, k, n, READ_ONCE(cp->ih.unknown_dw0), j);

	base = vgpu_reg_read_latency(t, vg, lat, VT_REG_SAMPLES);
	if (!base) {
		sort(lat, VT_REG_SAMPLES, sizeof(*lat), vt_cmp_u64, NULL);
		vt_note(t, "reg_read_ns: median=%llu p99=%llu samples=%u", lat[VT_REG_SAMPLES / 2],
			lat[VT_REG_SAMPLES * 99 / 100], VT_REG_SAMPLES);
		vt_note(t, "reg_read: %u trapped reads of ID_MAGIC, each timed alone: min %llu ns, max %llu ns",
			VT_REG_SAMPLES, lat[0], lat[VT_REG_SAMPLES - 1]);
	}
	vt_check(t, !base, names[5], "%s", t->err);

	if (!ret)
		ret = vgpu_fence_latency(t, r[0], lat, VT_LAT_SAMPLES);
	if (!ret) {
		sort(lat, VT_LAT_SAMPLES, sizeof(*lat), vt_cmp_u64, NULL);
		vt_note(t, "fence_latency_us: median=%llu p99=%llu samples=%u",
			div_u64(lat[VT_LAT_SAMPLES / 2], NSEC_PER_USEC),
			div_u64(lat[VT_LAT_SAMPLES * 99 / 100], NSEC_PER_USEC), VT_LAT_SAMPLES);
		vt_note(t,
			"fence_latency: %u single-fence submits on slot %u, doorbell to IH handler: min %llu us, max %llu us",
			VT_LAT_SAMPLES, r[0]->slot, div_u64(lat[0], NSEC_PER_USEC),
			div_u64(lat[VT_LAT_SAMPLES - 1], NSEC_PER_USEC));
	}
	vt_check(t, !ret, names[6], "%s", t->err);
out:
	for (i = 0; i < VT_FENCE_QUEUES; i++)
		vgpu_ring_destroy(t, r[i]);
	vgpu_bo_free(cp, scratch);
	kfree(lat);
	return vt_cp_end(t, cp);
}

#define VT_SEM_MARK	0x5E3A0001

/*
 * Queue B waits (WAIT_REG_MEM, memory ==) for a dword that queue A sets. Both the wait and the
 * release use CACHE_POLICY BYPASS on an uncached page, so the L2 cannot hide the release.
 */
enum vt_res t_semaphore(struct vt_case *t)
{
	static const char *const names[] = { "b_parked", "b_blocked", "a_signal", "b_resumed" };
	struct vgpu_ring *a = NULL, *b = NULL;
	struct vgpu *vg = t->vg;
	struct vgpu_bo *mem;
	struct vgpu_cp *cp;
	u32 p[32], n, seq_a, seq_b, state, v;
	bool ok;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	mem = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	if (mem)
		b = vgpu_ring_create(t, cp, vt_compute_slot(cp, 0, 2), VT_RING_BYTES);
	if (b)
		a = vgpu_ring_create(t, cp, vt_compute_slot(cp, 1, 2), VT_RING_BYTES);
	if (!a) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}

	ret = vgpu_ring_alloc(t, b, 7 + 5 + VT_FENCE_DW);
	if (ret) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	n = pm4_wait_mem_eq(p, mem->gpu, 1, 0xffffffff, VGPU_PM4_CACHE_POLICY_BYPASS);
	n += pm4_write_one(p + n, VGPU_PM4_WRITE_DATA_DST_MEM, VGPU_PM4_CACHE_POLICY_BYPASS,
			   mem->gpu + 64, VT_SEM_MARK);
	vgpu_ring_put(b, p, n);
	seq_b = vgpu_ring_fence(b, true);
	vgpu_ring_commit(b);
	vgpu_ring_kick(b);

	ok = vgpu_hqd_wait_state(vg, b->slot, VGPU_HQD_STATE_WAITING);
	state = vgpu_hqd_state(vg, b->slot);
	vt_check(t, ok, names[0], "queue B (slot %u) is %s after %u ms, want WAITING", b->slot,
		 vgpu_state_name(state), timeout_ms);

	msleep(VT_SETTLE_MS);
	v = vgpu_bo_rd(mem, 64);
	state = vgpu_hqd_state(vg, b->slot);
	ok = !v && !vgpu_fence_done(b, seq_b) && state == VGPU_HQD_STATE_WAITING;
	vt_check(t, ok, names[1],
		 "before the release: marker %#010x (want 0), fence %u (want below %u), state %s (want WAITING)",
		 v, vgpu_fence_read(b), seq_b, vgpu_state_name(state));

	ret = vgpu_ring_alloc(t, a, 5 + VT_FENCE_DW);
	if (!ret) {
		vgpu_ring_put(a, p, pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM,
						  VGPU_PM4_CACHE_POLICY_BYPASS, mem->gpu, 1));
		seq_a = vgpu_ring_fence(a, true);
		vgpu_ring_commit(a);
		vgpu_ring_kick(a);
		ret = vgpu_fence_wait(t, a, seq_a);
	}
	v = vgpu_bo_rd(mem, 0);
	vt_check(t, !ret && v == 1, names[2], "queue A: %s (semaphore dword %u)",
		 ret ? t->err : "fence reached", v);

	ret = vgpu_fence_wait(t, b, seq_b);
	if (!ret)
		ret = vgpu_eop_wait(t, b, 1);
	v = vgpu_bo_rd(mem, 64);
	vt_check(t, !ret && v == VT_SEM_MARK, names[3], "queue B: %s (marker %#010x, want %#010x)",
		 ret ? t->err : "fence reached", v, VT_SEM_MARK);
out:
	vgpu_ring_destroy(t, a);
	vgpu_ring_destroy(t, b);
	vgpu_bo_free(cp, mem);
	return vt_cp_end(t, cp);
}
