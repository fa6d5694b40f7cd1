package shaders

import (
	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
)

// Shader is one of the project's shaders: its name (the C identifier's stem), what it does,
// its argument block (R1 at entry; 8-byte fields) and its instructions.
type Shader struct {
	Name  string
	Doc   string
	Args  []string // the argument block's 8-byte fields, in order
	Insns asm.Instructions
}

// All is every shader, in the header's order.
func All() []Shader {
	return []Shader{VectorAdd(), AtomicSum(), IDs2D(), SpinSum(), CopyHold()}
}

// VectorAdd: out[i] = a[i] + b[i] for 32-bit elements, i the global id in X.
func VectorAdd() Shader {
	return Shader{
		Name: "vector_add", Doc: "out[i] = a[i] + b[i] (u32), i = the global id in X.",
		Args: []string{"a", "b", "out"},
		Insns: asm.Instructions{
			asm.LSh.Imm(asm.R2, 2), // byte offset of element i
			asm.LoadMem(asm.R3, asm.R1, 0, asm.DWord),
			asm.LoadMem(asm.R4, asm.R1, 8, asm.DWord),
			asm.LoadMem(asm.R5, asm.R1, 16, asm.DWord),
			asm.Add.Reg(asm.R3, asm.R2),
			asm.Add.Reg(asm.R4, asm.R2),
			asm.Add.Reg(asm.R5, asm.R2),
			asm.LoadMem(asm.R3, asm.R3, 0, asm.Word),
			asm.LoadMem(asm.R4, asm.R4, 0, asm.Word),
			asm.Add.Reg32(asm.R3, asm.R4),
			asm.StoreMem(asm.R5, 0, asm.R3, asm.Word),
			asm.Return(),
		},
	}
}

// AtomicSum: *sum += in[i] for 32-bit elements, by a 64-bit atomic add per work-item.
func AtomicSum() Shader {
	return Shader{
		Name: "atomic_sum", Doc: "*sum (u64) += in[i] (u32) by an atomic add, i = the global id in X.",
		Args: []string{"in", "sum"},
		Insns: asm.Instructions{
			asm.LSh.Imm(asm.R2, 2),
			asm.LoadMem(asm.R3, asm.R1, 0, asm.DWord),
			asm.Add.Reg(asm.R3, asm.R2),
			asm.LoadMem(asm.R3, asm.R3, 0, asm.Word),
			asm.LoadMem(asm.R4, asm.R1, 8, asm.DWord),
			asm.AddAtomic.Mem(asm.R4, asm.R3, asm.DWord, 0),
			asm.Return(),
		},
	}
}

// IDs2D: out[y*width + x] = x | y<<16 | group id X << 24 (u32), through the id helpers, for a
// 2-D grid whose row width is the global size in X (num groups × local size).
func IDs2D() Shader {
	call := func(helper int32, dim int32) []asm.Instruction {
		return []asm.Instruction{asm.Mov.Imm(asm.R1, dim), asm.BuiltinFunc(helper).Call()}
	}
	var in asm.Instructions
	in = append(in, asm.Mov.Reg(asm.R9, asm.R1)) // keep the argument pointer
	in = append(in, call(abi.SHADER_HELPER_GLOBAL_ID, 0)...)
	in = append(in, asm.Mov.Reg(asm.R6, asm.R0))
	in = append(in, call(abi.SHADER_HELPER_GLOBAL_ID, 1)...)
	in = append(in, asm.Mov.Reg(asm.R7, asm.R0))
	in = append(in, call(abi.SHADER_HELPER_NUM_GROUPS, 0)...)
	in = append(in, asm.Mov.Reg(asm.R8, asm.R0))
	in = append(in, call(abi.SHADER_HELPER_LOCAL_SIZE, 0)...)
	in = append(in,
		asm.Mul.Reg(asm.R8, asm.R0), // width
		asm.Mul.Reg(asm.R8, asm.R7), // y*width
		asm.Add.Reg(asm.R8, asm.R6), // + x
		asm.LSh.Imm(asm.R8, 2),
		asm.LoadMem(asm.R5, asm.R9, 0, asm.DWord),
		asm.Add.Reg(asm.R5, asm.R8),
		asm.Mov.Reg(asm.R4, asm.R7),
		asm.LSh.Imm(asm.R4, 16),
		asm.Or.Reg(asm.R4, asm.R6),
	)
	in = append(in, call(abi.SHADER_HELPER_GROUP_ID, 0)...)
	in = append(in,
		asm.LSh.Imm(asm.R0, 24),
		asm.Or.Reg(asm.R4, asm.R0),
		asm.StoreMem(asm.R5, 0, asm.R4, asm.Word),
		asm.Return(),
	)
	return Shader{Name: "ids_2d", Doc: "out[y*width + x] = x | y << 16 | group id X << 24 (u32), through the id helpers.",
		Args: []string{"out"}, Insns: in}
}

