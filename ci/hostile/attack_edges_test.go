package hostile

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// Addresses at the ends of things.
const (
	sysEnd  = sysIOVA + sysSize  // first IOVA past the sys mapping
	gSysEnd = gartBase + sysSize // its GPU address (GART page gPastSys)
	topLast = ^uint64(0) - 3     // the last dword of the 64-bit IOVA space (in top)
	gTopEnd = gartBase + gTop*abi.PTE_PAGE_SIZE + topSize
	fbEnd   = abi.GPU_FB_BASE + vramSize
)

var (
	faultCodes = []uint32{abi.CP_ERROR_TRANSLATION, abi.CP_ERROR_MEMORY}
	badPkt     = []uint32{abi.CP_ERROR_BAD_PACKET}
	ringCfg    = []uint32{abi.CP_ERROR_RING_CONFIG}
	anyHalt    = []uint32{abi.CP_ERROR_TRANSLATION, abi.CP_ERROR_MEMORY, abi.CP_ERROR_BAD_PACKET, abi.CP_ERROR_RING_CONFIG, abi.CP_ERROR_BAD_OPCODE}
)

// landing is a value an in-range access must leave in guest memory.
type landing struct {
	iova uint64
	want []byte
}

// edgeCase is one access at or beyond an end. halt lists the errors that may stop the queue
// (nil: the packets must run to completion and every landing be there); allow is what the
// case may change in guest memory (besides its landings).
type edgeCase struct {
	name    string
	packets [][]uint32
	halt    []uint32
	lands   []landing
	allow   [][2]uint64
}

func u64le(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func fill32(v uint32, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+4 <= n; i += 4 {
		binary.LittleEndian.PutUint32(b[i:], v)
	}
	return b
}

func bypassWrite(addr uint64, data ...uint32) []uint32 {
	return pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_MEM, Addr: addr, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, Data: data}.Encode()
}

func release(addr uint64, sel uint32, data uint64) []uint32 {
	return pm4.ReleaseMem{GCR: pm4.FenceGCR, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, DataSel: sel, Addr: addr, Data: data}.Encode()
}

// dmaDirect is DMA_DATA with SEL 0 on both sides: straight to memory, the direct-copy path.
func dmaDirect(dst, src uint64, n uint32) []uint32 {
	return pm4.DMAData{Dst: dst, Src: src, Count: n, CPSync: true}.Encode()
}

func dmaFillDirect(dst uint64, v, n uint32) []uint32 {
	return pm4.DMAData{SrcSel: abi.PM4_DMA_DATA_SEL_DATA, Dst: dst, Src: uint64(v), Count: n, CPSync: true}.Encode()
}

// writeBack is ACQUIRE_MEM GL2_WB of everything: cached writes reach memory.
func writeBack() []uint32 {
	return pm4.AcquireMem{GCR: abi.PM4_ACQUIRE_MEM_GCR_GL2_WB_MASK, Size: pm4.SizeAll}.Encode()
}

