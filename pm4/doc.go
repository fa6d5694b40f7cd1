// Package pm4 encodes PM4 type-3 packets the way a driver (amdgpu) writes them: each encoder
// returns the dwords of one packet, built from the field definitions in vgpu/abi, so the host
// tests (cp, mes, device, bench through cp/cptest) and the guest program (guest/drmtest)
// share one definition of every packet. It imports only abi and has no test-only
// dependencies, so it builds into the static guest binary.
//
// Struct-typed packets carry every field the CP decodes; their zero values give the common
// case. Packets AMD defines that vgpu's CP does not execute (WaitRegMem64) are encoded in
// AMD's layout all the same: a queue that runs one halts with CP_ERROR_BAD_OPCODE, as
// docs/device.md says of every unknown opcode.
package pm4
