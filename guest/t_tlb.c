// SPDX-License-Identifier: GPL-2.0
/*
 * TLBs that go stale: a PTE changed in memory without an invalidation keeps being served (and
 * strict mode names the use); the invalidation engine handshake, or INVALIDATE_TLBS by PASID
 * from a ring, makes the new PTE count.
 */

#include <linux/bitfield.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/string.h>

#include "cases.h"
#include "vm.h"

#define VT_TLB_SLOT(cp)		vt_compute_slot(cp, 0, 6)
#define VT_TLB_V1		0x57A1E001
#define VT_TLB_V2		0x57A1E002
#define VT_TLB_V3		0x57A1E003

/* Two pages and a VM whose VT_VA_DATA maps the first, with strict mode on. */
struct vt_tlb {
	struct vgpu_vm_job j;
	struct vgpu_bo *p1, *p2;
	u64 old_pte, new_pte;
	u32 stale0;		/* VM_STALE_USES before the PTE changed */
};

/*
 * Maps VT_VA_DATA to p1, writes V1 through it (the translation is now in the TLB), then points
 * the PTE at p2 in memory only. 0, or the reason in t->err.
 */
static int vt_tlb_setup(struct vt_case *t, struct vgpu_cp *cp, struct vt_tlb *s,
			unsigned int vmid, u16 pasid)
{
	u32 p[8], n, v;
	int ret;

	memset(s, 0, sizeof(*s));
	s->p1 = vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false);
	s->p2 = s->p1 ? vgpu_bo_alloc(t, cp, VT_GPU_PAGE, false) : NULL;
	if (!s->p2)
		return -ENOMEM;
	ret = vgpu_vm_job_init(t, cp, &s->j, vmid, pasid, VT_VM_HALT, VT_TLB_SLOT(cp));
	ret = ret ?: vgpu_vm_map_bo(t, s->j.vm, VT_VA_DATA, s->p1, VT_VM_RW);
	if (ret)
		return ret;
	vgpu_wr(cp->vg, VGPU_REG_VM_STRICT_CNTL, VGPU_REG_VM_STRICT_CNTL__ENABLE_MASK);
	n = vt_wr(p, VT_VA_DATA, VT_TLB_V1);
	ret = vgpu_vm_job_run(t, &s->j, p, n);
	if (ret)
		return ret;
	v = vgpu_bo_rd(s->p1, 0);
	if (v != VT_TLB_V1)
		return vt_reason(t, -EIO, "the first write through the PTE: page 1 reads %#010x, want %#010x",
				 v, VT_TLB_V1);
	s->old_pte = vgpu_vm_read_pte(s->j.vm, VT_VA_DATA);
	s->new_pte = vt_vm_pte(s->p2->dma, true, VT_VM_RW);
	s->stale0 = vgpu_rd(cp->vg, VGPU_REG_VM_STALE_USES);
	/* No invalidation: the device's TLB still holds the old translation. */
	return vgpu_vm_write_pte(s->j.vm, VT_VA_DATA, s->new_pte);
}

static void vt_tlb_teardown(struct vt_case *t, struct vgpu_cp *cp, struct vt_tlb *s)
{
	vgpu_wr(cp->vg, VGPU_REG_VM_STRICT_CNTL, 0);
	vgpu_vm_job_fini(t, &s->j);
	vgpu_vm_latch_clear(cp->vg);
	vgpu_bo_free(cp, s->p2);
	vgpu_bo_free(cp, s->p1);
}

