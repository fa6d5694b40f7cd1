package ci

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"vgpu/images"
)

// needQEMU returns the QEMU to test with, provisioning it when needed.
func needQEMU(t *testing.T) *images.QEMUInstall {
	t.Helper()
	if testing.Short() {
		t.Skip("boots QEMU; skipped with -short")
	}
	if os.Getenv("VGPU_SKIP_QEMU") == "1" {
		t.Skip("VGPU_SKIP_QEMU=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	inst, err := images.QEMU(ctx, images.QEMUOptions{Progress: testWriter{t}})
	if err != nil {
		t.Fatalf("provisioning QEMU: %v", err)
	}
	t.Logf("QEMU %s ready in %v", inst.Version(), time.Since(start).Round(time.Millisecond))
	return inst
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var (
	buildOnce sync.Once
	vgpuBin   string
	buildErr  error
	buildOut  []byte
)

// buildVGPU builds cmd/vgpu once per test binary, so the tests run the real command.
func buildVGPU(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vgpu-bin-")
		if err != nil {
			buildErr = err
			return
		}
		vgpuBin = filepath.Join(dir, "vgpu")
		buildOut, buildErr = exec.Command("go", "build", "-o", vgpuBin, "vgpu/cmd/vgpu").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build vgpu: %v\n%s", buildErr, buildOut)
	}
	return vgpuBin
}

// server is a running `vgpu serve` whose log the test can wait on.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	socket string
	logf   string
	done   chan struct{}
}

func startServer(t *testing.T, dir string, args ...string) *server {
	t.Helper()
	s := &server{t: t, socket: filepath.Join(dir, "vgpu.sock"), logf: filepath.Join(dir, "server.log"), done: make(chan struct{})}
	logFile, err := os.Create(s.logf)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	s.cmd = exec.Command(buildVGPU(t), append([]string{"serve", "--socket", s.socket, "--log-format", "json"}, args...)...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.done
		if t.Failed() {
			b, _ := os.ReadFile(s.logf)
			t.Logf("server log (%s):\n%s", s.logf, b)
		}
	})
	s.waitLog(`"msg":"ready"`, 1, 30*time.Second)
	if _, err := os.Stat(s.socket); err != nil {
		t.Fatalf("server said ready but the socket is missing: %v", err)
	}
	return s
}

// count returns how many log lines contain all of the substrings.
func (s *server) count(subs ...string) int {
	f, err := os.Open(s.logf)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
next:
	for sc.Scan() {
		for _, sub := range subs {
			if !strings.Contains(sc.Text(), sub) {
				continue next
			}
		}
		n++
	}
	return n
}

// waitLog waits until at least n log lines contain all of subs.
func (s *server) waitLog(sub string, n int, timeout time.Duration, more ...string) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for s.count(append([]string{sub}, more...)...) < n {
		select {
		case <-s.done:
			s.t.Fatalf("server exited while waiting for %q", sub)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out after %v waiting for %d server log lines with %q %q", timeout, n, sub, more)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and expects a clean exit.
func (s *server) stop() {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		s.t.Fatal("server did not exit within 15 s of SIGTERM")
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		s.t.Errorf("server exit code %d after SIGTERM, want 0", code)
	}
	if _, err := os.Stat(s.socket); err == nil {
		s.t.Error("server left its socket file behind")
	}
}
