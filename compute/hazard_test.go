package compute

import (
	"sync"
	"testing"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
	"vgpu/shader"
)

var shaderBuild = shader.Build

func TestWriteSet(t *testing.T) {
	type rng struct{ lo, hi uint64 }
	tests := []struct {
		name  string
		adds  []rng
		spans []span
		query rng
		addr  uint64
		size  uint64
		hit   bool
	}{
		{"empty", nil, nil, rng{0, 1 << 20}, 0, 0, false},
		{"one store", []rng{{0x1008, 0x1010}}, []span{{0x1008, 0x1010}}, rng{0x1000, 0x100C}, 0x1008, 4, true},
		{"its neighbour in the same line is not named", []rng{{0x1008, 0x1010}}, []span{{0x1008, 0x1010}}, rng{0x1010, 0x1040}, 0, 0, false},
		{"nor the bytes before", []rng{{0x1008, 0x1010}}, []span{{0x1008, 0x1010}}, rng{0x1000, 0x1008}, 0, 0, false},
		{"adjacent stores merge", []rng{{0x1000, 0x1008}, {0x1008, 0x1010}, {0x1010, 0x1014}}, []span{{0x1000, 0x1014}}, rng{0x1010, 0x2000}, 0x1010, 4, true},
		{"out of order, then the gap fills", []rng{{0x2000, 0x2008}, {0x1000, 0x1008}, {0x1008, 0x2000}}, []span{{0x1000, 0x2008}}, rng{0, 0x1_0000}, 0x1000, 0x1008, true},
		{"disjoint spans stay apart", []rng{{0x1000, 0x1008}, {0x3000, 0x3008}}, []span{{0x1000, 0x1008}, {0x3000, 0x3008}}, rng{0x1008, 0x3004}, 0x3000, 4, true},
		{"a store covering several merges them", []rng{{0x1000, 0x1008}, {0x3000, 0x3008}, {0x5000, 0x5008}, {0x1004, 0x3010}}, []span{{0x1000, 0x3010}, {0x5000, 0x5008}}, rng{0x3000, 0x3004}, 0x3000, 4, true},
		{"repeated stores are one span", []rng{{0x40, 0x48}, {0x40, 0x48}, {0x44, 0x48}}, []span{{0x40, 0x48}}, rng{0x40, 0x41}, 0x40, 1, true},
		{"a query to the top of the address space", []rng{{^uint64(0) - 7, ^uint64(0)}}, []span{{^uint64(0) - 7, ^uint64(0)}}, rng{^uint64(0) - 3, 4}, ^uint64(0) - 3, 3, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &writeSet{san: &sanitizer{}}
			for _, a := range tc.adds {
				s.add(a.lo, a.hi)
			}
			if len(s.spans) != len(tc.spans) {
				t.Fatalf("spans %#x, want %#x", s.spans, tc.spans)
			}
			for i := range tc.spans {
				if s.spans[i] != tc.spans[i] {
					t.Fatalf("spans %#x, want %#x", s.spans, tc.spans)
				}
			}
			addr, size, ok := s.overlap(tc.query.lo, tc.query.hi)
			if ok != tc.hit || ok && (addr != tc.addr || size != tc.size) {
				t.Errorf("overlap(%#x, %#x) = %#x+%#x %v, want %#x+%#x %v", tc.query.lo, tc.query.hi, addr, size, ok, tc.addr, tc.size, tc.hit)
			}
		})
	}
}

// A full record drops (and counts) a new disjoint span, but still merges into its spans.
func TestWriteSetBounded(t *testing.T) {
	san := &sanitizer{}
	s := &writeSet{san: san}
	for i := range uint64(HazardSpans) {
		s.add(i*0x1000, i*0x1000+8)
	}
	s.add(HazardSpans*0x1000, HazardSpans*0x1000+8)
	if len(s.spans) != HazardSpans || san.unrecorded.Load() != 1 {
		t.Fatalf("%d spans, %d unrecorded", len(s.spans), san.unrecorded.Load())
	}
	if _, _, ok := s.overlap(HazardSpans*0x1000, HazardSpans*0x1000+8); ok {
		t.Error("an unrecorded write was named")
	}
	s.add(8, 0x10) // adjacent to the first span: merged, nothing lost
	if san.unrecorded.Load() != 1 || s.spans[0] != (span{0, 0x10}) {
		t.Errorf("merge into a full record: %#x, %d unrecorded", s.spans[0], san.unrecorded.Load())
	}
}

