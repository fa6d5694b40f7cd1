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
#include <linux/bitmap.h>
#include <linux/bitops.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/io-64-nonatomic-lo-hi.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/list.h>
#include <linux/log2.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/spinlock.h>
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
#define VT_IH_VECTOR		0	/* the MSI-X vector of the IH ring */
#define VT_SCRATCH_REGS		(VGPU_BLOCK_SCRATCH_SIZE / 4)	/* SCRATCH_0..7 */

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

static uint fence_jobs = 10000;
module_param(fence_jobs, uint, 0444);
MODULE_PARM_DESC(fence_jobs, "Jobs the fences case runs across its 4 queues (default: 10000)");

/* Bit i set: vt_defs[i] runs. */
static unsigned long vt_selected;
/* Probes seen, to report a missing device. */
static atomic_t vt_probes = ATOMIC_INIT(0);
/* One device's KTAP report at a time. */
static DEFINE_MUTEX(vt_lock);

struct vgpu;
struct vgpu_cp;

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
	struct vgpu_cp *cp;	/* command processor state, set up by the first CP case */
	bool cp_failed;		/* that set-up failed, for cp_why */
	char cp_why[VT_WHY_LEN];
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
	char err[VT_WHY_LEN];	/* why the last helper failed, for a subtest's reason */
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

/* Records why a helper failed (the last one wins; t may be NULL) and returns ret. */
static __printf(3, 4) int vt_reason(struct vt_case *t, int ret, const char *fmt, ...)
{
	va_list args;

	if (t) {
		va_start(args, fmt);
		vsnprintf(t->err, sizeof(t->err), fmt, args);
		va_end(args);
	}
	return ret;
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

static void vgpu_ih_process(struct vgpu_cp *cp);

static irqreturn_t vgpu_isr(int irq, void *data)
{
	struct vgpu_vec *v = data;
	struct vgpu_cp *cp;

	/* MSI-X vectors are never shared, and the device has no status to read: it is ours. */
	atomic_inc(&v->count);
	if (v->index == VT_IH_VECTOR) {
		/* Once the CP is set up this vector also means: new entries in the IH ring. */
		cp = smp_load_acquire(&v->vg->cp);
		if (cp)
			vgpu_ih_process(cp);
	}
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

/* ---- command processor, driver side: GART, IH ring, HQD rings, PM4 ---- */

/*
 * What a GPU driver sets up before it can run anything on the CP, done once by the first CP
 * case (vgpu_cp_get) and torn down by remove:
 *
 *  - a flat GART of VT_GART_SIZE at VT_GART_START (above the frame-buffer aperture), its table
 *    in system memory (PDE with SYSTEM), and a page allocator that maps coherent DMA buffers
 *    into it (MTYPE UC for rings, IBs and fences; NC where a test wants the L2 involved);
 *  - a writeback page: the IH wptr and, per HQD slot, the rptr report and the fence dword;
 *  - the IH ring on MSI-X vector VT_IH_VECTOR, drained by that vector's handler, which keeps
 *    per-slot records of EOP and error IVs for the cases to check.
 *
 * Rings are per case: vgpu_ring_create() programs an HQD the way amdgpu does through MMIO and
 * vgpu_ring_destroy() stops it with DEQUEUE_RESET. Submission is alloc / put / commit / kick
 * (doorbell) with a 64-bit monotonic wptr in dwords; fences are RELEASE_MEM as gfx11 emits them.
 */

#define VT_GPU_PAGE		SZ_4K
#define VT_GART_START		0x0000010000000000ULL	/* 1 TiB, above the FB aperture */
#define VT_GART_SIZE		SZ_16M
#define VT_GART_PAGES		(VT_GART_SIZE / VT_GPU_PAGE)
#define VT_IH_BYTES		SZ_64K
#define VT_RING_BYTES		SZ_64K
#define VT_WB_BYTES		SZ_4K
/* Writeback page: the IH wptr at 0; per HQD slot the rptr report, the fence 8 bytes on. */
#define VT_WB_IH_WPTR		0
#define VT_WB_SLOT(s)		(64 + 64 * (s))
#define VT_DB_GFX		0x8b	/* qword doorbells: amdgpu's Navi10 GFX ring 0 ... */
#define VT_DB_MEC		0x03	/* ... and MEC ring 0 */
#define VT_FENCE_DW		8
#define VT_STATE_LEN		128

#define VT_PTE_FLAGS		(VGPU_PTE_VALID_MASK | VGPU_PTE_SYSTEM_MASK | \
				 VGPU_PTE_SNOOPED_MASK | VGPU_PTE_EXECUTABLE_MASK | \
				 VGPU_PTE_READABLE_MASK | VGPU_PTE_WRITEABLE_MASK)

/* The cache actions of amdgpu's gfx11 fence (gfx_v11_0_ring_emit_fence). */
#define VT_GCR_FENCE		(VGPU_PM4_RELEASE_MEM_GCR_SEQ_MASK | \
				 VGPU_PM4_RELEASE_MEM_GCR_GL2_WB_MASK | \
				 VGPU_PM4_RELEASE_MEM_GCR_GLM_INV_MASK | \
				 VGPU_PM4_RELEASE_MEM_GCR_GLM_WB_MASK)

/* amdgpu's full cache flush before work (gfx_v11_0_emit_mem_sync). */
#define VT_ACQ_FULL		(VGPU_PM4_ACQUIRE_MEM_GCR_GL2_INV_MASK | \
				 VGPU_PM4_ACQUIRE_MEM_GCR_GL2_WB_MASK | \
				 VGPU_PM4_ACQUIRE_MEM_GCR_GLM_INV_MASK | \
				 VGPU_PM4_ACQUIRE_MEM_GCR_GLM_WB_MASK | \
				 VGPU_PM4_ACQUIRE_MEM_GCR_GL1_INV_MASK | \
				 VGPU_PM4_ACQUIRE_MEM_GCR_GLV_INV_MASK | \
				 VGPU_PM4_ACQUIRE_MEM_GCR_GLK_INV_MASK | \
				 FIELD_PREP(VGPU_PM4_ACQUIRE_MEM_GCR_GLI_INV_MASK, 1) | \
				 FIELD_PREP(VGPU_PM4_ACQUIRE_MEM_GCR_GL2_RANGE_MASK, \
					    VGPU_PM4_ACQUIRE_MEM_GCR_GL2_RANGE_ALL))

#define VT_PKT3(op, count)						\
	((u32)(FIELD_PREP(VGPU_PM4_HEADER_TYPE_MASK, VGPU_PM4_TYPE3) |	\
	       FIELD_PREP(VGPU_PM4_HEADER_COUNT_MASK, (count)) |		\
	       FIELD_PREP(VGPU_PM4_HEADER_OPCODE_MASK, (op))))

/* A coherent DMA buffer mapped into the GART. */
struct vgpu_bo {
	struct list_head node;
	void *cpu;
	dma_addr_t dma;
	size_t size;		/* whole GPU pages */
	u64 gpu;		/* GART address */
	unsigned int first;	/* first GART page */
	bool cached;		/* MTYPE NC: its lines may live in the L2 */
};

/* What the IH handler saw for one HQD slot; written under ih.lock. */
struct vgpu_ih_slot {
	u32 eop;		/* end-of-pipe IVs */
	u32 eop_ctxid;		/* DW4 (INT_CTXID) of the last one */
	ktime_t eop_time;	/* when the handler decoded it */
	u32 eop_unordered;	/* ctxids are fence seqs: one not above the one before */
	u32 eop_early;		/* decoded while the fence memory was below its ctxid */
	const __le32 *fence;	/* the ring's fence dword, sampled on every EOP IV */
	u32 fence_seen;		/* the last sample */
	u32 fence_backwards;	/* samples lower than the one before */
	u32 err;		/* CP error IVs (bad opcode, reserved bits, GPF) */
	u32 err_src;		/* source and data of the last one */
	u32 err_data[4];
};

struct vgpu_ih {
	spinlock_t lock;	/* the ring state below; taken by the vector's handler */
	bool enabled;
	struct vgpu_bo *bo;
	const __le32 *ring;
	u32 mask;		/* ring bytes - 1 */
	u32 rptr;		/* bytes */
	u32 cntl;		/* IH_RB_CNTL while enabled */
	__le32 *wptr_wb;
	u32 ivs;		/* entries decoded */
	u32 overflows;		/* RB_OVERFLOW seen: entries were lost */
	u32 unknown;		/* IVs from no known client/source/ring */
	u32 unknown_dw0;
	u32 vm_faults;
	u32 vm_fault_data[2];
	struct vgpu_ih_slot slot[VGPU_BLOCK_HQD_COUNT];
};

