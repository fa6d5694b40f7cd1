// SPDX-License-Identifier: GPL-2.0
/*
 * The MES scheduler, frame by frame: bring-up and the API ring, one queue's life (add, run by
 * doorbell, idle unmap, new root, remove with its state saved in the MQD, added again), every
 * malformed frame's error, the doorbells of unmapped queues, and the protected fence.
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "cases.h"
#include "t_mes.h"

#define VT_HOLD_MS		100	/* how long work that must not run is watched */

/* A user-queue EOP IV with DW4 ctxid and the PASID, numbered from or later (waits for it). */
static bool vt_wait_ueop(struct vgpu_cp *cp, u32 from, u32 ctxid, u16 pasid,
			 struct vgpu_ih_ueop *u)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(vt_mes_ms());

	for (;;) {
		if (vgpu_ih_ueop_find(cp, from, ctxid, pasid, u))
			return true;
		if (time_after(jiffies, deadline))
			return false;
		usleep_range(100, 200);
	}
}

enum vt_res t_mes_bringup(struct vt_case *t)
{
	static const char *const names[] = {
		"version", "ring_start", "not_initialized", "query_barrier", "mmio_wptr",
		"set_hw_resources", "event_log", "misc_reg", "misc_wait", "misc_wait_timeout",
		"write_wait_write", "unknown_misc", "halt", "restart",
	};
	const unsigned int nn = ARRAY_SIZE(names);
	struct vgpu_mes_queue *q = NULL;
	struct vgpu_mes_proc *p = NULL;
	struct vt_mes_kit *k = NULL;
	char why[VT_WHY_LEN];
	struct vgpu_mes_hw hw;
	struct vgpu_mes_evt e;
	struct vgpu *vg = t->vg;
	struct vgpu_cp *cp;
	u32 v, st, f0, f1, rptr, rep, f[VT_MES_FRAME_DW], req;
	unsigned int i = 0;
	int ret;

