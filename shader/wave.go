package shader

import (
	"encoding/binary"
	"strconv"

	"vgpu/abi"
)

// RangeMemory is an optional interface of a Memory: a whole range at once. A wave's load or
// store whose work-items touch consecutive elements becomes one such access (coalescing, as a
// GPU's memory pipeline does). A failed access has had no effect, or, for a store, may have
// written a prefix of the range that the work-items' own stores then write again.
type RangeMemory interface {
	// LoadRange and StoreRange access len(p)/size consecutive elements of size bytes (the
	// work-items' own accesses, which a checker may want to see one by one).
	LoadRange(addr uint64, p []byte, size int) error
	StoreRange(addr uint64, p []byte, size int) error
}

// MaxWave is the most work-items a Wave holds (compute's largest workgroup).
const MaxWave = 1024

// Wave is the register file of work-items running in lockstep: each instruction is decoded
// once and applied to all of them, which is what makes a wave cheaper than its work-items'
// Runs. A register is held in one of two forms, as a GPU holds scalar and vector registers:
// linear — work-item i's value is base + i·stride (a uniform value has stride 0: the kernel
// arguments, a loaded pointer; the global id has stride 1) — computed once for the wave and
// carried through the operations that keep it linear (adds, subtractions, multiplies and
// left shifts by uniform values: exact modulo 2^64); or vector, one value per work-item.
// A linear address with the access size as its stride is a coalesced access found without
// looking at the work-items' addresses. A Wave is reused; its work-items become Lanes again
// (Scatter) only when they leave the wave.
type Wave struct {
	regs     [11][]uint64 // vector values (valid where form[r].vector)
	form     [11]regForm
	PC       int
	Executed uint64 // instructions executed per work-item since Start or Gather
	n        int
	prog     *Program
	mem      Memory
	rm       RangeMemory
	buf      waveBuf // staging for coalesced accesses
}

// regForm is how a Wave holds one register.
type regForm struct {
	vector       bool   // the values are in regs[r]
	base, stride uint64 // else work-item i holds base + i·stride
}

// NewWave makes a Wave for up to MaxWave work-items.
func NewWave() *Wave {
	w := &Wave{}
	regs := make([]uint64, 11*MaxWave)
	for r := range w.regs {
		w.regs[r] = regs[r*MaxWave : (r+1)*MaxWave : (r+1)*MaxWave]
	}
	return w
}

// Len is the number of work-items in the wave.
func (w *Wave) Len() int { return w.n }

// Start puts n work-items of p at the entry with every register 0 but R10 (the stack top);
// the caller then sets the entry registers (abi.SHADER_REG_*) with SetLinear or Vector, as
// Lane.Reset would have (Dims and stacks are the Lanes' business, made when they leave).
func (w *Wave) Start(p *Program, mem Memory, n int) {
	w.bind(p, mem, n)
	w.form = [11]regForm{}
	w.form[10].base = abi.SHADER_STACK_TOP
	w.PC, w.Executed = 0, 0
}

// SetLinear sets register r of work-item i to base + i·stride.
func (w *Wave) SetLinear(r int, base, stride uint64) { w.form[r] = regForm{base: base, stride: stride} }

// Vector returns register r's values, one per work-item, for the caller to read or write.
func (w *Wave) Vector(r int) []uint64 { return w.vec(uint8(r)) }

// Gather loads work-items that are all at one PC (the caller checks) into the wave.
func (w *Wave) Gather(ls []*Lane) {
	w.bind(ls[0].prog, ls[0].mem, len(ls))
	for r := range w.regs {
		w.form[r] = regForm{vector: true}
	}
	for i, l := range ls {
		for r := range w.regs {
			w.regs[r][i] = l.Regs[r]
		}
	}
	w.PC, w.Executed = ls[0].PC, 0
}

// Scatter writes the wave's state back into its work-items' Lanes: registers, the PC and
// the instructions executed since Start or Gather.
func (w *Wave) Scatter(ls []*Lane) {
	for r := range w.regs {
		w.vec(uint8(r))
	}
	for i, l := range ls[:w.n] {
		for r := range w.regs {
			l.Regs[r] = w.regs[r][i]
		}
		l.PC = w.PC
		l.Executed += w.Executed
	}
}

