package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/digitalocean/go-qemu/qmp"

	"vgpu/images"
)

// GPUID is the qdev id of the vfio-user device.
const GPUID = "gpu0"

// Defaults for the zero values of Config.
const (
	DefaultMemoryMiB    = 512
	DefaultStartTimeout = 30 * time.Second
	DefaultQMPTimeout   = 10 * time.Second
	DefaultWaitTimeout  = 60 * time.Second
)

// SerialPort is a virtio-serial port whose host side is a unix socket. QEMU connects to the
// socket as a client, so something must already listen on Path when Start runs. In the guest
// the port is the /dev/vportNpM whose /sys/class/virtio-ports/vport*/name is Name.
type SerialPort struct {
	Name string
	Path string
}

// Config describes a VM.
type Config struct {
	Accel     string // "tcg" or "kvm"; "" → DetectAccel()
	MemoryMiB int    // guest RAM (a shared memfd, so vfio-user DMA maps carry fds); 0 → 512
	// IOMMU adds an emulated Intel VT-d (kernel-irqchip=split, intel-iommu caching-mode=on)
	// ahead of the GPU. The guest needs intel_iommu=on on its command line.
	IOMMU bool
	// VfioUserSocket, when set, attaches the vfio-user server listening there as the device
	// GPUID. The server must be listening before Start: QEMU exits at once otherwise.
	VfioUserSocket string
	// GPUProps are extra properties of the vfio-user-pci device, in JSON types (booleans must
	// be bool), e.g. {"x-msg-timeout": 10000}.
	GPUProps map[string]any
	// Kernel, Initrd and Append boot a Linux kernel directly; with no kernel SeaBIOS finds no
	// boot device and waits (fine for attach tests).
	Kernel, Initrd, Append string
	SerialPorts            []SerialPort
	Extra                  []string // appended to the QEMU command line
	// Interactive puts the guest's serial console on the caller's stdin/stdout instead of
	// console.log.
	Interactive bool
	// Reboot lets a guest reboot reset the VM. By default QEMU runs with -no-reboot, so a guest
	// reboot (or a panic with panic=-1) ends the process.
	Reboot bool
	// Log receives the command line and lifecycle notes; nil → discarded.
	Log          io.Writer
	StartTimeout time.Duration // until QMP answers; 0 → DefaultStartTimeout
	QMPTimeout   time.Duration // per QMP command; 0 → DefaultQMPTimeout
}

// Logs names the files a VM writes into its folder (keep them as test artefacts).
type Logs struct {
	Console string // the guest's serial console (ttyS0)
	Stdout  string // QEMU's stdout
	Stderr  string // QEMU's stderr (errors, warnings)
	Events  string // QMP events, one JSON object a line
	CmdLine string // the command line, shell-quoted
}

// VM is a running QEMU process with a QMP connection.
type VM struct {
	Dir   string
	Args  []string // QEMU arguments (after the binary and its -L options)
	Accel string

	cmd        *exec.Cmd
	logs       Logs
	log        io.Writer
	qmpTimeout time.Duration
	noReboot   bool
	done       chan struct{} // closed when the process has exited
	waitErr    error

	mu  sync.Mutex
	mon *qmp.SocketMonitor

	evMu     sync.Mutex
	evCond   chan struct{} // closed and replaced on each event
	events   []qmp.Event
	evFile   *os.File
	evClosed bool
}

// ErrExited is returned by QMP calls after the QEMU process is gone.
var ErrExited = errors.New("vm: QEMU has exited")

