package cp_test

import (
	"bytes"
	"slices"
	"testing"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
)

// pktCase is one packet behaviour: packets run on a fresh queue; either the queue drains
// and check holds, or the last packet halts it with wantErr.
type pktCase struct {
	name    string
	gfx     bool // run on slot 0 (graphics) instead of slot 1
	setup   func(r *cptest.Rig)
	pkts    [][]uint32
	wantErr uint32
	errAddr uint64 // expected ERROR_ADDR when not the culprit packet's address (memory errors)
	check   func(t *testing.T, r *cptest.Rig)
}

// with returns a copy of p with dword i replaced by v.
func with(p []uint32, i int, v uint32) []uint32 {
	p = slices.Clone(p)
	p[i] = v
	return p
}

// or returns a copy of p with bits set in dword i.
func or(p []uint32, i int, bits uint32) []uint32 { return with(p, i, p[i]|bits) }

func wantMem32(t *testing.T, r *cptest.Rig, va uint64, want ...uint32) {
	t.Helper()
	for i, w := range want {
		if got := r.Mem.Load32(va + uint64(i)*4); got != w {
			t.Errorf("dword at %#x = %#x, want %#x", va+uint64(i)*4, got, w)
		}
	}
}

func wantReg(t *testing.T, r *cptest.Rig, reg uint32, want uint32) {
	t.Helper()
	if got := r.Regs.Get(reg); got != want {
		t.Errorf("register %#x = %#x, want %#x", reg, got, want)
	}
}

func runPktCases(t *testing.T, cases []pktCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			slot := 1
			if tc.gfx {
				slot = 0
			}
			r, ring := start(t, slot)
			if tc.setup != nil {
				tc.setup(r)
			}
			var culprit uint64
			for _, p := range tc.pkts {
				culprit = ring.Wptr()
				ring.Emit(p)
			}
			ring.Kick()
			if tc.wantErr == 0 {
				ring.WaitIdle(t)
				if n := r.IVs.Len(); n != 0 && tc.check == nil {
					t.Errorf("unexpected IVs: %+v", r.IVs.All())
				}
			} else {
				if got := ring.WaitHalt(t); got != tc.wantErr {
					t.Fatalf("error = %d, want %d", got, tc.wantErr)
				}
				addr := ring.Base + culprit%ring.Size*4
				if tc.errAddr != 0 {
					addr = tc.errAddr
				}
				hdr := tc.pkts[len(tc.pkts)-1][0]
				gotAddr, gotInfo := errorRegs(r, slot)
				if gotAddr != addr || gotInfo != hdr {
					t.Errorf("ERROR_ADDR, ERROR_INFO = %#x, %#x; want %#x, %#x", gotAddr, gotInfo, addr, hdr)
				}
				if !r.IVs.Wait(1, cptest.Timeout) {
					t.Fatal("no IV for the halt")
				}
				wantIV(t, r.IVs.All()[0], haltIV(slot, tc.wantErr, addr, hdr))
				if got := r.ReadHQD(slot, abi.REG_HQD_ACTIVE); got != 1 {
					t.Errorf("halted queue ACTIVE = %d, want 1", got)
				}
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func TestNopAndFillers(t *testing.T) {
	runPktCases(t, []pktCase{
		{name: "nop-one-dword", pkts: [][]uint32{pm4.Nop(1), pm4.Nop(1), pm4.WriteMem(dataBase, 1)},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dataBase, 1) }},
		{name: "nop-skips-payload", pkts: [][]uint32{
			// The payload of a big NOP looks like garbage packets: it must not be decoded.
			append(pm4.Nop(1)[:0:0], append([]uint32{pm4.Header(abi.PM4_IT_NOP, 3)}, 0xFFFFFFFF, 0, 0x12345678)...),
			pm4.WriteMem(dataBase, 2)},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dataBase, 2) }},
		{name: "nop-large", pkts: [][]uint32{pm4.Nop(1500), pm4.WriteMem(dataBase, 3)},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dataBase, 3) }},
		{name: "type2", pkts: [][]uint32{pm4.Type2(), pm4.Type2(), pm4.WriteMem(dataBase, 4)},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dataBase, 4) }},
		{name: "type0", pkts: [][]uint32{pm4.Nop(1), {0x00010000, 1, 2}}, wantErr: abi.CP_ERROR_BAD_OPCODE},
		{name: "type1", pkts: [][]uint32{{0x40000000}}, wantErr: abi.CP_ERROR_BAD_OPCODE},
		{name: "unknown-opcode", pkts: [][]uint32{pm4.WriteMem(dataBase, 5), pm4.Packet(0xEE, 0)},
			wantErr: abi.CP_ERROR_BAD_OPCODE},
		{name: "header-reserved", pkts: [][]uint32{or(pm4.WriteMem(dataBase, 5), 0, 0x4)},
			wantErr: abi.CP_ERROR_RESERVED_BITS},
		{name: "shader-type-and-predicate-accepted", pkts: [][]uint32{or(pm4.WriteMem(dataBase, 6), 0, 3)},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dataBase, 6) }},
	})
}

