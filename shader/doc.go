// Package shader runs vgpu's shader ISA: eBPF, as the Linux BPF ABI encodes it, executed one
// work-item at a time by a Lane. It is the instruction-level core of the compute units: it
// decodes and checks a program once (Load), runs a work-item until it exits, waits at a
// workgroup barrier, sleeps, uses up its instruction budget, or fails with a named error, and
// can stop between any two instructions and save its whole state (registers, program counter,
// stack) so that a later Restore continues it bit for bit.
//
// Why eBPF: a real, small ISA with a fixed encoding, a Go assembler and decoder
// (github.com/cilium/ebpf/asm, used here to decode) and clang's BPF target for C, so test
// shaders take minutes to write, and the device can execute, preempt and check them exactly.
// What eBPF leaves to its host — the entry state, the helper calls, the stack's place and the
// errors — is vgpu's (abi.SHADER_*, docs/shader.md).
//
// Memory is reached through the Memory interface (a compute unit's L0 cache in front of the
// queue's address space); the stack is the work-item's own and never leaves the Lane. A failed
// memory access leaves the program counter on the instruction, which has had no effect, so a
// work-item parked on a retry fault replays it once the page is mapped.
//
// The package imports only vgpu/abi and the decoder: compute units, the CP and MES build on
// it, never the reverse.
package shader
