package shader

import (
	"bytes"
	"encoding/binary"
	"errors"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
)

// Program is a decoded, checked shader: every instruction's operation, registers and
// immediate resolved, every jump target known to land on an instruction. A Program is
// immutable and shared by every work-item of every dispatch that runs it.
type Program struct {
	code []insn // one entry per instruction slot (LD_IMM64's second slot is opFiller)
}

// Len is the program's length in instruction slots.
func (p *Program) Len() int { return len(p.code) }

// Load decodes and checks a program from its bytes (SHADER_INSN_BYTES per slot, little
// endian). Anything the ISA does not define fails here with an *Error naming the slot, so a
// bad program never starts: docs/shader.md lists what is refused.
func Load(code []byte) (*Program, error) {
	n := len(code) / abi.SHADER_INSN_BYTES
	if len(code) == 0 || len(code)%abi.SHADER_INSN_BYTES != 0 || n > abi.SHADER_MAX_INSNS {
		return nil, fail(abi.SHADER_ERR_PROGRAM_SIZE, 0)
	}
	p := &Program{code: make([]insn, n)}
	r := bytes.NewReader(code)
	for slot := 0; slot < n; {
		var ins asm.Instruction
		if err := ins.Unmarshal(r, binary.LittleEndian, "linux"); err != nil {
			// The decoder refuses a truncated LD_IMM64 and one whose second slot has
			// fields set; either way the instruction is not one of the ISA's.
			return nil, fail(abi.SHADER_ERR_ILLEGAL_INSTRUCTION, slot)
		}
		in, err := decode(ins, slot)
		if err != nil {
			return nil, err
		}
		p.code[slot] = in
		w := int(ins.Width())
		if w == 2 {
			p.code[slot+1] = insn{op: opFiller}
		}
		slot += w
	}
	if err := p.checkFlow(); err != nil {
		return nil, err
	}
	return p, nil
}

