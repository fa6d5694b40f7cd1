package hostile

import (
	"math/rand/v2"

	"vgpu/abi"
	"vgpu/pm4"
)

// edgeAddrs are GPU addresses where bugs live: the ends of the apertures, of the guest
// mappings behind them, of the 48-bit space and of the 64-bit space. Writes there either land
// in the sys or nofd areas, in VRAM, or must fault.
var edgeAddrs = []uint64{
	gart(gSys), gart(gSys) + sysSize - 4, gart(gSys) + sysSize - 8, gart(gPastSys), gart(gNofd),
	gart(gNofd) + nofdSize - 4, gart(gInvalid), gart(gReadOnly), gart(gPastVRAM), gart(gPages),
	gartBase - 4, fb(vScratch), fb(vBig), fb(vramSize - 4), fb(vramSize - 8), fb(vramSize),
	abi.GPU_FB_BASE - 4, 1<<48 - 4, 1 << 48, 1<<63 - 4, ^uint64(0) - 3, ^uint64(0) - 7, 0, 4,
}

// randAddr picks an engine address: an edge, somewhere in the sys area or in engine scratch
// VRAM, or anything at all; aligned to four bytes most of the time.
func randAddr(r *rand.Rand) uint64 {
	var a uint64
	switch r.IntN(6) {
	case 0, 1:
		a = edgeAddrs[r.IntN(len(edgeAddrs))]
	case 2:
		a = gart(gSys) + r.Uint64N(sysSize)
	case 3:
		a = fb(vScratch + r.Uint64N(vramSize-vScratch))
	case 4:
		a = r.Uint64N(1 << 48)
	default:
		a = r.Uint64()
	}
	if r.IntN(8) != 0 {
		a &^= 3
	}
	return a
}

// randReg picks a register dword offset as packets name them: HQD registers of any slot, the
// IH, GMC and scratch blocks, the MSI-X page (refused to packets), past the BAR, or anything.
func randReg(r *rand.Rand) uint32 {
	switch r.IntN(6) {
	case 0:
		return hqd(r.IntN(numSlots), uint32(r.IntN(abi.BLOCK_HQD_STRIDE/4))*4) / 4
	case 1:
		return (abi.BLOCK_IH_BASE + uint32(r.IntN(abi.BLOCK_IH_SIZE/4))*4) / 4
	case 2:
		return (abi.BLOCK_GMC_BASE + uint32(r.IntN(abi.BLOCK_GMC_SIZE/4))*4) / 4
	case 3:
		return abi.REG_SCRATCH_0/4 + uint32(r.IntN(8))
	case 4:
		return []uint32{abi.REGS_MSIX_TABLE_OFFSET / 4, abi.REGS_SIZE / 4, abi.REGS_SIZE/4 - 1, 1<<18 - 1}[r.IntN(4)]
	}
	return r.Uint32() & (1<<18 - 1)
}

// randCount is a byte count for copies: small, a page, up to a few MiB, the 26-bit maximum,
// or anything the field holds.
func randCount(r *rand.Rand) uint32 {
	switch r.IntN(5) {
	case 0:
		return uint32(r.IntN(64)) * 4
	case 1:
		return 4096
	case 2:
		return uint32(r.IntN(4<<20)) &^ 3
	case 3:
		return abi.PM4_DMA_DATA_BYTE_COUNT_MASK
	}
	return r.Uint32() & abi.PM4_DMA_DATA_BYTE_COUNT_MASK
}