// holdStore stores out[gid] = gid+1, then spins on a load of flagVA until it is non-zero
// (release: the L0 holds the old line until invalidated): a dispatch in flight after its
// writes. (Not an atomic read: its write-back would race with the test's store.)
func holdStore() asm.Instructions {
	return asm.Instructions{
		asm.LoadImm(asm.R6, arrOut, asm.DWord),
		asm.Mov.Reg(asm.R7, asm.R2),
		asm.LSh.Imm(asm.R7, 3),
		asm.Add.Reg(asm.R6, asm.R7),
		asm.Mov.Reg(asm.R8, asm.R2),
		asm.Add.Imm(asm.R8, 1),
		asm.StoreMem(asm.R6, 0, asm.R8, asm.DWord),
		asm.LoadImm(asm.R6, flagVA, asm.DWord),
		asm.LoadMem(asm.R7, asm.R6, 0, asm.DWord).WithSymbol("spin"),
		asm.JEq.Imm(asm.R7, 0, "spin"),
		asm.Return(),
	}
}

func release(p *Pool, mem *testMem) {
	mem.setU64(flagVA, 1)
	p.InvalidateL0()
}

// readOut loads out[gid] (into arrB[gid]); writeOut stores to out[gid].
func readOut() asm.Instructions {
	return asm.Instructions{
		asm.LoadImm(asm.R6, arrOut, asm.DWord),
		asm.Mov.Reg(asm.R7, asm.R2),
		asm.LSh.Imm(asm.R7, 3),
		asm.Add.Reg(asm.R6, asm.R7),
		asm.LoadMem(asm.R8, asm.R6, 0, asm.DWord),
		asm.LoadImm(asm.R6, arrB, asm.DWord),
		asm.Add.Reg(asm.R6, asm.R7),
		asm.StoreMem(asm.R6, 0, asm.R8, asm.DWord),
		asm.Return(),
	}
}

func writeOut() asm.Instructions {
	return asm.Instructions{
		asm.LoadImm(asm.R6, arrOut, asm.DWord),
		asm.Mov.Reg(asm.R7, asm.R2),
		asm.LSh.Imm(asm.R7, 3),
		asm.Add.Reg(asm.R6, asm.R7),
		asm.StoreMem(asm.R6, 0, asm.R7, asm.DWord),
		asm.Return(),
	}
}

// startHeld starts holdStore over n work-items and waits until every store is recorded.
func startHeld(t *testing.T, p *Pool, mem *testMem, n uint32) *Run {
	t.Helper()
	a, err := p.Start(Dispatch{Program: build(t, holdStore()), Groups: [3]uint32{1, 1, 1}, GroupSize: [3]uint32{n, 1, 1},
		VMID: 1, Slot: 3, Packet: 0xA000})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, _, ok := a.Wrote(1, arrOut+8*uint64(n-1), 8); ok || !a.Tracked() {
			break
		}
		if i > 1e7 {
			t.Fatal("the stores were never recorded")
		}
	}
	return a
}

// A dispatch that loads or stores what an earlier, in-flight dispatch of its queue wrote is
// named with both; with strict mode off nothing is recorded or named.
func TestDispatchHazard(t *testing.T) {
	tests := []struct {
		name   string
		strict bool
		second asm.Instructions
		kind   uint32
	}{
		{"read after write", true, readOut(), abi.SHADER_HAZARD_DISPATCH_READ},
		{"write after write", true, writeOut(), abi.SHADER_HAZARD_DISPATCH_WRITE},
		{"strict off: silent", false, readOut(), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, mem, _ := newPool(t, Config{CUs: 2, Strict: func() bool { return tc.strict }})
			a := startHeld(t, p, mem, 8)
			if a.Tracked() != tc.strict {
				t.Fatalf("tracked %v with strict %v", a.Tracked(), tc.strict)
			}
			b, err := p.Start(Dispatch{Program: build(t, tc.second), Groups: [3]uint32{1, 1, 1}, GroupSize: [3]uint32{8, 1, 1},
				VMID: 1, Slot: 3, Packet: 0xB000, After: []*Run{a}})
			if err != nil {
				t.Fatal(err)
			}
			if err, _ := wait(t, b); err != nil {
				t.Fatal(err)
			}
			release(p, mem)
			if err, _ := wait(t, a); err != nil {
				t.Fatal(err)
			}
			s := p.Sanitizer()
			if tc.kind == 0 {
				if s.Hazards != 0 || s.Last.Kind != 0 {
					t.Fatalf("strict off named %+v", s)
				}
				return
			}
			if s.Hazards != 8 {
				t.Errorf("%d hazards, want one per work-item (8)", s.Hazards)
			}
			h := s.Last
			if h.Kind != tc.kind || h.Slot != 3 || h.VMID != 1 || h.By != 0xB000 || h.Writer != 0xA000 ||
				h.WriterRun != a.ID() || h.ByRun != b.ID() || h.Size != 8 || h.Addr < arrOut || h.Addr >= arrOut+64 || h.Addr%8 != 0 {
				t.Errorf("hazard %+v: want kind %d, slot 3, vmid 1, by 0xB000 (run %d), writer 0xA000 (run %d), 8 bytes of out",
					h, tc.kind, b.ID(), a.ID())
			}
		})
	}
}

