// SPDX-License-Identifier: GPL-2.0
/*
 * MES's scheduling: more queues than slots (order and completeness per queue, every queue
 * mapped and unmapped again and again), a high-priority queue against a full device, fairness
 * among equals, suspend and resume, and more processes than VMIDs.
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/math64.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>

#include "cases.h"
#include "t_mes.h"

#define VT_HOLD_MS		100	/* how long work that must not run is watched */

/*
 * Waits until every queue of qs has reached its last fence, with a progress timeout; *max_mapped
 * gets the most MES_MAPPED read meanwhile.
 */
static int vt_wait_all(struct vt_mes_kit *k, struct vgpu_mes_queue **qs, unsigned int n,
		       u32 *max_mapped)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(vt_mes_ms());
	u64 sum, last = 0;
	unsigned int i, left;
	char st[320];
	u32 mapped;

	for (;;) {
		mapped = vgpu_rd(k->cp->vg, VGPU_REG_MES_MAPPED);
		if (max_mapped && mapped > *max_mapped)
			*max_mapped = mapped;
		for (i = 0, left = 0, sum = 0; i < n; i++) {
			sum += vgpu_mq_fence_read(qs[i]);
			left += !vgpu_mq_done(qs[i], qs[i]->seq);
		}
		if (!left)
			return 0;
		if (sum != last) {
			last = sum;
			deadline = jiffies + msecs_to_jiffies(vt_mes_ms());
		}
		if (time_after(jiffies, deadline))
			break;
		usleep_range(200, 400);
	}
	for (i = 0; i < n && vgpu_mq_done(qs[i], qs[i]->seq); i++)
		;
	vgpu_mq_describe(qs[i], st, sizeof(st));
	return vt_reason(k->t, -ETIMEDOUT, "%u of %u queues unfinished after %u ms without progress; the first: %s",
			 left, n, vt_mes_ms(), st);
}

#define VT_OS_PROCS		4
#define VT_OS_QUEUES		64
#define VT_OS_ROUNDS		4
#define VT_OS_JOBS		8	/* per queue and round */
#define VT_OS_VA_GATE		(VT_VA_DATA + SZ_1M)	/* dword r: round r's gate */

/*
 * Waits (sampling MES_MAPPED) until every queue was mapped since before[] was read: with all of
 * them parked on a closed gate, that takes turns on the slots.
 */
static int vt_os_turns(struct vt_mes_kit *k, struct vgpu_mes_queue **qs, const u32 *before,
		       unsigned int round, u32 *max_mapped)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(2 * vt_mes_ms());
	struct vgpu_mq_status s;
	unsigned int j, left;
	u32 mapped;

	for (;;) {
		mapped = vgpu_rd(k->cp->vg, VGPU_REG_MES_MAPPED);
		*max_mapped = max(*max_mapped, mapped);
		for (j = 0, left = 0; j < VT_OS_QUEUES; j++) {
			vgpu_mes_status(k->m, qs[j]->doorbell, &s);
			left += s.maps == before[j];
		}
		if (!left)
			return 0;
		if (time_after(jiffies, deadline))
			return vt_reason(k->t, -ETIMEDOUT,
					 "round %u: %u of %u queues parked on the closed gate never got a slot in %u ms (MES_MAPPED %u)",
					 round, left, VT_OS_QUEUES, 2 * vt_mes_ms(), mapped);
		usleep_range(200, 400);
	}
}

enum vt_res t_mes_oversubscribe(struct vt_case *t)
{
	static const char *const names[] = {
		"all_added", "all_complete", "order_kept", "within_slots", "mapped_unmapped",
	};
	const unsigned int nn = ARRAY_SIZE(names);
	struct vgpu_mes_queue_opts o = { .priority = VGPU_MES_PRIORITY_NORMAL };
	struct vgpu_mes_proc *procs[VT_OS_PROCS];
	u32 maps0, unmaps0, max_mapped = 0, mn_m = ~0U, mx_m = 0, mn_p = ~0U, mx_p = 0;
	struct vgpu_mes_queue **qs;
	struct vgpu_mq_status s;
	char why[VT_WHY_LEN], tmp[VT_WHY_LEN];
	u32 before[VT_OS_QUEUES], pk[8], n;
	struct vgpu_bo *gate;
	struct vt_mes_kit *k;
	struct vgpu *vg = t->vg;
	unsigned int i = 0, j, r, bad;
	ktime_t t0;
	int ret = 0;

