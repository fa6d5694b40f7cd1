// SPDX-License-Identifier: GPL-2.0
/*
 * The L2 cache model and DMA_DATA between system memory and VRAM.
 */

#include <linux/bitfield.h>
#include <linux/kernel.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "cases.h"
#include "cp.h"

#define VT_DMA_BYTES		SZ_64K
#define VT_DMA_VRAM_SPAN	(2 * SZ_64K + SZ_4K + 4)	/* VRAM the copies and fills use */
#define VT_CACHE_BYTES		(2 * VGPU_L2_LINE_BYTES)	/* two L2 lines */

/* Counts dwords of buf (n) that differ from pattern + i; the first goes into why. */
static unsigned int vt_pattern_check(const u32 *buf, unsigned int n, u32 pattern,
				     const char *what, char *why, size_t len)
{
	unsigned int i, bad = 0;

	for (i = 0; i < n; i++) {
		if (buf[i] != pattern + i && !bad++)
			snprintf(why, len, "%s: dword %u reads %#010x, want %#010x",
				 what, i, buf[i],
				 pattern + i);
	}
	return bad;
}

enum vt_res t_dma_data(struct vt_case *t)
{
	static const char *const names[] = {
		"fb_base", "sys_to_vram", "vram_to_sys", "fill_vram", "fill_sys",
		"no_l2_violations",
	};
	const u32 nd = VT_DMA_BYTES / 4;
	struct vgpu_bo *src = NULL, *dst = NULL;
	struct vgpu *vg = t->vg;
	struct vgpu_ring *r = NULL;
	u32 p[32], n, i, pattern, stale, dirty, g1, g2, *buf = NULL;
	u64 off, fb;
	char why[VT_WHY_LEN];
	enum vt_res res = VT_PASS;
	struct vgpu_cp *cp;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	fb = cp->fb_base;
	vt_check(t, fb == VGPU_GPU_FB_BASE, names[0], "GMC_FB_BASE %#llx, want %#llx", fb,
		 (u64)VGPU_GPU_FB_BASE);
	/*
	 * Three 64 KiB VRAM areas in the middle of BAR0: copy target, copy source, fill (and a
	 * guard dword after it). The device's smallest BAR0 (1 MiB) holds them; a BAR0 that
	 * does not would be a device bug, so it fails the case rather than skipping it.
	 */
	off = ALIGN_DOWN(vg->vram_len / 2, SZ_64K);
	if (off + VT_DMA_VRAM_SPAN <= vg->vram_len) {
		buf = kmalloc(VT_DMA_BYTES, GFP_KERNEL);
		if (!buf)
			vt_reason(t, -ENOMEM, "out of memory");
	} else {
		vt_reason(t, -ENOSPC, "BAR0 is %#llx bytes: no room for %#x bytes of VRAM at %#llx",
			  (u64)vg->vram_len, VT_DMA_VRAM_SPAN, off);
	}
	if (buf)
		src = vgpu_bo_alloc(t, cp, VT_DMA_BYTES, true);
	if (src)
		dst = vgpu_bo_alloc(t, cp, VT_DMA_BYTES, true);
	if (dst)
		r = vgpu_ring_create(t, cp, vt_compute_slot(cp, 0, 3), VT_RING_BYTES);
	if (!r) {
		vt_sub_fail_all(t, names + 1, ARRAY_SIZE(names) - 1);
		goto out;
	}
	vt_note(t,
		"VRAM at %#llx.. (GPU %#llx), system buffers at GPU %#llx and %#llx (MTYPE NC), L2 strict",
		off, fb + off, src->gpu, dst->gpu);
	stale = vgpu_rd(vg, VGPU_REG_L2_STALE_READS);
	dirty = vgpu_rd(vg, VGPU_REG_L2_DIRTY_FENCES);
	vgpu_wr(vg, VGPU_REG_L2_CNTL, VGPU_REG_L2_CNTL__STRICT_MASK);

