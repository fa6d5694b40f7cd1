// SPDX-License-Identifier: GPL-2.0
/*
 * vgpu_test: in-guest self-test driver for the vgpu virtual PCIe GPU.
 *
 * It binds to the device the way a real GPU driver does (regions, BAR mappings, bus mastering,
 * a 64-bit DMA mask, every MSI-X vector with its own handler, coherent DMA buffers), runs the
 * selected test cases from probe and prints the results to the kernel log as KTAP version 1,
 * ending with "# vgpu_test: done pass=X fail=Y skip=Z". Failed cases do not fail the probe or
 * the module load: the KTAP results carry the verdict, and the module can be unloaded again.
 *
 * The programming model is docs/device.md; every register and constant comes from the
 * generated include/vgpu_abi.h.
 */

#include <linux/atomic.h>
#include <linux/bitfield.h>
#include <linux/bitops.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/wait.h>

#include "vgpu_abi.h"

#define VT_WHY_LEN		160
#define VT_INDENT		"    "	/* KTAP: one nesting level */
#define VT_MIN_VECTORS		16
#define VT_DMA_BIG		SZ_64K
#define VT_DMA_BIG_LEN		(SZ_64K - SZ_4K) /* leaves a tail the device must not touch */
#define VT_DMA_SMALL		SZ_4K
#define VT_VRAM_PAGE		SZ_4K
#define VT_VRAM_FULL		SZ_64K	/* covered completely at each end of BAR0 */
#define VT_VRAM_BUDGET_MS	60000
#define VT_SETTLE_MS		100	/* time for a stray or duplicate interrupt to show up */
#define VT_BAD_VECTOR		0xffff

static char *tests = "all";
module_param(tests, charp, 0444);
MODULE_PARM_DESC(tests, "Comma-separated test cases to run, or \"all\" (default: all)");

static ushort vendor = VGPU_PCI_VENDOR_ID;
module_param(vendor, ushort, 0444);
MODULE_PARM_DESC(vendor, "PCI vendor ID to bind to (default: 0x1234)");

static ushort device = VGPU_PCI_DEVICE_ID;
module_param(device, ushort, 0444);
MODULE_PARM_DESC(device, "PCI device ID to bind to (default: 0x5650)");

static uint timeout_ms = 2000;
module_param(timeout_ms, uint, 0444);
MODULE_PARM_DESC(timeout_ms, "Timeout of every interrupt and DMA wait, in ms (default: 2000)");

/* Bit i set: vt_defs[i] runs. */
static unsigned long vt_selected;
/* Probes seen, to report a missing device. */
static atomic_t vt_probes = ATOMIC_INIT(0);
/* One device's KTAP report at a time. */
static DEFINE_MUTEX(vt_lock);

struct vgpu;

struct vgpu_vec {
	struct vgpu *vg;
	unsigned int index;
	atomic_t count;		/* interrupts seen on this vector */
	char name[32];		/* request_irq keeps the pointer */
};

struct vgpu {
	struct pci_dev *pdev;
	void __iomem *regs;	/* BAR5 */
	void __iomem *vram;	/* BAR0, write-combined */
	void __iomem *db;	/* BAR2 */
	resource_size_t vram_len;
	unsigned int nvec;
	struct vgpu_vec *vecs;
	wait_queue_head_t wq;	/* woken by every interrupt */
	void *big;		/* VT_DMA_BIG bytes */
	dma_addr_t big_dma;
	void *small;		/* VT_DMA_SMALL bytes */
	dma_addr_t small_dma;
	bool dma_wedged;	/* a transfer never finished: do not start another */
};

/* ---- KTAP output ---- */

enum vt_res { VT_PASS, VT_FAIL, VT_SKIP };

struct vt_log {
	const char *indent;
	unsigned int plan, n, pass, fail, skip;
};

/* One top-level case while it runs. */
struct vt_case {
	struct vgpu *vg;
	const char *name;
	bool has_sub;
	struct vt_log sub;	/* its nested subtests, when has_sub */
	char why[VT_WHY_LEN];	/* reason printed after "not ok" */
};

