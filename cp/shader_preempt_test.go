package cp_test

import (
	"errors"
	"testing"
	"time"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
	"vgpu/compute"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
)

// Instruction-level preemption of mapped queues' shader dispatches (shader_save.go).
const (
	csaVA   = 0x300000
	csaSize = 0x40000
	ppLoops = 20000 // iterations per work-item
	ppItems = 8     // work-items per workgroup
	ppWGs   = 4     // workgroups
)

// countLoop: out[global id x] += 1 (a 64-bit atomic), loops times. An instruction run twice
// (or skipped) across a preemption shows as a count other than loops; loops < 0: forever.
func countLoop(loops int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R6, loops),
		asm.LoadImm(asm.R7, shOut, asm.DWord),
		asm.Mov.Reg(asm.R8, asm.R2),
		asm.LSh.Imm(asm.R8, 3),
		asm.Add.Reg(asm.R7, asm.R8),
		asm.Mov.Imm(asm.R8, 1),
		asm.JEq.Imm(asm.R6, 0, "end").WithSymbol("spin"),
		asm.AddAtomic.Mem(asm.R7, asm.R8, asm.DWord, 0),
		asm.Sub.Imm(asm.R6, 1),
		asm.Ja.Label("spin"),
		asm.Return().WithSymbol("end"),
	}
}

// preemptRig is a mapped-queue rig with two compute units.
func preemptRig(t *testing.T) (*cptest.Rig, *compute.Pool) {
	var pool *compute.Pool
	r, _, _ := mapRig(t, func(c *cp.Config) {
		pool = compute.New(compute.Config{CUs: 2, Memory: c.Memory, Interrupts: c.Interrupts, Budget: 256})
		c.Compute = pool
	})
	t.Cleanup(pool.Close)
	return r, pool
}

// countRing writes the long dispatch and a fence after it to ring 1; it returns the wptr.
func countRing(t *testing.T, r *cptest.Rig, loops int32) uint64 {
	sh := putProgram(t, r, countLoop(loops), [3]uint32{ppItems, 1, 1})
	ring := guestRing(r, 1)
	ring.Emit(sh.Encode(), pm4.DispatchDirect(ppWGs, 1, 1), pm4.Fence(shFence, 1, 0, false))
	return ring.Wptr()
}

func csaImage() cp.Image {
	img := ringImage(1)
	img.CSABase, img.CSASize = csaVA, csaSize
	return img
}

// running waits until the dispatch has visibly started and not finished.
func running(t *testing.T, r *cptest.Rig) {
	t.Helper()
	cptest.Eventually(t, "the shader to run", func() bool { return r.Mem.Load32(shOut) != 0 })
}

func preemptNow(t *testing.T, r *cptest.Rig, slot int) (cp.Image, cp.StopState) {
	t.Helper()
	r.CP.Preempt(slot)
	return waitStopped(t, r, slot)
}

func wantCounts(t *testing.T, r *cptest.Rig) {
	t.Helper()
	for i := range ppItems * ppWGs {
		if got := r.Mem.Load64(shOut + 8*uint64(i)); got != ppLoops {
			t.Fatalf("out[%d] = %d, want %d", i, got, ppLoops)
		}
	}
}

