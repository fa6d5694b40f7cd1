package bench

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
	"vgpu/pm4"
	"vgpu/shader"
	"vgpu/shaders"
)

// Shader figures (issue 11, item 7): dispatches through the whole device path — SET_SH_REG,
// DISPATCH_DIRECT, an interrupting fence the client sleeps on — beside Go doing the same work
// in the same run. The programs and argument blocks live in VRAM; vector add's arrays in the
// rig's guest memory (through the GART), where the Go loop reads and writes them too.

const (
	vramShader = 0x6000000 // programs
	vramArgs   = 0x6100000 // argument blocks
)

// aluIters and aluItems shape the ALU-bound dispatch: one workgroup of aluItems work-items
// (one CU, so one core), each running aluIters iterations of aluBody.
const (
	aluIters = 1 << 16
	aluItems = 64
)

// aluShader is an ALU-bound loop on registers only: eight independent-ish operations and the
// loop's two per iteration; the result is stored so the work is checked.
func aluShader() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R9, asm.R2), // global id: where the result goes
		asm.Mov.Imm(asm.R1, aluIters),
		asm.Mov.Reg(asm.R3, asm.R9),
		asm.Mov.Imm(asm.R4, 3),
		asm.Mov.Imm(asm.R5, 4),
		asm.Mov.Imm(asm.R6, 1),
		asm.Add.Reg(asm.R6, asm.R3).WithSymbol("loop"),
		asm.Xor.Reg(asm.R3, asm.R4),
		asm.Mul.Imm(asm.R4, 3),
		asm.LSh.Imm(asm.R5, 1),
		asm.Sub.Reg(asm.R5, asm.R6),
		asm.Or.Imm32(asm.R3, 5),
		asm.Add.Imm(asm.R4, 7),
		asm.RSh.Imm(asm.R6, 1),
		asm.Sub.Imm(asm.R1, 1),
		asm.JNE.Imm(asm.R1, 0, "loop"),
		asm.Add.Reg(asm.R6, asm.R5),
		asm.LoadImm(asm.R7, abi.GPU_FB_BASE+vramScratch, asm.DWord),
		asm.LSh.Imm(asm.R9, 3),
		asm.Add.Reg(asm.R7, asm.R9),
		asm.StoreMem(asm.R7, 0, asm.R6, asm.DWord),
		asm.Return(),
	}
}

// aluInsns is the instructions one work-item of aluShader executes.
const aluInsns = 6 + 10*aluIters + 6

// aluGo is aluShader's work-item in Go: the baseline.
func aluGo(gid uint64) uint64 {
	r1, r3, r4, r5, r6 := uint64(aluIters), gid, uint64(3), uint64(4), uint64(1)
	for {
		r6 += r3
		r3 ^= r4
		r4 *= 3
		r5 <<= 1
		r5 -= r6
		r3 = uint64(uint32(r3) | 5)
		r4 += 7
		r6 >>= 1
		r1--
		if r1 == 0 {
			break
		}
	}
	return r6 + r5
}

// shaderRig is a rig with a program in VRAM.
type shaderRig struct {
	*Rig
	prog  pm4.Shader
	seq   uint32
	items int
}

func newShaderRig(insns asm.Instructions, threads [3]uint32, guestBytes, cus int) (*shaderRig, error) {
	_, code, err := shader.Build(insns)
	if err != nil {
		return nil, err
	}
	rig, err := NewRig(RigConfig{RingDwords: 1 << 12, GuestBytes: guestBytes, ComputeUnits: cus})
	if err != nil {
		return nil, err
	}
	copy(rig.VRAM[vramShader:], code)
	return &shaderRig{Rig: rig, prog: pm4.Shader{Program: abi.GPU_FB_BASE + vramShader, Slots: uint32(len(code) / 8),
		Threads: threads, Args: abi.GPU_FB_BASE + vramArgs}}, nil
}

// dispatch runs groups workgroups and waits for the fence after them.
func (s *shaderRig) dispatch(groups uint32) error {
	s.seq++
	s.Emit(s.prog.Encode())
	s.Emit(pm4.DispatchDirect(groups, 1, 1))
	s.Emit(pm4.Fence(FenceGPU(), s.seq, s.seq, true))
	if err := s.Kick(); err != nil {
		return err
	}
	return s.WaitFence(s.seq, jobTimeout)
}

