package bench

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/abi"
	"vgpu/device"
	"vgpu/vfiouser"
)

// The C client (bench/cclient/cclient.c) measures the transport from outside Go: a Go client
// shares the runtime's scheduler and netpoller costs with the server it measures, and QEMU is
// not written in Go either. It is compiled with gcc at bench time, so the figure can be
// reproduced anywhere the bench runs.
//
// Placement: the server's connection goroutine is locked to an OS thread pinned to one CPU, and
// the C client (and its echo server) are pinned to the same CPU. With both ends on one CPU no
// cross-CPU wake-up is paid, so the difference between the device round trip and the echo is
// the server's own cost per message. The server runs in this process (vgpu/device behind
// vgpu/vfiouser, exactly what `vgpu serve` runs) rather than as a `vgpu serve` child: the bench
// then needs no built vgpu binary, tests can run it, and pinning one thread leaves the rest of
// the Go runtime (sysmon, GC workers), which is not part of a round trip, on the other CPUs.

//go:embed cclient/cclient.c
var cclientSource []byte

// CClient is the C client, built for this run.
type CClient struct {
	dir string
	bin string
}

// BuildCClient compiles the C client with gcc into a new temporary directory. It fails with
// the reason when gcc is missing or the build fails (gcc's output included).
func BuildCClient() (*CClient, error) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return nil, fmt.Errorf("bench: the C client needs gcc: %w", err)
	}
	dir, err := os.MkdirTemp("", "vgpu-cclient-")
	if err != nil {
		return nil, fmt.Errorf("bench: C client: %w", err)
	}
	c := &CClient{dir: dir, bin: filepath.Join(dir, "cclient")}
	src := filepath.Join(dir, "cclient.c")
	if err := os.WriteFile(src, cclientSource, 0o644); err != nil {
		c.Close()
		return nil, fmt.Errorf("bench: C client: %w", err)
	}
	out, err := exec.Command(gcc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", c.bin, src).CombinedOutput()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("bench: building the C client with %s: %w\n%s", gcc, err, bytes.TrimSpace(out))
	}
	return c, nil
}

// Close removes the build directory.
func (c *CClient) Close() error { return os.RemoveAll(c.dir) }

// CStats is one run of the C client: n timed round trips.
type CStats struct {
	N                           int
	Min, Median, P99, Max, Mean time.Duration
	Value                       uint32 // the register value read (device runs only)
}

// SetupWrite is a REGION_WRITE the C client sends after VERSION, before timing.
type SetupWrite struct {
	Region uint32
	Offset uint64
	Size   int // 1, 2, 4 or 8
	Value  uint64
}

// CClientConfig says what to measure. Zero values take the defaults.
type CClientConfig struct {
	Region uint32 // default abi.BAR_REGS
	Offset uint64 // default abi.REG_ID_MAGIC
	// Want is the value every read must return; 0 accepts whatever the first read returned
	// (the C client still checks that it never changes).
	Want   uint32
	N      int // timed round trips per run (default 20,000)
	Warmup int // untimed round trips before them (default 1,000)
	Rounds int // alternating device/echo runs; the figures are the medians over rounds (default 3)
	CPU    int // the CPU server and client share; negative: the highest this process may use
	// Setup runs before each device run; nil means "enable memory decoding and bus
	// mastering" in the PCI command register, as a driver's pci_enable_device does.
	Setup []SetupWrite
}