static void vt_print_result(struct vt_log *l, enum vt_res res, const char *name,
			    const char *why)
{
	l->n++;
	switch (res) {
	case VT_PASS:
		l->pass++;
		pr_info("%sok %u %s\n", l->indent, l->n, name);
		break;
	case VT_SKIP:
		l->skip++;
		pr_info("%sok %u %s # SKIP %s\n", l->indent, l->n, name, why);
		break;
	case VT_FAIL:
		l->fail++;
		pr_info("%snot ok %u %s # %s\n", l->indent, l->n, name,
			why[0] ? why : "failed");
		break;
	}
}

static __printf(2, 3) void vt_diag(const char *indent, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_info("%s# %pV\n", indent, &vaf);
	va_end(args);
}

/* A diagnostic line at the case's current nesting level. */
static __printf(2, 3) void vt_note(struct vt_case *t, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_info("%s# %pV\n", t->has_sub ? VT_INDENT : "", &vaf);
	va_end(args);
}

/* Records the case's failure reason (the first one wins) and returns VT_FAIL. */
static __printf(2, 3) enum vt_res vt_fail(struct vt_case *t, const char *fmt, ...)
{
	va_list args;

	if (!t->why[0]) {
		va_start(args, fmt);
		vsnprintf(t->why, sizeof(t->why), fmt, args);
		va_end(args);
	}
	return VT_FAIL;
}

static void vt_sub_begin(struct vt_case *t, unsigned int plan)
{
	t->has_sub = true;
	t->sub = (struct vt_log){ .indent = VT_INDENT, .plan = plan };
	pr_info(VT_INDENT "KTAP version 1\n");
	pr_info(VT_INDENT "# Subtest: %s\n", t->name);
	pr_info(VT_INDENT "1..%u\n", plan);
}

/* Prints one subtest result; the reason is formatted only on failure. Returns ok. */
static __printf(4, 5) bool vt_check(struct vt_case *t, bool ok, const char *name,
				    const char *fmt, ...)
{
	char why[VT_WHY_LEN];
	va_list args;

	if (ok) {
		vt_print_result(&t->sub, VT_PASS, name, "");
		return true;
	}
	va_start(args, fmt);
	vsnprintf(why, sizeof(why), fmt, args);
	va_end(args);
	vt_print_result(&t->sub, VT_FAIL, name, why);
	return false;
}

static void vt_sub_skip(struct vt_case *t, const char *const *names, unsigned int count,
			const char *why)
{
	unsigned int i;

	for (i = 0; i < count; i++)
		vt_print_result(&t->sub, VT_SKIP, names[i], why);
}

/* ---- device access ---- */

static u32 vgpu_rd(struct vgpu *vg, unsigned long off)
{
	return ioread32(vg->regs + off);
}

static void vgpu_wr(struct vgpu *vg, unsigned long off, u32 val)
{
	iowrite32(val, vg->regs + off);
}

static irqreturn_t vgpu_isr(int irq, void *data)
{
	struct vgpu_vec *v = data;

	/* MSI-X vectors are never shared, and the device has no status to read: it is ours. */
	atomic_inc(&v->count);
	wake_up(&v->vg->wq);
	return IRQ_HANDLED;
}

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

/* Raises vector k through SELFTEST_IRQ and waits for its handler. */
static bool vgpu_irq_roundtrip(struct vgpu *vg, unsigned int k)
{
	int base = atomic_read(&vg->vecs[k].count);

	vgpu_wr(vg, VGPU_REG_SELFTEST_IRQ, k);
	return wait_event_timeout(vg->wq, atomic_read(&vg->vecs[k].count) != base,
				  msecs_to_jiffies(timeout_ms)) != 0;
}

static const char *vgpu_status_name(u32 st)
{
	switch (st) {
	case VGPU_SELFTEST_DMA_STATUS_IDLE:
		return "IDLE";
	case VGPU_SELFTEST_DMA_STATUS_BUSY:
		return "BUSY";
	case VGPU_SELFTEST_DMA_STATUS_DONE:
		return "DONE";
	case VGPU_SELFTEST_DMA_STATUS_ERR_BUS_MASTER:
		return "ERR_BUS_MASTER";
	case VGPU_SELFTEST_DMA_STATUS_ERR_FAULT:
		return "ERR_FAULT";
	case VGPU_SELFTEST_DMA_STATUS_ERR_LENGTH:
		return "ERR_LENGTH";
	}
	return "unknown";
}

