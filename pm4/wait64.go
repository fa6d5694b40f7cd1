package pm4

import "vgpu/abi"

// OpcodeWaitRegMem64 is AMD's PACKET3_WAIT_REG_MEM64 (IT opcode 0x93). abi has no constant for
// it because vgpu's CP does not execute it (CP_ERROR_BAD_OPCODE); the encoder exists so a
// program can emit what amdgpu's user-queue waiters emit once the CP learns it.
const OpcodeWaitRegMem64 = 0x93

// WaitRegMem64 is WAIT_REG_MEM64, the 64-bit memory wait of a user-queue waiter (a fence
// value ≥ a seqno), in AMD's layout: DW1 as WAIT_REG_MEM's (function, MEM_SPACE 1,
// operation, cache policy), DW2/3 the 8-byte aligned address, DW4/5 the reference, DW6/7 the
// mask, DW8 the poll interval.
type WaitRegMem64 struct {
	Function, CachePolicy uint32
	Addr                  uint64
	Ref, Mask             uint64
	Interval              uint32
}

func (p WaitRegMem64) Encode() []uint32 {
	d1 := p.Function<<abi.PM4_WAIT_REG_MEM_FUNCTION__SHIFT | SpaceMem<<abi.PM4_WAIT_REG_MEM_MEM_SPACE__SHIFT |
		p.CachePolicy<<abi.PM4_WAIT_REG_MEM_CACHE_POLICY__SHIFT
	return Packet(OpcodeWaitRegMem64, d1, uint32(p.Addr), uint32(p.Addr>>32),
		uint32(p.Ref), uint32(p.Ref>>32), uint32(p.Mask), uint32(p.Mask>>32), p.Interval)
}

// WaitFence64 waits until the 64-bit value at addr is ≥ seq (bypassing L2): the wait a user
// queue emits for a fence USERQ_WAIT returned.
func WaitFence64(addr, seq uint64) []uint32 {
	return WaitRegMem64{Function: FuncGE, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, Addr: addr,
		Ref: seq, Mask: ^uint64(0), Interval: 4}.Encode()
}
