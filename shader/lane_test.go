package shader

import (
	"errors"
	"math"
	"testing"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
)

const memBase = 0x10_0000

// run builds insns, runs one work-item (args = memBase) until it stops, and returns it.
func run(t *testing.T, insns asm.Instructions, mem *flatMem, budget uint64) (*Lane, Stop, error) {
	t.Helper()
	p, _, err := Build(insns)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if mem == nil {
		mem = &flatMem{base: memBase, b: make([]byte, 4096)}
	}
	d := Dims{Global: [3]uint64{7, 8, 9}, Local: [3]uint64{1, 2, 3}, Group: [3]uint64{4, 5, 6},
		LocalSize: [3]uint64{16, 4, 2}, NumGroups: [3]uint64{10, 11, 12}, Linear: 33}
	l := NewLane(p, mem, &traps{}, memBase, d, make([]byte, abi.SHADER_STACK_DEFAULT))
	st, err := l.Run(budget)
	return l, st, err
}

// ret is a program computing R0 and exiting.
func ret(body ...asm.Instruction) asm.Instructions {
	return append(asm.Instructions(body), asm.Return())
}

func TestALU(t *testing.T) {
	var a, b uint64 = 0xF000_0000_8765_4321, 0x0000_0001_0000_0007
	neg := int64(-5)
	sx := func(v int64) uint64 { return uint64(v) }
	cases := []struct {
		name string
		prog asm.Instructions
		want uint64
	}{
		{"add64", ret(asm.LoadImm(asm.R0, int64(a), asm.DWord), asm.LoadImm(asm.R1, int64(b), asm.DWord), asm.Add.Reg(asm.R0, asm.R1)), a + b},
		{"add64 imm sign-extends", ret(asm.Mov.Imm(asm.R0, 1), asm.Add.Imm(asm.R0, -2)), math.MaxUint64},
		{"add32 zero-extends", ret(asm.LoadImm(asm.R0, int64(a), asm.DWord), asm.Add.Imm32(asm.R0, 1)), 0x8765_4322},
		{"sub64", ret(asm.Mov.Imm(asm.R0, 3), asm.Sub.Imm(asm.R0, 5)), uint64(neg + 3)},
		{"mul32 wraps", ret(asm.Mov.Imm32(asm.R0, 0x10000), asm.Mul.Imm32(asm.R0, 0x10000)), 0},
		{"div64", ret(asm.LoadImm(asm.R0, int64(a), asm.DWord), asm.Div.Imm(asm.R0, 16)), a / 16},
		{"div by zero is 0", ret(asm.Mov.Imm(asm.R0, 9), asm.Mov.Imm(asm.R1, 0), asm.Div.Reg(asm.R0, asm.R1)), 0},
		{"mod by zero keeps dst", ret(asm.Mov.Imm(asm.R0, 9), asm.Mov.Imm(asm.R1, 0), asm.Mod.Reg(asm.R0, asm.R1)), 9},
		{"mod32 by zero zero-extends", ret(asm.LoadImm(asm.R0, int64(a), asm.DWord), asm.Mov.Imm(asm.R1, 0), asm.Mod.Reg32(asm.R0, asm.R1)), 0x8765_4321},
		{"sdiv64", ret(asm.Mov.Imm(asm.R0, -9), asm.SDiv.Imm(asm.R0, 2)), sx(-4)},
		{"smod64", ret(asm.Mov.Imm(asm.R0, -9), asm.SMod.Imm(asm.R0, 4)), sx(-1)},
		{"sdiv min/-1", ret(asm.LoadImm(asm.R0, math.MinInt64, asm.DWord), asm.SDiv.Imm(asm.R0, -1)), 1 << 63},
		{"or and xor", ret(asm.Mov.Imm(asm.R0, 0xF0), asm.Or.Imm(asm.R0, 0x0F), asm.And.Imm(asm.R0, 0x3C), asm.Xor.Imm(asm.R0, 0xFF)), 0xC3},
		{"lsh masks the count", ret(asm.Mov.Imm(asm.R0, 1), asm.Mov.Imm(asm.R1, 65), asm.LSh.Reg(asm.R0, asm.R1)), 2},
		{"rsh32", ret(asm.Mov.Imm(asm.R0, -1), asm.RSh.Imm32(asm.R0, 28)), 0xF},
		{"arsh64", ret(asm.Mov.Imm(asm.R0, -64), asm.ArSh.Imm(asm.R0, 3)), sx(-8)},
		{"arsh32", ret(asm.Mov.Imm32(asm.R0, -64), asm.ArSh.Imm32(asm.R0, 3)), 0xFFFF_FFF8},
		{"neg64", ret(asm.Mov.Imm(asm.R0, 5), asm.Neg.Imm(asm.R0, 0)), uint64(neg)},
		{"neg32", ret(asm.Mov.Imm(asm.R0, 5), asm.Neg.Imm32(asm.R0, 0)), uint64(uint32(neg))},
		{"mov32 zero-extends", ret(asm.Mov.Imm32(asm.R0, -1)), 0xFFFF_FFFF},
		{"movsx8", ret(asm.Mov.Imm(asm.R1, 0x80), asm.MovSX8.Reg(asm.R0, asm.R1)), sx(-128)},
		{"movsx16 to 32", ret(asm.Mov.Imm(asm.R1, 0x8000), asm.MovSX16.Reg32(asm.R0, asm.R1)), 0xFFFF_8000},
		{"movsx32", ret(asm.Mov.Imm32(asm.R1, -2), asm.MovSX32.Reg(asm.R0, asm.R1)), sx(-2)},
		{"be16", ret(asm.Mov.Imm(asm.R0, 0x12345), asm.HostTo(asm.BE, asm.R0, asm.Half)), 0x4523},
		{"le32 truncates", ret(asm.LoadImm(asm.R0, int64(a), asm.DWord), asm.HostTo(asm.LE, asm.R0, asm.Word)), 0x8765_4321},
		{"bswap64", ret(asm.LoadImm(asm.R0, 0x0102030405060708, asm.DWord), asm.BSwap(asm.R0, asm.DWord)), 0x0807060504030201},
		{"ld_imm64", ret(asm.LoadImm(asm.R0, int64(a), asm.DWord)), a},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, st, err := run(t, c.prog, nil, math.MaxUint64)
			if err != nil || st != Exited {
				t.Fatalf("stop %v, err %v", st, err)
			}
			if l.Regs[0] != c.want {
				t.Fatalf("R0 = %#x, want %#x", l.Regs[0], c.want)
			}
		})
	}
}