/* Polls SELFTEST_DMA_STATUS until it leaves BUSY or timeout_ms pass; returns the last value. */
static u32 vgpu_dma_wait_idle(struct vgpu *vg)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	u32 st;

	for (;;) {
		st = vgpu_rd(vg, VGPU_REG_SELFTEST_DMA_STATUS);
		if (st != VGPU_SELFTEST_DMA_STATUS_BUSY || time_after(jiffies, deadline))
			return st;
		usleep_range(100, 200);
	}
}

/*
 * Runs one self-test transfer of len bytes to addr and waits for its end: first for the
 * completion interrupt on vector (when vector >= 0), then for STATUS to leave BUSY. Returns the
 * final STATUS, or a negative errno with why filled in when it did not end in time.
 */
static int vgpu_dma_run(struct vgpu *vg, dma_addr_t addr, u32 len, u32 pattern, int vector,
			char *why, size_t whylen)
{
	u32 ctrl = VGPU_REG_SELFTEST_DMA_CTRL__GO_MASK;
	int base = 0;
	u32 st;

	if (vg->dma_wedged) {
		snprintf(why, whylen, "an earlier self-test DMA never finished");
		return -EBUSY;
	}
	st = vgpu_rd(vg, VGPU_REG_SELFTEST_DMA_STATUS);
	if (st == VGPU_SELFTEST_DMA_STATUS_BUSY) {
		vg->dma_wedged = true;
		snprintf(why, whylen, "engine BUSY before the transfer started");
		return -EBUSY;
	}
	vgpu_wr(vg, VGPU_REG_SELFTEST_DMA_ADDR_LO, lower_32_bits(addr));
	vgpu_wr(vg, VGPU_REG_SELFTEST_DMA_ADDR_HI, upper_32_bits(addr));
	vgpu_wr(vg, VGPU_REG_SELFTEST_DMA_LEN, len);
	vgpu_wr(vg, VGPU_REG_SELFTEST_DMA_PATTERN, pattern);
	if (vector >= 0) {
		ctrl |= VGPU_REG_SELFTEST_DMA_CTRL__IRQ_EN_MASK |
			FIELD_PREP(VGPU_REG_SELFTEST_DMA_CTRL__IRQ_VECTOR_MASK, vector);
		base = atomic_read(&vg->vecs[vector].count);
	}
	/* iowrite32 is ordered after the CPU's earlier stores to the buffer. */
	vgpu_wr(vg, VGPU_REG_SELFTEST_DMA_CTRL, ctrl);

	if (vector >= 0 &&
	    !wait_event_timeout(vg->wq, atomic_read(&vg->vecs[vector].count) != base,
				msecs_to_jiffies(timeout_ms))) {
		st = vgpu_rd(vg, VGPU_REG_SELFTEST_DMA_STATUS);
		if (st == VGPU_SELFTEST_DMA_STATUS_BUSY)
			vg->dma_wedged = true;
		snprintf(why, whylen,
			 "no completion interrupt on vector %d within %u ms (STATUS=%s)",
			 vector, timeout_ms, vgpu_status_name(st));
		return -ETIMEDOUT;
	}
	st = vgpu_dma_wait_idle(vg);
	if (st == VGPU_SELFTEST_DMA_STATUS_BUSY) {
		vg->dma_wedged = true;
		snprintf(why, whylen, "STATUS still BUSY after %u ms", timeout_ms);
		return -ETIMEDOUT;
	}
	return st;
}

/* A pattern whose dwords PATTERN + i are never 0 in a transfer, so a skipped dword shows. */
static u32 vgpu_dma_pattern(void)
{
	return (get_random_u32() & 0x3fffffff) | 0x80000000;
}

/* Dword i of buf must be pattern + i for the first len bytes; bytes past len must still be 0. */
static bool vgpu_buf_check(const void *buf, size_t size, u32 len, u32 pattern, char *why,
			   size_t whylen)
{
	const __le32 *dw = buf;
	const u8 *tail;
	u32 i, bad = 0, first = 0, got = 0;

	for (i = 0; i < len / 4; i++) {
		u32 v = le32_to_cpu(dw[i]);

		if (v != pattern + i && !bad++) {
			first = i;
			got = v;
		}
	}
	if (bad) {
		snprintf(why, whylen,
			 "%u of %u dwords wrong, first: dword %u = %#010x, want %#010x",
			 bad, len / 4, first, got, pattern + first);
		return false;
	}
	tail = memchr_inv((const u8 *)buf + len, 0, size - len);
	if (tail) {
		snprintf(why, whylen, "byte %td past LEN=%u was written (%#04x)",
			 tail - (const u8 *)buf, len, *tail);
		return false;
	}
	return true;
}

