// SPDX-License-Identifier: GPL-2.0
/*
 * debugfs (/sys/kernel/debug/dri/<minor>/): vgpu_clients (every open file: pid, PASID, VMID,
 * mappings, queues, BOs), vgpu_bos (driver-wide BO counts, so a leak shows), vgpu_mes (the
 * scheduler: ring, errors, the event log's tail).
 */

#include <linux/bitfield.h>
#include <linux/idr.h>
#include <linux/seq_file.h>

#include <drm/drm_debugfs.h>
#include <drm/drm_file.h>

#include "vgpu_drm_dev.h"
#include "gem.h"
#include "vm.h"

static const char *const vgpu_kind_names[VGPU_BO_KINDS] = { "system", "vram", "doorbell" };

static struct vgpu_dev *vgpu_node_dev(struct seq_file *m)
{
	struct drm_info_node *node = m->private;

	return to_vgpu_dev(node->minor->dev);
}

/* The VMIDs whose PASID LUT entry holds pasid: what MES (or the kernel queue) gave it. */
static u32 vgpu_pasid_vmids(struct vgpu_dev *vdev, u16 pasid)
{
	u32 vmids = 0;
	unsigned int v;

	for (v = 1; v < VGPU_VM_CONTEXTS; v++)
		if ((vgpu_rd(vdev, VGPU_REG_VM_PASID_LUT_0 + 4 * v) & 0xffff) == pasid)
			vmids |= BIT(v);
	return vmids;
}

struct vgpu_bo_tally {
	u32 count[VGPU_BO_KINDS];
	u64 bytes[VGPU_BO_KINDS];
};

static int vgpu_tally_one(int id, void *ptr, void *data)
{
	struct vgpu_bo *bo = to_vgpu_bo(ptr);
	struct vgpu_bo_tally *t = data;

	t->count[bo->kind]++;
	t->bytes[bo->kind] += bo->shmem.base.size;
	return 0;
}

static void vgpu_show_mappings(struct seq_file *m, struct vgpu_vm *vm)
{
	struct vgpu_mapping *map;

	vgpu_vm_lock(vm);
	seq_printf(m, "  mappings: %u (page tables %u)\n", vm->nmappings, vm->tables);
	list_for_each_entry(map, &vm->mappings, node)
		seq_printf(m, "  map va %#llx size %#llx flags %c%c%c %s offset %#llx\n", map->va,
			   map->size, map->flags & VGPU_VM_PAGE_READABLE ? 'r' : '-',
			   map->flags & VGPU_VM_PAGE_WRITEABLE ? 'w' : '-',
			   map->flags & VGPU_VM_PAGE_EXECUTABLE ? 'x' : '-',
			   map->obj ? vgpu_kind_names[to_vgpu_bo(map->obj)->kind] : "kernel",
			   map->offset);
	vgpu_vm_unlock(vm);
}

static int vgpu_clients_show(struct seq_file *m, void *unused)
{
	struct vgpu_dev *vdev = vgpu_node_dev(m);
	struct vgpu_bo_tally t;
	struct vgpu_file *vf;
	unsigned int k, n = 0;
	u32 vmids;

	mutex_lock(&vdev->clients_lock);
	list_for_each_entry(vf, &vdev->clients, node) {
		n++;
		vmids = vgpu_pasid_vmids(vdev, vf->vm->pasid) & ~BIT(VGPU_KQ_VMID);
		seq_printf(m, "client pid %d pasid %u vmid ", vf->pid, vf->vm->pasid);
		if (vmids)
			seq_printf(m, "%lu\n", __ffs(vmids));
		else
			seq_puts(m, "-\n");
		vgpu_show_mappings(m, vf->vm);
		vgpu_userq_debugfs_file(m, vf);
		memset(&t, 0, sizeof(t));
		spin_lock(&vf->file->table_lock);
		idr_for_each(&vf->file->object_idr, vgpu_tally_one, &t);
		spin_unlock(&vf->file->table_lock);
		for (k = 0; k < VGPU_BO_KINDS; k++)
			seq_printf(m, "  bos %s: %u, %llu bytes\n", vgpu_kind_names[k], t.count[k],
				   t.bytes[k]);
	}
	mutex_unlock(&vdev->clients_lock);
	if (!n)
		seq_puts(m, "no clients\n");
	return 0;
}

