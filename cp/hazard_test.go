package cp_test

import (
	"testing"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
	"vgpu/compute"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
	"vgpu/shader"
)

// The pipeline-hazard sanitizer through the CP (hazard.go).
const (
	hzProgB   = 0x201000 // the second dispatch's program
	hzFence   = 0x224000 // the dispatch's own fence: 1 once work-item 0 stored
	hzRelease = 0x224100 // non-zero lets the held dispatch end
	hzCopy    = 0x224200 // where packets copy to
	hzOut2    = 0x225000 // the second dispatch's results
	hzDone    = 0x224300
)

// hazardRig is shaderRig with strict mode as *strict says.
func hazardRig(t *testing.T, strict *bool) (*cptest.Rig, *cptest.Ring, *compute.Pool) {
	t.Helper()
	var pool *compute.Pool
	r, ring := start(t, 1, func(c *cp.Config) {
		pool = compute.New(compute.Config{CUs: 2, Memory: c.Memory, Interrupts: c.Interrupts, Budget: 512,
			Strict: func() bool { return *strict }})
		c.Compute = pool
	})
	t.Cleanup(pool.Close)
	return r, ring, pool
}

// heldStore: out[gid] = gid+1 (4 bytes), then the fence (hzFence = 1), then spin until
// hzRelease is non-zero: a dispatch in flight after its writes.
func heldStore() asm.Instructions {
	return asm.Instructions{
		asm.LoadImm(asm.R7, shOut, asm.DWord),
		asm.Mov.Reg(asm.R8, asm.R2),
		asm.LSh.Imm(asm.R8, 2),
		asm.Add.Reg(asm.R7, asm.R8),
		asm.Mov.Reg(asm.R9, asm.R2),
		asm.Add.Imm(asm.R9, 1),
		asm.StoreMem(asm.R7, 0, asm.R9, asm.Word),
		asm.LoadImm(asm.R7, hzFence, asm.DWord),
		asm.Mov.Imm(asm.R9, 1),
		asm.StoreMem(asm.R7, 0, asm.R9, asm.Word),
		asm.LoadImm(asm.R7, hzRelease, asm.DWord),
		asm.LoadMem(asm.R9, asm.R7, 0, asm.Word).WithSymbol("spin"),
		asm.JEq.Imm(asm.R9, 0, "spin"),
		asm.Return(),
	}
}

// copyOut: out2[gid] = out[gid] (a dispatch reading the first one's results).
func copyOut() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R8, asm.R2),
		asm.LSh.Imm(asm.R8, 2),
		asm.LoadImm(asm.R7, shOut, asm.DWord),
		asm.Add.Reg(asm.R7, asm.R8),
		asm.LoadMem(asm.R9, asm.R7, 0, asm.Word),
		asm.LoadImm(asm.R7, hzOut2, asm.DWord),
		asm.Add.Reg(asm.R7, asm.R8),
		asm.StoreMem(asm.R7, 0, asm.R9, asm.Word),
		asm.Return(),
	}
}

func putProgramAt(t *testing.T, r *cptest.Rig, at uint64, insns asm.Instructions, threads [3]uint32) pm4.Shader {
	t.Helper()
	_, code, err := shader.Build(insns)
	if err != nil {
		t.Fatal(err)
	}
	r.Mem.SetBytes(at, code)
	return pm4.Shader{Program: at, Slots: uint32(len(code) / 8), Threads: threads, Args: shArgs}
}

// emitted writes packets to the ring and returns each one's GPU address.
func emitted(ring *cptest.Ring, pkts ...[]uint32) []uint64 {
	addrs := make([]uint64, len(pkts))
	for i, p := range pkts {
		addrs[i] = ring.Base + ring.Wptr()%ring.Size*4
		ring.Emit(p)
	}
	ring.Kick()
	return addrs
}

