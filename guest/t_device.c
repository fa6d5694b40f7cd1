// SPDX-License-Identifier: GPL-2.0
/*
 * Cases of the PCI function itself: identity, scratch registers, MSI-X, self-test DMA,
 * the VRAM window and FLR.
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/minmax.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/wait.h>

#include "cases.h"
#include "vgpu.h"

#define VT_MIN_VECTORS		16
#define VT_VRAM_PAGE		SZ_4K
#define VT_VRAM_FULL		SZ_64K	/* covered completely at each end of BAR0 */
#define VT_VRAM_BUDGET_MS	60000
#define VT_BAD_VECTOR		0xffff
#define VT_SCRATCH_REGS		(VGPU_BLOCK_SCRATCH_SIZE / 4)	/* SCRATCH_0..7 */

static void vgpu_snapshot(struct vgpu *vg, int *base)
{
	unsigned int i;

	for (i = 0; i < vg->nvec; i++)
		base[i] = atomic_read(&vg->vecs[i].count);
}

static int vgpu_hits(struct vgpu *vg, const int *base, unsigned int k)
{
	return atomic_read(&vg->vecs[k].count) - base[k];
}

enum vt_res t_probe_identity(struct vt_case *t)
{
	struct vgpu *vg = t->vg;
	struct pci_dev *pdev = vg->pdev;
	u32 magic = vgpu_rd(vg, VGPU_REG_ID_MAGIC);
	u32 version = vgpu_rd(vg, VGPU_REG_ID_VERSION);
	u32 major = FIELD_GET(VGPU_REG_ID_VERSION__MAJOR_MASK, version);
	u32 minor = FIELD_GET(VGPU_REG_ID_VERSION__MINOR_MASK, version);
	u64 vram = (u64)vgpu_rd(vg, VGPU_REG_ID_VRAM_SIZE_HI) << 32 |
		   vgpu_rd(vg, VGPU_REG_ID_VRAM_SIZE_LO);
	u64 window = (u64)vgpu_rd(vg, VGPU_REG_ID_VRAM_WINDOW_HI) << 32 |
		     vgpu_rd(vg, VGPU_REG_ID_VRAM_WINDOW_LO);
	u32 mode = vgpu_rd(vg, VGPU_REG_ID_DOORBELL_MODE);
	u32 vectors = vgpu_rd(vg, VGPU_REG_ID_MSIX_VECTORS);
	u32 doorbells = vgpu_rd(vg, VGPU_REG_ID_DOORBELL_COUNT);
	int cap_vectors = pci_msix_vec_count(pdev);
	u64 bar0 = pci_resource_len(pdev, VGPU_BAR_VRAM);
	u64 bar2 = pci_resource_len(pdev, VGPU_BAR_DOORBELL);
	u64 bar5 = pci_resource_len(pdev, VGPU_BAR_REGS);
	unsigned long f0 = pci_resource_flags(pdev, VGPU_BAR_VRAM);
	unsigned long f2 = pci_resource_flags(pdev, VGPU_BAR_DOORBELL);
	unsigned long f5 = pci_resource_flags(pdev, VGPU_BAR_REGS);
	bool types;

	vt_sub_begin(t, 9);
	vt_note(t, "ID: magic %#010x version %u.%u vram %#llx window %#llx",
		magic, major, minor, vram, window);
	vt_note(t, "ID: msix_vectors %u doorbells %u doorbell_mode %u",
		vectors, doorbells, mode);
	vt_note(t, "BAR0 %pR, BAR2 %pR, BAR5 %pR, MSI-X capability: %d vectors",
		&pdev->resource[VGPU_BAR_VRAM], &pdev->resource[VGPU_BAR_DOORBELL],
		&pdev->resource[VGPU_BAR_REGS], cap_vectors);

