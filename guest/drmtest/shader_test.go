package main

import (
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/compute"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
	"vgpu/shader"
	"vgpu/shaders"
)

// The shader cases' dispatch streams and bad programs, run on the host's CP and compute
// units (flat test memory, no GPUVM): what the guest cases submit works, and each bad
// program ends with the error and program counter its row says.

const (
	hostProg   = 0x20000 // programs
	hostArgs   = 0x30000
	hostData   = 0x40000
	hostDims   = 0x3F000
	hostFence  = 0x3F800
	hostReport = 0x1800 // page 0 stays free to fault
)

func hostRig(t *testing.T) (*cptest.Rig, *cptest.Ring) {
	t.Helper()
	var pool *compute.Pool
	r := cptest.NewRig(t, 1<<20, func(c *cp.Config) {
		pool = compute.New(compute.Config{CUs: 2, Memory: c.Memory, Interrupts: c.Interrupts, Budget: 512})
		c.Compute = pool
	})
	t.Cleanup(pool.Close)
	return r, r.StartQueue(1, cptest.QueueConfig{Base: 0x10000, QueueSize: 10, RptrReport: hostReport, Doorbell: 2, DoorbellEn: true})
}

func putCode(r *cptest.Rig, at uint64, code []byte) { r.Mem.SetBytes(at, code) }

// runHost submits p and a fence after it, and waits for the fence.
func runHost(t *testing.T, r *cptest.Rig, ring *cptest.Ring, p dispatch, seq uint32) {
	t.Helper()
	ring.Submit(append(p.packets(), pm4.Fence(hostFence, seq, 0, false))...)
	cptest.Eventually(t, "the fence after the dispatch", func() bool { return r.Mem.Load32(hostFence) == seq })
}

