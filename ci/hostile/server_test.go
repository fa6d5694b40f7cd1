package hostile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// raceServer reports whether the server is built with the race detector.
func raceServer() bool { return os.Getenv("VGPU_HOSTILE_RACE") == "1" }

var (
	buildOnce sync.Once
	binDir    string
	serverBin string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildServer builds cmd/vgpu once per test binary, from this module's sources, or returns
// VGPU_HOSTILE_SERVER (a vgpu binary built elsewhere: another revision, another build mode).
func buildServer(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("VGPU_HOSTILE_SERVER"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "vgpu-hostile-bin-")
		if buildErr != nil {
			return
		}
		serverBin = filepath.Join(binDir, "vgpu")
		args := []string{"build", "-o", serverBin}
		if raceServer() {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "vgpu/cmd/vgpu")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build vgpu: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return serverBin
}

// Server geometry: 256 MiB of VRAM of which 64 MiB are CPU-visible, so VRAM beyond the BAR and
// the end of the frame buffer are both reachable by engines.
const (
	vramSize   = 256 << 20
	vramWindow = 64 << 20
	msixCount  = 16
)

// server is a running `vgpu serve` with its log in a file.
type server struct {
	dir, socket, logPath string
	cmd                  *exec.Cmd
	done                 chan struct{}
	exitErr              error
	args                 []string
}

func startServer(t *testing.T, extra ...string) *server {
	t.Helper()
	dir, err := os.MkdirTemp("", "vgpu-hostile-")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{dir: dir, socket: filepath.Join(dir, "vgpu.sock"), logPath: filepath.Join(dir, "server.log"), done: make(chan struct{})}
	s.args = append([]string{"serve", "--socket", s.socket, "--log-format", "json",
		"--vram", strconv.Itoa(vramSize), "--bar-window", strconv.Itoa(vramWindow),
		"--msix-vectors", strconv.Itoa(msixCount)}, extra...)
	logFile, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	s.cmd = exec.Command(buildServer(t), s.args...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if raceServer() {
		// halt_on_error=0: report every race and keep serving, so one race does not hide
		// the rest of the suite's findings.
		s.cmd.Env = append(os.Environ(), "GORACE=halt_on_error=0")
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exitErr = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for !bytes.Contains(s.log(0), []byte(`"msg":"ready"`)) {
		if !s.alive() {
			t.Fatalf("server exited before it was ready: %v\n%s", s.exitErr, s.log(0))
		}
		if time.Now().After(deadline) {
			s.kill()
			t.Fatalf("server not ready after 30 s:\n%s", s.log(0))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

func (s *server) pid() int { return s.cmd.Process.Pid }

func (s *server) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// kill ends the server (if it still runs) and removes its directory, keeping the log in the
// test output when asked to.
func (s *server) kill() {
	if s.alive() {
		s.cmd.Process.Kill()
	}
	<-s.done
}

// stop asks the server to exit with SIGTERM and reports how it went.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if !s.alive() {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		if s.exitErr != nil {
			t.Errorf("server exit after SIGTERM: %v", s.exitErr)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("server did not exit within 15 s of SIGTERM; killing it")
		s.kill()
	}
}

func (s *server) cleanup() { os.RemoveAll(s.dir) }

// logSize is the log's current length: attacks remember it to look at their part only.
func (s *server) logSize() int64 {
	fi, err := os.Stat(s.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// log returns the log from byte off.
func (s *server) log(off int64) []byte {
	f, err := os.Open(s.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, off, 1<<40))
	return b
}

// badLog matches what must never appear in the server's output: a panic, a runtime fatal error
// (deadlock, concurrent map write, out of memory), a fault signal, or a data race report.
var badLog = regexp.MustCompile(`(?m)^(panic: .*|fatal error: .*|WARNING: DATA RACE|SIG(SEGV|BUS|ILL|ABRT): .*|goroutine \d+ \[running\]:)`)

// logProblems returns an excerpt from each bad line of log on (at most a few).
func logProblems(log []byte) []string {
	var out []string
	for _, loc := range badLog.FindAllIndex(log, 4) {
		start, end := loc[0], min(len(log), loc[1]+1500)
		out = append(out, string(log[start:end]))
	}
	return out
}

var goroutineLine = regexp.MustCompile(`(?m)^goroutines: (\d+)$`)

// goroutines asks for the SIGUSR1 report and returns the goroutine count it prints. The
// report is produced by the server's signal goroutine; an error means no report came within
// the deadline (the server is wedged in something the report needs, or gone).
func (s *server) goroutines() (int, error) {
	off := s.logSize()
	if err := s.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(livenessTimeout)
	for {
		if m := goroutineLine.FindAllSubmatch(s.log(off), -1); len(m) > 0 {
			return strconv.Atoi(string(m[len(m)-1][1]))
		}
		if !s.alive() {
			return 0, fmt.Errorf("server exited: %v", s.exitErr)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no SIGUSR1 report within %v", livenessTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