func packetEdgeCases() []edgeCase {
	return []edgeCase{
		{name: "fence32 at the last dword of a mapping", packets: [][]uint32{release(gSysEnd-4, pm4.Data32, 0xF00DF00D)},
			lands: []landing{{sysEnd - 4, le(0xF00DF00D)}}},
		{name: "fence64 at the last qword of a mapping", packets: [][]uint32{release(gSysEnd-8, pm4.Data64, 0x1122334455667788)},
			lands: []landing{{sysEnd - 8, u64le(0x1122334455667788)}}},
		{name: "fence64 straddling the end of a mapping", packets: [][]uint32{release(gSysEnd-4, pm4.Data64, 0x99)},
			halt: anyHalt, allow: [][2]uint64{{sysEnd - 4, 4}}},
		{name: "fence past the end of a mapping", packets: [][]uint32{release(gSysEnd, pm4.Data32, 7)}, halt: faultCodes},
		{name: "WRITE_DATA straddling the end of a mapping (bypass)", packets: [][]uint32{bypassWrite(gSysEnd-4, 1, 2)},
			halt: faultCodes, allow: [][2]uint64{{sysEnd - 4, 4}}},
		{name: "WRITE_DATA straddling the end of a mapping (L2)", packets: [][]uint32{pm4.WriteMem(gSysEnd-4, 1, 2), writeBack()},
			halt: faultCodes, allow: [][2]uint64{{sysEnd - 4, 4}}},
		// PTE addresses are 48 bits: a PTE cannot name the top of the 64-bit IOVA space, and one
		// whose address was written with the high bits set must not reach it either.
		{name: "WRITE_DATA through a PTE naming an IOVA above 2^48", packets: [][]uint32{bypassWrite(gTopEnd-4, 0xCAFEF00D)},
			halt: faultCodes},
		{name: "WRITE_DATA through L2 and a PTE naming an IOVA above 2^48", packets: [][]uint32{pm4.WriteMem(gTopEnd-4, 0x5A5A5A5A), writeBack()},
			halt: faultCodes},
		{name: "DMA_DATA fill across the end of a mapping (L2)", packets: [][]uint32{pm4.DMAFill(gSysEnd-0x10000, 0xD1D1D1D1, 0x20000), writeBack()},
			halt: faultCodes, allow: [][2]uint64{{sysEnd - 0x10000, 0x10000}}},
		{name: "DMA_DATA fill across the end of a mapping (direct)", packets: [][]uint32{dmaFillDirect(gSysEnd-0x10000, 0xD2D2D2D2, 0x20000)},
			halt: faultCodes, allow: [][2]uint64{{sysEnd - 0x10000, 0x10000}}},
		{name: "DMA_DATA copy from across the end of a mapping (direct)", packets: [][]uint32{dmaDirect(fb(vScratch), gSysEnd-0x1000, 0x2000)},
			halt: faultCodes},
		{name: "DMA_DATA copy to across the end of a mapping (direct)", packets: [][]uint32{dmaDirect(gSysEnd-0x1000, fb(vScratch), 0x2000)},
			halt: faultCodes, allow: [][2]uint64{{sysEnd - 0x1000, 0x1000}}},
		{name: "DMA_DATA copy to across the end of a mapping (L2)", packets: [][]uint32{pm4.DMACopy(gSysEnd-0x1000, fb(vScratch), 0x2000), writeBack()},
			halt: faultCodes, allow: [][2]uint64{{sysEnd - 0x1000, 0x1000}}},
		{name: "DMA_DATA copy within a mapping onto its end", packets: [][]uint32{dmaDirect(gSysEnd-0x1000, gSysEnd-0x3000, 0x2000)},
			halt: faultCodes, allow: [][2]uint64{{sysEnd - 0x1000, 0x1000}}},
		{name: "DMA_DATA fill wrapping the 64-bit space", packets: [][]uint32{dmaFillDirect(^uint64(0)-7, 1, 16)}, halt: badPkt},
		{name: "DMA_DATA copy wrapping the 64-bit space", packets: [][]uint32{dmaDirect(fb(vScratch), ^uint64(0)-7, 16)}, halt: badPkt},
		{name: "DMA_DATA fill through PTEs naming IOVAs above 2^48", packets: [][]uint32{dmaFillDirect(gart(gTop), 0xE0E0E0E0, topSize)},
			halt: faultCodes},
		{name: "WRITE_DATA at the last dword of VRAM", packets: [][]uint32{bypassWrite(fbEnd-4, 3)}},
		{name: "WRITE_DATA across the end of VRAM", packets: [][]uint32{bypassWrite(fbEnd-4, 3, 4)}, halt: faultCodes},
		{name: "WRITE_DATA past the end of VRAM", packets: [][]uint32{bypassWrite(fbEnd, 3)}, halt: faultCodes},
		{name: "DMA_DATA copy from across the end of VRAM", packets: [][]uint32{dmaDirect(fb(vScratch), fbEnd-0x1000, 0x2000)}, halt: faultCodes},
		{name: "DMA_DATA copy to across the end of VRAM (L2)", packets: [][]uint32{pm4.DMACopy(fbEnd-0x1000, fb(vScratch), 0x2000), writeBack()}, halt: faultCodes},
		{name: "WRITE_DATA through a GART page at the last VRAM page", packets: [][]uint32{bypassWrite(gart(gVRAMEnd)+abi.PTE_PAGE_SIZE-4, 5)}},
		{name: "WRITE_DATA through a GART page past the end of VRAM", packets: [][]uint32{bypassWrite(gart(gPastVRAM), 5)}, halt: faultCodes},
		{name: "WRITE_DATA through an invalid PTE", packets: [][]uint32{bypassWrite(gart(gInvalid), 5)}, halt: faultCodes},
		{name: "WRITE_DATA through a read-only PTE", packets: [][]uint32{bypassWrite(gart(gReadOnly), 5)}, halt: faultCodes},
		{name: "WRITE_DATA past the end of the GART aperture", packets: [][]uint32{bypassWrite(gart(gPages), 5)}, halt: faultCodes},
		{name: "WRITE_DATA at the top of the 48-bit space", packets: [][]uint32{bypassWrite(1<<48-4, 5)}, halt: faultCodes},
		{name: "WRITE_DATA beyond the 48-bit space", packets: [][]uint32{bypassWrite(1<<48, 5)}, halt: faultCodes},
		{name: "WRITE_DATA at the top of the 64-bit space", packets: [][]uint32{bypassWrite(^uint64(0)-3, 5)}, halt: faultCodes},
		{name: "kernel fill across the end of a mapping", packets: [][]uint32{pm4.Kernel(abi.KERNEL_FILL, gSysEnd-0x1000, 0, 0xABABABAB),
			pm4.DispatchDirect(32, 1, 1), writeBack()}, halt: faultCodes, allow: [][2]uint64{{sysEnd - 0x1000, 0x1000}}},
		{name: "kernel copy from past the end of VRAM", packets: [][]uint32{pm4.Kernel(abi.KERNEL_COPY, fb(vScratch), fbEnd-0x800, 0),
			pm4.DispatchDirect(32, 1, 1)}, halt: faultCodes},
		{name: "kernel fill wrapping the 64-bit space", packets: [][]uint32{pm4.Kernel(abi.KERNEL_FILL, ^uint64(0)-255, 0, 1),
			pm4.DispatchDirect(2, 1, 1)}, halt: append(badPkt, faultCodes...)},
		{name: "COPY_DATA 64-bit straddling the end of a mapping", packets: [][]uint32{pm4.CopyData{SrcSel: abi.PM4_COPY_DATA_SEL_MEM,
			DstSel: abi.PM4_COPY_DATA_SEL_MEM, Src: gart(gSys), Dst: gSysEnd - 4, Bits64: true}.Encode()}, halt: anyHalt, allow: [][2]uint64{{sysEnd - 4, 4}}},
		{name: "WAIT_REG_MEM on memory past the end of a mapping", packets: [][]uint32{pm4.WaitMem(gSysEnd, 1)}, halt: faultCodes},
		{name: "WAIT_REG_MEM on memory past the end of VRAM", packets: [][]uint32{pm4.WaitMem(fbEnd, 1)}, halt: faultCodes},
		{name: "IB past the end of a mapping", packets: [][]uint32{pm4.IndirectBuffer{Addr: gSysEnd - 0x100, Size: 0x100}.Encode()}, halt: anyHalt},
		{name: "IB of the largest size at the end of VRAM", packets: [][]uint32{pm4.IndirectBuffer{Addr: fbEnd - 0x1000, Size: abi.PM4_IB_SIZE_MASK}.Encode()}, halt: anyHalt},
		{name: "IB through an invalid PTE", packets: [][]uint32{pm4.IndirectBuffer{Addr: gart(gInvalid), Size: 16}.Encode()}, halt: faultCodes},
		{name: "IB wrapping the 64-bit space", packets: [][]uint32{pm4.IndirectBuffer{Addr: ^uint64(0) - 15, Size: 64}.Encode()}, halt: anyHalt},
		{name: "WRITE_DATA at the last dword of a message-served mapping", packets: [][]uint32{bypassWrite(gart(gNofd)+nofdSize-4, 0x0F0F0F0F)},
			lands: []landing{{nofdIOVA + nofdSize - 4, le(0x0F0F0F0F)}}},
	}
}