	vt_sub_begin(t, nn);
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, nn);
	/* The kit by hand: the ring is brought up step by step here. */
	k = kzalloc(sizeof(*k), GFP_KERNEL);
	if (k) {
		k->t = t;
		k->cp = cp;
		k->m = vgpu_mes_alloc(t, cp);
	}
	if (!k || !k->m) {
		if (!k)
			vt_reason(t, -ENOMEM, "out of memory");
		vt_sub_fail_all(t, names, nn);
		kfree(k);
		return vt_cp_end(t, cp);
	}

	v = vgpu_rd(vg, VGPU_REG_MES_VERSION);
	vt_note(t, "MES_VERSION %#x: firmware %#x, API %u; %u doorbell dwords", v, v & 0xfff,
		(v >> 12) & 0xfff, k->m->doorbells);
	vt_check(t, (v & 0xfff) == VGPU_MES_SCHED_FW_VERSION &&
		 ((v >> 12) & 0xfff) == VGPU_MES_SCHED_API_VERSION, names[i++],
		 "MES_VERSION %#x: want firmware %#llx, API %llu", v, VGPU_MES_SCHED_FW_VERSION,
		 VGPU_MES_SCHED_API_VERSION);

	ret = vgpu_mes_ring_start(t, k->m);
	st = vgpu_rd(vg, VGPU_REG_MES_STATUS);
	if (!vt_check(t, !ret && !(st & VGPU_REG_MES_STATUS__HW_RESOURCES_MASK) &&
		      (vgpu_rd(vg, VGPU_REG_MES_RING_ACTIVE) & 1), names[i++],
		      "%s; MES_STATUS %#x (want RUNNING, no HW_RESOURCES yet), RING_ACTIVE %u",
		      ret ? t->err : "running", st, vgpu_rd(vg, VGPU_REG_MES_RING_ACTIVE))) {
		vt_sub_skip(t, names + i, nn - i, "MES did not start");
		goto out;
	}

	/* A queue frame before SET_HW_RESOURCES. */
	p = vt_kit_proc(k, 0x210);
	q = p ? vt_kit_queue(k, p, NULL, false) : NULL;
	if (!q) {
		vt_check(t, false, names[i++], "%s", t->err);
	} else {
		vt_kit_snap(k);
		ret = vgpu_mes_add(t, q);
		vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_ADD_QUEUE,
				  VGPU_MES_ERR_NOT_INITIALIZED);
	}

	/* The barrier: both frames complete, the rptr (register and report) at the wptr. */
	f0 = vgpu_rd(vg, VGPU_REG_MES_FRAMES);
	ret = vgpu_mes_query(t, k->m);
	f1 = vgpu_rd(vg, VGPU_REG_MES_FRAMES);
	rptr = vgpu_rd(vg, VGPU_REG_MES_RING_RPTR);
	rep = vgpu_bo_rd(k->m->wb, VT_MES_WB_RPTR);
	snprintf(why, sizeof(why),
		 "%s; MES_FRAMES %u -> %u (want +2), RING_RPTR %u and its report %u (want %llu)",
		 ret ? t->err : "completed", f0, f1, rptr, rep, k->m->wptr & (k->m->size - 1));
	vt_kit_check(k, !ret && f1 == f0 + 2 && rptr == (k->m->wptr & (k->m->size - 1)) &&
		     rep == rptr, names[i++], why);

	k->m->mmio = true;
	ret = vgpu_mes_query(t, k->m);
	k->m->mmio = false;
	f0 = vgpu_rd(vg, VGPU_REG_MES_FRAMES);
	snprintf(why, sizeof(why), "kicked by MES_RING_WPTR_LO/HI: %s; MES_FRAMES %u (want %u)",
		 ret ? t->err : "completed", f0, f1 + 2);
	vt_kit_check(k, !ret && f0 == f1 + 2, names[i++], why);

	vgpu_mes_hw_default(cp, &hw);
	ret = vgpu_mes_set_hw_resources(t, k->m, &hw);
	st = vgpu_rd(vg, VGPU_REG_MES_STATUS);
	snprintf(why, sizeof(why), "%s; MES_STATUS %#x (want HW_RESOURCES)",
		 ret ? t->err : "accepted", st);
	vt_note(t, "SET_HW_RESOURCES: VMIDs %#x, compute masks %#x %#x, %u slots, aggregated doorbells %#x..%#x",
		hw.vmid_mask, hw.compute_mask[0], hw.compute_mask[1], k->m->nslots, hw.agg[0],
		hw.agg[VGPU_MES_PRIORITY_LEVELS - 1]);
	if (!vt_kit_check(k, !ret && (st & VGPU_REG_MES_STATUS__HW_RESOURCES_MASK), names[i++],
			  why)) {
		vt_sub_skip(t, names + i, nn - i, "no SET_HW_RESOURCES");
		goto out;
	}

	ret = vgpu_mes_set_log(t, k->m, VT_MES_LOG_ENTRIES) ?: vgpu_mes_query(t, k->m);
	v = vgpu_mes_log_count(k->m);
	if (ret)
		snprintf(why, sizeof(why), "%s", t->err);
	else if (vgpu_bo_rd(k->m->log, 4) != VT_MES_LOG_ENTRIES)
		snprintf(why, sizeof(why), "log header DW1 %u, want %u entries",
			 vgpu_bo_rd(k->m->log, 4), VT_MES_LOG_ENTRIES);
	else if (!vgpu_mes_log_find(k->m, 0, VGPU_MES_EVT_FRAME, VT_MES_ANY,
				    VGPU_MES_SCH_API_QUERY_SCHEDULER_STATUS, &e))
		snprintf(why, sizeof(why), "%u events, none a FRAME of QUERY_SCHEDULER_STATUS", v);
	else
		why[0] = '\0';
	vt_kit_check(k, !why[0], names[i++], why);

	ret = vgpu_mes_misc_write_reg(t, k->m, VGPU_REG_SCRATCH_1, 0x5EC0FFEE);
	f0 = vgpu_rd(vg, VGPU_REG_SCRATCH_1);
	ret = ret ?: vgpu_mes_misc_read_reg(t, k->m, VGPU_REG_ID_MAGIC, &v);
	snprintf(why, sizeof(why), "%s; WRITE_REG: SCRATCH_1 reads %#x (want 0x5ec0ffee); READ_REG ID_MAGIC gave %#x",
		 ret ? t->err : "both completed", f0, v);
	vt_kit_check(k, !ret && f0 == 0x5EC0FFEE && v == VGPU_ID_MAGIC_VALUE, names[i++], why);

	ret = vgpu_mes_misc_wait(t, k->m, VGPU_MES_MISC_OP_WAIT_OP_WAIT, 0x5EC0FFEE, 0xffffffff,
				 VGPU_REG_SCRATCH_1, 0);
	vt_kit_check(k, !ret, names[i++], t->err);

	vt_kit_snap(k);
	ret = vgpu_mes_misc_wait(t, k->m, VGPU_MES_MISC_OP_WAIT_OP_WAIT, 0x12345678, 0xffffffff,
				 VGPU_REG_SCRATCH_1, 0);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_MISC, VGPU_MES_ERR_WAIT_TIMEOUT);

	/* amdgpu's TLB flush through MES: write the engine's REQ, wait for its ACK bit. */
	req = FIELD_PREP(VGPU_REG_VM_INV_ENG_REQ__PER_VMID_INVALIDATE_REQ_MASK, BIT(15)) |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PTES_MASK |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L1_PTES_MASK;
	ret = vgpu_mes_misc_wait(t, k->m, VGPU_MES_MISC_OP_WAIT_OP_WRITE_WAIT_WRITE, req, BIT(15),
				 VGPU_VM_INV_ENG_REG(VT_VM_ENGINE + 1, VGPU_REG_VM_INV_ENG_REQ),
				 VGPU_VM_INV_ENG_REG(VT_VM_ENGINE + 1, VGPU_REG_VM_INV_ENG_ACK));
	v = vgpu_rd(vg, VGPU_VM_INV_ENG_REG(VT_VM_ENGINE + 1, VGPU_REG_VM_INV_ENG_ACK));
	snprintf(why, sizeof(why), "%s; engine %u ACK %#x (want bit 15)", ret ? t->err : "completed",
		 VT_VM_ENGINE + 1, v);
	vt_kit_check(k, !ret && (v & BIT(15)), names[i++], why);

	vgpu_mes_frame(f, VGPU_MES_SCH_API_MISC);
	f[VGPU_MES_MISC_DW_OPCODE] = 0x7f;
	vt_kit_snap(k);
	ret = vgpu_mes_submit(t, k->m, f);
	v = vgpu_rd(vg, VGPU_REG_MES_LAST_ERROR);
	if (ret == -EIO && FIELD_GET(VGPU_REG_MES_LAST_ERROR__SUB_MASK, v) != 0x7f) {
		snprintf(why, sizeof(why), "MES_LAST_ERROR %#x: SUB %u, want the sub-opcode 0x7f", v,
			 (u32)FIELD_GET(VGPU_REG_MES_LAST_ERROR__SUB_MASK, v));
		vt_kit_check(k, false, names[i++], why);
	} else {
		vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_MISC,
				  VGPU_MES_ERR_UNKNOWN_OPCODE);
	}

	ret = vgpu_mes_stop(t, k->m);
	st = vgpu_rd(vg, VGPU_REG_MES_STATUS);
	v = vgpu_rd(vg, VGPU_REG_MES_RING_ACTIVE);
	snprintf(why, sizeof(why), "%s; MES_STATUS %#x (want OFF), RING_ACTIVE %u",
		 ret ? t->err : "stopped", st, v);
	if (!vt_kit_check(k, !ret && FIELD_GET(VGPU_REG_MES_STATUS__STATE_MASK, st) ==
			  VGPU_MES_STATE_OFF && !(v & 1), names[i++], why)) {
		vt_sub_skip(t, names + i, nn - i, "MES did not halt");
		goto out;
	}

	/* A fresh start: counters from 0, frames run again. */
	ret = vgpu_mes_ring_start(t, k->m) ?: vgpu_mes_set_hw_resources(t, k->m, &hw) ?:
	      vgpu_mes_query(t, k->m);
	f0 = vgpu_rd(vg, VGPU_REG_MES_FRAMES);
	snprintf(why, sizeof(why), "%s; MES_FRAMES %u after the restart (want 4: two frames each)",
		 ret ? t->err : "SET_HW_RESOURCES and QUERY completed", f0);
	vt_kit_check(k, !ret && f0 == 4, names[i++], why);
out:
	vt_kit_end(k);
	return vt_cp_end(t, cp);
}

/* The dword at byte off of a case buffer. */
static u32 vt_rd(struct vgpu_bo *bo, u32 off)
{
	return vgpu_bo_rd(bo, off);
}

enum vt_res t_mes_add_remove(struct vt_case *t)
{
	static const char *const names[] = {
		"add", "doorbell_job", "eop_iv", "mapped", "idle_unmap_saved", "second_job",
		"update_root", "remove_parked", "readd_continues",
	};
	const unsigned int nn = ARRAY_SIZE(names);
	struct vgpu_mes_queue_opts o = { .priority = VGPU_MES_PRIORITY_NORMAL };
	struct vgpu_vm *vm1 = NULL, *vm2 = NULL;
	struct vgpu_mes_queue *q = NULL;
	struct vgpu_mes_proc *p = NULL;
	struct vgpu_bo *d = NULL, *d2 = NULL;
	struct vt_mes_kit *k;
	struct vgpu_mq_status s;
	struct vgpu_ih_ueop u;
	struct vgpu_mes_evt e;
	char why[VT_WHY_LEN];
	struct vgpu *vg = t->vg;
	u32 pk[32], n, seq = 0, ue0, log0, rptr, gang;
	unsigned long deadline;
	u64 wait_at, w;
	unsigned int i = 0;
	bool ok;
	int ret;

