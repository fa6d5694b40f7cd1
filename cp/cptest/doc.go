// Package cptest is the guest side of cp's tests: a Ring/IB builder that lays packets out in
// memory and kicks the queue, and simple stand-ins for what the device wires to the CP: Memory (a flat byte slice,
// GPU address = offset, with optional faulting pages and an event trace), Registers (a map,
// served under one "device lock" like the real register file) and Interrupts (an IV
// recorder). Rig puts them together. The packets themselves come from package pm4, which the
// guest program shares.
//
// Ring.SelfKick builds the hostile case of a queue that always has work.
//
// Device-level tests use the real gpummu, l2 and irq instead; these exist so every CP
// protocol case can be reached without them.
package cptest