struct vgpu_ring {
	struct vgpu_cp *cp;
	unsigned int slot;
	u32 ring_id;		/* IV RING_ID: me, pipe, queue */
	unsigned int doorbell;	/* qword index in BAR2 */
	struct vgpu_bo *bo;
	__le32 *ring;
	u32 size;		/* dwords, a power of two */
	u64 wptr;		/* committed; all positions are monotonic dwords */
	u64 wpos;		/* written so far in the current reservation */
	u64 wend;		/* end of the current reservation */
	u64 kicked;		/* the last wptr the device was given */
	u64 rptr;		/* consumed, extended from the 32-bit report */
	u64 fence_wptr;		/* just past the last fence written */
	u32 seq;		/* the last fence sequence number written */
	u32 fence_seen;		/* driver-side samples of the fence memory ... */
	u32 fence_backwards;	/* ... and how often one went down */
	bool overrun;		/* more written than reserved: a bug in the test */
	__le32 *rptr_cpu;
	u64 rptr_gpu;
	__le32 *fence_cpu;
	u64 fence_gpu;
};

struct vgpu_cp {
	struct vgpu *vg;
	u32 hqds, pipes, qpp;
	u64 fb_base, vram_size;
	__le64 *gart;
	dma_addr_t gart_dma;
	u64 gart_start;
	DECLARE_BITMAP(gart_used, VT_GART_PAGES);
	struct list_head bos;
	struct vgpu_bo *wb;
	struct vgpu_ih ih;
	struct vgpu_ring *rings[VGPU_BLOCK_HQD_COUNT];
	bool wedged;		/* a queue did not stop: its memory must never be freed */
};

static u32 vgpu_hqd_rd(struct vgpu *vg, unsigned int slot, u32 reg)
{
	return vgpu_rd(vg, VGPU_HQD_REG(slot, reg));
}

static void vgpu_hqd_wr(struct vgpu *vg, unsigned int slot, u32 reg, u32 val)
{
	vgpu_wr(vg, VGPU_HQD_REG(slot, reg), val);
}

static u64 vgpu_rd64(struct vgpu *vg, unsigned long lo, unsigned long hi)
{
	return (u64)vgpu_rd(vg, hi) << 32 | vgpu_rd(vg, lo);
}

static void vgpu_wr64(struct vgpu *vg, unsigned long lo, unsigned long hi, u64 val)
{
	vgpu_wr(vg, lo, lower_32_bits(val));
	vgpu_wr(vg, hi, upper_32_bits(val));
}

static u32 vgpu_bo_rd(struct vgpu_bo *bo, u32 off)
{
	return le32_to_cpu(READ_ONCE(((__le32 *)bo->cpu)[off / 4]));
}

static void vgpu_bo_wr(struct vgpu_bo *bo, u32 off, u32 val)
{
	WRITE_ONCE(((__le32 *)bo->cpu)[off / 4], cpu_to_le32(val));
}

/* Writes n dwords of packets into an IB at dword offset off. */
static void vgpu_ib_put(struct vgpu_bo *bo, u32 off, const u32 *p, unsigned int n)
{
	__le32 *d = (__le32 *)bo->cpu + off;

	while (n--)
		*d++ = cpu_to_le32(*p++);
}

static const char *vgpu_state_name(u32 state)
{
	switch (state) {
	case VGPU_HQD_STATE_IDLE:
		return "IDLE";
	case VGPU_HQD_STATE_RUNNING:
		return "RUNNING";
	case VGPU_HQD_STATE_WAITING:
		return "WAITING";
	case VGPU_HQD_STATE_HALTED:
		return "HALTED";
	case VGPU_HQD_STATE_BUSY_KERNEL:
		return "BUSY_KERNEL";
	}
	return "unknown";
}

static u32 vgpu_hqd_state(struct vgpu *vg, unsigned int slot)
{
	return FIELD_GET(VGPU_REG_HQD_STATUS__STATE_MASK,
			 vgpu_hqd_rd(vg, slot, VGPU_REG_HQD_STATUS));
}

/* One line about a queue (and a latched VM fault) for failure reasons. */
static void vgpu_ring_describe(struct vgpu_ring *r, char *buf, size_t len)
{
	struct vgpu *vg = r->cp->vg;
	u32 st = vgpu_hqd_rd(vg, r->slot, VGPU_REG_HQD_STATUS);
	u32 fault = vgpu_rd(vg, VGPU_REG_GMC_VM_FAULT_STATUS);
	int n;

	n = snprintf(buf, len, "slot %u %s error %u, PQ_RPTR %u, rptr report %u, wptr %llu",
		     r->slot, vgpu_state_name(FIELD_GET(VGPU_REG_HQD_STATUS__STATE_MASK, st)),
		     (u32)FIELD_GET(VGPU_REG_HQD_STATUS__ERROR_MASK, st),
		     vgpu_hqd_rd(vg, r->slot, VGPU_REG_HQD_PQ_RPTR),
		     le32_to_cpu(READ_ONCE(*r->rptr_cpu)), r->kicked);
	if ((fault & VGPU_REG_GMC_VM_FAULT_STATUS__VALID_MASK) && n >= 0 && n < len)
		snprintf(buf + n, len - n, "; VM fault %#x at %#llx", fault,
			 vgpu_rd64(vg, VGPU_REG_GMC_VM_FAULT_ADDR_LO,
				   VGPU_REG_GMC_VM_FAULT_ADDR_HI));
}

/* Polls an HQD register until (value & mask) == want or timeout_ms pass. */
static bool vgpu_hqd_wait(struct vgpu *vg, unsigned int slot, u32 reg, u32 mask, u32 want)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);

	for (;;) {
		bool done = (vgpu_hqd_rd(vg, slot, reg) & mask) == want;

		if (done || time_after(jiffies, deadline))
			return done;
		usleep_range(20, 50);
	}
}

static bool vgpu_hqd_wait_state(struct vgpu *vg, unsigned int slot, u32 state)
{
	return vgpu_hqd_wait(vg, slot, VGPU_REG_HQD_STATUS, VGPU_REG_HQD_STATUS__STATE_MASK,
			     FIELD_PREP(VGPU_REG_HQD_STATUS__STATE_MASK, state));
}

/* ---- GART ---- */

static void vgpu_gart_flush(struct vgpu_cp *cp)
{
	/* The PTEs are in memory before the device drops its cached translations. */
	wmb();
	vgpu_wr(cp->vg, VGPU_REG_GMC_VM_INVALIDATE, BIT(0));
}

/* Writes back and invalidates the whole L2 over MMIO. */
static void vgpu_l2_flush(struct vgpu_cp *cp)
{
	vgpu_wr(cp->vg, VGPU_REG_L2_CONTROL,
		VGPU_REG_L2_CONTROL__WB_MASK | VGPU_REG_L2_CONTROL__INV_MASK);
	/* A read orders the (posted) write before whatever comes next. */
	vgpu_rd(cp->vg, VGPU_REG_L2_DIRTY_LINES);
}

/* A zeroed coherent buffer of size bytes mapped into the GART, MTYPE NC if cached else UC. */
static struct vgpu_bo *vgpu_bo_alloc(struct vt_case *t, struct vgpu_cp *cp, size_t size,
				     bool cached)
{
	struct device *dev = &cp->vg->pdev->dev;
	u64 mtype = cached ? VGPU_PTE_MTYPE_NC : VGPU_PTE_MTYPE_UC;
	unsigned long first;
	struct vgpu_bo *bo;
	unsigned int n, i;

	size = ALIGN(size, VT_GPU_PAGE);
	n = size / VT_GPU_PAGE;
	first = bitmap_find_next_zero_area(cp->gart_used, VT_GART_PAGES, 0, n, 0);
	if (first >= VT_GART_PAGES) {
		vt_reason(t, -ENOSPC, "GART full: no %u free pages of %u", n, VT_GART_PAGES);
		return NULL;
	}
	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo) {
		vt_reason(t, -ENOMEM, "out of memory");
		return NULL;
	}
	bo->cpu = dma_alloc_coherent(dev, size, &bo->dma, GFP_KERNEL);
	if (!bo->cpu) {
		vt_reason(t, -ENOMEM, "dma_alloc_coherent(%zu) failed", size);
		kfree(bo);
		return NULL;
	}
	if ((bo->dma & (VT_GPU_PAGE - 1)) || bo->dma + size - 1 > VGPU_PTE_ADDRESS_MASK) {
		vt_reason(t, -ERANGE,
			  "DMA address %pad of %zu bytes: a PTE holds 4 KiB pages below 2^48",
			  &bo->dma, size);
		dma_free_coherent(dev, size, bo->cpu, bo->dma);
		kfree(bo);
		return NULL;
	}
	memset(bo->cpu, 0, size);
	bo->size = size;
	bo->first = first;
	bo->cached = cached;
	bo->gpu = cp->gart_start + (u64)first * VT_GPU_PAGE;
	for (i = 0; i < n; i++)
		cp->gart[first + i] =
			cpu_to_le64(((bo->dma + (u64)i * VT_GPU_PAGE) & VGPU_PTE_ADDRESS_MASK) |
				    VT_PTE_FLAGS | FIELD_PREP(VGPU_PTE_MTYPE_MASK, mtype));
	bitmap_set(cp->gart_used, first, n);
	list_add(&bo->node, &cp->bos);
	vgpu_gart_flush(cp);
	return bo;
}