	/* System -> VRAM through the L2: invalidate first (the CPU wrote the source). */
	pattern = vgpu_dma_pattern();
	for (i = 0; i < nd; i++)
		vgpu_bo_wr(src, 4 * i, pattern + i);
	memset_io(vg->vram + off, 0, VT_DMA_BYTES);
	iowrite32(0x6A6A6A6A, vg->vram + off + VT_DMA_BYTES);
	vgpu_hdp_flush(vg);
	n = pm4_acquire_mem(p, VT_ACQ_FULL);
	n += pm4_dma_data(p + n, VT_DMA_CTL_L2,
			  src->gpu, fb + off, VT_DMA_BYTES);
	ret = vgpu_submit_wait(t, r, p, n);
	vgpu_hdp_invalidate(vg);
	memcpy_fromio(buf, vg->vram + off, VT_DMA_BYTES);
	g1 = ioread32(vg->vram + off + VT_DMA_BYTES);
	why[0] = '\0';
	if (ret)
		snprintf(why, sizeof(why), "%s", t->err);
	else if (!vt_pattern_check(buf, nd, pattern, "VRAM via BAR0", why, sizeof(why)) &&
		 g1 != 0x6A6A6A6A)
		snprintf(why, sizeof(why), "the dword after the copy was written: %#010x", g1);
	vt_check(t, !why[0], names[1], "%s", why);

	/* VRAM -> system with BYPASS on both sides. */
	pattern = vgpu_dma_pattern();
	for (i = 0; i < nd; i++)
		buf[i] = pattern + i;
	memcpy_toio(vg->vram + off + SZ_64K, buf, VT_DMA_BYTES);
	vgpu_hdp_flush(vg);
	memset(dst->cpu, 0, VT_DMA_BYTES);
	n = pm4_dma_data(p, vt_dma_ctl(VGPU_PM4_DMA_DATA_SEL_ADDR, VGPU_PM4_CACHE_POLICY_BYPASS,
				       VGPU_PM4_DMA_DATA_SEL_ADDR, VGPU_PM4_CACHE_POLICY_BYPASS),
			 fb + off + SZ_64K, dst->gpu, VT_DMA_BYTES);
	ret = vgpu_submit_wait(t, r, p, n);
	for (i = 0; i < nd; i++)
		buf[i] = vgpu_bo_rd(dst, 4 * i);
	why[0] = '\0';
	if (ret)
		snprintf(why, sizeof(why), "%s", t->err);
	else
		vt_pattern_check(buf, nd, pattern, "system buffer", why, sizeof(why));
	vt_check(t, !why[0], names[2], "%s", why);

	/* Fill 4 KiB of VRAM through the L2, between two guard dwords. */
	memset_io(vg->vram + off + 2 * SZ_64K, 0, SZ_4K);
	iowrite32(0x6B6B6B6B, vg->vram + off + 2 * SZ_64K - 4);
	iowrite32(0x6C6C6C6C, vg->vram + off + 2 * SZ_64K + SZ_4K);
	vgpu_hdp_flush(vg);
	pattern = vgpu_dma_pattern();
	n = pm4_acquire_mem(p, VT_ACQ_FULL);
	n += pm4_dma_data(p + n,
			  vt_dma_ctl(VGPU_PM4_DMA_DATA_SEL_DATA, VGPU_PM4_CACHE_POLICY_LRU,
				     VGPU_PM4_DMA_DATA_SEL_ADDR_L2, VGPU_PM4_CACHE_POLICY_LRU),
			  pattern, fb + off + 2 * SZ_64K, SZ_4K);
	ret = vgpu_submit_wait(t, r, p, n);
	vgpu_hdp_invalidate(vg);
	memcpy_fromio(buf, vg->vram + off + 2 * SZ_64K, SZ_4K);
	g1 = ioread32(vg->vram + off + 2 * SZ_64K - 4);
	g2 = ioread32(vg->vram + off + 2 * SZ_64K + SZ_4K);
	why[0] = '\0';
	if (ret)
		snprintf(why, sizeof(why), "%s", t->err);
	for (i = 0; i < SZ_4K / 4 && !why[0]; i++) {
		if (buf[i] != pattern)
			snprintf(why, sizeof(why), "VRAM dword %u reads %#010x, want %#010x", i,
				 buf[i], pattern);
	}
	if (!why[0] && (g1 != 0x6B6B6B6B || g2 != 0x6C6C6C6C))
		snprintf(why, sizeof(why), "guard dwords around the fill: %#010x %#010x", g1, g2);
	vt_check(t, !why[0], names[3], "%s", why);

