// SPDX-License-Identifier: GPL-2.0
/*
 * The shader sanitizer (strict mode, L2_CNTL.STRICT; docs/shader.md "Sanitizer"): a packet
 * reading a dispatch's output without a barrier is named in the SHADER block, with the flush it
 * is not; a dispatch reading through an L0 that was not invalidated is named as a stale read,
 * with the invalidation it is not. And a shader in a process VM touching an unmapped page with
 * retry faults on: the driver maps it in its fault handler and the dispatch completes.
 */

#include <linux/bitfield.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/sizes.h>
#include <linux/string.h>

#include "cases.h"
#include "cp.h"
#include "vm.h"
#include "vgpu_shaders.h"

#define VT_HZ_ITEMS		64	/* the held dispatch: one workgroup */
#define VT_HZ_HOLD_MS		200	/* how long it stays in flight after its stores */
#define VT_L0_ITEMS		16	/* one 64-byte L0 line of in[] per workgroup */
#define VT_L0_GROUPS		64	/* enough 1 ms workgroups for every CU to take some */
#define VT_L0_IN_OFF		0x800	/* in[] away from the argument block's L0 index */
#define VT_RF_VMID		11
#define VT_RF_PASID		0x10b
#define VT_RF_VA_OUT		0x0000700000007000ULL	/* mapped only when it faults */
#define VT_RF_PROG_OFF		0x3000	/* in the job's code page (executable) */
#define VT_RF_ARGS_OFF		0x2800
#define VT_RF_ITEMS		256	/* 4 workgroups of 64 */
#define VT_RF_EARLY		32	/* of them store into a mapped page */

/* COPY_DATA of 32 bits from memory (through L2) to memory. */
static unsigned int vt_copy_data(u32 *p, u64 src, u64 dst)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_COPY_DATA, 4);
	p[1] = VGPU_PM4_COPY_DATA_SEL_TC_L2 << VGPU_PM4_COPY_DATA_SRC_SEL__SHIFT |
	       VGPU_PM4_COPY_DATA_SEL_TC_L2 << VGPU_PM4_COPY_DATA_DST_SEL__SHIFT;
	p[2] = lower_32_bits(src);
	p[3] = upper_32_bits(src);
	p[4] = lower_32_bits(dst);
	p[5] = upper_32_bits(dst);
	return 6;
}

static unsigned int vt_partial_flush(u32 *p)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_EVENT_WRITE, 0);
	p[1] = VGPU_PM4_EVENT_CS_PARTIAL_FLUSH << VGPU_PM4_EVENT_TYPE__SHIFT |
	       VGPU_PM4_EVENT_INDEX_CS_PARTIAL_FLUSH << VGPU_PM4_EVENT_INDEX__SHIFT;
	return 2;
}

/* The GPU address of dword off of what the next vgpu_ring_put writes. */
static u64 vt_ring_at(struct vgpu_ring *r, u32 off)
{
	return r->bo->gpu + ((r->wpos + off) & (r->size - 1)) * 4;
}

static void vt_arg64(struct vgpu_bo *bo, u32 off, u64 v)
{
	vgpu_bo_wr(bo, off, lower_32_bits(v));
	vgpu_bo_wr(bo, off + 4, upper_32_bits(v));
}

/* The cases' frame: strict mode on, the copy_hold program, uncached buffers (the CPU sees the
 * shader's stores at once), a ring. */
struct vt_hz {
	struct vgpu_cp *cp;
	struct vgpu_ring *r;
	struct vgpu_bo *prog, *args, *in, *out, *copy;
};