static void vgpu_bo_free(struct vgpu_cp *cp, struct vgpu_bo *bo)
{
	unsigned int i, n;

	/* A queue that did not stop may still use any of it: leak it (vgpu_cp_free). */
	if (!bo || cp->wedged)
		return;
	n = bo->size / VT_GPU_PAGE;
	/* No dirty line of it may be written back into memory that is no longer ours. */
	if (bo->cached)
		vgpu_l2_flush(cp);
	for (i = 0; i < n; i++)
		cp->gart[bo->first + i] = 0;
	vgpu_gart_flush(cp);
	bitmap_clear(cp->gart_used, bo->first, n);
	list_del(&bo->node);
	dma_free_coherent(&cp->vg->pdev->dev, bo->size, bo->cpu, bo->dma);
	kfree(bo);
}

/* ---- IH ---- */

/* The HQD slot a CP ring id names, or -1. */
static int vgpu_ring_id_slot(struct vgpu_cp *cp, u32 ring_id)
{
	u32 me = FIELD_GET(VGPU_IH_RING_ID_ME_MASK, ring_id);
	u32 pipe = FIELD_GET(VGPU_IH_RING_ID_PIPE_MASK, ring_id);
	u32 queue = FIELD_GET(VGPU_IH_RING_ID_QUEUE_MASK, ring_id);
	u32 slot;

	if (me == 0)
		return pipe || queue ? -1 : 0;
	if (me != 1 || pipe >= cp->pipes || queue >= cp->qpp)
		return -1;
	slot = 1 + pipe * cp->qpp + queue;
	return slot < cp->hqds ? slot : -1;
}

static u32 vgpu_slot_ring_id(struct vgpu_cp *cp, unsigned int slot)
{
	if (!slot)
		return 0;
	return FIELD_PREP(VGPU_IH_RING_ID_ME_MASK, 1) |
	       FIELD_PREP(VGPU_IH_RING_ID_PIPE_MASK, (slot - 1) / cp->qpp) |
	       FIELD_PREP(VGPU_IH_RING_ID_QUEUE_MASK, (slot - 1) % cp->qpp);
}

/* Decodes one IV (amdgpu_ih_decode_iv_helper layout). Called with ih.lock held. */
static void vgpu_ih_decode(struct vgpu_cp *cp, const __le32 *e, ktime_t now)
{
	struct vgpu_ih *ih = &cp->ih;
	u32 dw0 = le32_to_cpu(e[0]);
	u32 client = FIELD_GET(VGPU_IH_DW0_CLIENT_ID_MASK, dw0);
	u32 src = FIELD_GET(VGPU_IH_DW0_SOURCE_ID_MASK, dw0);
	int slot = vgpu_ring_id_slot(cp, FIELD_GET(VGPU_IH_DW0_RING_ID_MASK, dw0));
	struct vgpu_ih_slot *s;
	u32 data[4], f;
	unsigned int i;

	for (i = 0; i < 4; i++)
		data[i] = le32_to_cpu(e[4 + i]);
	ih->ivs++;

	if (client == VGPU_IH_CLIENT_GFX && src == VGPU_IH_SRC_VM_FAULT) {
		ih->vm_faults++;
		ih->vm_fault_data[0] = data[0];
		ih->vm_fault_data[1] = data[1];
		return;
	}
	if (client != VGPU_IH_CLIENT_GRBM_CP || slot < 0)
		goto unknown;
	s = &ih->slot[slot];
	switch (src) {
	case VGPU_IH_SRC_CP_EOP:
		if (s->eop && (s32)(data[0] - s->eop_ctxid) <= 0)
			s->eop_unordered++;
		s->eop++;
		s->eop_ctxid = data[0];
		s->eop_time = now;
		if (s->fence) {
			/* INT_SEL 2: the fence data is in memory before the interrupt. */
			f = le32_to_cpu(READ_ONCE(*s->fence));
			if ((s32)(f - s->fence_seen) < 0)
				s->fence_backwards++;
			s->fence_seen = f;
			if ((s32)(f - data[0]) < 0)
				s->eop_early++;
		}
		return;
	case VGPU_IH_SRC_CP_BAD_OPCODE:
	case VGPU_IH_SRC_CP_RESERVED_BITS:
	case VGPU_IH_SRC_CP_GPF:
		s->err++;
		s->err_src = src;
		memcpy(s->err_data, data, sizeof(data));
		return;
	}
unknown:
	ih->unknown++;
	ih->unknown_dw0 = dw0;
}

/* Overflow as ih_v6_0_get_wptr handles it: resume after the oldest entry left, clear the flag. */
static u32 vgpu_ih_overflow(struct vgpu_cp *cp, u32 wptr)
{
	struct vgpu *vg = cp->vg;
	struct vgpu_ih *ih = &cp->ih;

	wptr = vgpu_rd(vg, VGPU_REG_IH_RB_WPTR);
	if (!(wptr & VGPU_REG_IH_RB_WPTR__RB_OVERFLOW_MASK))
		return wptr;
	ih->overflows++;
	ih->rptr = ((wptr & VGPU_REG_IH_RB_WPTR__OFFSET_MASK) + VGPU_IH_ENTRY_BYTES) & ih->mask;
	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, ih->cntl | VGPU_REG_IH_RB_CNTL__WPTR_OVERFLOW_CLEAR_MASK);
	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, ih->cntl);
	return wptr;
}

/* The IH vector's work (amdgpu_ih_process): decode entries up to the written-back wptr. */
static void vgpu_ih_process(struct vgpu_cp *cp)
{
	struct vgpu_ih *ih = &cp->ih;
	ktime_t now = ktime_get();
	unsigned int pass, n;
	u32 wptr;

	spin_lock(&ih->lock);
	if (!ih->enabled)
		goto out;
	for (pass = 0; pass < 4; pass++) {
		wptr = le32_to_cpu(READ_ONCE(*ih->wptr_wb));
		if (wptr & VGPU_REG_IH_RB_WPTR__RB_OVERFLOW_MASK)
			wptr = vgpu_ih_overflow(cp, wptr);
		wptr &= VGPU_REG_IH_RB_WPTR__OFFSET_MASK & ih->mask & ~(VGPU_IH_ENTRY_BYTES - 1);
		if (wptr == ih->rptr)
			break;
		/* The entries are read after the wptr that covers them. */
		rmb();
		for (n = 0; ih->rptr != wptr && n <= ih->mask / VGPU_IH_ENTRY_BYTES; n++) {
			vgpu_ih_decode(cp, ih->ring + ih->rptr / 4, now);
			ih->rptr = (ih->rptr + VGPU_IH_ENTRY_BYTES) & ih->mask;
		}
		vgpu_wr(cp->vg, VGPU_REG_IH_RB_RPTR, ih->rptr);
	}
out:
	spin_unlock(&ih->lock);
}

static int vgpu_ih_init(struct vt_case *t, struct vgpu_cp *cp)
{
	struct vgpu *vg = cp->vg;
	struct vgpu_ih *ih = &cp->ih;
	u64 wb = cp->wb->gpu + VT_WB_IH_WPTR;
	u32 w;

	ih->bo = vgpu_bo_alloc(t, cp, VT_IH_BYTES, false);
	if (!ih->bo)
		return -ENOMEM;
	ih->ring = ih->bo->cpu;
	ih->mask = VT_IH_BYTES - 1;
	ih->wptr_wb = (__le32 *)((u8 *)cp->wb->cpu + VT_WB_IH_WPTR);

	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, 0);
	vgpu_wr64(vg, VGPU_REG_IH_RB_BASE_LO, VGPU_REG_IH_RB_BASE_HI, ih->bo->gpu);
	vgpu_wr64(vg, VGPU_REG_IH_RB_WPTR_ADDR_LO, VGPU_REG_IH_RB_WPTR_ADDR_HI, wb);
	vgpu_wr(vg, VGPU_REG_IH_DOORBELL_RPTR, 0);
	vgpu_wr(vg, VGPU_REG_IH_MSIX_VECTOR, VT_IH_VECTOR);
	ih->cntl = FIELD_PREP(VGPU_REG_IH_RB_CNTL__RB_SIZE_MASK, ilog2(VT_IH_BYTES / 4)) |
		   VGPU_REG_IH_RB_CNTL__WPTR_WRITEBACK_ENABLE_MASK |
		   VGPU_REG_IH_RB_CNTL__WPTR_OVERFLOW_ENABLE_MASK;
	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, ih->cntl | VGPU_REG_IH_RB_CNTL__WPTR_OVERFLOW_CLEAR_MASK);
	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, ih->cntl);
	ih->cntl |= VGPU_REG_IH_RB_CNTL__RB_ENABLE_MASK | VGPU_REG_IH_RB_CNTL__ENABLE_INTR_MASK;
	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, ih->cntl);

	/* Nothing can raise an IV yet (no queue runs): start reading where the device writes. */
	spin_lock_irq(&ih->lock);
	w = vgpu_rd(vg, VGPU_REG_IH_RB_WPTR) & VGPU_REG_IH_RB_WPTR__OFFSET_MASK & ih->mask;
	ih->rptr = w;
	WRITE_ONCE(*ih->wptr_wb, cpu_to_le32(w));
	vgpu_wr(vg, VGPU_REG_IH_RB_RPTR, w);
	ih->enabled = true;
	spin_unlock_irq(&ih->lock);
	return 0;
}