func (cfg *CClientConfig) defaults() error {
	if cfg.Region == 0 && cfg.Offset == 0 {
		cfg.Region, cfg.Offset = abi.BAR_REGS, abi.REG_ID_MAGIC
	}
	if cfg.N <= 0 {
		cfg.N = 20000
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 1000
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
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

// pciConfigRegion is vfio-user's PCI config space region (VFIO_PCI_CONFIG_REGION_INDEX).
const pciConfigRegion = 7

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
// dev must not be served to anyone else meanwhile.
func (c *CClient) Measure(dev vfiouser.Device, cfg CClientConfig) (CClientResult, error) {
	if err := cfg.defaults(); err != nil {
		return CClientResult{}, err
	}
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
		e, err := c.run(cfg, "echo")
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

// serveOne accepts the C client's connection and serves it on a pinned thread while the client
// runs; it returns the client's figures once both ended cleanly.
func (c *CClient) serveOne(srv *vfiouser.Server, l *net.UnixListener, cfg CClientConfig) (CStats, error) {
	type served struct{ err error }
	done := make(chan served, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		uc, err := l.AcceptUnix()
		if err != nil {
			done <- served{fmt.Errorf("accept: %w", err)}
			return
		}
		// The thread stays locked: when this goroutine ends, the runtime retires the thread
		// instead of returning a pinned one to its pool.
		runtime.LockOSThread()
		if err := pinThread(cfg.CPU); err != nil {
			uc.Close()
			done <- served{err}
			return
		}
		done <- served{srv.ServeConn(ctx, uc)}
	}()
	st, runErr := c.run(cfg, "device", l.Addr().String())
	if runErr != nil {
		cancel()
		l.SetDeadline(time.Now()) // unblock the accept if the client never connected
	}
	var sv served
	select {
	case sv = <-done:
	case <-time.After(30 * time.Second):
		return CStats{}, errors.New("bench: the server did not finish the C client's connection")
	}
	l.SetDeadline(time.Time{})
	if runErr != nil {
		return CStats{}, runErr
	}
	if sv.err != nil {
		return CStats{}, fmt.Errorf("bench: serving the C client: %w", sv.err)
	}
	return st, nil
}

// run runs the C client once in mode ("device" SOCKET, or "echo") and parses its line.
func (c *CClient) run(cfg CClientConfig, mode string, args ...string) (CStats, error) {
	argv := []string{"-c", strconv.Itoa(cfg.CPU), "-n", strconv.Itoa(cfg.N), "-W", strconv.Itoa(cfg.Warmup)}
	if mode == "device" {
		for _, w := range cfg.Setup {
			argv = append(argv, "-w", fmt.Sprintf("%d:%#x:%d:%#x", w.Region, w.Offset, w.Size, w.Value))
		}
		argv = append(argv, mode, args[0], strconv.FormatUint(uint64(cfg.Region), 10), fmt.Sprintf("%#x", cfg.Offset))
	} else {
		argv = append(argv, mode)
	}
	cmd := exec.Command(c.bin, argv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return CStats{}, fmt.Errorf("bench: C client %s: %w: %s", mode, err, bytes.TrimSpace(stderr.Bytes()))
	}
	st, err := parseCStats(out, mode)
	if err != nil {
		return CStats{}, fmt.Errorf("bench: C client %s: %w", mode, err)
	}
	if st.N != cfg.N {
		return CStats{}, fmt.Errorf("bench: C client %s timed %d round trips, asked for %d", mode, st.N, cfg.N)
	}
	return st, nil
}

// parseCStats reads "cclient mode=M n=N min_ns=... value=0x..." (see cclient.c).
func parseCStats(out []byte, mode string) (CStats, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	var line string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "cclient ") {
			line = sc.Text()
		}
	}
	if line == "" {
		return CStats{}, fmt.Errorf("no result line in %q", out)
	}
	kv := map[string]string{}
	for _, f := range strings.Fields(line)[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return CStats{}, fmt.Errorf("bad field %q in %q", f, line)
		}
		kv[k] = v
	}
	if kv["mode"] != mode {
		return CStats{}, fmt.Errorf("result of mode %q, want %q", kv["mode"], mode)
	}
	var st CStats
	var err error // the first field that failed to parse
	num := func(k string) int64 {
		if err != nil {
			return 0
		}
		var v int64
		v, err = strconv.ParseInt(kv[k], 0, 64)
		if err != nil {
			err = fmt.Errorf("field %s in %q: %w", k, line, err)
		}
		return v
	}
	st.N = int(num("n"))
	st.Min = time.Duration(num("min_ns"))
	st.Median = time.Duration(num("median_ns"))
	st.P99 = time.Duration(num("p99_ns"))
	st.Max = time.Duration(num("max_ns"))
	st.Mean = time.Duration(num("mean_ns"))
	if mode == "device" {
		st.Value = uint32(num("value"))
	}
	return st, err
}

// medianStats takes the median of each statistic over runs (which have the same N).
func medianStats(runs []CStats) CStats {
	pick := func(f func(CStats) time.Duration) time.Duration {
		v := make([]time.Duration, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return CStats{
		N:      runs[0].N,
		Min:    pick(func(s CStats) time.Duration { return s.Min }),
		Median: pick(func(s CStats) time.Duration { return s.Median }),
		P99:    pick(func(s CStats) time.Duration { return s.P99 }),
		Max:    pick(func(s CStats) time.Duration { return s.Max }),
		Mean:   pick(func(s CStats) time.Duration { return s.Mean }),
		Value:  runs[0].Value,
	}
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
		Note: fmt.Sprintf("%+.2f µs over the echo; p99 %.1f vs %.1f µs; both ends on CPU %d; target ≤ +1 µs",
			us(r.Over()), us(r.Device.P99), us(r.Echo.P99), r.CPU),
	}, nil
}