// BuildArgs returns the QEMU arguments for cfg with its files in dir. It fills in the
// defaults (Accel must already be set, or "" for DetectAccel).
func BuildArgs(cfg Config, dir string) ([]string, error) {
	serial := "file:" + filepath.Join(dir, "console.log")
	if cfg.Interactive {
		// The guest console on QEMU's stdio (which Start connects to the caller's terminal),
		// for a user who keeps the VM to work in its shell.
		serial = "stdio"
	}
	accel := cfg.Accel
	if accel == "" {
		accel, _ = DetectAccel()
	}
	if accel != "tcg" && accel != "kvm" {
		return nil, fmt.Errorf("vm: unknown accelerator %q", accel)
	}
	mem := cfg.MemoryMiB
	if mem == 0 {
		mem = DefaultMemoryMiB
	}
	if mem < 16 {
		return nil, fmt.Errorf("vm: MemoryMiB %d is too small", mem)
	}
	if strings.Contains(dir, ",") {
		return nil, fmt.Errorf("vm: folder %q contains a comma (QEMU option syntax)", dir)
	}
	qmpSock := filepath.Join(dir, "qmp.sock")
	if len(qmpSock) > 107 {
		return nil, fmt.Errorf("vm: %s is too long for a unix socket path", qmpSock)
	}

	machine := "q35,accel=" + accel + ",memory-backend=mem"
	if cfg.IOMMU {
		machine += ",kernel-irqchip=split"
	}
	args := []string{"-machine", machine}
	if accel == "kvm" {
		args = append(args, "-cpu", "host")
	}
	args = append(args,
		"-object", fmt.Sprintf("memory-backend-memfd,id=mem,size=%dM,share=on", mem),
		"-m", fmt.Sprintf("%dM", mem),
		"-smp", "1",
		"-nographic", "-vga", "none", "-nic", "none",
		// -nographic would put the HMP monitor on stdio; QMP is the only monitor we want.
		"-monitor", "none",
		"-serial", serial,
		"-qmp", "unix:"+qmpSock+",server=on,wait=off",
		// No boot menu; when nothing is bootable, SeaBIOS waits instead of rebooting.
		"-boot", "menu=off,reboot-timeout=-1",
	)
	if !cfg.Reboot {
		args = append(args, "-no-reboot")
	}
	// intel-iommu must be created before the devices it translates for.
	if cfg.IOMMU {
		args = append(args, "-device", "intel-iommu,caching-mode=on")
	}
	if cfg.VfioUserSocket != "" {
		dev := map[string]any{}
		for k, v := range cfg.GPUProps {
			dev[k] = v
		}
		dev["driver"] = "vfio-user-pci"
		dev["id"] = GPUID
		// Only the JSON form can carry the socket (a QAPI SocketAddress object).
		dev["socket"] = map[string]string{"type": "unix", "path": cfg.VfioUserSocket}
		b, err := json.Marshal(dev)
		if err != nil {
			return nil, fmt.Errorf("vm: GPUProps: %w", err)
		}
		args = append(args, "-device", string(b))
	}
	if len(cfg.SerialPorts) > 0 {
		// After the GPU, so the GPU keeps slot 00:01.0.
		args = append(args, "-device", "virtio-serial-pci,id=vser0")
		for i, p := range cfg.SerialPorts {
			if p.Name == "" || strings.ContainsAny(p.Name+p.Path, ",") {
				return nil, fmt.Errorf("vm: serial port %+v: empty name or a comma", p)
			}
			id := "vport" + strconv.Itoa(i)
			args = append(args,
				"-chardev", "socket,id="+id+",path="+p.Path,
				"-device", "virtserialport,bus=vser0.0,chardev="+id+",name="+p.Name)
		}
	}
	if cfg.Kernel != "" {
		args = append(args, "-kernel", cfg.Kernel)
		if cfg.Initrd != "" {
			args = append(args, "-initrd", cfg.Initrd)
		}
		if cfg.Append != "" {
			args = append(args, "-append", cfg.Append)
		}
	} else if cfg.Initrd != "" || cfg.Append != "" {
		return nil, errors.New("vm: Initrd/Append without Kernel")
	}
	return append(args, cfg.Extra...), nil
}