	vt_sub_begin(t, nn);
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, nn);
	k = vt_kit_start(t, NULL);
	if (k) {
		p = vt_kit_proc(k, 0x201);
		d = p ? vt_kit_bo(k, VT_GPU_PAGE) : NULL;
		d2 = d ? vt_kit_bo(k, VT_GPU_PAGE) : NULL;
		q = d2 && !vgpu_mes_proc_map(t, p, VT_VA_DATA, d, VT_VM_RW) ?
		    vt_kit_queue(k, p, &o, false) : NULL;
	}
	if (!q) {
		vt_sub_fail_all(t, names, nn);
		goto out;
	}
	log0 = vgpu_mes_log_count(k->m);

	ret = vgpu_mes_add(t, q);
	vgpu_mes_status(k->m, q->doorbell, &s);
	snprintf(why, sizeof(why),
		 "%s; QUERY_STATUS %#x (want KNOWN, not MAPPED, NORMAL), MES_QUEUES %u, MES_PROCESSES %u (want 1, 1), MQD IS_QUEUE_UNMAP %u (want 1)",
		 ret ? t->err : "added", s.st, vgpu_rd(vg, VGPU_REG_MES_QUEUES),
		 vgpu_rd(vg, VGPU_REG_MES_PROCESSES),
		 vgpu_mq_mqd(q, VGPU_MES_MQD_DW_IS_QUEUE_UNMAP));
	if (!vt_kit_check(k, !ret && VT_MQ_ST(s.st, KNOWN) && !VT_MQ_ST(s.st, MAPPED) &&
			  vgpu_mq_mqd(q, VGPU_MES_MQD_DW_IS_QUEUE_UNMAP) == 1 &&
			  VT_MQ_ST(s.st, PRIORITY) == VGPU_MES_PRIORITY_NORMAL &&
			  vgpu_rd(vg, VGPU_REG_MES_QUEUES) == 1 &&
			  vgpu_rd(vg, VGPU_REG_MES_PROCESSES) == 1, names[i++], why)) {
		vt_sub_skip(t, names + i, nn - i, "the queue was not added");
		goto out;
	}

	/* One job by doorbell: a WRITE_DATA into the process's page and an interrupting fence. */
	vgpu_ih_mes_counts(k->cp, NULL, NULL, &ue0);
	n = vt_wr(pk, VT_VA_DATA, 0xC0DE0001);
	ret = vgpu_mq_submit(t, q, pk, n, true, true, &seq) ?:
	      vgpu_mq_wait(t, q, seq, vt_mes_ms());
	snprintf(why, sizeof(why), "%s; the page reads %#x (want 0xc0de0001)",
		 ret ? t->err : "fence reached", vt_rd(d, 0));
	vt_kit_check(k, !ret && vt_rd(d, 0) == 0xC0DE0001, names[i++], why);

	ok = vt_wait_ueop(k->cp, ue0, seq, 0x201, &u);
	snprintf(why, sizeof(why), "no EOP IV with ctxid %u and PASID 0x201 in %u ms", seq,
		 vt_mes_ms());
	if (ok && !u.vmid)
		snprintf(why, sizeof(why), "the EOP IV came from VMID 0 (slot %u)", u.slot);
	vt_kit_check(k, ok && u.vmid, names[i++], why);
	if (ok)
		vt_note(t, "EOP IV of db %#x: slot %u, VMID %u, PASID %#x", q->doorbell, u.slot,
			u.vmid, u.pasid);

	/* The status follows the queue: its rptr reaches the wptr (mapped or after its unmap). */
	deadline = jiffies + msecs_to_jiffies(vt_mes_ms());
	for (;;) {
		vgpu_mes_status(k->m, q->doorbell, &s);
		if (s.rptr == q->wptr || time_after(jiffies, deadline))
			break;
		usleep_range(50, 100);
	}
	ok = vgpu_mes_log_find(k->m, log0, VGPU_MES_EVT_MAP, VT_MES_ANY, q->doorbell, &e);
	snprintf(why, sizeof(why), "QUERY_MAPS %u (want >= 1), QUERY_RPTR %llu (want %llu in %u ms), %s",
		 s.maps, s.rptr, q->wptr, vt_mes_ms(),
		 ok ? "MAP event logged" : "no MAP event in the log");
	if (vt_kit_check(k, s.maps >= 1 && s.rptr == q->wptr && ok && e.slot >= 1 &&
			 e.slot < k->cp->hqds && e.vmid, names[i++], why))
		vt_note(t, "mapped into slot %u with VMID %u (PASID %#x)", e.slot, e.vmid, e.pasid);

	/* Idle past its grace with nobody waiting: unmapped, state saved. */
	ok = vgpu_mq_wait_status(q, VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK, 0, vt_mes_ms(), &s);
	rptr = vgpu_mq_mqd(q, VGPU_MES_MQD_DW_CP_HQD_PQ_RPTR);
	w = vgpu_mq_mqd64(q, VGPU_MES_MQD_DW_CP_HQD_PQ_WPTR_LO);
	gang = vgpu_mq_rd(q->gang, VGPU_MES_CTX_DW_MAGIC);
	snprintf(why, sizeof(why),
		 "%s, QUERY_RPTR %llu; MQD ACTIVE %u, PQ_RPTR %u (want %llu), PQ_WPTR %llu (want %llu), IS_QUEUE_UNMAP %u, unmap flag %u, gang MAGIC %#x",
		 ok ? "unmapped" : "still mapped", s.rptr,
		 vgpu_mq_mqd(q, VGPU_MES_MQD_DW_CP_HQD_ACTIVE),
		 rptr, q->wptr & (q->size - 1), w, q->wptr,
		 vgpu_mq_mqd(q, VGPU_MES_MQD_DW_IS_QUEUE_UNMAP), vgpu_mq_aux(q, VT_MQ_AUX_UNMAP),
		 gang);
	ok = ok && s.rptr == q->wptr && !vgpu_mq_mqd(q, VGPU_MES_MQD_DW_CP_HQD_ACTIVE) &&
	     rptr == (q->wptr & (q->size - 1)) && w == q->wptr &&
	     vgpu_mq_mqd(q, VGPU_MES_MQD_DW_IS_QUEUE_UNMAP) == 1 &&
	     vgpu_mq_aux(q, VT_MQ_AUX_UNMAP) == 1 && gang == VGPU_MES_CTX_MAGIC;
	if (ok && !vgpu_mes_log_find(k->m, log0, VGPU_MES_EVT_UNMAP, VGPU_MES_UNMAP_IDLE,
				     q->doorbell, &e)) {
		snprintf(why, sizeof(why), "no UNMAP event with reason IDLE for db %#x", q->doorbell);
		ok = false;
	}
	vt_kit_check(k, ok, names[i++], why);

	/* From the saved state: another job. */
	n = vt_wr(pk, VT_VA_DATA + 4, 0xC0DE0002);
	ret = vgpu_mq_submit(t, q, pk, n, true, true, &seq) ?:
	      vgpu_mq_wait(t, q, seq, vt_mes_ms());
	vgpu_mes_status(k->m, q->doorbell, &s);
	snprintf(why, sizeof(why), "%s; the page reads %#x (want 0xc0de0002), QUERY_MAPS %u (want >= 2)",
		 ret ? t->err : "fence reached", vt_rd(d, 4), s.maps);
	vt_kit_check(k, !ret && vt_rd(d, 4) == 0xC0DE0002 && s.maps >= 2, names[i++], why);

	/*
	 * A new root directory for the process (amdgpu after a page-table rebuild): the same
	 * queue buffers, another page at VT_VA_DATA. The next job's write lands there.
	 */
	vm2 = vgpu_vm_alloc(t, k->cp, 0x201);
	ret = vm2 ? 0 : -ENOMEM;
	ret = ret ?: vgpu_mes_queue_map_into(t, q, vm2);
	ret = ret ?: vgpu_vm_map_bo(t, vm2, VT_VA_DATA, d2, VT_VM_RW);
	ret = ret ?: vgpu_mes_update_root(t, p, vgpu_vm_root_pde(vm2));
	if (!ret) {
		vm1 = p->vm;
		p->vm = vm2;
		vm2 = NULL;
		n = vt_wr(pk, VT_VA_DATA + 8, 0xC0DE0003);
		ret = vgpu_mq_submit(t, q, pk, n, true, true, &seq) ?:
		      vgpu_mq_wait(t, q, seq, vt_mes_ms());
	}
	snprintf(why, sizeof(why), "%s; new page reads %#x (want 0xc0de0003), old page %#x (want 0)",
		 ret ? t->err : "fence reached", vt_rd(d2, 8), vt_rd(d, 8));
	vt_kit_check(k, !ret && vt_rd(d2, 8) == 0xC0DE0003 && !vt_rd(d, 8), names[i++], why);

	/* REMOVE while mapped and parked in a WAIT_REG_MEM: preempted there, saved in the MQD. */
	if (!vm1)
		d2 = d;		/* the root did not change: VT_VA_DATA is still the first page */
	vgpu_bo_wr(d2, 64, 0);
	wait_at = q->wpos;
	n = vt_gate(pk, VT_VA_DATA + 64, 1);
	n += vt_wr(pk + n, VT_VA_DATA + 12, 0xC0DE0004);
	ret = vgpu_mq_submit(t, q, pk, n, true, true, &seq);
	ok = !ret && vgpu_mq_wait_status(q, VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK,
					 VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK, vt_mes_ms(), &s);
	msleep(20);
	log0 = vgpu_mes_log_count(k->m);
	ret = ret ?: vgpu_mes_remove(t, q);
	rptr = vgpu_mq_mqd(q, VGPU_MES_MQD_DW_CP_HQD_PQ_RPTR);
	w = vgpu_mq_mqd64(q, VGPU_MES_MQD_DW_CP_HQD_PQ_WPTR_LO);
	gang = vgpu_mq_rd(q->gang, VGPU_MES_CTX_DW_MAGIC);
	vgpu_mes_status(k->m, q->doorbell, &s);
	if (ret)
		snprintf(why, sizeof(why), "%s", t->err);
	else
		snprintf(why, sizeof(why),
			 "%s before REMOVE; MQD ACTIVE %u PQ_RPTR %u (want the WAIT at %llu) PQ_WPTR %llu (want %llu), marker %#x (want 0), gang MAGIC %#x (want 0), KNOWN %u, QUEUES %u PROCESSES %u",
			 ok ? "mapped" : "not mapped",
			 vgpu_mq_mqd(q, VGPU_MES_MQD_DW_CP_HQD_ACTIVE), rptr,
			 wait_at & (q->size - 1), w, q->wptr, vt_rd(d2, 12), gang,
			 VT_MQ_ST(s.st, KNOWN), vgpu_rd(vg, VGPU_REG_MES_QUEUES),
			 vgpu_rd(vg, VGPU_REG_MES_PROCESSES));
	ok = ok && !ret && !vgpu_mq_mqd(q, VGPU_MES_MQD_DW_CP_HQD_ACTIVE) &&
	     rptr == (wait_at & (q->size - 1)) && w == q->wptr && !vt_rd(d2, 12) && !gang &&
	     !VT_MQ_ST(s.st, KNOWN) && !vgpu_rd(vg, VGPU_REG_MES_QUEUES) &&
	     !vgpu_rd(vg, VGPU_REG_MES_PROCESSES);
	if (ok && !vgpu_mes_log_find(k->m, log0, VGPU_MES_EVT_UNMAP, VGPU_MES_UNMAP_REMOVE,
				     q->doorbell, &e)) {
		snprintf(why, sizeof(why), "no UNMAP event with reason REMOVE for db %#x",
			 q->doorbell);
		ok = false;
	}
	if (!vt_kit_check(k, ok, names[i++], why)) {
		vt_sub_skip(t, names + i, nn - i, "no saved state to continue from");
		goto out;
	}

	/*
	 * ADD_QUEUE again with the saved MQD (amdgpu's restore after an eviction): PQ_WPTR is
	 * ahead of PQ_RPTR, so it has work and is mapped without a doorbell; it parks on the gate
	 * again, and runs on when the gate opens.
	 */
	ret = vgpu_mes_add(t, q);
	ok = !ret && vgpu_mq_wait_status(q, VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK,
					 VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK, vt_mes_ms(), &s);
	msleep(20);
	n = vt_rd(d2, 12);
	vgpu_bo_wr(d2, 64, 1);
	ret = ret ?: vgpu_mq_wait(t, q, seq, vt_mes_ms());
	snprintf(why, sizeof(why), "%s; %s after ADD_QUEUE, marker %#x before the gate opened (want 0), %#x after (want 0xc0de0004)",
		 ret ? t->err : "fence reached", ok ? "mapped" : "never mapped", n, vt_rd(d2, 12));
	vt_kit_check(k, !ret && ok && !n && vt_rd(d2, 12) == 0xC0DE0004, names[i++], why);
