// SPDX-License-Identifier: GPL-2.0
/*
 * Register-level helpers of the PCI function: the interrupt handler, the self-test
 * interrupt and DMA engine, and the HDP handshakes.
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/random.h>
#include <linux/string.h>
#include <linux/wait.h>

#include "cp.h"
#include "vgpu.h"

irqreturn_t vgpu_isr(int irq, void *data)
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

/* Raises vector k through SELFTEST_IRQ and waits for its handler. */
bool vgpu_irq_roundtrip(struct vgpu *vg, unsigned int k)
{
	int base = atomic_read(&vg->vecs[k].count);

	vgpu_wr(vg, VGPU_REG_SELFTEST_IRQ, k);
	return wait_event_timeout(vg->wq, atomic_read(&vg->vecs[k].count) != base,
				  msecs_to_jiffies(timeout_ms)) != 0;
}

const char *vgpu_status_name(u32 st)
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
u32 vgpu_dma_wait_idle(struct vgpu *vg)
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
u32 vgpu_dma_pattern(void)
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
bool vgpu_dma_check(struct vgpu *vg, void *buf, dma_addr_t addr, size_t size, u32 len,
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
bool vgpu_dma_refused(struct vgpu *vg, u32 len, u32 want_status, char *why,
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

/* Host data path handshakes as amdgpu does them around CPU access to VRAM. */
void vgpu_hdp_flush(struct vgpu *vg)
{
	/* The CPU's BAR0 writes leave the write-combining buffers, then the HDP. */
	wmb();
	vgpu_wr(vg, VGPU_REG_HDP_MEM_FLUSH_CNTL, 0);
	vgpu_rd(vg, VGPU_REG_HDP_FLUSHES);
}

void vgpu_hdp_invalidate(struct vgpu *vg)
{
	vgpu_wr(vg, VGPU_REG_HDP_READ_CACHE_INVALIDATE, 1);
	vgpu_rd(vg, VGPU_REG_HDP_FLUSHES);
}
