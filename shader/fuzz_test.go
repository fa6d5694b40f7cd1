package shader

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
)

// FuzzLoad: any bytes either fail to load with a named *Error or load into a program that
// runs — with a budget, on a small memory — to a stop without panicking; a failure is a
// named *Error at an instruction of the program, and the Lane's PC is always inside it.
func FuzzLoad(f *testing.F) {
	seeds := []asm.Instructions{
		{asm.Mov.Imm(asm.R0, 1), asm.Return()},
		vectorAddShader(),
		aluLoop(3),
		{asm.Mov.Imm(asm.R1, 1), asm.BuiltinFunc(abi.SHADER_HELPER_GLOBAL_ID).Call(), asm.Return()},
		{asm.FetchAdd.Mem(asm.R1, asm.R2, asm.DWord, 0), asm.Return()},
	}
	for _, s := range seeds {
		linked, err := Link(s)
		if err != nil {
			f.Fatal(err)
		}
		code, err := Assemble(linked)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(code)
	}
	f.Fuzz(func(t *testing.T, code []byte) {
		p, err := Load(code)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("Load failed without a shader error: %v", err)
			}
			return
		}
		mem := &flatMem{base: memBase, b: make([]byte, 256)}
		l := NewLane(p, mem, &traps{}, memBase, Dims{LocalSize: [3]uint64{1, 1, 1}}, make([]byte, 64))
		for range 4 {
			st, err := l.Run(1000)
			if l.PC < 0 || l.PC >= p.Len() {
				t.Fatalf("pc %d outside the program (%d slots)", l.PC, p.Len())
			}
			if st == Failed {
				var se *Error
				if !errors.As(err, &se) || se.PC != l.PC {
					t.Fatalf("failed with %v at lane pc %d", err, l.PC)
				}
				return
			}
			if st == Exited {
				return
			}
		}
	})
}