// randPacket builds one packet a confused or hostile driver might write: a supported packet
// with random fields (encoded as cptest encodes it), an unsupported opcode, or random dwords;
// one in eight gets a random bit flipped.
func randPacket(r *rand.Rand) []uint32 {
	var p []uint32
	switch r.IntN(16) {
	case 0:
		p = pm4.Nop(1 + r.IntN(8))
	case 1:
		data := make([]uint32, 1+r.IntN(8))
		for i := range data {
			data[i] = garbage(r)
		}
		p = pm4.WriteData{Dst: []uint32{0, 1, 2, 5, 7}[r.IntN(5)], Addr: randAddr(r), OneAddr: r.IntN(4) == 0,
			CachePolicy: uint32(r.IntN(4)), Data: data}.Encode()
		if p[1]&abi.PM4_WRITE_DATA_DST_SEL_MASK == 0 {
			p[2], p[3] = randReg(r), 0
		}
	case 2:
		w := pm4.WaitRegMem{Function: uint32(r.IntN(8)), Space: uint32(r.IntN(3)), Operation: uint32(r.IntN(4)),
			CachePolicy: uint32(r.IntN(4)), Addr: randAddr(r), Reg1: randReg(r), Reg2: randReg(r),
			Ref: garbage(r), Mask: garbage(r), Interval: uint32(r.IntN(20))}
		p = w.Encode()
	case 3:
		p = pm4.IndirectBuffer{Addr: randAddr(r), Size: []uint32{0, 1, 16, 1024, abi.PM4_IB_SIZE_MASK}[r.IntN(5)], Chain: r.IntN(3) == 0}.Encode()
	case 4:
		sels := []uint32{0, 1, 2, 4, 5, 9, 15}
		p = pm4.CopyData{SrcSel: sels[r.IntN(len(sels))], DstSel: sels[r.IntN(len(sels))], Src: randAddr(r), Dst: randAddr(r),
			Bits64: r.IntN(2) == 0, SrcPolicy: uint32(r.IntN(4)), DstPolicy: uint32(r.IntN(4))}.Encode()
	case 5:
		p = pm4.ReleaseMem{Event: uint32(r.IntN(64)), EventIndex: uint32(r.IntN(16)), GCR: r.Uint32() & 0x7FF000,
			CachePolicy: uint32(r.IntN(4)), DstSel: uint32(r.IntN(4)), IntSel: uint32(r.IntN(8)), DataSel: uint32(r.IntN(8)),
			Addr: randAddr(r), Data: r.Uint64(), CtxID: r.Uint32()}.Encode()
	case 6:
		p = pm4.DMAData{SrcSel: uint32(r.IntN(4)), DstSel: uint32(r.IntN(4)), SrcPolicy: uint32(r.IntN(4)), DstPolicy: uint32(r.IntN(4)),
			Src: randAddr(r), Dst: randAddr(r), Count: randCount(r), SAIC: r.IntN(6) == 0, DAIC: r.IntN(6) == 0,
			CPSync: r.IntN(2) == 0, SAS: r.IntN(10) == 0, DAS: r.IntN(10) == 0}.Encode()
	case 7:
		p = pm4.AcquireMem{GCR: r.Uint32() & 0x7FFFF, Base: r.Uint64(), Size: []uint64{0, 1, pm4.SizeAll, r.Uint64()}[r.IntN(4)]}.Encode()
	case 8:
		vals := make([]uint32, 1+r.IntN(6))
		for i := range vals {
			vals[i] = garbage(r)
		}
		off := uint32(r.IntN(0x400 + 8))
		switch r.IntN(3) {
		case 0:
			p = pm4.SetUConfigReg(off, vals...)
		case 1:
			p = pm4.SetConfigReg(off, vals...)
		default:
			p = pm4.SetShReg(off, vals...)
		}
	case 9:
		a, b := randAddr(r), randAddr(r)
		p = pm4.Kernel(uint32(r.IntN(6)), a, b, garbage(r))
	case 10:
		dims := []uint32{0, 1, 64, 1 << 10, cpMaxDispatchGroups, cpMaxDispatchGroups + 1, 0xFFFFFFFF}
		p = pm4.DispatchDirect(dims[r.IntN(len(dims))], dims[r.IntN(3)], dims[r.IntN(3)])
	case 11:
		p = pm4.EventWrite(uint32(r.IntN(64)), uint32(r.IntN(16)))
	case 12:
		p = pm4.PfpSyncMe()
	case 13:
		// An opcode the CP does not implement, with a plausible payload.
		p = pm4.Packet([]uint32{0x00, 0x11, 0x2A, 0x73, 0xFF}[r.IntN(5)], make([]uint32, 1+r.IntN(6))...)
	default:
		p = make([]uint32, 1+r.IntN(8))
		for i := range p {
			p[i] = r.Uint32()
		}
	}
	if r.IntN(8) == 0 {
		p[r.IntN(len(p))] ^= 1 << r.IntN(32)
	}
	return p
}

// cpMaxDispatchGroups mirrors cp.MaxDispatchGroups (docs: "≤ MaxDispatchGroups workgroups").
const cpMaxDispatchGroups = 1 << 20

// randStream fills n dwords with random packets (the last one cut at the end, as a ring full
// of garbage would be).
func randStream(r *rand.Rand, n int) []uint32 {
	out := make([]uint32, 0, n+64)
	for len(out) < n {
		out = append(out, randPacket(r)...)
	}
	return out[:n]
}

// randDwords is n uniformly random dwords.
func randDwords(r *rand.Rand, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = r.Uint32()
	}
	return out
}
