// Package bench measures vgpu's hot paths, each beside a baseline measured in the same run,
// because the machines are shared and noisy: only ratios travel between runs. `vgpu bench`
// prints them; `go test -bench . ./bench` runs the same scenarios as Go benchmarks.
//
// A Scenario is a device Op and a baseline Op: each performs n iterations and checks every
// result (stopping the clock around checks that are not part of the measurement), so a Go
// benchmark runs it for b.N and `vgpu bench` calibrates both sides and alternates rounds of
// each. A side that cannot be set up, or whose results check wrong, is an error with its
// reason, never a quiet zero: a baseline that measured nothing would make any ratio look good.
//
// Baselines are floors where one exists: the same sequence done by a trivial stand-in in the
// same run (a raw socket echo for a register read; a server that receives the trapped doorbell
// write, replies and signals an eventfd; a poller that sees the polled doorbell and signals;
// the CP alone over cptest's in-memory stand-ins for the packet rate; Go's copy between the
// same mappings for DMA_DATA). Where the question is a comparison, the baseline is the other
// half of it in the same rig: one of the 16 queues alone beside all 16 in 16 VMIDs, the
// VMID-0 queue beside a process queue. Latencies are µs per op (ratio > 1: the device is slower), rates
// per second (ratio < 1: the device is slower).
//
// A time is the host's wall clock, except where a Scenario says EngineTime: the DMA_DATA copy
// figures time the copy engine with GPU timestamps (RELEASE_MEM's GPU clock before the first
// and after the last copy of each submission), as copy benchmarks on a GPU do, leaving out the
// doorbell and interrupt wake-ups that the doorbell figures measure on their own and that on a
// loaded host are the OS scheduler's; their wall-clock figure, from the same runs, is in the
// note (engine_time.go).
//
// The device is driven the way a guest driver would, but through the Go vfio-user client
// (vfiousertest) over a socketpair: BAR0 (VRAM) is mmapped, registers and doorbells are
// trapped REGION_WRITEs (or a mmapped doorbell page in poll mode), interrupts arrive on
// eventfds. Rings, fences and the IH ring live in VRAM, reached through the frame-buffer
// aperture; DMA_DATA sources live in "guest memory" (a memfd mapped with DMA_MAP) reached
// through the GART. The device is served in this process, except for the register read under
// load, whose device runs in a child process (as for QEMU) so the client does not compete with
// the device's busy goroutines for one Go scheduler: programs that run that scenario call
// ServeIfChild first.
//
// The MES figures (mes*.go) drive the scheduler firmware as amdgpu and a user-mode driver do:
// frames on the MES API ring in VRAM, v11 MQDs, process page tables, user queues submitted
// through their wptr shadows and doorbells. They alternate rounds of several sides themselves
// (1024 queues beside 16 permanently mapped ones on a second device; jobs with and without a
// switch beside 20 packets; a HIGH queue's job under load beside the idle device) and return
// their results directly, like the register read under load.
package bench