out:
	vt_kit_end(k);
	vgpu_vm_free(vm1);
	vgpu_vm_free(vm2);
	return vt_cp_end(t, t->vg->cp);
}

enum vt_res t_mes_bad_frames(struct vt_case *t)
{
	static const char *const names[] = {
		"kernel_slot_mask", "unknown_opcode", "bad_header_type", "bad_header_size",
		"mqd_unreachable", "doorbell_outside_bar", "doorbell_mes_ring", "doorbell_odd",
		"doorbell_aggregated", "doorbell_kernel_hqd", "misaligned_status", "bad_priority",
		"bad_mqd", "bad_queue_type", "duplicate_queue", "remove_unknown", "still_works",
	};
	const unsigned int nn = ARRAY_SIZE(names);
	struct vgpu_mes_queue *a = NULL, *b = NULL;
	struct vgpu_mes_hw hw, bad;
	struct vgpu_ring *r = NULL;
	struct vgpu_mes_proc *p = NULL;
	struct vgpu_mq_status s;
	struct vgpu_bo *d = NULL;
	struct vt_mes_kit *k;
	char why[VT_WHY_LEN];
	struct vgpu *vg = t->vg;
	u32 f[VT_MES_FRAME_DW], pk[16], n, sa, sb, fe;
	unsigned int i = 0, ks, kq;
	struct vgpu_cp *cp;
	int ret;