func TestJumps(t *testing.T) {
	// R0 = 1 if the jump is taken, 2 if not.
	jump := func(j asm.Instruction, dst, src int64) asm.Instructions {
		return asm.Instructions{
			asm.LoadImm(asm.R1, dst, asm.DWord), asm.LoadImm(asm.R2, src, asm.DWord),
			j, asm.Mov.Imm(asm.R0, 2), asm.Return(),
			asm.Mov.Imm(asm.R0, 1).WithSymbol("yes"), asm.Return(),
		}
	}
	cases := []struct {
		name     string
		j        asm.Instruction
		dst, src int64
		taken    bool
	}{
		{"jeq", asm.JEq.Reg(asm.R1, asm.R2, "yes"), 5, 5, true},
		{"jne", asm.JNE.Reg(asm.R1, asm.R2, "yes"), 5, 5, false},
		{"jgt unsigned", asm.JGT.Reg(asm.R1, asm.R2, "yes"), -1, 1, true},
		{"jsgt signed", asm.JSGT.Reg(asm.R1, asm.R2, "yes"), -1, 1, false},
		{"jge", asm.JGE.Imm(asm.R1, 3, "yes"), 3, 0, true},
		{"jlt", asm.JLT.Reg(asm.R1, asm.R2, "yes"), 1, 2, true},
		{"jle", asm.JLE.Imm(asm.R1, 0, "yes"), 1, 0, false},
		{"jslt", asm.JSLT.Imm(asm.R1, 0, "yes"), -3, 0, true},
		{"jsle", asm.JSLE.Reg(asm.R1, asm.R2, "yes"), -3, -3, true},
		{"jsge", asm.JSGE.Imm(asm.R1, -1, "yes"), -2, 0, false},
		{"jset", asm.JSet.Imm(asm.R1, 4, "yes"), 6, 0, true},
		{"jeq32 ignores the high word", asm.JEq.Imm32(asm.R1, 7, "yes"), 0x1_0000_0007, 0, true},
		{"jeq64 does not", asm.JEq.Imm(asm.R1, 7, "yes"), 0x1_0000_0007, 0, false},
		{"jslt32", asm.JSLT.Reg32(asm.R1, asm.R2, "yes"), 0xFFFF_FFFF, 0, true},
		{"ja", asm.Ja.Label("yes"), 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, st, err := run(t, jump(c.j, c.dst, c.src), nil, math.MaxUint64)
			if err != nil || st != Exited {
				t.Fatalf("stop %v, err %v", st, err)
			}
			if got := l.Regs[0] == 1; got != c.taken {
				t.Fatalf("taken %v, want %v", got, c.taken)
			}
		})
	}
}

