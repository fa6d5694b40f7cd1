package bench

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/abi"
	"vgpu/bars"
	"vgpu/device"
)

// TestCClient runs the C client for a few hundred round trips against an in-process device:
// the protocol must work end to end and every read must return the register's real value.
// Nothing here judges the timings.
func TestCClient(t *testing.T) {
	cc, err := BuildCClient()
	if err != nil {
		t.Fatal(err) // gcc is part of the project's toolchain: a missing one is a failure
	}
	t.Cleanup(func() { cc.Close() })
	cfg := device.DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow = 16<<20, 16<<20
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	dev, err := device.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })

	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // Measure keeps this process off the measured CPU only while it runs
		for _, tid := range threads() {
			var m unix.CPUSet
			if unix.SchedGetaffinity(tid, &m) == nil && m != orig {
				t.Errorf("thread %d left with CPU mask %v, want %v", tid, m, orig)
			}
		}
	})
	scratch := rand.Uint32() | 1 // never 0: Want 0 would accept anything
	enable := SetupWrite{Region: pciConfigRegion, Offset: 0x04, Size: 2, Value: 0x6}
	tests := []struct {
		name   string
		offset uint64
		setup  []SetupWrite
		want   uint32
	}{
		{"read-only magic", abi.REG_ID_MAGIC, nil, abi.ID_MAGIC_VALUE},
		{"scratch written by the client", abi.REG_CONFIG_SCRATCH_0,
			[]SetupWrite{enable, {Region: abi.BAR_REGS, Offset: abi.REG_CONFIG_SCRATCH_0, Size: 4, Value: uint64(scratch)}}, scratch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := cc.Measure(dev, CClientConfig{
				Region: abi.BAR_REGS, Offset: tt.offset, Want: tt.want,
				N: 300, Warmup: 10, Rounds: 2, CPU: -1, Setup: tt.setup,
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.Device.Value != tt.want {
				t.Fatalf("read %#x, want %#x", r.Device.Value, tt.want)
			}
			for _, st := range []CStats{r.Device, r.Echo} {
				if st.N != 300 || st.Min <= 0 || st.Min > st.Median || st.Median > st.P99 || st.P99 > st.Max ||
					st.ClientCPU <= 0 || st.ServerCPU <= 0 || st.ClientVCSW+st.ClientIVCSW <= 0 || st.ServerVCSW+st.ServerIVCSW <= 0 {
					t.Fatalf("implausible statistics: %+v", st)
				}
			}
			t.Logf("CPU %d: device %v (p99 %v, server CPU %v), echo %v (p99 %v, server CPU %v), %v over", r.CPU,
				r.Device.Median, r.Device.P99, r.Device.ServerCPU, r.Echo.Median, r.Echo.P99, r.Echo.ServerCPU, r.Over())
		})
	}
}

// TestCClientWrongValue: a register that does not read what the caller expects is an error,
// not a figure.
func TestCClientWrongValue(t *testing.T) {
	cc, err := BuildCClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	cfg := device.DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow = 16<<20, 16<<20
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	dev, err := device.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	_, err = cc.Measure(dev, CClientConfig{N: 20, Warmup: 1, Rounds: 1, CPU: -1, Want: abi.ID_MAGIC_VALUE + 1})
	if err == nil || !strings.Contains(err.Error(), "want") {
		t.Fatalf("unexpected error (-want +got):\n-read ... want %#x\n+%v", abi.ID_MAGIC_VALUE+1, err)
	}
	// Decoding disabled (no setup write enabling memory): the BAR reads as all ones.
	_, err = cc.Measure(dev, CClientConfig{N: 20, Warmup: 1, Rounds: 1, CPU: -1, Want: abi.ID_MAGIC_VALUE,
		Setup: []SetupWrite{{Region: pciConfigRegion, Offset: 0x04, Size: 2, Value: 0}}})
	if err == nil || !strings.Contains(err.Error(), "0xffffffff") {
		t.Fatalf("unexpected error (-want +got):\n-read 0xffffffff\n+%v", err)
	}
}

func TestBuildCClientWithoutGCC(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	cc, err := BuildCClient()
	if err == nil {
		cc.Close()
		t.Fatal("built the C client without gcc on PATH")
	}
	if !strings.Contains(err.Error(), "gcc") {
		t.Fatalf("error does not name gcc: %v", err)
	}
}

