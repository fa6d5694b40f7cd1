// SPDX-License-Identifier: GPL-2.0
/*
 * Command processor basics: ring and IB tests as amdgpu runs them, IB nesting and
 * chaining, a bad packet, and a ring that wraps and fills.
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/sizes.h>

#include "cases.h"
#include "cp.h"

#define VT_WRAP_BYTES		SZ_1K
#define VT_WRAP_JOBS		64
#define VT_WRAP_FULL_JOBS	8	/* jobs of 32 dwords filling the 256-dword ring */

enum vt_res t_ring_test(struct vt_case *t)
{
	static const char *const names[] = { "gfx", "compute", "compute_mmio_wptr" };
	struct vgpu_ring *r;
	struct vgpu_cp *cp;
	unsigned int i;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	for (i = 0; i < 2; i++) {
		r = vgpu_ring_create(t, cp, i ? vt_compute_slot(cp, 0, 0) : 0, VT_RING_BYTES);
		if (!r) {
			vt_sub_fail_all(t, names + i, i ? 2 : 1);
			continue;
		}
		vt_check(t, !vgpu_ring_test(t, r, false), names[i], "%s", t->err);
		if (i)
			vt_check(t, !vgpu_ring_test(t, r, true), names[2], "%s", t->err);
		vgpu_ring_destroy(t, r);
	}
	return vt_cp_end(t, cp);
}

/*
 * amdgpu's IB test (gfx_v11_0_ring_test_ib) on one engine: an IB with WRITE_DATA 0xDEADBEEF
 * to a dword preset to 0xCAFEDEAD, run by INDIRECT_BUFFER and followed by an interrupting
 * fence; then the fence, the memory and the EOP IV (ring id, ctxid) are checked.
 */
static void vgpu_ib_test_one(struct vt_case *t, struct vgpu_cp *cp, unsigned int slot,
			     struct vgpu_bo *ib, struct vgpu_bo *dst, const char *const *names)
{
	struct vgpu_ih_slot s;
	struct vgpu_ring *r;
	char why[VT_WHY_LEN];
	u32 p[16], n, seq = 0, v;
	int ret;

	r = vgpu_ring_create(t, cp, slot, VT_RING_BYTES);
	if (!r) {
		vt_sub_fail_all(t, names, 3);
		return;
	}
	vgpu_bo_wr(dst, 0, 0xCAFEDEAD);
	n = pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM, VGPU_PM4_CACHE_POLICY_LRU, dst->gpu,
			  0xDEADBEEF);
	vgpu_ib_put(ib, 0, p, n);

	ret = vgpu_ring_alloc(t, r, 4 + VT_FENCE_DW);
	if (!ret) {
		vgpu_ring_put(r, p, pm4_ib(p, ib->gpu, n, false));
		seq = vgpu_ring_fence(r, true);
		vgpu_ring_commit(r);
		vgpu_ring_kick(r);
		ret = vgpu_fence_wait(t, r, seq);
	}
	vt_check(t, !ret, names[0], "%s", t->err);
	v = vgpu_bo_rd(dst, 0);
	vt_check(t, v == 0xDEADBEEF, names[1],
		 "memory reads %#010x, want 0xdeadbeef (preset 0xcafedead)",
		 v);

	why[0] = '\0';
	if (!ret)
		ret = vgpu_eop_wait(t, r, 1);
	vgpu_ih_slot_get(cp, r->slot, &s);
	if (ret)
		snprintf(why, sizeof(why), "%s", t->err);
	else if (s.eop != 1 || s.eop_ctxid != seq || s.eop_early)
		snprintf(why, sizeof(why),
			 "slot %u (ring id %#x): %u EOP IVs, want 1; ctxid %#x, want %#x; %u decoded before the fence data",
			 r->slot, r->ring_id, s.eop, s.eop_ctxid, seq, s.eop_early);
	vt_check(t, !why[0], names[2], "%s", why);
	vgpu_ring_destroy(t, r);
}

