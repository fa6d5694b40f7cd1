package pm4

import "vgpu/abi"

// Packet encoders: each returns the dwords of one PM4 packet as a driver would write them.
// Struct-typed packets have every field the CP decodes; zero values give the common case.

// Header is the type-3 header of op with a payload of n ≥ 1 dwords (COUNT = n-1).
func Header(op uint32, n int) uint32 {
	return abi.PM4_TYPE3<<abi.PM4_HEADER_TYPE__SHIFT |
		uint32(n-1)<<abi.PM4_HEADER_COUNT__SHIFT&abi.PM4_HEADER_COUNT_MASK |
		op<<abi.PM4_HEADER_OPCODE__SHIFT&abi.PM4_HEADER_OPCODE_MASK
}

// Packet is a type-3 packet: header and payload.
func Packet(op uint32, payload ...uint32) []uint32 {
	return append([]uint32{Header(op, len(payload))}, payload...)
}

// Nop is a NOP packet total dwords long: PACKET3(NOP, 0x3FFF) for 1, else a header and
// total-1 payload dwords (total ≤ 0x4000).
func Nop(total int) []uint32 {
	if total == 1 {
		return []uint32{abi.PM4_NOP_ONE_DWORD}
	}
	return Packet(abi.PM4_IT_NOP, make([]uint32, total-1)...)
}

// Type2 is the one-dword type-2 filler.
func Type2() []uint32 { return []uint32{abi.PM4_TYPE2_NOP} }

// SetUConfigReg writes vals to UCONFIG registers from off (relative to PM4_SPACE_UCONFIG_BASE).
func SetUConfigReg(off uint32, vals ...uint32) []uint32 {
	return Packet(abi.PM4_IT_SET_UCONFIG_REG, append([]uint32{off}, vals...)...)
}

// SetConfigReg writes vals to CONFIG registers from off (relative to PM4_SPACE_CONFIG_BASE).
func SetConfigReg(off uint32, vals ...uint32) []uint32 {
	return Packet(abi.PM4_IT_SET_CONFIG_REG, append([]uint32{off}, vals...)...)
}

// SetShReg writes vals to SH registers from off (relative to PM4_SPACE_SH_BASE).
func SetShReg(off uint32, vals ...uint32) []uint32 {
	return Packet(abi.PM4_IT_SET_SH_REG, append([]uint32{off}, vals...)...)
}

// WriteData is a WRITE_DATA packet.
type WriteData struct {
	Dst         uint32 // PM4_WRITE_DATA_DST_*
	Addr        uint64 // memory address, or register dword offset
	OneAddr     bool
	Confirm     bool
	CachePolicy uint32
	Data        []uint32
}

func (p WriteData) Encode() []uint32 {
	d1 := p.Dst<<abi.PM4_WRITE_DATA_DST_SEL__SHIFT | p.CachePolicy<<abi.PM4_WRITE_DATA_CACHE_POLICY__SHIFT
	if p.OneAddr {
		d1 |= abi.PM4_WRITE_DATA_WR_ONE_ADDR_MASK
	}
	if p.Confirm {
		d1 |= abi.PM4_WRITE_DATA_WR_CONFIRM_MASK
	}
	return Packet(abi.PM4_IT_WRITE_DATA, append([]uint32{d1, uint32(p.Addr), uint32(p.Addr >> 32)}, p.Data...)...)
}

// WriteMem is amdgpu's WRITE_DATA to memory (DST_SEL 5, WR_CONFIRM, cached).
func WriteMem(addr uint64, data ...uint32) []uint32 {
	return WriteData{Dst: abi.PM4_WRITE_DATA_DST_MEM, Addr: addr, Confirm: true, Data: data}.Encode()
}

// WriteReg is WRITE_DATA to consecutive registers from dword offset reg.
func WriteReg(reg uint32, data ...uint32) []uint32 {
	return WriteData{Dst: abi.PM4_WRITE_DATA_DST_REG, Addr: uint64(reg), Data: data}.Encode()
}

// CopyData is a COPY_DATA packet.
type CopyData struct {
	SrcSel, DstSel       uint32 // PM4_COPY_DATA_SEL_*
	Src, Dst             uint64 // address, register, or immediate (Src)
	Bits64               bool
	SrcPolicy, DstPolicy uint32
}

func (p CopyData) Encode() []uint32 {
	d1 := p.SrcSel<<abi.PM4_COPY_DATA_SRC_SEL__SHIFT | p.DstSel<<abi.PM4_COPY_DATA_DST_SEL__SHIFT |
		p.SrcPolicy<<abi.PM4_COPY_DATA_SRC_CACHE_POLICY__SHIFT | p.DstPolicy<<abi.PM4_COPY_DATA_DST_CACHE_POLICY__SHIFT
	if p.Bits64 {
		d1 |= abi.PM4_COPY_DATA_COUNT_SEL_MASK
	}
	return Packet(abi.PM4_IT_COPY_DATA, d1, uint32(p.Src), uint32(p.Src>>32), uint32(p.Dst), uint32(p.Dst>>32))
}