	vt_sub_begin(t, nn);
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, nn);
	/* MES gets every compute slot but the last of pipe 1, which a kernel ring uses. */
	vgpu_mes_hw_default(cp, &hw);
	kq = min_t(u32, cp->qpp, 8) - 1;
	ks = vt_compute_slot(cp, 1, kq);
	hw.compute_mask[1] &= ~BIT(kq);
	k = vt_kit_start(t, &hw);
	if (!k) {
		vt_sub_fail_all(t, names, nn);
		return vt_cp_end(t, cp);
	}

	/* Slot masks naming a slot a kernel ring has active. */
	r = vgpu_ring_create(t, cp, ks, VT_RING_BYTES);
	if (!r) {
		vt_check(t, false, names[i++], "%s", t->err);
	} else {
		bad = hw;
		bad.compute_mask[1] |= BIT(kq);
		vt_kit_snap(k);
		ret = vgpu_mes_set_hw_resources(t, k->m, &bad);
		/* The kernel's ring still works: MES did not take its slot. */
		if (ret == -EIO && vgpu_ring_test(t, r, false)) {
			snprintf(why, sizeof(why), "slot %u: the kernel ring failed its ring test after the refused frame: %s",
				 ks, t->err);
			vt_kit_check(k, false, names[i], why);
		} else {
			vt_kit_expect_err(k, names[i], ret, VGPU_MES_SCH_API_SET_HW_RSRC,
					  VGPU_MES_ERR_BAD_MASK);
		}
		i++;
	}

	p = vt_kit_proc(k, 0x231);
	d = p ? vt_kit_bo(k, VT_GPU_PAGE) : NULL;
	a = d && !vgpu_mes_proc_map(t, p, VT_VA_DATA, d, VT_VM_RW) ?
	    vt_kit_queue(k, p, NULL, true) : NULL;
	b = a ? vt_kit_queue(k, p, NULL, false) : NULL;
	if (!b) {
		vt_sub_fail_all(t, names + i, nn - i);
		goto out;
	}

	vgpu_mes_frame(f, 0x3f);
	vt_kit_snap(k);
	ret = vgpu_mes_submit(t, k->m, f);
	vt_kit_expect_err(k, names[i++], ret, 0x3f, VGPU_MES_ERR_UNKNOWN_OPCODE);

	vgpu_mes_frame(f, VGPU_MES_SCH_API_QUERY_SCHEDULER_STATUS);
	f[0] &= ~VGPU_MES_API_HEADER_TYPE_MASK;
	vt_kit_snap(k);
	ret = vgpu_mes_submit(t, k->m, f);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_QUERY_SCHEDULER_STATUS,
			  VGPU_MES_ERR_BAD_HEADER);

	vgpu_mes_frame(f, VGPU_MES_SCH_API_QUERY_SCHEDULER_STATUS);
	f[0] = (f[0] & ~VGPU_MES_API_HEADER_DWSIZE_MASK) |
	       FIELD_PREP(VGPU_MES_API_HEADER_DWSIZE_MASK, 32);
	vt_kit_snap(k);
	ret = vgpu_mes_submit(t, k->m, f);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_QUERY_SCHEDULER_STATUS,
			  VGPU_MES_ERR_BAD_HEADER);

	/* Just past the GART: neither aperture of VMID 0 holds it. */
	vgpu_mes_add_frame(b, f);
	vgpu_mes_put64(f, VGPU_MES_ADD_QUEUE_DW_MQD_ADDR, cp->gart_start + VT_GART_SIZE);
	vt_kit_snap(k);
	ret = vgpu_mes_submit(t, k->m, f);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_ADD_QUEUE,
			  VGPU_MES_ERR_BAD_ADDRESS);

	vgpu_mes_add_frame(b, f);
	f[VGPU_MES_ADD_QUEUE_DW_DOORBELL_OFFSET] = k->m->doorbells;
	vt_kit_snap(k);
	ret = vgpu_mes_submit(t, k->m, f);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_ADD_QUEUE,
			  VGPU_MES_ERR_BAD_DOORBELL);

	vgpu_mes_add_frame(b, f);
	f[VGPU_MES_ADD_QUEUE_DW_DOORBELL_OFFSET] = VT_MES_DB_RING;
	vt_kit_snap(k);
	ret = vgpu_mes_submit(t, k->m, f);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_ADD_QUEUE,
			  VGPU_MES_ERR_BAD_DOORBELL);

	/* The high half of a 64-bit doorbell: no doorbell write could match it. */
	vgpu_mes_add_frame(b, f);
	f[VGPU_MES_ADD_QUEUE_DW_DOORBELL_OFFSET] = b->doorbell + 1;
	vt_kit_snap(k);
	ret = vgpu_mes_submit(t, k->m, f);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_ADD_QUEUE,
			  VGPU_MES_ERR_BAD_DOORBELL);

	vgpu_mes_add_frame(b, f);
	f[VGPU_MES_ADD_QUEUE_DW_DOORBELL_OFFSET] = hw.agg[VGPU_MES_PRIORITY_NORMAL];
	vt_kit_snap(k);
	ret = vgpu_mes_submit(t, k->m, f);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_ADD_QUEUE,
			  VGPU_MES_ERR_BAD_DOORBELL);

	/* The doorbell of the kernel ring that is active on slot ks. */
	if (r) {
		vgpu_mes_add_frame(b, f);
		f[VGPU_MES_ADD_QUEUE_DW_DOORBELL_OFFSET] = r->doorbell * (VGPU_DOORBELL_STRIDE / 4);
		vt_kit_snap(k);
		ret = vgpu_mes_submit(t, k->m, f);
		vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_ADD_QUEUE,
				  VGPU_MES_ERR_BAD_DOORBELL);
	} else {
		vt_check(t, false, names[i++], "no kernel ring on slot %u", ks);
	}

	/* A good ADD_QUEUE whose api_status fence is misaligned: refused before it acts. */
	vgpu_mes_add_frame(b, f);
	vt_kit_snap(k);
	ret = vgpu_mes_submit_skewed(t, k->m, f, 4);
	vgpu_mes_status(k->m, b->doorbell, &s);
	if (ret == -EIO && VT_MQ_ST(s.st, KNOWN)) {
		snprintf(why, sizeof(why), "the frame failed, but the queue was added (QUERY_STATUS %#x)",
			 s.st);
		vt_kit_check(k, false, names[i++], why);
	} else {
		vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_ADD_QUEUE,
				  VGPU_MES_ERR_BAD_ADDRESS);
	}

	vgpu_mes_add_frame(b, f);
	f[VGPU_MES_ADD_QUEUE_DW_GANG_GLOBAL_PRIORITY_LEVEL] = VGPU_MES_PRIORITY_LEVELS;
	vt_kit_snap(k);
	ret = vgpu_mes_submit(t, k->m, f);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_ADD_QUEUE,
			  VGPU_MES_ERR_BAD_PRIORITY);

	vgpu_bo_wr(b->mqd, 4 * VGPU_MES_MQD_DW_HEADER, 0);
	vt_kit_snap(k);
	ret = vgpu_mes_add(t, b);
	vgpu_bo_wr(b->mqd, 4 * VGPU_MES_MQD_DW_HEADER, VGPU_MES_MQD_HEADER);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_ADD_QUEUE, VGPU_MES_ERR_BAD_MQD);

	vgpu_mes_add_frame(b, f);
	f[VGPU_MES_ADD_QUEUE_DW_QUEUE_TYPE] = VGPU_MES_QUEUE_TYPE_SDMA;
	vt_kit_snap(k);
	ret = vgpu_mes_submit(t, k->m, f);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_ADD_QUEUE,
			  VGPU_MES_ERR_BAD_QUEUE_TYPE);

	vgpu_mes_add_frame(a, f);
	vt_kit_snap(k);
	ret = vgpu_mes_submit(t, k->m, f);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_ADD_QUEUE,
			  VGPU_MES_ERR_DUPLICATE_QUEUE);

	vgpu_mes_frame(f, VGPU_MES_SCH_API_REMOVE_QUEUE);
	f[VGPU_MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET] = VT_MES_DB_QUEUE(VT_KIT_QUEUES - 1);
	f[VGPU_MES_REMOVE_QUEUE_DW_QUEUE_TYPE] = VGPU_MES_QUEUE_TYPE_COMPUTE;
	vt_kit_snap(k);
	ret = vgpu_mes_submit(t, k->m, f);
	vt_kit_expect_err(k, names[i++], ret, VGPU_MES_SCH_API_REMOVE_QUEUE,
			  VGPU_MES_ERR_NO_SUCH_QUEUE);

	/* MES still works: B added, jobs on both, both removed, no further frame error. */
	fe = vgpu_rd(vg, VGPU_REG_MES_FRAME_ERRORS);
	ret = vgpu_mes_add(t, b);
	n = vt_wr(pk, VT_VA_DATA, 0xA0A00001);
	ret = ret ?: vgpu_mq_submit(t, a, pk, n, false, true, &sa);
	n = vt_wr(pk, VT_VA_DATA + 4, 0xB0B00001);
	ret = ret ?: vgpu_mq_submit(t, b, pk, n, false, true, &sb);
	ret = ret ?: vgpu_mq_wait(t, a, sa, vt_mes_ms());
	ret = ret ?: vgpu_mq_wait(t, b, sb, vt_mes_ms());
	ret = ret ?: vgpu_mes_remove(t, b);
	ret = ret ?: vgpu_mes_remove(t, a);
	snprintf(why, sizeof(why),
		 "%s; A wrote %#x (want 0xa0a00001), B %#x (want 0xb0b00001), FRAME_ERRORS %u -> %u, QUEUES %u",
		 ret ? t->err : "added, ran and removed", vt_rd(d, 0), vt_rd(d, 4), fe,
		 vgpu_rd(vg, VGPU_REG_MES_FRAME_ERRORS), vgpu_rd(vg, VGPU_REG_MES_QUEUES));
	vt_kit_check(k, !ret && vt_rd(d, 0) == 0xA0A00001 && vt_rd(d, 4) == 0xB0B00001 &&
		     vgpu_rd(vg, VGPU_REG_MES_FRAME_ERRORS) == fe &&
		     !vgpu_rd(vg, VGPU_REG_MES_QUEUES), names[i++], why);