enum vt_res t_ib_test(struct vt_case *t)
{
	static const char *const names[] = {
		"gfx_fence", "gfx_write", "gfx_eop_iv",
		"compute_fence", "compute_write", "compute_eop_iv",
	};
	struct vgpu_bo *ib, *dst = NULL;
	struct vgpu_cp *cp;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	ib = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	if (ib)
		dst = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	if (!dst) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	vgpu_ib_test_one(t, cp, 0, ib, dst, names);
	vgpu_ib_test_one(t, cp, vt_compute_slot(cp, 0, 0), ib, dst, names + 3);
out:
	vgpu_bo_free(cp, dst);
	vgpu_bo_free(cp, ib);
	return vt_cp_end(t, cp);
}

/* IB layout of ib2_chain, in dwords of one page. */
enum {
	VT_IB1 = 0, VT_IB2 = 64, VT_IB3 = 128,		/* IB1 -> IB2, then CHAIN -> IB3 */
	VT_D1 = 192, VT_D2 = 256, VT_D3 = 320,		/* IB1 -> IB2 -> IB3: too deep */
};

#define VT_VAL_A	0xA000000A
#define VT_VAL_B	0xB000000B
#define VT_VAL_C	0xC000000C
#define VT_VAL_X	0xD000000D

enum vt_res t_ib2_chain(struct vt_case *t)
{
	static const char *const names[] = {
		"ib_max_depth", "fence", "ib2_write", "chain_write", "chain_no_return",
		"depth_halt", "depth_error_addr", "depth_iv", "depth_nothing_after",
		"depth_recover",
	};
	struct vgpu_bo *ibs = NULL, *res = NULL;
	struct vgpu_ring *r = NULL;
	struct vgpu *vg = t->vg;
	char why[VT_WHY_LEN];
	struct vgpu_ih_slot s;
	u32 p[32], n1, n2, n3, seq, v, st, halts;
	u64 addr;
	bool ok;
	int ret;
	struct vgpu_cp *cp;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	v = vgpu_rd(vg, VGPU_REG_CP_IB_MAX_DEPTH);
	vt_check(t, v == VGPU_CP_IB_MAX_DEPTH, names[0],
		 "CP_IB_MAX_DEPTH reads %u, want %u (IB1 and IB2)", v, (u32)VGPU_CP_IB_MAX_DEPTH);

	ibs = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	if (ibs)
		res = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	if (res)
		r = vgpu_ring_create(t, cp, vt_compute_slot(cp, 0, 1), VT_RING_BYTES);
	if (!r) {
		vt_sub_fail_all(t, names + 1, ARRAY_SIZE(names) - 1);
		goto out;
	}

