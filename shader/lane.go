package shader

import (
	"encoding/binary"
	"math/bits"

	"vgpu/abi"
)

// Memory is what a work-item's loads, stores and atomics reach: a compute unit's L0 cache in
// front of the queue's address space. Addresses are GPU virtual addresses in the queue's VM;
// size is 1, 2, 4 or 8 and addr is a multiple of it. Values are little endian, zero-extended.
// An error leaves memory as it was.
type Memory interface {
	Load(addr uint64, size int) (uint64, error)
	Store(addr uint64, size int, v uint64) error
	// Atomic performs op (AtomicOp.Apply) on the size-byte value at addr (4 or 8) and returns
	// the old value.
	Atomic(op AtomicOp, addr uint64, size int, v, cmp uint64) (uint64, error)
}

// Trapper receives HELPER_TRAP calls (the compute unit raises the IV): pc is the call's slot.
type Trapper interface {
	Trap(l *Lane, pc int, code uint32)
}

// Stop is why Run returned.
type Stop uint8

const (
	// Exited: the work-item executed EXIT; it is done.
	Exited Stop = iota
	// AtBarrier: it called HELPER_BARRIER; PC is after the call. Run it again once every
	// work-item of its workgroup has reached a barrier or exited.
	AtBarrier
	// Sleeping: it called HELPER_SLEEP; SleepNS says how long. PC is after the call.
	Sleeping
	// Yielded: it used up its budget at a checkpoint (a backward jump or a call); PC is the
	// next instruction to run. Preemption happens here: between two instructions.
	Yielded
	// Failed: the returned *Error says why. PC is the instruction that failed, which has had
	// no effect (a retry fault replays it).
	Failed
)

func (s Stop) String() string {
	return [...]string{"exited", "at barrier", "sleeping", "yielded", "failed"}[s]
}

// Dims are a dispatch's sizes and a work-item's place in it.
type Dims struct {
	Global, Local, Group [3]uint64 // the work-item's ids
	LocalSize, NumGroups [3]uint64
	Linear               uint64 // linear local index inside the workgroup
}

// Lane is one work-item: its registers, program counter and stack, and what it runs on.
// A Lane's state (Regs, PC, Stack, Dims, SleepNS) is all there is to it: Save and Restore
// move exactly that, so a work-item stopped at any Yielded, AtBarrier or Sleeping point
// continues identically elsewhere.
type Lane struct {
	Regs    [11]uint64
	PC      int
	Stack   []byte // the work-item's stack: [SHADER_STACK_TOP-len, SHADER_STACK_TOP)
	Dims    Dims
	SleepNS uint64 // after Sleeping: how long
	// Executed counts the instructions this Lane has executed (all Runs).
	Executed uint64
	// stackClean: Reset zeroed Stack and nothing has been stored in it since, so the next
	// Reset on the same storage need not zero it again (most work-items never touch their
	// stack, and zeroing 512 bytes per work-item would be most of a short shader's cost).
	stackClean bool

	prog *Program
	mem  Memory
	trap Trapper
}

// NewLane prepares a work-item of p at its entry: R1 the kernel arguments, R2..R4 the global
// ids, R5 the linear local index, R10 the stack top, everything else 0 (abi.SHADER_REG_*).
// stack is the work-item's stack (its length is the stack size); it is zeroed.
func NewLane(p *Program, mem Memory, trap Trapper, args uint64, d Dims, stack []byte) *Lane {
	l := &Lane{}
	l.Reset(p, mem, trap, args, d, stack)
	return l
}