func (w *Wave) bind(p *Program, mem Memory, n int) {
	if n < 1 || n > MaxWave {
		panic("shader: a wave of " + strconv.Itoa(n) + " work-items")
	}
	w.n, w.prog, w.mem = n, p, mem
	w.rm, _ = mem.(RangeMemory)
}

// vec makes register r a vector (computing its values from a linear form) and returns them.
func (w *Wave) vec(r uint8) []uint64 {
	v := w.regs[r][:w.n]
	f := &w.form[r]
	if !f.vector {
		x := f.base
		for i := range v {
			v[i] = x
			x += f.stride
		}
		f.vector = true
	}
	return v
}

// overwrite makes register r a vector whose old values do not matter (the instruction writes
// every one) and returns it.
func (w *Wave) overwrite(r uint8) []uint64 {
	w.form[r].vector = true
	return w.regs[r][:w.n]
}

func (w *Wave) setLinear(r uint8, base, stride uint64) {
	w.form[r] = regForm{base: base, stride: stride}
}

func fill(s []uint64, v uint64) {
	for i := range s {
		s[i] = v
	}
}

// RunWave executes Lanes that are already made, all at one PC, in lockstep through a new
// Wave (see Wave.Run). A compute unit keeps one Wave and starts workgroups in it instead.
func RunWave(ls []*Lane, budget uint64) Stop {
	if len(ls) == 0 {
		return Exited
	}
	w := NewWave()
	w.Gather(ls)
	stop := w.Run(budget)
	w.Scatter(ls)
	return stop
}

// Run executes the wave's work-items in lockstep: all at one PC, ready, on one program and
// memory, each instruction decoded once for all of them. It goes on while they stay together
// — until they exit, reach a checkpoint with budget used, diverge at a branch, or meet an
// instruction without a lockstep form (a helper call, an atomic, a load or store that faults,
// is misaligned or touches the stack window) — and then returns Exited when all exited, else
// Yielded with PC the next instruction none has executed: Scatter them into Lanes, whose
// Runs continue from there. Results are those of running each work-item alone: work-items
// never see each other's registers, and nothing orders their memory accesses without a
// barrier or an atomic either way.
func (w *Wave) Run(budget uint64) Stop {
	code := w.prog.code
	pc := w.PC
	var done uint64
	defer func() { w.Executed += done }()
	for {
		in := &code[pc]
		switch in.op {
		case opLdx:
			if !w.load(in) {
				return w.leave(pc)
			}
		case opStx:
			if !w.store(in) {
				return w.leave(pc)
			}
		case opExit:
			done++
			w.PC = pc
			return Exited
		case opJa:
			done++
			if t := int(in.tgt); t <= pc && done >= budget {
				return w.leave(t)
			}
			pc = int(in.tgt)
			continue
		case opJne64K, opJeq64K, opJlt64K, opJge64K, opJgt64K, opJle64K:
			taken, together := w.branch(in)
			if !together {
				return w.leave(pc) // they part here: each goes its own way alone
			}
			done++
			if taken {
				if t := int(in.tgt); t <= pc && done >= budget {
					return w.leave(t)
				}
				pc = int(in.tgt)
			} else {
				pc++
			}
			continue
		case opLdImm64:
			w.setLinear(in.dst, uint64(in.imm), 0)
			done++
			pc += 2
			continue
		default:
			if !w.alu(in) {
				return w.leave(pc) // no lockstep form: each runs it alone
			}
		}
		done++
		pc++
	}
}