/*
 * One checked transfer: zero the buffer, DMA len bytes of PATTERN + i into it with a completion
 * interrupt on vector, then expect DONE, every dword written, nothing past len touched and
 * SELFTEST_DMA_COUNT one higher.
 */
static bool vgpu_dma_check(struct vgpu *vg, void *buf, dma_addr_t addr, size_t size, u32 len,
			   int vector, char *why, size_t whylen)
{
	u32 pattern = vgpu_dma_pattern();
	u32 count0, count1;
	int st;

	memset(buf, 0, size);
	count0 = vgpu_rd(vg, VGPU_REG_SELFTEST_DMA_COUNT);
	st = vgpu_dma_run(vg, addr, len, pattern, vector, why, whylen);
	if (st < 0)
		return false;
	if (st != VGPU_SELFTEST_DMA_STATUS_DONE) {
		snprintf(why, whylen, "STATUS=%s, want DONE", vgpu_status_name(st));
		return false;
	}
	if (!vgpu_buf_check(buf, size, len, pattern, why, whylen))
		return false;
	count1 = vgpu_rd(vg, VGPU_REG_SELFTEST_DMA_COUNT);
	if (count1 != count0 + 1) {
		snprintf(why, whylen, "SELFTEST_DMA_COUNT went %u -> %u, want +1", count0, count1);
		return false;
	}
	return true;
}

/*
 * A transfer the device must refuse with want_status, polled (no completion interrupt), that
 * must leave the zeroed buffer and SELFTEST_DMA_COUNT alone.
 */
static bool vgpu_dma_refused(struct vgpu *vg, u32 len, u32 want_status, char *why,
			     size_t whylen)
{
	const u8 *hit;
	u32 count0, count1;
	int st;

	memset(vg->small, 0, VT_DMA_SMALL);
	count0 = vgpu_rd(vg, VGPU_REG_SELFTEST_DMA_COUNT);
	st = vgpu_dma_run(vg, vg->small_dma, len, vgpu_dma_pattern(), -1, why, whylen);
	if (st < 0)
		return false;
	if (st != want_status) {
		snprintf(why, whylen, "STATUS=%s, want %s", vgpu_status_name(st),
			 vgpu_status_name(want_status));
		return false;
	}
	hit = memchr_inv(vg->small, 0, VT_DMA_SMALL);
	if (hit) {
		snprintf(why, whylen, "%s, but byte %td of the buffer was written",
			 vgpu_status_name(st), hit - (const u8 *)vg->small);
		return false;
	}
	count1 = vgpu_rd(vg, VGPU_REG_SELFTEST_DMA_COUNT);
	if (count1 != count0) {
		snprintf(why, whylen, "SELFTEST_DMA_COUNT went %u -> %u, want unchanged",
			 count0, count1);
		return false;
	}
	return true;
}

/* ---- test cases ---- */

static enum vt_res t_probe_identity(struct vt_case *t)
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

static enum vt_res t_scratch(struct vt_case *t)
{
	struct vgpu *vg = t->vg;
	u32 seed = get_random_u32();
	u32 want[8], got;
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

static enum vt_res t_msix(struct vt_case *t)
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

static enum vt_res t_dma(struct vt_case *t)
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

static enum vt_res t_vram(struct vt_case *t)
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

static enum vt_res t_reset_flr(struct vt_case *t)
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
	for (i = 0; i < 8; i++)
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

