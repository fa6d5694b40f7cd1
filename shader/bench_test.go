package shader

import (
	"testing"

	"github.com/cilium/ebpf/asm"
)

// aluLoop is an ALU-bound shader: iters iterations of eight dependent-free ALU operations and
// the loop's own two, on registers only (R1 the counter).
func aluLoop(iters int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R1, iters),
		asm.Mov.Imm(asm.R2, 1),
		asm.Mov.Imm(asm.R3, 2),
		asm.Mov.Imm(asm.R4, 3),
		asm.Mov.Imm(asm.R5, 4),
		asm.Add.Reg(asm.R2, asm.R3).WithSymbol("loop"),
		asm.Xor.Reg(asm.R3, asm.R4),
		asm.Mul.Imm(asm.R4, 3),
		asm.LSh.Imm(asm.R5, 1),
		asm.Sub.Reg(asm.R5, asm.R2),
		asm.Or.Imm32(asm.R3, 5),
		asm.Add.Imm(asm.R4, 7),
		asm.RSh.Imm(asm.R2, 1),
		asm.Sub.Imm(asm.R1, 1),
		asm.JNE.Imm(asm.R1, 0, "loop"),
		asm.Mov.Reg(asm.R0, asm.R2),
		asm.Add.Reg(asm.R0, asm.R5),
		asm.Return(),
	}
}

// aluLoopGo is aluLoop in Go: the same-run baseline of the instruction rate.
func aluLoopGo(iters int32) uint64 {
	r1, r2, r3, r4, r5 := uint64(iters), uint64(1), uint64(2), uint64(3), uint64(4)
	for {
		r2 += r3
		r3 ^= r4
		r4 *= 3
		r5 <<= 1
		r5 -= r2
		r3 = uint64(uint32(r3) | 5)
		r4 += 7
		r2 >>= 1
		r1--
		if r1 == 0 {
			break
		}
	}
	return r2 + r5
}

// vectorAddShader: out[i] = a[i] + b[i] for the work-item's global id i; the argument block
// at R1 holds the three array addresses.
func vectorAddShader() asm.Instructions {
	return asm.Instructions{
		asm.LSh.Imm(asm.R2, 3),                     // byte offset of element i (8-byte elements)
		asm.LoadMem(asm.R3, asm.R1, 0, asm.DWord),  // &a
		asm.LoadMem(asm.R4, asm.R1, 8, asm.DWord),  // &b
		asm.LoadMem(asm.R5, asm.R1, 16, asm.DWord), // &out
		asm.Add.Reg(asm.R3, asm.R2),
		asm.Add.Reg(asm.R4, asm.R2),
		asm.Add.Reg(asm.R5, asm.R2),
		asm.LoadMem(asm.R3, asm.R3, 0, asm.DWord),
		asm.LoadMem(asm.R4, asm.R4, 0, asm.DWord),
		asm.Add.Reg(asm.R3, asm.R4),
		asm.StoreMem(asm.R5, 0, asm.R3, asm.DWord),
		asm.Return(),
	}
}

func TestALULoopMatchesGo(t *testing.T) {
	for _, n := range []int32{1, 2, 1000} {
		l, st, err := run(t, aluLoop(n), nil, ^uint64(0))
		if err != nil || st != Exited {
			t.Fatalf("stop %v err %v", st, err)
		}
		if want := aluLoopGo(n); l.Regs[0] != want {
			t.Errorf("%d iterations: R0 %#x, Go %#x", n, l.Regs[0], want)
		}
		if want := uint64(5 + 10*n + 3); l.Executed != want {
			t.Errorf("%d iterations: executed %d, want %d", n, l.Executed, want)
		}
	}
}

// BenchmarkALU reports the interpreter's instruction rate on the ALU-bound shader beside the
// same computation in Go (Mops/s of shader instructions, and the Go loop's iterations as
// "instructions" at the same count).
func BenchmarkALU(b *testing.B) {
	const iters = 1 << 20
	p, _, err := Build(aluLoop(iters))
	if err != nil {
		b.Fatal(err)
	}
	l := NewLane(p, nil, nil, 0, Dims{}, make([]byte, 8))
	b.Run("shader", func(b *testing.B) {
		var n uint64
		for range b.N {
			l.Reset(p, nil, nil, 0, Dims{}, l.Stack)
			if st, err := l.Run(^uint64(0)); st != Exited || err != nil {
				b.Fatal(st, err)
			}
			n += l.Executed
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds()/1e6, "Minsn/s")
	})
	b.Run("go", func(b *testing.B) {
		var sink uint64
		for range b.N {
			sink += aluLoopGo(iters)
		}
		b.ReportMetric(float64(b.N)*float64(5+10*iters+3)/b.Elapsed().Seconds()/1e6, "Minsn/s")
		_ = sink
	})
}