// Start launches QEMU for cfg with its files (console, logs, QMP socket) in dir, waits until
// QMP answers and returns the running VM. ctx bounds the whole life of the process: when it is
// done QEMU is killed. The process also gets SIGKILL if the calling process dies.
func Start(ctx context.Context, inst *images.QEMUInstall, cfg Config, dir string) (*VM, error) {
	if inst == nil {
		return nil, errors.New("vm: no QEMU install")
	}
	if cfg.Accel == "" {
		a, why := DetectAccel()
		cfg.Accel = a
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "vm: accel=%s (%s)\n", a, why)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	args, err := BuildArgs(cfg, dir)
	if err != nil {
		return nil, err
	}
	v := &VM{
		Dir: dir, Args: args, Accel: cfg.Accel,
		log:        cfg.Log,
		qmpTimeout: cfg.QMPTimeout,
		noReboot:   !cfg.Reboot,
		done:       make(chan struct{}),
		evCond:     make(chan struct{}),
		logs: Logs{
			Console: filepath.Join(dir, "console.log"),
			Stdout:  filepath.Join(dir, "stdout.log"),
			Stderr:  filepath.Join(dir, "stderr.log"),
			Events:  filepath.Join(dir, "qmp-events.log"),
			CmdLine: filepath.Join(dir, "cmdline.txt"),
		},
	}
	if v.log == nil {
		v.log = io.Discard
	}
	if v.qmpTimeout == 0 {
		v.qmpTimeout = DefaultQMPTimeout
	}
	startTimeout := cfg.StartTimeout
	if startTimeout == 0 {
		startTimeout = DefaultStartTimeout
	}
	qmpSock := filepath.Join(dir, "qmp.sock")
	os.Remove(qmpSock)

	v.cmd = inst.Command(ctx, args...)
	v.cmd.WaitDelay = 5 * time.Second
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := os.Create(v.logs.Stdout)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.Create(v.logs.Stderr)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	v.cmd.Stdout, v.cmd.Stderr = stdout, stderr
	if cfg.Interactive {
		v.cmd.Stdin, v.cmd.Stdout = os.Stdin, os.Stdout
	}
	if v.evFile, err = os.Create(v.logs.Events); err != nil {
		return nil, err
	}

	line := shellQuote(v.cmd.Args)
	os.WriteFile(v.logs.CmdLine, []byte(line+"\n"), 0o644)
	fmt.Fprintf(v.log, "vm: %s\n", line)

	t0 := time.Now()
	if err := v.cmd.Start(); err != nil {
		v.evFile.Close()
		return nil, fmt.Errorf("vm: start QEMU: %w", err)
	}
	go func() {
		v.waitErr = v.cmd.Wait()
		close(v.done)
	}()

	if err := v.connect(ctx, qmpSock, startTimeout); err != nil {
		if v.exitedWithin(time.Second) {
			err = fmt.Errorf("vm: QEMU exited during start-up (%v)", v.waitErr)
		}
		v.Kill()
		v.closeEvents()
		return nil, fmt.Errorf("%w%s", err, v.stderrTail())
	}
	fmt.Fprintf(v.log, "vm: pid %d, QMP up after %v (QEMU %s)\n", v.cmd.Process.Pid, time.Since(t0).Round(time.Millisecond), v.mon.Version)
	return v, nil
}

// connect waits for the QMP socket, connects and starts the event pump.
func (v *VM) connect(ctx context.Context, sock string, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	// QEMU binds the socket a moment before it listens: retry until a dial succeeds.
	var mon *qmp.SocketMonitor
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			m, err := qmp.NewSocketMonitor("unix", sock, 5*time.Second)
			if err == nil {
				mon = m
				break
			}
			if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("vm: dial QMP: %w", err)
			}
		}
		select {
		case <-v.done:
			return fmt.Errorf("vm: QEMU exited during start-up: %v", v.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("vm: start-up: %w", ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("vm: no QMP socket after %v", timeout)
		case <-tick.C:
		}
	}
	// go-qemu's handshake has no deadline of its own.
	errc := make(chan error, 1)
	go func() { errc <- mon.Connect() }()
	var err error
	select {
	case err = <-errc:
	case <-deadline.C:
		mon.Disconnect()
		<-errc
		err = fmt.Errorf("no QMP greeting after %v", timeout)
	case <-v.done:
		mon.Disconnect()
		<-errc
		err = ErrExited
	}
	if err != nil {
		return fmt.Errorf("vm: QMP handshake: %w", err)
	}
	evs, err := mon.Events(context.Background())
	if err != nil {
		mon.Disconnect()
		return err
	}
	v.mon = mon
	go v.pumpEvents(evs)
	return nil
}

