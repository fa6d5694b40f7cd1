package compute

import (
	"errors"
	"testing"
	"time"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
	"vgpu/shader"
)

const (
	base    = 0x100000
	argsVA  = base          // argument block
	arrA    = base + 0x1000 // arrays of 8-byte elements
	arrB    = base + 0x9000
	arrOut  = base + 0x11000
	counter = base + 0x800
	flagVA  = base + 0x900
)

func build(t *testing.T, insns asm.Instructions) *shader.Program {
	t.Helper()
	p, _, err := shader.Build(insns)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newPool(t *testing.T, cfg Config) (*Pool, *testMem, *ivs) {
	t.Helper()
	mem, iv := newTestMem(base, 0x20000), &ivs{}
	cfg.Memory, cfg.Interrupts = mem, iv
	p := New(cfg)
	t.Cleanup(p.Close)
	return p, mem, iv
}

func wait(t *testing.T, r *Run) (error, *Saved) {
	t.Helper()
	select {
	case <-r.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the dispatch did not end")
	}
	return r.Result()
}

// vectorAdd: out[i] = a[i] + b[i], i the global id X, arrays from the argument block.
func vectorAdd() asm.Instructions {
	return asm.Instructions{
		asm.LSh.Imm(asm.R2, 3),
		asm.LoadMem(asm.R3, asm.R1, 0, asm.DWord),
		asm.LoadMem(asm.R4, asm.R1, 8, asm.DWord),
		asm.LoadMem(asm.R5, asm.R1, 16, asm.DWord),
		asm.Add.Reg(asm.R3, asm.R2),
		asm.Add.Reg(asm.R4, asm.R2),
		asm.Add.Reg(asm.R5, asm.R2),
		asm.LoadMem(asm.R3, asm.R3, 0, asm.DWord),
		asm.LoadMem(asm.R4, asm.R4, 0, asm.DWord),
		asm.Add.Reg(asm.R3, asm.R4),
		asm.StoreMem(asm.R5, 0, asm.R3, asm.DWord),
		asm.Return(),
	}
}

func setArgs(m *testMem) {
	m.setU64(argsVA, arrA)
	m.setU64(argsVA+8, arrB)
	m.setU64(argsVA+16, arrOut)
}

func TestVectorAdd(t *testing.T) {
	p, mem, _ := newPool(t, Config{CUs: 4, Parallel: 2})
	setArgs(mem)
	const n = 1024
	for i := range uint64(n) {
		mem.setU64(arrA+8*i, i*3)
		mem.setU64(arrB+8*i, 1000+i)
	}
	r, err := p.Start(Dispatch{Program: build(t, vectorAdd()), Groups: [3]uint32{n / 64, 1, 1}, GroupSize: [3]uint32{64, 1, 1}, Args: argsVA, VMID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err, _ := wait(t, r); err != nil {
		t.Fatal(err)
	}
	for i := range uint64(n) {
		if got := mem.u64(arrOut + 8*i); got != i*3+1000+i {
			t.Fatalf("out[%d] = %d, want %d", i, got, i*4+1000)
		}
	}
	if got, want := r.Executed(), uint64(n*12); got != want {
		t.Errorf("executed %d instructions, want %d", got, want)
	}
	if s := p.Stats(); s.Groups != n/64 || s.Dispatches != 1 {
		t.Errorf("stats %+v", s)
	}
}

// Every work-item of 16 workgroups adds 1 to one counter: atomics across CUs.
func TestAtomicsAcrossCUs(t *testing.T) {
	p, mem, _ := newPool(t, Config{CUs: 4, Parallel: 2})
	prog := build(t, asm.Instructions{
		asm.LoadImm(asm.R6, counter, asm.DWord),
		asm.Mov.Imm(asm.R7, 1),
		asm.AddAtomic.Mem(asm.R6, asm.R7, asm.DWord, 0),
		asm.Return(),
	})
	r, _ := p.Start(Dispatch{Program: prog, Groups: [3]uint32{4, 2, 2}, GroupSize: [3]uint32{8, 4, 1}})
	if err, _ := wait(t, r); err != nil {
		t.Fatal(err)
	}
	if got := mem.u64(counter); got != 16*32 {
		t.Fatalf("counter %d, want %d", got, 16*32)
	}
}

// A barrier orders a workgroup's writes before its reads: item i writes i+1 to slot i, waits,
// then copies slot (i+1) mod n to out[i].
func TestBarrier(t *testing.T) {
	p, mem, _ := newPool(t, Config{CUs: 2})
	const n = 32
	prog := build(t, asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R5), // local linear id
		asm.LoadImm(asm.R7, arrA, asm.DWord),
		asm.Mov.Reg(asm.R8, asm.R6),
		asm.LSh.Imm(asm.R8, 3),
		asm.Add.Reg(asm.R8, asm.R7),
		asm.Mov.Reg(asm.R9, asm.R6),
		asm.Add.Imm(asm.R9, 1),
		asm.StoreMem(asm.R8, 0, asm.R9, asm.DWord), // slot[i] = i+1
		asm.BuiltinFunc(abi.SHADER_HELPER_BARRIER).Call(),
		asm.Mov.Reg(asm.R9, asm.R6),
		asm.Add.Imm(asm.R9, 1),
		asm.And.Imm(asm.R9, n-1),
		asm.LSh.Imm(asm.R9, 3),
		asm.Add.Reg(asm.R9, asm.R7),
		asm.LoadMem(asm.R0, asm.R9, 0, asm.DWord), // slot[(i+1)%n]
		asm.LoadImm(asm.R7, arrOut, asm.DWord),
		asm.Mov.Reg(asm.R8, asm.R6),
		asm.LSh.Imm(asm.R8, 3),
		asm.Add.Reg(asm.R8, asm.R7),
		asm.StoreMem(asm.R8, 0, asm.R0, asm.DWord),
		asm.Return(),
	})
	r, _ := p.Start(Dispatch{Program: prog, Groups: [3]uint32{1, 1, 1}, GroupSize: [3]uint32{n, 1, 1}})
	if err, _ := wait(t, r); err != nil {
		t.Fatal(err)
	}
	for i := range uint64(n) {
		if got, want := mem.u64(arrOut+8*i), (i+1)%n+1; got != want {
			t.Fatalf("out[%d] = %d, want %d (a read before the barrier released)", i, got, want)
		}
	}
}

// The first failing work-item ends the dispatch with its named error and an IV.
func TestShaderErrorEndsDispatch(t *testing.T) {
	p, _, iv := newPool(t, Config{CUs: 2})
	prog := build(t, asm.Instructions{
		asm.JNE.Imm(asm.R2, 77, "fine"),
		asm.LoadMem(asm.R0, asm.R1, 3, asm.Word), // misaligned, work-item 77 only
		asm.Return().WithSymbol("fine"),
	})
	r, _ := p.Start(Dispatch{Program: prog, Groups: [3]uint32{4, 1, 1}, GroupSize: [3]uint32{32, 1, 1}, Args: argsVA, VMID: 3, RingID: 5, PASID: 9})
	err, _ := wait(t, r)
	var se *shader.Error
	if !errors.As(err, &se) || se.Reason != abi.SHADER_ERR_MISALIGNED || se.PC != 1 {
		t.Fatalf("result %v, want SHADER_ERR_MISALIGNED at pc 1", err)
	}
	got := iv.all()
	if len(got) != 1 || got[0].Source != abi.IH_SRC_SHADER_ERROR || got[0].Data[0] != abi.SHADER_ERR_MISALIGNED ||
		got[0].Data[1] != 1 || got[0].Data[2] != argsVA+3 || got[0].VMID != 3 || got[0].RingID != 5 || got[0].PASID != 9 {
		t.Fatalf("IVs %+v", got)
	}
}

// longSum: each work-item sums 1..iters into R0 (a loop of ~4 instructions per iteration)
// and stores it at out[global id].
func longSum(iters int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R0, 0),
		asm.Mov.Imm(asm.R6, iters),
		asm.Add.Reg(asm.R0, asm.R6).WithSymbol("loop"),
		asm.Add.Reg(asm.R0, asm.R2),
		asm.Sub.Imm(asm.R6, 1),
		asm.JNE.Imm(asm.R6, 0, "loop"),
		asm.StoreMem(asm.RFP, -8, asm.R0, asm.DWord), // through the stack, so it is saved too
		asm.LoadMem(asm.R7, asm.RFP, -8, asm.DWord),
		asm.LoadImm(asm.R8, arrOut, asm.DWord),
		asm.LSh.Imm(asm.R2, 3),
		asm.Add.Reg(asm.R8, asm.R2),
		asm.StoreMem(asm.R8, 0, asm.R7, asm.DWord),
		asm.Return(),
	}
}