func TestSetReg(t *testing.T) {
	runPktCases(t, []pktCase{
		{name: "uconfig-scratch", pkts: [][]uint32{pm4.SetUConfigReg(scratchOff, 0xDEADBEEF, 7, 8)},
			check: func(t *testing.T, r *cptest.Rig) {
				wantReg(t, r, scratch(0), 0xDEADBEEF)
				wantReg(t, r, scratch(1), 7)
				wantReg(t, r, scratch(2), 8)
			}},
		{name: "config-scratch", pkts: [][]uint32{pm4.SetConfigReg(0, 1, 2, 3, 4, 5, 6, 7, 8)},
			check: func(t *testing.T, r *cptest.Rig) {
				for i := uint32(0); i < 8; i++ {
					wantReg(t, r, abi.REG_CONFIG_SCRATCH_0/4+i, i+1)
				}
			}},
		{name: "uconfig-index-bits-accepted", pkts: [][]uint32{or(pm4.SetUConfigReg(scratchOff, 9), 1, 0xF0000000)},
			check: func(t *testing.T, r *cptest.Rig) { wantReg(t, r, scratch(0), 9) }},
		{name: "uconfig-last-register", pkts: [][]uint32{pm4.SetUConfigReg(abi.PM4_SPACE_UCONFIG_END-abi.PM4_SPACE_UCONFIG_BASE-1, 5)},
			check: func(t *testing.T, r *cptest.Rig) { wantReg(t, r, abi.PM4_SPACE_UCONFIG_END-1, 5) }},
		{name: "uconfig-beyond-space", pkts: [][]uint32{pm4.SetUConfigReg(abi.PM4_SPACE_UCONFIG_END-abi.PM4_SPACE_UCONFIG_BASE-1, 5, 6)},
			wantErr: abi.CP_ERROR_BAD_REGISTER},
		{name: "config-beyond-space", pkts: [][]uint32{pm4.SetConfigReg(0xFFFF, 5)}, wantErr: abi.CP_ERROR_BAD_REGISTER},
		{name: "uconfig-reserved", pkts: [][]uint32{or(pm4.SetUConfigReg(scratchOff, 5), 1, 1<<16)},
			wantErr: abi.CP_ERROR_RESERVED_BITS},
		{name: "uconfig-no-values", pkts: [][]uint32{pm4.Packet(abi.PM4_IT_SET_UCONFIG_REG, scratchOff)},
			wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "refused-register",
			setup: func(r *cptest.Rig) { r.Regs.Deny = func(reg uint32) bool { return reg == scratch(1) } },
			pkts:  [][]uint32{pm4.SetUConfigReg(scratchOff+1, 5)}, wantErr: abi.CP_ERROR_BAD_REGISTER},
		{name: "sh-user-data-then-fill", pkts: [][]uint32{
			pm4.SetShReg(0x10, 1, 2, 3), // not user data: accepted, ignored
			pm4.Kernel(abi.KERNEL_FILL, dataBase, 0, 0xAB),
			pm4.DispatchDirect(1, 1, 1)},
			check: func(t *testing.T, r *cptest.Rig) {
				wantMem32(t, r, dataBase, 0xAB)
				wantMem32(t, r, dataBase+abi.KERNEL_GROUP_DWORDS*4-4, 0xAB)
				wantMem32(t, r, dataBase+abi.KERNEL_GROUP_DWORDS*4, 0)
				if n := len(r.Regs.Writes()); n != 0 {
					t.Errorf("SET_SH_REG reached %d MMIO registers", n)
				}
			}},
		{name: "sh-beyond-space", pkts: [][]uint32{pm4.SetShReg(abi.PM4_SPACE_SH_END-abi.PM4_SPACE_SH_BASE-1, 1, 2)},
			wantErr: abi.CP_ERROR_BAD_REGISTER},
		{name: "sh-reserved", pkts: [][]uint32{or(pm4.SetShReg(abi.SH_COMPUTE_USER_DATA_0, 1), 1, 1<<16)},
			wantErr: abi.CP_ERROR_RESERVED_BITS},
		{name: "sh-vmid-shift-and-index-accepted", pkts: [][]uint32{or(pm4.SetShReg(abi.SH_COMPUTE_USER_DATA_0, 1), 1, 0xF<<23)}},
	})
}