	for (i = 0; i < 8; i++) {
		got = vgpu_rd(vg, VGPU_REG_SCRATCH_0 + 4 * i);
		if (got && !bad++)
			first = i;
	}
	vt_check(t, !bad, names[2], "%u of 8 scratch registers not 0, first SCRATCH_%u = %#010x",
		 bad, first, vgpu_rd(vg, VGPU_REG_SCRATCH_0 + 4 * first));

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

static const struct vt_def {
	const char *name;
	enum vt_res (*run)(struct vt_case *t);
} vt_defs[] = {
	{ "probe_identity", t_probe_identity },
	{ "scratch", t_scratch },
	{ "msix", t_msix },
	{ "dma", t_dma },
	{ "vram", t_vram },
	{ "reset_flr", t_reset_flr },
};

/* Folds a case's subtests into its own result. */
static enum vt_res vt_case_end(struct vt_case *t, enum vt_res res)
{
	if (!t->has_sub)
		return res;
	if (t->sub.n != t->sub.plan)
		return vt_fail(t, "internal error: plan 1..%u but %u subtest results",
			       t->sub.plan, t->sub.n);
	if (t->sub.fail)
		return vt_fail(t, "%u of %u subtests failed", t->sub.fail, t->sub.plan);
	return res;
}

/*
 * Prints one complete KTAP report. With setup_err set (or no device) every selected case
 * fails with that reason; vg is then not used.
 */
static void vgpu_report(struct vgpu *vg, struct pci_dev *pdev, const char *setup_err)
{
	struct vt_log top = { .indent = "", .plan = ARRAY_SIZE(vt_defs) };
	struct vt_case *t;
	unsigned int i;
	ktime_t start;

	/* Allocated before the report starts, so no allocation message lands inside it. */
	t = kzalloc(sizeof(*t), GFP_KERNEL);

	mutex_lock(&vt_lock);
	pr_info("KTAP version 1\n");
	pr_info("1..%u\n", top.plan);
	if (pdev)
		vt_diag("", "vgpu_test: device %s [%04x:%04x] tests=%s timeout_ms=%u",
			pci_name(pdev), pdev->vendor, pdev->device, tests, timeout_ms);
	if (!t)
		setup_err = "out of memory";

	for (i = 0; i < ARRAY_SIZE(vt_defs); i++) {
		const struct vt_def *def = &vt_defs[i];
		enum vt_res res;

		if (!(vt_selected & BIT(i))) {
			vt_print_result(&top, VT_SKIP, def->name, "not selected");
			continue;
		}
		if (setup_err) {
			vt_print_result(&top, VT_FAIL, def->name, setup_err);
			continue;
		}
		memset(t, 0, sizeof(*t));
		t->vg = vg;
		t->name = def->name;
		start = ktime_get();
		res = def->run(t);
		vt_note(t, "%s: %lld ms", def->name, ktime_ms_delta(ktime_get(), start));
		res = vt_case_end(t, res);
		vt_print_result(&top, res, def->name, t->why);
	}
	pr_info("# vgpu_test: done pass=%u fail=%u skip=%u\n", top.pass, top.fail, top.skip);
	mutex_unlock(&vt_lock);
	kfree(t);
}

/* ---- PCI driver ---- */

/*
 * Brings the device up as a GPU driver would. On failure everything done so far is undone and
 * why says which step failed.
 */
static int vgpu_setup(struct vgpu *vg, char *why, size_t whylen)
{
	static const int bars[] = { VGPU_BAR_VRAM, VGPU_BAR_DOORBELL, VGPU_BAR_REGS };
	struct pci_dev *pdev = vg->pdev;
	unsigned int i;
	int cap, ret;
	u32 n;

	ret = pci_enable_device(pdev);
	if (ret) {
		snprintf(why, whylen, "pci_enable_device: %d", ret);
		return ret;
	}
	for (i = 0; i < ARRAY_SIZE(bars); i++) {
		if (!(pci_resource_flags(pdev, bars[i]) & IORESOURCE_MEM) ||
		    !pci_resource_len(pdev, bars[i])) {
			snprintf(why, whylen, "BAR%d is not an assigned memory BAR", bars[i]);
			ret = -ENODEV;
			goto err_disable;
		}
	}
	ret = pci_request_regions(pdev, KBUILD_MODNAME);
	if (ret) {
		snprintf(why, whylen, "pci_request_regions: %d", ret);
		goto err_disable;
	}

	ret = -ENOMEM;
	vg->regs = pci_iomap(pdev, VGPU_BAR_REGS, 0);
	if (!vg->regs) {
		snprintf(why, whylen, "pci_iomap(BAR5) failed");
		goto err_release;
	}
	vg->vram_len = pci_resource_len(pdev, VGPU_BAR_VRAM);
	vg->vram = pci_iomap_wc(pdev, VGPU_BAR_VRAM, 0);
	if (!vg->vram) {
		snprintf(why, whylen, "pci_iomap_wc(BAR0) failed");
		goto err_unmap_regs;
	}
	vg->db = pci_iomap(pdev, VGPU_BAR_DOORBELL, 0);
	if (!vg->db) {
		snprintf(why, whylen, "pci_iomap(BAR2) failed");
		goto err_unmap_vram;
	}

	pci_set_master(pdev);
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret) {
		snprintf(why, whylen, "dma_set_mask_and_coherent(64): %d", ret);
		goto err_unmap_db;
	}

