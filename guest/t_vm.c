// SPDX-License-Identifier: GPL-2.0
/*
 * Process address spaces: isolation between VMIDs, huge pages, permissions, no-retry faults
 * under both policies, PRT pages. Every IB runs in a process VMID from a kernel ring.
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/kernel.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "cases.h"
#include "vm.h"

#define VT_VM_SLOT(cp)		vt_compute_slot(cp, 0, 6)
#define VT_VM_SLOT2(cp)		vt_compute_slot(cp, 1, 6)
#define VT_VA_OTHER		0x0000300000400000ULL	/* mapped in one VM only */
#define VT_VA_NONE		0x0000600000000000ULL	/* no table maps it: PDE fault */

/* Checks the latched fault: status (MORE_FAULTS as more says) and address. */
static void vt_check_latch(struct vt_case *t, const char *name, u32 want, bool more, u64 addr)
{
	struct vgpu_vm_latch l;
	char got[96], exp[96];

	vgpu_vm_latch_read(t->vg, &l);
	if (more)
		want |= VGPU_REG_VM_FAULT_STATUS__MORE_FAULTS_MASK;
	vgpu_vm_status_str(l.status, got, sizeof(got));
	vgpu_vm_status_str(want, exp, sizeof(exp));
	vt_check(t, l.status == want && l.addr == (addr & ~0xfffULL), name,
		 "VM_FAULT_STATUS %s at %#llx, want %s at %#llx", got, l.addr, exp,
		 addr & ~0xfffULL);
}

/* Waits for the count-th VM-fault IV of the VM and checks the last one. */
static void vt_check_iv(struct vt_case *t, const char *name, struct vgpu_vm *vm, u32 count,
			u64 addr, u32 access, u32 status)
{
	struct vgpu_ih_vmid v;
	char why[VT_WHY_LEN] = "";

	if (vgpu_vm_fault_wait(t, vm->cp, vm->vmid, count)) {
		snprintf(why, sizeof(why), "%s", t->err);
	} else {
		vgpu_ih_vmid_get(vm->cp, vm->vmid, &v);
		if (v.faults != count || v.retry)
			snprintf(why, sizeof(why), "VMID %u: %u VM-fault IVs (%u retry), want %u no-retry",
				 vm->vmid, v.faults, v.retry, count);
		else
			vgpu_vm_fault_is(&v.last, vm, addr, access, false, status, true, why,
					 sizeof(why));
	}
	vt_check(t, !why[0], name, "%s", why);
}