// Reset reuses l for another work-item (as NewLane). It writes only what changes: a compute
// unit resets its Lanes for every workgroup, and rewriting the pointers (write barriers) and a
// clean stack for each work-item would be much of a short shader's cost.
func (l *Lane) Reset(p *Program, mem Memory, trap Trapper, args uint64, d Dims, stack []byte) {
	same := len(l.Stack) == len(stack) && (len(stack) == 0 || &l.Stack[0] == &stack[0])
	if !same || !l.stackClean {
		clear(stack)
	}
	if !same {
		l.Stack = stack
	}
	if l.prog != p {
		l.prog = p
	}
	if l.mem != mem {
		l.mem = mem
	}
	if l.trap != trap {
		l.trap = trap
	}
	l.Regs = [11]uint64{}
	l.PC, l.Dims, l.SleepNS, l.Executed, l.stackClean = 0, d, 0, 0, true
	l.Regs[abi.SHADER_REG_ARGS] = args
	l.Regs[abi.SHADER_REG_GLOBAL_X] = d.Global[0]
	l.Regs[abi.SHADER_REG_GLOBAL_Y] = d.Global[1]
	l.Regs[abi.SHADER_REG_GLOBAL_Z] = d.Global[2]
	l.Regs[abi.SHADER_REG_LOCAL_LINEAR] = d.Linear
	l.Regs[10] = abi.SHADER_STACK_TOP
}

// Bind attaches a Lane (restored from a save area) to what it runs on.
func (l *Lane) Bind(p *Program, mem Memory, trap Trapper) { l.prog, l.mem, l.trap = p, mem, trap }