out:
	vgpu_ring_destroy(t, r);
	vt_kit_end(k);
	return vt_cp_end(t, cp);
}

/*
 * Submits one WRITE_DATA job on an unmapped q with the doorbell rung, and checks that it is
 * still not done VT_HOLD_MS later (the doorbell did not reach MES) and that MES did not count it.
 */
static bool vt_submit_held(struct vt_mes_kit *k, struct vgpu_mes_queue *q, u32 val, u32 *seq,
			   char *why, size_t len)
{
	struct vt_case *t = k->t;
	struct vgpu_mq_status s;
	u32 pk[8], u0, u1;
	int ret;

	if (!vgpu_mq_wait_status(q, VGPU_REG_MES_QUERY_STATUS__MAPPED_MASK, 0, vt_mes_ms(), &s)) {
		snprintf(why, len, "db %#x still mapped %u ms after its work", q->doorbell,
			 vt_mes_ms());
		return false;
	}
	u0 = vgpu_rd(k->cp->vg, VGPU_REG_MES_UNMAPPED_DOORBELLS);
	ret = vgpu_mq_submit(t, q, pk, vt_wr(pk, VT_VA_DATA + 16, val), false, true, seq);
	if (ret) {
		snprintf(why, len, "%s", t->err);
		return false;
	}
	msleep(VT_HOLD_MS);
	vgpu_mes_status(k->m, q->doorbell, &s);
	u1 = vgpu_rd(k->cp->vg, VGPU_REG_MES_UNMAPPED_DOORBELLS);
	if (vgpu_mq_done(q, *seq) || VT_MQ_ST(s.st, MAPPED) || u1 != u0) {
		snprintf(why, len, "with the intercept off: after %u ms fence %u (want below %u), QUERY_STATUS %#x (want not MAPPED), UNMAPPED_DOORBELLS %u -> %u (want no change)",
			 VT_HOLD_MS, vgpu_mq_fence_read(q), *seq, s.st, u0, u1);
		return false;
	}
	return true;
}