	vt_sub_begin(t, nn);
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, nn);
	k = vt_kit_start(t, NULL);
	if (!k) {
		vt_sub_fail_all(t, names, nn);
		return vt_cp_end(t, t->vg->cp);
	}
	qs = k->q;
	gate = vt_kit_bo(k, VT_GPU_PAGE);
	ret = gate ? 0 : -ENOMEM;
	for (j = 0; j < VT_OS_PROCS && !ret; j++) {
		procs[j] = vt_kit_proc(k, 0x301 + j);
		ret = procs[j] ? vgpu_mes_proc_map(t, procs[j], VT_OS_VA_GATE, gate, VT_VM_RW) :
				 -ENOMEM;
	}
	for (j = 0; j < VT_OS_QUEUES && !ret; j++)
		ret = vt_kit_queue(k, procs[j % VT_OS_PROCS], &o, true) ? 0 : -EIO;
	snprintf(why, sizeof(why), "%s; MES_QUEUES %u (want %u), MES_PROCESSES %u (want %u)",
		 ret ? t->err : "all added", vgpu_rd(vg, VGPU_REG_MES_QUEUES), VT_OS_QUEUES,
		 vgpu_rd(vg, VGPU_REG_MES_PROCESSES), VT_OS_PROCS);
	if (!vt_kit_check(k, !ret && vgpu_rd(vg, VGPU_REG_MES_QUEUES) == VT_OS_QUEUES &&
			  vgpu_rd(vg, VGPU_REG_MES_PROCESSES) == VT_OS_PROCS, names[i++], why)) {
		vt_sub_skip(t, names + i, nn - i, "the queues were not added");
		goto out;
	}

	/*
	 * Rounds: every queue parks on the round's closed gate with VT_OS_JOBS ordered jobs
	 * behind it, so that all 64 have work at once; they take turns on the slots (preempted in
	 * the WAIT_REG_MEM) until each has had one; then the gate opens, all run, every queue goes
	 * idle and is unmapped before the next round maps it again.
	 */
	maps0 = vgpu_rd(vg, VGPU_REG_MES_MAPS);
	unmaps0 = vgpu_rd(vg, VGPU_REG_MES_UNMAPS);
	t0 = ktime_get();
	for (r = 0; r < VT_OS_ROUNDS && !ret; r++) {
		for (j = 0; j < VT_OS_QUEUES && !ret; j++) {
			vgpu_mes_status(k->m, qs[j]->doorbell, &s);
			before[j] = s.maps;
			n = vt_gate(pk, VT_OS_VA_GATE + 4 * r, 1);
			ret = vgpu_mq_alloc(t, qs[j], n);
			if (!ret)
				vgpu_mq_put(qs[j], pk, n);
			ret = ret ?: vt_kit_stream(k, qs[j], VT_OS_JOBS);
		}
		ret = ret ?: vt_os_turns(k, qs, before, r, &max_mapped);
		vgpu_bo_wr(gate, 4 * r, 1);
		ret = ret ?: vt_wait_all(k, qs, VT_OS_QUEUES, &max_mapped);
		if (!ret && !vt_kit_wait_mapped(k, 0, vt_mes_ms()))
			ret = vt_reason(t, -ETIMEDOUT, "round %u: MES_MAPPED still %u %u ms after all work was done",
					r, vgpu_rd(vg, VGPU_REG_MES_MAPPED), vt_mes_ms());
	}
	vt_note(t, "%u queues of %u processes on %u slots: %u rounds of %u ordered jobs each in %lld ms; MES_MAPS +%u, MES_UNMAPS +%u; at most %u mapped at once",
		VT_OS_QUEUES, VT_OS_PROCS, k->m->nslots, r, VT_OS_JOBS,
		ktime_ms_delta(ktime_get(), t0), vgpu_rd(vg, VGPU_REG_MES_MAPS) - maps0,
		vgpu_rd(vg, VGPU_REG_MES_UNMAPS) - unmaps0, max_mapped);
	vt_kit_check(k, !ret, names[i++], t->err);

	why[0] = '\0';
	for (j = 0, bad = 0; j < VT_OS_QUEUES; j++)
		bad += !vt_kit_ordered(qs[j], VT_OS_ROUNDS * VT_OS_JOBS, bad ? tmp : why,
				       sizeof(why));
	if (bad)
		vt_note(t, "%u queues out of order or incomplete", bad);
	vt_kit_check(k, !bad, names[i++], why);

	snprintf(why, sizeof(why), "MES_MAPPED read %u at most, want all %u slots in use and never more",
		 max_mapped, k->m->nslots);
	vt_kit_check(k, max_mapped == k->m->nslots, names[i++], why);

	for (j = 0; j < VT_OS_QUEUES; j++) {
		vgpu_mes_status(k->m, qs[j]->doorbell, &s);
		mn_m = min(mn_m, s.maps);
		mx_m = max(mx_m, s.maps);
		mn_p = min(mn_p, s.preempts);
		mx_p = max(mx_p, s.preempts);
	}
	vt_note(t, "per queue: QUERY_MAPS %u..%u, QUERY_PREEMPTS %u..%u", mn_m, mx_m, mn_p, mx_p);
	snprintf(why, sizeof(why), "QUERY_MAPS %u..%u, QUERY_PREEMPTS %u..%u over the queues: want each at least %u",
		 mn_m, mx_m, mn_p, mx_p, VT_OS_ROUNDS - 1);
	vt_kit_check(k, mn_m >= VT_OS_ROUNDS - 1 && mn_p >= VT_OS_ROUNDS - 1, names[i++], why);