// IndirectBuffer is an INDIRECT_BUFFER packet (amdgpu's compute form sets VALID).
type IndirectBuffer struct {
	Addr  uint64
	Size  uint32 // dwords
	Chain bool
	VMID  uint32
}

func (p IndirectBuffer) Encode() []uint32 {
	ctl := p.Size&abi.PM4_IB_SIZE_MASK | abi.PM4_IB_VALID_MASK | p.VMID<<abi.PM4_IB_VMID__SHIFT&abi.PM4_IB_VMID_MASK
	if p.Chain {
		ctl |= abi.PM4_IB_CHAIN_MASK
	}
	return Packet(abi.PM4_IT_INDIRECT_BUFFER, uint32(p.Addr), uint32(p.Addr>>32), ctl)
}

// RELEASE_MEM values (abi documents them in field texts only).
const (
	DataNone, Data32, Data64, DataGPUClock, DataSysClock = 0, 1, 2, 3, 4
	IntNone, IntSend, IntConfirm                         = 0, 1, 2
	DstMem, DstL2                                        = 0, 1
)

// ReleaseMem is a RELEASE_MEM packet.
type ReleaseMem struct {
	Event, EventIndex uint32 // 0, 0: CACHE_FLUSH_AND_INV_TS_EVENT, INDEX_EOP
	GCR               uint32 // DW1 PM4_RELEASE_MEM_GCR_* bits
	CachePolicy       uint32
	DstSel            uint32
	IntSel, DataSel   uint32
	Addr              uint64
	Data              uint64
	CtxID             uint32
}

func (p ReleaseMem) Encode() []uint32 {
	if p.Event == 0 && p.EventIndex == 0 {
		p.Event, p.EventIndex = abi.PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, abi.PM4_EVENT_INDEX_EOP
	}
	d1 := p.Event<<abi.PM4_RELEASE_MEM_EVENT_TYPE__SHIFT | p.EventIndex<<abi.PM4_RELEASE_MEM_EVENT_INDEX__SHIFT |
		p.GCR | p.CachePolicy<<abi.PM4_RELEASE_MEM_CACHE_POLICY__SHIFT
	d2 := p.DstSel<<abi.PM4_RELEASE_MEM_DST_SEL__SHIFT | p.IntSel<<abi.PM4_RELEASE_MEM_INT_SEL__SHIFT |
		p.DataSel<<abi.PM4_RELEASE_MEM_DATA_SEL__SHIFT
	return Packet(abi.PM4_IT_RELEASE_MEM, d1, d2, uint32(p.Addr), uint32(p.Addr>>32),
		uint32(p.Data), uint32(p.Data>>32), p.CtxID)
}

// FenceGCR is the cache part of gfx11's fence: GCR_SEQ | GL2_WB | GLM_INV | GLM_WB.
const FenceGCR = abi.PM4_RELEASE_MEM_GCR_SEQ_MASK | abi.PM4_RELEASE_MEM_GCR_GL2_WB_MASK |
	abi.PM4_RELEASE_MEM_GCR_GLM_INV_MASK | abi.PM4_RELEASE_MEM_GCR_GLM_WB_MASK

// Fence is amdgpu's job fence: write back L2, then the 32-bit seq with policy BYPASS, then
// (irq) an interrupt with INT_CTXID ctx.
func Fence(addr uint64, seq uint32, ctx uint32, irq bool) []uint32 {
	p := ReleaseMem{GCR: FenceGCR, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, DataSel: Data32,
		Addr: addr, Data: uint64(seq), CtxID: ctx}
	if irq {
		p.IntSel = IntConfirm
	}
	return p.Encode()
}

// AcquireMem is an ACQUIRE_MEM packet; Base and Size are in 256-byte units (SizeAll: all).
type AcquireMem struct {
	GCR        uint32 // GCR_CNTL
	Base, Size uint64
}

// SizeAll is ACQUIRE_MEM's "everything" size (COHER_SIZE 0xFFFFFFFF, COHER_SIZE_HI 0xFFFFFF).
const SizeAll = 0xFFFFFF_FFFFFFFF

func (p AcquireMem) Encode() []uint32 {
	return Packet(abi.PM4_IT_ACQUIRE_MEM, 0, uint32(p.Size), uint32(p.Size>>32),
		uint32(p.Base), uint32(p.Base>>32), 0xA, p.GCR)
}

// WAIT_REG_MEM values.
const (
	FuncAlways, FuncLT, FuncLE, FuncEQ, FuncNE, FuncGE, FuncGT = 0, 1, 2, 3, 4, 5, 6
	SpaceReg, SpaceMem                                         = 0, 1
	OpWait, OpWriteWait                                        = 0, 1
)

// WaitRegMem is a WAIT_REG_MEM packet. Memory waits use Addr; register waits Reg1 (and Reg2
// for write-then-wait).
type WaitRegMem struct {
	Function, Space, Operation, CachePolicy uint32
	Addr                                    uint64
	Reg1, Reg2                              uint32
	Ref, Mask                               uint32
	Interval                                uint32 // µs
}