	vt_check(t, magic == VGPU_ID_MAGIC_VALUE, "magic", "ID_MAGIC=%#010x, want %#010x",
		 magic, (u32)VGPU_ID_MAGIC_VALUE);
	vt_check(t, major == VGPU_ID_VERSION_MAJOR, "version", "ID_VERSION=%u.%u, want major %u",
		 major, minor, (u32)VGPU_ID_VERSION_MAJOR);
	vt_check(t, window == bar0, "vram_window",
		 "ID_VRAM_WINDOW=%#llx but BAR0 is %#llx bytes", window, bar0);
	vt_check(t, vram != 0 && vram >= window, "vram_size",
		 "ID_VRAM_SIZE=%#llx is smaller than the window %#llx", vram, window);
	vt_check(t, vectors >= VT_MIN_VECTORS && cap_vectors >= 0 && vectors == (u32)cap_vectors,
		 "msix_vectors",
		 "ID_MSIX_VECTORS=%u, MSI-X capability has %d; want equal and at least %d",
		 vectors, cap_vectors, VT_MIN_VECTORS);
	vt_check(t, (u64)doorbells * VGPU_DOORBELL_STRIDE == bar2, "doorbells",
		 "ID_DOORBELL_COUNT=%u (%#llx bytes) but BAR2 is %#llx bytes",
		 doorbells, (u64)doorbells * VGPU_DOORBELL_STRIDE, bar2);
	vt_check(t, mode == VGPU_DOORBELL_MODE_TRAP || mode == VGPU_DOORBELL_MODE_POLL,
		 "doorbell_mode", "ID_DOORBELL_MODE=%u is neither TRAP nor POLL", mode);
	vt_check(t, bar5 == VGPU_REGS_SIZE, "regs_bar", "BAR5 is %#llx bytes, want %#llx",
		 bar5, (u64)VGPU_REGS_SIZE);
	types = (f0 & IORESOURCE_MEM) && (f0 & IORESOURCE_MEM_64) && (f0 & IORESOURCE_PREFETCH) &&
		(f2 & IORESOURCE_MEM) && (f2 & IORESOURCE_MEM_64) &&
		(f5 & IORESOURCE_MEM) && !(f5 & IORESOURCE_MEM_64) && !(f5 & IORESOURCE_PREFETCH);
	vt_check(t, types, "bar_types",
		 "flags BAR0 %#lx (want 64-bit prefetchable), BAR2 %#lx (want 64-bit), BAR5 %#lx (want 32-bit)",
		 f0, f2, f5);
	return VT_PASS;
}

enum vt_res t_scratch(struct vt_case *t)
{
	struct vgpu *vg = t->vg;
	u32 seed = get_random_u32();
	u32 want[VT_SCRATCH_REGS], got;
	unsigned int pass, i, bad = 0;
	enum vt_res res = VT_PASS;

	/* Random, inverted, then zero; all eight written before any is read back (aliasing). */
	for (pass = 0; pass < 3; pass++) {
		for (i = 0; i < ARRAY_SIZE(want); i++) {
			u32 p = seed + i * 0x11111111;

			want[i] = pass == 0 ? p : pass == 1 ? ~p : 0;
			vgpu_wr(vg, VGPU_REG_SCRATCH_0 + 4 * i, want[i]);
		}
		for (i = 0; i < ARRAY_SIZE(want); i++) {
			got = vgpu_rd(vg, VGPU_REG_SCRATCH_0 + 4 * i);
			if (got == want[i])
				continue;
			if (++bad <= 4)
				vt_note(t, "pass %u: SCRATCH_%u reads %#010x, wrote %#010x",
					pass, i, got, want[i]);
			res = vt_fail(t, "SCRATCH_%u reads %#010x, wrote %#010x (pass %u)",
				      i, got, want[i], pass);
		}
	}
	return res;
}

enum vt_res t_msix(struct vt_case *t)
{
	struct vgpu *vg = t->vg;
	unsigned int n = vg->nvec, k, j;
	char name[24];
	u32 errs0, errs1;
	int *base, hits;
	bool ok;

	base = kcalloc(n, sizeof(*base), GFP_KERNEL);
	if (!base)
		return vt_fail(t, "out of memory");

	vt_sub_begin(t, n + 3);
	errs0 = vgpu_rd(vg, VGPU_REG_SELFTEST_IRQ_ERRORS);
	vgpu_snapshot(vg, base);

	for (k = 0; k < n; k++) {
		snprintf(name, sizeof(name), "vector_%u", k);
		vgpu_wr(vg, VGPU_REG_SELFTEST_IRQ, k);
		if (!wait_event_timeout(vg->wq, vgpu_hits(vg, base, k) != 0,
					msecs_to_jiffies(timeout_ms))) {
			vt_check(t, false, name, "no interrupt within %u ms", timeout_ms);
			continue;
		}
		hits = vgpu_hits(vg, base, k);
		if (hits != 1) {
			vt_check(t, false, name, "%d interrupts, want 1", hits);
			continue;
		}
		/* Vectors before k fired once each; those after k not yet. */
		for (j = 0; j < n; j++) {
			hits = vgpu_hits(vg, base, j);
			if (j != k && (j < k ? hits > 1 : hits != 0))
				break;
		}
		vt_check(t, j == n, name, "stray interrupt: vector %u counted %d while raising %u",
			 j, j < n ? vgpu_hits(vg, base, j) : 0, k);
	}