out:
	vt_kit_end(k);
	return vt_cp_end(t, t->vg->cp);
}

static int vt_cmp_u32(const void *a, const void *b)
{
	u32 x = *(const u32 *)a, y = *(const u32 *)b;

	return x < y ? -1 : x > y;
}

#define VT_PRIO_SAMPLES		8
#define VT_PRIO_BUSY		16

/*
 * Runs VT_PRIO_SAMPLES single jobs on h, each from an unmapped queue, timed from the doorbell
 * until the CPU sees the fence; lat gets them in µs, sorted.
 */
static int vt_prio_samples(struct vt_mes_kit *k, struct vgpu_mes_queue *h, u32 *lat)
{
	struct vgpu_mq_status s;
	u32 pk[8], seq, n;
	unsigned int i;
	ktime_t t0;
	int ret;

	for (i = 0; i < VT_PRIO_SAMPLES; i++) {
		if (!vgpu_mq_wait_status(h, VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK, 0, vt_mes_ms(),
					 &s))
			return vt_reason(k->t, -ETIMEDOUT, "sample %u: the HIGH queue still mapped %u ms after its job",
					 i, vt_mes_ms());
		n = vt_wr(pk, VT_VA_DATA + 4 * i, 0x41000000 + i);
		ret = vgpu_mq_alloc(k->t, h, n + VT_FENCE_DW);
		if (ret)
			return ret;
		vgpu_mq_put(h, pk, n);
		seq = vgpu_mq_fence(h, false);
		vgpu_mq_commit(h);
		t0 = ktime_get();
		vgpu_mq_kick(h);
		ret = vgpu_mq_wait(k->t, h, seq, vt_mes_ms());
		lat[i] = ktime_us_delta(ktime_get(), t0);
		if (ret)
			return ret;
	}
	sort(lat, VT_PRIO_SAMPLES, sizeof(*lat), vt_cmp_u32, NULL);
	return 0;
}

enum vt_res t_mes_priority(struct vt_case *t)
{
	static const char *const names[] = {
		"idle_latency", "busy_all_slots", "loaded_latency", "preempted_by_priority",
		"change_priority", "busy_complete",
	};
	const unsigned int nn = ARRAY_SIZE(names);
	struct vgpu_mes_queue_opts o = { .priority = VGPU_MES_PRIORITY_HIGH };
	u32 idle[VT_PRIO_SAMPLES], loaded[VT_PRIO_SAMPLES], medium[VT_PRIO_SAMPLES], pk[16], n;
	u32 seq, log0, prio, nb;
	struct vgpu_mq_status s;
	struct vgpu_mes_queue *h = NULL, *busy[VT_KIT_QUEUES];
	struct vgpu_mes_proc *pb = NULL, *ph = NULL;
	struct vgpu_bo *gate = NULL, *d = NULL;
	struct vgpu_mes_evt e;
	struct vt_mes_kit *k;
	char why[VT_WHY_LEN];
	unsigned int i = 0, j;
	bool ok;
	int ret = 0;