/* The write of V2 at +4 went to the old page, and strict mode counted and named it. */
static void vt_tlb_check_stale(struct vt_case *t, struct vt_tlb *s, int ret,
			       const char *const *names)
{
	struct vgpu *vg = t->vg;
	u32 o = vgpu_bo_rd(s->p1, 4), nw = vgpu_bo_rd(s->p2, 4);
	u32 uses = vgpu_rd(vg, VGPU_REG_VM_STALE_USES);
	u32 ev = vgpu_rd(vg, VGPU_REG_VM_STALE_EVENT);
	u64 va = vgpu_rd64(vg, VGPU_REG_VM_STALE_VA_LO, VGPU_REG_VM_STALE_VA_HI);
	u64 old = vgpu_rd64(vg, VGPU_REG_VM_STALE_OLD_PTE_LO, VGPU_REG_VM_STALE_OLD_PTE_HI);
	u64 new = vgpu_rd64(vg, VGPU_REG_VM_STALE_NEW_PTE_LO, VGPU_REG_VM_STALE_NEW_PTE_HI);
	u32 slot = FIELD_GET(VGPU_REG_VM_STALE_EVENT__SLOT_MASK, ev);
	u32 vmid = FIELD_GET(VGPU_REG_VM_STALE_EVENT__VMID_MASK, ev);

	vt_check(t, !ret && o == VT_TLB_V2, names[0],
		 "%s; the old page reads %#010x, want %#010x (the TLB keeps the old translation)",
		 ret ? t->err : "fence reached", o, VT_TLB_V2);
	vt_check(t, !ret && !nw, names[1], "the new page reads %#010x before any invalidation, want 0",
		 nw);
	vt_check(t, uses == s->stale0 + 1, names[2],
		 "VM_STALE_USES %u -> %u, want +1 (one write through the stale translation)",
		 s->stale0, uses);
	vt_check(t, slot == s->j.ring->slot && vmid == s->j.vm->vmid &&
		 (ev & VGPU_REG_VM_STALE_EVENT__WRITE_MASK) &&
		 !(ev & VGPU_REG_VM_STALE_EVENT__NEW_FAULTS_MASK) && va == VT_VA_DATA + 4, names[3],
		 "VM_STALE_EVENT %#x (slot %u vmid %u) at %#llx, want a write by slot %u in VMID %u at %#llx",
		 ev, slot, vmid, va, s->j.ring->slot, s->j.vm->vmid, VT_VA_DATA + 4);
	vt_check(t, old == s->old_pte && new == s->new_pte, names[4],
		 "VM_STALE_OLD_PTE %#llx, NEW_PTE %#llx; want %#llx and %#llx", old, new, s->old_pte,
		 s->new_pte);
}

/* After the invalidation: V3 at +8 lands in the new page, and nothing stale is counted. */
static void vt_tlb_check_fixed(struct vt_case *t, struct vt_tlb *s, int ret, u32 uses0,
			       const char *name_new, const char *name_quiet)
{
	u32 o = vgpu_bo_rd(s->p1, 8), nw = vgpu_bo_rd(s->p2, 8);
	u32 uses = vgpu_rd(t->vg, VGPU_REG_VM_STALE_USES);

	vt_check(t, !ret && nw == VT_TLB_V3 && !o, name_new,
		 "%s; new page %#010x (want %#010x), old page %#010x (want 0)",
		 ret ? t->err : "fence reached", nw, VT_TLB_V3, o);
	vt_check(t, !ret && uses == uses0, name_quiet,
		 "VM_STALE_USES %u -> %u after the invalidation, want no change", uses0, uses);
}

enum vt_res t_stale_tlb(struct vt_case *t)
{
	static const char *const names[] = {
		"old_page_used", "new_page_untouched", "strict_counted", "strict_event",
		"strict_ptes", "handshake", "new_page_after_flush", "no_stale_after",
	};
	struct vgpu *vg = t->vg;
	struct vgpu_cp *cp;
	struct vt_tlb s;
	u32 p[8], n, sem1, sem2, ack_held, ack, ack_free, req, uses;
	unsigned long deadline;
	unsigned int vmid, e = VT_VM_ENGINE;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	vgpu_vm_latch_clear(vg);
	ret = vt_tlb_setup(t, cp, &s, 7, 0x107);
	if (ret) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	vmid = s.j.vm->vmid;
	n = vt_wr(p, VT_VA_DATA + 4, VT_TLB_V2);
	ret = vgpu_vm_job_run(t, &s.j, p, n);
	vt_tlb_check_stale(t, &s, ret, names);