// attackAddressEdges runs every access at and beyond the ends of the mappings, of VRAM, of the
// GART aperture, of the 48- and 64-bit spaces — from packets, as ring bases and report
// addresses, as GART tables, as the IH ring, and from the self-test DMA engine. In-range
// accesses must land exactly; the others must halt the queue (or fail the transfer) with a
// named error and touch nothing.
func attackAddressEdges(t *testing.T, e *env) {
	d := e.d
	for _, c := range packetEdgeCases() {
		t.Run(c.name, func(t *testing.T) {
			for _, a := range c.allow {
				e.mem.allow(a[0], a[1])
			}
			for _, l := range c.lands {
				e.mem.allow(l.iova, uint64(len(l.want)))
			}
			runEdge(t, d, c.packets, c.halt)
			if c.halt == nil {
				for _, l := range c.lands {
					if got := d.mem.at(l.iova, uint64(len(l.want))); !slices.Equal(got, l.want) {
						t.Errorf("at IOVA %#x: % x…, want % x…", l.iova, got[:min(8, len(got))], l.want[:min(8, len(l.want))])
					}
				}
			}
		})
	}
	ringEdges(t, e)
	gartEdges(t, e)
	ihEdges(t, e)
	selftestEdges(t, e)
}

// runEdge runs packets on slot 1, followed by a marker write; halt nil means everything must
// run, else the queue must halt with one of halt's errors before the marker.
func runEdge(t *testing.T, d *driver, packets [][]uint32, halt []uint32) {
	t.Helper()
	q, err := d.startQueue(1, queueOpts{})
	if err != nil {
		t.Fatal(err)
	}
	marker := uint64(vMarker + 64)
	d.setVRAM32(marker, 0)
	if err := q.submit(append(packets, bypassWrite(fb(marker), 0x600D))...); err != nil {
		t.Fatal(err)
	}
	state, code, err := q.settle(livenessTimeout)
	if err != nil {
		t.Fatal(err)
	}
	expectHalt(t, d, q.slot, state, code, halt, d.vramU32(marker) == 0x600D)
}