	vt_sub_begin(t, nn);
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, nn);
	k = vt_kit_start(t, NULL);
	if (k) {
		pb = vt_kit_proc(k, 0x401);
		ph = pb ? vt_kit_proc(k, 0x402) : NULL;
		gate = ph ? vt_kit_bo(k, VT_GPU_PAGE) : NULL;
		d = gate ? vt_kit_bo(k, VT_GPU_PAGE) : NULL;
		ret = d ? vgpu_mes_proc_map(t, pb, VT_VA_DATA, gate, VT_VM_RW) ?:
			  vgpu_mes_proc_map(t, ph, VT_VA_DATA, d, VT_VM_RW) : -ENOMEM;
		h = ret ? NULL : vt_kit_queue(k, ph, &o, true);
	}
	nb = k ? max_t(u32, VT_PRIO_BUSY, k->m->nslots) : 0;
	/* Half LOW, half NORMAL: HIGH must take the slot of a LOW one. */
	for (j = 0; h && j < nb && j < VT_KIT_QUEUES - 1; j++) {
		o.priority = j < nb / 2 ? VGPU_MES_PRIORITY_LOW : VGPU_MES_PRIORITY_NORMAL;
		busy[j] = vt_kit_queue(k, pb, &o, true);
		if (!busy[j])
			break;
	}
	if (!h || j < nb) {
		vt_sub_fail_all(t, names, nn);
		goto out;
	}

	ret = vt_prio_samples(k, h, idle);
	vt_kit_check(k, !ret, names[i++], t->err);

	/* Every busy queue parks in a WAIT_REG_MEM on the closed gate: all slots are taken. */
	for (j = 0; j < nb && !ret; j++) {
		n = vt_gate(pk, VT_VA_DATA, 1);
		ret = vgpu_mq_submit(t, busy[j], pk, n, false, true, &seq);
	}
	ok = !ret && vt_kit_wait_mapped(k, k->m->nslots, vt_mes_ms());
	msleep(20);
	snprintf(why, sizeof(why), "%s; MES_MAPPED %u with %u busy queues (want all %u slots)",
		 ret ? t->err : "submitted", vgpu_rd(t->vg, VGPU_REG_MES_MAPPED), nb,
		 k->m->nslots);
	if (!vt_kit_check(k, ok, names[i++], why)) {
		vt_sub_skip(t, names + i, nn - i - 1, "the device is not full");
		i = nn - 1;
		goto open;
	}

	log0 = vgpu_mes_log_count(k->m);
	ret = vt_prio_samples(k, h, loaded);
	vt_kit_check(k, !ret, names[i++], t->err);

	ok = vgpu_mes_log_find(k->m, log0, VGPU_MES_EVT_PREEMPT, VGPU_MES_UNMAP_PRIORITY,
			       VT_MES_ANY, &e);
	prio = ok ? e.prio : 0;
	snprintf(why, sizeof(why), "%s since event #%u (want one, of a LOW queue)%s",
		 ok ? "a PREEMPT with reason PRIORITY" : "no PREEMPT with reason PRIORITY", log0,
		 ok && prio != VGPU_MES_PRIORITY_LOW ? ": it preempted a queue above LOW" : "");
	vt_kit_check(k, ok && prio == VGPU_MES_PRIORITY_LOW, names[i++], why);
	vt_note(t, "mes_priority_us: idle_median=%u loaded_median=%u samples=%u",
		idle[VT_PRIO_SAMPLES / 2], loaded[VT_PRIO_SAMPLES / 2], VT_PRIO_SAMPLES);
	vt_note(t, "HIGH queue job latency, doorbell to fence: idle %u..%u us, with %u LOW/NORMAL queues busy on all %u slots %u..%u us; %u PREEMPT events with reason PRIORITY",
		idle[0], idle[VT_PRIO_SAMPLES - 1], nb, k->m->nslots, loaded[0],
		loaded[VT_PRIO_SAMPLES - 1],
		vgpu_mes_log_tally(k->m, log0, VGPU_MES_EVT_PREEMPT, VGPU_MES_UNMAP_PRIORITY,
				   VT_MES_ANY));

	/* CHANGE_GANG_PRIORITY: down to MEDIUM, still above every busy queue: it preempts again. */
	ret = vgpu_mes_change_priority(t, h, VGPU_MES_PRIORITY_MEDIUM);
	vgpu_mes_status(k->m, h->doorbell, &s);
	log0 = vgpu_mes_log_count(k->m);
	ret = ret ?: vt_prio_samples(k, h, medium);
	ok = vgpu_mes_log_find(k->m, log0, VGPU_MES_EVT_PREEMPT, VGPU_MES_UNMAP_PRIORITY,
			       VT_MES_ANY, &e);
	snprintf(why, sizeof(why), "%s; QUERY_STATUS.PRIORITY %u after the change (want MEDIUM %u), %s",
		 ret ? t->err : "its jobs completed", VT_MQ_ST(s.st, PRIORITY),
		 (u32)VGPU_MES_PRIORITY_MEDIUM,
		 ok ? "a PREEMPT with reason PRIORITY since" : "no PREEMPT with reason PRIORITY since");
	vt_kit_check(k, !ret && ok && VT_MQ_ST(s.st, PRIORITY) == VGPU_MES_PRIORITY_MEDIUM,
		     names[i++], why);
open:
	/* The gate opens: every busy queue completes. */
	vgpu_bo_wr(gate, 0, 1);
	ret = vt_wait_all(k, busy, nb, NULL);
	vt_kit_check(k, !ret, names[i++], t->err);
out:
	vt_kit_end(k);
	return vt_cp_end(t, t->vg->cp);
}

#define VT_FAIR_QUEUES		12
#define VT_FAIR_PROCS		4
#define VT_FAIR_SLOTS		4
#define VT_FAIR_PENDING		24
#define VT_FAIR_WINDOW_MS	1000
#define VT_FAIR_COPY		SZ_16K

/* Keeps VT_FAIR_PENDING copy jobs pending on q (a 16 KiB DMA_DATA in its scratch, a fence). */
static int vt_fair_fill(struct vt_mes_kit *k, struct vgpu_mes_queue *q, u64 va)
{
	u32 pk[16], n, seq, done = vgpu_mq_fence_read(q), wrote = 0;
	int ret;

	while (q->seq - done < VT_FAIR_PENDING) {
		n = vt_copy(pk, va, va + VT_FAIR_COPY, VT_FAIR_COPY);
		ret = vgpu_mq_submit(k->t, q, pk, n, false, false, &seq);
		if (ret)
			return ret;
		wrote++;
	}
	if (wrote)
		vgpu_mq_kick(q);
	return 0;
}