func sumWant(iters, gid uint64) uint64 { return iters*(iters+1)/2 + iters*gid }

// A preempted dispatch, saved through the context-save-area encoding and resumed, produces
// what an uninterrupted one does.
func TestPreemptAndResume(t *testing.T) {
	p, mem, _ := newPool(t, Config{CUs: 2, Budget: 256})
	const iters, groups, items = 200000, 8, 16
	prog := build(t, longSum(iters))
	d := Dispatch{Program: prog, Groups: [3]uint32{groups, 1, 1}, GroupSize: [3]uint32{items, 1, 1}, VMID: 2}
	r, _ := p.Start(d)
	for r.Executed() < 1<<20 { // well inside the ~100 M instructions of the run
		time.Sleep(100 * time.Microsecond)
	}
	r.Preempt()
	err, saved := wait(t, r)
	if err != ErrPreempted || saved == nil {
		t.Fatalf("result %v (saved %v), want preempted", err, saved != nil)
	}
	if len(saved.Groups) == 0 {
		t.Fatalf("nothing in flight was saved (next %d)", saved.Next)
	}
	area := saved.Marshal()
	if len(area) != CSABytes(len(saved.Groups), items, abi.SHADER_STACK_DEFAULT) {
		t.Fatalf("save area of %d bytes", len(area))
	}
	back, err := UnmarshalSaved(area)
	if err != nil {
		t.Fatal(err)
	}
	d.Resume = back
	r2, err := p.Start(d)
	if err != nil {
		t.Fatal(err)
	}
	if err, _ := wait(t, r2); err != nil {
		t.Fatal(err)
	}
	for gid := range uint64(groups * items) {
		if got, want := mem.u64(arrOut+8*gid), sumWant(iters, gid); got != want {
			t.Fatalf("out[%d] = %d, want %d", gid, got, want)
		}
	}
	if got, want := r.Executed()+r2.Executed(), uint64(groups*items*(2+4*iters+7)); got != want {
		t.Errorf("executed %d instructions in both runs, want %d (an instruction lost or run twice)", got, want)
	}
}

