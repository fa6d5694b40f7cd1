package dma

// streamMin is the shortest direct copy that streams (streamCopy). Below it Go's copy is
// faster: the store fence that ends a streaming copy waits for every one of its lines to
// reach memory, which a 4 KiB copy does not win back.
const streamMin = 16 << 10

// goStreams is the length from which Go's copy streams by itself (amd64's memmove: AVX
// non-temporal stores with source prefetch); streamCopy leaves those to it.
const goStreams = 1 << 20

// streamCopy is copy(dst, src) for the engines' direct copies (CopyOut, CopyIn: guest memory
// and VRAM, never overlapping): from streamMin up, on amd64, with non-temporal stores, which
// write whole lines to memory without reading them first and leave the CPU caches alone, as a
// DMA engine's writes do. They are fenced (SFENCE) before it returns, so every later store —
// the fence value a client waits for — is seen after the data. From goStreams on, Go's copy
// does the same. In a CPU profile of the copy benchmark (bench.Copy, 64 KiB copies from guest
// memory into VRAM) the streaming loop took 2.4 s where Go's copy on the baseline's side took
// 2.9 s, for more copies (the device's side also ran the benchmark's calibration rounds).
func streamCopy(dst, src []byte) {
	n := min(len(dst), len(src))
	if n < streamMin || n >= goStreams || !canStream || raceEnabled {
		copy(dst, src)
		return
	}
	dst, src = dst[:n], src[:n]
	// The stores need 16-byte aligned destinations: the head up to that is copied, as is
	// the tail after the last whole block.
	head := int(-uintptrOf(dst) & (streamAlign - 1))
	copy(dst[:head], src[:head])
	body := (n - head) &^ (streamBlock - 1)
	streamBody(dst[head:head+body], src[head:head+body])
	copy(dst[head+body:], src[head+body:])
}
