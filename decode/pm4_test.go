package decode_test

import (
	"errors"
	"strings"
	"testing"

	"vgpu/abi"
	"vgpu/cp/cptest"
	"vgpu/decode"
	"vgpu/pm4"
)

// TestPM4Packets decodes packets built by the encoders drivers use (package pm4) and checks
// each field's text, so a field decoded from the wrong bits fails.
func TestPM4Packets(t *testing.T) {
	cases := []struct {
		name string
		pkt  []uint32
		want string // the packet's String(), exactly
	}{
		{"nop1", pm4.Nop(1), "NOP count=16383"},
		{"nop3", pm4.Nop(3), "NOP count=1 payload_dwords=2"},
		{"type2", pm4.Type2(), "TYPE2"},
		{"write-mem", pm4.WriteMem(0x8000001234, 7, 8),
			"WRITE_DATA count=4 dst_sel=MEM(5) wr_one_addr=0 wr_confirm=1 cache_policy=LRU(0) engine_sel=ME(0) addr=0x8000001234 data=[0x7 0x8]"},
		{"write-reg", pm4.WriteReg(abi.REG_SCRATCH_0/4, 1),
			"WRITE_DATA count=3 dst_sel=REG(0) wr_one_addr=0 wr_confirm=0 cache_policy=LRU(0) engine_sel=ME(0) reg=0xc040(REG_SCRATCH_0) data=[0x1]"},
		{"write-one-addr", pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_TC_L2, Addr: 0x100, OneAddr: true, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, Data: []uint32{1}}.Encode(),
			"WRITE_DATA count=3 dst_sel=TC_L2(2) wr_one_addr=1 wr_confirm=0 cache_policy=BYPASS(3) engine_sel=ME(0) addr=0x100 data=[0x1]"},
		{"fence", pm4.Fence(0x1000, 5, 9, true),
			"RELEASE_MEM count=6 event_type=CACHE_FLUSH_AND_INV_TS_EVENT(20) event_index=5 gcr=GLM_WB|GLM_INV|GL2_WB|SEQ cache_policy=BYPASS(3) execute=0 dst_sel=MEM(0) int_sel=IRQ_CONFIRM(2) data_sel=32(1) addr=0x1000 data=0x5 int_ctxid=0x9"},
		{"release64", pm4.ReleaseMem{DstSel: pm4.DstL2, IntSel: pm4.IntSend, DataSel: pm4.Data64, Addr: 0x2000, Data: 0x1122334455667788}.Encode(),
			"RELEASE_MEM count=6 event_type=CACHE_FLUSH_AND_INV_TS_EVENT(20) event_index=5 gcr=0 cache_policy=LRU(0) execute=0 dst_sel=TC_L2(1) int_sel=IRQ(1) data_sel=64(2) addr=0x2000 data=0x1122334455667788 int_ctxid=0x0"},
		{"wait-mem", pm4.WaitMem(0x3000, 4),
			"WAIT_REG_MEM count=5 function=EQ(3) mem_space=MEM(1) operation=WAIT(0) engine=ME(0) cache_policy=BYPASS(3) addr=0x3000 reference=0x4 mask=0xffffffff poll_interval=4"},
		{"wait-reg", pm4.WaitRegMem{Function: pm4.FuncGE, Space: pm4.SpaceReg, Operation: pm4.OpWriteWait, Reg1: abi.REG_SCRATCH_0 / 4, Reg2: abi.REG_SCRATCH_1 / 4, Ref: 1, Mask: 0xF}.Encode(),
			"WAIT_REG_MEM count=5 function=GE(5) mem_space=REG(0) operation=WRITE_WAIT(1) engine=ME(0) cache_policy=LRU(0) reg_addr1=0xc040(REG_SCRATCH_0) reg_addr2=0xc041(REG_SCRATCH_1) reference=0x1 mask=0xf poll_interval=0"},
		{"ib", pm4.IndirectBuffer{Addr: 0x12345678900, Size: 64, VMID: 3}.Encode(),
			"INDIRECT_BUFFER count=2 addr=0x12345678900 size=64 chain=0 valid=1 vmid=3"},
		{"ib-chain", pm4.IndirectBuffer{Addr: 0x100, Size: 0xFFFFF, Chain: true}.Encode(),
			"INDIRECT_BUFFER count=2 addr=0x100 size=1048575 chain=1 valid=1 vmid=0"},
		{"copy-reg-mem", pm4.CopyData{SrcSel: abi.PM4_COPY_DATA_SEL_REG, DstSel: abi.PM4_COPY_DATA_SEL_MEM, Src: abi.REG_SCRATCH_2 / 4, Dst: 0x4000, Bits64: true, DstPolicy: abi.PM4_CACHE_POLICY_BYPASS}.Encode(),
			"COPY_DATA count=4 src_sel=REG(0) dst_sel=MEM(5) src_cache_policy=LRU(0) count_sel=64(1) wr_confirm=0 dst_cache_policy=BYPASS(3) src_reg=0xc042(REG_SCRATCH_2) dst_addr=0x4000"},
		{"copy-imm-reg", pm4.CopyData{SrcSel: abi.PM4_COPY_DATA_SEL_MEM, DstSel: abi.PM4_COPY_DATA_SEL_REG, Src: 0xABCDEF, Dst: abi.REG_CONFIG_SCRATCH_0 / 4}.Encode(),
			"COPY_DATA count=4 src_sel=IMM(5) dst_sel=REG(0) src_cache_policy=LRU(0) count_sel=32(0) wr_confirm=0 dst_cache_policy=LRU(0) imm=0xabcdef dst_reg=0x2000(REG_CONFIG_SCRATCH_0)"},
		{"copy-clock", pm4.CopyData{SrcSel: abi.PM4_COPY_DATA_SEL_GPU_CLOCK, DstSel: abi.PM4_COPY_DATA_SEL_TC_L2, Dst: 0x5000, Bits64: true}.Encode(),
			"COPY_DATA count=4 src_sel=GPU_CLOCK(9) dst_sel=TC_L2(2) src_cache_policy=LRU(0) count_sel=64(1) wr_confirm=0 dst_cache_policy=LRU(0) dst_addr=0x5000"},
		{"acquire-all", pm4.AcquireMem{GCR: abi.PM4_ACQUIRE_MEM_GCR_GL2_INV_MASK | abi.PM4_ACQUIRE_MEM_GCR_GLV_INV_MASK, Size: pm4.SizeAll}.Encode(),
			"ACQUIRE_MEM count=6 coher_cntl=0x0 coher_size=ALL coher_base=0x0 poll_interval=10 gcr=GLV_INV|GL2_INV gl2_range=ALL(0) seq=0"},
		{"acquire-range", pm4.AcquireMem{GCR: abi.PM4_ACQUIRE_MEM_GCR_GL2_WB_MASK | abi.PM4_ACQUIRE_MEM_GCR_GL2_RANGE_RANGE<<abi.PM4_ACQUIRE_MEM_GCR_GL2_RANGE__SHIFT, Base: 0x10, Size: 2}.Encode(),
			"ACQUIRE_MEM count=6 coher_cntl=0x0 coher_size=0x200 coher_base=0x1000 poll_interval=10 gcr=GL2_WB gl2_range=RANGE(2) seq=0"},
		{"dma-copy", pm4.DMACopy(0x9000, 0x8000, 4096),
			"DMA_DATA count=5 engine=0 src_sel=ADDR_L2(3) dst_sel=ADDR_L2(3) src_cache_policy=LRU(0) dst_cache_policy=LRU(0) cp_sync=1 src_addr=0x8000 dst_addr=0x9000 byte_count=4096 sas=0 das=0 saic=0 daic=0 raw_wait=0"},
		{"dma-fill", pm4.DMAData{SrcSel: abi.PM4_DMA_DATA_SEL_DATA, DstSel: abi.PM4_DMA_DATA_SEL_ADDR, Src: 0xDEAD, Dst: 0x100000000, Count: 8, DAIC: true}.Encode(),
			"DMA_DATA count=5 engine=0 src_sel=DATA(2) dst_sel=ADDR(0) src_cache_policy=LRU(0) dst_cache_policy=LRU(0) cp_sync=0 data=0xdead dst_addr=0x100000000 byte_count=8 sas=0 das=0 saic=0 daic=1 raw_wait=0"},
		{"cs-partial-flush", pm4.CSPartialFlush(), "EVENT_WRITE count=0 event_type=CS_PARTIAL_FLUSH(7) event_index=4"},
		{"pfp-sync-me", pm4.PfpSyncMe(), "PFP_SYNC_ME count=0 dummy=0x0"},
		{"dispatch", pm4.DispatchDirect(4, 2, 1), "DISPATCH_DIRECT count=3 dim_x=4 dim_y=2 dim_z=1 dispatch_initiator=0x1"},
		{"dispatch-indirect", pm4.DispatchIndirect(0x20), "DISPATCH_INDIRECT count=1 data_offset=0x20 dispatch_initiator=0x1"},
		{"set-base", pm4.SetBase(0xAB00), "SET_BASE count=2 base_index=DISPATCH_INDIRECT(1) address=0xab00"},
		{"kernel", pm4.Kernel(abi.KERNEL_FILL, 0x1000, 0, 0x55),
			"SET_SH_REG count=6 reg_offset=0x240 COMPUTE_USER_DATA_0=0x1 COMPUTE_USER_DATA_1=0x1000 COMPUTE_USER_DATA_2=0x0 COMPUTE_USER_DATA_3=0x0 COMPUTE_USER_DATA_4=0x0 COMPUTE_USER_DATA_5=0x55"},
		{"sh-pgm", pm4.SetShReg(abi.SH_COMPUTE_PGM_LO, 0x12, 0x34),
			"SET_SH_REG count=2 reg_offset=0x20c COMPUTE_PGM_LO=0x12 COMPUTE_PGM_HI=0x34"},
		{"uconfig", pm4.SetUConfigReg(0x40, 1, 2), "SET_UCONFIG_REG count=2 reg_offset=0x40 REG_SCRATCH_0=0x1 REG_SCRATCH_1=0x2"},
		{"config", pm4.SetConfigReg(7, 9), "SET_CONFIG_REG count=1 reg_offset=0x7 REG_CONFIG_SCRATCH_7=0x9"},
		{"uconfig-unnamed", pm4.SetUConfigReg(0x300, 1), "SET_UCONFIG_REG count=1 reg_offset=0x300 reg_0x300=0x1"},
		{"invalidate-tlbs", pm4.Packet(abi.PM4_IT_INVALIDATE_TLBS, 1|1<<abi.PM4_INVALIDATE_TLBS_ALL_HUB__SHIFT|0x8001<<abi.PM4_INVALIDATE_TLBS_PASID__SHIFT|2<<abi.PM4_INVALIDATE_TLBS_FLUSH_TYPE__SHIFT),
			"INVALIDATE_TLBS count=0 dst_sel=1 all_hub=1 pasid=32769 flush_type=2"},
		{"protected-fence", pm4.ProtectedFenceSignal(), "PROTECTED_FENCE_SIGNAL count=0 dummy=0x0"},
		{"wait64", pm4.WaitFence64(0x7000, 0x100000001),
			"WAIT_REG_MEM64 count=7 function=GE(5) mem_space=MEM(1) operation=WAIT(0) engine=ME(0) cache_policy=BYPASS(3) addr=0x7000 reference=0x100000001 mask=0xffffffffffffffff poll_interval=4 note=not-executed-by-vgpu"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, n := decode.PM4Packet(c.pkt)
			if n != len(c.pkt) || p.Len() != n {
				t.Errorf("length %d (Len %d), want %d", n, p.Len(), len(c.pkt))
			}
			if p.Err != nil {
				t.Errorf("error %v", p.Err)
			}
			if got := p.String(); got != c.want {
				t.Errorf("\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestPM4HeaderFlags(t *testing.T) {
	pkt := pm4.DispatchDirect(1, 1, 1)
	pkt[0] |= abi.PM4_HEADER_SHADER_TYPE_MASK | abi.PM4_HEADER_PREDICATE_MASK
	p, _ := decode.PM4Packet(pkt)
	if !p.Compute || !p.Predicate || p.Opcode != abi.PM4_IT_DISPATCH_DIRECT || p.Count != 3 {
		t.Fatalf("header decoded as %+v", p)
	}
	if got := p.String(); !strings.HasPrefix(got, "DISPATCH_DIRECT count=3 pred=1 compute=1 dim_x=1") {
		t.Errorf("got %s", got)
	}
	if f, ok := p.Field("dim_y"); !ok || f.Value != 1 {
		t.Errorf("Field(dim_y) = %v, %v", f, ok)
	}
}

// TestPM4Errors: every malformed input decodes to a named error and shows its raw dwords.
func TestPM4Errors(t *testing.T) {
	cases := []struct {
		name string
		dws  []uint32
		n    int
		err  error
		text string // a part of String()
	}{
		{"empty", nil, 0, decode.ErrTruncated, "EMPTY"},
		{"unknown", pm4.Packet(0x55, 1, 2), 3, decode.ErrUnknownOpcode, "UNKNOWN_0x55 count=1 error=\"unknown opcode 0x55\" raw=[0xc0015500 0x1 0x2]"},
		{"truncated", pm4.WriteMem(0x100, 1, 2, 3)[:4], 4, decode.ErrTruncated, "raw=[0xc0053700 0x100500 0x100 0x0]"},
		{"type0", []uint32{0x00010000, 5}, 1, decode.ErrBadType, "TYPE0 error="},
		{"type1", []uint32{0x40000000}, 1, decode.ErrBadType, "TYPE1"},
		{"bad-count", pm4.Packet(abi.PM4_IT_RELEASE_MEM, 1, 2), 3, decode.ErrBadCount, "RELEASE_MEM count=1 error="},
		{"write-data-short", pm4.Packet(abi.PM4_IT_WRITE_DATA, 0x500, 0x100), 3, decode.ErrBadCount, "takes COUNT 3 or more"},
		{"reserved", append([]uint32{pm4.Header(abi.PM4_IT_DISPATCH_DIRECT, 4) | 0x4}, 1, 1, 1, 1), 5, decode.ErrReservedBits, "dim_x=1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, n := decode.PM4Packet(c.dws)
			if n != c.n {
				t.Errorf("length %d, want %d", n, c.n)
			}
			if !errors.Is(p.Err, c.err) {
				t.Errorf("error %v, want %v", p.Err, c.err)
			}
			if s := p.String(); !strings.Contains(s, c.text) {
				t.Errorf("%q does not contain %q", s, c.text)
			}
		})
	}
}

// TestPM4LongListBounded: a SET_UCONFIG_REG of 1000 values prints a bounded line.
func TestPM4LongListBounded(t *testing.T) {
	p, n := decode.PM4Packet(pm4.SetUConfigReg(0, make([]uint32, 1000)...))
	if n != 1002 || p.Err != nil {
		t.Fatalf("n %d err %v", n, p.Err)
	}
	s := p.String()
	if len(s) > 2000 || !strings.Contains(s, "more=968-values") {
		t.Errorf("%d bytes: %s", len(s), s)
	}
	w, _ := decode.PM4Packet(pm4.WriteMem(0, make([]uint32, 1000)...))
	if s := w.String(); len(s) > 1000 || !strings.Contains(s, "...968 more]") {
		t.Errorf("%d bytes: %s", len(s), s)
	}
}

// TestPM4Stream decodes an IB built with cptest's writer.
func TestPM4Stream(t *testing.T) {
	ib := append(append(append(pm4.WriteMem(0x100, 1), pm4.Nop(1)...), pm4.Type2()...), pm4.Fence(0x200, 1, 0, false)...)
	ps := decode.PM4Stream(ib)
	wantNames := []string{"WRITE_DATA", "NOP", "TYPE2", "RELEASE_MEM"}
	wantOff := []int{0, 5, 6, 7}
	if len(ps) != len(wantNames) {
		t.Fatalf("%d packets: %s", len(ps), ps)
	}
	for i, p := range ps {
		if p.Name != wantNames[i] || p.Offset != wantOff[i] || p.Err != nil {
			t.Errorf("packet %d: %s at %d (%v), want %s at %d", i, p.Name, p.Offset, p.Err, wantNames[i], wantOff[i])
		}
	}
	if s := ps.String(); !strings.HasPrefix(s, "0x0000: WRITE_DATA") || !strings.Contains(s, "\n0x0007: RELEASE_MEM") {
		t.Errorf("text:\n%s", s)
	}
}

// TestPM4Ring writes a ring through cptest's ring writer so that packets wrap past its end,
// reads it back from memory and decodes from rptr to wptr.
func TestPM4Ring(t *testing.T) {
	r := cptest.NewRig(t, 1<<16)
	const base = 0x1000
	ring := r.NewRing(1, cptest.QueueConfig{Base: base, QueueSize: abi.CP_QUEUE_SIZE_MIN}) // 64 dwords
	ring.SetWptr(60)
	ring.Emit(pm4.WriteMem(0x8000, 1, 2, 3)) // 60..66: wraps at 64
	ring.Emit(pm4.Fence(0x9000, 7, 0, true))
	w := ring.Wptr()
	dws := make([]uint32, ring.Size)
	for i := range dws {
		dws[i] = r.Mem.Load32(base + uint64(i)*4)
	}
	ps := decode.PM4Ring(dws, 60, w)
	if len(ps) != 2 || ps[0].Offset != 60 || ps[1].Offset != 3 {
		t.Fatalf("packets:\n%s", ps)
	}
	if f, _ := ps[0].Field("data"); f.Text != "[0x1 0x2 0x3]" || ps[0].Err != nil {
		t.Errorf("wrapped WRITE_DATA: %s", ps[0])
	}
	if f, _ := ps[1].Field("addr"); f.Value != 0x9000 {
		t.Errorf("fence: %s", ps[1])
	}
	if got := decode.PM4Ring(dws, 5, 5+64); len(got) != 0 {
		t.Errorf("equal offsets (mod size) are an empty ring, got %d packets", len(got))
	}
	if got := decode.PM4Ring(nil, 0, 4); got != nil {
		t.Errorf("empty ring: %v", got)
	}
}

func TestOpcodeName(t *testing.T) {
	if decode.OpcodeName(abi.PM4_IT_RELEASE_MEM) != "RELEASE_MEM" || decode.OpcodeName(0xEE) != "UNKNOWN_0xee" {
		t.Error(decode.OpcodeName(abi.PM4_IT_RELEASE_MEM), decode.OpcodeName(0xEE))
	}
}
