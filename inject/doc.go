// Package inject is vgpu's fault injection: rules that make the device misbehave on purpose,
// the way real hardware sometimes does, so a driver's recovery paths can be exercised on
// demand. A rule drops or delays an interrupt, drops or corrupts an IV on its way into the IH
// ring, fails DMA to an IOVA range, stalls a queue as if it hung, makes an MES API frame never
// complete, or leaves a VMID's TLB entries in place after an invalidation.
//
// The grammar (docs/inject.md has it with examples) is a ';'-separated list of rules, each a
// kind and optional "key=value" parameters after a ':' separated by ',':
//
//	irq.drop:vector=0,n=2; mes.hang:op=0x4; dma.fail:iova=0x1000-0x2000,dir=write
//
// Parse turns the text into Rules with named errors; a Set holds the live rules of one device.
// The engines' hooks ask the Set whether an event is to be injected (Interrupt, IV, DMA,
// Stall, MESFrame, Stale); a Set with no rule of a kind answers with one atomic load (Has),
// so the hooks cost one predictable branch when injection is off. Every injection is counted
// on its rule and logged through a ratelog.Limiter under the key "inject-" + kind.
//
// Rules are the user's configuration: a device reset does not clear them (Clear does). What
// they did to the device may be undone by a reset (a stalled queue is released by it), so a
// driver's recovery works while the rule stays in place.
//
// The package is a leaf (standard library and ratelog): numbers in rules are plain numbers; a
// caller may pass a Resolver to Parse so that names (an IV source, an MES opcode) work too.
package inject