enum vt_res t_vm_isolation(struct vt_case *t)
{
	static const char *const names[] = {
		"vmid1_own_page", "vmid2_own_page", "eop_iv_vmid_pasid", "cross_va_faults",
		"cross_fault_iv", "cross_page_untouched",
	};
	struct vgpu_vm_job a = {}, b = {};
	struct vgpu_bo *pa = NULL, *pb = NULL, *pc = NULL;
	struct vgpu_ih_slot sla, slb;
	struct vgpu_ih_vmid v2;
	struct vgpu *vg = t->vg;
	char why[VT_WHY_LEN];
	u32 p[48], n, sa = 0, sb = 0, w;
	struct vgpu_cp *cp;
	int ra, rb, ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	vgpu_vm_latch_clear(vg);
	pa = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	pb = pa ? vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false) : NULL;
	pc = pb ? vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false) : NULL;
	ret = pc ? 0 : -ENOMEM;
	ret = ret ?: vgpu_vm_job_init(t, cp, &a, 1, 0x101, VT_VM_HALT, VT_VM_SLOT(cp));
	ret = ret ?: vgpu_vm_job_init(t, cp, &b, 2, 0x102, VT_VM_HALT, VT_VM_SLOT2(cp));
	/* The same VA in both, a different page each; VT_VA_OTHER only in VMID 2. */
	ret = ret ?: vgpu_vm_map_bo(t, a.vm, VT_VA_DATA, pa, VT_VM_RW);
	ret = ret ?: vgpu_vm_map_bo(t, b.vm, VT_VA_DATA, pb, VT_VM_RW);
	ret = ret ?: vgpu_vm_map_bo(t, b.vm, VT_VA_OTHER, pc, VT_VM_RW);
	if (ret) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	vt_note(t, "VA %#llx: VMID 1 -> %pad, VMID 2 -> %pad; %#llx only in VMID 2 (%pad); slots %u and %u",
		VT_VA_DATA, &pa->dma, &pb->dma, VT_VA_OTHER, &pc->dma, a.ring->slot, b.ring->slot);
	vgpu_bo_wr(pa, 0, 0xA1A1A1A1);
	vgpu_bo_wr(pb, 0, 0xB2B2B2B2);
	vgpu_bo_wr(pc, 0, 0xC3C3C3C3);

	/*
	 * Each queue copies dword 0 of "its" VA to dword 4, writes its mark to dword 1, and ends
	 * with an interrupting RELEASE_MEM to dword 8: the EOP IV of work in the VMID.
	 */
	n = vt_copy(p, VT_VA_DATA, VT_VA_DATA + 16, 4);
	n += vt_wr(p + n, VT_VA_DATA + 4, 0x11110001);
	n += pm4_release_mem(p + n, VT_GCR_FENCE, VGPU_PM4_RELEASE_MEM_DATA_SEL_32,
			     VGPU_PM4_RELEASE_MEM_INT_SEL_IRQ_CONFIRM, VT_VA_DATA + 32,
			     0xE0E00001, 0xE0E00001);
	ra = vgpu_vm_job_emit(t, &a, p, n, &sa);
	n = vt_copy(p, VT_VA_DATA, VT_VA_DATA + 16, 4);
	n += vt_wr(p + n, VT_VA_DATA + 4, 0x22220002);
	n += pm4_release_mem(p + n, VT_GCR_FENCE, VGPU_PM4_RELEASE_MEM_DATA_SEL_32,
			     VGPU_PM4_RELEASE_MEM_INT_SEL_IRQ_CONFIRM, VT_VA_DATA + 32,
			     0xE0E00002, 0xE0E00002);
	rb = ra ?: vgpu_vm_job_emit(t, &b, p, n, &sb);
	ra = ra ?: vgpu_fence_wait(t, a.ring, sa);
	vt_check(t, !ra && vgpu_bo_rd(pa, 16) == 0xA1A1A1A1 && vgpu_bo_rd(pa, 4) == 0x11110001,
		 names[0], "%s; VMID 1's page: copy %#010x (want 0xa1a1a1a1), mark %#010x (want 0x11110001)",
		 ra ? t->err : "fence reached", vgpu_bo_rd(pa, 16), vgpu_bo_rd(pa, 4));
	rb = rb ?: vgpu_fence_wait(t, b.ring, sb);
	vt_check(t, !rb && vgpu_bo_rd(pb, 16) == 0xB2B2B2B2 && vgpu_bo_rd(pb, 4) == 0x22220002,
		 names[1], "%s; VMID 2's page: copy %#010x (want 0xb2b2b2b2), mark %#010x (want 0x22220002)",
		 rb ? t->err : "fence reached", vgpu_bo_rd(pb, 16), vgpu_bo_rd(pb, 4));

	why[0] = '\0';
	ra = ra ?: vgpu_eop_wait(t, a.ring, 1);
	rb = rb ?: vgpu_eop_wait(t, b.ring, 1);
	vgpu_ih_slot_get(cp, a.ring->slot, &sla);
	vgpu_ih_slot_get(cp, b.ring->slot, &slb);
	if (ra || rb)
		snprintf(why, sizeof(why), "%s", t->err);
	else if (sla.eop_proc != 1 || sla.eop_proc_vmid != 1 || sla.eop_proc_pasid != 0x101 ||
		 sla.eop_proc_ctxid != 0xE0E00001 || vgpu_bo_rd(pa, 32) != 0xE0E00001)
		snprintf(why, sizeof(why),
			 "slot %u: %u EOP IVs from VMID 1's IB, the last VMID %u PASID %#x ctxid %#x (want 1, 0x101, 0xe0e00001); its fence dword %#x",
			 a.ring->slot, sla.eop_proc, sla.eop_proc_vmid, sla.eop_proc_pasid,
			 sla.eop_proc_ctxid, vgpu_bo_rd(pa, 32));
	else if (slb.eop_proc != 1 || slb.eop_proc_vmid != 2 || slb.eop_proc_pasid != 0x102 ||
		 slb.eop_proc_ctxid != 0xE0E00002 || vgpu_bo_rd(pb, 32) != 0xE0E00002)
		snprintf(why, sizeof(why),
			 "slot %u: %u EOP IVs from VMID 2's IB, the last VMID %u PASID %#x ctxid %#x (want 2, 0x102, 0xe0e00002); its fence dword %#x",
			 b.ring->slot, slb.eop_proc, slb.eop_proc_vmid, slb.eop_proc_pasid,
			 slb.eop_proc_ctxid, vgpu_bo_rd(pb, 32));
	vt_check(t, !why[0], names[2], "%s", why);

	/* VMID 1 writes to the VA that only VMID 2 maps. */
	n = vt_wr(p, VT_VA_OTHER + 8, 0xBAD00001);
	ret = vgpu_vm_job_emit(t, &a, p, n, &sa) ?: vgpu_vm_halt_wait(t, a.ring);
	if (ret) {
		vt_check(t, false, names[3], "%s", t->err);
	} else {
		vt_check_latch(t, names[3],
			       vgpu_vm_status(VGPU_VM_PERM_VALID, VGPU_VM_CID_CPC, true, 1), false,
			       VT_VA_OTHER);
	}
	vt_check_iv(t, names[4], a.vm, 1, VT_VA_OTHER, VGPU_VM_IV_DW5_WRITE_MASK,
		    vgpu_vm_status(VGPU_VM_PERM_VALID, VGPU_VM_CID_CPC, true, 1));
	vgpu_ih_vmid_get(cp, 2, &v2);
	w = vgpu_bo_rd(pc, 8);
	vt_check(t, vgpu_bo_rd(pc, 0) == 0xC3C3C3C3 && !w && !v2.faults, names[5],
		 "VMID 2's private page: dword 0 %#010x (want 0xc3c3c3c3), dword 2 %#010x (want 0); VMID 2 saw %u fault IVs",
		 vgpu_bo_rd(pc, 0), w, v2.faults);
