// SPDX-License-Identifier: GPL-2.0
/*
 * A stand-in vgpu_drm.ko for images' tests of the DRM suite's boot path: it needs a symbol of
 * each DRM module the real driver needs (drm, drm_buddy, drm_shmem_helper, gpu-sched), so it
 * loads only after all of them, and uses drm_buddy for real.
 */
#include <linux/module.h>
#include <drm/drm_buddy.h>
#include <drm/drm_gem_shmem_helper.h>
#include <drm/drm_print.h>
#include <drm/gpu_scheduler.h>

#include "../include/probe.h"

static int __init probe_init(void)
{
	struct drm_buddy mm;
	int err;

	err = drm_buddy_init(&mm, PROBE_BUDDY_SIZE, PAGE_SIZE);
	if (err)
		return err;
	pr_info("vgpu_drm (stand-in): buddy of %llu KiB free; shmem helper %ps, scheduler %ps, printer %ps\n",
		mm.avail >> 10, drm_gem_shmem_create, drm_sched_init, __drm_printfn_info);
	drm_buddy_fini(&mm);
	return 0;
}

static void __exit probe_exit(void)
{
}

module_init(probe_init);
module_exit(probe_exit);
MODULE_DESCRIPTION("stand-in for vgpu_drm in images' tests");
MODULE_LICENSE("GPL");