static void vgpu_ih_slot_get(struct vgpu_cp *cp, unsigned int slot, struct vgpu_ih_slot *out)
{
	unsigned long flags;

	spin_lock_irqsave(&cp->ih.lock, flags);
	*out = cp->ih.slot[slot];
	spin_unlock_irqrestore(&cp->ih.lock, flags);
}

/* ---- set-up and tear-down ---- */

static int vgpu_cp_init(struct vt_case *t)
{
	struct vgpu *vg = t->vg;
	struct device *dev = &vg->pdev->dev;
	struct vgpu_bo *bo, *tmp;
	struct vgpu_cp *cp;
	u64 end;
	int ret;

	BUILD_BUG_ON(VT_GPU_PAGE != VGPU_PTE_PAGE_SIZE);
	cp = kzalloc(sizeof(*cp), GFP_KERNEL);
	if (!cp)
		return vt_reason(t, -ENOMEM, "out of memory");
	cp->vg = vg;
	INIT_LIST_HEAD(&cp->bos);
	spin_lock_init(&cp->ih.lock);

	cp->hqds = vgpu_rd(vg, VGPU_REG_CP_HQD_COUNT);
	cp->pipes = vgpu_rd(vg, VGPU_REG_CP_COMPUTE_PIPES);
	cp->qpp = vgpu_rd(vg, VGPU_REG_CP_QUEUES_PER_PIPE);
	/* Pipes and queues must fit an IV's RING_ID (vgpu_ring_id_slot). */
	if (cp->hqds < 2 || cp->hqds > VGPU_BLOCK_HQD_COUNT || !cp->pipes || !cp->qpp ||
	    cp->pipes > FIELD_MAX(VGPU_IH_RING_ID_PIPE_MASK) + 1 ||
	    cp->qpp > FIELD_MAX(VGPU_IH_RING_ID_QUEUE_MASK) + 1 ||
	    cp->hqds > 1 + cp->pipes * cp->qpp) {
		ret = vt_reason(t, -ENODEV,
				"CP_HQD_COUNT %u, COMPUTE_PIPES %u, QUEUES_PER_PIPE %u: want 2..%u slots, 1 + pipes x queues",
				cp->hqds, cp->pipes, cp->qpp, (u32)VGPU_BLOCK_HQD_COUNT);
		goto err_free;
	}
	cp->fb_base = vgpu_rd64(vg, VGPU_REG_GMC_FB_BASE_LO, VGPU_REG_GMC_FB_BASE_HI);
	cp->vram_size = vgpu_rd64(vg, VGPU_REG_ID_VRAM_SIZE_LO, VGPU_REG_ID_VRAM_SIZE_HI);
	cp->gart_start = VT_GART_START;
	if (cp->gart_start < cp->fb_base + cp->vram_size &&
	    cp->fb_base < cp->gart_start + VT_GART_SIZE)
		cp->gart_start = ALIGN(cp->fb_base + cp->vram_size, SZ_1G);
	end = cp->gart_start + VT_GART_SIZE - 1;
	if (end >= BIT_ULL(VGPU_GPU_VA_BITS)) {
		ret = vt_reason(t, -ENOSPC, "no room for the GART above FB %#llx + %#llx",
				cp->fb_base, cp->vram_size);
		goto err_free;
	}

	cp->gart = dma_alloc_coherent(dev, VT_GART_PAGES * VGPU_PTE_BYTES, &cp->gart_dma,
				      GFP_KERNEL);
	if (!cp->gart) {
		ret = vt_reason(t, -ENOMEM, "dma_alloc_coherent(GART table) failed");
		goto err_free;
	}
	if ((cp->gart_dma & (VT_GPU_PAGE - 1)) || cp->gart_dma > VGPU_PTE_ADDRESS_MASK) {
		ret = vt_reason(t, -ERANGE, "GART table at DMA address %pad: not a PDE address",
				&cp->gart_dma);
		goto err_table;
	}
	memset(cp->gart, 0, VT_GART_PAGES * VGPU_PTE_BYTES);

	/* Off while it is reprogrammed; then on, with every cached translation dropped. */
	vgpu_wr(vg, VGPU_REG_GMC_GART_CNTL, 0);
	vgpu_wr64(vg, VGPU_REG_GMC_GART_START_LO, VGPU_REG_GMC_GART_START_HI, cp->gart_start);
	vgpu_wr64(vg, VGPU_REG_GMC_GART_END_LO, VGPU_REG_GMC_GART_END_HI, end);
	vgpu_wr64(vg, VGPU_REG_GMC_GART_TABLE_LO, VGPU_REG_GMC_GART_TABLE_HI,
		  (cp->gart_dma & VGPU_PTE_ADDRESS_MASK) | VGPU_PTE_VALID_MASK |
		  VGPU_PTE_SYSTEM_MASK);
	vgpu_wr(vg, VGPU_REG_GMC_GART_CNTL, VGPU_REG_GMC_GART_CNTL__ENABLE_MASK);
	vgpu_gart_flush(cp);
	vgpu_wr(vg, VGPU_REG_GMC_VM_FAULT_CNTL, VGPU_REG_GMC_VM_FAULT_CNTL__CLEAR_MASK);
	/* Nothing an earlier driver left in the L2 may reach our memory or our reads. */
	vgpu_wr(vg, VGPU_REG_L2_CNTL, 0);
	vgpu_l2_flush(cp);

	cp->wb = vgpu_bo_alloc(t, cp, VT_WB_BYTES, false);
	if (!cp->wb) {
		ret = -ENOMEM;
		goto err_gart;
	}
	/* From here on the IH vector's handler looks at cp (it does nothing until enabled). */
	smp_store_release(&vg->cp, cp);
	ret = vgpu_ih_init(t, cp);
	if (ret)
		goto err_unpublish;

	vt_note(t,
		"cp: %u HQDs (gfx + %u pipes x %u queues), FB %#llx + %#llx, GART %#llx-%#llx (table %pad), IH %u KiB at %#llx on vector %u",
		cp->hqds, cp->pipes, cp->qpp, cp->fb_base, cp->vram_size, cp->gart_start, end,
		&cp->gart_dma, VT_IH_BYTES / SZ_1K, cp->ih.bo->gpu, VT_IH_VECTOR);
	return 0;

err_unpublish:
	WRITE_ONCE(vg->cp, NULL);
	synchronize_irq(pci_irq_vector(vg->pdev, VT_IH_VECTOR));
err_gart:
	vgpu_wr(vg, VGPU_REG_GMC_GART_CNTL, 0);
	vgpu_wr64(vg, VGPU_REG_GMC_GART_TABLE_LO, VGPU_REG_GMC_GART_TABLE_HI, 0);
	vgpu_gart_flush(cp);
	list_for_each_entry_safe(bo, tmp, &cp->bos, node) {
		dma_free_coherent(dev, bo->size, bo->cpu, bo->dma);
		kfree(bo);
	}
err_table:
	dma_free_coherent(dev, VT_GART_PAGES * VGPU_PTE_BYTES, cp->gart, cp->gart_dma);
err_free:
	kfree(cp);
	return ret;
}

/* The CP state, set up by the first caller. On failure t->err says why. */
static struct vgpu_cp *vgpu_cp_get(struct vt_case *t)
{
	struct vgpu *vg = t->vg;

	if (vg->cp)
		return vg->cp;
	if (vg->cp_failed) {
		vt_reason(t, -EIO, "%s", vg->cp_why);
		return NULL;
	}
	if (vgpu_cp_init(t)) {
		vg->cp_failed = true;
		strscpy(vg->cp_why, t->err, sizeof(vg->cp_why));
		return NULL;
	}
	return vg->cp;
}