func expectHalt(t *testing.T, d *driver, slot int, state, code uint32, halt []uint32, completed bool) {
	t.Helper()
	info := func() string {
		lo, _ := d.reg(hqd(slot, abi.REG_HQD_ERROR_ADDR_LO))
		hi, _ := d.reg(hqd(slot, abi.REG_HQD_ERROR_ADDR_HI))
		return fmt.Sprintf("%s, ERROR_ADDR %#x", describeState(state, code), uint64(hi)<<32|uint64(lo))
	}
	switch {
	case halt == nil && (state == abi.HQD_STATE_HALTED || !completed):
		t.Errorf("want the packets to run to completion; queue %s, completed %v", info(), completed)
	case halt != nil && state != abi.HQD_STATE_HALTED:
		t.Errorf("want a halt with one of %v; queue %s, completed %v", names(halt), info(), completed)
	case halt != nil && !slices.Contains(halt, code):
		t.Errorf("want a halt with one of %v; got %s", names(halt), info())
	case halt != nil && completed:
		t.Errorf("the queue halted but ran the packet after the faulting one")
	}
}

func names(codes []uint32) []string {
	var out []string
	for _, c := range codes {
		out = append(out, errorNames[c])
	}
	return out
}

// ringEdges puts rings, rptr reports and polled write pointers at the ends.
func ringEdges(t *testing.T, e *env) {
	d := e.d
	for _, c := range []struct {
		name string
		o    queueOpts
		wptr uint64
		halt []uint32 // nil: must run (the ring holds NOPs)
	}{
		{"ring at the end of VRAM", queueOpts{log2: 6, base: fbEnd - 256}, 64, []uint32{abi.CP_ERROR_BAD_OPCODE}},
		{"ring straddling the end of VRAM", queueOpts{log2: 6, base: fbEnd - 128}, 64, anyHalt},
		{"ring past the end of VRAM", queueOpts{log2: 6, base: fbEnd}, 1, append(faultCodes, abi.CP_ERROR_RING_CONFIG)},
		{"ring in a GART page past a mapping", queueOpts{log2: 6, base: gSysEnd}, 1, append(faultCodes, abi.CP_ERROR_RING_CONFIG)},
		{"ring at the top of the 48-bit space", queueOpts{log2: 6, base: 1<<48 - 256}, 1, append(faultCodes, abi.CP_ERROR_RING_CONFIG)},
		{"ring of the largest size crossing 2^48", queueOpts{log2: 21, base: 1<<48 - 1<<20}, 1, ringCfg},
		{"ring beyond the 48-bit space", queueOpts{log2: 6, base: 1 << 48}, 1, ringCfg},
		{"ring at the top of the 64-bit space", queueOpts{log2: 6, base: ^uint64(0) &^ 255}, 1, ringCfg},
		{"rptr report past the end of a mapping", queueOpts{report: gSysEnd}, 16, faultCodes},
		{"rptr report at the top of the 64-bit space", queueOpts{report: ^uint64(0) - 3}, 16, append(faultCodes, abi.CP_ERROR_RING_CONFIG)},
		{"polled wptr past the end of VRAM", queueOpts{poll: true, pollGPU: fbEnd}, 0, append(faultCodes, abi.CP_ERROR_RING_CONFIG)},
		{"polled wptr at the top of the 64-bit space", queueOpts{poll: true, pollGPU: ^uint64(0) - 7}, 0, append(faultCodes, abi.CP_ERROR_RING_CONFIG)},
		{"wptr more than a ring ahead", queueOpts{}, 1025, ringCfg},
		{"wptr at 2^64-1", queueOpts{}, ^uint64(0), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := d.startQueue(1, c.o)
			if err != nil {
				t.Fatal(err)
			}
			if c.o.base == 0 && !c.o.poll {
				for i := uint64(0); i < min(c.wptr, q.size); i++ {
					q.emit(pm4.Nop(1))
				}
			}
			q.wptr = c.wptr
			if err := q.kick(); err != nil {
				t.Fatal(err)
			}
			if c.halt == nil {
				// A wptr "behind" rptr (2^64-1 is -1) is not work: the queue must wait, neither
				// halting nor running the ring.
				time.Sleep(20 * time.Millisecond)
				state, code, err := d.status(q.slot)
				if err != nil {
					t.Fatal(err)
				}
				rptr, _ := d.reg(hqd(q.slot, abi.REG_HQD_PQ_RPTR))
				if state == abi.HQD_STATE_HALTED || rptr != 0 {
					t.Errorf("queue %s with rptr %d, want it to wait for a valid wptr", describeState(state, code), rptr)
				}
				return
			}
			state, code, err := q.settle(livenessTimeout)
			if err != nil {
				t.Fatal(err)
			}
			expectHalt(t, d, q.slot, state, code, c.halt, false)
		})
	}
	if err := d.dequeue(1, abi.HQD_DEQUEUE_RESET); err != nil {
		t.Error(err)
	}
}