// A dispatch preempted mid-shader again and again, each time remapped in another slot,
// completes with the results and the instruction count of an uninterrupted run.
func TestShaderPreemptResumeElsewhere(t *testing.T) {
	// The uninterrupted run, on a register queue of its own rig.
	base, ring, basePool := shaderRig(t, 1)
	sh := putProgram(t, base, countLoop(ppLoops), [3]uint32{ppItems, 1, 1})
	ring.Submit(sh.Encode(), pm4.DispatchDirect(ppWGs, 1, 1), pm4.Fence(shFence, 1, 0, false))
	cptest.Eventually(t, "the uninterrupted run", func() bool { return base.Mem.Load32(shFence) == 1 })
	wantCounts(t, base)
	want := basePool.Stats().Instructions

	r, pool := preemptRig(t)
	w := countRing(t, r, ppLoops)
	img := csaImage()
	slots := []int{1, 5, 3, 6}
	saves := 0
	for i := 0; ; i++ {
		slot := slots[i%len(slots)]
		mustMap(t, r, slot, img)
		r.CP.Kick(slot, w)
		if i == 0 {
			running(t, r)
		} else {
			time.Sleep(2 * time.Millisecond)
		}
		var st cp.StopState
		img, st = preemptNow(t, r, slot)
		if st != cp.Preempted {
			t.Fatalf("round %d: stopped as %v (error %d)", i, st, img.Error)
		}
		r.CP.Release(slot)
		if len(img.Exec.Dispatches) == 0 {
			break
		}
		saves++
		d := img.Exec.Dispatches[0]
		if d.Program != progAddr || d.Groups != [3]uint32{ppWGs, 1, 1} || d.GroupSize != [3]uint32{ppItems, 1, 1} ||
			d.CSAOffset != 0 || d.CSABytes < abi.SHADER_CSA_HEADER_BYTES || r.Mem.Load32(csaVA) != abi.SHADER_CSA_MAGIC {
			t.Fatalf("round %d: saved dispatch %+v, CSA magic %#x", i, d, r.Mem.Load32(csaVA))
		}
		if r.Mem.Load32(shFence) != 0 {
			t.Fatal("the fence after the dispatch was written while it was saved")
		}
		if saves == 20 {
			break // enough: the last map runs it to the end
		}
	}
	// The last map may have finished it before its preemption: wait for the fence.
	slot := slots[0]
	mustMap(t, r, slot, img)
	r.CP.Kick(slot, w)
	waitDone(t, r, slot, w)
	if r.Mem.Load32(shFence) != 1 {
		t.Fatal("no fence")
	}
	wantCounts(t, r)
	if got := pool.Stats().Instructions; got != want {
		t.Errorf("%d instructions executed across %d preemptions, want %d (the uninterrupted run's)", got, saves, want)
	}
	t.Logf("%d preemptions caught the dispatch in flight; %d instructions", saves, want)
	if saves == 0 {
		t.Error("no preemption caught the dispatch in flight: the test shows nothing")
	}
	s := r.CP.Stats()
	if s.ShaderPreempts != uint64(saves) || s.ShaderResumes != uint64(saves) {
		t.Errorf("ShaderPreempts %d ShaderResumes %d, want %d", s.ShaderPreempts, s.ShaderResumes, saves)
	}
}

// An endless shader is preemptible: its queue stops within the bound and is saved.
func TestShaderPreemptEndless(t *testing.T) {
	r, _ := preemptRig(t)
	w := countRing(t, r, -1)
	mustMap(t, r, 1, csaImage())
	r.CP.Kick(1, w)
	running(t, r)
	if st := r.CP.Queue(1).State; st == abi.HQD_STATE_BUSY_KERNEL {
		t.Errorf("a mapped queue waiting for its shader shows BUSY_KERNEL")
	}
	img, st := preemptNow(t, r, 1)
	if st != cp.Preempted || len(img.Exec.Dispatches) != 1 {
		t.Fatalf("stopped as %v with %d saved dispatches", st, len(img.Exec.Dispatches))
	}
	r.CP.Release(1)
	mustMap(t, r, 2, img)
	r.CP.Kick(2, w)
	before := r.Mem.Load64(shOut)
	cptest.Eventually(t, "the resumed shader to run", func() bool { return r.Mem.Load64(shOut) != before })
	r.CP.Kill(2)
	if _, st := r.CP.Saved(2); st != cp.Killed {
		t.Fatalf("after Kill: %v", st)
	}
}

