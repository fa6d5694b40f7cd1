package shader

import (
	"fmt"
	"math"

	"github.com/cilium/ebpf/asm"
)

// Link resolves the jumps of a program written with github.com/cilium/ebpf/asm's DSL: a jump
// built with a label (asm.JLT.Reg(asm.R1, asm.R2, "loop")) goes to the instruction carrying
// that symbol (.WithSymbol("loop")). cilium/ebpf does this when it loads a program into the
// kernel; vgpu's shaders never go there, so this is the assembler's last step. It returns a
// copy; instructions without a reference keep their offsets.
func Link(insns asm.Instructions) (asm.Instructions, error) {
	out := make(asm.Instructions, len(insns))
	copy(out, insns)
	at := make(map[string]int64)
	var raw int64
	slots := make([]int64, len(out))
	for i, ins := range out {
		slots[i] = raw
		if sym := ins.Symbol(); sym != "" {
			if _, dup := at[sym]; dup {
				return nil, fmt.Errorf("shader: symbol %q defined twice", sym)
			}
			at[sym] = raw
		}
		raw += int64(ins.Width())
	}
	for i, ins := range out {
		ref := ins.Reference()
		if ref == "" || !ins.OpCode.Class().IsJump() || ins.IsBuiltinCall() {
			continue
		}
		t, ok := at[ref]
		if !ok {
			return nil, fmt.Errorf("shader: jump to undefined label %q", ref)
		}
		d := t - (slots[i] + 1)
		if d < math.MinInt16 || d > math.MaxInt16 {
			return nil, fmt.Errorf("shader: jump to %q is %d slots away (at most ±32767)", ref, d)
		}
		out[i].Offset = int16(d)
	}
	return out, nil
}

// Build links and loads a program written in Go (tests and the project's own shaders).
func Build(insns asm.Instructions) (*Program, []byte, error) {
	linked, err := Link(insns)
	if err != nil {
		return nil, nil, err
	}
	code, err := Assemble(linked)
	if err != nil {
		return nil, nil, err
	}
	p, err := Load(code)
	if err != nil {
		return nil, nil, err
	}
	return p, code, nil
}
