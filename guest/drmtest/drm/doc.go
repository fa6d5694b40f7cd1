// Package drm is vgpu-drmtest's binding of the vgpu_drm.ko render node: the uAPI structs and
// ioctl codes generated from guest/drm/uapi/vgpu_drm.h (ztypes_linux_amd64.go), thin ioctl
// wrappers (GEM, VA, USERQ, SIGNAL/WAIT, SUBMIT, syncobjs) that return the kernel's errno,
// and Queue: a user-mode queue the program drives itself — PM4 into its ring, the 64-bit wptr
// in memory, the doorbell through the mapped doorbell page — with no system call per job.
// Everything goes through golang.org/x/sys/unix, so the program builds with CGO_ENABLED=0.
package drm
