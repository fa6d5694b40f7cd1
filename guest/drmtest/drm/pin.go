package drm

import (
	"runtime"
	"unsafe"
)

// userPtr returns the address of *p for a __u64 user-pointer field and pins it: a Go pointer
// hidden in an integer is invisible to the runtime, so without the pin the object could live
// on a stack that moves (or be freed) before the kernel reads it. Unpin after the ioctl.
func userPtr[T any](pn *runtime.Pinner, p *T) uint64 {
	pn.Pin(p)
	return uint64(uintptr(unsafe.Pointer(p)))
}