// No hazard is named against a run that has ended, one in another address space, a write it
// has not made, or after a wait that saw its write (Acquire).
func TestHazardSilent(t *testing.T) {
	p, mem, _ := newPool(t, Config{CUs: 2, Strict: func() bool { return true }})
	a := startHeld(t, p, mem, 8)
	if _, _, ok := a.Wrote(2, arrOut, 8); ok {
		t.Error("named in another VMID")
	}
	if _, _, ok := a.Wrote(1, arrOut+64, 64); ok {
		t.Error("named bytes the run never wrote")
	}
	a.Acquire(1, arrOut+64) // a place it did not write: nothing changes
	if _, _, ok := a.Wrote(1, arrOut, 8); !ok {
		t.Fatal("an acquire of another line dropped the record")
	}
	a.Acquire(1, arrOut+8)
	if _, _, ok := a.Wrote(1, arrOut, 64); ok {
		t.Error("named after a wait that saw the run's write")
	}
	release(p, mem)
	wait(t, a)
	mem.setU64(flagVA, 0)
	p.InvalidateL0()
	b := startHeld(t, p, mem, 8)
	release(p, mem)
	wait(t, b)
	if _, _, ok := b.Wrote(1, arrOut, 8); ok {
		t.Error("named against an ended run")
	}
	if s := p.Sanitizer(); s.Hazards != 0 {
		t.Errorf("%d hazards named", s.Hazards)
	}
}

// The last stale L0 read is kept for the register block, and Reset clears the record.
func TestSanitizerStaleAndReset(t *testing.T) {
	p, mem, _ := newPool(t, Config{CUs: 1, Strict: func() bool { return true }})
	prog := build(t, asm.Instructions{
		asm.LoadImm(asm.R6, flagVA, asm.DWord),
		asm.LoadMem(asm.R0, asm.R6, 0, asm.DWord),
		asm.Return(),
	})
	d := Dispatch{Program: prog, Groups: [3]uint32{1, 1, 1}, GroupSize: [3]uint32{1, 1, 1}, VMID: 2, Slot: 5}
	for v := range uint64(2) {
		mem.setU64(flagVA, v)
		r, _ := p.Start(d)
		wait(t, r)
	}
	s := p.Sanitizer()
	if s.StaleReads != 1 || s.LastStale != (StaleRead{Slot: 5, VMID: 2, Addr: flagVA}) {
		t.Fatalf("sanitizer %+v", s)
	}
	p.Report(Hazard{Kind: abi.SHADER_HAZARD_PACKET_READ})
	if !p.Reset(0) {
		t.Fatal("reset")
	}
	if s := p.Sanitizer(); s != (HazardStats{}) {
		t.Errorf("after Reset: %+v", s)
	}
}

// Many CUs record while others check: the record is consistent under the race detector.
func TestHazardRecordRace(t *testing.T) {
	p, mem, _ := newPool(t, Config{CUs: 4, Parallel: 4, Strict: func() bool { return true }})
	a, err := p.Start(Dispatch{Program: build(t, holdStore()), Groups: [3]uint32{4, 1, 1}, GroupSize: [3]uint32{64, 1, 1}, VMID: 1}) // a group per CU: all store, then spin
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for i := range uint64(4096) {
				a.Wrote(1, arrOut+8*(i%256), 8)
			}
		})
	}
	wg.Wait()
	for i := 0; ; i++ {
		if _, _, ok := a.Wrote(1, arrOut, 8*256); ok {
			if _, size, _ := a.Wrote(1, arrOut, 8*256); size == 8*256 {
				break
			}
		}
		if i > 1e7 {
			t.Fatal("the 256 stores were never recorded as one range")
		}
	}
	release(p, mem)
	if err, _ := wait(t, a); err != nil {
		t.Fatal(err)
	}
}

// The sanitizer's cost on a store-heavy dispatch: strict mode off (nothing recorded, the
// baseline) beside on (every store recorded, every load checked against an earlier run).
func BenchmarkVectorAddStrict(b *testing.B) {
	for _, strict := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[strict]
		b.Run(name, func(b *testing.B) {
			mem := newTestMem(base, 0x20000)
			p := New(Config{CUs: 2, Memory: mem, Strict: func() bool { return strict }})
			defer p.Close()
			setArgs(mem)
			prog, _, err := shaderBuild(vectorAdd())
			if err != nil {
				b.Fatal(err)
			}
			const n = 1024
			var prev *Run
			b.ResetTimer()
			for range b.N {
				var after []*Run
				if prev != nil {
					after = []*Run{prev}
				}
				r, err := p.Start(Dispatch{Program: prog, Groups: [3]uint32{n / 64, 1, 1}, GroupSize: [3]uint32{64, 1, 1}, Args: argsVA, VMID: 1, After: after})
				if err != nil {
					b.Fatal(err)
				}
				if err, _ := r.Result(); err != nil {
					b.Fatal(err)
				}
				prev = r
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "items/s")
		})
	}
}