// pumpEvents records every QMP event (go-qemu blocks its reader until events are consumed).
func (v *VM) pumpEvents(evs <-chan qmp.Event) {
	for e := range evs {
		b, _ := json.Marshal(e)
		v.evMu.Lock()
		v.events = append(v.events, e)
		if v.evFile != nil {
			v.evFile.Write(append(b, '\n'))
		}
		close(v.evCond)
		v.evCond = make(chan struct{})
		v.evMu.Unlock()
	}
	v.closeEvents()
}

func (v *VM) closeEvents() {
	v.evMu.Lock()
	defer v.evMu.Unlock()
	if v.evFile != nil {
		v.evFile.Close()
		v.evFile = nil
	}
}

// Events returns the QMP events received so far.
func (v *VM) Events() []qmp.Event {
	v.evMu.Lock()
	defer v.evMu.Unlock()
	return append([]qmp.Event(nil), v.events...)
}

// WaitEvent waits until an event with index >= from matches, and returns it and its index.
// Use len(v.Events()) before an action as from.
func (v *VM) WaitEvent(from int, match func(qmp.Event) bool, timeout time.Duration) (qmp.Event, int, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		v.evMu.Lock()
		for i := from; i < len(v.events); i++ {
			if match(v.events[i]) {
				e := v.events[i]
				v.evMu.Unlock()
				return e, i, nil
			}
		}
		from = max(from, len(v.events))
		ch := v.evCond
		v.evMu.Unlock()
		select {
		case <-ch:
		case <-v.done:
			return qmp.Event{}, -1, ErrExited
		case <-t.C:
			return qmp.Event{}, -1, fmt.Errorf("vm: no matching QMP event after %v", timeout)
		}
	}
}

// Run executes a QMP command (args: nil or anything that marshals to a JSON object) and returns
// its "return" value. It gives up after the QMP timeout; the connection is then closed, since a
// late reply would be taken for the answer to the next command.
func (v *VM) Run(cmd string, args any) (json.RawMessage, error) {
	return v.run(cmd, args, v.qmpTimeout)
}

func (v *VM) run(cmd string, args any, timeout time.Duration) (json.RawMessage, error) {
	req := struct {
		Execute   string `json:"execute"`
		Arguments any    `json:"arguments,omitempty"`
	}{cmd, args}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("vm: %s: %w", cmd, err)
	}
	v.mu.Lock()
	mon := v.mon
	v.mu.Unlock()
	if mon == nil {
		if v.Exited() {
			return nil, fmt.Errorf("vm: %s: %w", cmd, ErrExited)
		}
		return nil, fmt.Errorf("vm: %s: QMP connection closed", cmd)
	}
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := mon.Run(b)
		ch <- result{b, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	var r result
	select {
	case r = <-ch:
	case <-t.C:
		v.disconnect()
		return nil, fmt.Errorf("vm: QMP %s: no reply after %v (connection closed)", cmd, timeout)
	}
	if r.err != nil {
		if v.exitedWithin(500 * time.Millisecond) {
			return nil, fmt.Errorf("vm: QMP %s: %w (%v)", cmd, ErrExited, r.err)
		}
		return nil, fmt.Errorf("vm: QMP %s: %w", cmd, r.err)
	}
	var resp struct {
		Return json.RawMessage `json:"return"`
	}
	if err := json.Unmarshal(r.b, &resp); err != nil {
		return nil, fmt.Errorf("vm: QMP %s: bad reply %q: %w", cmd, r.b, err)
	}
	return resp.Return, nil
}

// QueryPCI lists the PCI functions QEMU emulates (QMP query-pci), bridges flattened.
func (v *VM) QueryPCI() ([]PCIDevice, error) {
	raw, err := v.Run("query-pci", nil)
	if err != nil {
		return nil, err
	}
	return ParsePCI(raw)
}

// Status returns QMP query-status's status ("running", "prelaunch", "shutdown", ...).
func (v *VM) Status() (string, error) {
	raw, err := v.Run("query-status", nil)
	if err != nil {
		return "", err
	}
	var s struct {
		Status string `json:"status"`
	}
	err = json.Unmarshal(raw, &s)
	return s.Status, err
}