enum vt_res t_mes_unmapped_doorbell(struct vt_case *t)
{
	static const char *const names[] = {
		"intercept_runs", "intercept_off_holds", "notify_runs", "aggregated_holds",
		"aggregated_runs",
	};
	const unsigned int nn = ARRAY_SIZE(names);
	struct vgpu_mes_queue_opts o = { .priority = VGPU_MES_PRIORITY_NORMAL };
	struct vgpu_mes_queue *q = NULL;
	struct vgpu_mes_proc *p;
	struct vgpu_bo *d = NULL;
	struct vgpu_mq_status s;
	struct vgpu_mes_hw hw;
	struct vgpu_mes_evt e;
	struct vt_mes_kit *k;
	char why[VT_WHY_LEN];
	struct vgpu *vg = t->vg;
	u32 pk[8], seq, u0, u1, log0;
	unsigned int i = 0;
	bool ok;
	int ret;

	vt_sub_begin(t, nn);
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, nn);
	/* No periodic poll: only the intercept, NOTIFY and the aggregated doorbells find work. */
	vgpu_mes_hw_default(t->vg->cp, &hw);
	hw.oversub_us = 0;
	k = vt_kit_start(t, &hw);
	if (k) {
		p = vt_kit_proc(k, 0x241);
		d = p ? vt_kit_bo(k, VT_GPU_PAGE) : NULL;
		q = d && !vgpu_mes_proc_map(t, p, VT_VA_DATA, d, VT_VM_RW) ?
		    vt_kit_queue(k, p, &o, true) : NULL;
	}
	if (!q) {
		vt_sub_fail_all(t, names, nn);
		goto out;
	}

	/* Intercept on (the default): the doorbell of the unmapped queue alone gets it mapped. */
	vgpu_mes_status(k->m, q->doorbell, &s);
	u0 = vgpu_rd(vg, VGPU_REG_MES_UNMAPPED_DOORBELLS);
	log0 = vgpu_mes_log_count(k->m);
	ret = vgpu_mq_submit(t, q, pk, vt_wr(pk, VT_VA_DATA, 0xD0D00001), false, true, &seq) ?:
	      vgpu_mq_wait(t, q, seq, vt_mes_ms());
	u1 = vgpu_rd(vg, VGPU_REG_MES_UNMAPPED_DOORBELLS);
	ok = vgpu_mes_log_find(k->m, log0, VGPU_MES_EVT_DOORBELL, VT_MES_ANY, q->doorbell, &e);
	snprintf(why, sizeof(why), "%s; queue %s before, UNMAPPED_DOORBELLS %u -> %u (want more), %s",
		 ret ? t->err : "fence reached", VT_MQ_ST(s.st, MAPPED) ? "mapped" : "unmapped",
		 u0, u1, ok ? "DOORBELL event logged" : "no DOORBELL event for it");
	vt_kit_check(k, !ret && !VT_MQ_ST(s.st, MAPPED) && u1 > u0 && ok &&
		     vt_rd(d, 0) == 0xD0D00001, names[i++], why);

	/* Intercept off: the doorbell is not seen; NOTIFY_WORK_ON_UNMAPPED_QUEUE finds the work. */
	vgpu_wr(vg, VGPU_REG_MES_CNTL, VGPU_REG_MES_CNTL__UNMAPPED_DOORBELL_DISABLE_MASK);
	ok = vt_submit_held(k, q, 0xD0D00002, &seq, why, sizeof(why));
	vt_kit_check(k, ok, names[i++], why);
	ret = ok ? vgpu_mes_misc_notify(t, k->m) ?: vgpu_mq_wait(t, q, seq, vt_mes_ms()) : -EIO;
	vt_kit_check(k, !ret, names[i++], ok ? t->err : "not submitted unseen");

	/* Again, then a write to the aggregated doorbell of its level. */
	ok = vt_submit_held(k, q, 0xD0D00003, &seq, why, sizeof(why));
	vt_kit_check(k, ok, names[i++], why);
	if (ok) {
		vgpu_mes_kick_aggregated(k->m, VGPU_MES_PRIORITY_NORMAL);
		ret = vgpu_mq_wait(t, q, seq, vt_mes_ms());
	}
	snprintf(why, sizeof(why), "%s; the page reads %#x (want 0xd0d00003)",
		 !ok ? "not submitted unseen" : ret ? t->err : "fence reached", vt_rd(d, 16));
	vt_kit_check(k, ok && !ret && vt_rd(d, 16) == 0xD0D00003, names[i++], why);
	vgpu_wr(vg, VGPU_REG_MES_CNTL, 0);
out:
	vt_kit_end(k);
	return vt_cp_end(t, t->vg->cp);
}

/* PROTECTED_FENCE_SIGNAL: advance the queue's protected fence (payload dword 0). */
static unsigned int vt_pfs(u32 *p)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_PROTECTED_FENCE_SIGNAL, 0);
	p[1] = 0;
	return VGPU_PM4_PROTECTED_FENCE_DWORDS;
}

static u64 vt_fence64(struct vgpu_mes_queue *q)
{
	return (u64)vgpu_mq_rd(q->fence, 1) << 32 | vgpu_mq_rd(q->fence, 0);
}

/* Writes a marker and a protected fence signal on q; waits for the fence to reach the wptr. */
static int vt_signal(struct vt_mes_kit *k, struct vgpu_mes_queue *q, u32 marker, u64 *want)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(vt_mes_ms());
	struct vt_case *t = k->t;
	char st[320];
	u32 pk[16], n;
	int ret;

	n = vt_wr(pk, VT_VA_DATA + 32, marker);
	n += vt_pfs(pk + n);
	ret = vgpu_mq_alloc(t, q, n);
	if (ret)
		return ret;
	vgpu_mq_put(q, pk, n);
	vgpu_mq_commit(q);
	vgpu_mq_kick(q);
	*want = q->wptr;
	while (vt_fence64(q) < *want) {
		if (time_after(jiffies, deadline)) {
			vgpu_mq_describe(q, st, sizeof(st));
			return vt_reason(t, -ETIMEDOUT, "protected fence %llu, want %llu after %u ms (%s)",
					 vt_fence64(q), *want, vt_mes_ms(), st);
		}
		usleep_range(50, 100);
	}
	return 0;
}

