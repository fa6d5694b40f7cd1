package shader

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
)

// raw encodes one instruction slot as the BPF ABI does.
func raw(opcode byte, dst, src uint8, off int16, imm int32) []byte {
	b := make([]byte, 8)
	b[0], b[1] = opcode, dst&0xF|src<<4
	binary.LittleEndian.PutUint16(b[2:], uint16(off))
	binary.LittleEndian.PutUint32(b[4:], uint32(imm))
	return b
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var exit = raw(0x95, 0, 0, 0, 0)

func TestLoadRefuses(t *testing.T) {
	cases := []struct {
		name   string
		code   []byte
		reason uint32
		pc     int
	}{
		{"empty", nil, abi.SHADER_ERR_PROGRAM_SIZE, 0},
		{"not whole slots", make([]byte, 12), abi.SHADER_ERR_PROGRAM_SIZE, 0},
		{"too long", make([]byte, 8*(abi.SHADER_MAX_INSNS+1)), abi.SHADER_ERR_PROGRAM_SIZE, 0},
		{"LD_ABS (packet access)", cat(raw(0x20, 0, 0, 0, 0), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"map load (LD_IMM64 src 1)", cat(raw(0x18, 1, 1, 0, 3), raw(0, 0, 0, 0, 0), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"LD_IMM64 truncated", raw(0x18, 1, 0, 0, 3), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"LD_IMM64 second slot with fields", cat(raw(0x18, 1, 0, 0, 3), raw(0x07, 0, 0, 0, 0), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"BPF-to-BPF call", cat(raw(0x85, 0, 1, 0, 1), exit, exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"kfunc call", cat(raw(0x85, 0, 2, 0, 1), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"write to R10", cat(raw(0xb7, 10, 0, 0, 1), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"load into R10", cat(raw(0x79, 10, 1, 0, 0), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"register 11", cat(raw(0xbf, 11, 0, 0, 0), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"ALU K with a source register", cat(raw(0x07, 1, 2, 0, 1), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"ALU X with an immediate", cat(raw(0x0f, 1, 2, 0, 1), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"ALU with an offset", cat(raw(0x07, 1, 0, 3, 1), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"unknown ALU op 0xe0", cat(raw(0xe7, 1, 0, 0, 1), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"byte swap of 8 bits", cat(raw(0xd4, 1, 0, 0, 8), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"JMP32 exit", cat(raw(0x96, 0, 0, 0, 0), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"may_goto (JCOND)", cat(raw(0xe5, 0, 0, 0, 0), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"8-byte sign-extending load", cat(raw(0x99, 1, 2, 0, 0), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"byte atomic", cat(raw(0xd3, 1, 2, 0, 0), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"load-acquire", cat(raw(0xdb, 1, 2, 0, 0x100), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 1 - 1},
		{"fetch into R10", cat(raw(0xdb, 1, 10, 0, 0x01), exit), abi.SHADER_ERR_ILLEGAL_INSTRUCTION, 0},
		{"jump past the end", cat(raw(0x05, 0, 0, 5, 0), exit), abi.SHADER_ERR_JUMP_OUT_OF_RANGE, 0},
		{"jump before the start", cat(exit, raw(0x05, 0, 0, -3, 0)), abi.SHADER_ERR_JUMP_OUT_OF_RANGE, 1},
		{"jump into LD_IMM64", cat(raw(0x05, 0, 0, 1, 0), raw(0x18, 1, 0, 0, 3), raw(0, 0, 0, 0, 0), exit), abi.SHADER_ERR_JUMP_OUT_OF_RANGE, 0},
		{"falls off the end", raw(0xb7, 0, 0, 0, 1), abi.SHADER_ERR_JUMP_OUT_OF_RANGE, 0},
		{"conditional jump last", cat(exit, raw(0x15, 1, 0, -2, 0)), abi.SHADER_ERR_JUMP_OUT_OF_RANGE, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.code)
			var se *Error
			if !errors.As(err, &se) || se.Reason != c.reason || se.PC != c.pc {
				t.Fatalf("Load: %v, want %s at slot %d", err, ReasonName(c.reason), c.pc)
			}
		})
	}
}

func TestLinkLabels(t *testing.T) {
	if _, err := Link(asm.Instructions{asm.Ja.Label("nowhere"), asm.Return()}); err == nil {
		t.Error("a jump to an undefined label linked")
	}
	if _, err := Link(asm.Instructions{asm.Return().WithSymbol("a"), asm.Return().WithSymbol("a")}); err == nil {
		t.Error("a symbol defined twice linked")
	}
	// A backward jump over an LD_IMM64 counts its two slots.
	p, _, err := Build(asm.Instructions{
		asm.Mov.Imm(asm.R0, 0).WithSymbol("top"),
		asm.LoadImm(asm.R1, 1<<40, asm.DWord),
		asm.JEq.Imm(asm.R0, 1, "done"),
		asm.Mov.Imm(asm.R0, 1),
		asm.Ja.Label("top"),
		asm.Return().WithSymbol("done"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.code[3].tgt != 6 || p.code[5].tgt != 0 {
		t.Errorf("targets %d, %d, want 6, 0", p.code[3].tgt, p.code[5].tgt)
	}
}