// Run executes until the work-item exits, waits, sleeps, fails, or — once it has executed
// budget instructions — reaches a checkpoint (a taken backward jump or a call). Straight-line
// code between checkpoints is at most a program's length, so a Run with a small budget
// returns within a bounded time even for an endless loop.
func (l *Lane) Run(budget uint64) (Stop, error) {
	code := l.prog.code
	r := &l.Regs
	pc := l.PC
	var n uint64
	for {
		in := &code[pc]
		n++
		switch in.op {
		// 64-bit ALU
		case opAdd64K:
			r[in.dst] += uint64(in.imm)
		case opAdd64X:
			r[in.dst] += r[in.src]
		case opSub64K:
			r[in.dst] -= uint64(in.imm)
		case opSub64X:
			r[in.dst] -= r[in.src]
		case opMul64K:
			r[in.dst] *= uint64(in.imm)
		case opMul64X:
			r[in.dst] *= r[in.src]
		case opDiv64K:
			r[in.dst] = udiv64(r[in.dst], uint64(in.imm))
		case opDiv64X:
			r[in.dst] = udiv64(r[in.dst], r[in.src])
		case opSdiv64K:
			r[in.dst] = sdiv64(r[in.dst], uint64(in.imm))
		case opSdiv64X:
			r[in.dst] = sdiv64(r[in.dst], r[in.src])
		case opOr64K:
			r[in.dst] |= uint64(in.imm)
		case opOr64X:
			r[in.dst] |= r[in.src]
		case opAnd64K:
			r[in.dst] &= uint64(in.imm)
		case opAnd64X:
			r[in.dst] &= r[in.src]
		case opLsh64K:
			r[in.dst] <<= uint64(in.imm) & 63
		case opLsh64X:
			r[in.dst] <<= r[in.src] & 63
		case opRsh64K:
			r[in.dst] >>= uint64(in.imm) & 63
		case opRsh64X:
			r[in.dst] >>= r[in.src] & 63
		case opNeg64:
			r[in.dst] = -r[in.dst]
		case opMod64K:
			r[in.dst] = umod64(r[in.dst], uint64(in.imm))
		case opMod64X:
			r[in.dst] = umod64(r[in.dst], r[in.src])
		case opSmod64K:
			r[in.dst] = smod64(r[in.dst], uint64(in.imm))
		case opSmod64X:
			r[in.dst] = smod64(r[in.dst], r[in.src])
		case opXor64K:
			r[in.dst] ^= uint64(in.imm)
		case opXor64X:
			r[in.dst] ^= r[in.src]
		case opMov64K:
			r[in.dst] = uint64(in.imm)
		case opMov64X:
			r[in.dst] = r[in.src]
		case opMovsx8to64:
			r[in.dst] = uint64(int64(int8(r[in.src])))
		case opMovsx16to64:
			r[in.dst] = uint64(int64(int16(r[in.src])))
		case opMovsx32to64:
			r[in.dst] = uint64(int64(int32(r[in.src])))
		case opArsh64K:
			r[in.dst] = uint64(int64(r[in.dst]) >> (uint64(in.imm) & 63))
		case opArsh64X:
			r[in.dst] = uint64(int64(r[in.dst]) >> (r[in.src] & 63))

		// 32-bit ALU
		case opAdd32K:
			r[in.dst] = uint64(uint32(r[in.dst]) + uint32(in.imm))
		case opAdd32X:
			r[in.dst] = uint64(uint32(r[in.dst]) + uint32(r[in.src]))
		case opSub32K:
			r[in.dst] = uint64(uint32(r[in.dst]) - uint32(in.imm))
		case opSub32X:
			r[in.dst] = uint64(uint32(r[in.dst]) - uint32(r[in.src]))
		case opMul32K:
			r[in.dst] = uint64(uint32(r[in.dst]) * uint32(in.imm))
		case opMul32X:
			r[in.dst] = uint64(uint32(r[in.dst]) * uint32(r[in.src]))
		case opDiv32K:
			r[in.dst] = uint64(udiv32(uint32(r[in.dst]), uint32(in.imm)))
		case opDiv32X:
			r[in.dst] = uint64(udiv32(uint32(r[in.dst]), uint32(r[in.src])))
		case opSdiv32K:
			r[in.dst] = uint64(sdiv32(uint32(r[in.dst]), uint32(in.imm)))
		case opSdiv32X:
			r[in.dst] = uint64(sdiv32(uint32(r[in.dst]), uint32(r[in.src])))
		case opOr32K:
			r[in.dst] = uint64(uint32(r[in.dst]) | uint32(in.imm))
		case opOr32X:
			r[in.dst] = uint64(uint32(r[in.dst]) | uint32(r[in.src]))
		case opAnd32K:
			r[in.dst] = uint64(uint32(r[in.dst]) & uint32(in.imm))
		case opAnd32X:
			r[in.dst] = uint64(uint32(r[in.dst]) & uint32(r[in.src]))
		case opLsh32K:
			r[in.dst] = uint64(uint32(r[in.dst]) << (uint32(in.imm) & 31))
		case opLsh32X:
			r[in.dst] = uint64(uint32(r[in.dst]) << (uint32(r[in.src]) & 31))
		case opRsh32K:
			r[in.dst] = uint64(uint32(r[in.dst]) >> (uint32(in.imm) & 31))
		case opRsh32X:
			r[in.dst] = uint64(uint32(r[in.dst]) >> (uint32(r[in.src]) & 31))
		case opNeg32:
			r[in.dst] = uint64(-uint32(r[in.dst]))
		case opMod32K:
			r[in.dst] = uint64(umod32(uint32(r[in.dst]), uint32(in.imm)))
		case opMod32X:
			r[in.dst] = uint64(umod32(uint32(r[in.dst]), uint32(r[in.src])))
		case opSmod32K:
			r[in.dst] = uint64(smod32(uint32(r[in.dst]), uint32(in.imm)))
		case opSmod32X:
			r[in.dst] = uint64(smod32(uint32(r[in.dst]), uint32(r[in.src])))
		case opXor32K:
			r[in.dst] = uint64(uint32(r[in.dst]) ^ uint32(in.imm))
		case opXor32X:
			r[in.dst] = uint64(uint32(r[in.dst]) ^ uint32(r[in.src]))
		case opMov32K:
			r[in.dst] = uint64(uint32(in.imm))
		case opMov32X:
			r[in.dst] = uint64(uint32(r[in.src]))
		case opMovsx8to32:
			r[in.dst] = uint64(uint32(int32(int8(r[in.src]))))
		case opMovsx16to32:
			r[in.dst] = uint64(uint32(int32(int16(r[in.src]))))
		case opArsh32K:
			r[in.dst] = uint64(uint32(int32(r[in.dst]) >> (uint32(in.imm) & 31)))
		case opArsh32X:
			r[in.dst] = uint64(uint32(int32(r[in.dst]) >> (uint32(r[in.src]) & 31)))

		// Byte order
		case opLe16:
			r[in.dst] = uint64(uint16(r[in.dst]))
		case opLe32:
			r[in.dst] = uint64(uint32(r[in.dst]))
		case opLe64:
		case opBe16:
			r[in.dst] = uint64(bits.ReverseBytes16(uint16(r[in.dst])))
		case opBe32:
			r[in.dst] = uint64(bits.ReverseBytes32(uint32(r[in.dst])))
		case opBe64:
			r[in.dst] = bits.ReverseBytes64(r[in.dst])

		// Jumps
		case opJa:
			goto taken
		case opJeq64K:
			if r[in.dst] == uint64(in.imm) {
				goto taken
			}
		case opJeq64X:
			if r[in.dst] == r[in.src] {
				goto taken
			}
		case opJgt64K:
			if r[in.dst] > uint64(in.imm) {
				goto taken
			}
		case opJgt64X:
			if r[in.dst] > r[in.src] {
				goto taken
			}
		case opJge64K:
			if r[in.dst] >= uint64(in.imm) {
				goto taken
			}
		case opJge64X:
			if r[in.dst] >= r[in.src] {
				goto taken
			}
		case opJset64K:
			if r[in.dst]&uint64(in.imm) != 0 {
				goto taken
			}
		case opJset64X:
			if r[in.dst]&r[in.src] != 0 {
				goto taken
			}
		case opJne64K:
			if r[in.dst] != uint64(in.imm) {
				goto taken
			}
		case opJne64X:
			if r[in.dst] != r[in.src] {
				goto taken
			}
		case opJsgt64K:
			if int64(r[in.dst]) > in.imm {
				goto taken
			}
		case opJsgt64X:
			if int64(r[in.dst]) > int64(r[in.src]) {
				goto taken
			}
		case opJsge64K:
			if int64(r[in.dst]) >= in.imm {
				goto taken
			}
		case opJsge64X:
			if int64(r[in.dst]) >= int64(r[in.src]) {
				goto taken
			}
		case opJlt64K:
			if r[in.dst] < uint64(in.imm) {
				goto taken
			}
		case opJlt64X:
			if r[in.dst] < r[in.src] {
				goto taken
			}
		case opJle64K:
			if r[in.dst] <= uint64(in.imm) {
				goto taken
			}
		case opJle64X:
			if r[in.dst] <= r[in.src] {
				goto taken
			}
		case opJslt64K:
			if int64(r[in.dst]) < in.imm {
				goto taken
			}
		case opJslt64X:
			if int64(r[in.dst]) < int64(r[in.src]) {
				goto taken
			}
		case opJsle64K:
			if int64(r[in.dst]) <= in.imm {
				goto taken
			}
		case opJsle64X:
			if int64(r[in.dst]) <= int64(r[in.src]) {
				goto taken
			}
		case opJeq32K:
			if uint32(r[in.dst]) == uint32(in.imm) {
				goto taken
			}
		case opJeq32X:
			if uint32(r[in.dst]) == uint32(r[in.src]) {
				goto taken
			}
		case opJgt32K:
			if uint32(r[in.dst]) > uint32(in.imm) {
				goto taken
			}
		case opJgt32X:
			if uint32(r[in.dst]) > uint32(r[in.src]) {
				goto taken
			}
		case opJge32K:
			if uint32(r[in.dst]) >= uint32(in.imm) {
				goto taken
			}
		case opJge32X:
			if uint32(r[in.dst]) >= uint32(r[in.src]) {
				goto taken
			}
		case opJset32K:
			if uint32(r[in.dst])&uint32(in.imm) != 0 {
				goto taken
			}
		case opJset32X:
			if uint32(r[in.dst])&uint32(r[in.src]) != 0 {
				goto taken
			}
		case opJne32K:
			if uint32(r[in.dst]) != uint32(in.imm) {
				goto taken
			}
		case opJne32X:
			if uint32(r[in.dst]) != uint32(r[in.src]) {
				goto taken
			}
		case opJsgt32K:
			if int32(r[in.dst]) > int32(in.imm) {
				goto taken
			}
		case opJsgt32X:
			if int32(r[in.dst]) > int32(r[in.src]) {
				goto taken
			}
		case opJsge32K:
			if int32(r[in.dst]) >= int32(in.imm) {
				goto taken
			}
		case opJsge32X:
			if int32(r[in.dst]) >= int32(r[in.src]) {
				goto taken
			}
		case opJlt32K:
			if uint32(r[in.dst]) < uint32(in.imm) {
				goto taken
			}
		case opJlt32X:
			if uint32(r[in.dst]) < uint32(r[in.src]) {
				goto taken
			}
		case opJle32K:
			if uint32(r[in.dst]) <= uint32(in.imm) {
				goto taken
			}
		case opJle32X:
			if uint32(r[in.dst]) <= uint32(r[in.src]) {
				goto taken
			}
		case opJslt32K:
			if int32(r[in.dst]) < int32(in.imm) {
				goto taken
			}
		case opJslt32X:
			if int32(r[in.dst]) < int32(r[in.src]) {
				goto taken
			}
		case opJsle32K:
			if int32(r[in.dst]) <= int32(in.imm) {
				goto taken
			}
		case opJsle32X:
			if int32(r[in.dst]) <= int32(r[in.src]) {
				goto taken
			}

		case opCall:
			stop, err := l.call(pc, uint32(in.imm))
			if err != nil || stop != Yielded {
				if err != nil {
					n--
				}
				l.Executed += n
				return l.stopAt(pc, stop, err)
			}
			if n >= budget {
				l.Executed += n
				l.PC = pc + 1
				return Yielded, nil
			}
		case opExit:
			l.Executed += n
			l.PC = pc
			return Exited, nil

		case opLdImm64:
			r[in.dst] = uint64(in.imm)
			pc += 2
			continue
		case opLdx:
			v, err := l.load(r[in.src]+uint64(int64(in.off)), int(in.size), pc)
			if err != nil {
				l.Executed += n - 1
				return l.stopAt(pc, Failed, err)
			}
			r[in.dst] = v
		case opLdxsx:
			v, err := l.load(r[in.src]+uint64(int64(in.off)), int(in.size), pc)
			if err != nil {
				l.Executed += n - 1
				return l.stopAt(pc, Failed, err)
			}
			r[in.dst] = signExtend(v, in.size)
		case opSt:
			if err := l.store(r[in.dst]+uint64(int64(in.off)), int(in.size), uint64(in.imm), pc); err != nil {
				l.Executed += n - 1
				return l.stopAt(pc, Failed, err)
			}
		case opStx:
			if err := l.store(r[in.dst]+uint64(int64(in.off)), int(in.size), r[in.src], pc); err != nil {
				l.Executed += n - 1
				return l.stopAt(pc, Failed, err)
			}
		case opAtomicAdd, opAtomicOr, opAtomicAnd, opAtomicXor, opAtomicAddF, opAtomicOrF, opAtomicAndF,
			opAtomicXorF, opAtomicXchg, opAtomicCmpxchg:
			if err := l.atomic(in, pc); err != nil {
				l.Executed += n - 1
				return l.stopAt(pc, Failed, err)
			}
		default: // opFiller, opInvalid: unreachable in a checked program
			l.Executed += n - 1
			return l.stopAt(pc, Failed, fail(abi.SHADER_ERR_ILLEGAL_INSTRUCTION, pc))
		}
		pc++
		continue
	taken:
		if t := int(in.tgt); t <= pc && n >= budget {
			l.Executed += n
			l.PC = t
			return Yielded, nil
		}
		pc = int(in.tgt)
	}
}