static bool vt_hz_begin(struct vt_case *t, struct vt_hz *h, size_t out_bytes)
{
	memset(h, 0, sizeof(*h));
	h->cp = vgpu_cp_get(t);
	if (!h->cp)
		return false;
	h->prog = vgpu_bo_alloc(t, h->cp, VT_GPU_PAGE, false);
	if (h->prog) {
		memcpy(h->prog->cpu, vgpu_shader_copy_hold, sizeof(vgpu_shader_copy_hold));
		h->args = vgpu_bo_alloc(t, h->cp, VT_GPU_PAGE, false);
	}
	if (h->args)
		h->in = vgpu_bo_alloc(t, h->cp, VT_GPU_PAGE, false);
	if (h->in)
		h->out = vgpu_bo_alloc(t, h->cp, ALIGN(out_bytes, VT_GPU_PAGE), false);
	if (h->out)
		h->copy = vgpu_bo_alloc(t, h->cp, VT_GPU_PAGE, false);
	if (h->copy)
		h->r = vgpu_ring_create(t, h->cp, vt_compute_slot(h->cp, 1, 7), VT_RING_BYTES);
	if (h->r)
		vgpu_wr(t->vg, VGPU_REG_L2_CNTL, VGPU_REG_L2_CNTL__STRICT_MASK);
	return h->r;
}

static enum vt_res vt_hz_end(struct vt_case *t, struct vt_hz *h, enum vt_res res)
{
	if (!h->cp)
		return res;
	vgpu_wr(t->vg, VGPU_REG_L2_CNTL, 0);
	vgpu_ring_destroy(t, h->r);
	vgpu_bo_free(h->cp, h->copy);
	vgpu_bo_free(h->cp, h->out);
	vgpu_bo_free(h->cp, h->in);
	vgpu_bo_free(h->cp, h->args);
	vgpu_bo_free(h->cp, h->prog);
	return vt_cp_end(t, h->cp) == VT_PASS ? res : VT_FAIL;
}

static void vt_hz_args(struct vt_hz *h, u64 in, u32 hold_ms)
{
	vt_arg64(h->args, VGPU_SHADER_COPY_HOLD_ARG_IN, in);
	vt_arg64(h->args, VGPU_SHADER_COPY_HOLD_ARG_OUT, h->out->gpu);
	vt_arg64(h->args, VGPU_SHADER_COPY_HOLD_ARG_HOLD_MS, hold_ms);
}

/* Waits until the CPU sees out[n-1] == want (uncached: the shader's store itself). */
static int vt_hz_stored(struct vt_case *t, struct vt_hz *h, u32 n, u32 want)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);

	while (READ_ONCE(((u32 *)h->out->cpu)[n - 1]) != want) {
		if (time_after(jiffies, deadline))
			return vt_reason(t, -ETIMEDOUT, "out[%u] = %#x after %u ms, want %#x", n - 1,
					 READ_ONCE(((u32 *)h->out->cpu)[n - 1]), timeout_ms, want);
		usleep_range(50, 100);
	}
	return 0;
}

/*
 * A COPY_DATA of the dispatch's output while the dispatch is still in flight (it holds after
 * its stores) and nothing waited for it: SHADER_HAZARDS counts it and the last-hazard
 * registers name the slot, COPY_DATA, the bytes, the COPY_DATA packet and the DISPATCH packet.
 * With CS_PARTIAL_FLUSH before the copy: the right value and nothing named.
 */
enum vt_res t_shader_hazard(struct vt_case *t)
{
	static const char *const names[] = {
		"dispatch_stores", "hazard_counted", "kind_slot_opcode", "range", "parties",
		"flush_correct", "flush_silent",
	};
	struct vgpu *vg = t->vg;
	enum vt_res res = VT_PASS;
	u32 p[VT_SHADER_DW + 32], n, i, base, h0, h1, info, seq, size, pattern;
	u64 dispatch_at, copy_at, addr, by, writer;
	struct vt_hz h;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	if (!vt_hz_begin(t, &h, 4 * VT_HZ_ITEMS)) {
		if (!h.cp)
			return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		return vt_hz_end(t, &h, VT_FAIL);
	}
	pattern = vgpu_dma_pattern();
	for (i = 0; i < VT_HZ_ITEMS; i++)
		vgpu_bo_wr(h.in, 4 * i, pattern + i);
	vt_hz_args(&h, h.in->gpu, VT_HZ_HOLD_MS);
	h0 = vgpu_rd(vg, VGPU_REG_SHADER_HAZARDS);

