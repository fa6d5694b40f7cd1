/* SPDX-License-Identifier: GPL-2.0 */
/* The MES write-back page (mes.c, mes_api.c): what MES writes for the driver. */
#ifndef VGPU_DRM_MES_WB_H
#define VGPU_DRM_MES_WB_H

#include <linux/types.h>

#define VGPU_MES_WB_FENCE	0	/* u64: the QUERY_SCHEDULER_STATUS ring fence */
#define VGPU_MES_WB_RPTR	8	/* u32: the ring's rptr report */
#define VGPU_MES_WB_SUSPEND	24	/* u32: SUSPEND's fence */
#define VGPU_MES_WB_QUERY	32	/* u64: SET_HW_RESOURCES' query-status fence */
#define VGPU_MES_WB_HUNG	64	/* 2 x MES_RESET_DW_HUNG_DB_ENTRIES dwords */
#define VGPU_MES_WB_STATUS	2048	/* api_status slots, u64 each */
#define VGPU_MES_WB_STATUS_SLOTS	256

struct vgpu_dev;
/* vgpu_mes_submit with mes.lock held (for calls that also use the write-back page). */
int vgpu_mes_submit_locked(struct vgpu_dev *vdev, u32 *f, u32 *reason);

#endif /* VGPU_DRM_MES_WB_H */