func TestWriteData(t *testing.T) {
	bypassOf := func(t *testing.T, r *cptest.Rig, va uint64) bool {
		for _, e := range r.Mem.Trace() {
			if e.Kind == "write" && e.Addr == va {
				return e.Access.Bypass
			}
		}
		t.Fatalf("no write at %#x", va)
		return false
	}
	trace := func(r *cptest.Rig) { r.Mem.SetTrace(true) }
	runPktCases(t, []pktCase{
		{name: "mem-dst5", setup: trace, pkts: [][]uint32{pm4.WriteMem(dataBase, 1, 2, 3, 4)},
			check: func(t *testing.T, r *cptest.Rig) {
				wantMem32(t, r, dataBase, 1, 2, 3, 4)
				if bypassOf(t, r, dataBase) {
					t.Error("LRU write bypassed L2")
				}
			}},
		{name: "mem-dst5-bypass", setup: trace, pkts: [][]uint32{pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_MEM, Addr: dataBase,
			CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, Data: []uint32{9}}.Encode()},
			check: func(t *testing.T, r *cptest.Rig) {
				wantMem32(t, r, dataBase, 9)
				if !bypassOf(t, r, dataBase) {
					t.Error("BYPASS write went through L2")
				}
			}},
		{name: "mem-dst1-bypass", setup: trace, pkts: [][]uint32{pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_MEM_GRBM, Addr: dataBase + 4,
			CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, Data: []uint32{10}}.Encode()},
			check: func(t *testing.T, r *cptest.Rig) {
				wantMem32(t, r, dataBase+4, 10)
				if !bypassOf(t, r, dataBase+4) {
					t.Error("BYPASS write went through L2")
				}
			}},
		{name: "mem-dst2-always-l2", setup: trace, pkts: [][]uint32{pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_TC_L2, Addr: dataBase + 8,
			CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, Data: []uint32{11}}.Encode()},
			check: func(t *testing.T, r *cptest.Rig) {
				wantMem32(t, r, dataBase+8, 11)
				if bypassOf(t, r, dataBase+8) {
					t.Error("TC_L2 write bypassed L2")
				}
			}},
		{name: "mem-one-addr", pkts: [][]uint32{pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_MEM, Addr: dataBase, OneAddr: true,
			Data: []uint32{1, 2, 3}}.Encode()},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dataBase, 3, 0) }},
		{name: "mem-64bit-address", pkts: [][]uint32{pm4.WriteMem(1<<40, 1)}, wantErr: abi.CP_ERROR_TRANSLATION, errAddr: 1 << 40},
		{name: "reg-consecutive", pkts: [][]uint32{pm4.WriteReg(scratch(0), 4, 5, 6)},
			check: func(t *testing.T, r *cptest.Rig) {
				wantReg(t, r, scratch(0), 4)
				wantReg(t, r, scratch(2), 6)
			}},
		{name: "reg-one-addr", pkts: [][]uint32{pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_REG, Addr: uint64(scratch(3)), OneAddr: true,
			Data: []uint32{4, 5, 6}}.Encode()},
			check: func(t *testing.T, r *cptest.Rig) {
				want := []cptest.RegWrite{{Reg: scratch(3), Value: 4}, {Reg: scratch(3), Value: 5}, {Reg: scratch(3), Value: 6}}
				if got := r.Regs.Writes(); !slices.Equal(got, want) {
					t.Errorf("writes = %v, want %v", got, want)
				}
			}},
		{name: "reg-high-bits-reserved", pkts: [][]uint32{pm4.WriteReg(1<<18|scratch(0), 1)}, wantErr: abi.CP_ERROR_RESERVED_BITS},
		{name: "reg-beyond-bar", pkts: [][]uint32{pm4.WriteReg(cptest.RegisterCount, 1)}, wantErr: abi.CP_ERROR_BAD_REGISTER},
		{name: "misaligned", pkts: [][]uint32{pm4.WriteMem(dataBase+2, 1)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "dst-gds", pkts: [][]uint32{pm4.WriteData{Dst: 3, Addr: dataBase, Data: []uint32{1}}.Encode()}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "no-data", pkts: [][]uint32{pm4.Packet(abi.PM4_IT_WRITE_DATA, 5<<8, dataBase, 0)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "dw1-reserved", pkts: [][]uint32{or(pm4.WriteMem(dataBase, 1), 1, 0x1000)}, wantErr: abi.CP_ERROR_RESERVED_BITS},
		{name: "fault", setup: func(r *cptest.Rig) { r.Mem.SetFault(dataBase, 1) },
			pkts: [][]uint32{pm4.WriteMem(dataBase+16, 1)}, wantErr: abi.CP_ERROR_TRANSLATION, errAddr: dataBase + 16},
		{name: "broken", setup: func(r *cptest.Rig) { r.Mem.SetBroken(dataBase, 1) },
			pkts: [][]uint32{pm4.WriteMem(dataBase+16, 1)}, wantErr: abi.CP_ERROR_MEMORY, errAddr: dataBase + 16},
	})
}