	/* (a) The dispatch, then (once its stores are made) a copy of out[0] without a barrier. */
	ret = vgpu_ring_alloc(t, h.r, VT_SHADER_DW + 16);
	if (!ret) {
		n = pm4_acquire_mem(p, VT_ACQ_FULL);
		n += pm4_shader(p + n, h.prog->gpu, VGPU_SHADER_COPY_HOLD_SLOTS, VT_HZ_ITEMS, 1, 1, h.args->gpu);
		dispatch_at = vt_ring_at(h.r, n);
		n += pm4_dispatch_direct(p + n, 1, 1, 1);
		vgpu_ring_put(h.r, p, n);
		vgpu_ring_commit(h.r);
		vgpu_ring_kick(h.r);
		ret = vt_hz_stored(t, &h, VT_HZ_ITEMS, pattern + VT_HZ_ITEMS - 1);
	}
	vt_check(t, !ret, names[0], "%s", t->err);
	if (!ret)
		ret = vgpu_ring_alloc(t, h.r, 6 + VT_FENCE_DW);
	if (!ret) {
		copy_at = vt_ring_at(h.r, 0);
		vgpu_ring_put(h.r, p, vt_copy_data(p, h.out->gpu, h.copy->gpu));
		seq = vgpu_ring_fence(h.r, true); /* RELEASE_MEM: waits for the dispatch */
		vgpu_ring_commit(h.r);
		vgpu_ring_kick(h.r);
		ret = vgpu_fence_wait(t, h.r, seq);
	}
	h1 = vgpu_rd(vg, VGPU_REG_SHADER_HAZARDS);
	info = vgpu_rd(vg, VGPU_REG_SHADER_HAZARD_INFO);
	addr = vgpu_rd64(vg, VGPU_REG_SHADER_HAZARD_ADDR_LO, VGPU_REG_SHADER_HAZARD_ADDR_HI);
	size = vgpu_rd(vg, VGPU_REG_SHADER_HAZARD_SIZE);
	by = vgpu_rd64(vg, VGPU_REG_SHADER_HAZARD_BY_LO, VGPU_REG_SHADER_HAZARD_BY_HI);
	writer = vgpu_rd64(vg, VGPU_REG_SHADER_HAZARD_WRITER_LO, VGPU_REG_SHADER_HAZARD_WRITER_HI);
	vt_note(t, "slot %u: DISPATCH at %#llx, COPY_DATA at %#llx; SHADER_HAZARDS %u -> %u, INFO %#x", h.r->slot,
		ret ? 0 : dispatch_at, ret ? 0 : copy_at, h0, h1, info);
	vt_check(t, !ret && h1 == h0 + 1, names[1], "%s; SHADER_HAZARDS %u -> %u, want one more",
		 ret ? t->err : "ran", h0, h1);
	vt_check(t, !ret && FIELD_GET(VGPU_REG_SHADER_HAZARD_INFO__KIND_MASK, info) == VGPU_SHADER_HAZARD_PACKET_READ &&
		 FIELD_GET(VGPU_REG_SHADER_HAZARD_INFO__SLOT_MASK, info) == h.r->slot &&
		 FIELD_GET(VGPU_REG_SHADER_HAZARD_INFO__VMID_MASK, info) == 0 &&
		 FIELD_GET(VGPU_REG_SHADER_HAZARD_INFO__OPCODE_MASK, info) == VGPU_PM4_IT_COPY_DATA, names[2],
		 "HAZARD_INFO %#x: want PACKET_READ (%u), slot %u, VMID 0, COPY_DATA (%#x)", info,
		 (u32)VGPU_SHADER_HAZARD_PACKET_READ, h.r->slot, (u32)VGPU_PM4_IT_COPY_DATA);
	vt_check(t, !ret && addr == h.out->gpu && size == 4, names[3],
		 "HAZARD_ADDR %#llx + %u bytes, want out[0] at %#llx + 4", addr, size, h.out->gpu);
	vt_check(t, !ret && by == copy_at && writer == dispatch_at, names[4],
		 "HAZARD_BY %#llx, HAZARD_WRITER %#llx: want the COPY_DATA at %#llx and the DISPATCH at %#llx",
		 by, writer, ret ? 0 : copy_at, ret ? 0 : dispatch_at);