	/* Let a late duplicate arrive before the final count. */
	msleep(VT_SETTLE_MS);
	for (k = 0; k < n && vgpu_hits(vg, base, k) == 1; k++)
		;
	vt_check(t, k == n, "all_once", "vector %u counted %d interrupts, want exactly 1",
		 k, k < n ? vgpu_hits(vg, base, k) : 0);

	errs1 = vgpu_rd(vg, VGPU_REG_SELFTEST_IRQ_ERRORS);
	vt_note(t, "SELFTEST_IRQ_ERRORS %u before, %u after", errs0, errs1);
	vt_check(t, errs1 == errs0, "irq_errors_zero",
		 "SELFTEST_IRQ_ERRORS went %u -> %u for in-range vectors", errs0, errs1);

	/* Vectors the device does not have: counted as errors, nothing raised. */
	vgpu_snapshot(vg, base);
	errs0 = vgpu_rd(vg, VGPU_REG_SELFTEST_IRQ_ERRORS);
	vgpu_wr(vg, VGPU_REG_SELFTEST_IRQ, n);
	vgpu_wr(vg, VGPU_REG_SELFTEST_IRQ, VT_BAD_VECTOR);
	msleep(VT_SETTLE_MS);
	errs1 = vgpu_rd(vg, VGPU_REG_SELFTEST_IRQ_ERRORS);
	for (k = 0; k < n && vgpu_hits(vg, base, k) == 0; k++)
		;
	ok = errs1 - errs0 == 2 && k == n;
	vt_check(t, ok, "out_of_range",
		 "vectors %u and %#x: SELFTEST_IRQ_ERRORS went %u -> %u (want +2), vector %d fired",
		 n, VT_BAD_VECTOR, errs0, errs1, k < n ? (int)k : -1);

	kfree(base);
	return VT_PASS;
}

enum vt_res t_dma(struct vt_case *t)
{
	struct vgpu *vg = t->vg;
	struct pci_dev *pdev = vg->pdev;
	int last = vg->nvec - 1;
	char why[VT_WHY_LEN];
	bool ok;

	vt_sub_begin(t, 5);
	vt_note(t, "buffers: %u bytes at %pad (transfer %u), %u bytes at %pad",
		VT_DMA_BIG, &vg->big_dma, VT_DMA_BIG_LEN, VT_DMA_SMALL, &vg->small_dma);

	why[0] = '\0';
	ok = vgpu_dma_check(vg, vg->big, vg->big_dma, VT_DMA_BIG, VT_DMA_BIG_LEN, 0,
			    why, sizeof(why));
	vt_check(t, ok, "dma_64k", "%s", why);

	why[0] = '\0';
	ok = vgpu_dma_check(vg, vg->small, vg->small_dma, VT_DMA_SMALL, VT_DMA_SMALL, last,
			    why, sizeof(why));
	vt_check(t, ok, "dma_4k", "%s", why);

	/*
	 * Bus Master off: the device must refuse and write nothing. Polled, not interrupt
	 * driven: with Bus Master off an MSI-X message is a memory write too.
	 */
	pci_clear_master(pdev);
	why[0] = '\0';
	ok = vgpu_dma_refused(vg, VT_DMA_SMALL, VGPU_SELFTEST_DMA_STATUS_ERR_BUS_MASTER,
			      why, sizeof(why));
	pci_set_master(pdev);
	vt_check(t, ok, "bus_master_off", "%s", why);

	why[0] = '\0';
	ok = vgpu_dma_check(vg, vg->small, vg->small_dma, VT_DMA_SMALL, VT_DMA_SMALL, 0,
			    why, sizeof(why));
	vt_check(t, ok, "bus_master_on", "%s", why);

	why[0] = '\0';
	ok = vgpu_dma_refused(vg, 6, VGPU_SELFTEST_DMA_STATUS_ERR_LENGTH, why, sizeof(why));
	vt_check(t, ok, "bad_length", "%s", why);

	return VT_PASS;
}

/* The value of the VRAM dword at off: distinct for every offset below 4 GiB, and per run. */
static u32 vgpu_vram_val(u32 seed, u64 off)
{
	return ((u32)off * 0x9e3779b1u) ^ (u32)(off >> 32) ^ seed;
}