// Saving and restoring fail with CP_ERROR_CONTEXT_SAVE and the reason.
func TestShaderPreemptErrors(t *testing.T) {
	cases := []struct {
		name   string
		size   uint64              // CSA size at the preemption
		spoil  func(r *cptest.Rig) // between the save and the map
		reason uint32
		addr   uint64
	}{
		{"no context save area", 0, nil, abi.SHADER_CSA_ERR_TOO_SMALL, csaVA},
		{"too small", abi.SHADER_CSA_HEADER_BYTES + 8, nil, abi.SHADER_CSA_ERR_TOO_SMALL, csaVA},
		{"corrupt magic", csaSize, func(r *cptest.Rig) { r.Mem.Store32(csaVA, 0x12345678) }, abi.SHADER_CSA_ERR_CORRUPT, csaVA},
		{"shape changed", csaSize, func(r *cptest.Rig) { r.Mem.Store32(csaVA+4*abi.SHADER_CSA_DW_TOTAL, 9) }, abi.SHADER_CSA_ERR_CORRUPT, csaVA},
		{"pc outside the program", csaSize, func(r *cptest.Rig) {
			r.Mem.Store32(csaVA+abi.SHADER_CSA_HEADER_BYTES+abi.SHADER_CSA_GROUP_BYTES+88, 5000)
		}, abi.SHADER_CSA_ERR_CORRUPT, csaVA},
		{"program changed", csaSize, func(r *cptest.Rig) { r.Mem.Store32(progAddr+8*3+4, 4) }, abi.SHADER_CSA_ERR_PROGRAM_CHANGED, progAddr},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := preemptRig(t)
			w := countRing(t, r, -1)
			img := csaImage()
			img.CSASize = tc.size
			mustMap(t, r, 1, img)
			r.CP.Kick(1, w)
			running(t, r)
			saved, st := preemptNow(t, r, 1)
			slot := 1
			if tc.spoil != nil {
				if st != cp.Preempted {
					t.Fatalf("stopped as %v (error %d), want preempted", st, saved.Error)
				}
				r.CP.Release(1)
				tc.spoil(r)
				slot = 4
				mustMap(t, r, slot, saved)
				r.CP.Kick(slot, w)
				cptest.Eventually(t, "the halt", func() bool { return r.CP.Queue(slot).State == abi.HQD_STATE_HALTED })
				saved, st = waitStopped(t, r, slot)
			}
			q := r.CP.Queue(slot)
			if st != cp.Halted || saved.Error != abi.CP_ERROR_CONTEXT_SAVE || q.ErrorInfo != tc.reason || q.ErrorAddr != tc.addr {
				t.Fatalf("%v, error %d info %d at %#x; want halted, CONTEXT_SAVE, %d at %#x", st, saved.Error, q.ErrorInfo, q.ErrorAddr, tc.reason, tc.addr)
			}
		})
	}
}

// Map refuses an image whose saved dispatches do not fit its context save area or a
// dispatch's limits.
func TestShaderPreemptBadImage(t *testing.T) {
	good := cp.SavedDispatch{Program: progAddr, Slots: 4, Groups: [3]uint32{1, 1, 1}, GroupSize: [3]uint32{1, 1, 1},
		CSABytes: abi.SHADER_CSA_HEADER_BYTES}
	cases := []struct {
		name string
		edit func(img *cp.Image)
	}{
		{"past the CSA", func(img *cp.Image) { img.Exec.Dispatches[0].CSAOffset = csaSize - 8 }},
		{"no CSA", func(img *cp.Image) { img.CSASize = 0 }},
		{"CSA wraps", func(img *cp.Image) { img.CSABase, img.CSASize = ^uint64(0)-8, 64 }},
		{"no program", func(img *cp.Image) { img.Exec.Dispatches[0].Slots = 0 }},
		{"empty workgroup", func(img *cp.Image) { img.Exec.Dispatches[0].GroupSize[1] = 0 }},
		{"bad stack", func(img *cp.Image) { img.Exec.Dispatches[0].Stack = 12 }},
		{"too many", func(img *cp.Image) {
			for len(img.Exec.Dispatches) <= cp.MaxSavedDispatches {
				img.Exec.Dispatches = append(img.Exec.Dispatches, good)
			}
		}},
	}
	r, _ := preemptRig(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			img := csaImage()
			img.Exec.Dispatches = []cp.SavedDispatch{good}
			tc.edit(&img)
			if err := r.CP.Map(1, img); !errors.Is(err, cp.ErrBadImage) {
				t.Fatalf("Map: %v, want ErrBadImage", err)
			}
		})
	}
}