	/* IB2 writes A; IB3 writes B; IB1 calls IB2, chains to IB3, then writes C (never). */
	n2 = pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM, VGPU_PM4_CACHE_POLICY_LRU,
			   res->gpu + 0, VT_VAL_A);
	vgpu_ib_put(ibs, VT_IB2, p, n2);
	n3 = pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM, VGPU_PM4_CACHE_POLICY_LRU,
			   res->gpu + 4, VT_VAL_B);
	vgpu_ib_put(ibs, VT_IB3, p, n3);
	n1 = pm4_ib(p, ibs->gpu + 4 * VT_IB2, n2, false);
	n1 += pm4_ib(p + n1, ibs->gpu + 4 * VT_IB3, n3, true);
	n1 += pm4_write_one(p + n1, VGPU_PM4_WRITE_DATA_DST_MEM, VGPU_PM4_CACHE_POLICY_LRU,
			    res->gpu + 8, VT_VAL_C);
	vgpu_ib_put(ibs, VT_IB1, p, n1);

	ret = vgpu_submit_wait(t, r, p, pm4_ib(p, ibs->gpu + 4 * VT_IB1, n1, false));
	vt_check(t, !ret, names[1], "%s", t->err);
	v = vgpu_bo_rd(res, 0);
	vt_check(t, v == VT_VAL_A, names[2], "IB2's WRITE_DATA: memory reads %#010x, want %#010x",
		 v, VT_VAL_A);
	v = vgpu_bo_rd(res, 4);
	vt_check(t, v == VT_VAL_B, names[3],
		 "chained IB's WRITE_DATA: memory reads %#010x, want %#010x",
		 v, VT_VAL_B);
	v = vgpu_bo_rd(res, 8);
	vt_check(t, v == 0, names[4],
		 "the WRITE_DATA after the CHAIN packet ran (%#010x): a chained IB must not return",
		 v);

	/* IB1 -> IB2 -> IB3: the INDIRECT_BUFFER in IB2 must halt the queue. */
	n3 = pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM, VGPU_PM4_CACHE_POLICY_LRU,
			   res->gpu + 12, VT_VAL_X);
	vgpu_ib_put(ibs, VT_D3, p, n3);
	n2 = pm4_ib(p, ibs->gpu + 4 * VT_D3, n3, false);
	vgpu_ib_put(ibs, VT_D2, p, n2);
	n1 = pm4_ib(p, ibs->gpu + 4 * VT_D2, n2, false);
	vgpu_ib_put(ibs, VT_D1, p, n1);
	halts = vgpu_rd(vg, VGPU_REG_CP_HALTS);
	ret = vgpu_ring_alloc(t, r, 4 + VT_FENCE_DW);
	if (ret) {
		vt_sub_fail_all(t, names + 5, ARRAY_SIZE(names) - 5);
		goto out;
	}
	vgpu_ring_put(r, p, pm4_ib(p, ibs->gpu + 4 * VT_D1, n1, false));
	seq = vgpu_ring_fence(r, true);
	vgpu_ring_commit(r);
	vgpu_ring_kick(r);

	ok = vgpu_hqd_wait_state(vg, r->slot, VGPU_HQD_STATE_HALTED);
	st = vgpu_hqd_rd(vg, r->slot, VGPU_REG_HQD_STATUS);
	v = vgpu_rd(vg, VGPU_REG_CP_HALTS);
	ok = ok && FIELD_GET(VGPU_REG_HQD_STATUS__ERROR_MASK, st) == VGPU_CP_ERROR_IB_DEPTH &&
	     v == halts + 1;
	vt_check(t, ok, names[5],
		 "STATUS %#x (%s, error %u), want HALTED with CP_ERROR_IB_DEPTH (%u); CP_HALTS %u -> %u",
		 st, vgpu_state_name(FIELD_GET(VGPU_REG_HQD_STATUS__STATE_MASK, st)),
		 (u32)FIELD_GET(VGPU_REG_HQD_STATUS__ERROR_MASK, st),
		 (u32)VGPU_CP_ERROR_IB_DEPTH, halts, v);
	addr = vgpu_rd64(vg, VGPU_HQD_REG(r->slot, VGPU_REG_HQD_ERROR_ADDR_LO),
			 VGPU_HQD_REG(r->slot, VGPU_REG_HQD_ERROR_ADDR_HI));
	vt_check(t, addr == ibs->gpu + 4 * VT_D2, names[6],
		 "ERROR_ADDR %#llx, want %#llx (the INDIRECT_BUFFER in IB2)", addr,
		 ibs->gpu + 4 * VT_D2);

	why[0] = '\0';
	if (vgpu_err_wait(t, r, 1)) {
		snprintf(why, sizeof(why), "%s", t->err);
	} else {
		vgpu_ih_slot_get(cp, r->slot, &s);
		if ((s.err_src != VGPU_IH_SRC_CP_BAD_OPCODE &&
		     s.err_src != VGPU_IH_SRC_CP_RESERVED_BITS &&
		     s.err_src != VGPU_IH_SRC_CP_GPF) || s.err_data[0] != VGPU_CP_ERROR_IB_DEPTH)
			snprintf(why, sizeof(why),
				 "error IV source %u with DW4 %u, want a CP error source with %u",
				 s.err_src, s.err_data[0], (u32)VGPU_CP_ERROR_IB_DEPTH);
	}
	vt_check(t, !why[0], names[7], "%s", why);

	msleep(VT_SETTLE_MS);
	v = vgpu_bo_rd(res, 12);
	vgpu_ih_slot_get(cp, r->slot, &s);
	ok = !v && !vgpu_fence_done(r, seq) && s.eop == 1;
	vt_check(t, ok, names[8],
		 "after the halt: IB3's dword reads %#010x (want 0), fence %u (want below %u), %u EOP IVs (want 1)",
		 v, vgpu_fence_read(r), seq, s.eop);

	ret = vgpu_ring_start(t, r);
	if (!ret)
		ret = vgpu_submit_wait(t, r, p, 0);
	if (!ret)
		ret = vgpu_eop_wait(t, r, 1);
	vt_check(t, !ret, names[9], "DEQUEUE_RESET, bring-up and a fence: %s", t->err);