func hostBuild(t *testing.T, s shaders.Shader) []byte {
	t.Helper()
	_, code, err := shader.Build(s.Insns)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// Each shader case's dispatch, small: direct and indirect grids, results checked.
func TestDispatchPacketsRun(t *testing.T) {
	r, ring := hostRig(t)
	// vector_add over 4096 elements.
	const n = 4096
	va := shaders.VectorAdd()
	code := hostBuild(t, va)
	putCode(r, hostProg, code)
	a, b, out := uint64(hostData), uint64(hostData+4*n), uint64(hostData+8*n)
	for i := range uint64(n) {
		r.Mem.Store32(a+4*i, uint32(3*i))
		r.Mem.Store32(b+4*i, uint32(0x8000_0000+i))
	}
	r.Mem.Store64(hostArgs, a)
	r.Mem.Store64(hostArgs+8, b)
	r.Mem.Store64(hostArgs+16, out)
	sh := pm4.Shader{Program: hostProg, Slots: uint32(len(code) / 8), Threads: [3]uint32{256, 1, 1}, Args: hostArgs}
	runHost(t, r, ring, dispatch{sh: sh, grid: [3]uint32{n / 256, 1, 1}}, 1)
	for i := range uint64(n) {
		if got, want := r.Mem.Load32(out+4*i), uint32(3*i+0x8000_0000+i); got != want {
			t.Fatalf("vector_add out[%d] = %#x, want %#x", i, got, want)
		}
	}
	// ids_2d, indirect: 48x8 in 16x2 groups.
	ids := shaders.IDs2D()
	code = hostBuild(t, ids)
	putCode(r, hostProg, code)
	r.Mem.Store64(hostArgs, out)
	r.Mem.Store32(hostDims, 3)
	r.Mem.Store32(hostDims+4, 4)
	r.Mem.Store32(hostDims+8, 1)
	sh = pm4.Shader{Program: hostProg, Slots: uint32(len(code) / 8), Threads: [3]uint32{16, 2, 1}, Args: hostArgs}
	runHost(t, r, ring, dispatch{sh: sh, indirect: hostDims}, 2)
	for y := range uint32(8) {
		for x := range uint32(48) {
			if got, want := r.Mem.Load32(out+4*uint64(y*48+x)), x|y<<16|(x/16)<<24; got != want {
				t.Fatalf("ids_2d (%d,%d) = %#x, want %#x", x, y, got, want)
			}
		}
	}
	if st, e := r.Status(1); st == abi.HQD_STATE_HALTED {
		t.Fatalf("the queue halted: %d", e)
	}
}

// The packets: the full invalidation first (its L0 bits), then the state, then the dispatch.
func TestDispatchPacketsOrder(t *testing.T) {
	sh := pm4.Shader{Program: 0x1000, Slots: 3, Threads: [3]uint32{8, 4, 1}, Args: 0x2000}
	for _, c := range []struct {
		name string
		p    dispatch
		last []uint32
	}{
		{"direct", dispatch{sh: sh, grid: [3]uint32{5, 6, 7}}, pm4.DispatchDirect(5, 6, 7)},
		{"indirect", dispatch{sh: sh, grid: [3]uint32{5, 6, 7}, indirect: 0x12_3456_7800}, pm4.DispatchIndirect(0)},
	} {
		pk := c.p.packets()
		acq := pm4.AcquireMem{GCR: invalidateAll, Size: pm4.SizeAll}.Encode()
		if len(pk) < 3 || !equal(pk[0], acq) || !equal(pk[1], sh.Encode()) || !equal(pk[len(pk)-1], c.last) {
			t.Errorf("%s: packets %#x", c.name, pk)
		}
		if c.p.indirect != 0 && (len(pk) != 4 || !equal(pk[2], pm4.SetBase(c.p.indirect))) {
			t.Errorf("%s: no SET_BASE of %#x before the dispatch: %#x", c.name, c.p.indirect, pk)
		}
	}
	if invalidateAll&abi.PM4_ACQUIRE_MEM_GCR_GLV_INV_MASK == 0 || invalidateAll&abi.PM4_ACQUIRE_MEM_GCR_GL1_INV_MASK == 0 {
		t.Errorf("invalidateAll %#x does not drop the L0s", invalidateAll)
	}
}

func equal(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Every bad shader the guest case runs ends with its reason at its slot (the halt's
// ERROR_INFO and ERROR_ADDR, and the IV the driver names it from). The one that needs page
// permissions (the GPUVM's) is the guest's alone.
func TestBadShaders(t *testing.T) {
	seen := map[uint32]bool{}
	for _, b := range badShaders {
		seen[b.reason] = true
		t.Run(b.name, func(t *testing.T) {
			if b.place == placeRW {
				t.Skip("flat test memory has no EXECUTABLE bit: the guest case checks this one")
			}
			r, ring := hostRig(t)
			r.Mem.SetFault(0, 4096) // faultVA
			code, err := assemble(b.insns)
			if err != nil {
				t.Fatal(err)
			}
			prog := uint64(hostProg)
			if b.place == placeUnmapped {
				prog = 0x5_0000
				r.Mem.SetFault(prog, 4096)
			} else {
				putCode(r, prog, code)
			}
			sh := pm4.Shader{Program: prog, Slots: b.programSlots(code), Threads: [3]uint32{1, 1, 1}, Args: hostArgs}
			ring.Submit(append(dispatch{sh: sh, grid: [3]uint32{1, 1, 1}}.packets(), pm4.Fence(hostFence, 1, 0, false))...)
			if e := ring.WaitHalt(t); e != abi.CP_ERROR_SHADER {
				t.Fatalf("halted with %s, want CP_ERROR_SHADER", abi.NameOf("CP_ERROR_", uint64(e)))
			}
			addr := uint64(r.ReadHQD(1, abi.REG_HQD_ERROR_ADDR_HI))<<32 | uint64(r.ReadHQD(1, abi.REG_HQD_ERROR_ADDR_LO))
			info := r.ReadHQD(1, abi.REG_HQD_ERROR_INFO)
			if info != b.reason || addr != prog+8*uint64(b.pc) {
				t.Errorf("ERROR_INFO %s ERROR_ADDR %#x, want %s at %#x", shaderErrName(info), addr, shaderErrName(b.reason), prog+8*uint64(b.pc))
			}
			var n int
			for _, iv := range r.IVs.All() {
				if iv.Source != abi.IH_SRC_SHADER_ERROR {
					continue
				}
				addr := uint64(iv.Data[3])<<32 | uint64(iv.Data[2])
				if n++; iv.Data[0] != b.reason || iv.Data[1] != b.pc || addr != b.faultAddr(hostArgs, prog) {
					t.Errorf("IV reason %s pc %d address %#x, want %s pc %d address %#x", shaderErrName(iv.Data[0]), iv.Data[1], addr,
						shaderErrName(b.reason), b.pc, b.faultAddr(hostArgs, prog))
				}
			}
			if n != 1 {
				t.Errorf("%d shader-error IVs, want 1", n)
			}
			if r.Mem.Load32(hostFence) != 0 {
				t.Error("the fence after the failed dispatch was written")
			}
		})
	}
	for reason := uint32(abi.SHADER_ERR_ILLEGAL_INSTRUCTION); reason <= abi.SHADER_ERR_PROGRAM_FETCH; reason++ {
		if !seen[reason] {
			t.Errorf("no bad shader for %s", shaderErrName(reason))
		}
	}
}

// spinShader computes spinWant for every work-item.
func TestSpinShader(t *testing.T) {
	r, ring := hostRig(t)
	code, err := assemble(spinShader())
	if err != nil {
		t.Fatal(err)
	}
	putCode(r, hostProg, code)
	const steps, items = 300, 128
	r.Mem.Store64(hostArgs+spinArgOut, hostData)
	r.Mem.Store64(hostArgs+spinArgSteps, steps)
	sh := pm4.Shader{Program: hostProg, Slots: uint32(len(code) / 8), Threads: [3]uint32{32, 1, 1}, Stack: preemptStack, Args: hostArgs}
	runHost(t, r, ring, dispatch{sh: sh, grid: [3]uint32{items / 32, 1, 1}}, 1)
	for i := range uint64(items) {
		if got, want := r.Mem.Load64(hostData+8*i), spinWant(i, steps); got != want {
			t.Fatalf("out[%d] = %#x, want %#x", i, got, want)
		}
	}
	if spinWant(0, 0) != 1 || spinWant(0, 1) != lcgMul+lcgAdd {
		t.Fatal("spinWant's first steps")
	}
}

// The context save area holds the header and a workgroup per CU of the dispatch's shape.
func TestCSABytes(t *testing.T) {
	for _, c := range []struct{ cus, items, stack, want uint64 }{
		{1, 1, 8, 4096},
		{64, 64, 8, (64 + 64*(8+64*(104+8)) + 4095) &^ 4095},
		{8, 256, 512, (64 + 8*(8+256*(104+512)) + 4095) &^ 4095},
	} {
		if got := csaBytes(c.cus, c.items, c.stack); got != c.want || got%4096 != 0 {
			t.Errorf("csaBytes(%d, %d, %d) = %d, want %d", c.cus, c.items, c.stack, got, c.want)
		}
	}
}

// The event-log lines pair into latencies: a request and the unmap of its doorbell, for the
// PASID; a gap in the sequence or a reset drops the pair.
func TestMESLogLatencies(t *testing.T) {
	lines := []string{
		"  #10 kind 5 reason 2 slot 3 prio 0 db 0x402 vmid_pasid 0x0 rptr 0 t 1000",
		"  #11 kind 4 reason 2 slot 3 prio 0 db 0x402 vmid_pasid 0x20001 rptr 96 t 251000",
		"  #12 kind 5 reason 2 slot 4 prio 0 db 0x404 vmid_pasid 0x0 rptr 0 t 300000",
		"  #13 kind 4 reason 6 slot 4 prio 0 db 0x404 vmid_pasid 0x20001 rptr 96 t 310000", // reset
		"  #14 kind 5 reason 2 slot 5 prio 0 db 0x406 vmid_pasid 0x0 rptr 0 t 400000",
		"  #16 kind 4 reason 2 slot 5 prio 0 db 0x406 vmid_pasid 0x20001 rptr 96 t 500000", // after a gap
		"  #17 kind 5 reason 2 slot 6 prio 0 db 0x408 vmid_pasid 0x0 rptr 0 t 600000",
		"  #18 kind 4 reason 2 slot 6 prio 0 db 0x408 vmid_pasid 0x20002 rptr 96 t 700000", // another PASID
		"log: 19 events",
		"  #19 kind 4 reason 2 slot 6 prio 0 db 0x408 vmid_pasid 0x20001 rptr 96", // no time: not parsed
	}
	m := &mesLog{seen: map[uint64]mesEvent{}}
	for _, l := range lines {
		if e, ok := parseMESEvent(l); ok {
			m.seen[e.seq] = e
		}
	}
	if len(m.seen) != 8 {
		t.Fatalf("%d events parsed, want 8", len(m.seen))
	}
	got := m.preemptions(1)
	if want := (preemption{reason: 2, rptr: 96, took: 250 * time.Microsecond}); len(got) != 1 || got[0] != want {
		t.Fatalf("preemptions %+v, want [%+v]", got, want)
	}
}

// The debugfs lines the cases read parse as the driver prints them.
func TestDebugfsLines(t *testing.T) {
	st, err := parseQueueStates("client pid 1 pasid 7 vmid 2\n  userqs: 1, evictions 0\n" +
		"  queue 3: doorbell 0x404 priority normal_low state unmapped slot - vmid 2 maps 7 preempts 6 rptr 45 fence 45 last_signal 0 resets 0\n")
	if want := (queueState{state: "unmapped", rptr: 45, maps: 7, preempts: 6}); err != nil || len(st) != 1 || st[3] != want {
		t.Errorf("queue lines: %+v %v, want queue 3 %+v", st, err, want)
	}
	if _, err := parseQueueStates("  queue 4: maps x\n"); err == nil {
		t.Error("a queue line with a bad number parsed")
	}
	if e, ok := parseMESEvent("  #5 kind 4 reason 3 slot 2 prio 1 db 0x41e vmid_pasid 0x20007 rptr 35 t 99"); !ok ||
		e != (mesEvent{seq: 5, kind: 4, reason: 3, db: 0x41e, pasid: 7, rptr: 35, t: 99}) {
		t.Errorf("event line: %+v %v", e, ok)
	}
}