func TestPacketHazards(t *testing.T) {
	copyOut0 := pm4.CopyData{SrcSel: abi.PM4_COPY_DATA_SEL_TC_L2, DstSel: abi.PM4_COPY_DATA_SEL_TC_L2, Src: shOut, Dst: hzCopy}.Encode()
	tests := []struct {
		name    string
		strict  bool
		packets func(t *testing.T, r *cptest.Rig) [][]uint32 // after the dispatch and the wait for the test's go
		check   int                                          // the packet (index in packets) named, -1: none
		kind    uint32
		opcode  uint32
		size    uint64 // 0: what was recorded when the packet ran, 4..32 bytes from out[0]
		second  bool   // the named access is a second dispatch's (its DISPATCH packet is the last of packets)
	}{
		{name: "COPY_DATA of the output without a flush", strict: true,
			packets: func(*testing.T, *cptest.Rig) [][]uint32 { return [][]uint32{copyOut0} },
			check:   0, kind: abi.SHADER_HAZARD_PACKET_READ, opcode: abi.PM4_IT_COPY_DATA, size: 4},
		{name: "WRITE_DATA over the output", strict: true,
			packets: func(*testing.T, *cptest.Rig) [][]uint32 { return [][]uint32{pm4.WriteMem(shOut, 5, 6)} },
			check:   0, kind: abi.SHADER_HAZARD_PACKET_WRITE, opcode: abi.PM4_IT_WRITE_DATA, size: 8},
		{name: "DMA_DATA from the output", strict: true,
			packets: func(*testing.T, *cptest.Rig) [][]uint32 { return [][]uint32{pm4.DMACopy(hzCopy, shOut-64, 128)} },
			check:   0, kind: abi.SHADER_HAZARD_PACKET_READ, opcode: abi.PM4_IT_DMA_DATA}, // size: the stores recorded by then
		{name: "COPY_DATA of a neighbour of the output: silent", strict: true,
			packets: func(*testing.T, *cptest.Rig) [][]uint32 {
				return [][]uint32{pm4.CopyData{SrcSel: abi.PM4_COPY_DATA_SEL_TC_L2, DstSel: abi.PM4_COPY_DATA_SEL_TC_L2, Src: shOut - 4, Dst: hzCopy}.Encode()}
			},
			check: -1},
		{name: "after CS_PARTIAL_FLUSH: silent", strict: true,
			packets: func(*testing.T, *cptest.Rig) [][]uint32 { return [][]uint32{pm4.CSPartialFlush(), copyOut0} },
			check:   -1},
		{name: "after RELEASE_MEM: silent", strict: true,
			packets: func(*testing.T, *cptest.Rig) [][]uint32 { return [][]uint32{pm4.Fence(shFence, 1, 0, false), copyOut0} },
			check:   -1},
		{name: "after a wait on the dispatch's own fence: silent", strict: true,
			packets: func(*testing.T, *cptest.Rig) [][]uint32 { return [][]uint32{pm4.WaitMem(hzFence, 1), copyOut0} },
			check:   -1},
		{name: "strict off: silent", strict: false,
			packets: func(*testing.T, *cptest.Rig) [][]uint32 { return [][]uint32{copyOut0} },
			check:   -1},
		{name: "a second dispatch reads the output", strict: true,
			packets: func(t *testing.T, r *cptest.Rig) [][]uint32 {
				sh := putProgramAt(t, r, hzProgB, copyOut(), [3]uint32{8, 1, 1})
				return [][]uint32{sh.Encode(), pm4.DispatchDirect(1, 1, 1)}
			},
			check: 1, kind: abi.SHADER_HAZARD_DISPATCH_READ, size: 4, second: true},
		{name: "a second dispatch after CS_PARTIAL_FLUSH: silent", strict: true,
			packets: func(t *testing.T, r *cptest.Rig) [][]uint32 {
				sh := putProgramAt(t, r, hzProgB, copyOut(), [3]uint32{8, 1, 1})
				return [][]uint32{pm4.CSPartialFlush(), sh.Encode(), pm4.DispatchDirect(1, 1, 1)}
			},
			check: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			strict := tc.strict
			r, ring, pool := hazardRig(t, &strict)
			sh := putProgram(t, r, heldStore(), [3]uint32{8, 1, 1})
			// The dispatch, then a wait for the test's go (shMarker: not memory the dispatch
			// writes), so the packets run once the work-items have stored.
			pkts := append([][]uint32{sh.Encode(), pm4.DispatchDirect(1, 1, 1), pm4.WaitMem(shMarker, 1)}, tc.packets(t, r)...)
			pkts = append(pkts, pm4.CSPartialFlush(), pm4.WriteMem(hzDone, 1))
			addrs := emitted(ring, pkts...)
			cptest.Eventually(t, "every work-item's store", func() bool { return r.Mem.Load32(shOut+4*7) == 8 })
			r.Mem.Store32(shMarker, 1)
			r.CP.Wake()
			if tc.check >= 0 {
				// Every hazard before the release: one per work-item of a second dispatch,
				// which the first one's end (after the release) would no longer make hazards.
				want := uint64(1)
				if tc.second {
					want = 8
				}
				cptest.Eventually(t, "the hazard", func() bool { return pool.Sanitizer().Hazards >= want })
			} else {
				// The packets before a barrier have run once the queue waits for the dispatch.
				cptest.Eventually(t, "the queue waiting for the dispatch", func() bool {
					return r.CP.Stats().Queues[1].State == abi.HQD_STATE_BUSY_KERNEL
				})
			}
			r.Mem.Store32(hzRelease, 1)
			pool.InvalidateL0()
			cptest.Eventually(t, "the end", func() bool { return r.Mem.Load32(hzDone) == 1 })
			ring.WaitIdle(t)
			s := pool.Sanitizer()
			if tc.check < 0 {
				if s.Hazards != 0 {
					t.Fatalf("named %d hazards, the last %+v", s.Hazards, s.Last)
				}
				return
			}
			h, dispatch := s.Last, addrs[1]
			by := addrs[3+tc.check]
			addr := uint64(shOut)
			if tc.second { // one per work-item of the second dispatch: the last names one of them
				addr = h.Addr
				if addr < shOut || addr >= shOut+32 || addr%4 != 0 {
					t.Errorf("hazard at %#x, want one of out[0..7]", addr)
				}
			}
			size := tc.size
			if size == 0 {
				size = h.Size
				if size < 4 || size > 32 || size%4 != 0 {
					t.Errorf("hazard of %d bytes, want 4..32 (out[0] up to the last store recorded)", size)
				}
			}
			want := compute.Hazard{Kind: tc.kind, Slot: 1, Opcode: tc.opcode, Addr: addr, Size: size, By: by, Writer: dispatch,
				WriterRun: h.WriterRun, ByRun: h.ByRun}
			if h != want {
				t.Errorf("hazard\n %+v, want\n %+v", h, want)
			}
			if tc.second {
				if s.Hazards != 8 || h.ByRun == 0 || h.ByRun == h.WriterRun {
					t.Errorf("%d hazards, runs %d and %d: want 8, by a second run", s.Hazards, h.WriterRun, h.ByRun)
				}
				for i := range 8 {
					if got := r.Mem.Load32(hzOut2 + 4*uint64(i)); got != uint32(i+1) {
						t.Fatalf("the second dispatch read out[%d] = %d (the writes were made)", i, got)
					}
				}
			} else if s.Hazards != 1 || h.ByRun != 0 {
				t.Errorf("%d hazards (by run %d), want one by a packet", s.Hazards, h.ByRun)
			}
		})
	}
}