static int vgpu_bos_show(struct seq_file *m, void *unused)
{
	struct vgpu_dev *vdev = vgpu_node_dev(m);
	unsigned int k;

	for (k = 0; k < VGPU_BO_KINDS; k++)
		seq_printf(m, "%s: %d bos, %lld bytes\n", vgpu_kind_names[k],
			   atomic_read(&vdev->bos.count[k]), atomic64_read(&vdev->bos.bytes[k]));
	seq_printf(m, "vram used: %llu of %llu bytes (%llu visible)\n", vdev->vram.used,
		   vdev->vram_size, vdev->vram.visible);
	mutex_lock(&vdev->doorbells.lock);
	seq_printf(m, "doorbell pages used: %u of %u (page 0 the kernel's)\n",
		   bitmap_weight(vdev->doorbells.used, vdev->doorbells.pages),
		   vdev->doorbells.pages);
	mutex_unlock(&vdev->doorbells.lock);
	mutex_lock(&vdev->gart.lock);
	seq_printf(m, "gart pages used: %u of %u\n",
		   bitmap_weight(vdev->gart.used, VGPU_GART_PAGES), (u32)VGPU_GART_PAGES);
	mutex_unlock(&vdev->gart.lock);
	return 0;
}

static void vgpu_mes_log_tail(struct seq_file *m, struct vgpu_dev *vdev, u32 want)
{
	struct vgpu_kbo *log = vdev->mes.log;
	u32 count, entries, n, rec, k;

	if (!log)
		return;
	count = vgpu_kbo_rd(log, 0);
	entries = vgpu_kbo_rd(log, 4);
	if (!entries || entries > VGPU_MES_LOG_ENTRIES)
		return;
	seq_printf(m, "log: %u events\n", count);
	for (n = count > want ? count - want : 0; n < count; n++) {
		if (count - n > entries)
			continue;
		rec = (1 + n % entries) * VGPU_MES_EVENT_BYTES;
		k = vgpu_kbo_rd(log, rec + 4 * VGPU_MES_EVT_DW_KIND);
		seq_printf(m, "  #%u kind %u reason %u slot %u prio %u db %#x vmid_pasid %#x rptr %llu t %llu\n",
			   vgpu_kbo_rd(log, rec + 4 * VGPU_MES_EVT_DW_SEQ),
			   (u32)FIELD_GET(VGPU_MES_EVT_KIND_MASK, k),
			   (u32)FIELD_GET(VGPU_MES_EVT_REASON_MASK, k),
			   (u32)FIELD_GET(VGPU_MES_EVT_SLOT_MASK, k),
			   (u32)FIELD_GET(VGPU_MES_EVT_PRIORITY_MASK, k),
			   vgpu_kbo_rd(log, rec + 4 * VGPU_MES_EVT_DW_DOORBELL),
			   vgpu_kbo_rd(log, rec + 4 * VGPU_MES_EVT_DW_VMID_PASID),
			   (u64)vgpu_kbo_rd(log, rec + 4 * VGPU_MES_EVT_DW_RPTR_HI) << 32 |
			   vgpu_kbo_rd(log, rec + 4 * VGPU_MES_EVT_DW_RPTR_LO),
			   (u64)vgpu_kbo_rd(log, rec + 4 * VGPU_MES_EVT_DW_TIME_HI) << 32 |
			   vgpu_kbo_rd(log, rec + 4 * VGPU_MES_EVT_DW_TIME_LO));
	}
}