// gartEdges programs GART tables at the ends of VRAM and of a mapping, and apertures of
// absurd sizes.
func gartEdges(t *testing.T, e *env) {
	d := e.d
	defer func() {
		if err := d.setupGART(); err != nil {
			t.Error(err)
		}
	}()
	// A table in the last page of sys: its 512 entries map sys page 3; entry 512 is past the
	// mapping.
	tableIOVA := uint64(sysEnd - abi.PTE_PAGE_SIZE)
	ptes := make([]byte, abi.PTE_PAGE_SIZE)
	for i := 0; i < 512; i++ {
		binary.LittleEndian.PutUint64(ptes[8*i:], (sysIOVA+3*abi.PTE_PAGE_SIZE)|abi.PTE_VALID_MASK|abi.PTE_SYSTEM_MASK|abi.PTE_READABLE_MASK|abi.PTE_WRITEABLE_MASK)
	}
	e.mem.set(tableIOVA, ptes)
	e.mem.allow(sysIOVA+3*abi.PTE_PAGE_SIZE, abi.PTE_PAGE_SIZE)
	for _, c := range []struct {
		name       string
		table      uint64 // GMC_GART_TABLE (PDE)
		start, end uint64
		access     uint64 // GPU address written
		halt       []uint32
		lands      *landing
	}{
		{name: "table straddling the end of VRAM", table: (vramSize - abi.PTE_PAGE_SIZE) | abi.PDE_VALID_MASK, access: gart(600), halt: faultCodes},
		{name: "table past the end of VRAM", table: vramSize | abi.PDE_VALID_MASK, access: gart(0), halt: faultCodes},
		{name: "table at the end of a mapping, last entry", table: tableIOVA | abi.PDE_VALID_MASK | abi.PDE_SYSTEM_MASK,
			access: gart(511) + 8, lands: &landing{sysIOVA + 3*abi.PTE_PAGE_SIZE + 8, le(0x7AB1E)}},
		{name: "table at the end of a mapping, entry past it", table: tableIOVA | abi.PDE_VALID_MASK | abi.PDE_SYSTEM_MASK,
			access: gart(512), halt: faultCodes},
		{name: "table at an unmapped IOVA", table: 0x3000_0000 | abi.PDE_VALID_MASK | abi.PDE_SYSTEM_MASK, access: gart(0), halt: faultCodes},
		{name: "table without VALID", table: vGART, access: gart(0), halt: faultCodes},
		{name: "aperture to the top of the 48-bit space", table: vGART | abi.PDE_VALID_MASK, start: gartBase, end: 1<<48 - 1,
			access: 1<<48 - 8, halt: faultCodes},
		{name: "aperture over the whole space", table: vGART | abi.PDE_VALID_MASK, start: 0, end: ^uint64(0),
			access: gart(1 << 20), halt: faultCodes},
		{name: "aperture ending before it starts", table: vGART | abi.PDE_VALID_MASK, start: gartBase, end: gartBase - 1,
			access: gart(0), halt: faultCodes},
	} {
		t.Run(c.name, func(t *testing.T) {
			start, end := c.start, c.end
			if start == 0 && end == 0 {
				start, end = gartBase, gart(gPages)-1
			}
			regs := set64(abi.REG_GMC_GART_START_LO, start)
			regs = append(regs, set64(abi.REG_GMC_GART_END_LO, end)...)
			regs = append(regs, set64(abi.REG_GMC_GART_TABLE_LO, c.table)...)
			regs = append(regs, [2]uint32{abi.REG_GMC_VM_INVALIDATE, 1}, [2]uint32{abi.REG_GMC_VM_FAULT_CNTL, 1})
			if err := d.setRegs(regs...); err != nil {
				t.Fatal(err)
			}
			runEdge(t, d, [][]uint32{bypassWrite(c.access, 0x7AB1E)}, c.halt)
			if c.lands != nil {
				if got := e.mem.at(c.lands.iova, 4); !slices.Equal(got, c.lands.want) {
					t.Errorf("at IOVA %#x: % x, want % x", c.lands.iova, got, c.lands.want)
				}
			}
			if c.halt != nil {
				if st, _ := d.reg(abi.REG_GMC_VM_FAULT_STATUS); st&abi.REG_GMC_VM_FAULT_STATUS__VALID_MASK == 0 {
					t.Errorf("queue halted but GMC_VM_FAULT_STATUS %#x has no fault latched", st)
				}
			}
		})
	}
}