func (p WaitRegMem) Encode() []uint32 {
	d1 := p.Function<<abi.PM4_WAIT_REG_MEM_FUNCTION__SHIFT | p.Space<<abi.PM4_WAIT_REG_MEM_MEM_SPACE__SHIFT |
		p.Operation<<abi.PM4_WAIT_REG_MEM_OPERATION__SHIFT | p.CachePolicy<<abi.PM4_WAIT_REG_MEM_CACHE_POLICY__SHIFT
	a, b := uint32(p.Addr), uint32(p.Addr>>32)
	if p.Space == SpaceReg {
		a, b = p.Reg1, p.Reg2
	}
	return Packet(abi.PM4_IT_WAIT_REG_MEM, d1, a, b, p.Ref, p.Mask, p.Interval)
}

// WaitMem is amdgpu's pipeline sync: wait until the dword at addr == ref (bypassing L2).
func WaitMem(addr uint64, ref uint32) []uint32 {
	return WaitRegMem{Function: FuncEQ, Space: SpaceMem, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS,
		Addr: addr, Ref: ref, Mask: 0xFFFFFFFF, Interval: 4}.Encode()
}

// EventWrite is EVENT_WRITE of a type and index (no address).
func EventWrite(typ, index uint32) []uint32 {
	return Packet(abi.PM4_IT_EVENT_WRITE, typ<<abi.PM4_EVENT_TYPE__SHIFT|index<<abi.PM4_EVENT_INDEX__SHIFT)
}

// CSPartialFlush is EVENT_WRITE(CS_PARTIAL_FLUSH, 4).
func CSPartialFlush() []uint32 {
	return EventWrite(abi.PM4_EVENT_CS_PARTIAL_FLUSH, abi.PM4_EVENT_INDEX_CS_PARTIAL_FLUSH)
}

// DMAData is a DMA_DATA packet. For a fill (SrcSel PM4_DMA_DATA_SEL_DATA) Src is the data.
type DMAData struct {
	SrcSel, DstSel       uint32
	SrcPolicy, DstPolicy uint32
	Src, Dst             uint64
	Count                uint32 // bytes
	SAIC, DAIC, CPSync   bool
	SAS, DAS             bool
}

func (p DMAData) Encode() []uint32 {
	d1 := p.SrcSel<<abi.PM4_DMA_DATA_SRC_SEL__SHIFT | p.DstSel<<abi.PM4_DMA_DATA_DST_SEL__SHIFT |
		p.SrcPolicy<<abi.PM4_DMA_DATA_SRC_CACHE_POLICY__SHIFT | p.DstPolicy<<abi.PM4_DMA_DATA_DST_CACHE_POLICY__SHIFT
	if p.CPSync {
		d1 |= abi.PM4_DMA_DATA_CP_SYNC_MASK
	}
	d6 := p.Count & abi.PM4_DMA_DATA_BYTE_COUNT_MASK
	for _, b := range []struct {
		on   bool
		mask uint32
	}{{p.SAIC, abi.PM4_DMA_DATA_SAIC_MASK}, {p.DAIC, abi.PM4_DMA_DATA_DAIC_MASK}, {p.SAS, abi.PM4_DMA_DATA_SAS_MASK}, {p.DAS, abi.PM4_DMA_DATA_DAS_MASK}} {
		if b.on {
			d6 |= b.mask
		}
	}
	return Packet(abi.PM4_IT_DMA_DATA, d1, uint32(p.Src), uint32(p.Src>>32), uint32(p.Dst), uint32(p.Dst>>32), d6)
}

// DMACopy copies n bytes from src to dst through L2.
func DMACopy(dst, src uint64, n uint32) []uint32 {
	return DMAData{SrcSel: abi.PM4_DMA_DATA_SEL_ADDR_L2, DstSel: abi.PM4_DMA_DATA_SEL_ADDR_L2, Src: src, Dst: dst, Count: n, CPSync: true}.Encode()
}

// DMAFill fills n bytes at dst with the dword v through L2.
func DMAFill(dst uint64, v uint32, n uint32) []uint32 {
	return DMAData{SrcSel: abi.PM4_DMA_DATA_SEL_DATA, DstSel: abi.PM4_DMA_DATA_SEL_ADDR_L2, Src: uint64(v), Dst: dst, Count: n, CPSync: true}.Encode()
}

// DispatchDirect is DISPATCH_DIRECT of x*y*z groups (DISPATCH_INITIATOR: COMPUTE_SHADER_EN).
func DispatchDirect(x, y, z uint32) []uint32 {
	return Packet(abi.PM4_IT_DISPATCH_DIRECT, x, y, z, 1)
}

// Kernel sets COMPUTE_USER_DATA_0..5 for a built-in kernel: KERNEL_*, destination, source,
// fill value.
func Kernel(kernel uint32, dst, src uint64, value uint32) []uint32 {
	return SetShReg(abi.SH_COMPUTE_USER_DATA_0, kernel, uint32(dst), uint32(dst>>32), uint32(src), uint32(src>>32), value)
}

// PfpSyncMe is PFP_SYNC_ME (graphics queue only).
func PfpSyncMe() []uint32 { return Packet(abi.PM4_IT_PFP_SYNC_ME, 0) }