// branch evaluates a conditional jump for every work-item: whether it is taken, and whether
// all agree.
func (w *Wave) branch(in *insn) (taken, together bool) {
	f := w.form[in.dst]
	if !f.vector {
		taken = waveCond(in, f.base)
		if f.stride == 0 {
			return taken, true
		}
		x := f.base
		for range w.n {
			if waveCond(in, x) != taken {
				return taken, false
			}
			x += f.stride
		}
		return taken, true
	}
	v := w.regs[in.dst][:w.n]
	taken = waveCond(in, v[0])
	for _, x := range v[1:] {
		if waveCond(in, x) != taken {
			return taken, false
		}
	}
	return taken, true
}

// alu runs an ALU instruction for the wave: on the linear forms when the result stays
// linear, else on vectors. false: the operation has no lockstep form.
func (w *Wave) alu(in *insn) bool {
	if !lockstepALU(in.op) {
		return false
	}
	if w.linearALU(in) {
		return true
	}
	k := uint64(in.imm)
	switch in.op {
	case opMov64X:
		copy(w.overwrite(in.dst), w.vec(in.src))
		return true
	case opMov32X:
		rs := w.vec(in.src)
		rd := w.overwrite(in.dst)
		for i := range rd {
			rd[i] = uint64(uint32(rs[i]))
		}
		return true
	}
	rd := w.vec(in.dst)
	switch in.op {
	case opAdd64K:
		for i := range rd {
			rd[i] += k
		}
	case opSub64K:
		for i := range rd {
			rd[i] -= k
		}
	case opMul64K:
		for i := range rd {
			rd[i] *= k
		}
	case opOr64K:
		for i := range rd {
			rd[i] |= k
		}
	case opAnd64K:
		for i := range rd {
			rd[i] &= k
		}
	case opXor64K:
		for i := range rd {
			rd[i] ^= k
		}
	case opLsh64K:
		for i := range rd {
			rd[i] <<= k & 63
		}
	case opRsh64K:
		for i := range rd {
			rd[i] >>= k & 63
		}
	case opAdd32K:
		for i := range rd {
			rd[i] = uint64(uint32(rd[i]) + uint32(k))
		}
	case opOr32K:
		for i := range rd {
			rd[i] = uint64(uint32(rd[i]) | uint32(k))
		}
	default:
		rs := w.vec(in.src)[:len(rd)]
		switch in.op {
		case opAdd64X:
			for i := range rd {
				rd[i] += rs[i]
			}
		case opSub64X:
			for i := range rd {
				rd[i] -= rs[i]
			}
		case opMul64X:
			for i := range rd {
				rd[i] *= rs[i]
			}
		case opOr64X:
			for i := range rd {
				rd[i] |= rs[i]
			}
		case opAnd64X:
			for i := range rd {
				rd[i] &= rs[i]
			}
		case opXor64X:
			for i := range rd {
				rd[i] ^= rs[i]
			}
		case opAdd32X:
			for i := range rd {
				rd[i] = uint64(uint32(rd[i]) + uint32(rs[i]))
			}
		}
	}
	return true
}

// lockstepALU: the ALU operations a wave runs (the others leave it).
func lockstepALU(o op) bool {
	switch o {
	case opAdd64K, opAdd64X, opSub64K, opSub64X, opMul64K, opMul64X, opOr64K, opOr64X,
		opAnd64K, opAnd64X, opXor64K, opXor64X, opLsh64K, opRsh64K, opMov64K, opMov64X,
		opAdd32K, opAdd32X, opOr32K, opMov32K, opMov32X:
		return true
	}
	return false
}