struct vgpu_vram_walk {
	u32 seed;
	u64 full_lo, full_hi;	/* pages below full_lo and from full_hi on are covered fully */
	unsigned int bad;
	u32 *buf;		/* one page */
};

static void vgpu_vram_cmp(struct vt_case *t, struct vgpu_vram_walk *w, u64 off, u32 got)
{
	u32 want = vgpu_vram_val(w->seed, off);

	if (got == want)
		return;
	if (++w->bad <= 4)
		vt_note(t, "VRAM %#llx reads %#010x, wrote %#010x", off, got, want);
	vt_fail(t, "VRAM %#llx reads %#010x, wrote %#010x", off, got, want);
}

/* Writes (phase 0) or checks (phase 1) the VRAM page at off. */
static void vgpu_vram_page(struct vt_case *t, struct vgpu_vram_walk *w, u64 off, int phase)
{
	void __iomem *vram = t->vg->vram;
	u64 last = off + VT_VRAM_PAGE - 4;
	unsigned int i;

	if (off >= w->full_lo && off < w->full_hi) {
		/* Sparse: the first and the last dword of the page. */
		if (phase == 0) {
			iowrite32(vgpu_vram_val(w->seed, off), vram + off);
			iowrite32(vgpu_vram_val(w->seed, last), vram + last);
		} else {
			vgpu_vram_cmp(t, w, off, ioread32(vram + off));
			vgpu_vram_cmp(t, w, last, ioread32(vram + last));
		}
		return;
	}
	if (phase == 0) {
		for (i = 0; i < VT_VRAM_PAGE / 4; i++)
			w->buf[i] = vgpu_vram_val(w->seed, off + 4 * i);
		memcpy_toio(vram + off, w->buf, VT_VRAM_PAGE);
	} else {
		memcpy_fromio(w->buf, vram + off, VT_VRAM_PAGE);
		for (i = 0; i < VT_VRAM_PAGE / 4; i++)
			vgpu_vram_cmp(t, w, off + 4 * i, w->buf[i]);
	}
}

enum vt_res t_vram(struct vt_case *t)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(VT_VRAM_BUDGET_MS);
	u64 len = t->vg->vram_len, off, pages = 0;
	struct vgpu_vram_walk w = { .seed = get_random_u32() };
	int phase;

	if (len < VT_VRAM_PAGE || len % VT_VRAM_PAGE)
		return vt_fail(t, "BAR0 length %#llx is not a whole number of 4 KiB pages", len);
	w.buf = kmalloc(VT_VRAM_PAGE, GFP_KERNEL);
	if (!w.buf)
		return vt_fail(t, "out of memory");
	w.full_lo = min_t(u64, len, VT_VRAM_FULL);
	w.full_hi = max_t(u64, len - min_t(u64, len, VT_VRAM_FULL), w.full_lo);
	vt_note(t, "BAR0 %#llx bytes: first and last %#llx fully, 2 dwords per 4 KiB page between",
		len, w.full_lo);

	/*
	 * Phase 0 writes the whole window, phase 1 reads it all back: a window that aliases or
	 * wraps shows up as a later write overwriting an earlier one.
	 */
	for (phase = 0; phase < 2; phase++) {
		for (off = 0; off < len; off += VT_VRAM_PAGE) {
			vgpu_vram_page(t, &w, off, phase);
			if (++pages % 256)
				continue;
			cond_resched();
			if (time_after(jiffies, deadline)) {
				vt_fail(t, "gave up after %u ms at %#llx of %#llx (phase %d)",
					VT_VRAM_BUDGET_MS, off, len, phase);
				goto out;
			}
		}
		/* Drain the write-combining buffers before reading back. */
		wmb();
	}
	if (w.bad)
		vt_note(t, "%u VRAM dwords wrong", w.bad);
out:
	kfree(w.buf);
	return t->why[0] ? VT_FAIL : VT_PASS;
}

enum vt_res t_reset_flr(struct vt_case *t)
{
	static const char *const names[] = {
		"flr_capable", "flr", "scratch_cleared", "selftest_cleared", "vram_survives",
		"dma_after_flr", "irq_after_flr",
	};
	struct vgpu *vg = t->vg;
	struct pci_dev *pdev = vg->pdev;
	u32 devcap = 0, magic, mark = get_random_u32() | 1, got;
	u32 st, count, errs, addr_lo, addr_hi, len, pattern;
	unsigned int i, bad = 0, first = 0;
	char why[VT_WHY_LEN];
	bool ok;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	pcie_capability_read_dword(pdev, PCI_EXP_DEVCAP, &devcap);
	ok = pci_is_pcie(pdev) && (devcap & PCI_EXP_DEVCAP_FLR);
	if (!vt_check(t, ok, names[0], "DevCap %#010x does not advertise FLR (PCIe: %d)",
		      devcap, pci_is_pcie(pdev))) {
		vt_sub_skip(t, names + 1, ARRAY_SIZE(names) - 1, "FLR not advertised");
		return VT_PASS;
	}