out:
	vgpu_ring_destroy(t, r);
	vgpu_bo_free(cp, res);
	vgpu_bo_free(cp, ibs);
	return vt_cp_end(t, cp);
}

#define VT_BAD_OPCODE	0xEE
#define VT_MARK_Y	0x7A7A0001

enum vt_res t_bad_packet(struct vt_case *t)
{
	static const char *const names[] = {
		"halted", "error_code", "error_addr", "error_info", "error_iv", "stopped_at_error",
		"other_queue_runs", "recover",
	};
	struct vgpu_ring *x = NULL, *y = NULL;
	u32 p[16], st, halts, v, seq_x, seq_y, info;
	struct vgpu *vg = t->vg;
	char why[VT_WHY_LEN];
	struct vgpu_ih_slot s;
	struct vgpu_bo *mem;
	struct vgpu_cp *cp;
	u64 bad, addr;
	bool ok;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	mem = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	if (mem)
		x = vgpu_ring_create(t, cp, vt_compute_slot(cp, 0, 4), VT_RING_BYTES);
	if (x)
		y = vgpu_ring_create(t, cp, vt_compute_slot(cp, 1, 4), VT_RING_BYTES);
	if (!y)
		goto fail_all;
	halts = vgpu_rd(vg, VGPU_REG_CP_HALTS);

	/* X: an unknown opcode, then a fence that must never be written. */
	ret = vgpu_ring_alloc(t, x, 2 + VT_FENCE_DW);
	if (ret)
		goto fail_all;
	bad = x->bo->gpu + 4 * (x->wpos & (x->size - 1));
	p[0] = VT_PKT3(VT_BAD_OPCODE, 0);
	p[1] = 0;
	vgpu_ring_put(x, p, 2);
	seq_x = vgpu_ring_fence(x, true);
	vgpu_ring_commit(x);
	vgpu_ring_kick(x);