	/* Fill 4 KiB of a system buffer with BYPASS, the pages around it untouched. */
	memset(dst->cpu, 0, VT_DMA_BYTES);
	pattern = vgpu_dma_pattern();
	n = pm4_dma_data(p, vt_dma_ctl(VGPU_PM4_DMA_DATA_SEL_DATA, VGPU_PM4_CACHE_POLICY_LRU,
				       VGPU_PM4_DMA_DATA_SEL_ADDR, VGPU_PM4_CACHE_POLICY_BYPASS),
			 pattern, dst->gpu + SZ_4K, SZ_4K);
	ret = vgpu_submit_wait(t, r, p, n);
	why[0] = '\0';
	if (ret)
		snprintf(why, sizeof(why), "%s", t->err);
	for (i = 0; i < nd && !why[0]; i++) {
		u32 want = i >= SZ_4K / 4 && i < SZ_8K / 4 ? pattern : 0;

		if (vgpu_bo_rd(dst, 4 * i) != want)
			snprintf(why, sizeof(why), "system dword %u reads %#010x, want %#010x", i,
				 vgpu_bo_rd(dst, 4 * i), want);
	}
	vt_check(t, !why[0], names[4], "%s", why);

	stale = vgpu_rd(vg, VGPU_REG_L2_STALE_READS) - stale;
	dirty = vgpu_rd(vg, VGPU_REG_L2_DIRTY_FENCES) - dirty;
	vt_check(t, !stale && !dirty, names[5],
		 "strict mode counted %u stale reads and %u dirty fences (last event %#x at %#llx)",
		 stale, dirty, vgpu_rd(vg, VGPU_REG_L2_LAST_EVENT),
		 vgpu_rd64(vg, VGPU_REG_L2_LAST_ADDR_LO, VGPU_REG_L2_LAST_ADDR_HI));
	vgpu_wr(vg, VGPU_REG_L2_CNTL, 0);
	if (vgpu_l2_flush(t, cp))
		res = vt_fail(t, "the L2 flush after the case: %s", t->err);
out:
	vgpu_ring_destroy(t, r);
	vgpu_bo_free(cp, dst);
	vgpu_bo_free(cp, src);
	kfree(buf);
	return vt_cp_end(t, cp) == VT_PASS ? res : VT_FAIL;
}

/* Copies VT_CACHE_BYTES through the L2 (DMA_DATA, LRU), optionally invalidating first. */
static int vgpu_l2_copy(struct vt_case *t, struct vgpu_ring *r, u64 src, u64 dst, bool inv)
{
	u32 p[16], n = 0;

	if (inv)
		n = pm4_acquire_mem(p, VT_ACQ_FULL);
	n += pm4_dma_data(p + n, VT_DMA_CTL_L2,
			  src, dst, VT_CACHE_BYTES);
	return vgpu_submit_wait(t, r, p, n);
}

static void vt_fill(struct vgpu_bo *bo, u32 off, u32 pattern)
{
	unsigned int i;

	for (i = 0; i < VT_CACHE_BYTES / 4; i++)
		vgpu_bo_wr(bo, off + 4 * i, pattern + i);
}

/* Whether VT_CACHE_BYTES at off hold pattern + i. */
static bool vt_filled(struct vgpu_bo *bo, u32 off, u32 pattern)
{
	unsigned int i;

	for (i = 0; i < VT_CACHE_BYTES / 4; i++) {
		if (vgpu_bo_rd(bo, off + 4 * i) != pattern + i)
			return false;
	}
	return true;
}

/* Pages of the cache case's NC buffer. */
enum { VT_PG_A, VT_PG_B, VT_PG_A2, VT_PG_B2, VT_PG_C2, VT_PG_D, VT_PG_COUNT };

#define VT_PG(x)	((x) * VT_GPU_PAGE)