func (l *Lane) stopAt(pc int, s Stop, err error) (Stop, error) {
	if err != nil {
		l.PC = pc
		return Failed, err
	}
	l.PC = pc + 1
	return s, nil
}

func signExtend(v uint64, size uint8) uint64 {
	switch size {
	case 1:
		return uint64(int64(int8(v)))
	case 2:
		return uint64(int64(int16(v)))
	case 4:
		return uint64(int64(int32(v)))
	}
	return v
}

// Division as the BPF ISA defines it: by zero gives 0; modulo by zero leaves the dividend
// (its low 32 bits, zero-extended, for the 32-bit forms).

func udiv64(a, b uint64) uint64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func sdiv64(a, b uint64) uint64 {
	if b == 0 {
		return 0
	}
	return uint64(int64(a) / int64(b)) // MinInt64 / -1 = MinInt64 in Go, as in BPF
}

func umod64(a, b uint64) uint64 {
	if b == 0 {
		return a
	}
	return a % b
}

func smod64(a, b uint64) uint64 {
	if b == 0 {
		return a
	}
	return uint64(int64(a) % int64(b))
}

func udiv32(a, b uint32) uint32 {
	if b == 0 {
		return 0
	}
	return a / b
}

func sdiv32(a, b uint32) uint32 {
	if b == 0 {
		return 0
	}
	return uint32(int32(a) / int32(b))
}

