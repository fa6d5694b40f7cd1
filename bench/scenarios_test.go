package bench

import (
	"errors"
	"strings"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/bars"
	"vgpu/vfiouser/vfiousertest"
)

// TestScenariosRun runs every scenario's device op and baseline a few times: each sets up,
// checks its own results and measures something (`vgpu bench` and `go test -bench` give the
// numbers; nothing here asserts a speed).
func TestScenariosRun(t *testing.T) {
	scenarios := []struct {
		s Scenario
		n int
	}{
		{RegionRead(), 20},
		{DoorbellIRQ(bars.DoorbellTrap), 20},
		{DoorbellIRQ(bars.DoorbellPoll), 20},
		{PacketRate(), 1000},
		{PacketRateVMIDs(), 1000},
		{PacketRateProcessVMID(), 1000},
		{TranslateTLBHit(), 1000},
		{TranslateWalk(), 1000},
		{Copy(4 << 10), 3},
		{Copy(64 << 10), 3},
		{Copy(1 << 20), 3},
		{ShaderALU(), 2},
		{ShaderVectorAdd(), 2},
		{ShaderScaling(), 2},
	}
	for _, sc := range scenarios {
		t.Run(sc.s.Name, func(t *testing.T) {
			p, err := sc.s.Setup()
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for _, side := range []struct {
				name string
				op   Op
			}{{"device", p.Dev}, {"baseline", p.Base}, {"device again", p.Dev}} {
				r, err := timeOp(side.op, sc.n)
				if err != nil {
					t.Fatalf("%s: %v", side.name, err)
				}
				if v := sc.s.Value(r.N, r.T); !(v > 0) {
					t.Fatalf("%s measured %v %s", side.name, v, sc.s.Unit)
				}
				if dev := side.name != "baseline"; dev && sc.s.EngineTime && !(r.E > 0 && r.E <= r.T) {
					t.Fatalf("%s: engine time %v beside %v of wall time", side.name, r.E, r.T)
				}
			}
		})
	}
}

// TestRegionReadUnderLoad runs the load figure small: the queues must really loop (the
// scenario checks that each one's write pointer moved) and both figures must be measured.
func TestRegionReadUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 16 busy queues in a child process")
	}
	rs, err := RegionReadUnderLoad(50, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results, want median and p99", len(rs))
	}
	for _, r := range rs {
		if !(r.Value > 0) || !(r.Base > 0) {
			t.Errorf("%s: %v µs beside %v µs", r.Name, r.Value, r.Base)
		}
		t.Logf("%s: %.3g µs (%s %.3g µs, ratio %.2f; %s)", r.Name, r.Value, r.Baseline, r.Base, r.Ratio(), r.Note)
	}
	if rs[1].Value < rs[0].Value || rs[1].Base < rs[0].Base {
		t.Errorf("p99 below the median: %+v", rs)
	}
}

// TestTrapFloorRefuses: the floor's server accepts only the doorbell write it expects, and the
// client's error says why the server stopped.
func TestTrapFloorRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		region uint32
		off    uint64
		value  byte // the server expects 4 after three doorbells
	}{
		{"register BAR", abi.BAR_REGS, 8 * doorbellQW, 4},
		{"other doorbell", abi.BAR_DOORBELL, 0, 4},
		{"value out of sequence", abi.BAR_DOORBELL, 8 * doorbellQW, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := newTrapFloor()
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.op(3, nil); err != nil {
				t.Fatalf("expected doorbells: %v", err)
			}
			b := [8]byte{tc.value}
			err = f.c.Write(tc.region, tc.off, b[:])
			if err == nil {
				_, err = vfiousertest.WaitIRQ(f.efd, 100*time.Millisecond)
			}
			if err == nil {
				t.Fatal("the floor answered a write it should refuse")
			}
			if err := f.why(err); !errors.Is(err, errNotDoorbell) {
				t.Fatalf("error %v does not say the server refused the write", err)
			}
		})
	}
}

// TestPollFloor: the poller signals once per new value.
func TestPollFloor(t *testing.T) {
	f, err := newPollFloor()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := timeOp(f.op, 50); err != nil {
		t.Fatal(err)
	}
	if _, err := vfiousertest.WaitIRQ(f.efd, 20*time.Millisecond); err == nil {
		t.Fatal("an interrupt without a new doorbell value")
	}
}

