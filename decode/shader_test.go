package decode_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
	"vgpu/decode"
	"vgpu/shader"
	"vgpu/shaders"
)

func assemble(t *testing.T, insns asm.Instructions) []byte {
	t.Helper()
	code, err := shader.Assemble(insns)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// TestShaderInsns decodes programs assembled by package shader (atomics through its
// encoding fix) and checks each instruction's text.
func TestShaderInsns(t *testing.T) {
	code := assemble(t, asm.Instructions{
		asm.LoadImm(asm.R3, 0x1122334455667788, asm.DWord),
		asm.Mov.Imm(asm.R1, 2),
		asm.FnMapLookupElem.Call(), // helper 1: SHADER_HELPER_GLOBAL_ID
		asm.Instruction{OpCode: asm.OpCode(asm.JumpClass).SetJumpOp(asm.Call), Constant: abi.SHADER_HELPER_TRAP},
		asm.Instruction{OpCode: asm.OpCode(asm.JumpClass).SetJumpOp(asm.Call), Constant: 99},
		asm.XorAtomic.Mem(asm.R4, asm.R3, asm.DWord, 8),
		asm.Instruction{OpCode: asm.OpCode(asm.StXClass).SetMode(asm.AtomicMode).SetSize(asm.Word) | asm.OpCode(asm.CmpXchg), Dst: asm.R4, Src: asm.R3},
		asm.JGT.Imm(asm.R0, 5, "out"),
		asm.Instruction{OpCode: asm.OpCode(asm.Jump32Class).SetJumpOp(asm.Ja), Constant: -3},
		asm.Return().WithSymbol("out"),
	})
	is, err := decode.Shader(code)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		slot int
		text string
	}{
		{0, "LdImmDW dst: r3 imm: 1234605616436508552"},
		{2, "MovImm dst: r1 imm: 2"},
		{3, "Call SHADER_HELPER_GLOBAL_ID"},
		{4, "Call SHADER_HELPER_TRAP"},
		{5, "Call HELPER_99?"},
		{6, "StXAtomicXorDW dst: r4 src: r3 off: 8"},
		{7, "StXAtomicCmpXchgW dst: r4 src: r3 off: 0"},
		{8, "JGTImm dst: r0 off: 1 imm: 5 -> 10"},
		{9, "Ja32 imm: -3 -> 7"},
		{10, "Exit"},
	}
	if len(is) != len(want) {
		t.Fatalf("%d instructions:\n%s", len(is), is)
	}
	for i, w := range want {
		if is[i].Slot != w.slot || is[i].String() != w.text {
			t.Errorf("insn %d: slot %d %q, want slot %d %q", i, is[i].Slot, is[i].String(), w.slot, w.text)
		}
	}
	if s := is.String(); !strings.Contains(s, "   6: db 34 08 00 a0 00 00 00 StXAtomicXorDW") {
		t.Errorf("listing:\n%s", s)
	}
}

// TestShaderProjectShaders: every shader of package shaders decodes without an error into as
// many instructions as it was built from, the same operations.
func TestShaderProjectShaders(t *testing.T) {
	for _, s := range shaders.All() {
		is, err := decode.Shader(assemble(t, s.Insns))
		if err != nil || len(is) != len(s.Insns) {
			t.Fatalf("%s: %v, %d of %d instructions", s.Name, err, len(is), len(s.Insns))
		}
		for i, in := range is {
			if in.Ins.OpCode != s.Insns[i].OpCode || in.Ins.Dst != s.Insns[i].Dst || in.Ins.Src != s.Insns[i].Src {
				t.Errorf("%s slot %d: %v, built %v", s.Name, in.Slot, in.Ins, s.Insns[i])
			}
		}
	}
}

func TestShaderErrors(t *testing.T) {
	ldimm := assemble(t, asm.Instructions{asm.LoadImm(asm.R1, 1<<40, asm.DWord), asm.Return()})
	bad := append([]byte(nil), ldimm...)
	bad[8] = 0x18 // fields in LD_IMM64's second half
	cases := []struct {
		name string
		code []byte
		n    int
		text string
	}{
		{"partial-slot", append(assemble(t, asm.Instructions{asm.Return()}), 1, 2, 3), 2, "INVALID error=\"truncated: 3 bytes of a slot\" raw=01 02 03"},
		{"ldimm-half", ldimm[:8], 1, "INVALID error="},
		{"ldimm-fields", bad, 2, "64bit immediate has non-zero fields"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is, err := decode.Shader(c.code)
			if !errors.Is(err, decode.ErrTruncated) || len(is) != c.n {
				t.Fatalf("err %v, %d instructions:\n%s", err, len(is), is)
			}
			var found bool
			for _, in := range is {
				found = found || strings.Contains(in.String(), c.text)
			}
			if !found {
				t.Errorf("no instruction shows %q:\n%s", c.text, is)
			}
		})
	}
	if _, err := decode.Shader(make([]byte, decode.MaxShaderBytes+8)); !errors.Is(err, decode.ErrTruncated) {
		t.Errorf("oversized program: %v", err)
	}
	if is, err := decode.Shader(nil); err != nil || len(is) != 0 {
		t.Errorf("empty program: %v %v", is, err)
	}
}
