// Package compute is the device's compute units: they run shader dispatches (vgpu/shader
// programs) asynchronously to whoever started them, workgroup by workgroup, each CU with its
// own small L0 cache in front of the L2.
//
// A Pool has a fixed number of CUs shared by every queue; at most Parallel of them execute at
// once (as many as the host has cores), the others wait for a turn. Start hands the pool a
// Dispatch and returns its Run at once: the command processor goes on with its next packets
// while the workgroups run, and waits for the Run only where the packet stream asks it to (an
// end-of-pipe fence, a partial flush). Workgroups are claimed in order by whichever CU is free;
// inside one, the CU runs its work-items in turn, each for a bounded number of instructions,
// so barriers, sleeps and retry faults park only the work-items they concern.
//
// A Run stops early in three ways: a shader error ends it (the first error wins, an IV names
// it), Kill stops it unsaved (a queue reset), and Preempt stops every work-item between two
// instructions and returns the whole state (the workgroups in flight, each work-item's
// registers, program counter and stack, and the first workgroup not started), from which a
// later Start with Resume continues so that the results are those of an uninterrupted run.
//
// The L0s are not coherent with each other or with the L2: a line stays until replaced or
// invalidated (InvalidateL0, which ACQUIRE_MEM's GL0 bits drive). Stores write through; atomics
// go to the L2. In strict mode a load served by the L0 is compared with memory and a
// difference is reported as a stale read.
//
// The package builds on vgpu/shader (the ISA) and vgpu/engine (memory and interrupts), like
// the other engines; the CP and the device assemble it.
package compute