func TestMemoryAndStack(t *testing.T) {
	mem := &flatMem{base: memBase, b: make([]byte, 4096)}
	mem.b[8] = 0xFE // memBase+8 = 0xFE (sign bit of a byte)
	prog := asm.Instructions{
		// R1 = args = memBase. Store 0x1122334455667788 at [R1+16], read back a word.
		asm.LoadImm(asm.R2, 0x1122334455667788, asm.DWord),
		asm.StoreMem(asm.R1, 16, asm.R2, asm.DWord),
		asm.LoadMem(asm.R3, asm.R1, 16, asm.Word), // 0x55667788
		// Sign-extending byte load of 0xFE.
		asm.LoadMemSX(asm.R4, asm.R1, 8, asm.Byte), // -2
		// The stack: spill R3 and reload it through R10.
		asm.StoreMem(asm.RFP, -8, asm.R3, asm.DWord),
		asm.LoadMem(asm.R0, asm.RFP, -8, asm.DWord),
		asm.Add.Reg(asm.R0, asm.R4),
		// ST immediate, half word.
		asm.StoreImm(asm.R1, 24, 0x7FFF, asm.Half),
		asm.Return(),
	}
	l, st, err := run(t, prog, mem, math.MaxUint64)
	if err != nil || st != Exited {
		t.Fatalf("stop %v, err %v", st, err)
	}
	if want := uint64(0x55667788 - 2); l.Regs[0] != want {
		t.Errorf("R0 = %#x, want %#x", l.Regs[0], want)
	}
	if got := mem.u64(memBase + 16); got != 0x1122334455667788 {
		t.Errorf("stored %#x", got)
	}
	if got := mem.u64(memBase+24) & 0xFFFF_FFFF; got != 0x7FFF {
		t.Errorf("ST half: %#x", got)
	}
	if l.Executed != uint64(len(prog)) {
		t.Errorf("executed %d instructions, want %d", l.Executed, len(prog))
	}
}

