//go:build !amd64

package dma

const (
	canStream   = false
	streamAlign = 1
	streamBlock = 1
)

func uintptrOf([]byte) uintptr { return 0 }

func streamBody(dst, src []byte) { copy(dst, src) }