out:
	vgpu_vm_job_fini(t, &b);
	vgpu_vm_job_fini(t, &a);
	vgpu_vm_latch_clear(vg);
	vgpu_bo_free(cp, pc);
	vgpu_bo_free(cp, pb);
	vgpu_bo_free(cp, pa);
	return vt_cp_end(t, cp);
}

#define VT_VA_1G		0x0000400000000000ULL	/* a PDB1 PTE: 1 GiB at VRAM 0 */
#define VT_VA_2M		0x0000500000200000ULL	/* a PDB0 PTE: 2 MiB */
#define VT_1G_W			0x05678010ULL		/* offsets inside the pages */
#define VT_1G_R			0x01234560ULL
#define VT_1G_DST		0x02000000ULL
#define VT_2M_W			0x001FF0F0ULL
#define VT_2M_R			0x00001230ULL
#define VT_2M_DST		0x00000100ULL

enum vt_res t_huge_pages(struct vt_case *t)
{
	static const char *const names[] = {
		"huge_1g_write", "huge_1g_read", "huge_2m_write", "huge_2m_read", "huge_2m_bounded",
	};
	struct vgpu *vg = t->vg;
	struct vgpu_vm_job j = {};
	u32 p[64], n, v1, v2, v3, v4, v5;
	struct vgpu_cp *cp;
	u64 m;			/* VRAM offset of the 2 MiB page */
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	vgpu_vm_latch_clear(vg);
	/* The 2 MiB page and the one after it are in BAR0, well above what the 1 GiB page tests. */
	m = ALIGN_DOWN(vg->vram_len / 2, VT_SZ_2M);
	if (cp->vram_size < VT_SZ_1G || m + 2 * VT_SZ_2M > vg->vram_len ||
	    VT_1G_W + 4 > vg->vram_len || VT_1G_W >= m) {
		vt_reason(t, -ENOSPC, "VRAM %#llx, BAR0 %#llx: want 1 GiB of VRAM and a BAR0 of 256 MiB",
			  cp->vram_size, (u64)vg->vram_len);
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		return vt_cp_end(t, cp);
	}
	ret = vgpu_vm_job_init(t, cp, &j, 3, 0x103, VT_VM_DEFAULT_PAGE, VT_VM_SLOT(cp));
	ret = ret ?: vgpu_vm_map_huge(t, j.vm, VT_VA_1G, 2, vt_vm_pte(0, false, VT_VM_RW));
	ret = ret ?: vgpu_vm_map_huge(t, j.vm, VT_VA_2M, 1, vt_vm_pte(m, false, VT_VM_RW));
	if (ret) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	vt_note(t, "1 GiB page %#llx -> VRAM 0, 2 MiB page %#llx -> VRAM %#llx, both PDE-as-PTE; the next 2 MiB unmapped",
		VT_VA_1G, VT_VA_2M, m);
	iowrite32(0, vg->vram + VT_1G_W);
	iowrite32(0x61616161, vg->vram + VT_1G_R);
	iowrite32(0, vg->vram + VT_1G_DST);
	iowrite32(0, vg->vram + m + VT_2M_W);
	iowrite32(0x62626262, vg->vram + m + VT_2M_R);
	iowrite32(0, vg->vram + m + VT_2M_DST);
	iowrite32(0, vg->vram + m + VT_SZ_2M + 0x40);
	vgpu_hdp_flush(vg);