	/* (b) The same with CS_PARTIAL_FLUSH before the copy: correct, and nothing named. */
	memset(h.out->cpu, 0, 4 * VT_HZ_ITEMS);
	vgpu_bo_wr(h.copy, 0, 0);
	vt_hz_args(&h, h.in->gpu, 20);
	base = vgpu_rd(vg, VGPU_REG_SHADER_HAZARDS);
	n = pm4_acquire_mem(p, VT_ACQ_FULL);
	n += pm4_shader(p + n, h.prog->gpu, VGPU_SHADER_COPY_HOLD_SLOTS, VT_HZ_ITEMS, 1, 1, h.args->gpu);
	n += pm4_dispatch_direct(p + n, 1, 1, 1);
	n += vt_partial_flush(p + n);
	n += vt_copy_data(p + n, h.out->gpu, h.copy->gpu);
	ret = vgpu_submit_wait(t, h.r, p, n);
	vt_check(t, !ret && vgpu_bo_rd(h.copy, 0) == pattern, names[5], "%s; the copy holds %#x, want %#x",
		 ret ? t->err : "ran", vgpu_bo_rd(h.copy, 0), pattern);
	h1 = vgpu_rd(vg, VGPU_REG_SHADER_HAZARDS);
	vt_check(t, !ret && h1 == base, names[6], "SHADER_HAZARDS %u -> %u after a flushed copy", base, h1);
	if (ret)
		res = VT_FAIL;
	return vt_hz_end(t, &h, res);
}

/*
 * A dispatch whose every workgroup reads in[0..16) (one L0 line) fills every CU's L0; the CPU
 * then rewrites in[], and a second dispatch without GLV_INV reads the old values through the
 * L0s: SHADER_STALE_READS counts them, STALE_ADDR names in[]. After an ACQUIRE_MEM with
 * GLV_INV a third dispatch reads the new values and nothing is named.
 */
enum vt_res t_shader_l0_stale(struct vt_case *t)
{
	static const char *const names[] = {
		"first_dispatch", "stale_values_used", "stale_counted", "stale_named",
		"invalidated_fresh", "invalidated_silent",
	};
	struct vgpu *vg = t->vg;
	const u32 total = VT_L0_GROUPS * VT_L0_ITEMS;
	u32 p[VT_SHADER_DW + 16], n, i, s0, s1, s2, info, old, new, newer, got, want, stale, bad;
	enum vt_res res = VT_PASS;
	u64 in, addr;
	struct vt_hz h;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	if (!vt_hz_begin(t, &h, 4 * total)) {
		if (!h.cp)
			return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		return vt_hz_end(t, &h, VT_FAIL);
	}
	in = h.in->gpu + VT_L0_IN_OFF;
	old = vgpu_dma_pattern();
	new = old ^ 0x00F0F000;
	newer = old ^ 0x0F000F00;
	for (i = 0; i < VT_L0_ITEMS; i++)
		vgpu_bo_wr(h.in, VT_L0_IN_OFF + 4 * i, old + i);
	vt_hz_args(&h, in, 1);

	/* 1: fresh L0s, then every CU that takes a workgroup caches in[]. */
	n = pm4_acquire_mem(p, VT_ACQ_FULL);
	n += pm4_shader(p + n, h.prog->gpu, VGPU_SHADER_COPY_HOLD_SLOTS, VT_L0_ITEMS, 1, 1, h.args->gpu);
	n += pm4_dispatch_direct(p + n, VT_L0_GROUPS, 1, 1);
	ret = vgpu_submit_wait(t, h.r, p, n);
	for (i = 0, bad = 0; i < total && !ret; i++)
		bad += ((u32 *)h.out->cpu)[i] != old + i % VT_L0_ITEMS;
	vt_check(t, !ret && !bad, names[0], "%s; %u of %u outputs wrong", ret ? t->err : "ran", bad, total);