// An endless shader stops within a bounded time when preempted, and when killed.
func TestEndlessShaderStops(t *testing.T) {
	for _, kill := range []bool{false, true} {
		p, _, _ := newPool(t, Config{CUs: 2, Budget: 1024})
		prog := build(t, asm.Instructions{asm.Add.Imm(asm.R0, 1).WithSymbol("l"), asm.Ja.Label("l")})
		r, _ := p.Start(Dispatch{Program: prog, Groups: [3]uint32{4, 1, 1}, GroupSize: [3]uint32{64, 1, 1}})
		time.Sleep(5 * time.Millisecond)
		t0 := time.Now()
		if kill {
			r.Kill()
		} else {
			r.Preempt()
		}
		err, _ := wait(t, r)
		if kill && err != ErrKilled || !kill && err != ErrPreempted {
			t.Fatalf("kill %v: result %v", kill, err)
		}
		t.Logf("kill %v: stopped %v after the request", kill, time.Since(t0))
	}
}

// A resumed state that does not fit the dispatch is refused.
func TestResumeChecks(t *testing.T) {
	p, _, _ := newPool(t, Config{CUs: 1})
	prog := build(t, longSum(3))
	d := Dispatch{Program: prog, Groups: [3]uint32{2, 1, 1}, GroupSize: [3]uint32{2, 1, 1}}
	good := func() *Saved {
		it := SavedItem{PC: 2, Stack: make([]byte, abi.SHADER_STACK_DEFAULT)}
		it.Regs[6] = 1 // the loop's last iteration
		it.Regs[10] = abi.SHADER_STACK_TOP
		return &Saved{Next: 1, Total: 2, GroupItems: 2, Stack: abi.SHADER_STACK_DEFAULT,
			Groups: []SavedGroup{{Index: 0, Items: []SavedItem{it, it}}}}
	}
	cases := map[string]func(s *Saved){
		"total":           func(s *Saved) { s.Total = 3 },
		"not started":     func(s *Saved) { s.Groups[0].Index = 1 },
		"pc outside":      func(s *Saved) { s.Groups[0].Items[1].PC = 99 },
		"R10 moved":       func(s *Saved) { s.Groups[0].Items[0].Regs[10] = 5 },
		"twice":           func(s *Saved) { s.Groups = append(s.Groups, s.Groups[0]) },
		"next past total": func(s *Saved) { s.Next = 3 },
	}
	d.Resume = good()
	if r, err := p.Start(d); err != nil {
		t.Fatalf("a good state was refused: %v", err)
	} else {
		wait(t, r)
	}
	for name, spoil := range cases {
		s := good()
		spoil(s)
		d.Resume = s
		if _, err := p.Start(d); err == nil {
			t.Errorf("%s: resumed", name)
		}
	}
	// A corrupt area never decodes into something that panics.
	area := good().Marshal()
	for i := range area {
		b := append([]byte(nil), area...)
		b[i] ^= 0xFF
		if s, err := UnmarshalSaved(b); err == nil {
			d.Resume = s
			if r, err := p.Start(d); err == nil {
				r.Kill() // a corrupted counter may loop for ever
				wait(t, r)
			}
		}
	}
}