// SystemReset resets the machine like the reset button (QMP system_reset); the VM keeps
// running. Under -no-reboot QEMU would treat the reset as a shutdown, and SeaBIOS, finding its
// shadowed copy already initialised, resets the machine once more by itself. So the reboot
// action is switched to "reset" for the duration, SystemReset waits (bounded) for that firmware
// reset, and switches back to "shutdown".
func (v *VM) SystemReset() error {
	if !v.noReboot {
		_, err := v.Run("system_reset", nil)
		return err
	}
	if _, err := v.Run("set-action", map[string]string{"reboot": "reset"}); err != nil {
		return err
	}
	from := len(v.Events())
	if _, err := v.Run("system_reset", nil); err != nil {
		return err
	}
	t0 := time.Now()
	_, _, err := v.WaitEvent(from, func(e qmp.Event) bool {
		return e.Event == "RESET" && e.Data["guest"] == true
	}, 5*time.Second)
	if err != nil {
		if errors.Is(err, ErrExited) {
			return fmt.Errorf("vm: system_reset: %w", err)
		}
		fmt.Fprintf(v.log, "vm: system_reset: the firmware did not reset again (%v); restoring -no-reboot\n", err)
	} else {
		fmt.Fprintf(v.log, "vm: system_reset: firmware reset seen after %v\n", time.Since(t0).Round(time.Millisecond))
	}
	_, err = v.Run("set-action", map[string]string{"reboot": "shutdown"})
	return err
}

// Quit asks QEMU to exit (QMP quit) and closes the QMP connection. Use Wait for the exit.
func (v *VM) Quit() error {
	_, err := v.Run("quit", nil)
	v.disconnect()
	if err != nil && !errors.Is(err, ErrExited) {
		// QEMU may close the socket before the reply is read; that is a successful quit.
		if v.exitedWithin(5 * time.Second) {
			return nil
		}
		return err
	}
	return nil
}

// Wait waits for the QEMU process to exit and returns its exit error (nil for status 0). When
// ctx has no deadline, DefaultWaitTimeout bounds the wait.
func (v *VM) Wait(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWaitTimeout)
		defer cancel()
	}
	select {
	case <-v.done:
		return v.waitErr
	case <-ctx.Done():
		return fmt.Errorf("vm: QEMU pid %d still running: %w", v.Pid(), ctx.Err())
	}
}

// Exited tells whether the QEMU process has exited.
func (v *VM) Exited() bool {
	select {
	case <-v.done:
		return true
	default:
		return false
	}
}

func (v *VM) exitedWithin(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-v.done:
		return true
	case <-t.C:
		return false
	}
}

// Kill sends SIGKILL to QEMU and waits (bounded) until it is reaped.
func (v *VM) Kill() error {
	if v.cmd == nil || v.cmd.Process == nil || v.Exited() {
		return nil
	}
	v.cmd.Process.Kill()
	if !v.exitedWithin(10 * time.Second) {
		return fmt.Errorf("vm: QEMU pid %d not reaped 10s after SIGKILL", v.Pid())
	}
	return nil
}

// Close kills QEMU if it still runs and closes the QMP connection. It is safe to call more
// than once (for example from t.Cleanup after Quit and Wait).
func (v *VM) Close() error {
	err := v.Kill()
	v.disconnect()
	return err
}

func (v *VM) disconnect() {
	v.mu.Lock()
	mon := v.mon
	v.mon = nil
	v.mu.Unlock()
	if mon != nil {
		done := make(chan struct{})
		go func() { mon.Disconnect(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}
}

// Pid returns the QEMU process id.
func (v *VM) Pid() int {
	if v.cmd == nil || v.cmd.Process == nil {
		return 0
	}
	return v.cmd.Process.Pid
}

// Logs returns the paths of the VM's log files.
func (v *VM) Logs() Logs { return v.logs }

// Console returns what the guest has written to its serial console so far.
func (v *VM) Console() string {
	b, _ := os.ReadFile(v.logs.Console)
	return string(b)
}

func (v *VM) stderrTail() string {
	b, _ := os.ReadFile(v.logs.Stderr)
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return "\nQEMU stderr:\n" + s
}

// shellQuote renders argv so that it can be pasted into a shell.
func shellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,/:+@%") == "" {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