// Assemble encodes instructions built with github.com/cilium/ebpf/asm into program bytes.
func Assemble(insns asm.Instructions) ([]byte, error) {
	var b bytes.Buffer
	if err := atomicsForMarshal(insns).Marshal(&b, binary.LittleEndian); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// checkFlow checks every jump target and that control cannot run off the end.
func (p *Program) checkFlow() error {
	n := len(p.code)
	for s, in := range p.code {
		switch in.op {
		case opFiller:
			continue
		case opExit:
			continue
		}
		if isJump(in.op) {
			t := int(in.tgt)
			if t < 0 || t >= n || p.code[t].op == opFiller {
				return fail(abi.SHADER_ERR_JUMP_OUT_OF_RANGE, s)
			}
			if in.op == opJa {
				continue // never falls through
			}
		}
		next := s + 1
		if in.op == opLdImm64 {
			next = s + 2
		}
		if next >= n {
			return fail(abi.SHADER_ERR_JUMP_OUT_OF_RANGE, s) // falls off the end
		}
	}
	return nil
}

func isJump(o op) bool { return o >= opJa && o <= opJsle32X }

var errIllegal = errors.New("illegal")

// decode turns one decoded eBPF instruction into an insn, refusing what the ISA lacks.
func decode(ins asm.Instruction, slot int) (insn, error) {
	bad := func() (insn, error) { return insn{}, fail(abi.SHADER_ERR_ILLEGAL_INSTRUCTION, slot) }
	if ins.Dst > asm.R10 || ins.Src > asm.R10 {
		return bad()
	}
	in := insn{dst: uint8(ins.Dst), src: uint8(ins.Src), off: ins.Offset, imm: ins.Constant}
	oc := ins.OpCode
	var err error
	switch cls := oc.Class(); {
	case cls.IsALU():
		in.op, err = decodeALU(oc, ins)
		if err == nil && ins.Dst == asm.R10 {
			err = errIllegal // R10 is read-only
		}
	case cls.IsJump():
		in.op, in.tgt, err = decodeJump(oc, ins, slot)
	case cls == asm.LdClass:
		if !oc.IsDWordLoad() || ins.Src != 0 || ins.Offset != 0 || ins.Dst == asm.R10 {
			return bad() // pseudo map/function loads, LD_ABS/LD_IND, R10
		}
		in.op = opLdImm64
	case cls == asm.LdXClass:
		in.op, in.size, err = decodeLoad(oc, ins)
	case cls == asm.StClass:
		if oc.Mode() != asm.MemMode || ins.Src != 0 {
			return bad()
		}
		in.op, in.size = opSt, sizeBytes(oc.Size())
		in.imm = int64(int32(ins.Constant))
	case cls == asm.StXClass:
		in.op, in.size, err = decodeStoreX(oc, ins)
	default:
		return bad()
	}
	if err != nil {
		return bad()
	}
	return in, nil
}

func sizeBytes(s asm.Size) uint8 {
	switch s {
	case asm.Byte:
		return 1
	case asm.Half:
		return 2
	case asm.Word:
		return 4
	case asm.DWord:
		return 8
	}
	return 0
}

// aluOps maps an ALU operation to its [ALU64?][X?] decoded ops.
var aluOps = map[asm.ALUOp][2][2]op{
	asm.Add:  {{opAdd32K, opAdd32X}, {opAdd64K, opAdd64X}},
	asm.Sub:  {{opSub32K, opSub32X}, {opSub64K, opSub64X}},
	asm.Mul:  {{opMul32K, opMul32X}, {opMul64K, opMul64X}},
	asm.Div:  {{opDiv32K, opDiv32X}, {opDiv64K, opDiv64X}},
	asm.SDiv: {{opSdiv32K, opSdiv32X}, {opSdiv64K, opSdiv64X}},
	asm.Or:   {{opOr32K, opOr32X}, {opOr64K, opOr64X}},
	asm.And:  {{opAnd32K, opAnd32X}, {opAnd64K, opAnd64X}},
	asm.LSh:  {{opLsh32K, opLsh32X}, {opLsh64K, opLsh64X}},
	asm.RSh:  {{opRsh32K, opRsh32X}, {opRsh64K, opRsh64X}},
	asm.Mod:  {{opMod32K, opMod32X}, {opMod64K, opMod64X}},
	asm.SMod: {{opSmod32K, opSmod32X}, {opSmod64K, opSmod64X}},
	asm.Xor:  {{opXor32K, opXor32X}, {opXor64K, opXor64X}},
	asm.Mov:  {{opMov32K, opMov32X}, {opMov64K, opMov64X}},
	asm.ArSh: {{opArsh32K, opArsh32X}, {opArsh64K, opArsh64X}},
}

func decodeALU(oc asm.OpCode, ins asm.Instruction) (op, error) {
	wide := oc.Class() == asm.ALU64Class
	w := 0
	if wide {
		w = 1
	}
	if ins.Offset != 0 {
		return 0, errIllegal // the decoder folded every defined offset into the operation
	}
	switch a := oc.ALUOp(); a {
	case asm.Neg:
		if oc.Source() != asm.ImmSource || ins.Src != 0 || ins.Constant != 0 {
			return 0, errIllegal
		}
		return [2]op{opNeg32, opNeg64}[w], nil
	case asm.MovSX8, asm.MovSX16, asm.MovSX32:
		if oc.Source() != asm.RegSource || ins.Constant != 0 {
			return 0, errIllegal
		}
		switch {
		case a == asm.MovSX8 && wide:
			return opMovsx8to64, nil
		case a == asm.MovSX16 && wide:
			return opMovsx16to64, nil
		case a == asm.MovSX32 && wide:
			return opMovsx32to64, nil
		case a == asm.MovSX8:
			return opMovsx8to32, nil
		case a == asm.MovSX16:
			return opMovsx16to32, nil
		}
		return 0, errIllegal
	case asm.Swap:
		if ins.Src != 0 {
			return 0, errIllegal
		}
		be := oc.Endianness() == asm.BE
		if wide {
			if be {
				return 0, errIllegal // ALU64 swap has only the unconditional (LE-coded) form
			}
			be = true // BSWAP: an unconditional swap is a conversion to big endian on a little-endian host
		}
		idx := map[int64]int{16: 0, 32: 1, 64: 2}
		i, ok := idx[ins.Constant]
		if !ok {
			return 0, errIllegal
		}
		if be {
			return [3]op{opBe16, opBe32, opBe64}[i], nil
		}
		return [3]op{opLe16, opLe32, opLe64}[i], nil
	default:
		forms, ok := aluOps[a]
		if !ok {
			return 0, errIllegal
		}
		if oc.Source() == asm.RegSource {
			if ins.Constant != 0 {
				return 0, errIllegal
			}
			return forms[w][1], nil
		}
		if ins.Src != 0 {
			return 0, errIllegal
		}
		return forms[w][0], nil
	}
}

// jumpOps maps a conditional jump to its [JMP64?][X?] decoded ops.
var jumpOps = map[asm.JumpOp][2][2]op{
	asm.JEq:  {{opJeq32K, opJeq32X}, {opJeq64K, opJeq64X}},
	asm.JGT:  {{opJgt32K, opJgt32X}, {opJgt64K, opJgt64X}},
	asm.JGE:  {{opJge32K, opJge32X}, {opJge64K, opJge64X}},
	asm.JSet: {{opJset32K, opJset32X}, {opJset64K, opJset64X}},
	asm.JNE:  {{opJne32K, opJne32X}, {opJne64K, opJne64X}},
	asm.JSGT: {{opJsgt32K, opJsgt32X}, {opJsgt64K, opJsgt64X}},
	asm.JSGE: {{opJsge32K, opJsge32X}, {opJsge64K, opJsge64X}},
	asm.JLT:  {{opJlt32K, opJlt32X}, {opJlt64K, opJlt64X}},
	asm.JLE:  {{opJle32K, opJle32X}, {opJle64K, opJle64X}},
	asm.JSLT: {{opJslt32K, opJslt32X}, {opJslt64K, opJslt64X}},
	asm.JSLE: {{opJsle32K, opJsle32X}, {opJsle64K, opJsle64X}},
}

func decodeJump(oc asm.OpCode, ins asm.Instruction, slot int) (op, int32, error) {
	wide := oc.Class() == asm.JumpClass
	next := int32(slot) + 1
	switch j := oc.JumpOp(); j {
	case asm.Exit:
		if ins.Src != 0 || ins.Dst != 0 || ins.Offset != 0 || ins.Constant != 0 || oc.Source() != asm.ImmSource {
			return 0, 0, errIllegal
		}
		return opExit, 0, nil
	case asm.Call:
		// src 0 only: BPF-to-BPF calls (1) and kfuncs (2) are not in the ISA.
		if ins.Src != 0 || ins.Dst != 0 || ins.Offset != 0 || oc.Source() != asm.ImmSource {
			return 0, 0, errIllegal
		}
		return opCall, 0, nil // the helper id is checked when called (SHADER_ERR_BAD_HELPER)
	case asm.Ja:
		if ins.Src != 0 || ins.Dst != 0 || oc.Source() != asm.ImmSource {
			return 0, 0, errIllegal
		}
		if wide {
			if ins.Constant != 0 {
				return 0, 0, errIllegal
			}
			return opJa, next + int32(ins.Offset), nil
		}
		if ins.Offset != 0 { // JMP32 JA is gotol: the offset is the immediate
			return 0, 0, errIllegal
		}
		return opJa, next + int32(ins.Constant), nil
	default:
		forms, ok := jumpOps[j]
		if !ok {
			return 0, 0, errIllegal // JCOND (may_goto) and undefined operations
		}
		w := 0
		if wide {
			w = 1
		}
		if oc.Source() == asm.RegSource {
			if ins.Constant != 0 {
				return 0, 0, errIllegal
			}
			return forms[w][1], next + int32(ins.Offset), nil
		}
		if ins.Src != 0 {
			return 0, 0, errIllegal
		}
		return forms[w][0], next + int32(ins.Offset), nil
	}
}

func decodeLoad(oc asm.OpCode, ins asm.Instruction) (op, uint8, error) {
	if ins.Constant != 0 || ins.Dst == asm.R10 {
		return 0, 0, errIllegal
	}
	size := sizeBytes(oc.Size())
	switch oc.Mode() {
	case asm.MemMode:
		return opLdx, size, nil
	case asm.MemSXMode:
		if size == 8 {
			return 0, 0, errIllegal
		}
		return opLdxsx, size, nil
	}
	return 0, 0, errIllegal
}

// atomicOps maps an atomic operation to its decoded op.
var atomicOps = map[asm.AtomicOp]op{
	asm.AddAtomic: opAtomicAdd, asm.OrAtomic: opAtomicOr, asm.AndAtomic: opAtomicAnd, asm.XorAtomic: opAtomicXor,
	asm.FetchAdd: opAtomicAddF, asm.FetchOr: opAtomicOrF, asm.FetchAnd: opAtomicAndF, asm.FetchXor: opAtomicXorF,
	asm.Xchg: opAtomicXchg, asm.CmpXchg: opAtomicCmpxchg,
}

func decodeStoreX(oc asm.OpCode, ins asm.Instruction) (op, uint8, error) {
	size := sizeBytes(oc.Size())
	switch oc.Mode() {
	case asm.MemMode:
		if ins.Constant != 0 {
			return 0, 0, errIllegal
		}
		return opStx, size, nil
	case asm.AtomicMode:
		if size != 4 && size != 8 {
			return 0, 0, errIllegal
		}
		o, ok := atomicOps[oc.AtomicOp()]
		if !ok {
			return 0, 0, errIllegal // load-acquire / store-release and undefined operations
		}
		// The fetching forms write src (cmpxchg writes R0): R10 stays read-only.
		if o >= opAtomicAddF && o != opAtomicCmpxchg && ins.Src == asm.R10 {
			return 0, 0, errIllegal
		}
		return o, size, nil
	}
	return 0, 0, errIllegal
}

// atomicsForMarshal works around cilium/ebpf v0.22.0's Instruction.Marshal, which computes the
// immediate before it moves an atomic instruction's operation (kept in the OpCode's high bits)
// into it, so every atomic is encoded as a plain ADD. With the operation already in Constant
// and the OpCode bits cleared, Marshal writes the right immediate (TestAtomics catches a
// regression either way). It returns insns itself when it has no atomics.
func atomicsForMarshal(insns asm.Instructions) asm.Instructions {
	out := insns
	for i, ins := range insns {
		a := ins.OpCode.AtomicOp()
		if a == asm.InvalidAtomic {
			continue
		}
		if &out[0] == &insns[0] {
			out = append(asm.Instructions(nil), insns...)
		}
		out[i].OpCode = ins.OpCode &^ asm.OpCode(0x0001_ff00)
		out[i].Constant = int64(a >> 8)
	}
	return out
}

// Entry reports whether a work-item may continue at slot pc: an instruction of the program
// (not outside it, not the second slot of an LD_IMM64). A restored program counter must be.
func (p *Program) Entry(pc int) bool {
	return pc >= 0 && pc < len(p.code) && p.code[pc].op != opFiller
}