func umod32(a, b uint32) uint32 {
	if b == 0 {
		return a
	}
	return a % b
}

func smod32(a, b uint32) uint32 {
	if b == 0 {
		return a
	}
	return uint32(int32(a) % int32(b))
}

// call runs a helper. Yielded means "continue" (the helper returned); AtBarrier and Sleeping
// stop the work-item after the call.
func (l *Lane) call(pc int, id uint32) (Stop, error) {
	r := &l.Regs
	dim := func() (int, error) {
		if r[1] > 2 {
			return 0, fail(abi.SHADER_ERR_BAD_HELPER, pc)
		}
		return int(r[1]), nil
	}
	switch id {
	case abi.SHADER_HELPER_GLOBAL_ID, abi.SHADER_HELPER_LOCAL_ID, abi.SHADER_HELPER_GROUP_ID,
		abi.SHADER_HELPER_LOCAL_SIZE, abi.SHADER_HELPER_NUM_GROUPS:
		d, err := dim()
		if err != nil {
			return Failed, err
		}
		r[0] = [...]*[3]uint64{&l.Dims.Global, &l.Dims.Local, &l.Dims.Group, &l.Dims.LocalSize, &l.Dims.NumGroups}[id-abi.SHADER_HELPER_GLOBAL_ID][d]
		return Yielded, nil
	case abi.SHADER_HELPER_BARRIER:
		r[0] = 0
		return AtBarrier, nil
	case abi.SHADER_HELPER_TRAP:
		r[0] = 0
		if l.trap != nil {
			l.trap.Trap(l, pc, uint32(r[1]))
		}
		return Yielded, nil
	case abi.SHADER_HELPER_SLEEP:
		r[0] = 0
		l.SleepNS = min(r[1], abi.SHADER_HELPER_SLEEP_MAX)
		return Sleeping, nil
	}
	return Failed, fail(abi.SHADER_ERR_BAD_HELPER, pc)
}

