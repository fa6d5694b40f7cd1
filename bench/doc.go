// Package bench measures vgpu's hot paths, each beside a baseline measured in the same run,
// because the machines are shared and noisy: only ratios travel between runs. `vgpu bench`
// prints them; `go test -bench . ./bench` runs the same scenarios as Go benchmarks.
//
// The device is driven the way a guest driver would, but through the Go vfio-user client
// (vfiousertest) over a socketpair: BAR0 (VRAM) is mmapped, registers and doorbells are
// trapped REGION_WRITEs (or a mmapped doorbell page in poll mode), interrupts arrive on
// eventfds. Rings, fences and the IH ring live in VRAM, reached through the frame-buffer
// aperture; DMA_DATA sources live in "guest memory" (a memfd mapped with DMA_MAP) reached
// through the GART.
package bench