/* Stops a queue with DEQUEUE_RESET; a queue that does not stop wedges the CP state. */
static int vgpu_hqd_stop(struct vt_case *t, struct vgpu_cp *cp, unsigned int slot)
{
	struct vgpu *vg = cp->vg;

	if (!(vgpu_hqd_rd(vg, slot, VGPU_REG_HQD_ACTIVE) & 1))
		return 0;
	vgpu_hqd_wr(vg, slot, VGPU_REG_HQD_DEQUEUE_REQUEST, VGPU_HQD_DEQUEUE_RESET);
	if (vgpu_hqd_wait(vg, slot, VGPU_REG_HQD_ACTIVE, 1, 0))
		return 0;
	cp->wedged = true;
	return vt_reason(t, -ETIMEDOUT,
			 "slot %u: HQD_ACTIVE still 1 %u ms after DEQUEUE_RESET (STATUS %#x)",
			 slot, timeout_ms, vgpu_hqd_rd(vg, slot, VGPU_REG_HQD_STATUS));
}

static void __iomem *vgpu_doorbell(struct vgpu_ring *r)
{
	return r->cp->vg->db + (unsigned long)r->doorbell * VGPU_DOORBELL_STRIDE;
}

/*
 * (Re)starts the ring's HQD as amdgpu programs one through MMIO: stop it if it runs, program
 * ring base and size, rptr report address and doorbell while HQD_ACTIVE is 0, then activate.
 * rptr and wptr start at 0; the fence sequence carries on.
 */
static int vgpu_ring_start(struct vt_case *t, struct vgpu_ring *r)
{
	struct vgpu_cp *cp = r->cp;
	struct vgpu *vg = cp->vg;
	unsigned int s = r->slot;
	char st[VT_STATE_LEN];
	unsigned long flags;
	int ret;

	ret = vgpu_hqd_stop(t, cp, s);
	if (ret)
		return ret;
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_DOORBELL_CONTROL, 0);
	/* A polled doorbell shows only changes: no stale value may equal a future wptr. */
	writeq(0, vgpu_doorbell(r));

	r->wptr = 0;
	r->wpos = 0;
	r->wend = 0;
	r->kicked = 0;
	r->rptr = 0;
	r->fence_wptr = 0;
	r->overrun = false;
	WRITE_ONCE(*r->rptr_cpu, 0);
	spin_lock_irqsave(&cp->ih.lock, flags);
	memset(&cp->ih.slot[s], 0, sizeof(cp->ih.slot[s]));
	cp->ih.slot[s].fence = r->fence_cpu;
	cp->ih.slot[s].fence_seen = le32_to_cpu(READ_ONCE(*r->fence_cpu));
	spin_unlock_irqrestore(&cp->ih.lock, flags);

	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_VMID, 0);
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_BASE_LO, lower_32_bits(r->bo->gpu));
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_BASE_HI, upper_32_bits(r->bo->gpu));
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_CONTROL,
		    FIELD_PREP(VGPU_REG_HQD_PQ_CONTROL__QUEUE_SIZE_MASK, ilog2(r->size) - 1));
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_RPTR_REPORT_ADDR_LO, lower_32_bits(r->rptr_gpu));
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_RPTR_REPORT_ADDR_HI, upper_32_bits(r->rptr_gpu));
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_WPTR_POLL_CNTL, 0);
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_WPTR_POLL_ADDR_LO, 0);
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_WPTR_POLL_ADDR_HI, 0);
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_PQ_DOORBELL_CONTROL,
		    FIELD_PREP(VGPU_REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK,
			       r->doorbell * (VGPU_DOORBELL_STRIDE / 4)) |
		    VGPU_REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK);
	vgpu_hqd_wr(vg, s, VGPU_REG_HQD_ACTIVE, 1);

	if (!vgpu_hqd_wait(vg, s, VGPU_REG_HQD_ACTIVE, 1, 1)) {
		vgpu_ring_describe(r, st, sizeof(st));
		return vt_reason(t, -EIO, "HQD_ACTIVE reads 0 after writing 1 (%s)", st);
	}
	if (vgpu_hqd_state(vg, s) == VGPU_HQD_STATE_HALTED) {
		vgpu_ring_describe(r, st, sizeof(st));
		return vt_reason(t, -EIO, "queue halted as it started (%s)", st);
	}
	return 0;
}

static void vgpu_ring_destroy(struct vt_case *t, struct vgpu_ring *r)
{
	struct vgpu_cp *cp;
	unsigned long flags;

	if (!r)
		return;
	cp = r->cp;
	if (vgpu_hqd_stop(t, cp, r->slot))
		return;		/* wedged: everything stays, vgpu_cp_free leaks it */
	vgpu_hqd_wr(cp->vg, r->slot, VGPU_REG_HQD_PQ_DOORBELL_CONTROL, 0);
	spin_lock_irqsave(&cp->ih.lock, flags);
	cp->ih.slot[r->slot].fence = NULL;
	spin_unlock_irqrestore(&cp->ih.lock, flags);
	cp->rings[r->slot] = NULL;
	vgpu_bo_free(cp, r->bo);
	kfree(r);
}

/* The ring sizes an HQD takes: 2^(QUEUE_SIZE+1) dwords, 256 B to 8 MiB. */
#define VT_RING_MIN_BYTES	(4U << (VGPU_CP_QUEUE_SIZE_MIN + 1))
#define VT_RING_MAX_BYTES	(4U << (VGPU_CP_QUEUE_SIZE_MAX + 1))

/* A ring of bytes (a power of two, VT_RING_MIN_BYTES..VT_RING_MAX_BYTES) on HQD slot, started. */
static struct vgpu_ring *vgpu_ring_create(struct vt_case *t, struct vgpu_cp *cp,
					  unsigned int slot, u32 bytes)
{
	struct vgpu_ring *r;
	u32 off;

	if (!is_power_of_2(bytes) || bytes < VT_RING_MIN_BYTES || bytes > VT_RING_MAX_BYTES) {
		vt_reason(t, -EINVAL, "a ring of %u bytes: want a power of two, %u to %u",
			  bytes, VT_RING_MIN_BYTES, VT_RING_MAX_BYTES);
		return NULL;
	}
	if (slot >= cp->hqds) {
		vt_reason(t, -ENODEV, "HQD slot %u: the device has %u", slot, cp->hqds);
		return NULL;
	}
	if (cp->rings[slot]) {
		vt_reason(t, -EBUSY, "HQD slot %u is already in use", slot);
		return NULL;
	}
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r) {
		vt_reason(t, -ENOMEM, "out of memory");
		return NULL;
	}
	r->cp = cp;
	r->slot = slot;
	r->size = bytes / 4;
	r->ring_id = vgpu_slot_ring_id(cp, slot);
	r->doorbell = slot ? VT_DB_MEC + slot - 1 : VT_DB_GFX;
	r->bo = vgpu_bo_alloc(t, cp, bytes, false);
	if (!r->bo) {
		kfree(r);
		return NULL;
	}
	r->ring = r->bo->cpu;
	off = VT_WB_SLOT(slot);
	r->rptr_cpu = (__le32 *)((u8 *)cp->wb->cpu + off);
	r->rptr_gpu = cp->wb->gpu + off;
	r->fence_cpu = (__le32 *)((u8 *)cp->wb->cpu + off + 8);
	r->fence_gpu = cp->wb->gpu + off + 8;
	WRITE_ONCE(*r->fence_cpu, 0);
	cp->rings[slot] = r;
	if (vgpu_ring_start(t, r)) {
		vgpu_ring_destroy(NULL, r);
		return NULL;
	}
	return r;
}

/* Quiesces the engines before remove clears bus mastering. */
static void vgpu_cp_stop(struct vgpu *vg)
{
	struct vgpu_cp *cp = vg->cp;
	unsigned int s;

	if (!cp)
		return;
	for (s = 0; s < cp->hqds; s++) {
		if (cp->rings[s])
			vgpu_ring_destroy(NULL, cp->rings[s]);
		else
			vgpu_hqd_stop(NULL, cp, s);
	}
	spin_lock_irq(&cp->ih.lock);
	cp->ih.enabled = false;
	spin_unlock_irq(&cp->ih.lock);
	vgpu_wr(vg, VGPU_REG_IH_RB_CNTL, 0);
	vgpu_wr(vg, VGPU_REG_L2_CNTL, 0);
	vgpu_l2_flush(cp);
	vgpu_wr(vg, VGPU_REG_GMC_GART_CNTL, 0);
	vgpu_wr64(vg, VGPU_REG_GMC_GART_TABLE_LO, VGPU_REG_GMC_GART_TABLE_HI, 0);
	vgpu_gart_flush(cp);
}

/* Frees the CP memory once no interrupt handler can run. */
static void vgpu_cp_free(struct vgpu *vg)
{
	struct vgpu_cp *cp = vg->cp;
	struct device *dev = &vg->pdev->dev;
	struct vgpu_bo *bo, *tmp;

	if (!cp)
		return;
	vg->cp = NULL;
	if (cp->wedged) {
		dev_warn(dev, "a queue did not stop: leaking the GART, IH and ring memory rather than freeing memory the device may use\n");
		return;
	}
	list_for_each_entry_safe(bo, tmp, &cp->bos, node) {
		dma_free_coherent(dev, bo->size, bo->cpu, bo->dma);
		kfree(bo);
	}
	dma_free_coherent(dev, VT_GART_PAGES * VGPU_PTE_BYTES, cp->gart, cp->gart_dma);
	kfree(cp);
}

