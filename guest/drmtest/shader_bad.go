package main

import (
	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
)

// placement is where a bad shader's program is.
type placement int

const (
	placeRX       placement = iota // in a readable, executable mapping: it is fetched
	placeRW                        // in a mapping without EXECUTABLE: the instruction fetch faults
	placeUnmapped                  // at a VA nothing maps
)

// badShader is a dispatch the device must end with one shader error: its reason
// (SHADER_ERR_*), the program counter (slot) and the address it names.
type badShader struct {
	name   string
	insns  asm.Instructions
	slots  int // COMPUTE_PGM_RSRC1's length in slots; -1: the program's own
	place  placement
	reason uint32
	pc     uint32
	addr   func(args, prog uint64) uint64 // the faulting address (nil: 0)
}

// faultAddr is the address the error names for a dispatch whose argument block and program
// are at args and prog.
func (b badShader) faultAddr(args, prog uint64) uint64 {
	if b.addr == nil {
		return 0
	}
	return b.addr(args, prog)
}

func atProgram(_, prog uint64) uint64 { return prog }

// faultVA is a GPU address no file can map (the VM's first page is never mapped,
// docs/uapi.md): a load there is a no-retry translation fault.
const faultVA = 8

// badShaders has one dispatch per shader error, and the program without EXECUTABLE.
var badShaders = []badShader{
	{name: "illegal_instruction", insns: asm.Instructions{
		asm.Mov.Imm(asm.R0, 0),
		{OpCode: asm.LoadAbsOp(asm.Word)}, // packet access: not in the ISA
		asm.Return(),
	}, slots: -1, reason: abi.SHADER_ERR_ILLEGAL_INSTRUCTION, pc: 1},
	{name: "jump_out_of_range", insns: asm.Instructions{
		asm.Mov.Imm(asm.R0, 0),
		asm.Mov.Imm(asm.R0, 1), // the last slot is not EXIT or JA: control would run off the end
	}, slots: -1, reason: abi.SHADER_ERR_JUMP_OUT_OF_RANGE, pc: 1},
	{name: "stack_overflow", insns: asm.Instructions{
		asm.Mov.Imm(asm.R0, 0),
		asm.StoreMem(asm.RFP, -abi.SHADER_STACK_DEFAULT-8, asm.R0, asm.DWord), // below the 512-byte stack
		asm.Return(),
	}, slots: -1, reason: abi.SHADER_ERR_STACK_OVERFLOW, pc: 1,
		addr: func(_, _ uint64) uint64 { return abi.SHADER_STACK_TOP - abi.SHADER_STACK_DEFAULT - 8 }},
	{name: "misaligned", insns: asm.Instructions{
		asm.Mov.Imm(asm.R0, 0),
		asm.StoreMem(asm.R1, 2, asm.R0, asm.Word), // a word store 2 bytes into the argument block
		asm.Return(),
	}, slots: -1, reason: abi.SHADER_ERR_MISALIGNED, pc: 1,
		addr: func(args, _ uint64) uint64 { return args + 2 }},
	{name: "bad_helper", insns: asm.Instructions{
		asm.Mov.Imm(asm.R1, 0),
		asm.BuiltinFunc(99).Call(), // no such helper
		asm.Return(),
	}, slots: -1, reason: abi.SHADER_ERR_BAD_HELPER, pc: 1},
	{name: "memory_fault", insns: asm.Instructions{
		asm.LoadImm(asm.R3, faultVA, asm.DWord), // two slots
		asm.LoadMem(asm.R0, asm.R3, 0, asm.DWord),
		asm.Return(),
	}, slots: -1, reason: abi.SHADER_ERR_MEMORY_FAULT, pc: 2,
		addr: func(_, _ uint64) uint64 { return faultVA }},
	{name: "program_size", insns: asm.Instructions{asm.Return()},
		slots: 0, reason: abi.SHADER_ERR_PROGRAM_SIZE, pc: 0},
	{name: "program_fetch", insns: asm.Instructions{asm.Return()},
		slots: -1, place: placeUnmapped, reason: abi.SHADER_ERR_PROGRAM_FETCH, pc: 0, addr: atProgram},
	{name: "program_not_executable", insns: asm.Instructions{asm.Return()},
		slots: -1, place: placeRW, reason: abi.SHADER_ERR_PROGRAM_FETCH, pc: 0, addr: atProgram},
}

// programSlots is the length COMPUTE_PGM_RSRC1 gets for code.
func (b badShader) programSlots(code []byte) uint32 {
	if b.slots >= 0 {
		return uint32(b.slots)
	}
	return uint32(len(code) / abi.SHADER_INSN_BYTES)
}

// shaderErrName is a SHADER_ERR_* reason's name as the driver's debugfs prints it.
func shaderErrName(reason uint32) string {
	return abi.NameOf("SHADER_ERR_", uint64(reason))
}