enum vt_res t_cache(struct vt_case *t)
{
	static const char *const names[] = {
		"inv_copy_correct", "inv_no_violations", "stale_data", "stale_counted",
		"stale_event", "inv_heals", "dirty_fence_counted", "dirty_fence_event",
		"dirty_data_in_l2", "writeback_publishes",
	};
	u32 p[16], stale, dirty, ev, s2, d2, seq, v, pa, old, new;
	struct vgpu *vg = t->vg;
	struct vgpu_ring *r = NULL;
	struct vgpu_bo *nc;
	enum vt_res res = VT_PASS;
	struct vgpu_cp *cp;
	u64 addr, a2;
	bool ok, pre;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	nc = vgpu_bo_alloc(t, cp, VT_PG_COUNT * VT_GPU_PAGE, true);
	if (nc)
		r = vgpu_ring_create(t, cp, vt_compute_slot(cp, 1, 3), VT_RING_BYTES);
	if (!r) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	vgpu_wr(vg, VGPU_REG_L2_CNTL, VGPU_REG_L2_CNTL__STRICT_MASK);
	vt_note(t, "NC buffer at GPU %#llx, slot %u, L2 strict", nc->gpu, r->slot);

	/* (a) The right way: invalidate, copy, fence with write-back. */
	pa = vgpu_dma_pattern();
	vt_fill(nc, VT_PG(VT_PG_A), pa);
	stale = vgpu_rd(vg, VGPU_REG_L2_STALE_READS);
	dirty = vgpu_rd(vg, VGPU_REG_L2_DIRTY_FENCES);
	ret = vgpu_l2_copy(t, r, nc->gpu + VT_PG(VT_PG_A), nc->gpu + VT_PG(VT_PG_B), true);
	vt_check(t, !ret && vt_filled(nc, VT_PG(VT_PG_B), pa), names[0], "%s",
		 ret ? t->err : "the copy does not hold the CPU's data");
	s2 = vgpu_rd(vg, VGPU_REG_L2_STALE_READS);
	d2 = vgpu_rd(vg, VGPU_REG_L2_DIRTY_FENCES);
	vt_check(t, s2 == stale && d2 == dirty, names[1],
		 "L2_STALE_READS %u -> %u, L2_DIRTY_FENCES %u -> %u for a correct sequence",
		 stale, s2, dirty, d2);

	/* (b) The wrong way: the GPU caches A2, the CPU changes it, the GPU reads it again. */
	old = vgpu_dma_pattern();
	new = old ^ 0x0f0f0000;
	a2 = nc->gpu + VT_PG(VT_PG_A2);
	vt_fill(nc, VT_PG(VT_PG_A2), old);
	ret = vgpu_l2_copy(t, r, a2, nc->gpu + VT_PG(VT_PG_B2), true);
	pre = !ret && vt_filled(nc, VT_PG(VT_PG_B2), old);
	if (!ret && !pre)
		vt_reason(t, -EIO, "the first copy of A2 does not hold the CPU's data");
	vt_fill(nc, VT_PG(VT_PG_A2), new);
	stale = vgpu_rd(vg, VGPU_REG_L2_STALE_READS);
	if (pre)
		ret = vgpu_l2_copy(t, r, a2, nc->gpu + VT_PG(VT_PG_C2), false);
	ok = pre && !ret && vt_filled(nc, VT_PG(VT_PG_C2), old);
	vt_check(t, ok, names[2], "%s", !pre || ret ? t->err :
		 vt_filled(nc, VT_PG(VT_PG_C2), new) ?
		 "the copy without invalidation shows the new data: the L2 did not keep the line" :
		 "the copy without invalidation holds neither the old nor the new data");
	s2 = vgpu_rd(vg, VGPU_REG_L2_STALE_READS);
	vt_check(t, pre && s2 > stale, names[3], "L2_STALE_READS %u -> %u, want it to go up",
		 stale, s2);
	ev = vgpu_rd(vg, VGPU_REG_L2_LAST_EVENT);
	addr = vgpu_rd64(vg, VGPU_REG_L2_LAST_ADDR_LO, VGPU_REG_L2_LAST_ADDR_HI);
	ok = FIELD_GET(VGPU_REG_L2_LAST_EVENT__KIND_MASK, ev) == VGPU_L2_EVENT_STALE_READ &&
	     FIELD_GET(VGPU_REG_L2_LAST_EVENT__SLOT_MASK, ev) == r->slot &&
	     addr >= a2 && addr < a2 + VT_CACHE_BYTES;
	vt_check(t, pre && ok, names[4],
		 "L2_LAST_EVENT %#x (kind %u, slot %u) at %#llx, want STALE_READ (%u) by slot %u in %#llx..%#llx",
		 ev, (u32)FIELD_GET(VGPU_REG_L2_LAST_EVENT__KIND_MASK, ev),
		 (u32)FIELD_GET(VGPU_REG_L2_LAST_EVENT__SLOT_MASK, ev), addr,
		 (u32)VGPU_L2_EVENT_STALE_READ, r->slot, a2, a2 + VT_CACHE_BYTES - 1);
	ret = vgpu_l2_copy(t, r, a2, nc->gpu + VT_PG(VT_PG_C2), true);
	v = vgpu_rd(vg, VGPU_REG_L2_STALE_READS);
	ok = !ret && vt_filled(nc, VT_PG(VT_PG_C2), new) && v == s2;
	vt_check(t, ok, names[5], "%s (L2_STALE_READS %u -> %u)",
		 ret ? t->err : "after ACQUIRE_MEM GL2_INV the copy must show the new data", s2, v);