enum vt_res t_mes_fairness(struct vt_case *t)
{
	static const char *const names[] = { "all_progress", "jain_index", "drain" };
	const unsigned int nn = ARRAY_SIZE(names);
	struct vgpu_mes_queue_opts o = { .priority = VGPU_MES_PRIORITY_NORMAL };
	u32 f0[VT_FAIR_QUEUES], cnt[VT_FAIR_QUEUES], mn = ~0U, mx = 0, sum = 0, jain;
	struct vgpu_mes_proc *procs[VT_FAIR_PROCS];
	struct vgpu_mes_queue *qs[VT_FAIR_QUEUES];
	struct vgpu_mes_hw hw;
	struct vt_mes_kit *k;
	struct vgpu_bo *bo;
	char why[VT_WHY_LEN];
	unsigned int i = 0, j;
	ktime_t t0;
	int ret = 0;

	vt_sub_begin(t, nn);
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, nn);
	vgpu_mes_hw_default(t->vg->cp, &hw);
	hw.compute_mask[0] = GENMASK(VT_FAIR_SLOTS - 1, 0);
	hw.compute_mask[1] = 0;
	k = vt_kit_start(t, &hw);
	if (!k) {
		vt_sub_fail_all(t, names, nn);
		return vt_cp_end(t, t->vg->cp);
	}
	for (j = 0; j < VT_FAIR_PROCS && !ret; j++) {
		procs[j] = vt_kit_proc(k, 0x431 + j);
		ret = procs[j] ? 0 : -ENOMEM;
	}
	/* Queue j of a process copies in its own 32 KiB at VT_VA_DATA + j * 64 KiB. */
	for (j = 0; j < VT_FAIR_QUEUES && !ret; j++) {
		bo = vt_kit_bo(k, 2 * VT_FAIR_COPY);
		ret = bo ? vgpu_mes_proc_map(t, procs[j % VT_FAIR_PROCS],
					     VT_VA_DATA + (j / VT_FAIR_PROCS) * SZ_64K, bo,
					     VT_VM_RW) : -ENOMEM;
		qs[j] = ret ? NULL : vt_kit_queue(k, procs[j % VT_FAIR_PROCS], &o, true);
		ret = ret ?: qs[j] ? 0 : -EIO;
	}
	if (ret) {
		vt_sub_fail_all(t, names, nn);
		goto out;
	}

	/* Everyone busy for a moment, then the window. */
	t0 = ktime_get();
	while (!ret && ktime_ms_delta(ktime_get(), t0) < 50) {
		for (j = 0; j < VT_FAIR_QUEUES && !ret; j++)
			ret = vt_fair_fill(k, qs[j], VT_VA_DATA + (j / VT_FAIR_PROCS) * SZ_64K);
		usleep_range(200, 400);
	}
	for (j = 0; j < VT_FAIR_QUEUES; j++)
		f0[j] = vgpu_mq_fence_read(qs[j]);
	t0 = ktime_get();
	while (!ret && ktime_ms_delta(ktime_get(), t0) < VT_FAIR_WINDOW_MS) {
		for (j = 0; j < VT_FAIR_QUEUES && !ret; j++)
			ret = vt_fair_fill(k, qs[j], VT_VA_DATA + (j / VT_FAIR_PROCS) * SZ_64K);
		usleep_range(200, 400);
	}
	for (j = 0; j < VT_FAIR_QUEUES; j++) {
		cnt[j] = vgpu_mq_fence_read(qs[j]) - f0[j];
		mn = min(mn, cnt[j]);
		mx = max(mx, cnt[j]);
		sum += cnt[j];
	}
	jain = vt_jain_milli(cnt, VT_FAIR_QUEUES);
	vt_note(t, "%u queues of equal priority on %u slots, %u ms window: %u jobs (16 KiB copies) completed, per queue %u..%u; jain_milli=%u",
		VT_FAIR_QUEUES, k->m->nslots, VT_FAIR_WINDOW_MS, sum, mn, mx, jain);
	snprintf(why, sizeof(why), "%s; the slowest queue completed %u jobs",
		 ret ? t->err : "kept busy", mn);
	vt_kit_check(k, !ret && mn > 0, names[i++], why);
	snprintf(why, sizeof(why), "Jain index %u.%03u over %u queues, want at least 0.900",
		 jain / 1000, jain % 1000, VT_FAIR_QUEUES);
	vt_kit_check(k, !ret && jain >= 900, names[i++], why);
	ret = vt_wait_all(k, qs, VT_FAIR_QUEUES, NULL);
	vt_kit_check(k, !ret, names[i++], t->err);
out:
	vt_kit_end(k);
	return vt_cp_end(t, t->vg->cp);
}