func TestAtomics(t *testing.T) {
	mem := &flatMem{base: memBase, b: make([]byte, 4096)}
	prog := asm.Instructions{
		asm.Mov.Imm(asm.R2, 5),
		asm.AddAtomic.Mem(asm.R1, asm.R2, asm.DWord, 0), // [0] = 5
		asm.Mov.Imm(asm.R3, 3),
		asm.FetchAdd.Mem(asm.R1, asm.R3, asm.DWord, 0), // R3 = 5, [0] = 8
		asm.Mov.Imm(asm.R0, 8),
		asm.Mov.Imm(asm.R4, 100),
		asm.CmpXchg.Mem(asm.R1, asm.R4, asm.DWord, 0), // [0] == R0 (8): [0] = 100, R0 = 8
		asm.Mov.Imm(asm.R5, 1),
		asm.Xchg.Mem(asm.R1, asm.R5, asm.Word, 8), // R5 = 0, [8] = 1
		asm.StoreMem(asm.RFP, -8, asm.R3, asm.DWord),
		asm.Mov.Imm(asm.R6, 10),
		asm.FetchOr.Mem(asm.RFP, asm.R6, asm.DWord, -8), // on the stack: R6 = 5, [fp-8] = 15
		asm.LoadMem(asm.R7, asm.RFP, -8, asm.DWord),
		asm.Return(),
	}
	l, st, err := run(t, prog, mem, math.MaxUint64)
	if err != nil || st != Exited {
		t.Fatalf("stop %v, err %v", st, err)
	}
	r := l.Regs
	if r[3] != 5 || r[0] != 8 || r[5] != 0 || r[6] != 5 || r[7] != 15 {
		t.Errorf("R3 %d R0 %d R5 %d R6 %d R7 %d, want 5 8 0 5 15", r[3], r[0], r[5], r[6], r[7])
	}
	if got := mem.u64(memBase); got != 100 {
		t.Errorf("[0] = %d, want 100", got)
	}
	if got := mem.u64(memBase + 8); got != 1 {
		t.Errorf("[8] = %d, want 1", got)
	}
}

func TestHelpers(t *testing.T) {
	cases := []struct {
		id, arg int64
		want    uint64
	}{
		{abi.SHADER_HELPER_GLOBAL_ID, 0, 7},
		{abi.SHADER_HELPER_GLOBAL_ID, 2, 9},
		{abi.SHADER_HELPER_LOCAL_ID, 1, 2},
		{abi.SHADER_HELPER_GROUP_ID, 2, 6},
		{abi.SHADER_HELPER_LOCAL_SIZE, 0, 16},
		{abi.SHADER_HELPER_NUM_GROUPS, 1, 11},
	}
	for _, c := range cases {
		l, st, err := run(t, helperCall(c.id, c.arg), nil, math.MaxUint64)
		if err != nil || st != Exited || l.Regs[0] != c.want {
			t.Errorf("helper %d(%d): stop %v err %v R0 %d, want %d", c.id, c.arg, st, err, l.Regs[0], c.want)
		}
		if l.Regs[1] != uint64(c.arg) {
			t.Errorf("helper %d clobbered R1", c.id)
		}
	}
}

// helperCall is R1 = arg; call id; exit.
func helperCall(id, arg int64) asm.Instructions {
	return asm.Instructions{asm.Mov.Imm(asm.R1, int32(arg)), asm.BuiltinFunc(id).Call(), asm.Return()}
}

func TestStops(t *testing.T) {
	// Barrier and sleep stop after the call, and the work-item continues from there.
	l, st, err := run(t, asm.Instructions{
		asm.BuiltinFunc(abi.SHADER_HELPER_BARRIER).Call(),
		asm.Mov.Imm(asm.R1, 5000),
		asm.BuiltinFunc(abi.SHADER_HELPER_SLEEP).Call(),
		asm.Mov.Imm(asm.R1, 42),
		asm.BuiltinFunc(abi.SHADER_HELPER_TRAP).Call(),
		asm.Mov.Imm(asm.R0, 1),
		asm.Return(),
	}, nil, math.MaxUint64)
	if err != nil || st != AtBarrier || l.PC != 1 {
		t.Fatalf("first stop %v err %v pc %d, want at barrier, pc 1", st, err, l.PC)
	}
	if st, err = l.Run(math.MaxUint64); err != nil || st != Sleeping || l.SleepNS != 5000 || l.PC != 3 {
		t.Fatalf("second stop %v err %v sleep %d pc %d", st, err, l.SleepNS, l.PC)
	}
	if st, err = l.Run(math.MaxUint64); err != nil || st != Exited || l.Regs[0] != 1 {
		t.Fatalf("third stop %v err %v R0 %d", st, err, l.Regs[0])
	}
	if codes := l.trap.(*traps).codes; len(codes) != 1 || codes[0] != 42 {
		t.Fatalf("traps %v, want [42]", codes)
	}
	if l.Executed != 7 {
		t.Errorf("executed %d, want 7", l.Executed)
	}
}