func TestParseCStats(t *testing.T) {
	tests := []struct {
		name, out, mode string
		want            CStats
		wantErr         string
	}{
		{"device", "cclient mode=device n=3 min_ns=1 median_ns=2 p99_ns=3 max_ns=4 mean_ns=2 client_cpu_ns=7 client_vcsw_k=1001 client_ivcsw_k=302 server_cpu_ns=8 server_vcsw_k=640 server_ivcsw_k=790 value=0x55504756\n", "device",
			CStats{N: 3, Min: 1, Median: 2, P99: 3, Max: 4, Mean: 2, ClientCPU: 7, ServerCPU: 8,
				ClientVCSW: 1001, ClientIVCSW: 302, ServerVCSW: 640, ServerIVCSW: 790, Value: 0x55504756}, ""},
		{"bad switch count", "cclient mode=echo n=1 min_ns=5 median_ns=5 p99_ns=5 max_ns=5 mean_ns=5 client_cpu_ns=3 client_vcsw_k=x\n", "echo", CStats{}, "client_vcsw_k"},
		{"device without server figure", "cclient mode=device n=3 min_ns=1 median_ns=2 p99_ns=3 max_ns=4 mean_ns=2 client_cpu_ns=7 value=0x1\n", "device",
			CStats{N: 3, Min: 1, Median: 2, P99: 3, Max: 4, Mean: 2, ClientCPU: 7, Value: 1}, ""},
		{"echo after noise", "warning\ncclient mode=echo n=1 min_ns=5 median_ns=5 p99_ns=5 max_ns=5 mean_ns=5 client_cpu_ns=3 server_cpu_ns=4\n", "echo",
			CStats{N: 1, Min: 5, Median: 5, P99: 5, Max: 5, Mean: 5, ClientCPU: 3, ServerCPU: 4}, ""},
		{"unknown fields ignored", "cclient mode=echo n=1 min_ns=5 median_ns=5 p99_ns=5 max_ns=5 mean_ns=5 client_cpu_ns=3 new=9\n", "echo",
			CStats{N: 1, Min: 5, Median: 5, P99: 5, Max: 5, Mean: 5, ClientCPU: 3}, ""},
		{"wrong mode", "cclient mode=echo n=1 min_ns=5 median_ns=5 p99_ns=5 max_ns=5 mean_ns=5 client_cpu_ns=3\n", "device", CStats{}, "mode"},
		{"missing field", "cclient mode=echo n=1 min_ns=5 p99_ns=5 max_ns=5 mean_ns=5 client_cpu_ns=3\n", "echo", CStats{}, "median_ns"},
		{"device without value", "cclient mode=device n=1 min_ns=5 median_ns=5 p99_ns=5 max_ns=5 mean_ns=5 client_cpu_ns=3\n", "device", CStats{}, "value"},
		{"bad number", "cclient mode=echo n=1 min_ns=x median_ns=5 p99_ns=5 max_ns=5 mean_ns=5 client_cpu_ns=3\n", "echo", CStats{}, "min_ns"},
		{"no line", "", "echo", CStats{}, "no result line"},
		{"bad field", "cclient mode=echo n\n", "echo", CStats{}, "bad field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCStats([]byte(tt.out), tt.mode)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("unexpected error (-want +got):\n-%s\n+%v", tt.wantErr, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("unexpected result (-want +got):\n-%+v\n+%+v (%v)", tt.want, got, err)
			}
		})
	}
}

// TestMedianStats takes each statistic's median separately.
func TestMedianStats(t *testing.T) {
	us := time.Microsecond
	got := medianStats([]CStats{
		{N: 5, Min: 3 * us, Median: 9 * us, P99: 20 * us, Max: 90 * us, Mean: 10 * us, ClientCPU: 4 * us, ServerCPU: 6 * us, ClientVCSW: 900, ServerIVCSW: 7, Value: 7},
		{N: 5, Min: 1 * us, Median: 8 * us, P99: 40 * us, Max: 50 * us, Mean: 9 * us, ClientCPU: 5 * us, ServerCPU: 4 * us, ClientVCSW: 1100, ServerIVCSW: 9, Value: 7},
		{N: 5, Min: 2 * us, Median: 7 * us, P99: 30 * us, Max: 70 * us, Mean: 11 * us, ClientCPU: 3 * us, ServerCPU: 5 * us, ClientVCSW: 1000, ServerIVCSW: 8, Value: 7},
	})
	want := CStats{N: 5, Min: 2 * us, Median: 8 * us, P99: 30 * us, Max: 70 * us, Mean: 10 * us, ClientCPU: 4 * us, ServerCPU: 5 * us,
		ClientVCSW: 1000, ServerIVCSW: 8, Value: 7}
	if got != want {
		t.Fatalf("unexpected medians (-want +got):\n-%+v\n+%+v", want, got)
	}
}

// BenchmarkCClientRegionRead: the C client's b.N timed round trips (after its warm-up) in
// each of three rounds, alternating with as many of its echo; reports both medians and their
// ratio (the build and the device are outside the timed region).
func BenchmarkCClientRegionRead(b *testing.B) {
	b.StopTimer()
	cc, err := BuildCClient()
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	dev, err := newDevice(bars.DoorbellTrap, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	b.StartTimer()
	r, err := cc.Measure(dev, CClientConfig{CPU: -1, Want: abi.ID_MAGIC_VALUE, N: b.N, Rounds: 3})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	reportResult(b, Result{Name: "REGION_READ round trip (C client)", Value: micros(r.Device.Median), Unit: "µs",
		Baseline: "C unix socket echo", Base: micros(r.Echo.Median)})
}