/* A gated job on q: WAIT_REG_MEM until the dword at gate_va reads 1, then a marker; a fence. */
static int vt_gated(struct vt_mes_kit *k, struct vgpu_mes_queue *q, u64 gate_va, u64 mark_va,
		    u32 mark, u32 *seq)
{
	u32 pk[16], n;

	n = vt_gate(pk, gate_va, 1);
	n += vt_wr(pk + n, mark_va, mark);
	return vgpu_mq_submit(k->t, q, pk, n, false, true, seq);
}

static bool vt_mapped_now(struct vgpu_mes_queue *q, struct vgpu_mq_status *s)
{
	return vgpu_mq_wait_status(q, VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK,
				   VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK, vt_mes_ms(), s);
}

enum vt_res t_mes_suspend_resume(struct vt_case *t)
{
	static const char *const names[] = {
		"busy", "suspend", "no_progress", "resume", "resume_not_suspended",
		"suspend_unknown", "suspend_all", "resume_all",
	};
	const unsigned int nn = ARRAY_SIZE(names);
	struct vgpu_mes_queue_opts o = { .priority = VGPU_MES_PRIORITY_NORMAL };
	struct vgpu_mes_queue *a = NULL, *b = NULL;
	struct vgpu_mq_status s, sb;
	struct vgpu_mes_proc *p;
	struct vgpu_bo *d = NULL;
	struct vgpu_mes_evt e;
	struct vt_mes_kit *k;
	char why[VT_WHY_LEN];
	u32 seq_a = 0, seq_b = 0, fence, log0, fa, fb;
	unsigned int i = 0;
	bool ok;
	int ret;