// Strict mode names a load an L0 served with data memory no longer holds; an invalidation
// ends it.
func TestStaleL0Read(t *testing.T) {
	strict := true
	p, mem, _ := newPool(t, Config{CUs: 1, Strict: func() bool { return strict }})
	prog := build(t, asm.Instructions{
		asm.LoadImm(asm.R6, flagVA, asm.DWord),
		asm.LoadMem(asm.R0, asm.R6, 0, asm.DWord),
		asm.LoadImm(asm.R7, arrOut, asm.DWord),
		asm.StoreMem(asm.R7, 0, asm.R0, asm.DWord),
		asm.Return(),
	})
	d := Dispatch{Program: prog, Groups: [3]uint32{1, 1, 1}, GroupSize: [3]uint32{1, 1, 1}}
	one := func() *Run {
		r, _ := p.Start(d)
		if err, _ := wait(t, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	mem.setU64(flagVA, 1)
	one()                 // fills the line
	mem.setU64(flagVA, 2) // another agent writes memory
	if r := one(); r.StaleReads() != 1 || mem.u64(arrOut) != 1 {
		t.Fatalf("stale reads %d, read %d: want the L0's 1, named", r.StaleReads(), mem.u64(arrOut))
	}
	p.InvalidateL0()
	if r := one(); r.StaleReads() != 0 || mem.u64(arrOut) != 2 {
		t.Fatalf("after the invalidation: stale reads %d, read %d", r.StaleReads(), mem.u64(arrOut))
	}
}

// A retry fault parks the faulting work-item until the fault is handled; the others finish.
func TestRetryFaultParks(t *testing.T) {
	p, mem, _ := newPool(t, Config{CUs: 1})
	mem.retryPage, mem.retryCh = flagVA&^0xFFF, make(chan struct{})
	prog := build(t, asm.Instructions{
		asm.LoadImm(asm.R8, arrOut, asm.DWord),
		asm.Mov.Reg(asm.R9, asm.R2),
		asm.LSh.Imm(asm.R9, 3),
		asm.Add.Reg(asm.R8, asm.R9),
		asm.JNE.Imm(asm.R2, 0, "skip"),
		asm.LoadImm(asm.R6, flagVA, asm.DWord), // only work-item 0 touches the faulting page
		asm.LoadMem(asm.R0, asm.R6, 0, asm.DWord),
		asm.Mov.Imm(asm.R0, 7).WithSymbol("skip"),
		asm.StoreMem(asm.R8, 0, asm.R0, asm.DWord),
		asm.Return(),
	})
	r, _ := p.Start(Dispatch{Program: prog, Groups: [3]uint32{1, 1, 1}, GroupSize: [3]uint32{4, 1, 1}})
	deadline := time.Now().Add(5 * time.Second)
	for mem.u64(arrOut+8*3) != 7 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-r.Done():
		t.Fatal("the dispatch ended while work-item 0 waited on a retry fault")
	default:
	}
	if mem.u64(arrOut+8) != 7 || mem.u64(arrOut) != 0 {
		t.Fatalf("out %d %d: the other work-items did not finish, or item 0 did not wait", mem.u64(arrOut+8), mem.u64(arrOut))
	}
	close(mem.retryCh) // the driver mapped the page
	if err, _ := wait(t, r); err != nil || mem.u64(arrOut) != 7 {
		t.Fatalf("after the fault: %v, out[0] %d", err, mem.u64(arrOut))
	}
}

func TestTrapAndSleep(t *testing.T) {
	p, _, iv := newPool(t, Config{CUs: 1})
	prog := build(t, asm.Instructions{
		asm.Mov.Imm(asm.R1, 200_000), // 200 µs
		asm.BuiltinFunc(abi.SHADER_HELPER_SLEEP).Call(),
		asm.Mov.Imm(asm.R1, 0xAB),
		asm.BuiltinFunc(abi.SHADER_HELPER_TRAP).Call(),
		asm.Return(),
	})
	t0 := time.Now()
	r, _ := p.Start(Dispatch{Program: prog, Groups: [3]uint32{2, 1, 1}, GroupSize: [3]uint32{2, 1, 1}, RingID: 3})
	if err, _ := wait(t, r); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(t0); el < 200*time.Microsecond {
		t.Errorf("done after %v: the sleep was shorter than asked", el)
	}
	seen := map[uint32]bool{}
	for _, v := range iv.all() {
		if v.Source != abi.IH_SRC_SHADER_TRAP || v.Data[0] != 0xAB || v.Data[1] != 3 || v.RingID != 3 {
			t.Fatalf("IV %+v", v)
		}
		seen[v.Data[2]] = true
	}
	if len(seen) != 4 {
		t.Fatalf("traps from work-items %v, want 0..3", seen)
	}
}

// Reset kills every run, and no memory access of theirs happens after it returns.
func TestResetStopsMemoryAccess(t *testing.T) {
	p, mem, _ := newPool(t, Config{CUs: 2})
	prog := build(t, asm.Instructions{ // stores a growing counter for ever
		asm.LoadImm(asm.R6, arrOut, asm.DWord),
		asm.Mov.Reg(asm.R7, asm.R2),
		asm.LSh.Imm(asm.R7, 3),
		asm.Add.Reg(asm.R6, asm.R7),
		asm.Add.Imm(asm.R0, 1).WithSymbol("l"),
		asm.StoreMem(asm.R6, 0, asm.R0, asm.DWord),
		asm.Ja.Label("l"),
	})
	var runs []*Run
	for range 3 {
		r, _ := p.Start(Dispatch{Program: prog, Groups: [3]uint32{2, 1, 1}, GroupSize: [3]uint32{4, 1, 1}})
		runs = append(runs, r)
	}
	for mem.u64(arrOut) == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	if !p.Reset(5 * time.Second) {
		t.Fatal("Reset: runs still inside a CU")
	}
	for _, r := range runs {
		if err, _ := r.Result(); err != ErrKilled {
			t.Errorf("a run ended with %v, want killed", err)
		}
	}
	mem.mu.Lock()
	snap := append([]byte(nil), mem.b...)
	mem.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if string(snap) != string(mem.b) {
		t.Fatal("memory changed after Reset returned")
	}
}

// A wave's coalesced load names one stale read per work-item that read an old value, as lone
// loads do.
func TestWaveStaleReadsPerWorkItem(t *testing.T) {
	strict := true
	p, mem, _ := newPool(t, Config{CUs: 1, Strict: func() bool { return strict }})
	prog := build(t, asm.Instructions{ // out[i] = a[i] (u32)
		asm.LSh.Imm(asm.R2, 2),
		asm.LoadImm(asm.R3, arrA, asm.DWord),
		asm.Add.Reg(asm.R3, asm.R2),
		asm.LoadMem(asm.R4, asm.R3, 0, asm.Word),
		asm.LoadImm(asm.R5, arrOut, asm.DWord),
		asm.Add.Reg(asm.R5, asm.R2),
		asm.StoreMem(asm.R5, 0, asm.R4, asm.Word),
		asm.Return(),
	})
	const n = 64
	d := Dispatch{Program: prog, Groups: [3]uint32{1, 1, 1}, GroupSize: [3]uint32{n, 1, 1}}
	one := func() *Run {
		r, _ := p.Start(d)
		if err, _ := wait(t, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	one() // fills the lines of a[0..64)
	for i := uint64(0); i < n; i += 2 {
		mem.setU64(arrA+4*i, 0x1_0000_0001) // a[i] and a[i+1] change
	}
	if r := one(); r.StaleReads() != n {
		t.Fatalf("%d stale reads, want %d (one per work-item that read an old value)", r.StaleReads(), n)
	}
}

// A workgroup's stacks together are bounded: the host memory they take is the guest's choice.
func TestGroupStackBounded(t *testing.T) {
	p, _, _ := newPool(t, Config{CUs: 1})
	prog := build(t, asm.Instructions{asm.Return()})
	if _, err := p.Start(Dispatch{Program: prog, Groups: [3]uint32{1, 1, 1}, GroupSize: [3]uint32{1024, 1, 1},
		Stack: abi.SHADER_STACK_MAX}); err == nil {
		t.Fatal("a workgroup of 1024 work-items with 64 KiB stacks each started")
	}
	r, err := p.Start(Dispatch{Program: prog, Groups: [3]uint32{1, 1, 1}, GroupSize: [3]uint32{64, 1, 1},
		Stack: abi.SHADER_STACK_MAX})
	if err != nil {
		t.Fatalf("64 work-items of 64 KiB (4 MiB): %v", err)
	}
	wait(t, r)
}
