package shader

import (
	"encoding/binary"

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

// RunWave executes work-items in lockstep: all are at one PC, ready, on one program and
// memory (the caller checks), and each instruction is decoded once for all of them. It goes
// on while they stay together — until they exit, reach a checkpoint with budget used, diverge
// at a branch, or meet an instruction without a lockstep form (a helper call, an atomic, a
// load or store that faults, is misaligned or touches the stack window) — and then returns
// with every work-item in a state its Run continues from: Exited when all exited, else Yielded
// (their PCs may now differ). Results are those of running each work-item alone: work-items
// never see each other's registers, and nothing orders their memory accesses without a barrier
// or an atomic either way.
func RunWave(ls []*Lane, budget uint64) Stop {
	if len(ls) == 0 {
		return Exited
	}
	l0 := ls[0]
	code := l0.prog.code
	rm, _ := l0.mem.(RangeMemory)
	pc := l0.PC
	var n uint64
	defer func() {
		for _, l := range ls {
			l.Executed += n
		}
	}()
	for {
		in := &code[pc]
		d, s := in.dst, in.src
		switch in.op {
		case opAdd64K:
			for _, l := range ls {
				l.Regs[d] += uint64(in.imm)
			}
		case opAdd64X:
			for _, l := range ls {
				l.Regs[d] += l.Regs[s]
			}
		case opSub64K:
			for _, l := range ls {
				l.Regs[d] -= uint64(in.imm)
			}
		case opSub64X:
			for _, l := range ls {
				l.Regs[d] -= l.Regs[s]
			}
		case opMul64K:
			for _, l := range ls {
				l.Regs[d] *= uint64(in.imm)
			}
		case opMul64X:
			for _, l := range ls {
				l.Regs[d] *= l.Regs[s]
			}
		case opOr64K:
			for _, l := range ls {
				l.Regs[d] |= uint64(in.imm)
			}
		case opOr64X:
			for _, l := range ls {
				l.Regs[d] |= l.Regs[s]
			}
		case opAnd64K:
			for _, l := range ls {
				l.Regs[d] &= uint64(in.imm)
			}
		case opAnd64X:
			for _, l := range ls {
				l.Regs[d] &= l.Regs[s]
			}
		case opXor64K:
			for _, l := range ls {
				l.Regs[d] ^= uint64(in.imm)
			}
		case opXor64X:
			for _, l := range ls {
				l.Regs[d] ^= l.Regs[s]
			}
		case opLsh64K:
			for _, l := range ls {
				l.Regs[d] <<= uint64(in.imm) & 63
			}
		case opRsh64K:
			for _, l := range ls {
				l.Regs[d] >>= uint64(in.imm) & 63
			}
		case opMov64K:
			for _, l := range ls {
				l.Regs[d] = uint64(in.imm)
			}
		case opMov64X:
			for _, l := range ls {
				l.Regs[d] = l.Regs[s]
			}
		case opAdd32K:
			for _, l := range ls {
				l.Regs[d] = uint64(uint32(l.Regs[d]) + uint32(in.imm))
			}
		case opAdd32X:
			for _, l := range ls {
				l.Regs[d] = uint64(uint32(l.Regs[d]) + uint32(l.Regs[s]))
			}
		case opOr32K:
			for _, l := range ls {
				l.Regs[d] = uint64(uint32(l.Regs[d]) | uint32(in.imm))
			}
		case opMov32K:
			for _, l := range ls {
				l.Regs[d] = uint64(uint32(in.imm))
			}
		case opMov32X:
			for _, l := range ls {
				l.Regs[d] = uint64(uint32(l.Regs[s]))
			}
		case opLdImm64:
			for _, l := range ls {
				l.Regs[d] = uint64(in.imm)
			}
			n++
			pc += 2
			continue
		case opLdx:
			if !waveLoad(ls, in, rm) {
				return waveLeave(ls, pc)
			}
		case opStx:
			if !waveStore(ls, in, rm) {
				return waveLeave(ls, pc)
			}
		case opExit:
			n++
			for _, l := range ls {
				l.PC = pc
			}
			return Exited
		case opJa:
			n++
			if t := int(in.tgt); t <= pc && n >= budget {
				return waveLeave(ls, t)
			}
			pc = int(in.tgt)
			continue
		case opJne64K, opJeq64K, opJlt64K, opJge64K, opJgt64K, opJle64K:
			taken := waveCond(in, ls[0].Regs[d])
			for _, l := range ls[1:] {
				if waveCond(in, l.Regs[d]) != taken {
					return waveLeave(ls, pc) // they part here: each goes its own way alone
				}
			}
			n++
			if taken {
				if t := int(in.tgt); t <= pc && n >= budget {
					return waveLeave(ls, t)
				}
				pc = int(in.tgt)
			} else {
				pc++
			}
			continue
		default:
			return waveLeave(ls, pc) // no lockstep form: each runs it alone
		}
		n++
		pc++
	}
}

// waveLeave puts every work-item at pc (the next instruction none has executed) and hands
// them back to their own Runs.
func waveLeave(ls []*Lane, pc int) Stop {
	for _, l := range ls {
		l.PC = pc
	}
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

// waveAddrs checks the work-items' addresses for one lockstep access: all aligned and outside
// the stack window; uniform (all equal) or consecutive (each size after the last).
func waveAddrs(ls []*Lane, base uint8, off int16, size int) (first uint64, uniform, consecutive, ok bool) {
	first = ls[0].Regs[base] + uint64(int64(off))
	uniform, consecutive = true, true
	for i, l := range ls {
		a := l.Regs[base] + uint64(int64(off))
		if a&uint64(size-1) != 0 || a >= abi.SHADER_STACK_TOP-abi.SHADER_STACK_WINDOW && a < abi.SHADER_STACK_TOP+abi.SHADER_STACK_WINDOW {
			return 0, false, false, false
		}
		uniform = uniform && a == first
		consecutive = consecutive && a == first+uint64(i*size)
	}
	return first, uniform, consecutive, true
}

// waveBuf is the staging buffer of coalesced accesses (a wave is at most compute's 1024
// work-items of 8 bytes).
type waveBuf [1024 * 8]byte

var waveBufs = make(chan *waveBuf, 16)

func getWaveBuf() *waveBuf {
	select {
	case b := <-waveBufs:
		return b
	default:
		return new(waveBuf)
	}
}

func putWaveBuf(b *waveBuf) {
	select {
	case waveBufs <- b:
	default:
	}
}

// waveLoad is a lockstep LDX: one access for uniform or consecutive addresses, else one per
// work-item. false (nothing written to any register) on anything else: a fault, misalignment,
// the stack.
func waveLoad(ls []*Lane, in *insn, rm RangeMemory) bool {
	size := int(in.size)
	first, uniform, consecutive, ok := waveAddrs(ls, in.src, in.off, size)
	if !ok {
		return false
	}
	mem := ls[0].mem
	switch {
	case uniform:
		v, err := mem.Load(first, size)
		if err != nil {
			return false
		}
		for _, l := range ls {
			l.Regs[in.dst] = v
		}
	case consecutive && rm != nil && len(ls)*size <= len(waveBuf{}):
		buf := getWaveBuf()
		defer putWaveBuf(buf)
		b := buf[:len(ls)*size]
		if err := rm.LoadRange(first, b, size); err != nil {
			return false
		}
		for i, l := range ls {
			l.Regs[in.dst] = getLE(b[i*size:], size)
		}
	default:
		// Each address alone; registers are written only once every load succeeded.
		buf := getWaveBuf()
		defer putWaveBuf(buf)
		vals := buf[:len(ls)*8]
		for i, l := range ls {
			v, err := mem.Load(l.Regs[in.src]+uint64(int64(in.off)), size)
			if err != nil {
				return false
			}
			binary.LittleEndian.PutUint64(vals[8*i:], v)
		}
		for i, l := range ls {
			l.Regs[in.dst] = binary.LittleEndian.Uint64(vals[8*i:])
		}
	}
	return true
}

// waveStore is a lockstep STX: one access for consecutive addresses, else one per work-item
// in order. false on a fault (what was stored is stored again by the work-items' own Runs,
// with the same values) or on anything without a lockstep form.
func waveStore(ls []*Lane, in *insn, rm RangeMemory) bool {
	size := int(in.size)
	first, uniform, consecutive, ok := waveAddrs(ls, in.dst, in.off, size)
	if !ok {
		return false
	}
	mem := ls[0].mem
	if consecutive && !uniform && rm != nil && len(ls)*size <= len(waveBuf{}) {
		buf := getWaveBuf()
		defer putWaveBuf(buf)
		b := buf[:len(ls)*size]
		for i, l := range ls {
			putLE(b[i*size:], size, l.Regs[in.src])
		}
		return rm.StoreRange(first, b, size) == nil
	}
	for _, l := range ls {
		if mem.Store(l.Regs[in.dst]+uint64(int64(in.off)), size, l.Regs[in.src]) != nil {
			return false
		}
	}
	return true
}