	vt_sub_begin(t, nn);
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, nn);
	k = vt_kit_start(t, NULL);
	if (k) {
		p = vt_kit_proc(k, 0x421);
		d = p ? vt_kit_bo(k, VT_GPU_PAGE) : NULL;
		a = d && !vgpu_mes_proc_map(t, p, VT_VA_DATA, d, VT_VM_RW) ?
		    vt_kit_queue(k, p, &o, true) : NULL;
		b = a ? vt_kit_queue(k, p, &o, true) : NULL;
	}
	if (!b) {
		vt_sub_fail_all(t, names, nn);
		goto out;
	}

	/* A busy gang: A parked on the closed gate at d[0], its marker behind it. */
	ret = vt_gated(k, a, VT_VA_DATA, VT_VA_DATA + 16, 0x5E000001, &seq_a);
	ok = !ret && vt_mapped_now(a, &s);
	msleep(20);
	vgpu_mes_status(k->m, a->doorbell, &s);
	snprintf(why, sizeof(why), "%s; QUERY_STATUS %#x (want MAPPED, HAS_WORK), fence %u (want below %u)",
		 ret ? t->err : "submitted", s.st, vgpu_mq_fence_read(a), seq_a);
	if (!vt_kit_check(k, ok && VT_MQ_ST(s.st, MAPPED) && VT_MQ_ST(s.st, HAS_WORK) &&
			  !vgpu_mq_done(a, seq_a), names[i++], why)) {
		vt_sub_skip(t, names + i, nn - i, "no busy gang");
		goto out;
	}

	log0 = vgpu_mes_log_count(k->m);
	ret = vgpu_mes_suspend(t, k->m, a->gang->gpu, 0x5A5A0001);
	fence = vgpu_bo_rd(k->m->wb, VT_MES_WB_SUSPEND);
	vgpu_mes_status(k->m, a->doorbell, &s);
	ok = vgpu_mes_log_find(k->m, log0, VGPU_MES_EVT_UNMAP, VGPU_MES_UNMAP_SUSPEND,
			       a->doorbell, &e);
	snprintf(why, sizeof(why), "%s; suspend fence %#x (want 0x5a5a0001), QUERY_STATUS %#x (want SUSPENDED, not MAPPED), %s",
		 ret ? t->err : "completed", fence, s.st,
		 ok ? "UNMAP SUSPEND logged" : "no UNMAP event with reason SUSPEND");
	vt_kit_check(k, !ret && fence == 0x5A5A0001 && VT_MQ_ST(s.st, SUSPENDED) &&
		     !VT_MQ_ST(s.st, MAPPED) && ok, names[i++], why);

	/* The gate opens, but a suspended gang does not run. */
	vgpu_bo_wr(d, 0, 1);
	msleep(VT_HOLD_MS);
	vgpu_mes_status(k->m, a->doorbell, &s);
	snprintf(why, sizeof(why), "%u ms after the gate opened: fence %u (want below %u), marker %#x (want 0), QUERY_STATUS %#x",
		 VT_HOLD_MS, vgpu_mq_fence_read(a), seq_a, vgpu_bo_rd(d, 16), s.st);
	vt_kit_check(k, !vgpu_mq_done(a, seq_a) && !vgpu_bo_rd(d, 16) && !VT_MQ_ST(s.st, MAPPED),
		     names[i++], why);

	ret = vgpu_mes_resume(t, k->m, a->gang->gpu) ?: vgpu_mq_wait(t, a, seq_a, vt_mes_ms());
	vgpu_mes_status(k->m, a->doorbell, &s);
	snprintf(why, sizeof(why), "%s; marker %#x (want 0x5e000001), QUERY_STATUS %#x (want not SUSPENDED)",
		 ret ? t->err : "completed", vgpu_bo_rd(d, 16), s.st);
	vt_kit_check(k, !ret && vgpu_bo_rd(d, 16) == 0x5E000001 && !VT_MQ_ST(s.st, SUSPENDED),
		     names[i++], why);

	vt_kit_snap(k);
	ret = vgpu_mes_resume(t, k->m, a->gang->gpu);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_RESUME,
			  VGPU_MES_ERR_NOT_SUSPENDED);

	/* A page that is no gang's context. */
	vt_kit_snap(k);
	ret = vgpu_mes_suspend(t, k->m, p->ctx->gpu, 0x5A5A0009);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_SUSPEND,
			  VGPU_MES_ERR_NO_SUCH_QUEUE);

	/* Both gangs busy on a second gate, then SUSPEND of all gangs. */
	ret = vt_gated(k, a, VT_VA_DATA + 4, VT_VA_DATA + 24, 0x5E000002, &seq_a) ?:
	      vt_gated(k, b, VT_VA_DATA + 4, VT_VA_DATA + 28, 0x5E000003, &seq_b);
	ok = !ret && vt_mapped_now(a, &s) && vt_mapped_now(b, &sb);
	ret = ret ?: vgpu_mes_suspend(t, k->m, 0, 0x5A5A0002);
	fence = vgpu_bo_rd(k->m->wb, VT_MES_WB_SUSPEND);
	vgpu_mes_status(k->m, a->doorbell, &s);
	vgpu_mes_status(k->m, b->doorbell, &sb);
	vgpu_bo_wr(d, 4, 1);
	msleep(VT_HOLD_MS);
	fa = vgpu_bo_rd(d, 24);
	fb = vgpu_bo_rd(d, 28);
	snprintf(why, sizeof(why), "%s; both %s before; fence %#x (want 0x5a5a0002), QUERY_STATUS %#x and %#x (want SUSPENDED), markers %#x %#x after the gate opened (want 0)",
		 ret ? t->err : "completed", ok ? "mapped" : "not all mapped", fence, s.st, sb.st,
		 fa, fb);
	vt_kit_check(k, ok && !ret && fence == 0x5A5A0002 && VT_MQ_ST(s.st, SUSPENDED) &&
		     VT_MQ_ST(sb.st, SUSPENDED) && !fa && !fb, names[i++], why);

	ret = vgpu_mes_resume(t, k->m, 0) ?: vgpu_mq_wait(t, a, seq_a, vt_mes_ms()) ?:
	      vgpu_mq_wait(t, b, seq_b, vt_mes_ms());
	snprintf(why, sizeof(why), "%s; markers %#x %#x (want 0x5e000002 0x5e000003)",
		 ret ? t->err : "both completed", vgpu_bo_rd(d, 24), vgpu_bo_rd(d, 28));
	vt_kit_check(k, !ret && vgpu_bo_rd(d, 24) == 0x5E000002 &&
		     vgpu_bo_rd(d, 28) == 0x5E000003, names[i++], why);
out:
	vt_kit_end(k);
	return vt_cp_end(t, t->vg->cp);
}

#define VT_VMID_PROCS		20
#define VT_VMID_JOBS		8
#define VT_VA_GATE		(VT_VA_DATA + SZ_1M)

enum vt_res t_mes_vmid_oversubscribe(struct vt_case *t)
{
	static const char *const names[] = {
		"all_added", "turns_while_gated", "all_complete", "own_memory",
	};
	const unsigned int nn = ARRAY_SIZE(names);
	struct vgpu_mes_queue_opts o = { .priority = VGPU_MES_PRIORITY_NORMAL };
	struct vgpu_mes_queue *qs[VT_VMID_PROCS];
	struct vgpu_bo *data[VT_VMID_PROCS], *gate;
	u32 pk[16], n, seq, vmids, mapped, max_mapped = 0, seen = 0, log0, v, want;
	struct vgpu_mes_proc *p;
	struct vgpu_mq_status s;
	unsigned long deadline;
	struct vt_mes_kit *k;
	char why[VT_WHY_LEN];
	struct vgpu *vg = t->vg;
	unsigned int i = 0, j, jj, left, bad;
	ktime_t t0;
	int ret = 0;

