package cp_test

import (
	"testing"
	"time"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
	"vgpu/compute"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
	"vgpu/shader"
)

// Shader dispatches through the CP: the rig's CP gets a compute pool over the same memory.
const (
	progAddr  = 0x200000 // programs (256-byte aligned)
	shArgs    = 0x210000 // argument block
	shOut     = 0x220000 // results
	shFence   = 0x230000
	shMarker  = 0x230100
	shIndDims = 0x230200
	shFlag    = 0x230300
)

func shaderRig(t *testing.T, slot int) (*cptest.Rig, *cptest.Ring, *compute.Pool) {
	t.Helper()
	var pool *compute.Pool
	r, ring := start(t, slot, func(c *cp.Config) {
		pool = compute.New(compute.Config{CUs: 2, Memory: c.Memory, Interrupts: c.Interrupts, Budget: 512})
		c.Compute = pool
	})
	t.Cleanup(pool.Close)
	return r, ring, pool
}

// putProgram builds insns into memory at progAddr and returns the SH state for it.
func putProgram(t *testing.T, r *cptest.Rig, insns asm.Instructions, threads [3]uint32) pm4.Shader {
	t.Helper()
	linked, err := shader.Link(insns)
	if err != nil {
		t.Fatal(err)
	}
	code, err := shader.Assemble(linked) // not loaded: a test may put a program the device refuses
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(code); i += 4 {
		r.Mem.Store32(progAddr+uint64(i), uint32(code[i])|uint32(code[i+1])<<8|uint32(code[i+2])<<16|uint32(code[i+3])<<24)
	}
	return pm4.Shader{Program: progAddr, Slots: uint32(len(code) / 8), Threads: threads, Args: shArgs}
}

// storeID: out[global id x] = global id x + 1 (4-byte elements), after spinning loops
// iterations (a long shader when loops is large).
func storeID(loops int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R6, loops),
		asm.JEq.Imm(asm.R6, 0, "store").WithSymbol("spin"),
		asm.Sub.Imm(asm.R6, 1),
		asm.Ja.Label("spin"),
		asm.LoadImm(asm.R7, shOut, asm.DWord).WithSymbol("store"),
		asm.Mov.Reg(asm.R8, asm.R2),
		asm.LSh.Imm(asm.R8, 2),
		asm.Add.Reg(asm.R7, asm.R8),
		asm.Mov.Reg(asm.R9, asm.R2),
		asm.Add.Imm(asm.R9, 1),
		asm.StoreMem(asm.R7, 0, asm.R9, asm.Word),
		asm.Return(),
	}
}

func wantOut(t *testing.T, r *cptest.Rig, n int) {
	t.Helper()
	for i := range n {
		if got := r.Mem.Load32(shOut + 4*uint64(i)); got != uint32(i+1) {
			t.Fatalf("out[%d] = %d, want %d", i, got, i+1)
		}
	}
}

// The fence after a dispatch is written only once every work-item's store is.
func TestShaderDispatchFence(t *testing.T) {
	r, ring, _ := shaderRig(t, 1)
	sh := putProgram(t, r, storeID(2000), [3]uint32{64, 1, 1})
	ring.Submit(sh.Encode(), pm4.DispatchDirect(8, 1, 1), pm4.Fence(shFence, 1, 0, false))
	cptest.Eventually(t, "the fence", func() bool { return r.Mem.Load32(shFence) == 1 })
	wantOut(t, r, 8*64) // every result is there when the fence is
	ring.WaitIdle(t)
	if n := r.CP.Stats().ShaderDispatches; n != 1 {
		t.Errorf("%d shader dispatches counted", n)
	}
}