	/* 2: the CPU rewrites in[]; no invalidation before the next dispatch. */
	for (i = 0; i < VT_L0_ITEMS; i++)
		vgpu_bo_wr(h.in, VT_L0_IN_OFF + 4 * i, new + i);
	memset(h.out->cpu, 0, 4 * total);
	s0 = vgpu_rd(vg, VGPU_REG_SHADER_STALE_READS);
	n = pm4_shader(p, h.prog->gpu, VGPU_SHADER_COPY_HOLD_SLOTS, VT_L0_ITEMS, 1, 1, h.args->gpu);
	n += pm4_dispatch_direct(p + n, VT_L0_GROUPS, 1, 1);
	ret = ret ?: vgpu_submit_wait(t, h.r, p, n);
	for (i = 0, stale = 0, bad = 0; i < total && !ret; i++) {
		got = ((u32 *)h.out->cpu)[i];
		stale += got == old + i % VT_L0_ITEMS;
		bad += got != old + i % VT_L0_ITEMS && got != new + i % VT_L0_ITEMS;
	}
	s1 = vgpu_rd(vg, VGPU_REG_SHADER_STALE_READS);
	info = vgpu_rd(vg, VGPU_REG_SHADER_STALE_INFO);
	addr = vgpu_rd64(vg, VGPU_REG_SHADER_STALE_ADDR_LO, VGPU_REG_SHADER_STALE_ADDR_HI);
	vt_note(t, "without GLV_INV: %u of %u work-items read the old value; SHADER_STALE_READS %u -> %u, last at %#llx (slot %u)",
		stale, total, s0, s1, addr, (u32)FIELD_GET(VGPU_REG_SHADER_STALE_INFO__SLOT_MASK, info));
	vt_check(t, !ret && stale && !bad, names[1], "%s; %u old values, %u neither old nor new, of %u",
		 ret ? t->err : "ran", stale, bad, total);
	vt_check(t, !ret && s1 - s0 == stale, names[2], "SHADER_STALE_READS %u -> %u, want +%u (one per old value read)",
		 s0, s1, stale);
	vt_check(t, !ret && addr >= in && addr < in + 4 * VT_L0_ITEMS &&
		 FIELD_GET(VGPU_REG_SHADER_STALE_INFO__SLOT_MASK, info) == h.r->slot &&
		 FIELD_GET(VGPU_REG_SHADER_STALE_INFO__VMID_MASK, info) == 0, names[3],
		 "STALE_ADDR %#llx, STALE_INFO %#x: want in[] at %#llx.., slot %u, VMID 0", addr, info, in, h.r->slot);

	/* 3: rewritten again, and ACQUIRE_MEM GLV_INV first: fresh, silent. */
	for (i = 0; i < VT_L0_ITEMS; i++)
		vgpu_bo_wr(h.in, VT_L0_IN_OFF + 4 * i, newer + i);
	memset(h.out->cpu, 0, 4 * total);
	n = pm4_acquire_mem(p, VT_ACQ_FULL);
	n += pm4_shader(p + n, h.prog->gpu, VGPU_SHADER_COPY_HOLD_SLOTS, VT_L0_ITEMS, 1, 1, h.args->gpu);
	n += pm4_dispatch_direct(p + n, VT_L0_GROUPS, 1, 1);
	ret = ret ?: vgpu_submit_wait(t, h.r, p, n);
	for (i = 0, bad = 0, want = 0; i < total && !ret; i++) {
		if (((u32 *)h.out->cpu)[i] != newer + i % VT_L0_ITEMS && !bad++)
			want = i;
	}
	s2 = vgpu_rd(vg, VGPU_REG_SHADER_STALE_READS);
	vt_check(t, !ret && !bad, names[4], "%s; %u of %u outputs not the new value, the first out[%u] = %#x",
		 ret ? t->err : "ran", bad, total, want, ((u32 *)h.out->cpu)[want]);
	vt_check(t, !ret && s2 == s1, names[5], "SHADER_STALE_READS %u -> %u after GLV_INV", s1, s2);
	if (ret)
		res = VT_FAIL;
	return vt_hz_end(t, &h, res);
}

/* The fault handler's resolver: the lazy output page gets its backing page, once the case has
 * looked at what the other work-items did meanwhile. */
struct vt_rf {
	struct vgpu_bo *backing;
	u32 calls;
	bool gate_timeout;
	struct completion go;
};

