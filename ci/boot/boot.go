// Package boot runs the guest once: it serves a vgpu device in-process, boots the guest image
// in QEMU with the device attached, collects what the guest's /init sends over the
// virtio-serial results port and the whole kernel log it forwards over the kmsg port, and
// judges the run. For vgpu's own suite that is the KTAP of vgpu_test.ko; for a user run
// (Config.Plan: the user's modules and commands) it is every step's exit status, any KTAP they
// or the kernel printed, and the kernel log's splats (oops, BUG, WARNING, lockdep). `go test
// ./ci` and `vgpu run` both use it, so CI and users run exactly the same path.
package boot

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"vgpu/ci/ktap"
	"vgpu/device"
	"vgpu/images"
	"vgpu/vfiouser"
	"vgpu/vm"
)

// DefaultTimeout bounds one boot (kernel boot, tests, power-off) under TCG on a loaded 2-core
// machine; a quiet machine needs about 5-10 s.
const DefaultTimeout = 5 * time.Minute

// Config describes one run.
type Config struct {
	QEMU   *images.QEMUInstall
	Guest  *images.GuestImage
	Device device.Config // Log is replaced by the run's server log
	IOMMU  bool          // emulated VT-d, and intel_iommu=on in the guest
	// TestArgs are the vgpu_test module parameters, e.g. "tests=dma,msix".
	TestArgs string
	// Dir receives the artefacts: server.log, console.log, results.txt, QEMU's logs.
	Dir     string
	Timeout time.Duration // 0 → DefaultTimeout
	// Keep leaves the VM running after the suite with a shell on the serial console, which
	// is connected to this process's terminal; the run ends when the user powers it off.
	Keep bool
	Log  io.Writer // progress lines; nil → discarded

	// Plan makes this a user run (vgpu run --module/--run/--add): /init loads the plan's
	// modules and runs its commands instead of vgpu_test, and Result.User says what happened.
	// The guest then boots without "quiet", so the console carries the kernel log.
	Plan *images.RunPlan
	// Append are extra kernel parameters, after the image's (so they win: loglevel=8).
	Append []string
	// Console receives the guest's serial console as it is written (and drops "quiet").
	Console io.Writer
	// OnDevice, if set, is called with the run's device before QEMU starts; the function it
	// returns is called when the run ends (`vgpu run --control` serves the control socket).
	OnDevice func(dev *device.Device) (stop func(), err error)
}

// Result is what one run produced.
type Result struct {
	Report      *ktap.Report
	Figures     Figures           // the guest's measurements, each beside its same-boot baseline
	Init        map[string]string // the "# vgpu-init: key=value" lines
	Problems    []string          // what went wrong outside the KTAP document
	Diagnostics device.Diagnostics
	Wall        time.Duration // VM start to VM exit
	Artefacts   map[string]string

	// User is what a user run (Config.Plan) did; nil for vgpu's own suite. Its failures are
	// in Problems.
	User *UserReport
	// Splats are the oopses, BUGs, WARNINGs and lockdep reports in the kernel log (also in
	// Problems for a user run; the suite counts them in /init's kernel-warnings line).
	Splats []Splat
	// KernelLog is the guest's whole dmesg, as /init forwarded it from /dev/kmsg (kept as
	// the "kernel log" artefact).
	KernelLog []string
	// TimedOut is set when the guest did not power off within the timeout; Problems then
	// names what it was doing.
	TimedOut bool
	// LastOutput are the console's last lines (what the guest printed last).
	LastOutput []string
}

// Failed reports whether the run should count as a failure.
func (r *Result) Failed() bool {
	if r.User != nil {
		return len(r.Problems) > 0
	}
	return len(r.Problems) > 0 || r.Report.Failed()
}

