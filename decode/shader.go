package decode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
)

// MaxShaderBytes bounds what Shader decodes: a program has at most SHADER_MAX_INSNS slots.
const MaxShaderBytes = abi.SHADER_MAX_INSNS * abi.SHADER_INSN_BYTES

// Insn is one decoded eBPF instruction of a shader (docs/shader.md).
type Insn struct {
	Slot   int             // its instruction slot (LD_IMM64 takes two)
	Raw    []byte          // its bytes (8, or 16 for LD_IMM64)
	Ins    asm.Instruction // as github.com/cilium/ebpf/asm decodes it (atomics included)
	Helper string          // CALL of a helper: its abi name (SHADER_HELPER_GLOBAL_ID, ...), or HELPER_n
	Target int             // a jump's target slot (-1: not a jump)
	Err    error           // ErrTruncated: the slot (or LD_IMM64's second half) is incomplete or malformed
}

// String is the instruction as cilium/ebpf/asm prints it, with a helper call by name and a
// jump's target slot.
func (in Insn) String() string {
	if in.Err != nil {
		return fmt.Sprintf("INVALID error=%q raw=% x", in.Err.Error(), in.Raw)
	}
	var s string
	if in.Helper != "" {
		s = fmt.Sprintf("%v %s", in.Ins.OpCode, in.Helper)
	} else {
		s = fmt.Sprintf("%v", in.Ins)
	}
	if in.Target >= 0 {
		s += fmt.Sprintf(" -> %d", in.Target)
	}
	return s
}

// Insns is a decoded program: one line per instruction, its slot and bytes first.
type Insns []Insn

func (is Insns) String() string {
	var b strings.Builder
	for _, in := range is {
		raw := in.Raw
		if len(raw) > abi.SHADER_INSN_BYTES {
			raw = raw[:abi.SHADER_INSN_BYTES] // LD_IMM64: the first slot (the second holds the high word)
		}
		fmt.Fprintf(&b, "%4d: %-23s %s\n", in.Slot, fmt.Sprintf("% x", raw), in.String())
	}
	return b.String()
}

var helpers = names{
	abi.SHADER_HELPER_GLOBAL_ID: "SHADER_HELPER_GLOBAL_ID", abi.SHADER_HELPER_LOCAL_ID: "SHADER_HELPER_LOCAL_ID",
	abi.SHADER_HELPER_GROUP_ID: "SHADER_HELPER_GROUP_ID", abi.SHADER_HELPER_LOCAL_SIZE: "SHADER_HELPER_LOCAL_SIZE",
	abi.SHADER_HELPER_NUM_GROUPS: "SHADER_HELPER_NUM_GROUPS", abi.SHADER_HELPER_BARRIER: "SHADER_HELPER_BARRIER",
	abi.SHADER_HELPER_TRAP: "SHADER_HELPER_TRAP", abi.SHADER_HELPER_SLEEP: "SHADER_HELPER_SLEEP",
}

// Shader decodes a program's bytes slot by slot. It decodes what it can: a partial last slot
// or an LD_IMM64 without its second half is an Insn with ErrTruncated (and the error
// returned); a program longer than MaxShaderBytes is decoded up to that length and the error
// says so. Whether vgpu's ISA accepts each instruction is package shader's to say (Load).
func Shader(code []byte) (Insns, error) {
	var err error
	if len(code) > MaxShaderBytes {
		err = fmt.Errorf("%w: %d bytes is more than SHADER_MAX_INSNS slots; decoded the first %d", ErrTruncated, len(code), MaxShaderBytes)
		code = code[:MaxShaderBytes]
	}
	var out Insns
	for off := 0; off < len(code); {
		slot := off / abi.SHADER_INSN_BYTES
		in := Insn{Slot: slot, Target: -1}
		if len(code)-off < abi.SHADER_INSN_BYTES {
			in.Raw = code[off:]
			in.Err = fmt.Errorf("%w: %d bytes of a slot", ErrTruncated, len(code)-off)
			out = append(out, in)
			if err == nil {
				err = fmt.Errorf("slot %d: %w", slot, in.Err)
			}
			break
		}
		width := abi.SHADER_INSN_BYTES
		if asm.OpCode(code[off]).IsDWordLoad() {
			width = min(2*abi.SHADER_INSN_BYTES, len(code)-off)
		}
		in.Raw = code[off : off+width]
		uerr := in.Ins.Unmarshal(bytes.NewReader(in.Raw), binary.LittleEndian, "linux")
		switch {
		case uerr != nil && in.Ins.IsBuiltinCall():
			// A helper id the Linux platform tags cannot hold: the raw id is kept.
		case uerr != nil:
			in.Err = fmt.Errorf("%w: %v", ErrTruncated, uerr)
			if err == nil {
				err = fmt.Errorf("slot %d: %w", slot, in.Err)
			}
		}
		if in.Err == nil {
			in.Helper, in.Target = callAndTarget(in.Ins, slot)
		}
		out = append(out, in)
		off += width
	}
	return out, err
}

// callAndTarget names a helper call's helper and computes a jump's target slot.
func callAndTarget(ins asm.Instruction, slot int) (string, int) {
	op := ins.OpCode
	if !op.Class().IsJump() {
		return "", -1
	}
	switch op.JumpOp() {
	case asm.Call:
		if ins.Src != asm.PseudoCall && ins.Src != asm.PseudoKfuncCall {
			id := uint64(uint32(ins.Constant))
			if n, ok := helpers[id]; ok {
				return n, -1
			}
			return fmt.Sprintf("HELPER_%d?", id), -1
		}
		return "", -1
	case asm.Exit:
		return "", -1
	case asm.Ja:
		if op.Class() == asm.Jump32Class {
			return "", slot + 1 + int(int32(ins.Constant))
		}
	}
	return "", slot + 1 + int(ins.Offset)
}