	n = vgpu_rd(vg, VGPU_REG_ID_MSIX_VECTORS);
	cap = pci_msix_vec_count(pdev);
	if (n < 1 || n > VGPU_REGS_MSIX_MAX_VECTORS || cap < 0 || n > (u32)cap) {
		snprintf(why, whylen,
			 "ID_MSIX_VECTORS=%u but the MSI-X capability has %d (ID_MAGIC=%#010x)",
			 n, cap, vgpu_rd(vg, VGPU_REG_ID_MAGIC));
		ret = -ENODEV;
		goto err_unmap_db;
	}
	ret = pci_alloc_irq_vectors(pdev, n, n, PCI_IRQ_MSIX);
	if (ret < 0) {
		snprintf(why, whylen, "pci_alloc_irq_vectors(%u, MSI-X): %d", n, ret);
		goto err_unmap_db;
	}
	vg->nvec = n;
	vg->vecs = kcalloc(n, sizeof(*vg->vecs), GFP_KERNEL);
	if (!vg->vecs) {
		snprintf(why, whylen, "out of memory");
		ret = -ENOMEM;
		goto err_free_vectors;
	}
	for (i = 0; i < n; i++) {
		struct vgpu_vec *v = &vg->vecs[i];

		v->vg = vg;
		v->index = i;
		atomic_set(&v->count, 0);
		snprintf(v->name, sizeof(v->name), "%s-%s-%u", KBUILD_MODNAME, pci_name(pdev), i);
		ret = request_irq(pci_irq_vector(pdev, i), vgpu_isr, 0, v->name, v);
		if (ret) {
			snprintf(why, whylen, "request_irq(vector %u): %d", i, ret);
			goto err_free_irqs;
		}
	}

	ret = -ENOMEM;
	vg->big = dma_alloc_coherent(&pdev->dev, VT_DMA_BIG, &vg->big_dma, GFP_KERNEL);
	if (!vg->big) {
		snprintf(why, whylen, "dma_alloc_coherent(%u) failed", VT_DMA_BIG);
		goto err_free_irqs;
	}
	vg->small = dma_alloc_coherent(&pdev->dev, VT_DMA_SMALL, &vg->small_dma, GFP_KERNEL);
	if (!vg->small) {
		snprintf(why, whylen, "dma_alloc_coherent(%u) failed", VT_DMA_SMALL);
		goto err_free_big;
	}
	return 0;

err_free_big:
	dma_free_coherent(&pdev->dev, VT_DMA_BIG, vg->big, vg->big_dma);
err_free_irqs:
	while (i--)
		free_irq(pci_irq_vector(pdev, i), &vg->vecs[i]);
	kfree(vg->vecs);
err_free_vectors:
	pci_free_irq_vectors(pdev);
err_unmap_db:
	pci_clear_master(pdev);
	pci_iounmap(pdev, vg->db);
err_unmap_vram:
	pci_iounmap(pdev, vg->vram);
err_unmap_regs:
	pci_iounmap(pdev, vg->regs);
err_release:
	pci_release_regions(pdev);
err_disable:
	pci_disable_device(pdev);
	return ret;
}

static int vgpu_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	char why[VT_WHY_LEN], err[VT_WHY_LEN + 16];
	struct vgpu *vg;
	int ret;

	atomic_inc(&vt_probes);
	vg = kzalloc(sizeof(*vg), GFP_KERNEL);
	if (!vg) {
		vgpu_report(NULL, pdev, "setup failed: out of memory");
		return -ENOMEM;
	}
	vg->pdev = pdev;
	init_waitqueue_head(&vg->wq);

	why[0] = '\0';
	ret = vgpu_setup(vg, why, sizeof(why));
	if (ret) {
		dev_err(&pdev->dev, "setup failed: %s\n", why);
		snprintf(err, sizeof(err), "setup failed: %s", why);
		vgpu_report(NULL, pdev, err);
		kfree(vg);
		return ret;
	}
	pci_set_drvdata(pdev, vg);
	vgpu_report(vg, pdev, NULL);
	return 0;
}

