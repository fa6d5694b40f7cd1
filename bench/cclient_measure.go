package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/abi"
	"vgpu/device"
	"vgpu/vfiouser"
)

// Placement. The server's connection goroutine is locked to an OS thread pinned to one CPU, the
// C client (and its echo server) are pinned to the same CPU, and every other thread of this
// process is kept off it while measuring. With both ends on one CPU no cross-CPU wake-up is
// paid and nothing else of ours runs there, so the difference between the device round trip
// and the echo is the server's own cost per message: its system calls, scheduling and code.
//
// The server runs in this process (vgpu/device behind vgpu/vfiouser, exactly what `vgpu serve`
// runs) rather than as a `vgpu serve` child: the bench then needs no built vgpu binary, tests
// can run it, and the runtime's other threads (sysmon, GC workers) can be kept off the measured
// CPU while the serving thread is pinned to it. A server process pinned whole with taskset gets
// GOMAXPROCS 1 and shares its CPU with those threads; that placement is not used here.

// CClientConfig says what to measure. Zero values take the defaults.
type CClientConfig struct {
	Region uint32 // default abi.BAR_REGS
	Offset uint64 // default abi.REG_ID_MAGIC
	// Want is the value every read must return; 0 accepts whatever the first read returned
	// (the C client still checks that it never changes).
	Want   uint32
	N      int // timed round trips per run (default 10,000)
	Warmup int // untimed round trips before them (default 1,000)
	Rounds int // alternating echo/device runs; the figures are the medians over rounds (default 7)
	CPU    int // the CPU server and client share; negative: the highest this process may use
	// Setup runs before each device run; nil means "enable memory decoding and bus
	// mastering" in the PCI command register, as a driver's pci_enable_device does.
	Setup []SetupWrite
}

// pciConfigRegion is vfio-user's PCI config space region (VFIO_PCI_CONFIG_REGION_INDEX).
const pciConfigRegion = 7

func (cfg *CClientConfig) defaults() error {
	if cfg.Region == 0 && cfg.Offset == 0 {
		cfg.Region, cfg.Offset = abi.BAR_REGS, abi.REG_ID_MAGIC
	}
	if cfg.N <= 0 {
		cfg.N = 10000
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 1000
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 7
	}
	if cfg.Setup == nil {
		cfg.Setup = []SetupWrite{{Region: pciConfigRegion, Offset: 0x04, Size: 2, Value: 0x6}}
	}
	if cfg.CPU < 0 {
		cpu, err := highestCPU()
		if err != nil {
			return err
		}
		cfg.CPU = cpu
	}
	return nil
}

// CClientResult is the C client's figure: a trapped register read through the server beside
// the raw unix-socket echo of the same message sizes, both pinned to CPU.
type CClientResult struct {
	CPU          int
	Device, Echo CStats // medians over the rounds of each statistic
	Rounds       int
}

// Over is how much a device round trip costs above the echo (medians).
func (r CClientResult) Over() time.Duration { return r.Device.Median - r.Echo.Median }

// Ratio is the device round trip in echo round trips (medians).
func (r CClientResult) Ratio() float64 {
	if r.Echo.Median <= 0 {
		return 0
	}
	return float64(r.Device.Median) / float64(r.Echo.Median)
}

// Measure serves dev to the C client (one connection per round, each on a goroutine locked to
// a thread pinned to cfg.CPU) and runs the echo baseline pinned to the same CPU, alternating.
// dev must not be served to anyone else meanwhile. While it runs, this process's other threads
// are kept off cfg.CPU.
func (c *CClient) Measure(dev vfiouser.Device, cfg CClientConfig) (CClientResult, error) {
	if err := cfg.defaults(); err != nil {
		return CClientResult{}, err
	}
	restore, err := keepOffCPU(cfg.CPU)
	if err != nil {
		return CClientResult{}, err
	}
	defer restore()
	sock := filepath.Join(c.dir, "vfio-user.sock")
	os.Remove(sock)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return CClientResult{}, fmt.Errorf("bench: C client socket: %w", err)
	}
	defer l.Close()
	srv := vfiouser.NewServer(dev, slog.New(slog.DiscardHandler))

	var devRuns, echoRuns []CStats
	for range cfg.Rounds {
		e, err := c.run(cclientRun{CPU: cfg.CPU, N: cfg.N, Warmup: cfg.Warmup, echo: true})
		if err != nil {
			return CClientResult{}, err
		}
		echoRuns = append(echoRuns, e)
		d, err := c.serveOne(srv, l, cfg)
		if err != nil {
			return CClientResult{}, err
		}
		if cfg.Want != 0 && d.Value != cfg.Want {
			return CClientResult{}, fmt.Errorf("bench: C client read %#x at region %d offset %#x, want %#x",
				d.Value, cfg.Region, cfg.Offset, cfg.Want)
		}
		devRuns = append(devRuns, d)
	}
	return CClientResult{CPU: cfg.CPU, Device: medianStats(devRuns), Echo: medianStats(echoRuns), Rounds: cfg.Rounds}, nil
}