// Run boots the guest once and returns its results. An error means the run could not be made
// (no QEMU, a socket could not be created); a guest that crashes or hangs is a Result with
// Problems.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.QEMU == nil || cfg.Guest == nil {
		return nil, errors.New("boot: QEMU and guest image are required")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Keep {
		cfg.Timeout = 7 * 24 * time.Hour // the user decides when it ends
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	res := &Result{Artefacts: map[string]string{}}

	// The device, served in-process so its diagnostics can be read after the run.
	serverLog, err := os.Create(filepath.Join(cfg.Dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer serverLog.Close()
	res.Artefacts["server log"] = serverLog.Name()
	devCfg := cfg.Device
	devCfg.Log = slog.New(slog.NewTextHandler(serverLog, &slog.HandlerOptions{Level: slog.LevelInfo}))
	dev, err := device.New(devCfg)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	if cfg.OnDevice != nil {
		stopHook, err := cfg.OnDevice(dev)
		if err != nil {
			return nil, err
		}
		defer stopHook()
	}
	sock := filepath.Join(cfg.Dir, "vgpu.sock")
	os.Remove(sock)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, err
	}
	srvCtx, stopServer := context.WithCancel(ctx)
	srvDone := make(chan error, 1)
	go func() { srvDone <- vfiouser.NewServer(dev, devCfg.Log).Serve(srvCtx, l) }()
	defer func() {
		stopServer()
		<-srvDone
	}()

	// The results port: QEMU connects to it as a client, so listen first.
	resultsPath := filepath.Join(cfg.Dir, "results.sock")
	os.Remove(resultsPath)
	rl, err := net.Listen("unix", resultsPath)
	if err != nil {
		return nil, err
	}
	defer rl.Close()
	results := &collector{}
	go results.accept(rl)
	kmsgPath := filepath.Join(cfg.Dir, "kmsg.sock")
	os.Remove(kmsgPath)
	kl, err := net.Listen("unix", kmsgPath)
	if err != nil {
		return nil, err
	}
	defer kl.Close()
	kmsg := &collector{}
	go kmsg.accept(kl)

	guest := cfg.Guest
	if cfg.Plan != nil {
		g := *cfg.Guest
		g.Initrd = filepath.Join(cfg.Dir, "initrd-plan.cpio")
		if err := images.WritePlanInitrd(g.Initrd, cfg.Guest.Initrd, cfg.Plan); err != nil {
			return nil, err
		}
		guest = &g
	}

	runCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	vmDir := filepath.Join(cfg.Dir, "qemu")
	start := time.Now()
	v, err := vm.Start(runCtx, cfg.QEMU, vm.Config{
		MemoryMiB:      512,
		IOMMU:          cfg.IOMMU,
		VfioUserSocket: sock,
		Kernel:         guest.Kernel,
		Initrd:         guest.Initrd,
		Append:         cmdline(cfg),
		SerialPorts:    []vm.SerialPort{{Name: "results", Path: resultsPath}, {Name: "kmsg", Path: kmsgPath}},
		Interactive:    cfg.Keep,
		Log:            logw,
	}, vmDir)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	for name, path := range map[string]string{"console": v.Logs().Console, "QEMU stderr": v.Logs().Stderr} {
		res.Artefacts[name] = path
	}
	var tailDone chan struct{}
	stopTail := func() {}
	if cfg.Console != nil && !cfg.Keep {
		tailDone = make(chan struct{})
		tailCtx, cancelTail := context.WithCancel(context.Background())
		stopTail = func() { cancelTail(); <-tailDone }
		go func() { defer close(tailDone); tailFile(tailCtx, v.Logs().Console, cfg.Console) }()
	}
	if err := v.Wait(runCtx); err != nil {
		if runCtx.Err() != nil {
			v.Kill()
			console, _ := os.ReadFile(v.Logs().Console)
			where := guestWhere(consoleLines(console), cfg.Plan)
			if ctx.Err() != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("interrupted (%v); the guest was %s", context.Cause(ctx), where))
			} else {
				res.TimedOut = true
				res.Problems = append(res.Problems, fmt.Sprintf("timeout: the guest did not power off within %v; it was %s", cfg.Timeout, where))
			}
		} else {
			res.Problems = append(res.Problems, fmt.Sprintf("QEMU exited with an error: %v", err))
		}
	}
	res.Wall = time.Since(start)
	stopTail()

	kmsgRaw := kmsg.wait(2 * time.Second)
	res.KernelLog = KernelLog(kmsgRaw)
	kernelLogFile := filepath.Join(cfg.Dir, "kernel.log")
	os.WriteFile(kernelLogFile, []byte(strings.Join(res.KernelLog, "\n")+"\n"), 0o644)
	res.Artefacts["kernel log"] = kernelLogFile
	consoleText, _ := os.ReadFile(v.Logs().Console)
	console := consoleLines(consoleText)
	res.Splats = mergeSplats(FindSplats(res.KernelLog), findSplats(console, "console"))
	res.LastOutput = lastLines(console, 20)

	text := results.wait(5 * time.Second)
	resultsFile := filepath.Join(cfg.Dir, "results.txt")
	os.WriteFile(resultsFile, text, 0o644)
	res.Artefacts["results"] = resultsFile
	if len(bytes.TrimSpace(text)) == 0 {
		// The results port never carried anything: fall back to the serial console, which
		// /init also writes to, so a broken virtio path still yields a report.
		if !res.TimedOut {
			res.Problems = append(res.Problems, "nothing arrived on the virtio-serial results port")
		}
		text = consoleText
	}
	if cfg.Plan != nil {
		judgeUser(res, cfg.Plan, text)
		res.Diagnostics = dev.Diagnostics()
		return res, nil
	}
	res.Report = ktap.Parse(bytes.NewReader(text))
	var figureProblems []string
	res.Figures, figureProblems = ParseFigures(res.Report)
	res.Problems = append(res.Problems, figureProblems...)
	res.Init = initLines(text)
	for _, p := range checkInit(res.Init) {
		if res.TimedOut && strings.Contains(p, "never reported its end") {
			continue // the timeout says it, with more
		}
		res.Problems = append(res.Problems, p)
	}
	res.Diagnostics = dev.Diagnostics()
	return res, nil
}

