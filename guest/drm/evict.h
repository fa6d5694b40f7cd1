/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Eviction of a client (evict.c), as amdgpu's eviction fence drives it (suspend worker, then
 * restore): for the debugfs knob vgpu_evict (write a pid, or 0 for every client).
 */
#ifndef VGPU_DRM_EVICT_H
#define VGPU_DRM_EVICT_H

#include <linux/types.h>

struct drm_minor;
struct vgpu_dev;
struct vgpu_file;

/* What one eviction did, for the log line and vgpu_clients. */
struct vgpu_evict_stats {
	unsigned long start;	/* jiffies when it began */
	u32 queues_removed, queues_added, queues_invalid;
	u32 bos_moved;
	u32 bos_busy;		/* fences still pending after the bound: not moved */
	u64 bytes_moved;
	u32 fences_timed_out;	/* last fences not signalled within userq_timeout_ms */
};

int vgpu_evict_file(struct vgpu_file *vf, struct vgpu_evict_stats *st);
int vgpu_evict_pid(struct vgpu_dev *vdev, pid_t pid);
void vgpu_evict_debugfs_init(struct drm_minor *minor);

#endif /* VGPU_DRM_EVICT_H */