// serveOne serves one connection of the C client on a pinned thread while the client runs; it
// returns the client's figures once both ended cleanly.
func (c *CClient) serveOne(srv *vfiouser.Server, l *net.UnixListener, cfg CClientConfig) (CStats, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1) // the serving thread's schedstat file, once pinned
	done := make(chan error, 1)
	go func() {
		// The thread stays locked: when this goroutine ends, the runtime retires the thread
		// instead of returning a pinned one to its pool.
		runtime.LockOSThread()
		if err := pinThread(cfg.CPU); err != nil {
			ready <- ""
			done <- err
			return
		}
		ready <- "/proc/" + strconv.Itoa(os.Getpid()) + "/task/" + strconv.Itoa(unix.Gettid()) + "/schedstat"
		uc, err := l.AcceptUnix()
		if err != nil {
			done <- fmt.Errorf("accept: %w", err)
			return
		}
		done <- srv.ServeConn(ctx, uc)
	}()
	stat := <-ready
	if stat == "" {
		return CStats{}, <-done
	}
	st, runErr := c.run(cclientRun{CPU: cfg.CPU, N: cfg.N, Warmup: cfg.Warmup, Socket: l.Addr().String(),
		Region: cfg.Region, Offset: cfg.Offset, Setup: cfg.Setup, ServerStat: stat})
	if runErr != nil {
		cancel()
		l.SetDeadline(time.Now()) // unblock the accept if the client never connected
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		return CStats{}, errors.New("bench: the server did not finish the C client's connection")
	}
	l.SetDeadline(time.Time{})
	if runErr != nil {
		return CStats{}, runErr
	}
	if err != nil {
		return CStats{}, fmt.Errorf("bench: serving the C client: %w", err)
	}
	return st, nil
}

// pinThread binds the calling OS thread (locked by the caller) to cpu.
func pinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("bench: pinning the server thread to CPU %d: %w", cpu, err)
	}
	return nil
}

// keepOffCPU moves every thread of this process off cpu, so the runtime's own threads (sysmon,
// GC workers, idle ones) do not run on the CPU being measured. Threads created meanwhile
// inherit that from their creator. restore gives every thread its mask back (threads that did
// not exist before get the calling thread's). On a one-CPU machine it does nothing.
func keepOffCPU(cpu int) (restore func(), err error) {
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		return nil, fmt.Errorf("bench: CPU affinity: %w", err)
	}
	off := orig
	off.Clear(cpu)
	if off.Count() == 0 {
		return func() {}, nil
	}
	masks := map[int]unix.CPUSet{}
	for _, tid := range threads() {
		var m unix.CPUSet
		if unix.SchedGetaffinity(tid, &m) != nil {
			continue // gone already
		}
		masks[tid] = m
		m.Clear(cpu)
		if m.Count() > 0 {
			unix.SchedSetaffinity(tid, &m)
		}
	}
	return func() {
		for _, tid := range threads() {
			m, ok := masks[tid]
			if !ok {
				m = orig
			}
			unix.SchedSetaffinity(tid, &m)
		}
	}, nil
}

// threads lists this process's thread ids.
func threads() []int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}

// highestCPU is the highest-numbered CPU the calling thread may run on.
func highestCPU() (int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0, fmt.Errorf("bench: CPU affinity: %w", err)
	}
	for cpu := len(set)*64 - 1; cpu >= 0; cpu-- {
		if set.IsSet(cpu) {
			return cpu, nil
		}
	}
	return 0, errors.New("bench: no CPU in this thread's affinity mask")
}

// CClientRegionRead is the scenario: a 4-byte trapped register read (REG_ID_MAGIC) of a vgpu
// device through the C client, beside the C echo, both pinned to the server's CPU (µs/op).
func CClientRegionRead() (Result, error) {
	cc, err := BuildCClient()
	if err != nil {
		return Result{}, err
	}
	defer cc.Close()
	cfg := device.DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow = 16<<20, 16<<20
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	dev, err := device.New(cfg)
	if err != nil {
		return Result{}, err
	}
	defer dev.Close()
	r, err := cc.Measure(dev, CClientConfig{CPU: -1, Want: abi.ID_MAGIC_VALUE})
	if err != nil {
		return Result{}, err
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	return Result{
		Name: "REGION_READ round trip (C client)", Value: us(r.Device.Median), Unit: "µs",
		Baseline: "C unix socket echo", Base: us(r.Echo.Median),
		Note: fmt.Sprintf("%+.2f µs over the echo (target ≤ +1); p99 %.1f vs %.1f µs; server thread %.2f vs %.2f µs CPU per round trip; client slept %.2f vs %.2f times per round trip; both ends on CPU %d",
			us(r.Over()), us(r.Device.P99), us(r.Echo.P99), us(r.Device.ServerCPU), us(r.Echo.ServerCPU),
			float64(r.Device.ClientVCSW)/1000, float64(r.Echo.ClientVCSW)/1000, r.CPU),
	}, nil
}