// gatedStore: each work-item waits until the flag (read with an atomic ADD of 0, at the L2 —
// a plain load would spin on its L0 line for ever — which writes nothing) is non-zero, then
// stores its id as storeID does.
func gatedStore() asm.Instructions {
	return asm.Instructions{
		asm.LoadImm(asm.R6, shFlag, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("spin"),
		asm.FetchAdd.Mem(asm.R6, asm.R0, asm.Word, 0),
		asm.JEq.Imm(asm.R0, 0, "spin"),
		asm.LoadImm(asm.R7, shOut, asm.DWord),
		asm.Mov.Reg(asm.R8, asm.R2),
		asm.LSh.Imm(asm.R8, 2),
		asm.Add.Reg(asm.R7, asm.R8),
		asm.Mov.Reg(asm.R9, asm.R2),
		asm.Add.Imm(asm.R9, 1),
		asm.StoreMem(asm.R7, 0, asm.R9, asm.Word),
		asm.Return(),
	}
}

// The CP goes on with the next packets while a dispatch runs; CS_PARTIAL_FLUSH waits for it.
// The dispatch waits for a flag the test sets once it has seen what it checks, so the order is
// the device's, not the host's speed.
func TestShaderDispatchIsAsynchronous(t *testing.T) {
	r, ring, _ := shaderRig(t, 1)
	sh := putProgram(t, r, gatedStore(), [3]uint32{4, 1, 1})
	ring.Submit(sh.Encode(), pm4.DispatchDirect(2, 1, 1), pm4.WriteMem(shMarker, 7),
		pm4.CSPartialFlush(), pm4.WriteMem(shMarker+4, 9))
	cptest.Eventually(t, "the packet after the dispatch", func() bool { return r.Mem.Load32(shMarker) == 7 })
	cptest.Eventually(t, "BUSY_KERNEL while CS_PARTIAL_FLUSH waits for the dispatch", func() bool {
		return r.CP.Stats().Queues[1].State == abi.HQD_STATE_BUSY_KERNEL
	})
	if r.Mem.Load32(shOut) != 0 || r.Mem.Load32(shMarker+4) == 9 {
		t.Fatal("the dispatch ended, or the packet after CS_PARTIAL_FLUSH ran, before the flag was set")
	}
	r.Mem.Store32(shFlag, 1)
	cptest.Eventually(t, "the flush", func() bool { return r.Mem.Load32(shMarker+4) == 9 })
	wantOut(t, r, 8)
}

func TestShaderDispatchIndirect(t *testing.T) {
	r, ring, _ := shaderRig(t, 1)
	sh := putProgram(t, r, storeID(0), [3]uint32{16, 1, 1})
	r.Mem.StoreDwords(shIndDims+8, []uint32{3, 1, 1})
	ring.Submit(sh.Encode(), pm4.SetBase(shIndDims), pm4.DispatchIndirect(8), pm4.Fence(shFence, 2, 0, false))
	cptest.Eventually(t, "the fence", func() bool { return r.Mem.Load32(shFence) == 2 })
	wantOut(t, r, 48)
	if r.Mem.Load32(shOut+4*48) != 0 {
		t.Error("more work-items ran than the indirect dimensions say")
	}
}

// A shader error halts the queue with CP_ERROR_SHADER naming the instruction and the reason,
// with one IV: the compute units' IH_SRC_SHADER_ERROR.
func TestShaderErrorHaltsQueue(t *testing.T) {
	cases := []struct {
		name   string
		insns  asm.Instructions
		reason uint32
		pc     int
	}{
		{"misaligned store at run time", asm.Instructions{
			asm.Mov.Imm(asm.R0, 0), asm.StoreMem(asm.R1, 2, asm.R0, asm.Word), asm.Return()}, abi.SHADER_ERR_MISALIGNED, 1},
		{"illegal instruction at load", asm.Instructions{
			asm.Mov.Imm(asm.R0, 0), asm.Instruction{OpCode: asm.LoadAbsOp(asm.Word)}, asm.Return()}, abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, ring, _ := shaderRig(t, 2)
			sh := putProgram(t, r, c.insns, [3]uint32{1, 1, 1})
			ring.Submit(sh.Encode(), pm4.DispatchDirect(1, 1, 1), pm4.Fence(shFence, 1, 0, false))
			if code := ring.WaitHalt(t); code != abi.CP_ERROR_SHADER {
				t.Fatalf("halted with %d, want CP_ERROR_SHADER", code)
			}
			addr, info := errorRegs(r, 2)
			if addr != progAddr+8*uint64(c.pc) || info != c.reason {
				t.Fatalf("ERROR_ADDR %#x ERROR_INFO %d, want %#x %d", addr, info, progAddr+8*uint64(c.pc), c.reason)
			}
			ivs := r.IVs.All()
			if len(ivs) != 1 || ivs[0].Source != abi.IH_SRC_SHADER_ERROR || ivs[0].Data[0] != c.reason || ivs[0].Data[1] != uint32(c.pc) {
				t.Fatalf("IVs %+v", ivs)
			}
			if r.Mem.Load32(shFence) != 0 {
				t.Fatal("the fence after the failed dispatch was written")
			}
		})
	}
}