	n = vt_wr(p, VT_VA_1G + VT_1G_W, 0x1A1A0001);
	n += vt_wr(p + n, VT_VA_2M + VT_2M_W, 0x2B2B0002);
	n += vt_copy(p + n, VT_VA_1G + VT_1G_R, VT_VA_2M + VT_2M_DST, 4);
	n += vt_copy(p + n, VT_VA_2M + VT_2M_R, VT_VA_1G + VT_1G_DST, 4);
	/* Just past the 2 MiB page: not mapped, so the default page takes (and drops) it. */
	n += vt_wr(p + n, VT_VA_2M + VT_SZ_2M + 0x40, 0xDEAD0003);
	ret = vgpu_vm_job_run(t, &j, p, n);
	vgpu_hdp_invalidate(vg);
	v1 = ioread32(vg->vram + VT_1G_W);
	v2 = ioread32(vg->vram + m + VT_2M_DST);
	v3 = ioread32(vg->vram + m + VT_2M_W);
	v4 = ioread32(vg->vram + VT_1G_DST);
	v5 = ioread32(vg->vram + m + VT_SZ_2M + 0x40);
	vt_check(t, !ret && v1 == 0x1A1A0001, names[0],
		 "%s; VRAM %#llx reads %#010x, want 0x1a1a0001", ret ? t->err : "fence reached",
		 VT_1G_W, v1);
	vt_check(t, !ret && v2 == 0x61616161, names[1],
		 "copy from 1 GiB page + %#llx to the 2 MiB page: VRAM %#llx reads %#010x, want 0x61616161",
		 VT_1G_R, m + VT_2M_DST, v2);
	vt_check(t, !ret && v3 == 0x2B2B0002, names[2], "VRAM %#llx reads %#010x, want 0x2b2b0002",
		 m + VT_2M_W, v3);
	vt_check(t, !ret && v4 == 0x62626262, names[3],
		 "copy from 2 MiB page + %#llx to the 1 GiB page: VRAM %#llx reads %#010x, want 0x62626262",
		 VT_2M_R, VT_1G_DST, v4);
	if (v5)
		vt_check(t, false, names[4], "the write past the 2 MiB page reached VRAM %#llx (%#010x)",
			 m + VT_SZ_2M + 0x40, v5);
	else
		vt_check_latch(t, names[4],
			       vgpu_vm_status(VGPU_VM_PERM_VALID, VGPU_VM_CID_CPC, true, 3), false,
			       VT_VA_2M + VT_SZ_2M);
out:
	vgpu_vm_job_fini(t, &j);
	vgpu_vm_latch_clear(vg);
	return vt_cp_end(t, cp);
}

/* An IB page without EXECUTABLE. */
#define VT_VA_NX		(VT_VA_CODE + VT_CODE_BYTES + SZ_64K)

