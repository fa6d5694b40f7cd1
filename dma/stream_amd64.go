package dma

import "unsafe"

const (
	canStream   = true
	streamAlign = 16 // MOVNTDQ's destination alignment
	streamBlock = 64 // bytes per loop (one cache line)
)

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// streamBody copies len(dst) bytes (a multiple of streamBlock; dst streamAlign-aligned) with
// non-temporal stores, then SFENCE.
func streamBody(dst, src []byte) {
	if len(dst) > 0 {
		ntCopy(unsafe.SliceData(dst), unsafe.SliceData(src), uintptr(len(dst)))
	}
}

// ntCopy is in stream_amd64.s.
//
//go:noescape
func ntCopy(dst, src *byte, n uintptr)