static void vgpu_remove(struct pci_dev *pdev)
{
	struct vgpu *vg = pci_get_drvdata(pdev);
	unsigned int i;
	u32 st;

	/* No new DMA from here on; then let a transfer still running end. */
	pci_clear_master(pdev);
	st = vgpu_dma_wait_idle(vg);

	for (i = 0; i < vg->nvec; i++)
		free_irq(pci_irq_vector(pdev, i), &vg->vecs[i]);
	pci_free_irq_vectors(pdev);
	kfree(vg->vecs);

	if (st == VGPU_SELFTEST_DMA_STATUS_BUSY) {
		dev_warn(&pdev->dev,
			 "self-test DMA still busy: leaking its buffers rather than freeing memory the device may write\n");
	} else {
		dma_free_coherent(&pdev->dev, VT_DMA_SMALL, vg->small, vg->small_dma);
		dma_free_coherent(&pdev->dev, VT_DMA_BIG, vg->big, vg->big_dma);
	}

	pci_iounmap(pdev, vg->db);
	pci_iounmap(pdev, vg->vram);
	pci_iounmap(pdev, vg->regs);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
	pci_set_drvdata(pdev, NULL);
	kfree(vg);
}

/* Not const: module init writes the vendor/device parameters into it. */
static struct pci_device_id vgpu_ids[] = {
	{ PCI_DEVICE(VGPU_PCI_VENDOR_ID, VGPU_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, vgpu_ids);

static struct pci_driver vgpu_driver = {
	.name = KBUILD_MODNAME,
	.id_table = vgpu_ids,
	.probe = vgpu_probe,
	.remove = vgpu_remove,
	.driver = {
		/* The report must be complete when insmod returns. */
		.probe_type = PROBE_FORCE_SYNCHRONOUS,
	},
};

/* Sets vt_selected from the tests parameter; an unknown name is an error. */
static int vt_parse_tests(void)
{
	char *buf, *s, *tok;
	unsigned int i;
	int ret = 0;

	vt_selected = 0;
	if (!tests || !strcmp(tests, "all")) {
		vt_selected = BIT(ARRAY_SIZE(vt_defs)) - 1;
		return 0;
	}
	buf = kstrdup(tests, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	s = buf;
	while ((tok = strsep(&s, ",")) != NULL) {
		tok = strim(tok);
		if (!*tok)
			continue;
		if (!strcmp(tok, "all")) {
			vt_selected = BIT(ARRAY_SIZE(vt_defs)) - 1;
			continue;
		}
		for (i = 0; i < ARRAY_SIZE(vt_defs); i++) {
			if (!strcmp(tok, vt_defs[i].name))
				break;
		}
		if (i == ARRAY_SIZE(vt_defs)) {
			pr_err("vgpu_test: unknown test \"%s\" in tests=; known: probe_identity, scratch, msix, dma, vram, reset_flr\n",
			       tok);
			ret = -EINVAL;
			continue;
		}
		vt_selected |= BIT(i);
	}
	kfree(buf);
	return ret;
}

static int __init vgpu_test_init(void)
{
	char why[48];
	int ret;

	ret = vt_parse_tests();
	if (ret)
		return ret;
	if (timeout_ms < 10)
		timeout_ms = 10;
	vgpu_ids[0].vendor = vendor;
	vgpu_ids[0].device = device;

	ret = pci_register_driver(&vgpu_driver);
	if (ret)
		return ret;
	if (!atomic_read(&vt_probes)) {
		snprintf(why, sizeof(why), "no unbound device %04x:%04x found", vendor, device);
		vgpu_report(NULL, NULL, why);
	}
	return 0;
}

static void __exit vgpu_test_exit(void)
{
	pci_unregister_driver(&vgpu_driver);
}

module_init(vgpu_test_init);
module_exit(vgpu_test_exit);

MODULE_DESCRIPTION("vgpu virtual GPU in-guest self-test driver (KTAP)");
MODULE_LICENSE("GPL");