func TestCopyData(t *testing.T) {
	c := func(src, dst uint32, s, d uint64, b64 bool) []uint32 {
		return pm4.CopyData{SrcSel: src, DstSel: dst, Src: s, Dst: d, Bits64: b64}.Encode()
	}
	const (
		reg   = abi.PM4_COPY_DATA_SEL_REG
		l2    = abi.PM4_COPY_DATA_SEL_TC_L2
		mem   = abi.PM4_COPY_DATA_SEL_MEM // immediate as a source
		clock = abi.PM4_COPY_DATA_SEL_GPU_CLOCK
	)
	setRegs := func(r *cptest.Rig) {
		r.Regs.Set(scratch(4), 0x11111111)
		r.Regs.Set(scratch(5), 0x22222222)
		r.Mem.Store64(dataBase, 0x4444444433333333)
	}
	runPktCases(t, []pktCase{
		{name: "reg-to-mem-32", setup: setRegs, pkts: [][]uint32{c(reg, mem, uint64(scratch(4)), dataBase+8, false)},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dataBase+8, 0x11111111, 0) }},
		{name: "reg-to-mem-64", setup: setRegs, pkts: [][]uint32{c(reg, l2, uint64(scratch(4)), dataBase+8, true)},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dataBase+8, 0x11111111, 0x22222222) }},
		{name: "mem-to-reg-64", setup: setRegs, pkts: [][]uint32{c(l2, reg, dataBase, uint64(scratch(6)), true)},
			check: func(t *testing.T, r *cptest.Rig) {
				wantReg(t, r, scratch(6), 0x33333333)
				wantReg(t, r, scratch(7), 0x44444444)
			}},
		{name: "mem-to-mem-32", setup: setRegs, pkts: [][]uint32{c(l2, mem, dataBase+4, dataBase+16, false)},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dataBase+16, 0x44444444, 0) }},
		{name: "imm-to-mem-64", pkts: [][]uint32{c(mem, mem, 0x8765432112345678, dataBase, true)},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dataBase, 0x12345678, 0x87654321) }},
		{name: "imm-to-reg-32", pkts: [][]uint32{c(mem, reg, 0xABCD, uint64(scratch(1)), false)},
			check: func(t *testing.T, r *cptest.Rig) { wantReg(t, r, scratch(1), 0xABCD) }},
		{name: "clock-to-mem", pkts: [][]uint32{c(clock, mem, 0, dataBase, true)},
			check: func(t *testing.T, r *cptest.Rig) {
				if r.Mem.Load64(dataBase) == 0 {
					t.Error("GPU clock is 0")
				}
			}},
		{name: "bad-src", pkts: [][]uint32{c(4, mem, 0, dataBase, false)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "bad-dst", pkts: [][]uint32{c(mem, 3, 0, dataBase, false)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "misaligned-dst", pkts: [][]uint32{c(mem, mem, 0, dataBase+1, false)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "refused-reg", setup: func(r *cptest.Rig) { r.Regs.Deny = func(uint32) bool { return true } },
			pkts: [][]uint32{c(reg, mem, uint64(scratch(0)), dataBase, false)}, wantErr: abi.CP_ERROR_BAD_REGISTER},
		{name: "wrong-count", pkts: [][]uint32{pm4.Packet(abi.PM4_IT_COPY_DATA, 0, 0, 0)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "misaligned-src", pkts: [][]uint32{c(l2, mem, dataBase+2, dataBase, false)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "src-fault", pkts: [][]uint32{c(l2, mem, memSize, dataBase, false)}, wantErr: abi.CP_ERROR_TRANSLATION, errAddr: memSize},
		{name: "src-reg-reserved", pkts: [][]uint32{c(reg, mem, 1<<20, dataBase, false)}, wantErr: abi.CP_ERROR_RESERVED_BITS},
		{name: "dst-reg-refused", pkts: [][]uint32{c(mem, reg, 1, cptest.RegisterCount-1, true)}, wantErr: abi.CP_ERROR_BAD_REGISTER},
	})
}

func TestReleaseMem(t *testing.T) {
	fence := uint64(dataBase + 0x100)
	clocks := func(c *cp.Config) {
		c.GPUClock = func() uint64 { return 0x1111222233334444 }
		c.SystemClock = func() uint64 { return 0x5555666677778888 }
	}
	cases := []struct {
		name     string
		pkt      pm4.ReleaseMem
		wantMem  []uint32
		wantIV   bool
		wantPath []string
	}{
		{name: "data32-int2", pkt: pm4.ReleaseMem{GCR: pm4.FenceGCR, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS,
			DataSel: pm4.Data32, IntSel: pm4.IntConfirm, Addr: fence, Data: 0xAAAABBBB_CCCCDDDD, CtxID: 0x1234},
			wantMem: []uint32{0xCCCCDDDD, 0}, wantIV: true,
			wantPath: []string{"cache WB 0x0+0xffffffffffffffff", "fence slot 1 " + hex(fence), "write " + hex(fence) + "+4 bypass=true data=0xccccdddd", "iv 0x1234"}},
		{name: "data64-int1-l2", pkt: pm4.ReleaseMem{GCR: abi.PM4_RELEASE_MEM_GCR_GL2_WB_MASK | abi.PM4_RELEASE_MEM_GCR_GL2_INV_MASK,
			DstSel: pm4.DstL2, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, DataSel: pm4.Data64, IntSel: 1, Addr: fence, Data: 0xAAAABBBB_CCCCDDDD, CtxID: 7},
			wantMem: []uint32{0xCCCCDDDD, 0xAAAABBBB}, wantIV: true,
			wantPath: []string{"cache WB_INV 0x0+0xffffffffffffffff", "fence slot 1 " + hex(fence), "write " + hex(fence) + "+8 bypass=false data=0xaaaabbbbccccdddd", "iv 0x7"}},
		{name: "gpu-clock-no-int", pkt: pm4.ReleaseMem{DataSel: pm4.DataGPUClock, Addr: fence},
			wantMem:  []uint32{0x33334444, 0x11112222},
			wantPath: []string{"fence slot 1 " + hex(fence), "write " + hex(fence) + "+8 bypass=false data=0x1111222233334444"}},
		{name: "system-clock", pkt: pm4.ReleaseMem{DataSel: pm4.DataSysClock, Addr: fence, CachePolicy: abi.PM4_CACHE_POLICY_BYPASS},
			wantMem:  []uint32{0x77778888, 0x55556666},
			wantPath: []string{"fence slot 1 " + hex(fence), "write " + hex(fence) + "+8 bypass=true data=0x5555666677778888"}},
		{name: "interrupt-only-discard", pkt: pm4.ReleaseMem{GCR: abi.PM4_RELEASE_MEM_GCR_GL2_DISCARD_MASK, IntSel: 1, CtxID: 9},
			wantMem: []uint32{0, 0}, wantIV: true,
			wantPath: []string{"cache DISCARD 0x0+0xffffffffffffffff", "iv 0x9"}},
		{name: "nothing", pkt: pm4.ReleaseMem{Addr: fence}, wantMem: []uint32{0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, ring := start(t, 1, clocks)
			r.Mem.SetTrace(true)
			ring.Submit(tc.pkt.Encode())
			ring.WaitIdle(t)
			wantMem32(t, r, fence, tc.wantMem...)
			var path []string
			for _, e := range r.Mem.Trace() {
				if e.Kind != "read" && e.Addr != ring.Config.RptrReport { // not ring fetches and rptr reports
					path = append(path, e.String())
				}
			}
			if !slices.Equal(path, tc.wantPath) {
				t.Errorf("unexpected operations (-want +got):\n- %q\n+ %q", tc.wantPath, path)
			}
			if tc.wantIV {
				if !r.IVs.Wait(1, cptest.Timeout) {
					t.Fatal("no IV")
				}
				wantIV(t, r.IVs.All()[0], engine.IV{Client: abi.IH_CLIENT_GRBM_CP, Source: abi.IH_SRC_CP_EOP,
					RingID: cp.RingID(1), Data: [4]uint32{tc.pkt.CtxID}})
			} else if r.IVs.Len() != 0 {
				t.Errorf("INT_SEL 0 raised %+v", r.IVs.All())
			}
			wantFences := uint32(0)
			if tc.pkt.DataSel != 0 {
				wantFences = 1
			}
			if got := r.ReadHQD(1, abi.REG_HQD_FENCES); got != wantFences {
				t.Errorf("FENCES = %d, want %d", got, wantFences)
			}
		})
	}
	runPktCases(t, []pktCase{
		{name: "misaligned-64", pkts: [][]uint32{pm4.ReleaseMem{DataSel: pm4.Data64, Addr: fence + 4}.Encode()}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "misaligned-32", pkts: [][]uint32{pm4.ReleaseMem{DataSel: pm4.Data32, Addr: fence + 2}.Encode()}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "data-sel-5", pkts: [][]uint32{pm4.ReleaseMem{DataSel: 5, Addr: fence}.Encode()}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "int-sel-3", pkts: [][]uint32{pm4.ReleaseMem{IntSel: 3}.Encode()}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "dst-sel-2", pkts: [][]uint32{pm4.ReleaseMem{DstSel: 2}.Encode()}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "short", pkts: [][]uint32{pm4.Packet(abi.PM4_IT_RELEASE_MEM, 0, 0, 0, 0, 0, 0)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "fault", pkts: [][]uint32{pm4.Fence(memSize, 1, 0, true)}, wantErr: abi.CP_ERROR_TRANSLATION, errAddr: memSize},
	})
}

func TestAcquireMem(t *testing.T) {
	const wbinv = abi.PM4_ACQUIRE_MEM_GCR_GL2_WB_MASK | abi.PM4_ACQUIRE_MEM_GCR_GL2_INV_MASK
	const ranged = 2 << abi.PM4_ACQUIRE_MEM_GCR_GL2_RANGE__SHIFT
	cases := []struct {
		name string
		pkt  pm4.AcquireMem
		want []string
	}{
		{"all-amdgpu", pm4.AcquireMem{GCR: wbinv | 0x3F3, Size: pm4.SizeAll}, []string{"cache WB_INV 0x0+0xffffffffffffffff"}},
		{"wb-only", pm4.AcquireMem{GCR: abi.PM4_ACQUIRE_MEM_GCR_GL2_WB_MASK}, []string{"cache WB 0x0+0xffffffffffffffff"}},
		{"inv-range", pm4.AcquireMem{GCR: abi.PM4_ACQUIRE_MEM_GCR_GL2_INV_MASK | ranged, Base: 0x1234, Size: 3},
			[]string{"cache INV 0x123400+0x300"}},
		{"range-high-bits", pm4.AcquireMem{GCR: abi.PM4_ACQUIRE_MEM_GCR_GL2_WB_MASK | ranged, Base: 0x12_00000001, Size: 0x1_00000000},
			[]string{"cache WB 0x120000000100+0x10000000000"}},
		{"range-all-ones-is-all", pm4.AcquireMem{GCR: wbinv | ranged, Base: 0x1234, Size: pm4.SizeAll},
			[]string{"cache WB_INV 0x0+0xffffffffffffffff"}},
		{"range-empty", pm4.AcquireMem{GCR: wbinv | ranged, Base: 0x1234, Size: 0}, nil},
		{"discard", pm4.AcquireMem{GCR: abi.PM4_ACQUIRE_MEM_GCR_GL2_DISCARD_MASK | ranged, Base: 1, Size: 1},
			[]string{"cache DISCARD 0x100+0x100"}},
		{"no-gl2-bits", pm4.AcquireMem{GCR: 0x3F3}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, ring := start(t, 1)
			r.Mem.SetTrace(true)
			ring.Submit(tc.pkt.Encode())
			ring.WaitIdle(t)
			var got []string
			for _, e := range r.Mem.Trace() {
				if e.Kind == "cache" {
					got = append(got, e.String())
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("unexpected cache operations (-want +got):\n- %q\n+ %q", tc.want, got)
			}
		})
	}
	runPktCases(t, []pktCase{
		{name: "reserved", pkts: [][]uint32{pm4.AcquireMem{GCR: 1 << 19}.Encode()}, wantErr: abi.CP_ERROR_RESERVED_BITS},
		{name: "gfx9-count", pkts: [][]uint32{pm4.Packet(abi.PM4_IT_ACQUIRE_MEM, 0, 0, 0, 0, 0, 0)}, wantErr: abi.CP_ERROR_BAD_PACKET},
	})
}

func TestEventWriteAndPfpSyncMe(t *testing.T) {
	runPktCases(t, []pktCase{
		{name: "cs-partial-flush", pkts: [][]uint32{pm4.WriteMem(dataBase, 1), pm4.CSPartialFlush(), pm4.WriteMem(dataBase+4, 2)},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dataBase, 1, 2) }},
		// Sampling events carry an address there is nothing to write to: refused.
		{name: "sampling-event-with-address", pkts: [][]uint32{pm4.Packet(abi.PM4_IT_EVENT_WRITE, 0x28|5<<8, uint32(dataBase), 0)},
			wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "event-count-3", pkts: [][]uint32{pm4.Packet(abi.PM4_IT_EVENT_WRITE, 7, 0, 0, 0)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "event-count-1", pkts: [][]uint32{pm4.Packet(abi.PM4_IT_EVENT_WRITE, 7, 0)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "pfp-sync-me-gfx", gfx: true, pkts: [][]uint32{pm4.PfpSyncMe(), pm4.WriteMem(dataBase, 3)},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dataBase, 3) }},
		{name: "pfp-sync-me-compute", pkts: [][]uint32{pm4.PfpSyncMe()}, wantErr: abi.CP_ERROR_BAD_OPCODE},
		{name: "pfp-sync-me-reserved", gfx: true, pkts: [][]uint32{pm4.Packet(abi.PM4_IT_PFP_SYNC_ME, 1)}, wantErr: abi.CP_ERROR_RESERVED_BITS},
	})
}

func TestDMAData(t *testing.T) {
	src, dst := uint64(dataBase), uint64(dataBase+0x100000)
	pattern := func(r *cptest.Rig) {
		b := make([]byte, 0x90000)
		for i := range b {
			b[i] = byte(i*7 + i>>8)
		}
		r.Mem.SetBytes(src, b)
	}
	wantCopy := func(n int, sentinel bool) func(t *testing.T, r *cptest.Rig) {
		return func(t *testing.T, r *cptest.Rig) {
			if !bytes.Equal(r.Mem.Bytes(dst, n), r.Mem.Bytes(src, n)) {
				t.Errorf("copy of %d bytes differs", n)
			}
			if sentinel && r.Mem.Bytes(dst+uint64(n), 1)[0] != 0 {
				t.Errorf("copy of %d bytes wrote past its end", n)
			}
		}
	}
	wantFill := func(v uint32, n int) func(t *testing.T, r *cptest.Rig) {
		return func(t *testing.T, r *cptest.Rig) {
			got := r.Mem.Bytes(dst, n+4)
			for i := 0; i < n; i++ {
				if got[i] != byte(v>>(8*(i%4))) {
					t.Fatalf("fill byte %d = %#x", i, got[i])
				}
			}
			if got[n] != 0 {
				t.Errorf("fill of %d bytes wrote past its end", n)
			}
		}
	}
	l2 := uint32(abi.PM4_DMA_DATA_SEL_ADDR_L2)
	cases := []pktCase{
		{name: "fill-7", pkts: [][]uint32{pm4.DMAFill(dst, 0x44332211, 7)}, check: wantFill(0x44332211, 7)},
		{name: "fill-crosses-chunks", pkts: [][]uint32{pm4.DMAFill(dst, 0xA1B2C3D4, 200003)}, check: wantFill(0xA1B2C3D4, 200003)},
		{name: "fill-zero-bytes", pkts: [][]uint32{pm4.DMAFill(dst, 1, 0)}, check: wantFill(0, 0)},
		{name: "copy-direct", setup: pattern, pkts: [][]uint32{pm4.DMAData{Src: src, Dst: dst, Count: 4096}.Encode()}, check: wantCopy(4096, true)},
		{name: "copy-saic", setup: pattern, pkts: [][]uint32{pm4.DMAData{SrcSel: l2, DstSel: l2, Src: src + 4, Dst: dst, Count: 12, SAIC: true}.Encode()},
			check: func(t *testing.T, r *cptest.Rig) {
				v := r.Mem.Load32(src + 4)
				wantMem32(t, r, dst, v, v, v, 0)
			}},
		{name: "copy-daic", setup: pattern, pkts: [][]uint32{pm4.DMAData{SrcSel: l2, DstSel: l2, Src: src, Dst: dst, Count: 16, DAIC: true}.Encode()},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dst, r.Mem.Load32(src+12), 0) }},
		{name: "fill-daic", pkts: [][]uint32{pm4.DMAData{SrcSel: abi.PM4_DMA_DATA_SEL_DATA, DstSel: l2, Src: 5, Dst: dst, Count: 64, DAIC: true}.Encode()},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dst, 5, 0) }},
		{name: "saic-partial", pkts: [][]uint32{pm4.DMAData{SrcSel: l2, DstSel: l2, Src: src, Dst: dst, Count: 6, SAIC: true}.Encode()},
			wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "sas", pkts: [][]uint32{pm4.DMAData{SrcSel: l2, DstSel: l2, Src: src, Dst: dst, Count: 4, SAS: true}.Encode()}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "das", pkts: [][]uint32{pm4.DMAData{SrcSel: l2, DstSel: l2, Src: src, Dst: dst, Count: 4, DAS: true}.Encode()}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "src-gds", pkts: [][]uint32{pm4.DMAData{SrcSel: 1, DstSel: l2, Src: src, Dst: dst, Count: 4}.Encode()}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "dst-gds", pkts: [][]uint32{pm4.DMAData{SrcSel: l2, DstSel: 1, Src: src, Dst: dst, Count: 4}.Encode()}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "wraps", pkts: [][]uint32{pm4.DMACopy(^uint64(0)-2, src, 8)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "dst-fault-second-chunk", setup: func(r *cptest.Rig) { r.Mem.SetFault(dst+0x10000, 1) },
			pkts: [][]uint32{pm4.DMACopy(dst, src, 0x20000)}, wantErr: abi.CP_ERROR_TRANSLATION, errAddr: dst + 0x10000},
		{name: "src-broken", setup: func(r *cptest.Rig) { r.Mem.SetBroken(src, 1) },
			pkts: [][]uint32{pm4.DMACopy(dst, src, 16)}, wantErr: abi.CP_ERROR_MEMORY, errAddr: src},
	}
	for _, n := range []int{1, 3, 4, 13, 4097, 65536, 65537, 0x90000} {
		cases = append(cases, pktCase{name: "copy-" + hex(uint64(n)), setup: pattern,
			pkts: [][]uint32{pm4.DMACopy(dst, src, uint32(n))}, check: wantCopy(n, true)})
	}
	runPktCases(t, cases)
}