static u64 vt_rf_resolve(struct vgpu_vm *vm, u64 va, bool write, void *arg)
{
	struct vt_rf *c = arg;

	smp_store_release(&c->calls, c->calls + 1);
	if (c->calls == 1 && !wait_for_completion_timeout(&c->go, msecs_to_jiffies(timeout_ms)))
		c->gate_timeout = true;
	if ((va & ~(u64)(VT_GPU_PAGE - 1)) != VT_RF_VA_OUT)
		return 0;
	return vt_vm_pte(c->backing->dma, true, VT_VM_RW);
}

/* Waits until out[0..n) in the mapped page hold in[] (the work-items that did not fault). */
static bool vt_rf_early_done(struct vgpu_bo *early, u32 n, u32 pattern)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	u32 i;

	for (;;) {
		for (i = 0; i < n; i++) {
			if (READ_ONCE(((u32 *)early->cpu)[(VT_GPU_PAGE - 4 * n) / 4 + i]) != pattern + i)
				break;
		}
		if (i == n)
			return true;
		if (time_after(jiffies, deadline))
			return false;
		usleep_range(50, 100);
	}
}

/*
 * A shader in VMID 11 (retry faults on) stores out[i] for 256 work-items (4 workgroups of 64);
 * out[0..32) is in a mapped page, the rest in a page no table maps. The faulting work-items
 * park; the driver holds the first fault until it has seen the first 32 results, made by the
 * other work-items of the same workgroup meanwhile. Then its fault handler maps the page,
 * invalidates and acknowledges the CAM entry, the stores replay, and the dispatch completes with
 * every result right.
 */
enum vt_res t_shader_retry_fault(struct vt_case *t)
{
	static const char *const names[] = {
		"fault_reaches_driver", "others_run_while_parked", "dispatch_completes", "results",
		"fault_handled", "no_halt",
	};
	struct vgpu *vg = t->vg;
	struct vgpu_bo *src = NULL, *early = NULL;
	struct vgpu_vm_job j = {};
	struct vgpu_vm_retry_stats st;
	struct vgpu_cp *cp;
	struct vt_rf c = {};
	u32 p[VT_SHADER_DW + 16], n, i, pattern, bad, first, retry0, state, seq = 0, got, want = 0;
	unsigned long deadline;
	bool others = false;
	u8 *code;
	u64 prog, args;
	int ret;

