package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"vgpu/guest/drmtest/drm"
)

// jobTimeout bounds every wait for a job: generous, for TCG.
const jobTimeout = 20 * time.Second

// openDev opens the render node for the case; the file closes when the case ends.
func openDev(t *T) *drm.Device {
	d, err := drm.Open(drm.RenderNode)
	t.Check(err, "open")
	t.Cleanup(func() { d.Close() })
	return d
}

// newQueue creates a user queue (freed with the file).
func newQueue(t *T, d *drm.Device, cfg drm.QueueConfig) *drm.Queue {
	q, err := d.NewQueue(cfg)
	t.Check(err, "create a user queue (priority %d)", cfg.Priority)
	return q
}

// run submits a job and waits for its user fence.
func run(t *T, q *drm.Queue, payload ...[]uint32) uint64 {
	end, err := q.Job(payload...)
	t.Check(err, "submit to queue %d", q.ID)
	t.Check(q.WaitUserFence(end, jobTimeout), "wait")
	return end
}

// debugfsDir is the driver's debugfs directory (/sys/kernel/debug/dri/<minor>).
func debugfsDir() (string, error) {
	m, _ := filepath.Glob("/sys/kernel/debug/dri/*/vgpu_clients")
	if len(m) == 0 {
		return "", fmt.Errorf("no /sys/kernel/debug/dri/*/vgpu_clients (is debugfs mounted, is vgpu_drm loaded?)")
	}
	return filepath.Dir(m[0]), nil
}

// readDebugfs reads one of the driver's debugfs files.
func readDebugfs(name string) (string, error) {
	dir, err := debugfsDir()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	return string(b), err
}

// child is a helper process of a case: /proc/self/exe --child MODE args, with pipes.
type child struct {
	cmd    *exec.Cmd
	in     *os.File // its stdin (our end)
	out    *bufio.Reader
	stderr *bytes.Buffer
}

// startChild starts a helper; extra files become its fds 3, 4, ...
func startChild(mode string, args []string, extra ...*os.File) (*child, error) {
	cmd := exec.Command("/proc/self/exe", append([]string{"--child", mode}, args...)...)
	cmd.ExtraFiles = extra
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, in: inW, out: bufio.NewReader(outR), stderr: &bytes.Buffer{}}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, c.stderr
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		return nil, fmt.Errorf("start child %s: %w", mode, err)
	}
	return c, nil
}

// expect reads the child's next line and checks its first word.
func (c *child) expect(word string, timeout time.Duration) ([]string, error) {
	type res struct {
		line string
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		l, err := c.out.ReadString('\n')
		ch <- res{l, err}
	}()
	select {
	case r := <-ch:
		f := strings.Fields(r.line)
		if r.err != nil || len(f) == 0 || f[0] != word {
			return nil, fmt.Errorf("child said %q (%v), want %q; its stderr: %s", r.line, r.err, word, strings.TrimSpace(c.stderr.String()))
		}
		return f[1:], nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("child said nothing in %v (want %q)", timeout, word)
	}
}

// say writes a line to the child.
func (c *child) say(line string) error {
	_, err := fmt.Fprintln(c.in, line)
	return err
}

// wait closes the child's stdin and waits for it to exit; a non-zero exit is an error that
// quotes its stderr.
func (c *child) wait(timeout time.Duration) error {
	c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(c.stderr.String()))
		}
		return nil
	case <-time.After(timeout):
		c.cmd.Process.Kill()
		<-done
		return fmt.Errorf("did not exit within %v: %s", timeout, strings.TrimSpace(c.stderr.String()))
	}
}

// childIO is a helper process's side of the pipes.
var childOut = bufio.NewWriter(os.Stdout)
var childIn = bufio.NewReader(os.Stdin)

func tell(format string, args ...any) {
	fmt.Fprintf(childOut, format+"\n", args...)
	childOut.Flush()
}

func hear() string {
	l, _ := childIn.ReadString('\n')
	return strings.TrimSpace(l)
}

// kq runs packets as one job on the driver's kernel queue: an IB in the file's VM, SUBMIT,
// its out syncobj waited.
type kq struct {
	d  *drm.Device
	ib *drm.Buffer
	s  uint32
}

func newKQ(t *T, d *drm.Device) *kq {
	ib, err := d.NewBuffer(64<<10, drm.VGPU_GEM_DOMAIN_SYSTEM, 0, drm.RWX, 4096, true)
	t.Check(err, "IB buffer")
	s, err := d.SyncobjCreate(0)
	t.Check(err, "syncobj create")
	return &kq{d: d, ib: ib, s: s}
}

func (k *kq) run(t *T, pkts ...[]uint32) {
	n := uint64(0)
	for _, p := range pkts {
		for _, v := range p {
			*k.ib.U32(n * 4) = v
			n++
		}
	}
	sub := drm.Submit{Ib_va: k.ib.VA, Ib_dwords: uint32(n), Out_syncobj: k.s}
	t.Check(k.d.Submit(&sub), "SUBMIT of a %d-dword IB", n)
	t.Check(k.d.SyncobjWait([]uint32{k.s}, jobTimeout, 0), "wait for kernel-queue job %d", sub.Seqno)
}
