package bench

import (
	"testing"
	"time"

	"vgpu/bars"
)

// report runs a scenario as a benchmark and reports its value and ratio as metrics.
func report(b *testing.B, f func() (Result, error)) {
	b.Helper()
	r, err := f()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.Value, r.Unit)
	if r.Base != 0 {
		b.ReportMetric(r.Base, "baseline-"+r.Unit)
		b.ReportMetric(r.Ratio(), "ratio")
	}
	b.Logf("%s: %.3g %s; %s: %.3g %s; ratio %.2f", r.Name, r.Value, r.Unit, r.Baseline, r.Base, r.Unit, r.Ratio())
}

// Each benchmark measures internally (beside its baseline); b.N is irrelevant.

func BenchmarkRegionRead(b *testing.B) { report(b, RegionRead) }
func BenchmarkDoorbellTrapIRQ(b *testing.B) {
	report(b, func() (Result, error) { return DoorbellToInterrupt(bars.DoorbellTrap) })
}
func BenchmarkDoorbellPollIRQ(b *testing.B) {
	report(b, func() (Result, error) { return DoorbellToInterrupt(bars.DoorbellPoll) })
}
func BenchmarkPacketRate(b *testing.B) { report(b, PacketRate) }
func BenchmarkIdleCPU(b *testing.B) {
	report(b, func() (Result, error) { return IdleCPU(time.Second) })
}
func BenchmarkCopy4K(b *testing.B) {
	report(b, func() (Result, error) { return CopyBandwidth(4 << 10) })
}
func BenchmarkCopy64K(b *testing.B) {
	report(b, func() (Result, error) { return CopyBandwidth(64 << 10) })
}
func BenchmarkCopy1M(b *testing.B) {
	report(b, func() (Result, error) { return CopyBandwidth(1 << 20) })
}
func BenchmarkCopy16M(b *testing.B) {
	report(b, func() (Result, error) { return CopyBandwidth(16 << 20) })
}
func BenchmarkCopy64M(b *testing.B) {
	report(b, func() (Result, error) { return CopyBandwidth(64 << 20) })
}

// TestScenariosRun runs every scenario once, small, so `go test` proves they work (the numbers
// are for `go test -bench` and `vgpu bench`; nothing here asserts a speed).
func TestScenariosRun(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for a few seconds")
	}
	for name, f := range map[string]func() (Result, error){
		"region read":   RegionRead,
		"doorbell trap": func() (Result, error) { return DoorbellToInterrupt(bars.DoorbellTrap) },
		"doorbell poll": func() (Result, error) { return DoorbellToInterrupt(bars.DoorbellPoll) },
		"copy 64K":      func() (Result, error) { return CopyBandwidth(64 << 10) },
	} {
		t.Run(name, func(t *testing.T) {
			r, err := f()
			if err != nil {
				t.Fatal(err)
			}
			if r.Value <= 0 {
				t.Fatalf("%s measured nothing: %+v", name, r)
			}
			t.Logf("%s: %.3g %s (%s: %.3g, ratio %.2f)", r.Name, r.Value, r.Unit, r.Baseline, r.Base, r.Ratio())
		})
	}
}