/* ---- submission ---- */

/* Driver-side fence sample: counts values that went backwards. */
static u32 vgpu_fence_read(struct vgpu_ring *r)
{
	u32 v = le32_to_cpu(READ_ONCE(*r->fence_cpu));

	if ((s32)(v - r->fence_seen) < 0)
		r->fence_backwards++;
	r->fence_seen = v;
	return v;
}

static bool vgpu_fence_done(struct vgpu_ring *r, u32 seq)
{
	return (s32)(vgpu_fence_read(r) - seq) >= 0;
}

/*
 * Extends the 32-bit rptr report (dwords, wrapping with the ring) to the monotonic count. The
 * report alone cannot tell a full ring from a consumed one; when the last thing given to the
 * device was a fence and that fence has landed, all of it was consumed.
 */
static void vgpu_ring_update_rptr(struct vgpu_ring *r)
{
	u32 rep = le32_to_cpu(READ_ONCE(*r->rptr_cpu));
	u32 delta = (rep - (u32)r->rptr) & (r->size - 1);
	u64 inflight = r->kicked - r->rptr;

	if (delta && delta <= inflight)
		r->rptr += delta;
	else if (!delta && inflight == r->size && r->fence_wptr == r->kicked &&
		 vgpu_fence_done(r, r->seq))
		r->rptr = r->kicked;
}

/* Tells the device about the committed packets through the doorbell. */
static void vgpu_ring_kick(struct vgpu_ring *r)
{
	/* The packets are in memory before the device hears of them. */
	wmb();
	r->kicked = r->wptr;
	writeq(r->wptr, vgpu_doorbell(r));
}

/* The same through the PQ_WPTR registers. */
static void vgpu_ring_kick_mmio(struct vgpu_ring *r)
{
	struct vgpu *vg = r->cp->vg;

	/* The packets are in memory before the device hears of them. */
	wmb();
	r->kicked = r->wptr;
	/* High half first, so the low write moves the pointer (the high half stays 0 here). */
	vgpu_hqd_wr(vg, r->slot, VGPU_REG_HQD_PQ_WPTR_HI, upper_32_bits(r->wptr));
	vgpu_hqd_wr(vg, r->slot, VGPU_REG_HQD_PQ_WPTR_LO, lower_32_bits(r->wptr));
}

/* Reserves ndw dwords, waiting (with a progress timeout) for the CP to free space. */
static int vgpu_ring_alloc(struct vt_case *t, struct vgpu_ring *r, u32 ndw)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	char st[VT_STATE_LEN];
	u64 last = r->rptr;

	if (ndw > r->size)
		return vt_reason(t, -EINVAL, "%u dwords do not fit a ring of %u", ndw, r->size);
	for (;;) {
		vgpu_ring_update_rptr(r);
		if (r->size - (r->wptr - r->rptr) >= ndw)
			break;
		/* What is committed but not kicked can never be consumed. */
		if (r->kicked != r->wptr)
			vgpu_ring_kick(r);
		if (r->rptr != last) {
			last = r->rptr;
			deadline = jiffies + msecs_to_jiffies(timeout_ms);
		}
		if (time_after(jiffies, deadline)) {
			vgpu_ring_describe(r, st, sizeof(st));
			return vt_reason(t, -ETIMEDOUT,
					 "no room for %u dwords: rptr stuck at %llu for %u ms (%s)",
					 ndw, r->rptr, timeout_ms, st);
		}
		usleep_range(10, 20);
	}
	r->wpos = r->wptr;
	r->wend = r->wptr + ndw;
	return 0;
}

static void vgpu_ring_put(struct vgpu_ring *r, const u32 *p, unsigned int n)
{
	while (n--) {
		if (r->wpos >= r->wend) {
			r->overrun = true;
			return;
		}
		r->ring[r->wpos++ & (r->size - 1)] = cpu_to_le32(*p++);
	}
}

static void vgpu_ring_commit(struct vgpu_ring *r)
{
	r->wptr = r->wpos;
}

/* ---- PM4 packets (layouts of docs/device.md; as amdgpu's gfx11 code builds them) ---- */

static unsigned int pm4_nops(u32 *p, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		p[i] = VGPU_PM4_NOP_ONE_DWORD;
	return n;
}

/* One NOP packet covering n >= 2 dwords (amdgpu's ring padding). */
static unsigned int pm4_nop_big(u32 *p, unsigned int n)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_NOP, n - 2);
	memset(p + 1, 0, (n - 1) * sizeof(*p));
	return n;
}

/* SET_UCONFIG_REG of one register given by its register-BAR byte offset. */
static unsigned int pm4_set_uconfig(u32 *p, u32 reg, u32 val)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_SET_UCONFIG_REG, 1);
	p[1] = FIELD_PREP(VGPU_PM4_SET_REG_OFFSET_MASK, reg / 4 - VGPU_PM4_SPACE_UCONFIG_BASE);
	p[2] = val;
	return 3;
}

static unsigned int pm4_write_data(u32 *p, u32 dst_sel, u32 policy, u64 addr, const u32 *data,
				   unsigned int n)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_WRITE_DATA, 2 + n);
	p[1] = FIELD_PREP(VGPU_PM4_WRITE_DATA_DST_SEL_MASK, dst_sel) |
	       VGPU_PM4_WRITE_DATA_WR_CONFIRM_MASK |
	       FIELD_PREP(VGPU_PM4_WRITE_DATA_CACHE_POLICY_MASK, policy);
	p[2] = lower_32_bits(addr);
	p[3] = upper_32_bits(addr);
	memcpy(p + 4, data, n * sizeof(*p));
	return 4 + n;
}

static unsigned int pm4_write_one(u32 *p, u32 dst_sel, u32 policy, u64 addr, u32 val)
{
	return pm4_write_data(p, dst_sel, policy, addr, &val, 1);
}

/* RELEASE_MEM: end-of-pipe event with cache actions gcr, data write to memory, interrupt. */
static unsigned int pm4_release_mem(u32 *p, u32 gcr, u32 data_sel, u32 int_sel, u64 addr,
				    u64 data, u32 ctxid)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_RELEASE_MEM, 6);
	p[1] = FIELD_PREP(VGPU_PM4_RELEASE_MEM_EVENT_TYPE_MASK,
			  VGPU_PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT) |
	       FIELD_PREP(VGPU_PM4_RELEASE_MEM_EVENT_INDEX_MASK, VGPU_PM4_EVENT_INDEX_EOP) |
	       gcr | FIELD_PREP(VGPU_PM4_RELEASE_MEM_CACHE_POLICY_MASK,
				VGPU_PM4_CACHE_POLICY_BYPASS);
	p[2] = FIELD_PREP(VGPU_PM4_RELEASE_MEM_DST_SEL_MASK, VGPU_PM4_RELEASE_MEM_DST_SEL_MEM) |
	       FIELD_PREP(VGPU_PM4_RELEASE_MEM_INT_SEL_MASK, int_sel) |
	       FIELD_PREP(VGPU_PM4_RELEASE_MEM_DATA_SEL_MASK, data_sel);
	p[3] = lower_32_bits(addr);
	p[4] = upper_32_bits(addr);
	p[5] = lower_32_bits(data);
	p[6] = upper_32_bits(data);
	p[7] = ctxid;
	return VT_FENCE_DW;
}

static unsigned int pm4_ib(u32 *p, u64 addr, u32 ndw, bool chain)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_INDIRECT_BUFFER, 2);
	p[1] = lower_32_bits(addr);
	p[2] = upper_32_bits(addr);
	p[3] = FIELD_PREP(VGPU_PM4_IB_SIZE_MASK, ndw) | VGPU_PM4_IB_VALID_MASK |
	       (chain ? VGPU_PM4_IB_CHAIN_MASK : 0);
	return 4;
}

/* WAIT_REG_MEM on a memory dword: wait until (*addr & mask) == ref. */
static unsigned int pm4_wait_mem_eq(u32 *p, u64 addr, u32 ref, u32 mask, u32 policy)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_WAIT_REG_MEM, 5);
	p[1] = FIELD_PREP(VGPU_PM4_WAIT_REG_MEM_FUNCTION_MASK, VGPU_PM4_WAIT_REG_MEM_FUNCTION_EQ) |
	       FIELD_PREP(VGPU_PM4_WAIT_REG_MEM_MEM_SPACE_MASK,
			  VGPU_PM4_WAIT_REG_MEM_MEM_SPACE_MEM) |
	       FIELD_PREP(VGPU_PM4_WAIT_REG_MEM_OPERATION_MASK,
			  VGPU_PM4_WAIT_REG_MEM_OPERATION_WAIT) |
	       FIELD_PREP(VGPU_PM4_WAIT_REG_MEM_CACHE_POLICY_MASK, policy);
	p[2] = lower_32_bits(addr);
	p[3] = upper_32_bits(addr);
	p[4] = ref;
	p[5] = mask;
	p[6] = FIELD_PREP(VGPU_PM4_WAIT_REG_MEM_POLL_INTERVAL_MASK, 10);
	return 7;
}