	init_completion(&c.go);
	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	vgpu_vm_latch_clear(vg);
	src = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	early = src ? vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false) : NULL;
	c.backing = early ? vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false) : NULL;
	ret = c.backing ? 0 : -ENOMEM;
	ret = ret ?: vgpu_vm_job_init(t, cp, &j, VT_RF_VMID, VT_RF_PASID, VT_VM_RETRY, vt_compute_slot(cp, 0, 7));
	ret = ret ?: vgpu_vm_map_bo(t, j.vm, VT_VA_DATA, src, VGPU_PTE_READABLE_MASK);
	ret = ret ?: vgpu_vm_map_bo(t, j.vm, VT_RF_VA_OUT - VT_GPU_PAGE, early, VT_VM_RW);
	if (ret) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	vgpu_vm_set_resolver(j.vm, vt_rf_resolve, &c);
	pattern = vgpu_dma_pattern();
	for (i = 0; i < 64; i++)
		vgpu_bo_wr(src, 4 * i, pattern + i);
	/* The program and its arguments in the job's code page (mapped executable). */
	code = (u8 *)j.code->cpu;
	memcpy(code + VT_RF_PROG_OFF, vgpu_shader_copy_hold, sizeof(vgpu_shader_copy_hold));
	prog = VT_VA_CODE + VT_RF_PROG_OFF;
	args = VT_VA_CODE + VT_RF_ARGS_OFF;
	vt_arg64(j.code, VT_RF_ARGS_OFF + VGPU_SHADER_COPY_HOLD_ARG_IN, VT_VA_DATA);
	vt_arg64(j.code, VT_RF_ARGS_OFF + VGPU_SHADER_COPY_HOLD_ARG_OUT, VT_RF_VA_OUT - 4 * VT_RF_EARLY);
	vt_arg64(j.code, VT_RF_ARGS_OFF + VGPU_SHADER_COPY_HOLD_ARG_HOLD_MS, 0);
	retry0 = vgpu_rd(vg, VGPU_REG_VM_RETRY_FAULTS);
	vt_note(t, "VMID %u: %u work-items store from %#llx on; only the first %u stores land in a mapped page; slot %u",
		VT_RF_VMID, VT_RF_ITEMS, VT_RF_VA_OUT - 4 * VT_RF_EARLY, VT_RF_EARLY, j.ring->slot);

	n = pm4_shader(p, prog, VGPU_SHADER_COPY_HOLD_SLOTS, 64, 1, 1, args);
	n += pm4_dispatch_direct(p + n, VT_RF_ITEMS / 64, 1, 1);
	ret = vgpu_vm_job_emit(t, &j, p, n, &seq);
	deadline = jiffies + msecs_to_jiffies(timeout_ms);
	while (!ret && !smp_load_acquire(&c.calls)) {
		if (time_after(jiffies, deadline))
			ret = vt_reason(t, -ETIMEDOUT, "no retry fault reached the driver in %u ms (RETRY_FAULTS %u)",
					timeout_ms, vgpu_rd(vg, VGPU_REG_VM_RETRY_FAULTS));
		usleep_range(50, 100);
	}
	vt_check(t, !ret, names[0], "%s", t->err);
	/* The fault is held: the work-items that did not fault finish their stores meanwhile. */
	if (!ret)
		others = vt_rf_early_done(early, VT_RF_EARLY, pattern);
	state = vgpu_hqd_state(vg, j.ring->slot);
	vt_check(t, !ret && others, names[1],
		 "%s; with the fault held, out[0..%u) %s (slot %u %s)", ret ? t->err : "fault held",
		 VT_RF_EARLY, others ? "done" : "not all written", j.ring->slot, vgpu_state_name(state));
	complete(&c.go);
	ret = ret ?: vgpu_fence_wait(t, j.ring, seq);
	state = vgpu_hqd_state(vg, j.ring->slot);
	vt_check(t, !ret && !c.gate_timeout, names[2], "%s", ret ? t->err : "the driver's hold timed out");
	for (i = 0, bad = 0, first = 0; i < VT_RF_ITEMS && !ret; i++) {
		got = i < VT_RF_EARLY ? vgpu_bo_rd(early, VT_GPU_PAGE - 4 * VT_RF_EARLY + 4 * i) :
					vgpu_bo_rd(c.backing, 4 * (i - VT_RF_EARLY));
		if (got != pattern + i % 64 && !bad++) {
			first = i;
			want = got;
		}
	}
	vt_check(t, !ret && !bad, names[3], "%u of %u results wrong, the first out[%u] = %#x (want %#x)", bad,
		 VT_RF_ITEMS, first, bad ? want : 0, pattern + first % 64);
	vgpu_vm_retry_get(j.vm, &st);
	vt_note(t, "%u retry-fault IVs handled, %u mapped the page (the other parked work-items replayed on it)",
		st.handled, st.resolved);
	vt_check(t, !ret && st.resolved >= 1 && vgpu_rd(vg, VGPU_REG_VM_RETRY_FAULTS) > retry0, names[4],
		 "the handler resolved %u faults (%u resolver calls, RETRY_FAULTS %u -> %u), want at least one",
		 st.resolved, READ_ONCE(c.calls), retry0, vgpu_rd(vg, VGPU_REG_VM_RETRY_FAULTS));
	vt_check(t, state != VGPU_HQD_STATE_HALTED, names[5], "slot %u is %s", j.ring->slot, vgpu_state_name(state));
out:
	complete(&c.go); /* the work item never waits on a case that has gone */
	vgpu_vm_job_fini(t, &j);
	vgpu_vm_latch_clear(vg);
	vgpu_bo_free(cp, c.backing);
	vgpu_bo_free(cp, early);
	vgpu_bo_free(cp, src);
	return vt_cp_end(t, cp);
}
