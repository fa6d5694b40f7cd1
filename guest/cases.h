/* SPDX-License-Identifier: GPL-2.0 */
/* The test cases, by file; main.c lists them in report order. */
#ifndef VT_CASES_H
#define VT_CASES_H

#include "ktap.h"

/* t_device.c */
enum vt_res t_probe_identity(struct vt_case *t);
enum vt_res t_scratch(struct vt_case *t);
enum vt_res t_msix(struct vt_case *t);
enum vt_res t_dma(struct vt_case *t);
enum vt_res t_vram(struct vt_case *t);
enum vt_res t_reset_flr(struct vt_case *t);

/* t_cp.c */
enum vt_res t_ring_test(struct vt_case *t);
enum vt_res t_ib_test(struct vt_case *t);
enum vt_res t_ib2_chain(struct vt_case *t);
enum vt_res t_bad_packet(struct vt_case *t);
enum vt_res t_ring_wrap(struct vt_case *t);

/* t_fences.c */
enum vt_res t_fences(struct vt_case *t);
enum vt_res t_semaphore(struct vt_case *t);

/* t_l2.c */
enum vt_res t_dma_data(struct vt_case *t);
enum vt_res t_cache(struct vt_case *t);
enum vt_res t_shader_vector_add(struct vt_case *t);
enum vt_res t_shader_atomics(struct vt_case *t);
enum vt_res t_shader_ids_2d(struct vt_case *t);
enum vt_res t_shader_bad(struct vt_case *t);

/* t_shader_hazard.c */
enum vt_res t_shader_hazard(struct vt_case *t);
enum vt_res t_shader_l0_stale(struct vt_case *t);
enum vt_res t_shader_retry_fault(struct vt_case *t);

/* t_hang.c */
enum vt_res t_hang_queue_reset(struct vt_case *t);
enum vt_res t_hang_engine_reset(struct vt_case *t);
enum vt_res t_hang_flr(struct vt_case *t);

/* t_vm.c */
enum vt_res t_vm_isolation(struct vt_case *t);
enum vt_res t_huge_pages(struct vt_case *t);
enum vt_res t_permission(struct vt_case *t);
enum vt_res t_no_retry(struct vt_case *t);
enum vt_res t_prt(struct vt_case *t);

/* t_tlb.c */
enum vt_res t_stale_tlb(struct vt_case *t);
enum vt_res t_invalidate_packet(struct vt_case *t);

/* t_retry.c */
enum vt_res t_retry_fault(struct vt_case *t);
enum vt_res t_fault_storm(struct vt_case *t);

/* t_mes.c */
enum vt_res t_mes_bringup(struct vt_case *t);
enum vt_res t_mes_add_remove(struct vt_case *t);
enum vt_res t_mes_bad_frames(struct vt_case *t);
enum vt_res t_mes_unmapped_doorbell(struct vt_case *t);
enum vt_res t_protected_fence(struct vt_case *t);

/* t_mes_sched.c */
enum vt_res t_mes_oversubscribe(struct vt_case *t);
enum vt_res t_mes_priority(struct vt_case *t);
enum vt_res t_mes_fairness(struct vt_case *t);
enum vt_res t_mes_suspend_resume(struct vt_case *t);
enum vt_res t_mes_vmid_oversubscribe(struct vt_case *t);

/* t_shader_preempt.c */
enum vt_res t_shader_preempt(struct vt_case *t);
enum vt_res t_shader_endless(struct vt_case *t);

/* t_mes_hang.c */
enum vt_res t_mes_hang(struct vt_case *t);

/* t_inject_*.c: recovery paths under fault injection (inject.h) */
enum vt_res t_inject_eop_lost(struct vt_case *t);
enum vt_res t_inject_mes_hang(struct vt_case *t);
enum vt_res t_inject_dma_fail(struct vt_case *t);

#endif /* VT_CASES_H */