// stackOff locates addr in the stack: off, true inside it; an *Error if addr is in the stack
// window but not inside the stack; ok false for ordinary memory.
func (l *Lane) stackOff(addr uint64, size int, pc int) (uint64, bool, error) {
	lo := uint64(abi.SHADER_STACK_TOP) - uint64(len(l.Stack))
	if off := addr - lo; off < uint64(len(l.Stack)) && off+uint64(size) <= uint64(len(l.Stack)) {
		return off, true, nil
	}
	if addr >= abi.SHADER_STACK_TOP-abi.SHADER_STACK_WINDOW && addr < abi.SHADER_STACK_TOP+abi.SHADER_STACK_WINDOW {
		return 0, false, &Error{Reason: abi.SHADER_ERR_STACK_OVERFLOW, PC: pc, Addr: addr}
	}
	return 0, false, nil
}

func (l *Lane) load(addr uint64, size int, pc int) (uint64, error) {
	if addr&uint64(size-1) != 0 {
		return 0, &Error{Reason: abi.SHADER_ERR_MISALIGNED, PC: pc, Addr: addr}
	}
	off, inStack, err := l.stackOff(addr, size, pc)
	if err != nil {
		return 0, err
	}
	if inStack {
		return getLE(l.Stack[off:], size), nil
	}
	v, err := l.mem.Load(addr, size)
	if err != nil {
		return 0, &Error{Reason: abi.SHADER_ERR_MEMORY_FAULT, PC: pc, Addr: addr, Err: err}
	}
	return v, nil
}