// fakeClock replaces the stopwatch's time source for a test: ops advance it explicitly.
type fakeClock struct{ t time.Time }

func useFakeClock(t *testing.T) *fakeClock {
	c := &fakeClock{t: time.Unix(1000, 0)}
	now = func() time.Time { return c.t }
	t.Cleanup(func() { now = time.Now })
	return c
}

// tickOp takes d of (fake) time per iteration, and as long again with its clock stopped.
func (f *fakeClock) tickOp(d time.Duration, stopped bool) Op {
	return func(n int, c Clock) error {
		for range n {
			f.t = f.t.Add(d)
			if stopped {
				c.StopTimer()
				f.t = f.t.Add(d)
				c.StartTimer()
			}
		}
		return nil
	}
}

func TestMeasure(t *testing.T) {
	clock := useFakeClock(t)
	const target = 20 * time.Millisecond
	r, err := measure(clock.tickOp(time.Millisecond, false), target)
	if err != nil {
		t.Fatal(err)
	}
	if r.T < target || r.T > 2*target || r.T != time.Duration(r.N)*time.Millisecond {
		t.Errorf("measured %d iterations in %v, want about %v", r.N, r.T, target)
	}
	// Stopped time is not counted.
	r, err = timeOp(clock.tickOp(time.Millisecond, true), 10)
	if err != nil {
		t.Fatal(err)
	}
	if r.T != 10*time.Millisecond {
		t.Errorf("10 × (1 ms timed + 1 ms stopped) measured %v", r.T)
	}
	boom := errors.New("boom")
	if _, err := measure(func(n int, _ Clock) error { return boom }, target); !errors.Is(err, boom) {
		t.Errorf("an op's failure was not reported: %v", err)
	}
	if _, err := measure(func(n int, _ Clock) error { return nil }, target); err == nil {
		t.Error("an op that takes no time was measured")
	}
	// Run takes each side's median round and reports a failing side, naming it.
	s := Scenario{Name: "s", Baseline: "floor", Setup: func() (Pair, error) {
		return Pair{Dev: clock.tickOp(3*time.Microsecond, false), Base: clock.tickOp(2*time.Microsecond, true), Close: func() {}}, nil
	}}
	res, err := s.Run()
	if err != nil {
		t.Fatal(err)
	}
	if res.Value != 3 || res.Base != 2 || res.Ratio() != 1.5 {
		t.Errorf("Run: %+v, want 3 µs beside 2 µs", res)
	}
	s.Setup = func() (Pair, error) {
		return Pair{Dev: clock.tickOp(time.Millisecond, false), Base: func(int, Clock) error { return boom }, Close: func() {}}, nil
	}
	if _, err := s.Run(); !errors.Is(err, boom) || !strings.Contains(err.Error(), "baseline (floor)") {
		t.Errorf("failing baseline: %v", err)
	}
	s.Setup = func() (Pair, error) { return Pair{}, boom }
	if _, err := s.Run(); !errors.Is(err, boom) {
		t.Errorf("failing set-up: %v", err)
	}
}

func TestQuantile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	for _, tc := range []struct {
		samples []time.Duration
		q       float64
		want    time.Duration
	}{
		{ms(3, 1, 2), 0.5, 2 * time.Millisecond},
		{ms(4, 3, 2, 1), 0.5, 2 * time.Millisecond},
		{ms(5), 0.99, 5 * time.Millisecond},
		{ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 0.99, 10 * time.Millisecond},
		{ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 0.9, 9 * time.Millisecond},
		{nil, 0.5, 0},
	} {
		if got := quantile(tc.samples, tc.q); got != tc.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", tc.samples, tc.q, got, tc.want)
		}
	}
}

func TestScenarioValue(t *testing.T) {
	lat := Scenario{}
	if got := lat.Value(1000, 20*time.Millisecond); got != 20 {
		t.Errorf("latency: %v µs per op, want 20", got)
	}
	rate := Scenario{PerOp: 2}
	if got := rate.Value(500, 100*time.Millisecond); got != 10000 {
		t.Errorf("rate: %v per second, want 10000", got)
	}
	if r := (Result{Value: 3, Base: 2}); r.Ratio() != 1.5 {
		t.Errorf("ratio %v", r.Ratio())
	}
}
