package bench

import (
	"os"
	"testing"
	"time"

	"vgpu/bars"
)

func TestMain(m *testing.M) {
	ServeIfChild() // the load scenarios re-execute this binary as their device server
	os.Exit(m.Run())
}

// benchScenario runs a scenario's device op for b.N iterations (the benchmark's own timing),
// then its baseline for as many, and reports both and their ratio.
func benchScenario(b *testing.B, s Scenario) {
	b.Helper()
	p, err := s.Setup()
	if err != nil {
		b.Fatalf("%s: set-up: %v", s.Name, err)
	}
	defer p.Close()
	c := &benchClock{B: b}
	b.ResetTimer()
	if err := p.Dev(b.N, c); err != nil {
		b.Fatalf("%s: %v", s.Name, err)
	}
	b.StopTimer()
	value := s.Value(b.N, b.Elapsed())
	base, err := timeOp(p.Base, b.N)
	if err != nil {
		b.Fatalf("%s: baseline (%s): %v", s.Name, s.Baseline, err)
	}
	r := Result{Name: s.Name, Value: value, Unit: s.Unit, Baseline: s.Baseline, Base: s.Value(base.N, base.T)}
	if s.EngineTime { // the figure is the engine's time; the wall clock's is reported beside it
		r.Value = s.Value(b.N, c.engine)
		b.ReportMetric(value, "wall-"+s.Unit)
		b.ReportMetric(value/r.Base, "wall-ratio")
	}
	reportResult(b, r)
}

// benchClock is the benchmark's clock with the engine time an Op reports (EngineTimer).
type benchClock struct {
	*testing.B
	engine time.Duration
}

func (c *benchClock) AddEngineTime(d time.Duration) { c.engine += d }

func reportResult(b *testing.B, r Result) {
	b.ReportMetric(r.Value, r.Unit)
	b.ReportMetric(r.Base, "baseline-"+r.Unit)
	b.ReportMetric(r.Ratio(), "ratio")
	b.Logf("%s: %.3g %s; %s: %.3g %s; ratio %.2f", r.Name, r.Value, r.Unit, r.Baseline, r.Base, r.Unit, r.Ratio())
}

func BenchmarkRegionRead(b *testing.B)      { benchScenario(b, RegionRead()) }
func BenchmarkDoorbellTrapIRQ(b *testing.B) { benchScenario(b, DoorbellIRQ(bars.DoorbellTrap)) }
func BenchmarkDoorbellPollIRQ(b *testing.B) { benchScenario(b, DoorbellIRQ(bars.DoorbellPoll)) }
func BenchmarkPacketRate(b *testing.B)      { benchScenario(b, PacketRate()) }
func BenchmarkPacketRateVMIDs(b *testing.B) { benchScenario(b, PacketRateVMIDs()) }
func BenchmarkPacketRateProcessVMID(b *testing.B) {
	benchScenario(b, PacketRateProcessVMID())
}
func BenchmarkTranslateTLBHit(b *testing.B) { benchScenario(b, TranslateTLBHit()) }
func BenchmarkTranslateWalk(b *testing.B)   { benchScenario(b, TranslateWalk()) }
func BenchmarkCopy4K(b *testing.B)          { benchScenario(b, Copy(4<<10)) }
func BenchmarkCopy64K(b *testing.B)         { benchScenario(b, Copy(64<<10)) }
func BenchmarkCopy1M(b *testing.B)          { benchScenario(b, Copy(1<<20)) }
func BenchmarkCopy16M(b *testing.B)         { benchScenario(b, Copy(16<<20)) }
func BenchmarkCopy64M(b *testing.B)         { benchScenario(b, Copy(64<<20)) }

// BenchmarkIdleCPU: each iteration is a millisecond of an idle device, in poll mode; the
// baseline is as long in trap mode.
func BenchmarkIdleCPU(b *testing.B) {
	wall := time.Duration(b.N) * time.Millisecond
	poll, err := IdleCPUOf(bars.DoorbellPoll, wall)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	trap, err := IdleCPUOf(bars.DoorbellTrap, wall)
	if err != nil {
		b.Fatal(err)
	}
	reportResult(b, Result{Name: "idle device, poll mode", Value: poll, Unit: "%CPU", Baseline: "trap mode", Base: trap})
}

// BenchmarkRegionReadUnderLoad: b.N timed register reads while 16 queues self-kick, after as
// many with the queues idle (the baseline); reports medians and p99s in µs.
func BenchmarkRegionReadUnderLoad(b *testing.B) {
	b.StopTimer()
	l, err := newLoadRig()
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	idle, err := l.readLatencies(b.N, time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	if err := l.start(); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	loaded, err := l.readLatencies(b.N, time.Time{})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.check(); err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		v, base := micros(quantile(loaded, q.q)), micros(quantile(idle, q.q))
		b.ReportMetric(v, q.name+"-µs")
		b.ReportMetric(base, "idle-"+q.name+"-µs")
		b.ReportMetric(v/base, q.name+"-ratio")
	}
}

func BenchmarkShaderALU(b *testing.B)       { benchScenario(b, ShaderALU()) }
func BenchmarkShaderVectorAdd(b *testing.B) { benchScenario(b, ShaderVectorAdd()) }
func BenchmarkShaderScaling(b *testing.B)   { benchScenario(b, ShaderScaling()) }
