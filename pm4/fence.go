package pm4

import "vgpu/abi"

// ProtectedFenceSignal is PROTECTED_FENCE_SIGNAL (PM4_PROTECTED_FENCE_DWORDS long): on a user
// queue whose MQD has a fence address it writes the ring position after the packet there,
// with the kernel's privilege, and raises an EOP IV. Its one payload dword is reserved (0).
func ProtectedFenceSignal() []uint32 { return Packet(abi.PM4_IT_PROTECTED_FENCE_SIGNAL, 0) }