// ihEdges puts the IH ring and its wptr write-back at the ends, then makes IVs.
func ihEdges(t *testing.T, e *env) {
	d := e.d
	defer func() {
		if err := d.setupIH(14, 0); err != nil {
			t.Error(err)
		}
	}()
	ctl := uint32(14<<abi.REG_IH_RB_CNTL__RB_SIZE__SHIFT | abi.REG_IH_RB_CNTL__RB_ENABLE_MASK | abi.REG_IH_RB_CNTL__ENABLE_INTR_MASK |
		abi.REG_IH_RB_CNTL__WPTR_WRITEBACK_ENABLE_MASK)
	for _, c := range []struct {
		name       string
		base, wptr uint64
	}{
		{"IH ring straddling the end of VRAM", fbEnd - 1024, fb(vIHWptr)},
		{"IH ring past the end of VRAM", fbEnd, fb(vIHWptr)},
		{"IH ring past the end of a mapping", gSysEnd, fb(vIHWptr)},
		{"IH ring at the top of the 64-bit space", ^uint64(0) &^ 255, fb(vIHWptr)},
		{"IH wptr write-back past the end of a mapping", fb(vIH), gSysEnd},
		{"IH wptr write-back at the top of the 64-bit space", fb(vIH), ^uint64(0) - 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			regs := [][2]uint32{{abi.REG_IH_RB_CNTL, 0}}
			regs = append(regs, set64(abi.REG_IH_RB_BASE_LO, c.base)...)
			regs = append(regs, set64(abi.REG_IH_RB_WPTR_ADDR_LO, c.wptr)...)
			regs = append(regs, [2]uint32{abi.REG_IH_RB_CNTL, ctl})
			if err := d.setRegs(regs...); err != nil {
				t.Fatal(err)
			}
			before, _ := d.reg(abi.REG_IH_ENTRIES)
			var fences [][]uint32
			for i := 0; i < 64; i++ {
				fences = append(fences, pm4.ReleaseMem{DataSel: pm4.DataNone, IntSel: pm4.IntSend, CtxID: uint32(i)}.Encode())
			}
			runEdge(t, d, fences, nil)
			after, _ := d.reg(abi.REG_IH_ENTRIES)
			dropped, _ := d.reg(abi.REG_IH_DROPPED)
			t.Logf("IH entries %d → %d, dropped %d", before, after, dropped)
		})
	}
}