// ShaderALU is the interpreter's instruction rate through the device, on one CU (one core):
// one workgroup of an ALU-bound loop per op, every result checked; beside the same loop in Go
// (its iterations counted as the same instructions). Target ≥ 200 M instructions/s.
func ShaderALU() Scenario {
	return Scenario{
		Name: "shader ALU rate (one CU)", Unit: "Minsn/s", PerOp: aluItems * aluInsns / 1e6,
		Baseline: "the same loop in Go", Note: "target ≥ 200 M insn/s",
		Setup: func() (Pair, error) {
			s, err := newShaderRig(aluShader(), [3]uint32{aluItems, 1, 1}, 0, 0)
			if err != nil {
				return Pair{}, err
			}
			want := make([]uint64, aluItems)
			for i := range want {
				want[i] = aluGo(uint64(i))
			}
			check := func(got func(i int) uint64) error {
				for i, w := range want {
					if g := got(i); g != w {
						return fmt.Errorf("work-item %d computed %#x, want %#x", i, g, w)
					}
				}
				return nil
			}
			dev := func(n int, c Clock) error {
				for range n {
					clear(s.VRAM[vramScratch : vramScratch+8*aluItems])
					if err := s.dispatch(1); err != nil {
						return err
					}
					c.StopTimer()
					err := check(func(i int) uint64 { return binary.LittleEndian.Uint64(s.VRAM[vramScratch+8*i:]) })
					c.StartTimer()
					if err != nil {
						return err
					}
				}
				return nil
			}
			out := make([]uint64, aluItems)
			base := func(n int, c Clock) error {
				for range n {
					for i := range out {
						out[i] = aluGo(uint64(i))
					}
					c.StopTimer()
					err := check(func(i int) uint64 { return out[i] })
					c.StartTimer()
					if err != nil {
						return err
					}
				}
				return nil
			}
			return Pair{Dev: dev, Base: base, Close: func() { s.Close() }}, nil
		},
	}
}

// vaddN is the vector add's length (u32 elements), in workgroups of vaddGroup.
const (
	vaddN     = 1 << 18
	vaddGroup = 256
)

// ShaderVectorAdd is the memory-bound vector add (the project's vector_add shader, 256-item
// workgroups over 256 Ki elements in system memory) beside a Go loop doing the same on the
// same memory. Target ≥ 0.25×.
func ShaderVectorAdd() Scenario {
	return Scenario{
		Name: "shader vector add (256 Ki u32)", Unit: "Melem/s", PerOp: vaddN / 1e6,
		Baseline: "Go loop on the same memory", Note: "target ≥ 0.25×",
		Setup: func() (Pair, error) {
			s, err := newShaderRig(shaders.VectorAdd().Insns, [3]uint32{vaddGroup, 1, 1}, 3*4*vaddN, 0)
			if err != nil {
				return Pair{}, err
			}
			g := s.Guest.Bytes()
			a, b, out := g[:4*vaddN], g[4*vaddN:8*vaddN], g[8*vaddN:12*vaddN]
			le := binary.LittleEndian
			for i := range vaddN {
				le.PutUint32(a[4*i:], uint32(3*i))
				le.PutUint32(b[4*i:], uint32(0x80000000+i))
			}
			for i, off := range []uint64{0, 4 * vaddN, 8 * vaddN} {
				le.PutUint64(s.VRAM[vramArgs+8*i:], gartBase+off)
			}
			check := func(what string) error {
				for i := range vaddN {
					if got, want := le.Uint32(out[4*i:]), uint32(3*i+0x80000000+i); got != want {
						return fmt.Errorf("%s: out[%d] = %#x, want %#x", what, i, got, want)
					}
				}
				clear(out)
				return nil
			}
			dev := func(n int, c Clock) error {
				for range n {
					if err := s.dispatch(vaddN / vaddGroup); err != nil {
						return err
					}
					c.StopTimer()
					err := check("vector_add")
					c.StartTimer()
					if err != nil {
						return err
					}
				}
				return nil
			}
			base := func(n int, c Clock) error {
				for range n {
					for i := 0; i < 4*vaddN; i += 4 {
						le.PutUint32(out[i:], le.Uint32(a[i:])+le.Uint32(b[i:]))
					}
					c.StopTimer()
					err := check("Go loop")
					c.StartTimer()
					if err != nil {
						return err
					}
				}
				return nil
			}
			if err := warmUp(dev, base, 1); err != nil {
				s.Close()
				return Pair{}, err
			}
			return Pair{Dev: dev, Base: base, Close: func() { s.Close() }}, nil
		},
	}
}

// scaleGroups is the workgroups of the scaling figure: enough that every CU has several.
const scaleGroups = 8

// ShaderScaling is the ALU-bound dispatch (scaleGroups workgroups) on a device with 2 compute
// units beside one with 1, same run: on this 2-core host the ideal is 2×.
func ShaderScaling() Scenario {
	return Scenario{
		Name: "shader scaling, 2 CUs", Unit: "Minsn/s", PerOp: scaleGroups * aluItems * aluInsns / 1e6,
		Baseline: "1 CU", Note: "ideal 2× on a 2-core host",
		Setup: func() (Pair, error) {
			op := func(cus int) (Op, func(), error) {
				s, err := newShaderRig(aluShader(), [3]uint32{aluItems, 1, 1}, 0, cus)
				if err != nil {
					return nil, nil, err
				}
				want := aluGo(0)
				return func(n int, c Clock) error {
					for range n {
						if err := s.dispatch(scaleGroups); err != nil {
							return err
						}
						if got := binary.LittleEndian.Uint64(s.VRAM[vramScratch:]); got != want {
							return fmt.Errorf("work-item 0 computed %#x, want %#x", got, want)
						}
					}
					return nil
				}, func() { s.Close() }, nil
			}
			two, close2, err := op(2)
			if err != nil {
				return Pair{}, err
			}
			one, close1, err := op(1)
			if err != nil {
				close2()
				return Pair{}, err
			}
			return Pair{Dev: two, Base: one, Close: func() { close2(); close1() }}, nil
		},
	}
}