// A dequeue reset kills an endless shader: the queue stops, and the shader writes nothing
// afterwards.
func TestResetKillsEndlessShader(t *testing.T) {
	r, ring, _ := shaderRig(t, 1)
	sh := putProgram(t, r, asm.Instructions{
		asm.LoadImm(asm.R6, shOut, asm.DWord),
		asm.Add.Imm(asm.R0, 1).WithSymbol("l"),
		asm.StoreMem(asm.R6, 0, asm.R0, asm.Word),
		asm.Ja.Label("l"),
	}, [3]uint32{1, 1, 1})
	ring.Submit(sh.Encode(), pm4.DispatchDirect(1, 1, 1), pm4.Fence(shFence, 1, 0, false))
	cptest.Eventually(t, "the shader running", func() bool { return r.Mem.Load32(shOut) > 100 })
	ring.Dequeue(abi.HQD_DEQUEUE_RESET)
	r.WaitInactive(t, 1)
	before := r.Mem.Load32(shOut)
	time.Sleep(5 * time.Millisecond)
	if after := r.Mem.Load32(shOut); after != before {
		t.Fatalf("the shader kept writing after the reset (%d → %d)", before, after)
	}
	if r.Mem.Load32(shFence) != 0 {
		t.Fatal("the fence was written")
	}
}

// Without compute units a shader dispatch is a bad packet.
func TestShaderWithoutComputeUnits(t *testing.T) {
	r, ring := start(t, 1)
	sh := putProgram(t, r, storeID(0), [3]uint32{1, 1, 1})
	ring.Submit(sh.Encode(), pm4.DispatchDirect(1, 1, 1))
	if code := ring.WaitHalt(t); code != abi.CP_ERROR_BAD_PACKET {
		t.Fatalf("halted with %d, want CP_ERROR_BAD_PACKET", code)
	}
}

// A queue never has more than MaxSavedDispatches dispatches in flight: the next DISPATCH waits
// for the oldest (guest-driven work stays bounded), and every dispatch still completes.
func TestShaderDispatchesBounded(t *testing.T) {
	r, ring, pool := shaderRig(t, 1)
	sh := putProgram(t, r, gatedStore(), [3]uint32{1, 1, 1})
	ring.Emit(sh.Encode())
	for range cp.MaxSavedDispatches + 8 {
		ring.Emit(pm4.DispatchDirect(1, 1, 1))
	}
	ring.Submit(pm4.WriteMem(shMarker, 7))
	cptest.Eventually(t, "the queue waiting on its full dispatch list", func() bool {
		return pool.Stats().Dispatches >= cp.MaxSavedDispatches
	})
	time.Sleep(2 * time.Millisecond)
	if n := pool.Stats().Dispatches; n != cp.MaxSavedDispatches {
		t.Fatalf("%d dispatches started while none could end, want %d", n, cp.MaxSavedDispatches)
	}
	r.Mem.Store32(shFlag, 1)
	cptest.Eventually(t, "the packet after the dispatches", func() bool { return r.Mem.Load32(shMarker) == 7 })
	if n := pool.Stats().Dispatches; n != cp.MaxSavedDispatches+8 {
		t.Fatalf("%d dispatches ran, want %d", n, cp.MaxSavedDispatches+8)
	}
}
