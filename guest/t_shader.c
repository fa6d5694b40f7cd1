// SPDX-License-Identifier: GPL-2.0
/*
 * Shaders on the compute units: the project's own shaders (include/vgpu_shaders.h, generated
 * from package shaders) dispatched from a kernel queue, every result checked; and a program
 * the device must refuse.
 */

#include <linux/bitfield.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/sizes.h>
#include <linux/string.h>

#include "cases.h"
#include "cp.h"
#include "vgpu_shaders.h"

#define VT_VADD_N		SZ_1M		/* vector_add elements (u32) */
#define VT_SUM_N		SZ_64K		/* atomic_sum elements */
#define VT_IDS_W		64		/* ids_2d grid: 64 x 32 in 8 x 4 workgroups */
#define VT_IDS_H		32

/* A GART buffer holding a program's bytes. */
static struct vgpu_bo *vt_program(struct vt_case *t, struct vgpu_cp *cp, const u8 *code, size_t len)
{
	struct vgpu_bo *bo = vgpu_bo_alloc(t, cp, ALIGN(len, VT_GPU_PAGE), false);

	if (bo)
		memcpy(bo->cpu, code, len);
	return bo;
}

/* Dispatches a shader (x groups of tx*ty threads by y) and waits for the fence after it. */
static int vt_dispatch(struct vt_case *t, struct vgpu_ring *r, struct vgpu_bo *prog, u32 slots,
		       u32 tx, u32 ty, u32 x, u32 y, u64 args)
{
	u32 p[VT_SHADER_DW + 16], n;

	n = pm4_acquire_mem(p, VT_ACQ_FULL); /* the CPU wrote the inputs */
	n += pm4_shader(p + n, prog->gpu, slots, tx, ty, 1, args);
	n += pm4_dispatch_direct(p + n, x, y, 1);
	return vgpu_submit_wait(t, r, p, n);
}

/* The case's common frame: the CP, a ring, the program; the buffers are the case's. */
struct vt_sh {
	struct vgpu_cp *cp;
	struct vgpu_ring *r;
	struct vgpu_bo *prog, *args;
};

static bool vt_sh_begin(struct vt_case *t, struct vt_sh *s, const u8 *code, size_t len, unsigned int pipe)
{
	memset(s, 0, sizeof(*s));
	s->cp = vgpu_cp_get(t);
	if (!s->cp)
		return false;
	s->prog = vt_program(t, s->cp, code, len);
	if (s->prog)
		s->args = vgpu_bo_alloc(t, s->cp, VT_GPU_PAGE, false);
	if (s->args)
		s->r = vgpu_ring_create(t, s->cp, vt_compute_slot(s->cp, pipe, 5), VT_RING_BYTES);
	return s->r;
}

static enum vt_res vt_sh_end(struct vt_case *t, struct vt_sh *s, enum vt_res res)
{
	if (!s->cp)
		return res;
	vgpu_ring_destroy(t, s->r);
	vgpu_bo_free(s->cp, s->args);
	vgpu_bo_free(s->cp, s->prog);
	return vt_cp_end(t, s->cp) == VT_PASS ? res : VT_FAIL;
}

static void vt_arg(struct vgpu_bo *args, u32 off, u64 v)
{
	vgpu_bo_wr(args, off, lower_32_bits(v));
	vgpu_bo_wr(args, off + 4, upper_32_bits(v));
}