// linearALU computes an ALU instruction on linear forms when its operands are linear and
// its result is too; false leaves it to the vectors.
func (w *Wave) linearALU(in *insn) bool {
	src := regForm{base: uint64(in.imm)} // the K forms' immediate: uniform
	switch in.op {
	case opAdd64X, opSub64X, opMul64X, opOr64X, opAnd64X, opXor64X, opMov64X, opAdd32X, opMov32X:
		src = w.form[in.src]
	}
	if src.vector {
		return false
	}
	switch in.op {
	case opMov64K, opMov64X:
		w.form[in.dst] = src
		return true
	case opMov32K, opMov32X:
		if src.stride != 0 {
			return false
		}
		w.setLinear(in.dst, uint64(uint32(src.base)), 0)
		return true
	}
	d := w.form[in.dst]
	if d.vector {
		return false
	}
	if d.stride == 0 && src.stride == 0 {
		w.setLinear(in.dst, scalarALU(in.op, d.base, src.base), 0) // uniform: any operation
		return true
	}
	switch in.op {
	case opAdd64K, opAdd64X:
		w.setLinear(in.dst, d.base+src.base, d.stride+src.stride)
	case opSub64K, opSub64X:
		w.setLinear(in.dst, d.base-src.base, d.stride-src.stride)
	case opMul64K, opMul64X:
		switch {
		case src.stride == 0:
			w.setLinear(in.dst, d.base*src.base, d.stride*src.base)
		case d.stride == 0:
			w.setLinear(in.dst, d.base*src.base, d.base*src.stride)
		default:
			return false
		}
	case opLsh64K:
		sh := src.base & 63
		w.setLinear(in.dst, d.base<<sh, d.stride<<sh)
	default:
		return false
	}
	return true
}

// scalarALU is one work-item's result of a lockstep ALU operation on dst value a and source
// value (or immediate) b.
func scalarALU(o op, a, b uint64) uint64 {
	switch o {
	case opAdd64K, opAdd64X:
		return a + b
	case opSub64K, opSub64X:
		return a - b
	case opMul64K, opMul64X:
		return a * b
	case opOr64K, opOr64X:
		return a | b
	case opAnd64K, opAnd64X:
		return a & b
	case opXor64K, opXor64X:
		return a ^ b
	case opLsh64K:
		return a << (b & 63)
	case opRsh64K:
		return a >> (b & 63)
	case opAdd32K, opAdd32X:
		return uint64(uint32(a) + uint32(b))
	case opOr32K:
		return uint64(uint32(a) | uint32(b))
	}
	panic("shader: scalarALU of a non-lockstep operation")
}

// leave stops the wave at pc, the next instruction none has executed.
func (w *Wave) leave(pc int) Stop {
	w.PC = pc
	return Yielded
}

func waveCond(in *insn, v uint64) bool {
	k := uint64(in.imm)
	switch in.op {
	case opJne64K:
		return v != k
	case opJeq64K:
		return v == k
	case opJlt64K:
		return v < k
	case opJge64K:
		return v >= k
	case opJgt64K:
		return v > k
	}
	return v <= k // opJle64K
}

// waveBuf is the staging buffer of coalesced accesses (MaxWave work-items of 8 bytes).
type waveBuf [MaxWave * 8]byte

// load is a lockstep LDX: one access for uniform or consecutive addresses, else one per
// work-item. false (nothing written to any register) on anything else: a fault, misalignment,
// the stack.
func (w *Wave) load(in *insn) bool {
	size := int(in.size)
	n := w.n
	first, uniform, consecutive, ok := w.access(in.src, in.off, size)
	if !ok {
		return false
	}
	switch {
	case uniform:
		v, err := w.mem.Load(first, size)
		if err != nil {
			return false
		}
		w.setLinear(in.dst, v, 0)
	case consecutive && w.rm != nil:
		b := w.buf[:n*size]
		if err := w.rm.LoadRange(first, b, size); err != nil {
			return false
		}
		unpackLE(w.overwrite(in.dst), b, size)
	default:
		// Each address alone; registers are written only once every load succeeded.
		rs := w.vec(in.src)
		o := uint64(int64(in.off))
		vals := w.buf[:n*8]
		for i, a := range rs {
			v, err := w.mem.Load(a+o, size)
			if err != nil {
				return false
			}
			binary.LittleEndian.PutUint64(vals[8*i:], v)
		}
		unpackLE(w.overwrite(in.dst), vals, 8)
	}
	return true
}

