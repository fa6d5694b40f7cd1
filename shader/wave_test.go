package shader

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
)

// waveProgram generates a program whose work-items touch only their own memory: R9 = base +
// 8·gid, and every load and store is a DWord at R9 + 8·n·k (n work-items, k 0..3), so work-item
// i's slots are i, i+n, i+2n, i+3n — consecutive across work-items, the coalesced case. Its
// ALU operations, forward branches (uniform or divergent, on the global id) and helper calls
// mix lockstep forms with ones that are not.
func waveProgram(r *rand.Rand, n int) asm.Instructions {
	regs := []asm.Register{asm.R0, asm.R3, asm.R4, asm.R5, asm.R6, asm.R7, asm.R8}
	reg := func() asm.Register { return regs[r.IntN(len(regs))] }
	p := asm.Instructions{
		asm.Mov.Reg(asm.R9, asm.R2), asm.LSh.Imm(asm.R9, 3), asm.Add.Reg(asm.R9, asm.R1),
		asm.Mov.Reg(asm.R3, asm.R2), asm.Mov.Imm(asm.R4, 7),
	}
	labels := 0
	for range 20 + r.IntN(30) {
		switch k := r.IntN(12); {
		case k < 5:
			ops := []func() asm.Instruction{
				func() asm.Instruction { return asm.Add.Reg(reg(), reg()) },
				func() asm.Instruction { return asm.Mul.Imm(reg(), int32(r.IntN(9))) },
				func() asm.Instruction { return asm.Xor.Reg(reg(), reg()) },
				func() asm.Instruction { return asm.LSh.Imm(reg(), int32(r.IntN(64))) },
				func() asm.Instruction { return asm.Add.Imm32(reg(), int32(r.Uint32())) },
				func() asm.Instruction { return asm.Sub.Reg(reg(), reg()) },
				func() asm.Instruction { return asm.ArSh.Imm(reg(), int32(r.IntN(64))) }, // no lockstep form
				func() asm.Instruction { return asm.Mov.Imm32(reg(), int32(r.Uint32())) },
				// Linear forms (base + i·stride) carried through, and the ones that end them.
				func() asm.Instruction { return asm.Mul.Reg(reg(), reg()) },
				func() asm.Instruction { return asm.Sub.Imm(reg(), int32(r.Uint32())) },
				func() asm.Instruction { return asm.Mov.Reg(reg(), reg()) },
				func() asm.Instruction { return asm.Mov.Reg32(reg(), reg()) },
				func() asm.Instruction { return asm.Add.Reg32(reg(), reg()) },
				func() asm.Instruction { return asm.RSh.Imm(reg(), int32(r.IntN(64))) },
				func() asm.Instruction { return asm.Or.Imm(reg(), int32(r.Uint32())) },
			}
			p = append(p, ops[r.IntN(len(ops))]())
		case k < 7:
			p = append(p, asm.LoadMem(reg(), asm.R9, int16(8*n*r.IntN(4)), asm.DWord))
		case k < 9:
			p = append(p, asm.StoreMem(asm.R9, int16(8*n*r.IntN(4)), reg(), asm.DWord))
		case k < 10:
			p = append(p, asm.LoadImm(reg(), int64(r.Uint64()), asm.DWord))
		case k < 11:
			// A forward branch on the global id (divergent when the threshold splits them)
			// or on a constant register (uniform).
			l := "skip" + string(rune('a'+labels))
			labels++
			src := asm.R2
			if r.IntN(2) == 0 {
				src = asm.R4
			}
			p = append(p, asm.JGE.Imm(src, int32(r.IntN(n+1)), l), asm.Add.Imm(reg(), 1), asm.Mov.Imm(asm.R0, 3).WithSymbol(l))
		default:
			p = append(p, asm.Mov.Imm(asm.R1, 0), asm.BuiltinFunc(abi.SHADER_HELPER_GLOBAL_ID).Call(),
				asm.LoadImm(asm.R1, memBase, asm.DWord))
		}
	}
	return append(p, asm.StoreMem(asm.R9, 0, asm.R0, asm.DWord), asm.Return())
}

// runAlone runs each work-item to its end by itself; runWave starts them in lockstep and
// finishes whatever left the wave alone, in rounds, as a compute unit does.
func runAlone(t *testing.T, p *Program, mem *flatMem, n int) []*Lane {
	ls := lanes(p, mem, n)
	for _, l := range ls {
		if st, err := l.Run(^uint64(0)); st != Exited || err != nil {
			t.Fatalf("alone: %v %v", st, err)
		}
	}
	return ls
}