enum vt_res t_permission(struct vt_case *t)
{
	static const char *const names[] = {
		"ro_write_halts", "ro_write_status", "ro_write_iv", "ro_page_unchanged",
		"nx_fetch_halts", "nx_fetch_status", "nx_fetch_iv", "nx_not_run",
	};
	struct vgpu_bo *ro = NULL, *nx = NULL, *ok = NULL;
	struct vgpu *vg = t->vg;
	struct vgpu_vm_job j = {};
	struct vgpu_cp *cp;
	u32 p[16], n, seq, st;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	vgpu_vm_latch_clear(vg);
	ro = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	nx = ro ? vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false) : NULL;
	ok = nx ? vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false) : NULL;
	ret = ok ? 0 : -ENOMEM;
	ret = ret ?: vgpu_vm_job_init(t, cp, &j, 4, 0x104, VT_VM_HALT, VT_VM_SLOT(cp));
	ret = ret ?: vgpu_vm_map_bo(t, j.vm, VT_VA_DATA, ro, VGPU_PTE_READABLE_MASK);
	ret = ret ?: vgpu_vm_map_bo(t, j.vm, VT_VA_DATA + VT_GPU_PAGE, ok, VT_VM_RW);
	ret = ret ?: vgpu_vm_map_bo(t, j.vm, VT_VA_NX, nx, VT_VM_RW);
	if (ret) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	vgpu_bo_wr(ro, 0, 0x50505050);

	/* A write to a read-only page. */
	n = vt_wr(p, VT_VA_DATA, 0xBAD00002);
	ret = vgpu_vm_job_emit(t, &j, p, n, &seq) ?: vgpu_vm_halt_wait(t, j.ring);
	vt_check(t, !ret, names[0], "%s", t->err);
	vt_check_latch(t, names[1], vgpu_vm_status(VGPU_VM_PERM_WRITE, VGPU_VM_CID_CPC, true, 4),
		       false, VT_VA_DATA);
	vt_check_iv(t, names[2], j.vm, 1, VT_VA_DATA, VGPU_VM_IV_DW5_WRITE_MASK,
		    vgpu_vm_status(VGPU_VM_PERM_WRITE, VGPU_VM_CID_CPC, true, 4));
	vt_check(t, vgpu_bo_rd(ro, 0) == 0x50505050, names[3],
		 "the read-only page reads %#010x, want 0x50505050", vgpu_bo_rd(ro, 0));

	/* An IB fetched from a page without EXECUTABLE. */
	vgpu_vm_latch_clear(vg);
	n = vt_wr(p, VT_VA_DATA + VT_GPU_PAGE, 0x0E0E0E0E);
	vgpu_ib_put(nx, 0, p, n);
	ret = vgpu_ring_start(t, j.ring) ?:
	      vgpu_vm_emit_ib(t, j.ring, j.vm, VT_VA_NX, n, &seq) ?:
	      vgpu_vm_halt_wait(t, j.ring);
	vt_check(t, !ret, names[4], "%s", t->err);
	vt_check_latch(t, names[5],
		       vgpu_vm_status(VGPU_VM_PERM_EXECUTE, VGPU_VM_CID_CPF, false, 4), false,
		       VT_VA_NX);
	vt_check_iv(t, names[6], j.vm, 2, VT_VA_NX, VGPU_VM_IV_DW5_EXE_MASK,
		    vgpu_vm_status(VGPU_VM_PERM_EXECUTE, VGPU_VM_CID_CPF, false, 4));
	msleep(VT_SETTLE_MS);
	st = vgpu_bo_rd(ok, 0);
	vt_check(t, !st, names[7], "the IB on the non-executable page ran: its dword reads %#010x",
		 st);
out:
	vgpu_vm_job_fini(t, &j);
	vgpu_vm_latch_clear(vg);
	vgpu_bo_free(cp, ok);
	vgpu_bo_free(cp, nx);
	vgpu_bo_free(cp, ro);
	return vt_cp_end(t, cp);
}

#define VT_NR_U1		(VT_VA_DATA + 3 * VT_GPU_PAGE)	/* an invalid PTE */
#define VT_NR_U2		(VT_VA_NONE + 0x20)		/* no table at all */
#define VT_NR_MARK		0x3A3A0004