/* ACQUIRE_MEM over everything (size 0xFFFFFFFF/0xFF) with the GCR_CNTL actions gcr. */
static unsigned int pm4_acquire_mem(u32 *p, u32 gcr)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_ACQUIRE_MEM, 6);
	p[1] = 0;
	p[2] = 0xffffffff;
	p[3] = 0xff;
	p[4] = 0;
	p[5] = 0;
	p[6] = 0xa;
	p[7] = gcr;
	return 8;
}

/* DMA_DATA DW1: selects and cache policies, always with CP_SYNC. */
static u32 vt_dma_ctl(u32 src_sel, u32 src_policy, u32 dst_sel, u32 dst_policy)
{
	return FIELD_PREP(VGPU_PM4_DMA_DATA_SRC_SEL_MASK, src_sel) |
	       FIELD_PREP(VGPU_PM4_DMA_DATA_SRC_CACHE_POLICY_MASK, src_policy) |
	       FIELD_PREP(VGPU_PM4_DMA_DATA_DST_SEL_MASK, dst_sel) |
	       FIELD_PREP(VGPU_PM4_DMA_DATA_DST_CACHE_POLICY_MASK, dst_policy) |
	       VGPU_PM4_DMA_DATA_CP_SYNC_MASK;
}

/* A copy through the L2 (address via L2, LRU) on both sides. */
#define VT_DMA_CTL_L2	vt_dma_ctl(VGPU_PM4_DMA_DATA_SEL_ADDR_L2, VGPU_PM4_CACHE_POLICY_LRU, \
				   VGPU_PM4_DMA_DATA_SEL_ADDR_L2, VGPU_PM4_CACHE_POLICY_LRU)

/* DMA_DATA: copy bytes from src to dst, or fill (SRC_SEL DATA: src is the value). */
static unsigned int pm4_dma_data(u32 *p, u32 ctl, u64 src, u64 dst, u32 bytes)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_DMA_DATA, 5);
	p[1] = ctl;
	p[2] = lower_32_bits(src);
	p[3] = upper_32_bits(src);
	p[4] = lower_32_bits(dst);
	p[5] = upper_32_bits(dst);
	p[6] = FIELD_PREP(VGPU_PM4_DMA_DATA_BYTE_COUNT_MASK, bytes);
	return 7;
}

/* Writes a fence with cache actions gcr and the next sequence number (also its ctxid). */
static u32 vgpu_ring_fence_gcr(struct vgpu_ring *r, u32 gcr, bool irq)
{
	u32 p[VT_FENCE_DW];

	r->seq++;
	vgpu_ring_put(r, p, pm4_release_mem(p, gcr, VGPU_PM4_RELEASE_MEM_DATA_SEL_32,
					    irq ? VGPU_PM4_RELEASE_MEM_INT_SEL_IRQ_CONFIRM :
						  VGPU_PM4_RELEASE_MEM_INT_SEL_NONE,
					    r->fence_gpu, r->seq, r->seq));
	r->fence_wptr = r->wpos;
	return r->seq;
}

/* The fence gfx11 emits: L2 written back, then the seq, then (irq) the EOP interrupt. */
static u32 vgpu_ring_fence(struct vgpu_ring *r, bool irq)
{
	return vgpu_ring_fence_gcr(r, VT_GCR_FENCE, irq);
}

/* Polls the fence memory until it reaches seq; gives up after timeout_ms without progress. */
static int vgpu_fence_wait(struct vt_case *t, struct vgpu_ring *r, u32 seq)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	char st[VT_STATE_LEN];
	u32 v, last;

	if (r->kicked != r->wptr)
		vgpu_ring_kick(r);
	last = vgpu_fence_read(r);
	for (;;) {
		v = vgpu_fence_read(r);
		if ((s32)(v - seq) >= 0)
			return 0;
		if (v != last) {
			last = v;
			deadline = jiffies + msecs_to_jiffies(timeout_ms);
		}
		if (time_after(jiffies, deadline))
			break;
		usleep_range(10, 20);
	}
	vgpu_ring_describe(r, st, sizeof(st));
	return vt_reason(t, -ETIMEDOUT, "fence %u not reached in %u ms, it reads %u (%s)",
			 seq, timeout_ms, v, st);
}

/* Waits (on the interrupt waitqueue) until the slot has seen count EOP IVs. */
static int vgpu_eop_wait(struct vt_case *t, struct vgpu_ring *r, u32 count)
{
	struct vgpu_cp *cp = r->cp;
	struct vgpu *vg = cp->vg;
	struct vgpu_ih_slot *s = &cp->ih.slot[r->slot];

	if (wait_event_timeout(vg->wq, (s32)(READ_ONCE(s->eop) - count) >= 0,
			       msecs_to_jiffies(timeout_ms)))
		return 0;
	return vt_reason(t, -ETIMEDOUT,
			 "slot %u (ring id %#x): %u EOP IVs after %u ms, want %u (vector %u: %d interrupts, IH_ENTRIES %u, decoded %u)",
			 r->slot, r->ring_id, READ_ONCE(s->eop), timeout_ms, count, VT_IH_VECTOR,
			 atomic_read(&vg->vecs[VT_IH_VECTOR].count),
			 vgpu_rd(vg, VGPU_REG_IH_ENTRIES), READ_ONCE(cp->ih.ivs));
}

/* Waits until the slot has seen count CP error IVs. */
static int vgpu_err_wait(struct vt_case *t, struct vgpu_ring *r, u32 count)
{
	struct vgpu_cp *cp = r->cp;
	struct vgpu_ih_slot *s = &cp->ih.slot[r->slot];

	if (wait_event_timeout(cp->vg->wq, (s32)(READ_ONCE(s->err) - count) >= 0,
			       msecs_to_jiffies(timeout_ms)))
		return 0;
	return vt_reason(t, -ETIMEDOUT,
			 "slot %u (ring id %#x): %u error IVs after %u ms, want %u (IH_ENTRIES %u, unknown IVs %u, last %#010x)",
			 r->slot, r->ring_id, READ_ONCE(s->err), timeout_ms, count,
			 vgpu_rd(cp->vg, VGPU_REG_IH_ENTRIES), READ_ONCE(cp->ih.unknown),
			 READ_ONCE(cp->ih.unknown_dw0));
}

/* Submits n dwords of packets plus an interrupting fence and waits for the fence. */
static int vgpu_submit_wait(struct vt_case *t, struct vgpu_ring *r, const u32 *p, unsigned int n)
{
	int ret = vgpu_ring_alloc(t, r, n + VT_FENCE_DW);
	u32 seq;

	if (ret)
		return ret;
	vgpu_ring_put(r, p, n);
	seq = vgpu_ring_fence(r, true);
	vgpu_ring_commit(r);
	vgpu_ring_kick(r);
	return vgpu_fence_wait(t, r, seq);
}

/* The compute HQD slot of pipe/queue (ME 1), numbered as the CP does. */
static unsigned int vt_compute_slot(struct vgpu_cp *cp, unsigned int pipe, unsigned int queue)
{
	return 1 + (pipe % cp->pipes) * cp->qpp + queue % cp->qpp;
}

/* A CP case's subtests when the CP could not be set up. */
static enum vt_res vt_cp_unavailable(struct vt_case *t, const char *const *names,
				     unsigned int count)
{
	vt_sub_skip(t, names, count, "no CP");
	return vt_fail(t, "CP setup failed: %s", t->err);
}

/* Every subtest of a case that could not get its resources fails with the same reason. */
static void vt_sub_fail_all(struct vt_case *t, const char *const *names, unsigned int count)
{
	unsigned int i;

	for (i = 0; i < count; i++)
		vt_check(t, false, names[i], "%s", t->err);
}

static enum vt_res vt_cp_end(struct vt_case *t, struct vgpu_cp *cp)
{
	if (cp->wedged)
		return vt_fail(t, "a queue did not stop (its memory is leaked): %s", t->err);
	return VT_PASS;
}

/* ---- command processor cases ---- */