func runWave(t *testing.T, p *Program, mem *flatMem, n int, budget uint64, fromEntry bool) []*Lane {
	ls := lanes(p, mem, n)
	if fromEntry {
		// As a compute unit starts a new workgroup: the entry registers in linear form.
		w := NewWave()
		w.Start(p, mem, n)
		w.SetLinear(abi.SHADER_REG_ARGS, memBase, 0)
		w.SetLinear(abi.SHADER_REG_GLOBAL_X, 0, 1)
		w.SetLinear(abi.SHADER_REG_LOCAL_LINEAR, 0, 1)
		st := w.Run(budget)
		w.Scatter(ls)
		if st == Exited {
			return ls
		}
	} else if RunWave(ls, budget) == Exited {
		return ls
	}
	exited := make([]bool, n)
	for range 1000 {
		done := true
		for i, l := range ls {
			if exited[i] {
				continue
			}
			st, err := l.Run(budget)
			if err != nil {
				t.Fatalf("lane: %v", err)
			}
			exited[i] = st == Exited
			done = done && exited[i]
		}
		if done {
			return ls
		}
	}
	t.Fatal("work-items did not finish")
	return nil
}

func lanes(p *Program, mem *flatMem, n int) []*Lane {
	ls := make([]*Lane, n)
	for i := range ls {
		d := Dims{Global: [3]uint64{uint64(i)}, LocalSize: [3]uint64{uint64(n), 1, 1}, NumGroups: [3]uint64{1, 1, 1},
			Local: [3]uint64{uint64(i)}, Linear: uint64(i)}
		ls[i] = NewLane(p, mem, nil, memBase, d, make([]byte, 64))
	}
	return ls
}

// TestWaveMatchesAlone: lockstep execution gives every work-item the registers, instruction
// count and memory it gets running alone, over generated programs.
func TestWaveMatchesAlone(t *testing.T) {
	for seed := range uint64(1000) {
		r := rand.New(rand.NewPCG(seed, 7))
		n := 1 + r.IntN(40)
		insns := waveProgram(r, n)
		p, _, err := Build(insns)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		memA := &flatMem{base: memBase, b: make([]byte, 32*n+64)}
		for i := range memA.b {
			memA.b[i] = byte(i * 13)
		}
		budget := uint64(1 + r.IntN(200))
		memW := &flatMem{base: memBase, b: bytes.Clone(memA.b)}
		memE := &flatMem{base: memBase, b: bytes.Clone(memA.b)}
		alone := runAlone(t, p, memA, n)
		for _, way := range []struct {
			name string
			mem  *flatMem
			ls   []*Lane
		}{
			{"wave from Lanes", memW, runWave(t, p, memW, n, budget, false)},
			{"wave from the entry", memE, runWave(t, p, memE, n, budget, true)},
		} {
			for i := range alone {
				if alone[i].Regs != way.ls[i].Regs || alone[i].Executed != way.ls[i].Executed {
					t.Fatalf("seed %d work-item %d: alone %x (%d insns), %s %x (%d insns)\n%v", seed, i,
						alone[i].Regs, alone[i].Executed, way.name, way.ls[i].Regs, way.ls[i].Executed, insns)
				}
			}
			if !bytes.Equal(memA.b, way.mem.b) {
				t.Fatalf("seed %d: %s: memory differs\n%v", seed, way.name, insns)
			}
		}
	}
}

// A wave whose coalesced load faults leaves it with nothing written, and the work-items'
// own Runs name the fault.
func TestWaveFaultFallsBack(t *testing.T) {
	p, _, err := Build(asm.Instructions{
		asm.LSh.Imm(asm.R2, 3),
		asm.Add.Reg(asm.R2, asm.R1),
		asm.LoadMem(asm.R0, asm.R2, 0, asm.DWord),
		asm.Return(),
	})
	if err != nil {
		t.Fatal(err)
	}
	mem := &flatMem{base: memBase, b: make([]byte, 8*4)} // room for 4 of the 8 work-items
	ls := lanes(p, mem, 8)
	if st := RunWave(ls, ^uint64(0)); st != Yielded || ls[0].PC != 2 || ls[0].Regs[0] != 0 {
		t.Fatalf("wave stop %v pc %d R0 %d: want it to leave at the load with nothing loaded", st, ls[0].PC, ls[0].Regs[0])
	}
	for i, l := range ls {
		st, err := l.Run(^uint64(0))
		if want := i < 4; (st == Exited) != want {
			t.Fatalf("work-item %d: %v %v", i, st, err)
		}
	}
}