	/* Y: ordinary work meanwhile. */
	ret = vgpu_ring_alloc(t, y, 5 + VT_FENCE_DW);
	if (ret)
		goto fail_all;
	vgpu_ring_put(y, p, pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM,
					  VGPU_PM4_CACHE_POLICY_LRU, mem->gpu, VT_MARK_Y));
	seq_y = vgpu_ring_fence(y, true);
	vgpu_ring_commit(y);
	vgpu_ring_kick(y);

	ok = vgpu_hqd_wait_state(vg, x->slot, VGPU_HQD_STATE_HALTED);
	st = vgpu_hqd_rd(vg, x->slot, VGPU_REG_HQD_STATUS);
	v = vgpu_rd(vg, VGPU_REG_CP_HALTS);
	vt_check(t, ok && v == halts + 1, names[0],
		 "slot %u is %s %u ms after the bad packet (want HALTED); CP_HALTS %u -> %u",
		 x->slot, vgpu_state_name(FIELD_GET(VGPU_REG_HQD_STATUS__STATE_MASK, st)),
		 timeout_ms, halts, v);
	v = FIELD_GET(VGPU_REG_HQD_STATUS__ERROR_MASK, st);
	vt_check(t, v == VGPU_CP_ERROR_BAD_OPCODE, names[1],
		 "STATUS.ERROR %u, want BAD_OPCODE (%u)",
		 v, (u32)VGPU_CP_ERROR_BAD_OPCODE);
	addr = vgpu_rd64(vg, VGPU_HQD_REG(x->slot, VGPU_REG_HQD_ERROR_ADDR_LO),
			 VGPU_HQD_REG(x->slot, VGPU_REG_HQD_ERROR_ADDR_HI));
	vt_check(t, addr == bad, names[2], "ERROR_ADDR %#llx, want %#llx (the packet)", addr, bad);
	info = vgpu_hqd_rd(vg, x->slot, VGPU_REG_HQD_ERROR_INFO);
	vt_check(t, info == VT_PKT3(VT_BAD_OPCODE, 0), names[3],
		 "ERROR_INFO %#010x, want the header %#010x", info, VT_PKT3(VT_BAD_OPCODE, 0));

	why[0] = '\0';
	if (vgpu_err_wait(t, x, 1)) {
		snprintf(why, sizeof(why), "%s", t->err);
	} else {
		vgpu_ih_slot_get(cp, x->slot, &s);
		if (s.err_src != VGPU_IH_SRC_CP_BAD_OPCODE ||
		    s.err_data[0] != VGPU_CP_ERROR_BAD_OPCODE)
			snprintf(why, sizeof(why),
				 "IV source %u with DW4 %u, want %u (CP_BAD_OPCODE) with %u",
				 s.err_src, s.err_data[0], (u32)VGPU_IH_SRC_CP_BAD_OPCODE,
				 (u32)VGPU_CP_ERROR_BAD_OPCODE);
	}
	vt_check(t, !why[0], names[4], "%s", why);

	ret = vgpu_fence_wait(t, y, seq_y);
	if (!ret)
		ret = vgpu_eop_wait(t, y, 1);
	v = vgpu_bo_rd(mem, 0);
	msleep(VT_SETTLE_MS);
	vgpu_ih_slot_get(cp, x->slot, &s);
	ok = !vgpu_fence_done(x, seq_x) && !s.eop;
	vt_check(t, ok, names[5],
		 "the fence after the bad packet: memory %u (want below %u), %u EOP IVs",
		 vgpu_fence_read(x), seq_x, s.eop);
	vt_check(t, !ret && v == VT_MARK_Y, names[6], "slot %u: %s (marker %#010x)", y->slot,
		 ret ? t->err : "fence reached", v);

	ret = vgpu_ring_start(t, x);
	if (!ret) {
		st = vgpu_hqd_rd(vg, x->slot, VGPU_REG_HQD_STATUS);
		if (FIELD_GET(VGPU_REG_HQD_STATUS__ERROR_MASK, st))
			ret = vt_reason(t, -EIO, "STATUS %#x after the bring-up: the error stayed",
					st);
	}
	if (!ret)
		ret = vgpu_submit_wait(t, x, p, 0);
	if (!ret)
		ret = vgpu_eop_wait(t, x, 1);
	vt_check(t, !ret, names[7], "DEQUEUE_RESET, bring-up and a fence: %s", t->err);
	goto out;

fail_all:
	vt_sub_fail_all(t, names, ARRAY_SIZE(names));
out:
	vgpu_ring_destroy(t, y);
	vgpu_ring_destroy(t, x);
	vgpu_bo_free(cp, mem);
	return vt_cp_end(t, cp);
}

/* Whether the n dwords about to be put at r->wpos run over the ring's end. */
static bool vt_straddles(struct vgpu_ring *r, unsigned int n)
{
	return (r->wpos & (r->size - 1)) + n > r->size;
}

enum vt_res t_ring_wrap(struct vt_case *t)
{
	static const char *const names[] = { "wrap_jobs", "full_ring", "after_full" };
	u32 p[40], n, i, seq = 0, v, straddles = 0, bad = 0, first = 0;
	struct vgpu_ring *r = NULL;
	char why[VT_WHY_LEN];
	struct vgpu_bo *res;
	struct vgpu_cp *cp;
	u64 start;
	int ret;