/* vector_add over 1 Mi elements in 256-item workgroups: every output checked. */
enum vt_res t_shader_vector_add(struct vt_case *t)
{
	static const char *const names[] = { "dispatch", "results" };
	struct vgpu_bo *a = NULL, *b = NULL, *out = NULL;
	enum vt_res res = VT_PASS;
	struct vt_sh s;
	u32 i, bad = 0, first = 0;
	ktime_t t0;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	if (!vt_sh_begin(t, &s, vgpu_shader_vector_add, sizeof(vgpu_shader_vector_add), 0)) {
		if (!s.cp)
			return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		return vt_sh_end(t, &s, VT_FAIL);
	}
	a = vgpu_bo_alloc(t, s.cp, 4 * VT_VADD_N, true);
	if (a)
		b = vgpu_bo_alloc(t, s.cp, 4 * VT_VADD_N, true);
	if (b)
		out = vgpu_bo_alloc(t, s.cp, 4 * VT_VADD_N, true);
	if (!out) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		res = VT_FAIL;
		goto out;
	}
	for (i = 0; i < VT_VADD_N; i++) {
		((u32 *)a->cpu)[i] = 3 * i;
		((u32 *)b->cpu)[i] = 0x80000000U + i;
		((u32 *)out->cpu)[i] = 0xDEADBEEF;
	}
	vt_arg(s.args, VGPU_SHADER_VECTOR_ADD_ARG_A, a->gpu);
	vt_arg(s.args, VGPU_SHADER_VECTOR_ADD_ARG_B, b->gpu);
	vt_arg(s.args, VGPU_SHADER_VECTOR_ADD_ARG_OUT, out->gpu);
	t0 = ktime_get();
	ret = vt_dispatch(t, s.r, s.prog, VGPU_SHADER_VECTOR_ADD_SLOTS, 256, 1, VT_VADD_N / 256, 1, s.args->gpu);
	vt_check(t, !ret, names[0], "%s", t->err);
	vt_note(t, "%u work-items in %lld us (dispatch to fence, seen by the driver)", VT_VADD_N,
		ktime_us_delta(ktime_get(), t0));
	for (i = 0; i < VT_VADD_N && !ret; i++) {
		u32 want = 3 * i + 0x80000000U + i, got = ((u32 *)out->cpu)[i];

		if (got != want && !bad++)
			first = i;
	}
	vt_check(t, !ret && !bad, names[1], "%u of %u outputs wrong, the first out[%u] = %#x (want %#x)",
		 bad, VT_VADD_N, first, ((u32 *)out->cpu)[first], 3 * first + 0x80000000U + first);
out:
	vgpu_bo_free(s.cp, out);
	vgpu_bo_free(s.cp, b);
	vgpu_bo_free(s.cp, a);
	return vt_sh_end(t, &s, res);
}

/* atomic_sum: 64 Ki work-items add into one 64-bit sum, on every compute unit at once. */
enum vt_res t_shader_atomics(struct vt_case *t)
{
	static const char *const names[] = { "dispatch", "sum" };
	struct vgpu_bo *in = NULL, *sum = NULL;
	enum vt_res res = VT_PASS;
	u64 want = 0, got;
	struct vt_sh s;
	u32 i;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	if (!vt_sh_begin(t, &s, vgpu_shader_atomic_sum, sizeof(vgpu_shader_atomic_sum), 1)) {
		if (!s.cp)
			return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		return vt_sh_end(t, &s, VT_FAIL);
	}
	in = vgpu_bo_alloc(t, s.cp, 4 * VT_SUM_N, true);
	if (in)
		sum = vgpu_bo_alloc(t, s.cp, VT_GPU_PAGE, true);
	if (!sum) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		res = VT_FAIL;
		goto out;
	}
	for (i = 0; i < VT_SUM_N; i++) {
		((u32 *)in->cpu)[i] = 0xFFFF0000U + i; /* the sum needs all 64 bits */
		want += 0xFFFF0000U + i;
	}
	memset(sum->cpu, 0, 8);
	vt_arg(s.args, VGPU_SHADER_ATOMIC_SUM_ARG_IN, in->gpu);
	vt_arg(s.args, VGPU_SHADER_ATOMIC_SUM_ARG_SUM, sum->gpu);
	ret = vt_dispatch(t, s.r, s.prog, VGPU_SHADER_ATOMIC_SUM_SLOTS, 64, 1, VT_SUM_N / 64, 1, s.args->gpu);
	vt_check(t, !ret, names[0], "%s", t->err);
	got = (u64)vgpu_bo_rd(sum, 4) << 32 | vgpu_bo_rd(sum, 0);
	vt_check(t, !ret && got == want, names[1], "sum %#llx, want %#llx", got, want);
out:
	vgpu_bo_free(s.cp, sum);
	vgpu_bo_free(s.cp, in);
	return vt_sh_end(t, &s, res);
}