static int vgpu_mes_show(struct seq_file *m, void *unused)
{
	struct vgpu_dev *vdev = vgpu_node_dev(m);
	struct vgpu_mes *mes = &vdev->mes;
	u32 st = vgpu_rd(vdev, VGPU_REG_MES_STATUS);
	struct vgpu_ih_shader_error se;
	unsigned long flags;
	u32 nshader;

	seq_printf(m, "running: %u\nstate: %u\nhw_resources: %u\nerror: %s\n", mes->running,
		   (u32)FIELD_GET(VGPU_REG_MES_STATUS__STATE_MASK, st),
		   (u32)FIELD_GET(VGPU_REG_MES_STATUS__HW_RESOURCES_MASK, st),
		   vgpu_mes_err_name(FIELD_GET(VGPU_REG_MES_STATUS__ERROR_MASK, st)));
	seq_printf(m, "vmid_mask: %#x\ncompute_mask: %#x %#x\nslots: %u\n", mes->vmid_mask,
		   mes->compute_mask[0], mes->compute_mask[1], mes->nslots);
	seq_printf(m, "ring: wptr %llu rptr %u seq %llu\n", mes->wptr,
		   vgpu_rd(vdev, VGPU_REG_MES_RING_RPTR), mes->seq);
	seq_printf(m, "frames sent: %u failed: %u last error: %s (%s)\n", mes->frames,
		   mes->failures, vgpu_mes_err_name(mes->last_reason),
		   vgpu_mes_op_name(mes->last_op));
	seq_printf(m, "scheduler resets: %u failed: %u last unanswered: %s; queues added again: %u\n",
		   mes->resets, mes->reset_failures,
		   mes->resets ? vgpu_mes_op_name(mes->last_hung_op) : "-", vdev->userq.readds);
	seq_printf(m, "MES_FRAMES %u MES_FRAME_ERRORS %u MES_QUEUES %u MES_MAPPED %u MES_HUNG %u MES_PROCESSES %u\n",
		   vgpu_rd(vdev, VGPU_REG_MES_FRAMES), vgpu_rd(vdev, VGPU_REG_MES_FRAME_ERRORS),
		   vgpu_rd(vdev, VGPU_REG_MES_QUEUES), vgpu_rd(vdev, VGPU_REG_MES_MAPPED),
		   vgpu_rd(vdev, VGPU_REG_MES_HUNG), vgpu_rd(vdev, VGPU_REG_MES_PROCESSES));
	seq_printf(m, "irqs: mes errors %u hung %u, user eop %u, vm faults %u, cp errors %u\n",
		   vdev->ih.mes_errors, vdev->ih.mes_hung, vdev->userq.eop_irqs,
		   vdev->ih.vm_faults, vdev->ih.cp_errors);
	spin_lock_irqsave(&vdev->ih.lock, flags);
	nshader = vdev->ih.shader_errors;
	se = vdev->ih.last_shader;
	spin_unlock_irqrestore(&vdev->ih.lock, flags);
	seq_printf(m, "shader errors: %u", nshader);
	if (nshader)
		seq_printf(m, " last: %s pc %u addr %#llx pasid %u vmid %u",
			   vgpu_shader_err_name(se.reason), se.pc, se.addr, se.pasid, se.vmid);
	seq_puts(m, "\n");
	seq_printf(m, "kernel queue: slot %u jobs %llu timeouts %u resets %u errors %u\n",
		   vdev->kq.slot, vdev->kq.jobs, vdev->kq.timeouts, vdev->kq.resets,
		   vdev->kq.errors);
	seq_printf(m, "kernel queue fallback: %u fences signalled from memory without their interrupt\n",
		   vdev->kq.lost_irqs);
	mutex_lock(&mes->lock);
	vgpu_mes_log_tail(m, vdev, 16);
	mutex_unlock(&mes->lock);
	return 0;
}

static const struct drm_info_list vgpu_debugfs_list[] = {
	{ "vgpu_clients", vgpu_clients_show, 0 },
	{ "vgpu_bos", vgpu_bos_show, 0 },
	{ "vgpu_mes", vgpu_mes_show, 0 },
};

void vgpu_debugfs_init(struct drm_minor *minor)
{
	drm_debugfs_create_files(vgpu_debugfs_list, ARRAY_SIZE(vgpu_debugfs_list),
				 minor->debugfs_root, minor);
	vgpu_evict_debugfs_init(minor);
}