	/* The handshake, step by step: SEM, REQ, ACK, SEM released. */
	sem1 = vgpu_rd(vg, VGPU_VM_INV_ENG_REG(e, VGPU_REG_VM_INV_ENG_SEM));
	sem2 = vgpu_rd(vg, VGPU_VM_INV_ENG_REG(e, VGPU_REG_VM_INV_ENG_SEM));
	ack_held = vgpu_rd(vg, VGPU_VM_INV_ENG_REG(e, VGPU_REG_VM_INV_ENG_ACK));
	req = FIELD_PREP(VGPU_REG_VM_INV_ENG_REQ__PER_VMID_INVALIDATE_REQ_MASK, BIT(vmid)) |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PTES_MASK |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE0_MASK |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE1_MASK |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE2_MASK |
	      VGPU_REG_VM_INV_ENG_REQ__INVALIDATE_L1_PTES_MASK;
	vgpu_wr(vg, VGPU_VM_INV_ENG_REG(e, VGPU_REG_VM_INV_ENG_REQ), req);
	deadline = jiffies + msecs_to_jiffies(timeout_ms);
	do {
		ack = vgpu_rd(vg, VGPU_VM_INV_ENG_REG(e, VGPU_REG_VM_INV_ENG_ACK));
		if (ack & BIT(vmid))
			break;
		usleep_range(5, 10);
	} while (!time_after(jiffies, deadline));
	vgpu_wr(vg, VGPU_VM_INV_ENG_REG(e, VGPU_REG_VM_INV_ENG_SEM), 0);
	ack_free = vgpu_rd(vg, VGPU_VM_INV_ENG_REG(e, VGPU_REG_VM_INV_ENG_ACK));
	vt_check(t, sem1 == 1 && sem2 == 0 &&
		 (ack_held & VGPU_REG_VM_INV_ENG_ACK__SEMAPHORE_MASK) && (ack & BIT(vmid)) &&
		 !(ack_free & VGPU_REG_VM_INV_ENG_ACK__SEMAPHORE_MASK), names[5],
		 "engine %u: SEM reads %u then %u (want 1, 0), ACK %#x while held, %#x after REQ %#x (want bit %u), %#x released",
		 e, sem1, sem2, ack_held, ack, req, vmid, ack_free);

	uses = vgpu_rd(vg, VGPU_REG_VM_STALE_USES);
	n = vt_wr(p, VT_VA_DATA + 8, VT_TLB_V3);
	ret = vgpu_vm_job_run(t, &s.j, p, n);
	vt_tlb_check_fixed(t, &s, ret, uses, names[6], names[7]);
out:
	vt_tlb_teardown(t, cp, &s);
	return vt_cp_end(t, cp);
}

/* INVALIDATE_TLBS for pasid on the kernel ring, then the IB, then a fence; waits for it. */
static int vt_tlb_packet_then_ib(struct vt_case *t, struct vt_tlb *s, u16 pasid, u64 va, u32 val)
{
	struct vgpu_ring *r = s->j.ring;
	u32 p[8], ib[8], n, seq;
	u64 ibva;
	int ret;

	n = vt_wr(ib, va, val);
	ret = vgpu_vm_job_ib(t, &s->j, ib, n, &ibva) ?:
	      vgpu_ring_alloc(t, r, 2 + 4 + VT_FENCE_DW);
	if (ret)
		return ret;
	vgpu_ring_put(r, p, pm4_invalidate_tlbs(p, pasid, 0));
	vgpu_ring_put(r, p, pm4_ib_vmid(p, ibva, n, s->j.vm->vmid));
	seq = vgpu_ring_fence(r, true);
	vgpu_ring_commit(r);
	vgpu_ring_kick(r);
	return vgpu_fence_wait(t, r, seq);
}

enum vt_res t_invalidate_packet(struct vt_case *t)
{
	static const char *const names[] = {
		"other_pasid_keeps_tlb", "new_page_untouched", "strict_counted", "strict_event",
		"strict_ptes", "new_page_after_packet", "no_stale_after",
	};
	struct vgpu *vg = t->vg;
	struct vgpu_vm *other = NULL;
	struct vgpu_cp *cp;
	struct vt_tlb s;
	u32 uses;
	int ret;

	vt_sub_begin(t, ARRAY_SIZE(names));
	cp = vgpu_cp_get(t);
	if (!cp)
		return vt_cp_unavailable(t, names, ARRAY_SIZE(names));
	vgpu_vm_latch_clear(vg);
	ret = vt_tlb_setup(t, cp, &s, 8, 0x108);
	if (!ret) {
		/* Another process's address space: its PASID must not invalidate ours. */
		other = vgpu_vm_create(t, cp, 9, 0x109, VT_VM_HALT);
		ret = other ? 0 : -EIO;
	}
	if (ret) {
		vt_sub_fail_all(t, names, ARRAY_SIZE(names));
		goto out;
	}
	ret = vt_tlb_packet_then_ib(t, &s, other->pasid, VT_VA_DATA + 4, VT_TLB_V2);
	vt_tlb_check_stale(t, &s, ret, names);
	uses = vgpu_rd(vg, VGPU_REG_VM_STALE_USES);

	/* INVALIDATE_TLBS with our PASID: the next IB uses the new PTE. */
	ret = vt_tlb_packet_then_ib(t, &s, s.j.vm->pasid, VT_VA_DATA + 8, VT_TLB_V3);
	vt_tlb_check_fixed(t, &s, ret, uses, names[5], names[6]);
out:
	vgpu_vm_destroy(t, other);
	vt_tlb_teardown(t, cp, &s);
	return vt_cp_end(t, cp);
}