func cmdline(cfg Config) string {
	base := cfg.Guest.CmdlineBase
	if cfg.Plan != nil || cfg.Console != nil {
		// The console then carries the kernel log (console loglevel 7: pr_info and up).
		var keep []string
		for _, w := range strings.Fields(base) {
			if w != "quiet" {
				keep = append(keep, w)
			}
		}
		base = strings.Join(keep, " ")
	}
	parts := []string{base}
	if cfg.IOMMU {
		parts = append(parts, "intel_iommu=on")
	}
	if cfg.Keep {
		parts = append(parts, "vgpu_keep=1")
	}
	if cfg.TestArgs != "" && cfg.Plan == nil {
		parts = append(parts, strconv.Quote("vgpu_test_args="+cfg.TestArgs))
	}
	parts = append(parts, cfg.Append...)
	return strings.Join(parts, " ")
}

var initLineRE = regexp.MustCompile(`# vgpu-init: ([a-z-]+)(?: rc)?=(\S*)|# vgpu-init: (end)\s*$`)

// initLines collects the /init's own report lines.
func initLines(text []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		if g := initLineRE.FindStringSubmatch(sc.Text()); g != nil {
			if g[3] != "" {
				m[g[3]] = ""
			} else {
				m[g[1]] = g[2]
			}
		}
	}
	return m
}

// checkInit turns the /init's report into problems: the module must load and unload cleanly
// and leave no interrupt handler behind.
func checkInit(m map[string]string) []string {
	var p []string
	if _, ok := m["end"]; !ok {
		p = append(p, "the guest's /init never reported its end (crash or hang before power-off)")
	}
	for _, c := range []struct{ key, want, what string }{
		{"insmod", "0", "insmod vgpu_test.ko"},
		{"rmmod", "0", "rmmod vgpu_test"},
		{"irqs-after-rmmod", "0", "interrupt handlers left after rmmod"},
		{"kernel-warnings", "0", "kernel WARNING/BUG/Oops lines in the guest log"},
	} {
		if got, ok := m[c.key]; ok && got != c.want {
			p = append(p, fmt.Sprintf("%s: %s, want %s", c.what, got, c.want))
		}
	}
	return p
}

// collector accepts the results connection and keeps everything it sends.
type collector struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
	once sync.Once
}

// maxResults bounds what a misbehaving guest can make the host buffer.
const maxResults = 16 << 20

func (c *collector) init() { c.once.Do(func() { c.done = make(chan struct{}) }) }

func (c *collector) accept(l net.Listener) {
	c.init()
	defer close(c.done)
	conn, err := l.Accept()
	if err != nil {
		return
	}
	defer conn.Close()
	b := make([]byte, 32<<10)
	for {
		n, err := conn.Read(b)
		c.mu.Lock()
		if c.buf.Len()+n <= maxResults {
			c.buf.Write(b[:n])
		}
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// wait returns what arrived, waiting up to d for the connection to close after the VM exited.
func (c *collector) wait(d time.Duration) []byte {
	c.init()
	select {
	case <-c.done:
	case <-time.After(d):
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf.Bytes()...)
}

// tailFile copies what is appended to path to w until ctx ends, then copies the rest.
func tailFile(ctx context.Context, path string, w io.Writer) {
	var off int64
	buf := make([]byte, 32<<10)
	copyNew := func() {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		for {
			n, err := f.ReadAt(buf, off)
			if n > 0 {
				w.Write(buf[:n])
				off += int64(n)
			}
			if err != nil || n == 0 {
				return
			}
		}
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			copyNew()
			return
		case <-t.C:
			copyNew()
		}
	}
}