// store is a lockstep STX: one access for consecutive addresses, else one per work-item in
// order. false on a fault (what was stored is stored again by the work-items' own Runs, with
// the same values) or on anything without a lockstep form.
func (w *Wave) store(in *insn) bool {
	size := int(in.size)
	first, uniform, consecutive, ok := w.access(in.dst, in.off, size)
	if !ok {
		return false
	}
	rs := w.vec(in.src)
	if consecutive && !uniform && w.rm != nil {
		b := w.buf[:w.n*size]
		packLE(b, rs, size)
		return w.rm.StoreRange(first, b, size) == nil
	}
	o := uint64(int64(in.off))
	for i, a := range w.vec(in.dst) {
		if w.mem.Store(a+o, size, rs[i]) != nil {
			return false
		}
	}
	return true
}

// access checks the work-items' addresses (register base + off) for one lockstep access of
// size bytes: all aligned and outside the stack window; uniform (all equal) or consecutive
// (each size after the last). A linear base answers at once; a vector's addresses are looked
// at one by one.
func (w *Wave) access(base uint8, off int16, size int) (first uint64, uniform, consecutive, ok bool) {
	f := w.form[base]
	if f.vector {
		return waveAddrs(w.regs[base][:w.n], off, size)
	}
	first = f.base + uint64(int64(off))
	switch f.stride {
	case 0:
		return first, true, w.n == 1, outsideStack(first, uint64(size), size)
	case uint64(size):
		return first, w.n == 1, true, outsideStack(first, uint64(w.n*size), size)
	}
	return waveAddrs(w.vec(base), off, size)
}

// outsideStack: [first, first+length) is aligned to size, does not wrap, and lies wholly
// outside the stack window.
func outsideStack(first, length uint64, size int) bool {
	end := first + length
	lo, hi := uint64(abi.SHADER_STACK_TOP-abi.SHADER_STACK_WINDOW), uint64(abi.SHADER_STACK_TOP+abi.SHADER_STACK_WINDOW)
	return first&uint64(size-1) == 0 && end >= first && !(first < hi && end > lo)
}

// waveAddrs checks vector addresses one by one (see access).
func waveAddrs(base []uint64, off int16, size int) (first uint64, uniform, consecutive, ok bool) {
	o := uint64(int64(off))
	first = base[0] + o
	consecutive = true
	for i, a := range base {
		if a+o != first+uint64(i*size) {
			consecutive = false
			break
		}
	}
	if consecutive {
		return first, len(base) == 1, true, outsideStack(first, uint64(len(base)*size), size)
	}
	uniform = true
	for _, b := range base {
		a := b + o
		if a&uint64(size-1) != 0 || a >= abi.SHADER_STACK_TOP-abi.SHADER_STACK_WINDOW && a < abi.SHADER_STACK_TOP+abi.SHADER_STACK_WINDOW {
			return 0, false, false, false
		}
		uniform = uniform && a == first
	}
	return first, uniform, false, true
}

// unpackLE reads len(dst) little-endian elements of size bytes from b.
func unpackLE(dst []uint64, b []byte, size int) {
	le := binary.LittleEndian
	switch size {
	case 1:
		for i := range dst {
			dst[i] = uint64(b[i])
		}
	case 2:
		b = b[:2*len(dst)]
		for i := range dst {
			dst[i] = uint64(le.Uint16(b[2*i:]))
		}
	case 4:
		b = b[:4*len(dst)]
		for i := range dst {
			dst[i] = uint64(le.Uint32(b[4*i:]))
		}
	default:
		b = b[:8*len(dst)]
		for i := range dst {
			dst[i] = le.Uint64(b[8*i:])
		}
	}
}

// packLE writes src as little-endian elements of size bytes into b.
func packLE(b []byte, src []uint64, size int) {
	le := binary.LittleEndian
	switch size {
	case 1:
		for i, v := range src {
			b[i] = byte(v)
		}
	case 2:
		b = b[:2*len(src)]
		for i, v := range src {
			le.PutUint16(b[2*i:], uint16(v))
		}
	case 4:
		b = b[:4*len(src)]
		for i, v := range src {
			le.PutUint32(b[4*i:], uint32(v))
		}
	default:
		b = b[:8*len(src)]
		for i, v := range src {
			le.PutUint64(b[8*i:], v)
		}
	}
}