#define VT_FENCE_QUEUES		4
#define VT_FENCE_PER_PIPE	(VT_FENCE_QUEUES / VGPU_CP_COMPUTE_PIPES)	/* on each pipe */
#define VT_FENCE_IRQ_EVERY	4	/* every 4th fence (and its last) interrupts */
#define VT_FENCE_KICK_EVERY	8	/* doorbell every 8 jobs of a queue */
#define VT_JOB_DW		(5 + VT_FENCE_DW)	/* WRITE_DATA of one dword + fence */
#define VT_LAT_SAMPLES		200
#define VT_WRAP_BYTES		SZ_1K
#define VT_WRAP_JOBS		64
#define VT_WRAP_FULL_JOBS	8	/* jobs of 32 dwords filling the 256-dword ring */
#define VT_DMA_BYTES		SZ_64K
#define VT_CACHE_BYTES		(2 * VGPU_L2_LINE_BYTES)	/* two L2 lines */

/* One ring test (gfx_v11_0_ring_test_ring): SET_UCONFIG_REG SCRATCH_0, read back over MMIO. */
static int vgpu_ring_test_one(struct vt_case *t, struct vgpu_ring *r, bool mmio)
{
	struct vgpu *vg = r->cp->vg;
	unsigned long deadline;
	char st[VT_STATE_LEN];
	u32 p[3], v;
	int ret;

	vgpu_wr(vg, VGPU_REG_SCRATCH_0, 0xCAFEDEAD);
	ret = vgpu_ring_alloc(t, r, 3);
	if (ret)
		return ret;
	vgpu_ring_put(r, p, pm4_set_uconfig(p, VGPU_REG_SCRATCH_0, 0xDEADBEEF));
	vgpu_ring_commit(r);
	if (mmio)
		vgpu_ring_kick_mmio(r);
	else
		vgpu_ring_kick(r);
	deadline = jiffies + msecs_to_jiffies(timeout_ms);
	for (;;) {
		v = vgpu_rd(vg, VGPU_REG_SCRATCH_0);
		if (v == 0xDEADBEEF)
			return 0;
		if (time_after(jiffies, deadline))
			break;
		usleep_range(10, 20);
	}
	vgpu_ring_describe(r, st, sizeof(st));
	return vt_reason(t, -ETIMEDOUT,
			 "SCRATCH_0 reads %#010x %u ms after the %s, want 0xdeadbeef (%s)",
			 v, timeout_ms, mmio ? "PQ_WPTR write" : "doorbell", st);
}

static enum vt_res t_ring_test(struct vt_case *t)
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
		vt_check(t, !vgpu_ring_test_one(t, r, false), names[i], "%s", t->err);
		if (i)
			vt_check(t, !vgpu_ring_test_one(t, r, true), names[2], "%s", t->err);
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

static enum vt_res t_ib_test(struct vt_case *t)
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

static enum vt_res t_ib2_chain(struct vt_case *t)
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

static int vt_cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
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

static enum vt_res t_fences(struct vt_case *t)
{
	static const char *const names[] = {
		"queue_0", "queue_1", "queue_2", "queue_3", "no_lost_interrupts", "latency",
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
	int ret = 0;

	BUILD_BUG_ON(ARRAY_SIZE(names) != VT_FENCE_QUEUES + 2);
	BUILD_BUG_ON(VT_FENCE_QUEUES % VGPU_CP_COMPUTE_PIPES);
	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	scratch = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	lat = kcalloc(VT_LAT_SAMPLES, sizeof(*lat), GFP_KERNEL);
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

	if (!ret)
		ret = vgpu_fence_latency(t, r[0], lat, VT_LAT_SAMPLES);
	if (!ret) {
		sort(lat, VT_LAT_SAMPLES, sizeof(*lat), vt_cmp_u64, NULL);
		vt_note(t, "fence_latency_us: median=%llu p99=%llu",
			div_u64(lat[VT_LAT_SAMPLES / 2], NSEC_PER_USEC),
			div_u64(lat[VT_LAT_SAMPLES * 99 / 100], NSEC_PER_USEC));
		vt_note(t,
			"fence_latency: %u single-fence submits on slot %u, doorbell to IH handler: min %llu us, max %llu us",
			VT_LAT_SAMPLES, r[0]->slot, div_u64(lat[0], NSEC_PER_USEC),
			div_u64(lat[VT_LAT_SAMPLES - 1], NSEC_PER_USEC));
	}
	vt_check(t, !ret, names[5], "%s", t->err);
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
static enum vt_res t_semaphore(struct vt_case *t)
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

/* Host data path handshakes as amdgpu does them around CPU access to VRAM. */
static void vgpu_hdp_flush(struct vgpu *vg)
{
	/* The CPU's BAR0 writes leave the write-combining buffers, then the HDP. */
	wmb();
	vgpu_wr(vg, VGPU_REG_HDP_MEM_FLUSH_CNTL, 0);
	vgpu_rd(vg, VGPU_REG_HDP_FLUSHES);
}

static void vgpu_hdp_invalidate(struct vgpu *vg)
{
	vgpu_wr(vg, VGPU_REG_HDP_READ_CACHE_INVALIDATE, 1);
	vgpu_rd(vg, VGPU_REG_HDP_FLUSHES);
}

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

static enum vt_res t_dma_data(struct vt_case *t)
{
	static const char *const names[] = {
		"fb_base", "sys_to_vram", "vram_to_sys", "fill_vram", "fill_sys",
		"no_l2_violations",
	};
	const u32 nd = VT_DMA_BYTES / 4;
	struct vgpu_bo *src = NULL, *dst = NULL;
	struct vgpu *vg = t->vg;
	struct vgpu_ring *r = NULL;
	u32 p[32], n, i, pattern, stale, dirty, g1, g2, *buf;
	u64 off, fb;
	char why[VT_WHY_LEN];
	struct vgpu_cp *cp;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	fb = cp->fb_base;
	vt_check(t, fb == VGPU_GPU_FB_BASE, names[0], "GMC_FB_BASE %#llx, want %#llx", fb,
		 (u64)VGPU_GPU_FB_BASE);
	if (vg->vram_len < SZ_1M) {
		vt_sub_skip(t, names + 1, ARRAY_SIZE(names) - 1, "BAR0 smaller than 1 MiB");
		return vt_cp_end(t, cp);
	}
	buf = kmalloc(VT_DMA_BYTES, GFP_KERNEL);
	if (!buf)
		vt_reason(t, -ENOMEM, "out of memory");
	else
		src = vgpu_bo_alloc(t, cp, VT_DMA_BYTES, true);
	if (src)
		dst = vgpu_bo_alloc(t, cp, VT_DMA_BYTES, true);
	if (dst)
		r = vgpu_ring_create(t, cp, vt_compute_slot(cp, 0, 3), VT_RING_BYTES);
	if (!r) {
		vt_sub_fail_all(t, names + 1, ARRAY_SIZE(names) - 1);
		goto out;
	}
	/* Three 64 KiB VRAM areas in the middle of BAR0: copy target, copy source, fill. */
	off = ALIGN_DOWN(vg->vram_len / 2, SZ_64K);
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
	vgpu_l2_flush(cp);
out:
	vgpu_ring_destroy(t, r);
	vgpu_bo_free(cp, dst);
	vgpu_bo_free(cp, src);
	kfree(buf);
	return vt_cp_end(t, cp);
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

static enum vt_res t_cache(struct vt_case *t)
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
	vgpu_l2_flush(cp);
out:
	vgpu_ring_destroy(t, r);
	vgpu_bo_free(cp, nc);
	return vt_cp_end(t, cp);
}

#define VT_BAD_OPCODE	0xEE
#define VT_MARK_Y	0x7A7A0001

static enum vt_res t_bad_packet(struct vt_case *t)
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

static enum vt_res t_ring_wrap(struct vt_case *t)
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
	{ "ring_test", t_ring_test },
	{ "ib_test", t_ib_test },
	{ "ib2_chain", t_ib2_chain },
	{ "fences", t_fences },
	{ "semaphore", t_semaphore },
	{ "dma_data", t_dma_data },
	{ "cache", t_cache },
	{ "bad_packet", t_bad_packet },
	{ "ring_wrap", t_ring_wrap },
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

	/* Engines stopped, IH and GART off; no new DMA from here on; then let a transfer end. */
	vgpu_cp_stop(vg);
	pci_clear_master(pdev);
	st = vgpu_dma_wait_idle(vg);

	for (i = 0; i < vg->nvec; i++)
		free_irq(pci_irq_vector(pdev, i), &vg->vecs[i]);
	pci_free_irq_vectors(pdev);
	kfree(vg->vecs);
	vgpu_cp_free(vg);

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
	char *buf, *s, *tok, known[256];
	unsigned int i, n = 0;
	int ret = 0;

	BUILD_BUG_ON(ARRAY_SIZE(vt_defs) > BITS_PER_LONG);
	for (i = 0; i < ARRAY_SIZE(vt_defs); i++)
		n += scnprintf(known + n, sizeof(known) - n, "%s%s", i ? ", " : "",
			       vt_defs[i].name);
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
			pr_err("vgpu_test: unknown test \"%s\" in tests=; known: %s\n", tok, known);
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