enum vt_res t_no_retry(struct vt_case *t)
{
	static const char *const names[] = {
		"halt_halted", "halt_status", "halt_iv", "more_faults", "second_iv", "clear_rearms",
		"default_continues", "default_reads", "default_write_dropped", "default_latched",
	};
	struct vgpu_bo *data = NULL, *dummy = NULL;
	struct vgpu *vg = t->vg;
	struct vgpu_vm_job j = {};
	struct vgpu_vm_latch l;
	char why[VT_WHY_LEN];
	struct vgpu_cp *cp;
	u32 p[32], n, seq, i, v, bad;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	vgpu_vm_latch_clear(vg);
	data = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	dummy = data ? vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false) : NULL;
	ret = dummy ? 0 : -ENOMEM;
	ret = ret ?: vgpu_vm_job_init(t, cp, &j, 5, 0x105, VT_VM_HALT, VT_VM_SLOT(cp));
	ret = ret ?: vgpu_vm_map_bo(t, j.vm, VT_VA_DATA, data, VT_VM_RW);
	if (ret) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}

	/* Halt policy: a write to an invalid PTE. */
	n = vt_wr(p, VT_NR_U1, 1);
	ret = vgpu_vm_job_emit(t, &j, p, n, &seq) ?: vgpu_vm_halt_wait(t, j.ring);
	vt_check(t, !ret, names[0], "%s", t->err);
	vt_check_latch(t, names[1], vgpu_vm_status(VGPU_VM_PERM_VALID, VGPU_VM_CID_CPC, true, 5),
		       false, VT_NR_U1);
	vt_check_iv(t, names[2], j.vm, 1, VT_NR_U1, VGPU_VM_IV_DW5_WRITE_MASK,
		    vgpu_vm_status(VGPU_VM_PERM_VALID, VGPU_VM_CID_CPC, true, 5));

	/* A second fault before the latch is cleared: MORE_FAULTS, the first one stays. */
	n = vt_wr(p, VT_NR_U2, 2);
	ret = vgpu_ring_start(t, j.ring) ?: vgpu_vm_job_emit(t, &j, p, n, &seq) ?:
	      vgpu_vm_halt_wait(t, j.ring);
	if (ret)
		vt_check(t, false, names[3], "%s", t->err);
	else
		vt_check_latch(t, names[3],
			       vgpu_vm_status(VGPU_VM_PERM_VALID, VGPU_VM_CID_CPC, true, 5), true,
			       VT_NR_U1);
	vt_check_iv(t, names[4], j.vm, 2, VT_NR_U2, VGPU_VM_IV_DW5_WRITE_MASK,
		    vgpu_vm_status(VGPU_VM_PERM_VALID, VGPU_VM_CID_CPC, true, 5));
	vgpu_vm_latch_clear(vg);
	vgpu_vm_latch_read(vg, &l);
	vt_check(t, !l.status && !l.addr, names[5],
		 "after FAULT_CNTL.CLEAR: VM_FAULT_STATUS %#x, address %#llx, want 0", l.status,
		 l.addr);

	/* Default-page policy: a read gets the dummy page, a write is dropped, the IB goes on. */
	for (i = 0; i < VT_GPU_PAGE / 4; i++)
		vgpu_bo_wr(dummy, 4 * i, 0xD0D00000 + i);
	vgpu_wr64(vg, VGPU_REG_VM_FAULT_DEFAULT_ADDR_LO, VGPU_REG_VM_FAULT_DEFAULT_ADDR_HI,
		  dummy->dma >> 12);
	vgpu_vm_set_policy(t, j.vm, VT_VM_DEFAULT_PAGE);
	n = vt_copy(p, VT_NR_U1 + 0x10, VT_VA_DATA + 0x100, 16);
	n += vt_wr(p + n, VT_NR_U2 + 0x20, 0xBADBAD05);
	n += vt_wr(p + n, VT_VA_DATA + 0x200, VT_NR_MARK);
	ret = vgpu_ring_start(t, j.ring) ?: vgpu_vm_job_run(t, &j, p, n);
	v = vgpu_bo_rd(data, 0x200);
	vt_check(t, !ret && v == VT_NR_MARK, names[6], "%s; the mark after the faults reads %#010x, want %#010x",
		 ret ? t->err : "fence reached", v, VT_NR_MARK);
	why[0] = '\0';
	for (i = 0; i < 4 && !why[0]; i++) {
		v = vgpu_bo_rd(data, 0x100 + 4 * i);
		if (v != 0xD0D00004 + i)
			snprintf(why, sizeof(why),
				 "copy from an unmapped page: dword %u reads %#010x, want the default page's %#010x",
				 i, v, 0xD0D00004 + i);
	}
	vt_check(t, !ret && !why[0], names[7], "%s", ret ? t->err : why);
	for (i = 0, bad = 0; i < VT_GPU_PAGE / 4; i++)
		bad += vgpu_bo_rd(dummy, 4 * i) != 0xD0D00000 + i;
	vt_check(t, !bad, names[8], "%u dwords of the default page changed (the write must be dropped)",
		 bad);
	vt_check_latch(t, names[9], vgpu_vm_status(VGPU_VM_PERM_VALID, VGPU_VM_CID_CPC, false, 5),
		       true, VT_NR_U1 + 0x10);