	/* (c) A fence without write-back after a cached write. */
	dirty = vgpu_rd(vg, VGPU_REG_L2_DIRTY_FENCES);
	ret = vgpu_ring_alloc(t, r, 5 + VT_FENCE_DW);
	if (!ret) {
		vgpu_ring_put(r, p, pm4_write_one(p, VGPU_PM4_WRITE_DATA_DST_TC_L2,
						  VGPU_PM4_CACHE_POLICY_LRU,
						  nc->gpu + VT_PG(VT_PG_D), 0x0D1D1D1D));
		seq = vgpu_ring_fence_gcr(r, 0, true);
		vgpu_ring_commit(r);
		vgpu_ring_kick(r);
		ret = vgpu_fence_wait(t, r, seq);
	}
	d2 = vgpu_rd(vg, VGPU_REG_L2_DIRTY_FENCES);
	vt_check(t, !ret && d2 > dirty, names[6], "%s: L2_DIRTY_FENCES %u -> %u, want it to go up",
		 ret ? t->err : "fence reached", dirty, d2);
	ev = vgpu_rd(vg, VGPU_REG_L2_LAST_EVENT);
	ok = FIELD_GET(VGPU_REG_L2_LAST_EVENT__KIND_MASK, ev) == VGPU_L2_EVENT_DIRTY_FENCE &&
	     FIELD_GET(VGPU_REG_L2_LAST_EVENT__SLOT_MASK, ev) == r->slot;
	vt_check(t, !ret && ok, names[7],
		 "L2_LAST_EVENT %#x (kind %u, slot %u), want DIRTY_FENCE (%u) by slot %u", ev,
		 (u32)FIELD_GET(VGPU_REG_L2_LAST_EVENT__KIND_MASK, ev),
		 (u32)FIELD_GET(VGPU_REG_L2_LAST_EVENT__SLOT_MASK, ev),
		 (u32)VGPU_L2_EVENT_DIRTY_FENCE, r->slot);
	v = vgpu_bo_rd(nc, VT_PG(VT_PG_D));
	vt_check(t, !ret && !v, names[8],
		 "memory reads %#010x after a fence without GL2_WB, want 0 (the write only in L2)",
		 v);
	ret = vgpu_submit_wait(t, r, p, 0);
	v = vgpu_bo_rd(nc, VT_PG(VT_PG_D));
	vt_check(t, !ret && v == 0x0D1D1D1D, names[9], "%s: memory reads %#010x, want 0x0d1d1d1d",
		 ret ? t->err : "a fence with GL2_WB", v);

	vgpu_wr(vg, VGPU_REG_L2_CNTL, 0);
	if (vgpu_l2_flush(t, cp))
		res = vt_fail(t, "the L2 flush after the case: %s", t->err);
out:
	vgpu_ring_destroy(t, r);
	vgpu_bo_free(cp, nc);
	return vt_cp_end(t, cp) == VT_PASS ? res : VT_FAIL;
}
