/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The bound device as every part of the module sees it: the PCI function's state, register
 * access, and the interrupt and self-test DMA helpers (hw.c). The command processor driver
 * is in cp.h.
 */
#ifndef VT_VGPU_H
#define VT_VGPU_H

#include <linux/atomic.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/pci.h>
#include <linux/sizes.h>
#include <linux/types.h>
#include <linux/wait.h>

#include "vgpu_abi.h"
#include "ktap.h"

#define VT_DMA_BIG		SZ_64K
#define VT_DMA_BIG_LEN		(SZ_64K - SZ_4K) /* leaves a tail the device must not touch */
#define VT_DMA_SMALL		SZ_4K
/* Time for a stray or duplicate interrupt to show up. */
#define VT_SETTLE_MS		100
#define VT_IH_VECTOR		0	/* the MSI-X vector of the IH ring */

/* Module parameters (main.c). */
extern uint timeout_ms;
extern uint fence_jobs;
extern uint job_timeout_ms;

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

/* ---- register access ---- */

static inline u32 vgpu_rd(struct vgpu *vg, unsigned long off)
{
	return ioread32(vg->regs + off);
}

static inline void vgpu_wr(struct vgpu *vg, unsigned long off, u32 val)
{
	iowrite32(val, vg->regs + off);
}

static inline u32 vgpu_hqd_rd(struct vgpu *vg, unsigned int slot, u32 reg)
{
	return vgpu_rd(vg, VGPU_HQD_REG(slot, reg));
}

static inline void vgpu_hqd_wr(struct vgpu *vg, unsigned int slot, u32 reg, u32 val)
{
	vgpu_wr(vg, VGPU_HQD_REG(slot, reg), val);
}

static inline u64 vgpu_rd64(struct vgpu *vg, unsigned long lo, unsigned long hi)
{
	return (u64)vgpu_rd(vg, hi) << 32 | vgpu_rd(vg, lo);
}

static inline void vgpu_wr64(struct vgpu *vg, unsigned long lo, unsigned long hi, u64 val)
{
	vgpu_wr(vg, lo, lower_32_bits(val));
	vgpu_wr(vg, hi, upper_32_bits(val));
}

/* ---- probe.c: bringing the PCI function up and down ---- */

int vgpu_setup(struct vgpu *vg, char *why, size_t whylen);
void vgpu_teardown(struct vgpu *vg);

/* ---- hw.c: interrupts, self-test DMA, HDP ---- */

irqreturn_t vgpu_isr(int irq, void *data);
bool vgpu_irq_roundtrip(struct vgpu *vg, unsigned int k);
const char *vgpu_status_name(u32 st);
u32 vgpu_dma_wait_idle(struct vgpu *vg);
u32 vgpu_dma_pattern(void);
bool vgpu_dma_check(struct vgpu *vg, void *buf, dma_addr_t addr, size_t size, u32 len,
		    int vector, char *why, size_t whylen);
bool vgpu_dma_refused(struct vgpu *vg, u32 len, u32 want_status, char *why, size_t whylen);
void vgpu_hdp_flush(struct vgpu *vg);
void vgpu_hdp_invalidate(struct vgpu *vg);

#endif /* VT_VGPU_H */