// selftestEdges aims the self-test DMA engine at the ends of mappings and of the 64-bit space.
func selftestEdges(t *testing.T, e *env) {
	d := e.d
	for _, c := range []struct {
		name      string
		addr      uint64
		n         uint32
		want      []uint32 // acceptable final statuses
		landAt    uint64   // when DONE: the first dword written (PATTERN+0)
		mayChange [2]uint64
	}{
		{"last dword of a mapping", sysEnd - 4, 4, []uint32{abi.SELFTEST_DMA_STATUS_DONE}, sysEnd - 4, [2]uint64{sysEnd - 4, 4}},
		{"straddling the end of a mapping", sysEnd - 4, 8, []uint32{abi.SELFTEST_DMA_STATUS_ERR_FAULT}, 0, [2]uint64{sysEnd - 4, 4}},
		{"straddling the start of a mapping", smallIOVA - 4, 8, []uint32{abi.SELFTEST_DMA_STATUS_ERR_FAULT}, 0, [2]uint64{smallIOVA, 4}},
		{"a megabyte ending 4 bytes past a mapping", sysEnd - 1<<20 + 4, 1 << 20, []uint32{abi.SELFTEST_DMA_STATUS_ERR_FAULT}, 0, [2]uint64{sysEnd - 1<<20 + 4, 1<<20 - 4}},
		{"last dword of the 64-bit space", topLast, 4, []uint32{abi.SELFTEST_DMA_STATUS_DONE}, topLast, [2]uint64{topLast, 4}},
		{"wrapping the 64-bit space", topLast, 8, []uint32{abi.SELFTEST_DMA_STATUS_ERR_FAULT, abi.SELFTEST_DMA_STATUS_ERR_LENGTH}, 0, [2]uint64{topLast, 4}},
		{"straddling the end of a message-served mapping", nofdIOVA + nofdSize - 4, 8, []uint32{abi.SELFTEST_DMA_STATUS_ERR_FAULT}, 0, [2]uint64{nofdIOVA + nofdSize - 4, 4}},
		{"one dword more than the maximum", sysIOVA, abi.SELFTEST_DMA_MAX_LEN + 4, []uint32{abi.SELFTEST_DMA_STATUS_ERR_LENGTH}, 0, [2]uint64{}},
		{"zero length", sysIOVA, 0, []uint32{abi.SELFTEST_DMA_STATUS_ERR_LENGTH}, 0, [2]uint64{}},
		{"length not a multiple of 4", sysIOVA, 6, []uint32{abi.SELFTEST_DMA_STATUS_ERR_LENGTH}, 0, [2]uint64{}},
		{"an unmapped IOVA", 0, 4, []uint32{abi.SELFTEST_DMA_STATUS_ERR_FAULT}, 0, [2]uint64{}},
	} {
		t.Run("self-test DMA "+c.name, func(t *testing.T) {
			e.mem.allow(c.mayChange[0], c.mayChange[1])
			const pattern = 0x51E57000
			regs := set64(abi.REG_SELFTEST_DMA_ADDR_LO, c.addr)
			regs = append(regs, [2]uint32{abi.REG_SELFTEST_DMA_LEN, c.n}, [2]uint32{abi.REG_SELFTEST_DMA_PATTERN, pattern},
				[2]uint32{abi.REG_SELFTEST_DMA_CTRL, abi.REG_SELFTEST_DMA_CTRL__GO_MASK})
			if err := d.setRegs(regs...); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(livenessTimeout)
			var st uint32
			for {
				var err error
				if st, err = d.reg(abi.REG_SELFTEST_DMA_STATUS); err != nil {
					t.Fatal(err)
				}
				if st != abi.SELFTEST_DMA_STATUS_BUSY || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Microsecond)
			}
			if !slices.Contains(c.want, st) {
				t.Fatalf("SELFTEST_DMA_STATUS %d, want one of %v", st, c.want)
			}
			if st == abi.SELFTEST_DMA_STATUS_DONE {
				if got := le32(e.mem.at(c.landAt, 4)); got != pattern {
					t.Errorf("at IOVA %#x: %#x, want %#x", c.landAt, got, pattern)
				}
			}
		})
	}
}