out:
	vgpu_vm_job_fini(t, &j);
	vgpu_wr64(vg, VGPU_REG_VM_FAULT_DEFAULT_ADDR_LO, VGPU_REG_VM_FAULT_DEFAULT_ADDR_HI, 0);
	vgpu_vm_latch_clear(vg);
	vgpu_bo_free(cp, dummy);
	vgpu_bo_free(cp, data);
	return vt_cp_end(t, cp);
}

#define VT_VA_PRT		(VT_VA_DATA + 16 * VT_GPU_PAGE)
#define VT_PRT_MARK		0x5E5E0006

enum vt_res t_prt(struct vt_case *t)
{
	static const char *const names[] = { "prt_reads_zero", "prt_write_dropped", "prt_no_fault" };
	struct vgpu *vg = t->vg;
	struct vgpu_vm_job j = {};
	struct vgpu_bo *data = NULL;
	struct vgpu_vm_latch l;
	struct vgpu_ih_vmid v;
	u32 p[32], n, i, nz, f0, f1, w, mark;
	struct vgpu_cp *cp;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	vgpu_vm_latch_clear(vg);
	data = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	ret = data ? 0 : -ENOMEM;
	ret = ret ?: vgpu_vm_job_init(t, cp, &j, 6, 0x106, VT_VM_HALT, VT_VM_SLOT(cp));
	ret = ret ?: vgpu_vm_map_bo(t, j.vm, VT_VA_DATA, data, VT_VM_RW);
	ret = ret ?: vgpu_vm_map(t, j.vm, VT_VA_PRT, VT_VM_PTE_PRT);
	if (ret) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	for (i = 0; i < 0x104 / 4; i++)
		vgpu_bo_wr(data, 4 * i, 0xFFFFFFFF);
	f0 = vgpu_rd(vg, VGPU_REG_VM_FAULTS);
	/* Read 64 bytes of the PRT page, write to it, read the written dword back. */
	n = vt_copy(p, VT_VA_PRT + 0x40, VT_VA_DATA, 64);
	n += vt_wr(p + n, VT_VA_PRT + 0x80, 0x5A5A5A5A);
	n += vt_copy(p + n, VT_VA_PRT + 0x80, VT_VA_DATA + 0x100, 4);
	n += vt_wr(p + n, VT_VA_DATA + 0x200, VT_PRT_MARK);
	ret = vgpu_vm_job_run(t, &j, p, n);
	for (i = 0, nz = 0; i < 16; i++)
		nz += vgpu_bo_rd(data, 4 * i) != 0;
	vt_check(t, !ret && !nz, names[0], "%s; %u of 16 dwords copied from the PRT page are not 0",
		 ret ? t->err : "fence reached", nz);
	w = vgpu_bo_rd(data, 0x100);
	vt_check(t, !ret && !w, names[1],
		 "the PRT dword written 0x5a5a5a5a reads back %#010x, want 0 (writes dropped)", w);
	f1 = vgpu_rd(vg, VGPU_REG_VM_FAULTS);
	vgpu_ih_vmid_get(cp, 6, &v);
	vgpu_vm_latch_read(vg, &l);
	mark = vgpu_bo_rd(data, 0x200);
	vt_check(t, !ret && f1 == f0 && !v.faults && !l.status && mark == VT_PRT_MARK, names[2],
		 "VM_FAULTS %u -> %u, %u fault IVs, VM_FAULT_STATUS %#x, mark %#010x: a PRT page must not fault",
		 f0, f1, v.faults, l.status, mark);
out:
	vgpu_vm_job_fini(t, &j);
	vgpu_vm_latch_clear(vg);
	vgpu_bo_free(cp, data);
	return vt_cp_end(t, cp);
}