func (l *Lane) store(addr uint64, size int, v uint64, pc int) error {
	if addr&uint64(size-1) != 0 {
		return &Error{Reason: abi.SHADER_ERR_MISALIGNED, PC: pc, Addr: addr}
	}
	off, inStack, err := l.stackOff(addr, size, pc)
	if err != nil {
		return err
	}
	if inStack {
		putLE(l.Stack[off:], size, v)
		l.stackClean = false
		return nil
	}
	if err := l.mem.Store(addr, size, v); err != nil {
		return &Error{Reason: abi.SHADER_ERR_MEMORY_FAULT, PC: pc, Addr: addr, Err: err}
	}
	return nil
}

var atomicKinds = [...]AtomicOp{
	opAtomicAdd - opAtomicAdd: AtomicAdd, opAtomicOr - opAtomicAdd: AtomicOr, opAtomicAnd - opAtomicAdd: AtomicAnd,
	opAtomicXor - opAtomicAdd: AtomicXor, opAtomicAddF - opAtomicAdd: AtomicAdd, opAtomicOrF - opAtomicAdd: AtomicOr,
	opAtomicAndF - opAtomicAdd: AtomicAnd, opAtomicXorF - opAtomicAdd: AtomicXor, opAtomicXchg - opAtomicAdd: AtomicXchg,
	opAtomicCmpxchg - opAtomicAdd: AtomicCmpxchg,
}

// atomic runs an atomic instruction: [dst+off] op= src; the fetching forms put the old value in
// src, cmpxchg compares with R0 and puts the old value in R0. 32-bit forms act on the low word
// and zero-extend what they return.
func (l *Lane) atomic(in *insn, pc int) error {
	r := &l.Regs
	addr := r[in.dst] + uint64(int64(in.off))
	size := int(in.size)
	if addr&uint64(size-1) != 0 {
		return &Error{Reason: abi.SHADER_ERR_MISALIGNED, PC: pc, Addr: addr}
	}
	kind := atomicKinds[in.op-opAtomicAdd]
	v, cmp := r[in.src], r[0]
	if size == 4 {
		v, cmp = uint64(uint32(v)), uint64(uint32(cmp))
	}
	off, inStack, err := l.stackOff(addr, size, pc)
	if err != nil {
		return err
	}
	var old uint64
	if inStack {
		old = getLE(l.Stack[off:], size)
		putLE(l.Stack[off:], size, kind.Apply(old, v, cmp))
		l.stackClean = false
	} else if old, err = l.mem.Atomic(kind, addr, size, v, cmp); err != nil {
		return &Error{Reason: abi.SHADER_ERR_MEMORY_FAULT, PC: pc, Addr: addr, Err: err}
	}
	switch in.op {
	case opAtomicAddF, opAtomicOrF, opAtomicAndF, opAtomicXorF, opAtomicXchg:
		r[in.src] = old
	case opAtomicCmpxchg:
		r[0] = old
	}
	return nil
}

func getLE(b []byte, size int) uint64 {
	switch size {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

func putLE(b []byte, size int, v uint64) {
	switch size {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, v)
	}
}
