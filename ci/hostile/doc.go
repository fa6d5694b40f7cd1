// Package hostile is the hostile-guest suite: Go tests that attack a real `vgpu serve` process
// the way a buggy or malicious guest (and its QEMU) could, through the vfio-user client in
// vfiouser/vfiousertest, so that a crash, a hang, a panic or a data race of the server is seen
// as what it is.
//
// The server binary is built once per test binary from this module (`go build`, or
// `go build -race` with VGPU_HOSTILE_RACE=1) and started with a socket; its stderr (the JSON
// log and the SIGUSR1 diagnostics, which end with a "goroutines: N" line) is kept in a file.
//
// Guest memory is a memfd with guard memory: every area the client DMA_MAPs has unmapped
// guard areas on both sides in the same memfd, filled with a canary pattern, and unmapped IOVA
// space around it. After every attack the canaries must be intact (nothing reached memory that
// was not mapped) and every mapped byte the attack did not target must be as the client left
// it.
//
// After every attack the suite checks, whatever the attack was:
//   - the server answers a register read within livenessTimeout (a hang detector, not a
//     speed assertion) and is still running;
//   - its log since the attack began has no panic, "fatal error" or data race report, and grew
//     by at most logBudget bytes;
//   - DEVICE_RESET returns, and afterwards neither guest memory nor VRAM changes (engines
//     stopped);
//   - a ring test works: one compute queue runs WRITE_DATA and a fenced RELEASE_MEM with an
//     interrupt, the MSI-X eventfd fires, the fence and the data are right and the IH ring
//     holds the end-of-pipe IV;
//   - the canaries are intact and nothing untargeted was written;
//   - once the client has gone, the server's goroutines, file descriptors and memory mappings
//     return to within a small constant of the idle figures taken before the first attack.
//
// RSS, goroutines, fds and mappings are logged before and after each attack; at the end of the
// suite RSS must be within a stated budget of the start.
//
// The suite runs in `go test ./...` and is skipped with -short. VGPU_HOSTILE_SEED sets the
// random seed (the default is fixed, so a failure reproduces), VGPU_HOSTILE_RACE=1 runs the
// server built with the race detector, and VGPU_HOSTILE_SERVER=path runs a vgpu binary built
// elsewhere (another revision) instead of building this one.
package hostile