// SpinSum: a long shader for preemption: x = 0, then loops times x += i+1; out[i] = x (u64),
// i the global id in X. loops = 2^64-1 is an endless shader (a preemptible one: it stops
// between any two instructions).
func SpinSum() Shader {
	return Shader{
		Name: "spin_sum", Doc: "out[i] (u64) = loops * (i+1), by loops additions, i = the global id in X (a long or endless shader).",
		Args: []string{"out", "loops"},
		Insns: asm.Instructions{
			asm.Mov.Reg(asm.R6, asm.R2),
			asm.Add.Imm(asm.R6, 1),
			asm.LoadMem(asm.R3, asm.R1, 8, asm.DWord),
			asm.Mov.Imm(asm.R4, 0),
			asm.JEq.Imm(asm.R3, 0, "done").WithSymbol("spin"),
			asm.Add.Reg(asm.R4, asm.R6),
			asm.Sub.Imm(asm.R3, 1),
			asm.Ja.Label("spin"),
			asm.LoadMem(asm.R5, asm.R1, 0, asm.DWord).WithSymbol("done"),
			asm.LSh.Imm(asm.R2, 3),
			asm.Add.Reg(asm.R5, asm.R2),
			asm.StoreMem(asm.R5, 0, asm.R4, asm.DWord),
			asm.Return(),
		},
	}
}

// CopyHold: out[i] = in[l] (u32), i the global id in X and l the local linear id, then the
// work-item sleeps hold_ms times 1 ms before it exits: a dispatch still in flight after its
// writes (the sanitizer's guest cases), whose every workgroup reads the same in[0..size).
func CopyHold() Shader {
	return Shader{
		Name: "copy_hold", Doc: "out[i] = in[l] (u32), i = the global id in X, l = the local linear id; then sleep hold_ms x 1 ms.",
		Args: []string{"in", "out", "hold_ms"},
		Insns: asm.Instructions{
			asm.Mov.Reg(asm.R6, asm.R1), // the argument pointer (a helper call sets R0 only, but keep R1 free)
			asm.LSh.Imm(asm.R5, 2),
			asm.LSh.Imm(asm.R2, 2),
			asm.LoadMem(asm.R3, asm.R6, 0, asm.DWord),
			asm.Add.Reg(asm.R3, asm.R5),
			asm.LoadMem(asm.R3, asm.R3, 0, asm.Word),
			asm.LoadMem(asm.R4, asm.R6, 8, asm.DWord),
			asm.Add.Reg(asm.R4, asm.R2),
			asm.StoreMem(asm.R4, 0, asm.R3, asm.Word),
			asm.LoadMem(asm.R7, asm.R6, 16, asm.DWord),
			asm.Mov.Imm(asm.R1, 1000000).WithSymbol("hold"), // 1 ms
			asm.JEq.Imm(asm.R7, 0, "done"),
			asm.BuiltinFunc(abi.SHADER_HELPER_SLEEP).Call(),
			asm.Sub.Imm(asm.R7, 1),
			asm.Ja.Label("hold"),
			asm.Return().WithSymbol("done"),
		},
	}
}
