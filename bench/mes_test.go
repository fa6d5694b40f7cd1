package bench

import (
	"strings"
	"testing"
	"time"

	"vgpu/abi"
)

// The MES figures run small here: each sets up, checks its own results (every job ran, in
// order per queue; the baselines stayed mapped; switches and preemptions happened where the
// figure says) and measures something. `vgpu bench` and the benchmarks give the numbers;
// nothing here asserts a speed.

func logResults(t testing.TB, rs ...Result) {
	for _, r := range rs {
		if !(r.Value > 0) || !(r.Base > 0) {
			t.Errorf("%s: %v %s beside %v", r.Name, r.Value, r.Unit, r.Base)
		}
		t.Logf("%s: %.4g %s; %s: %.4g; ratio %.2f; %s", r.Name, r.Value, r.Unit, r.Baseline, r.Base, r.Ratio(), r.Note)
	}
}

func TestMESOversubscription(t *testing.T) {
	if testing.Short() {
		t.Skip("1040 queues on two devices, a few seconds")
	}
	rs, err := MESOversubscription(time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results, want throughput and fairness", len(rs))
	}
	logResults(t, rs...)
	if j := rs[1].Value; j > 1 || j < 1.0/osQueues {
		t.Errorf("Jain index %v outside [1/n, 1]", j)
	}
}

// TestMESStarvedQueue: a queue that completes nothing fails the figure, naming it (its gang
// is suspended, so it never gets a slot).
func TestMESStarvedQueue(t *testing.T) {
	o, err := newOversubRig()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	defer func(w time.Duration) { osWarm = w }(osWarm)
	osWarm = 500 * time.Millisecond
	q := o.devQs[5]
	suspend := mesFrame(abi.MES_SCH_API_SUSPEND).set64(abi.MES_SUSPEND_DW_GANG_CONTEXT_ADDR, q.mqd+mqGangCtx).
		set64(abi.MES_SUSPEND_DW_SUSPEND_FENCE_ADDR, abi.GPU_FB_BASE+mesRingFence+0x80).set(abi.MES_SUSPEND_DW_SUSPEND_FENCE_VALUE, 1)
	if err := o.mes.frames([]*mesFrameB{suspend}); err != nil {
		t.Fatal(err)
	}
	_, err = o.mes.window(o.devQs[:64], 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "queue 5 completed no") {
		t.Fatalf("a suspended queue: %v, want an error naming queue 5", err)
	}
	t.Log(err)
}

func TestJain(t *testing.T) {
	for _, tc := range []struct {
		x    []uint32
		want float64
	}{
		{[]uint32{5, 5, 5, 5}, 1},
		{[]uint32{8, 0, 0, 0}, 0.25},
		{[]uint32{1, 3}, 0.8}, // 16 / (2·10)
		{[]uint32{0, 0}, 0},
	} {
		if got := jain(tc.x); got < tc.want-1e-12 || got > tc.want+1e-12 {
			t.Errorf("jain(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
}

func TestMESSwitch(t *testing.T) {
	s, err := newSwitchRig()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Every alternating job is one map; A alone and the packets are none; the packets ran.
	for _, side := range []struct {
		name string
		op   Op
		n    int
	}{{"alternating", s.alternate, 50}, {"A alone", s.alone, 50}, {"packets", s.packetOp(), 100}, {"alternating again", s.alternate, 50}} {
		if _, err := timeOp(side.op, side.n); err != nil {
			t.Fatalf("%s: %v", side.name, err)
		}
	}
	r, err := MESSwitch(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %.4g %s; %s: %.4g; ratio %.2f; %s", r.Name, r.Value, r.Unit, r.Baseline, r.Base, r.Ratio(), r.Note)
}

func TestMESPriorityLatency(t *testing.T) {
	rs, err := MESPriorityLatency(20, 2)
	if err != nil {
		t.Fatal(err)
	}
	logResults(t, rs...)
}

// The benchmarks run each figure once per iteration and report its last run.
func BenchmarkMESOversubscription(b *testing.B) {
	for range b.N {
		rs, err := MESOversubscription(time.Second, 3)
		if err != nil {
			b.Fatal(err)
		}
		reportResult(b, rs[0])
		b.ReportMetric(rs[1].Value, "jain")
	}
}

func BenchmarkMESSwitch(b *testing.B) {
	for range b.N {
		r, err := MESSwitch(5)
		if err != nil {
			b.Fatal(err)
		}
		reportResult(b, r)
		b.Log(r.Note)
	}
}

func BenchmarkMESPriorityLatency(b *testing.B) {
	for range b.N {
		rs, err := MESPriorityLatency(100, 3)
		if err != nil {
			b.Fatal(err)
		}
		reportResult(b, rs[0])
		b.ReportMetric(rs[1].Value, "p99-µs")
		b.ReportMetric(rs[1].Base, "idle-p99-µs")
	}
}

func TestShaderPreemptLatency(t *testing.T) {
	r, err := ShaderPreemptLatency(3)
	if err != nil {
		t.Fatal(err)
	}
	logResults(t, r)
}

func BenchmarkShaderPreemptLatency(b *testing.B) {
	for range b.N {
		r, err := ShaderPreemptLatency(11)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.Value, "µs/preempt")
		b.ReportMetric(r.Base, "µs/baseline")
	}
}