	BUILD_BUG_ON(VT_WRAP_FULL_JOBS * 32 != VT_WRAP_BYTES / 4);
	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	res = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	if (res)
		r = vgpu_ring_create(t, cp, vt_compute_slot(cp, 0, 5), VT_WRAP_BYTES);
	if (!r) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}

	/* 13-dword jobs on a 256-dword ring, each kicked: it wraps, packets straddle its end. */
	for (i = 0, ret = 0; i < VT_WRAP_JOBS && !ret; i++) {
		ret = vgpu_ring_alloc(t, r, VT_JOB_DW);
		if (ret)
			break;
		straddles += vt_straddles(r, 5);
		vgpu_ring_put(r, p, pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM,
						  VGPU_PM4_CACHE_POLICY_LRU, res->gpu + 4 * i,
						  0x57A70000 | i));
		straddles += vt_straddles(r, VT_FENCE_DW);
		seq = vgpu_ring_fence(r, i == VT_WRAP_JOBS - 1);
		vgpu_ring_commit(r);
		vgpu_ring_kick(r);
	}
	if (!ret)
		ret = vgpu_fence_wait(t, r, seq);
	if (!ret)
		ret = vgpu_eop_wait(t, r, 1);
	for (i = 0; i < VT_WRAP_JOBS; i++) {
		v = vgpu_bo_rd(res, 4 * i);
		if (v != (0x57A70000 | i) && !bad++)
			first = i;
	}
	vt_note(t,
		"%u jobs of %u dwords on a %u-dword ring: wptr %llu, %u packets straddled the end",
		VT_WRAP_JOBS, VT_JOB_DW, r->size, r->wptr, straddles);
	why[0] = '\0';
	if (ret)
		snprintf(why, sizeof(why), "%s", t->err);
	else if (bad)
		snprintf(why, sizeof(why),
			 "%u of %u jobs did not write their dword, first job %u (%#010x)",
			 bad, VT_WRAP_JOBS, first, vgpu_bo_rd(res, 4 * first));
	else if (!straddles || r->wptr < 2 * r->size || r->overrun)
		snprintf(why, sizeof(why),
			 "test did not wrap as meant: %u straddles, wptr %llu, overrun %d",
			 straddles, r->wptr, r->overrun);
	vt_check(t, !why[0], names[0], "%s", why);

	/* A completely full ring: 8 NOP-padded jobs of 32 dwords, one doorbell. */
	why[0] = '\0';
	ret = ret ?: vgpu_ring_alloc(t, r, r->size);
	if (ret) {
		snprintf(why, sizeof(why), "%s", t->err);
	} else {
		start = r->wpos;
		for (i = 0; i < VT_WRAP_FULL_JOBS; i++) {
			n = i ? pm4_nops(p, 19) : pm4_nop_big(p, 19);
			n += pm4_write_one(p + n, VGPU_PM4_WRITE_DATA_DST_MEM,
					   VGPU_PM4_CACHE_POLICY_LRU, res->gpu + SZ_2K + 4 * i,
					   0xF0110000 | i);
			vgpu_ring_put(r, p, n);
			seq = vgpu_ring_fence(r, i == VT_WRAP_FULL_JOBS - 1);
		}
		vgpu_ring_commit(r);
		vgpu_ring_kick(r);
		ret = vgpu_fence_wait(t, r, seq);
		if (!ret)
			ret = vgpu_eop_wait(t, r, 2);
		for (i = 0, bad = 0; i < VT_WRAP_FULL_JOBS; i++) {
			v = vgpu_bo_rd(res, SZ_2K + 4 * i);
			if (v != (0xF0110000 | i) && !bad++)
				first = i;
		}
		if (ret)
			snprintf(why, sizeof(why), "%s", t->err);
		else if (bad)
			snprintf(why, sizeof(why),
				 "%u of %u jobs did not write their dword, first job %u",
				 bad, VT_WRAP_FULL_JOBS, first);
		else if (r->wptr - start != r->size || r->overrun)
			snprintf(why, sizeof(why),
				 "test bug: submitted %llu dwords, ring %u, overrun %d",
				 r->wptr - start, r->size, r->overrun);
	}
	vt_check(t, !why[0], names[1], "%s", why);

	if (!ret) {
		n = pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_MEM, VGPU_PM4_CACHE_POLICY_LRU,
				  res->gpu + SZ_2K + 64, 0xAF7E0001);
		ret = vgpu_submit_wait(t, r, p, n);
	}
	v = vgpu_bo_rd(res, SZ_2K + 64);
	vt_check(t, !ret && v == 0xAF7E0001, names[2], "%s (marker %#010x)",
		 ret ? t->err : "fence reached", v);
out:
	vgpu_ring_destroy(t, r);
	vgpu_bo_free(cp, res);
	return vt_cp_end(t, cp);
}