// An endless loop yields at its backward jump once the budget is used, and resumes there.
func TestBudgetYields(t *testing.T) {
	prog := asm.Instructions{
		asm.Mov.Imm(asm.R0, 0),
		asm.Add.Imm(asm.R0, 1).WithSymbol("loop"),
		asm.Ja.Label("loop"),
	}
	l, st, err := run(t, prog, nil, 100)
	if err != nil || st != Yielded || l.PC != 1 {
		t.Fatalf("stop %v err %v pc %d", st, err, l.PC)
	}
	first := l.Regs[0]
	if first < 49 || first > 51 {
		t.Errorf("R0 = %d after a budget of 100 (2 instructions per iteration)", first)
	}
	for range 10 {
		if st, err = l.Run(100); st != Yielded || err != nil {
			t.Fatalf("stop %v err %v", st, err)
		}
	}
	if l.Regs[0] <= first || l.Executed < 1100 {
		t.Errorf("R0 %d executed %d: the loop did not continue", l.Regs[0], l.Executed)
	}
}

func TestRuntimeErrors(t *testing.T) {
	cases := []struct {
		name   string
		prog   asm.Instructions
		reason uint32
		pc     int
		addr   uint64
	}{
		{"misaligned load", ret(asm.LoadMem(asm.R0, asm.R1, 2, asm.Word)), abi.SHADER_ERR_MISALIGNED, 0, memBase + 2},
		{"misaligned stack store", ret(asm.StoreMem(asm.RFP, -4, asm.R1, asm.DWord)), abi.SHADER_ERR_MISALIGNED, 0, abi.SHADER_STACK_TOP - 4},
		{"below the stack", ret(asm.StoreMem(asm.RFP, -abi.SHADER_STACK_DEFAULT-8, asm.R1, asm.DWord)), abi.SHADER_ERR_STACK_OVERFLOW, 0, abi.SHADER_STACK_TOP - abi.SHADER_STACK_DEFAULT - 8},
		{"above the stack", ret(asm.LoadMem(asm.R0, asm.RFP, 0, asm.DWord)), abi.SHADER_ERR_STACK_OVERFLOW, 0, abi.SHADER_STACK_TOP},
		{"unmapped", ret(asm.Mov.Imm(asm.R2, 0), asm.LoadMem(asm.R0, asm.R2, 0, asm.DWord)), abi.SHADER_ERR_MEMORY_FAULT, 1, 0},
		{"atomic unmapped", ret(asm.Mov.Imm(asm.R2, 64), asm.AddAtomic.Mem(asm.R2, asm.R1, asm.DWord, 0)), abi.SHADER_ERR_MEMORY_FAULT, 1, 64},
		{"unknown helper", helperCall(99, 0), abi.SHADER_ERR_BAD_HELPER, 1, 0},
		{"helper dimension 3", helperCall(abi.SHADER_HELPER_GLOBAL_ID, 3), abi.SHADER_ERR_BAD_HELPER, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, st, err := run(t, c.prog, nil, math.MaxUint64)
			var se *Error
			if st != Failed || !errors.As(err, &se) {
				t.Fatalf("stop %v err %v, want a shader error", st, err)
			}
			if se.Reason != c.reason || se.PC != c.pc || se.Addr != c.addr || l.PC != c.pc {
				t.Fatalf("%v (reason %d pc %d addr %#x, lane pc %d), want %s at %d addr %#x",
					se, se.Reason, se.PC, se.Addr, l.PC, ReasonName(c.reason), c.pc, c.addr)
			}
			if c.reason == abi.SHADER_ERR_MEMORY_FAULT && !errors.Is(err, errUnmapped) {
				t.Errorf("the memory path's error is not wrapped: %v", err)
			}
		})
	}
}
