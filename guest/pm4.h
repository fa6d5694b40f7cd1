/* SPDX-License-Identifier: GPL-2.0 */
/*
 * PM4 packet builders: the layouts of docs/device.md, as amdgpu's gfx11 code builds them.
 * Each writes a packet into p and returns its length in dwords.
 */
#ifndef VT_PM4_H
#define VT_PM4_H

#include <linux/bitfield.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include <linux/types.h>

#include "vgpu_abi.h"

#define VT_FENCE_DW		8	/* a RELEASE_MEM */
#define VT_JOB_DW		(5 + VT_FENCE_DW)	/* WRITE_DATA of one dword + fence */

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

static inline unsigned int pm4_nops(u32 *p, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		p[i] = VGPU_PM4_NOP_ONE_DWORD;
	return n;
}

/* One NOP packet covering n >= 2 dwords (amdgpu's ring padding). */
static inline unsigned int pm4_nop_big(u32 *p, unsigned int n)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_NOP, n - 2);
	memset(p + 1, 0, (n - 1) * sizeof(*p));
	return n;
}

/* SET_UCONFIG_REG of one register given by its register-BAR byte offset. */
static inline unsigned int pm4_set_uconfig(u32 *p, u32 reg, u32 val)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_SET_UCONFIG_REG, 1);
	p[1] = FIELD_PREP(VGPU_PM4_SET_REG_OFFSET_MASK, reg / 4 - VGPU_PM4_SPACE_UCONFIG_BASE);
	p[2] = val;
	return 3;
}

static inline unsigned int pm4_write_data(u32 *p, u32 dst_sel, u32 policy, u64 addr,
					  const u32 *data, unsigned int n)
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

static inline unsigned int pm4_write_one(u32 *p, u32 dst_sel, u32 policy, u64 addr, u32 val)
{
	return pm4_write_data(p, dst_sel, policy, addr, &val, 1);
}

/* RELEASE_MEM: end-of-pipe event with cache actions gcr, data write to memory, interrupt. */
static inline unsigned int pm4_release_mem(u32 *p, u32 gcr, u32 data_sel, u32 int_sel, u64 addr,
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

static inline unsigned int pm4_ib(u32 *p, u64 addr, u32 ndw, bool chain)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_INDIRECT_BUFFER, 2);
	p[1] = lower_32_bits(addr);
	p[2] = upper_32_bits(addr);
	p[3] = FIELD_PREP(VGPU_PM4_IB_SIZE_MASK, ndw) | VGPU_PM4_IB_VALID_MASK |
	       (chain ? VGPU_PM4_IB_CHAIN_MASK : 0);
	return 4;
}

/* An INDIRECT_BUFFER run in a process VMID (amdgpu: the IB's vmid in CONTROL [27:24]). */
static inline unsigned int pm4_ib_vmid(u32 *p, u64 addr, u32 ndw, unsigned int vmid)
{
	pm4_ib(p, addr, ndw, false);
	p[3] |= FIELD_PREP(VGPU_PM4_IB_VMID_MASK, vmid);
	return 4;
}

/* INVALIDATE_TLBS by PASID on every hub, as gfx10_kiq_invalidate_tlbs emits it. */
static inline unsigned int pm4_invalidate_tlbs(u32 *p, u16 pasid, u32 flush_type)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_INVALIDATE_TLBS, 0);
	p[1] = FIELD_PREP(VGPU_PM4_INVALIDATE_TLBS_DST_SEL_MASK, 1) |
	       VGPU_PM4_INVALIDATE_TLBS_ALL_HUB_MASK |
	       FIELD_PREP(VGPU_PM4_INVALIDATE_TLBS_PASID_MASK, pasid) |
	       FIELD_PREP(VGPU_PM4_INVALIDATE_TLBS_FLUSH_TYPE_MASK, flush_type);
	return 2;
}

/* WAIT_REG_MEM on a memory dword: wait until (*addr & mask) == ref. */
static inline unsigned int pm4_wait_mem_eq(u32 *p, u64 addr, u32 ref, u32 mask, u32 policy)
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
static inline unsigned int pm4_acquire_mem(u32 *p, u32 gcr)
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
static inline u32 vt_dma_ctl(u32 src_sel, u32 src_policy, u32 dst_sel, u32 dst_policy)
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
static inline unsigned int pm4_dma_data(u32 *p, u32 ctl, u64 src, u64 dst, u32 bytes)
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

/* SET_SH_REG of n registers from reg, a dword offset in the SH space (COMPUTE_USER_DATA_0..). */
static inline unsigned int pm4_set_sh(u32 *p, u32 reg, const u32 *vals, unsigned int n)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_SET_SH_REG, n);
	p[1] = FIELD_PREP(VGPU_PM4_SET_REG_OFFSET_MASK, reg);
	memcpy(p + 2, vals, n * sizeof(*p));
	return 2 + n;
}

/* DISPATCH_DIRECT of x*y*z workgroups of the built-in kernel named by COMPUTE_USER_DATA_0. */
static inline unsigned int pm4_dispatch_direct(u32 *p, u32 x, u32 y, u32 z)
{
	p[0] = VT_PKT3(VGPU_PM4_IT_DISPATCH_DIRECT, 3);
	p[1] = x;
	p[2] = y;
	p[3] = z;
	p[4] = 1;	/* DISPATCH_INITIATOR: COMPUTE_SHADER_EN */
	return 5;
}

/*
 * The SET_SH_REG packets of a shader dispatch (docs/shader.md): the program at prog (256-byte
 * aligned, slots instruction slots), workgroups of tx*ty*tz work-items from group id 0, the
 * default stack, the argument block at args (R1). VT_SHADER_DW dwords.
 */
#define VT_SHADER_DW		22
static inline unsigned int pm4_shader(u32 *p, u64 prog, u32 slots, u32 tx, u32 ty, u32 tz, u64 args)
{
	const u32 pgm[2] = { lower_32_bits(prog >> 8), upper_32_bits(prog >> 8) & 0xFF };
	const u32 grid[6] = { 0, 0, 0, tx, ty, tz };
	const u32 ud[2] = { lower_32_bits(args), upper_32_bits(args) };
	const u32 zero = 0;
	unsigned int n;

	n = pm4_set_sh(p, VGPU_SH_COMPUTE_PGM_LO, pgm, 2);
	n += pm4_set_sh(p + n, VGPU_SH_COMPUTE_PGM_RSRC1, &slots, 1);
	n += pm4_set_sh(p + n, VGPU_SH_COMPUTE_START_X, grid, 6);
	n += pm4_set_sh(p + n, VGPU_SH_COMPUTE_TMPRING_SIZE, &zero, 1);
	n += pm4_set_sh(p + n, VGPU_SH_COMPUTE_USER_DATA_0, ud, 2);
	return n;
}

#endif /* VT_PM4_H */
