package main

import (
	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
)

// The long shader of shader_preempt: each work-item runs a 64-bit LCG for a number of steps
// from its own seed and stores the result, so a work-item that resumed in the wrong state
// (a register, the loop count, the program counter) stores a different value.
const (
	lcgMul = 6364136223846793005
	lcgAdd = 1442695040888963407
)

// spinArgs are spinShader's argument block: out (u64 per work-item), steps.
const (
	spinArgOut   = 0
	spinArgSteps = 8
)

// spinShader: x = global id X + 1, then steps times x = x*lcgMul + lcgAdd; out[id] = x.
// Five instructions a step, a taken backward jump (a preemption point) in each.
func spinShader() asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R6, asm.R1, spinArgSteps, asm.DWord),
		asm.Mov.Reg(asm.R7, asm.R2),
		asm.Add.Imm(asm.R7, 1),
		asm.LoadImm(asm.R8, lcgMul, asm.DWord),
		asm.LoadImm(asm.R9, lcgAdd, asm.DWord),
		asm.JEq.Imm(asm.R6, 0, "store").WithSymbol("loop"),
		asm.Mul.Reg(asm.R7, asm.R8),
		asm.Add.Reg(asm.R7, asm.R9),
		asm.Sub.Imm(asm.R6, 1),
		asm.Ja.Label("loop"),
		asm.LoadMem(asm.R3, asm.R1, spinArgOut, asm.DWord).WithSymbol("store"),
		asm.LSh.Imm(asm.R2, 3),
		asm.Add.Reg(asm.R3, asm.R2),
		asm.StoreMem(asm.R3, 0, asm.R7, asm.DWord),
		asm.Return(),
	}
}

// spinWant is what spinShader stores for work-item id.
func spinWant(id, steps uint64) uint64 {
	x := id + 1
	for range steps {
		x = x*lcgMul + lcgAdd
	}
	return x
}

// csaBytes is the context save area a dispatch of groupSize work-items with stack bytes each
// needs when cus workgroups are in flight (docs/shader.md), in whole pages.
func csaBytes(cus, groupSize, stack uint64) uint64 {
	n := uint64(abi.SHADER_CSA_HEADER_BYTES) + cus*(abi.SHADER_CSA_GROUP_BYTES+groupSize*(abi.SHADER_CSA_ITEM_BYTES+stack))
	return (n + 4095) &^ 4095
}