/* Waits until MES saved an error in q's MQD (the queue halted and was unmapped). */
static u32 vt_wait_mqd_error(struct vgpu_mes_queue *q)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(vt_mes_ms());
	u32 err;

	while (!(err = vgpu_mq_mqd(q, VGPU_MES_MQD_DW_CP_HQD_ERROR)) &&
	       !time_after(jiffies, deadline))
		usleep_range(100, 200);
	return err;
}

enum vt_res t_protected_fence(struct vt_case *t)
{
	static const char *const names[] = {
		"signal", "signal_iv", "signal_again", "user_write_faults", "fence_page_intact",
		"no_fence_address",
	};
	const unsigned int nn = ARRAY_SIZE(names);
	struct vgpu_mes_queue_opts o = { .priority = VGPU_MES_PRIORITY_NORMAL,
					 .protected_fence = true };
	struct vgpu_mes_queue *q = NULL, *q2 = NULL;
	struct vgpu_vm_fault last = {};
	struct vgpu_mes_proc *p;
	struct vgpu_bo *d = NULL;
	struct vgpu_ih_ueop u;
	struct vgpu_mq_status s;
	struct vt_mes_kit *k;
	char why[VT_WHY_LEN];
	u32 pk[16], n, ue0, f0, f1, err, seq;
	u64 want = 0, want2 = 0, fva;
	unsigned long deadline;
	unsigned int i = 0;
	bool ok;
	int ret;

	vt_sub_begin(t, nn);
	if (!vgpu_cp_get(t))
		return vt_cp_unavailable(t, names, nn);
	k = vt_kit_start(t, NULL);
	if (k) {
		p = vt_kit_proc(k, 0x251);
		d = p ? vt_kit_bo(k, VT_GPU_PAGE) : NULL;
		q = d && !vgpu_mes_proc_map(t, p, VT_VA_DATA, d, VT_VM_RW) ?
		    vt_kit_queue(k, p, &o, true) : NULL;
		o.protected_fence = false;
		q2 = q ? vt_kit_queue(k, p, &o, true) : NULL;
	}
	if (!q2) {
		vt_sub_fail_all(t, names, nn);
		goto out;
	}
	fva = q->va + VT_MQ_FENCE_OFF;
	vt_note(t, "db %#x: protected fence at %#llx (read-only in PASID 0x251), MQD FENCE_ADDRESS %#llx",
		q->doorbell, fva, vgpu_mq_mqd64(q, VGPU_MES_MQD_DW_FENCE_ADDRESS_LO));

	vgpu_ih_mes_counts(k->cp, NULL, NULL, &ue0);
	ret = vt_signal(k, q, 0xFE000001, &want);
	snprintf(why, sizeof(why), "%s; fence %llu (want the rptr after the packet, %llu), marker %#x",
		 ret ? t->err : "signalled", vt_fence64(q), want, vt_rd(d, 32));
	vt_kit_check(k, !ret && vt_fence64(q) == want && vt_rd(d, 32) == 0xFE000001, names[i++],
		     why);

	ok = vt_wait_ueop(k->cp, ue0, q->doorbell, 0x251, &u);
	snprintf(why, sizeof(why), "no EOP IV with DW4 = doorbell %#x and PASID 0x251 in %u ms",
		 q->doorbell, vt_mes_ms());
	vt_kit_check(k, ok, names[i++], why);

	vgpu_ih_mes_counts(k->cp, NULL, NULL, &ue0);
	ret = vt_signal(k, q, 0xFE000002, &want2);
	ok = !ret && vt_wait_ueop(k->cp, ue0, q->doorbell, 0x251, &u);
	snprintf(why, sizeof(why), "%s; fence %llu (want %llu, the first was %llu), %s",
		 ret ? t->err : "signalled", vt_fence64(q), want2, want,
		 ok ? "EOP IV came" : "no second EOP IV");
	vt_kit_check(k, ok && vt_fence64(q) == want2 && want2 > want, names[i++], why);

	/* An ordinary write from the queue to its fence page: a write fault, the queue halts. */
	f0 = vgpu_ih_pasid_faults(k->cp, 0x251, NULL);
	n = vt_wr(pk, fva, 0xBAD0BAD0);
	ret = vgpu_mq_submit(t, q, pk, n, false, true, &seq);
	deadline = jiffies + msecs_to_jiffies(vt_mes_ms());
	while (!ret && (f1 = vgpu_ih_pasid_faults(k->cp, 0x251, &last)) == f0 &&
	       !time_after(jiffies, deadline))
		usleep_range(100, 200);
	f1 = vgpu_ih_pasid_faults(k->cp, 0x251, &last);
	err = ret ? 0 : vt_wait_mqd_error(q);
	vgpu_mes_status(k->m, q->doorbell, &s);
	snprintf(why, sizeof(why),
		 "%s; VM-fault IVs of PASID 0x251 %u -> %u, last at %#llx flags %#x (want %#llx, WRITE); MQD CP_HQD_ERROR %u (want %u), QUERY_STATUS %#x",
		 ret ? t->err : "submitted", f0, f1, last.addr, last.flags, fva, err,
		 (u32)VGPU_CP_ERROR_TRANSLATION, s.st);
	vt_kit_check(k, !ret && f1 > f0 && last.addr == fva &&
		     (last.flags & VGPU_VM_IV_DW5_WRITE_MASK) &&
		     err == VGPU_CP_ERROR_TRANSLATION && !vgpu_mq_done(q, seq), names[i++], why);

	snprintf(why, sizeof(why), "the fence page reads %#x:%08x (want %llu)",
		 vgpu_mq_rd(q->fence, 1), vgpu_mq_rd(q->fence, 0), want2);
	vt_kit_check(k, vt_fence64(q) == want2, names[i++], why);

	/* A queue the kernel gave no fence address: the packet is an error. */
	n = vt_pfs(pk);
	ret = vgpu_mq_alloc(t, q2, n);
	if (!ret) {
		vgpu_mq_put(q2, pk, n);
		vgpu_mq_commit(q2);
		vgpu_mq_kick(q2);
	}
	err = ret ? 0 : vt_wait_mqd_error(q2);
	snprintf(why, sizeof(why), "%s; MQD CP_HQD_ERROR %u (want CP_ERROR_BAD_PACKET %u)",
		 ret ? t->err : "submitted", err, (u32)VGPU_CP_ERROR_BAD_PACKET);
	vt_kit_check(k, !ret && err == VGPU_CP_ERROR_BAD_PACKET, names[i++], why);
out:
	vt_kit_end(k);
	return vt_cp_end(t, t->vg->cp);
}
