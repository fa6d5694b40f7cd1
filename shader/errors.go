package shader

import (
	"fmt"

	"vgpu/abi"
)

// Error is why a work-item stopped for good: an abi.SHADER_ERR_* reason, the program counter
// (instruction slot) it happened at, and for memory errors the address and the memory path's
// error (a retry fault can be told apart with errors.As on Err).
type Error struct {
	Reason uint32
	PC     int
	Addr   uint64
	Err    error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("shader: %s at pc %d", ReasonName(e.Reason), e.PC)
	if e.Reason == abi.SHADER_ERR_MEMORY_FAULT || e.Reason == abi.SHADER_ERR_MISALIGNED || e.Reason == abi.SHADER_ERR_STACK_OVERFLOW {
		s += fmt.Sprintf(" (address %#x)", e.Addr)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

var reasonNames = map[uint32]string{
	abi.SHADER_ERR_NONE:                "NONE",
	abi.SHADER_ERR_ILLEGAL_INSTRUCTION: "ILLEGAL_INSTRUCTION",
	abi.SHADER_ERR_JUMP_OUT_OF_RANGE:   "JUMP_OUT_OF_RANGE",
	abi.SHADER_ERR_STACK_OVERFLOW:      "STACK_OVERFLOW",
	abi.SHADER_ERR_MISALIGNED:          "MISALIGNED",
	abi.SHADER_ERR_BAD_HELPER:          "BAD_HELPER",
	abi.SHADER_ERR_MEMORY_FAULT:        "MEMORY_FAULT",
	abi.SHADER_ERR_PROGRAM_SIZE:        "PROGRAM_SIZE",
	abi.SHADER_ERR_PROGRAM_FETCH:       "PROGRAM_FETCH",
}

// ReasonName is the name of an abi.SHADER_ERR_* value.
func ReasonName(r uint32) string {
	if n, ok := reasonNames[r]; ok {
		return "SHADER_ERR_" + n
	}
	return fmt.Sprintf("SHADER_ERR_%d", r)
}

func fail(reason uint32, pc int) *Error { return &Error{Reason: reason, PC: pc} }