/* ids_2d: a 64 x 32 grid of 8 x 4 workgroups; every work-item's ids from the helpers. */
enum vt_res t_shader_ids_2d(struct vt_case *t)
{
	static const char *const names[] = { "dispatch", "ids" };
	enum vt_res res = VT_PASS;
	struct vgpu_bo *out = NULL;
	u32 x, y, bad = 0, fx = 0, fy = 0;
	struct vt_sh s;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	if (!vt_sh_begin(t, &s, vgpu_shader_ids_2d, sizeof(vgpu_shader_ids_2d), 0)) {
		if (!s.cp)
			return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		return vt_sh_end(t, &s, VT_FAIL);
	}
	out = vgpu_bo_alloc(t, s.cp, 4 * VT_IDS_W * VT_IDS_H, true);
	if (!out) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		res = VT_FAIL;
		goto out;
	}
	memset(out->cpu, 0xFF, 4 * VT_IDS_W * VT_IDS_H);
	vt_arg(s.args, VGPU_SHADER_IDS_2D_ARG_OUT, out->gpu);
	ret = vt_dispatch(t, s.r, s.prog, VGPU_SHADER_IDS_2D_SLOTS, 8, 4, VT_IDS_W / 8, VT_IDS_H / 4, s.args->gpu);
	vt_check(t, !ret, names[0], "%s", t->err);
	for (y = 0; y < VT_IDS_H && !ret; y++) {
		for (x = 0; x < VT_IDS_W; x++) {
			u32 want = x | y << 16 | (x / 8) << 24;

			if (((u32 *)out->cpu)[y * VT_IDS_W + x] != want && !bad++) {
				fx = x;
				fy = y;
			}
		}
	}
	vt_check(t, !ret && !bad, names[1], "%u work-items wrote the wrong ids, the first (%u,%u): %#x", bad,
		 fx, fy, ((u32 *)out->cpu)[fy * VT_IDS_W + fx]);
out:
	vgpu_bo_free(s.cp, out);
	return vt_sh_end(t, &s, res);
}

/* A program with packet access (LD_ABS) in slot 1: the queue halts with CP_ERROR_SHADER. */
enum vt_res t_shader_bad(struct vt_case *t)
{
	static const char *const names[] = { "halted", "error", "error_addr", "reason" };
	static const u8 code[] = {
		0xb7, 0x00, 0, 0, 0, 0, 0, 0,	/* mov r0, 0 */
		0x20, 0x00, 0, 0, 0, 0, 0, 0,	/* ld_abs w: not in the ISA */
		0x95, 0x00, 0, 0, 0, 0, 0, 0,	/* exit */
	};
	struct vgpu *vg = t->vg;
	u32 p[VT_SHADER_DW + 8], n, st, info;
	struct vt_sh s;
	bool ok;
	u64 addr;

	vt_sub_begin(t, ARRAY_SIZE(names));
	if (!vt_sh_begin(t, &s, code, sizeof(code), 1)) {
		if (!s.cp)
			return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		return vt_sh_end(t, &s, VT_FAIL);
	}
	n = pm4_shader(p, s.prog->gpu, sizeof(code) / 8, 1, 1, 1, s.args->gpu);
	n += pm4_dispatch_direct(p + n, 1, 1, 1);
	if (!vgpu_ring_alloc(t, s.r, n)) {
		vgpu_ring_put(s.r, p, n);
		vgpu_ring_commit(s.r);
		vgpu_ring_kick(s.r);
	}
	ok = vgpu_hqd_wait_state(vg, s.r->slot, VGPU_HQD_STATE_HALTED);
	st = vgpu_hqd_rd(vg, s.r->slot, VGPU_REG_HQD_STATUS);
	vt_check(t, ok, names[0], "slot %u is %s, want HALTED", s.r->slot,
		 vgpu_state_name(FIELD_GET(VGPU_REG_HQD_STATUS__STATE_MASK, st)));
	vt_check(t, FIELD_GET(VGPU_REG_HQD_STATUS__ERROR_MASK, st) == VGPU_CP_ERROR_SHADER, names[1],
		 "STATUS.ERROR %u, want CP_ERROR_SHADER (%u)", (u32)FIELD_GET(VGPU_REG_HQD_STATUS__ERROR_MASK, st),
		 (u32)VGPU_CP_ERROR_SHADER);
	addr = vgpu_rd64(vg, VGPU_HQD_REG(s.r->slot, VGPU_REG_HQD_ERROR_ADDR_LO),
			 VGPU_HQD_REG(s.r->slot, VGPU_REG_HQD_ERROR_ADDR_HI));
	vt_check(t, addr == s.prog->gpu + 8, names[2], "ERROR_ADDR %#llx, want %#llx (slot 1 of the program)",
		 addr, s.prog->gpu + 8);
	info = vgpu_hqd_rd(vg, s.r->slot, VGPU_REG_HQD_ERROR_INFO);
	vt_check(t, info == VGPU_SHADER_ERR_ILLEGAL_INSTRUCTION, names[3],
		 "ERROR_INFO %u, want SHADER_ERR_ILLEGAL_INSTRUCTION (%u)", info,
		 (u32)VGPU_SHADER_ERR_ILLEGAL_INSTRUCTION);
	return vt_sh_end(t, &s, VT_PASS);
}