	vt_sub_begin(t, nn);
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, nn);
	k = vt_kit_start(t, NULL);
	gate = k ? vt_kit_bo(k, VT_GPU_PAGE) : NULL;
	if (!gate) {
		vt_sub_fail_all(t, names, nn);
		goto out;
	}
	/* Each process: its own page at VT_VA_DATA, the shared gate, one queue. */
	for (j = 0; j < VT_VMID_PROCS && !ret; j++) {
		p = vt_kit_proc(k, 0x501 + j);
		data[j] = p ? vt_kit_bo(k, VT_GPU_PAGE) : NULL;
		ret = data[j] ? vgpu_mes_proc_map(t, p, VT_VA_DATA, data[j], VT_VM_RW) ?:
				vgpu_mes_proc_map(t, p, VT_VA_GATE, gate, VT_VM_RW) : -ENOMEM;
		qs[j] = ret ? NULL : vt_kit_queue(k, p, &o, true);
		ret = ret ?: qs[j] ? 0 : -EIO;
	}
	snprintf(why, sizeof(why), "%s; MES_PROCESSES %u (want %u), %u VMIDs for them",
		 ret ? t->err : "all added", vgpu_rd(vg, VGPU_REG_MES_PROCESSES), VT_VMID_PROCS,
		 hweight32(k->m->hw.vmid_mask));
	if (!vt_kit_check(k, !ret && vgpu_rd(vg, VGPU_REG_MES_PROCESSES) == VT_VMID_PROCS,
			  names[i++], why)) {
		vt_sub_skip(t, names + i, nn - i, "not every process was added");
		goto out;
	}

	/* Every queue: a job parked on the closed gate, then its writes. */
	log0 = vgpu_mes_log_count(k->m);
	for (j = 0; j < VT_VMID_PROCS && !ret; j++) {
		n = vt_gate(pk, VT_VA_GATE, 1);
		ret = vgpu_mq_submit(t, qs[j], pk, n, false, false, &seq);
		for (jj = 1; jj <= VT_VMID_JOBS && !ret; jj++) {
			n = vt_wr(pk, VT_VA_DATA + 4 * jj, (0x501 + j) << 16 | jj);
			ret = vgpu_mq_submit(t, qs[j], pk, n, false, false, &seq);
		}
		if (!ret)
			vgpu_mq_kick(qs[j]);
	}
	/* More processes than VMIDs with work: they must take turns while the gate is closed. */
	t0 = ktime_get();
	deadline = jiffies + msecs_to_jiffies(2 * vt_mes_ms());
	for (left = VT_VMID_PROCS; !ret && left && !time_after(jiffies, deadline);) {
		mapped = vgpu_rd(vg, VGPU_REG_MES_MAPPED);
		for (j = 0, left = 0, vmids = 0; j < VT_VMID_PROCS; j++) {
			vgpu_mes_status(k->m, qs[j]->doorbell, &s);
			left += !s.maps;
			if (VT_MQ_ST(s.st, MAPPED))
				vmids |= BIT(VT_MQ_ST(s.st, VMID));
		}
		max_mapped = max(max_mapped, mapped);
		seen |= vmids;
		usleep_range(200, 400);
	}
	for (j = 0, bad = 0; j < VT_VMID_PROCS; j++)
		bad += vgpu_mq_fence_read(qs[j]) != 0;
	vt_note(t, "%u processes on %u VMIDs: %s after %lld ms with the gate closed; MES_MAPPED at most %u, VMIDs %#x seen; %u UNMAP events with reason VMID",
		VT_VMID_PROCS, hweight32(k->m->hw.vmid_mask),
		left ? "not every queue was mapped" : "every queue was mapped",
		ktime_ms_delta(ktime_get(), t0), max_mapped, seen,
		vgpu_mes_log_tally(k->m, log0, VGPU_MES_EVT_UNMAP, VGPU_MES_UNMAP_VMID,
				   VT_MES_ANY));
	snprintf(why, sizeof(why), "%s; %u queues never mapped, %u passed the closed gate, VMIDs seen %#x (want within %#x, none 0)",
		 ret ? t->err : "submitted", left, bad, seen, k->m->hw.vmid_mask);
	vt_kit_check(k, !ret && !left && !bad && !(seen & ~k->m->hw.vmid_mask), names[i++], why);

	vgpu_bo_wr(gate, 0, 1);
	ret = vt_wait_all(k, qs, VT_VMID_PROCS, NULL);
	vt_kit_check(k, !ret, names[i++], t->err);

	why[0] = '\0';
	for (j = 0; j < VT_VMID_PROCS && !why[0]; j++) {
		for (jj = 0; jj <= VT_VMID_JOBS && !why[0]; jj++) {
			v = vgpu_bo_rd(data[j], 4 * jj);
			want = jj ? (0x501 + j) << 16 | jj : 0;
			if (v != want)
				snprintf(why, sizeof(why), "PASID %#x: dword %u of its page reads %#x, want %#x",
					 0x501 + j, jj, v, want);
		}
	}
	vt_kit_check(k, !why[0], names[i++], why);
out:
	vt_kit_end(k);
	return vt_cp_end(t, t->vg->cp);
}