func TestDispatchDirect(t *testing.T) {
	const g = abi.KERNEL_GROUP_DWORDS
	src, dst := uint64(dataBase), uint64(dataBase+0x80000)
	pattern := func(r *cptest.Rig) {
		for i := uint64(0); i < 6*g; i++ {
			r.Mem.Store32(src+i*4, uint32(i)*3+1)
		}
	}
	runPktCases(t, []pktCase{
		{name: "fill", pkts: [][]uint32{pm4.Kernel(abi.KERNEL_FILL, dst, 0, 0x5A5A5A5A), pm4.DispatchDirect(2, 1, 1)},
			check: func(t *testing.T, r *cptest.Rig) {
				wantMem32(t, r, dst, 0x5A5A5A5A)
				wantMem32(t, r, dst+2*g*4-4, 0x5A5A5A5A, 0)
			}},
		{name: "copy", setup: pattern, pkts: [][]uint32{pm4.Kernel(abi.KERNEL_COPY, dst, src, 0), pm4.DispatchDirect(1, 2, 3)},
			check: func(t *testing.T, r *cptest.Rig) {
				if !bytes.Equal(r.Mem.Bytes(dst, 6*g*4), r.Mem.Bytes(src, 6*g*4)) {
					t.Error("copy kernel output differs")
				}
				wantMem32(t, r, dst+6*g*4, 0)
			}},
		{name: "increment", setup: func(r *cptest.Rig) { r.Mem.Store32(dst, 100) },
			pkts: [][]uint32{pm4.Kernel(abi.KERNEL_INCREMENT, dst, 0, 0), pm4.DispatchDirect(2, 3, 1),
				pm4.DispatchDirect(1, 1, 1), pm4.DispatchDirect(0, 5, 5)},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dst, 107) }},
		{name: "zero-groups", pkts: [][]uint32{pm4.Kernel(abi.KERNEL_FILL, dst, 0, 1), pm4.DispatchDirect(0, 1, 1)},
			check: func(t *testing.T, r *cptest.Rig) { wantMem32(t, r, dst, 0) }},
		{name: "kernel-none", pkts: [][]uint32{pm4.DispatchDirect(1, 1, 1)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "kernel-unknown", pkts: [][]uint32{pm4.Kernel(99, dst, 0, 0), pm4.DispatchDirect(1, 1, 1)}, wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "too-many-groups", pkts: [][]uint32{pm4.Kernel(abi.KERNEL_FILL, dst, 0, 0), pm4.DispatchDirect(1<<10, 1<<10, 2)},
			wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "huge-dims", pkts: [][]uint32{pm4.Kernel(abi.KERNEL_FILL, dst, 0, 0), pm4.DispatchDirect(0xFFFFFFFF, 0xFFFFFFFF, 0)},
			wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "misaligned", pkts: [][]uint32{pm4.Kernel(abi.KERNEL_INCREMENT, dst+2, 0, 0), pm4.DispatchDirect(1, 1, 1)},
			wantErr: abi.CP_ERROR_BAD_PACKET},
		{name: "fill-fault", pkts: [][]uint32{pm4.Kernel(abi.KERNEL_FILL, memSize-128, 0, 0), pm4.DispatchDirect(1, 1, 1)},
			wantErr: abi.CP_ERROR_TRANSLATION, errAddr: memSize - 128},
		{name: "wrong-count", pkts: [][]uint32{pm4.Packet(abi.PM4_IT_DISPATCH_DIRECT, 1, 1, 1)}, wantErr: abi.CP_ERROR_BAD_PACKET},
	})
}
