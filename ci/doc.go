// Package ci holds the tests that attach a real QEMU to the real vgpu server: what only a real
// client proves (QEMU's attach sequence, firmware BAR assignment, system_reset, reconnects).
// They run in `go test ./...` and on CI; they skip only with -short or VGPU_SKIP_QEMU=1, and a
// QEMU that cannot be provisioned is a failure.
package ci
