package shader

// op is the decoded form of an instruction's operation: one value per behaviour, so the
// interpreter's switch has a case for each (Go compiles a dense switch into a jump table) and
// never looks at the encoding again. K forms take the immediate, X forms the source register.
type op uint8

const (
	opInvalid op = iota

	// 64-bit ALU.
	opAdd64K
	opAdd64X
	opSub64K
	opSub64X
	opMul64K
	opMul64X
	opDiv64K
	opDiv64X
	opSdiv64K
	opSdiv64X
	opOr64K
	opOr64X
	opAnd64K
	opAnd64X
	opLsh64K
	opLsh64X
	opRsh64K
	opRsh64X
	opNeg64
	opMod64K
	opMod64X
	opSmod64K
	opSmod64X
	opXor64K
	opXor64X
	opMov64K
	opMov64X
	opMovsx8to64
	opMovsx16to64
	opMovsx32to64
	opArsh64K
	opArsh64X

	// 32-bit ALU: the result is zero-extended into the 64-bit register.
	opAdd32K
	opAdd32X
	opSub32K
	opSub32X
	opMul32K
	opMul32X
	opDiv32K
	opDiv32X
	opSdiv32K
	opSdiv32X
	opOr32K
	opOr32X
	opAnd32K
	opAnd32X
	opLsh32K
	opLsh32X
	opRsh32K
	opRsh32X
	opNeg32
	opMod32K
	opMod32X
	opSmod32K
	opSmod32X
	opXor32K
	opXor32X
	opMov32K
	opMov32X
	opMovsx8to32
	opMovsx16to32
	opArsh32K
	opArsh32X

	// Byte order: to little endian (truncate), to big endian, unconditional swap.
	opLe16
	opLe32
	opLe64
	opBe16
	opBe32
	opBe64

	// Jumps: tgt is the absolute target slot.
	opJa
	opJeq64K
	opJeq64X
	opJgt64K
	opJgt64X
	opJge64K
	opJge64X
	opJset64K
	opJset64X
	opJne64K
	opJne64X
	opJsgt64K
	opJsgt64X
	opJsge64K
	opJsge64X
	opJlt64K
	opJlt64X
	opJle64K
	opJle64X
	opJslt64K
	opJslt64X
	opJsle64K
	opJsle64X
	opJeq32K
	opJeq32X
	opJgt32K
	opJgt32X
	opJge32K
	opJge32X
	opJset32K
	opJset32X
	opJne32K
	opJne32X
	opJsgt32K
	opJsgt32X
	opJsge32K
	opJsge32X
	opJlt32K
	opJlt32X
	opJle32K
	opJle32X
	opJslt32K
	opJslt32X
	opJsle32K
	opJsle32X
	opCall
	opExit

	// Loads and stores: size in bytes in insn.size.
	opLdImm64
	opLdx   // zero-extending load
	opLdxsx // sign-extending load
	opSt    // store of the immediate
	opStx   // store of a register

	// Atomics (size 4 or 8); the *F forms also return the old value in src.
	opAtomicAdd
	opAtomicOr
	opAtomicAnd
	opAtomicXor
	opAtomicAddF
	opAtomicOrF
	opAtomicAndF
	opAtomicXorF
	opAtomicXchg
	opAtomicCmpxchg

	// opFiller is the second slot of an LD_IMM64: never executed (no jump may land on it).
	opFiller
)

// insn is a decoded, checked instruction.
type insn struct {
	op   op
	dst  uint8
	src  uint8
	size uint8 // loads, stores, atomics: bytes
	off  int16 // memory offset
	tgt  int32 // jumps: target slot
	imm  int64
}

// AtomicOp is the read-modify-write a Memory performs for an atomic instruction.
type AtomicOp uint8

const (
	AtomicAdd AtomicOp = iota + 1
	AtomicOr
	AtomicAnd
	AtomicXor
	AtomicXchg
	AtomicCmpxchg
)

func (o AtomicOp) String() string {
	switch o {
	case AtomicAdd:
		return "add"
	case AtomicOr:
		return "or"
	case AtomicAnd:
		return "and"
	case AtomicXor:
		return "xor"
	case AtomicXchg:
		return "xchg"
	case AtomicCmpxchg:
		return "cmpxchg"
	}
	return "atomic?"
}

// Apply is the operation's result on the old value (for Memory implementations): v is the
// operand, cmp the expected old value of a cmpxchg.
func (o AtomicOp) Apply(old, v, cmp uint64) uint64 {
	switch o {
	case AtomicAdd:
		return old + v
	case AtomicOr:
		return old | v
	case AtomicAnd:
		return old & v
	case AtomicXor:
		return old ^ v
	case AtomicXchg:
		return v
	case AtomicCmpxchg:
		if old == cmp {
			return v
		}
	}
	return old
}
