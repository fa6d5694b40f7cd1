// SPDX-License-Identifier: GPL-2.0
/*
 * GEM_VA: MAP and UNMAP of BO ranges in the caller's GPU VM, with the checks of the uAPI
 * (docs/uapi.md): everything 4 KiB aligned, inside [VGPU_VA_START, VGPU_VA_END) and inside
 * the BO, no overflow anywhere.
 */

#include <drm/drm_gem.h>

#include "vgpu_drm_dev.h"
#include "vm.h"

static bool vgpu_va_aligned(u64 v)
{
	return !(v & (VGPU_GPU_PAGE - 1));
}

static bool vgpu_va_in_range(u64 va, u64 size)
{
	return size && va >= VGPU_VA_START && va + size > va && va + size <= VGPU_VA_END;
}

int vgpu_gem_va_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct vgpu_file *vf = to_vgpu_file(file);
	struct drm_vgpu_gem_va *args = data;
	struct drm_gem_object *obj;
	int ret;

	if (args->pad || !vgpu_va_aligned(args->va) || !vgpu_va_aligned(args->size) ||
	    !vgpu_va_aligned(args->offset_in_bo) || !vgpu_va_in_range(args->va, args->size))
		return -EINVAL;
	switch (args->op) {
	case VGPU_VA_OP_MAP:
		if (!args->flags || (args->flags & ~VGPU_VM_PAGE_MASK))
			return -EINVAL;
		obj = drm_gem_object_lookup(file, args->handle);
		if (!obj)
			return -ENOENT;
		if (args->offset_in_bo > obj->size || args->size > obj->size - args->offset_in_bo)
			ret = -EINVAL;
		else
			ret = vgpu_vm_map_bo(vf->vm, obj, args->va, args->offset_in_bo, args->size,
					     args->flags);
		drm_gem_object_put(obj);
		return ret;
	case VGPU_VA_OP_UNMAP:
		/* amdgpu's: the mapping of that BO at that range, exactly. */
		if (args->flags || args->offset_in_bo)
			return -EINVAL;
		obj = drm_gem_object_lookup(file, args->handle);
		if (!obj)
			return -ENOENT;
		ret = vgpu_vm_unmap_bo(vf, obj, args->va, args->size);
		drm_gem_object_put(obj);
		return ret;
	}
	return -EINVAL;
}