	/* State the reset must clear, and a VRAM dword it must keep. */
	for (i = 0; i < VT_SCRATCH_REGS; i++)
		vgpu_wr(vg, VGPU_REG_SCRATCH_0 + 4 * i, 0xf1a00000 | i);
	vgpu_wr(vg, VGPU_REG_SELFTEST_DMA_ADDR_LO, 0x1000);
	vgpu_wr(vg, VGPU_REG_SELFTEST_DMA_ADDR_HI, 0x1);
	vgpu_wr(vg, VGPU_REG_SELFTEST_DMA_LEN, 0x40);
	vgpu_wr(vg, VGPU_REG_SELFTEST_DMA_PATTERN, 0x5a5a5a5a);
	iowrite32(mark, vg->vram);
	/* Out of the write-combining buffer before the reset. */
	wmb();

	/*
	 * What a driver's reset path does. Not pci_reset_function(): it takes the device lock,
	 * which the driver core already holds around probe.
	 */
	pci_save_state(pdev);
	ret = pcie_flr(pdev);
	pci_restore_state(pdev);
	magic = vgpu_rd(vg, VGPU_REG_ID_MAGIC);
	if (!vt_check(t, !ret && magic == VGPU_ID_MAGIC_VALUE, names[1],
		      "pcie_flr() = %d, ID_MAGIC reads %#010x after pci_restore_state()",
		      ret, magic)) {
		vt_sub_skip(t, names + 2, ARRAY_SIZE(names) - 2, "device not back after FLR");
		return VT_PASS;
	}

	for (i = 0; i < VT_SCRATCH_REGS; i++) {
		got = vgpu_rd(vg, VGPU_REG_SCRATCH_0 + 4 * i);
		if (got && !bad++)
			first = i;
	}
	vt_check(t, !bad, names[2], "%u of %u scratch registers not 0, first SCRATCH_%u = %#010x",
		 bad, (u32)VT_SCRATCH_REGS, first, vgpu_rd(vg, VGPU_REG_SCRATCH_0 + 4 * first));

	st = vgpu_rd(vg, VGPU_REG_SELFTEST_DMA_STATUS);
	count = vgpu_rd(vg, VGPU_REG_SELFTEST_DMA_COUNT);
	errs = vgpu_rd(vg, VGPU_REG_SELFTEST_IRQ_ERRORS);
	addr_lo = vgpu_rd(vg, VGPU_REG_SELFTEST_DMA_ADDR_LO);
	addr_hi = vgpu_rd(vg, VGPU_REG_SELFTEST_DMA_ADDR_HI);
	len = vgpu_rd(vg, VGPU_REG_SELFTEST_DMA_LEN);
	pattern = vgpu_rd(vg, VGPU_REG_SELFTEST_DMA_PATTERN);
	ok = st == VGPU_SELFTEST_DMA_STATUS_IDLE && !count && !errs &&
	     !addr_lo && !addr_hi && !len && !pattern;
	vt_check(t, ok, names[3],
		 "STATUS=%s DMA_COUNT=%u IRQ_ERRORS=%u ADDR=%#x:%08x LEN=%#x PATTERN=%#x, want IDLE and all 0",
		 vgpu_status_name(st), count, errs, addr_hi, addr_lo, len, pattern);

	got = ioread32(vg->vram);
	vt_check(t, got == mark, names[4], "VRAM dword 0 reads %#010x, wrote %#010x before FLR",
		 got, mark);

	/* Re-initialise as after probe: bus mastering, then DMA and an interrupt. */
	pci_set_master(pdev);
	why[0] = '\0';
	ok = vgpu_dma_check(vg, vg->small, vg->small_dma, VT_DMA_SMALL, VT_DMA_SMALL, 0,
			    why, sizeof(why));
	vt_check(t, ok, names[5], "%s", why);

	ok = vgpu_irq_roundtrip(vg, vg->nvec - 1);
	vt_check(t, ok, names[6], "no interrupt on vector %u within %u ms",
		 vg->nvec - 1, timeout_ms);
	return VT_PASS;
}
