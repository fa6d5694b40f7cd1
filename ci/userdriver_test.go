package ci

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// userRunJSON is the part of `vgpu run --json` the tests read.
type userRunJSON struct {
	Passed bool `json:"passed"`
	Boots  []struct {
		Passed   bool  `json:"passed"`
		WallMS   int64 `json:"wall_ms"`
		TimedOut bool  `json:"timed_out"`
		Modules  []struct {
			Name, Args, Exit string
		} `json:"modules"`
		Runs []struct {
			N       int      `json:"n"`
			Command string   `json:"command"`
			Status  string   `json:"status"`
			Output  []string `json:"output"`
		} `json:"runs"`
		Unloads []struct {
			Name, Exit string
		} `json:"unloads"`
		KTAP []struct {
			Source string `json:"source"`
			Cases  []struct {
				Name, Result string
			} `json:"cases"`
		} `json:"ktap"`
		Splats []struct {
			Kind, Title string
		} `json:"splats"`
		Problems   []string          `json:"problems"`
		LastOutput []string          `json:"last_output"`
		Artefacts  map[string]string `json:"artefacts"`
	} `json:"boots"`
}

// readmeExample returns the arguments of the README's "testing your own driver" command (the
// block after the userdriver-example marker), without the leading "go run ./cmd/vgpu".
func readmeExample(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- userdriver-example")
	if !ok {
		t.Fatal("README.md has no userdriver-example marker")
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md: no ```sh block after the userdriver-example marker")
	}
	words, err := shellWords(strings.ReplaceAll(block, "\\\n", " "))
	if err != nil {
		t.Fatalf("README example: %v", err)
	}
	prefix := []string{"go", "run", "./cmd/vgpu", "run"}
	if len(words) < len(prefix) || strings.Join(words[:len(prefix)], " ") != strings.Join(prefix, " ") {
		t.Fatalf("README example %q does not start with %q", words, prefix)
	}
	return words[len(prefix):]
}

// shellWords splits a command line the way sh does for what the README uses: blanks, single and
// double quotes (no expansions).
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// userRun runs `vgpu run ARGS --out DIR --json FILE` from the repository root and returns its
// exit status, stdout and JSON report.
func userRun(t *testing.T, args ...string) (int, string, *userRunJSON) {
	t.Helper()
	code, out, _, r := userRunStderr(t, args...)
	return code, out, r
}

// userRunStderr is userRun that also returns stderr.
func userRunStderr(t *testing.T, args ...string) (int, string, string, *userRunJSON) {
	t.Helper()
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "run.json")
	cmd := exec.Command(buildVGPU(t), append(append([]string{"run"}, args...), "--out", filepath.Join(dir, "logs"), "--json", jsonPath)...)
	cmd.Dir = ".."
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("vgpu run: %v", err)
	}
	t.Logf("vgpu run %q: exit %d in %v", args, code, time.Since(start).Round(time.Millisecond))
	t.Logf("stdout:\n%s", stdout.String())
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatalf("no --json report (%v); stderr:\n%s", err, stderr.String())
	}
	var r userRunJSON
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("--json report: %v\n%s", err, b)
	}
	if len(r.Boots) != 1 {
		t.Fatalf("%d boots in the report, want 1 (a user run boots once)", len(r.Boots))
	}
	if code != 0 {
		t.Logf("stderr:\n%s", stderr.String())
	}
	return code, stdout.String(), stderr.String(), &r
}

func wantContains(t *testing.T, what string, list []string, sub string) {
	t.Helper()
	for _, s := range list {
		if strings.Contains(s, sub) {
			return
		}
	}
	t.Errorf("%s: none of %q contains %q", what, list, sub)
}

// TestUserDriver builds the example driver examples/mydrv (not vgpu_test), runs its guest test
// program against it, and checks `vgpu run`'s verdict — exit status, summary and --json — when
// everything passes and when it fails: a failing command with failing KTAP, a WARN_ON in the
// driver, the same WARN_ON as a panic, a module that fails to load, a command that outlives
// --timeout; and a guest kernel module loaded with its dependency beside the driver. The image
// and the module build are shared: only the plan archive differs between the boots.
func TestUserDriver(t *testing.T) {
	needQEMU(t)
	example := readmeExample(t)
	passWall := time.Duration(0)

	t.Run("pass", func(t *testing.T) {
		code, out, r := userRun(t, example...)
		b := r.Boots[0]
		if code != 0 || !r.Passed || !b.Passed {
			t.Fatalf("exit %d, passed %v: want 0 and true; problems %q", code, r.Passed, b.Problems)
		}
		passWall = time.Duration(b.WallMS) * time.Millisecond
		if len(b.Modules) != 1 || b.Modules[0].Name != "mydrv" || b.Modules[0].Exit != "0" {
			t.Errorf("modules %+v, want mydrv loaded", b.Modules)
		}
		if len(b.Runs) != 1 || b.Runs[0].Status != "passed" {
			t.Fatalf("runs %+v, want one that passed", b.Runs)
		}
		wantContains(t, "run 1 output", b.Runs[0].Output, "mydrv test: ok")
		if len(b.Unloads) != 1 || b.Unloads[0].Exit != "0" || len(b.Splats) != 0 {
			t.Errorf("unloads %+v, splats %+v: want mydrv unloaded, no splat", b.Unloads, b.Splats)
		}
		for _, w := range []string{"PASS in", "module  mydrv", "run 1   sh /test.sh", "PASS", "unload  mydrv"} {
			if !strings.Contains(out, w) {
				t.Errorf("summary lacks %q", w)
			}
		}
		// The driver's own messages are in the kept kernel log.
		log, err := os.ReadFile(b.Artefacts["kernel log"])
		if err != nil || !bytes.Contains(log, []byte("ID_MAGIC=0x55504756")) {
			t.Errorf("kernel log %s (%v) lacks the driver's ID_MAGIC line", b.Artefacts["kernel log"], err)
		}
	})

	t.Run("guest-kernel-module", func(t *testing.T) {
		// zram comes from the guest kernel, with its dependency zsmalloc; mydrv from the example.
		code, _, r := userRun(t, append(example, "--module", "zram=num_devices=2", "--module", "mydrv",
			"--run", "test -b /dev/zram1 && grep -q '^zsmalloc ' /proc/modules")...)
		b := r.Boots[0]
		if code != 0 || !r.Passed {
			t.Fatalf("exit %d, passed %v; problems %q", code, r.Passed, b.Problems)
		}
		var mods, unloads []string
		for _, m := range b.Modules {
			mods = append(mods, m.Name+"="+m.Args)
		}
		for _, u := range b.Unloads {
			unloads = append(unloads, u.Name)
		}
		if strings.Join(mods, " ") != "zsmalloc= zram=num_devices=2 mydrv=" || strings.Join(unloads, " ") != "mydrv zram zsmalloc" {
			t.Errorf("loaded %q, unloaded %q: want the dependency first and the reverse order at the end", mods, unloads)
		}
	})

	t.Run("failing-command", func(t *testing.T) {
		code, out, r := userRun(t, append(example,
			"--run", `printf 'KTAP version 1\n1..2\nok 1 reads\nnot ok 2 writes\n'`,
			"--run", "grep -q magic=0xdeadbeef /dev/mydrv")...)
		b := r.Boots[0]
		if code != 1 || r.Passed || b.Passed {
			t.Fatalf("exit %d, passed %v: want 1 and false", code, r.Passed)
		}
		if len(b.Runs) != 3 || b.Runs[0].Status != "passed" || b.Runs[1].Status != "passed" || b.Runs[2].Status != "failed (exit 1)" {
			t.Fatalf("runs %+v: want passed, passed (KTAP printed), failed (exit 1)", b.Runs)
		}
		if len(b.KTAP) != 1 || b.KTAP[0].Source != "run 2" || len(b.KTAP[0].Cases) != 2 || b.KTAP[0].Cases[1].Result != "not ok" {
			t.Errorf("KTAP %+v: want run 2's two cases, the second failed", b.KTAP)
		}
		wantContains(t, "problems", b.Problems, "run 3 `grep -q magic=0xdeadbeef /dev/mydrv`: failed (exit 1)")
		wantContains(t, "problems", b.Problems, "KTAP (run 2): failed: writes")
		for _, w := range []string{"FAIL in", "run 3   grep -q magic=0xdeadbeef /dev/mydrv", "FAIL (exit 1)", "FAIL writes"} {
			if !strings.Contains(out, w) {
				t.Errorf("summary lacks %q", w)
			}
		}
	})

	t.Run("warn-on", func(t *testing.T) {
		// The parameter comes from the kernel command line (NAME.PARAM=VALUE, as modprobe does).
		code, out, stderr, r := userRunStderr(t, append(example, "--append", "mydrv.warn=1", "--console", "--append", "loglevel=8")...)
		b := r.Boots[0]
		if code != 1 || r.Passed {
			t.Fatalf("exit %d, passed %v: want 1 and false (a WARNING fails the run)", code, r.Passed)
		}
		if len(b.Runs) != 1 || b.Runs[0].Status != "passed" {
			t.Errorf("runs %+v: the test itself passes", b.Runs)
		}
		if len(b.Splats) != 1 || b.Splats[0].Kind != "WARNING" || !strings.Contains(b.Splats[0].Title, "mydrv.c:") ||
			!strings.Contains(b.Splats[0].Title, "[mydrv]") {
			t.Fatalf("splats %+v: want one WARNING at mydrv.c in [mydrv]", b.Splats)
		}
		wantContains(t, "problems", b.Problems, "kernel splat: WARNING: CPU:")
		// --console streamed the console, which carries the kernel log and the command's output;
		// --append reached the kernel.
		for _, w := range []string{"ID_MAGIC=0x55504756", "mydrv test: ok"} {
			if !strings.Contains(stderr, w) {
				t.Errorf("--console output lacks %q", w)
			}
		}
		cmdline := strings.TrimSpace(regexp.MustCompile(`Command line: .*`).FindString(stderr))
		if !strings.HasSuffix(cmdline, " mydrv.warn=1 loglevel=8") || strings.Contains(cmdline, " quiet") {
			t.Errorf("kernel command line %q: want mydrv.warn=1 loglevel=8 appended and no quiet", cmdline)
		}
		for _, w := range []string{"SPLAT   WARNING: CPU:", "kernel WARNING report", "Call Trace:"} {
			if !strings.Contains(out, w) {
				t.Errorf("summary lacks %q", w)
			}
		}
	})

	t.Run("panic", func(t *testing.T) {
		// panic_on_warn turns the driver's WARN_ON into a panic: the guest dies in insmod, the
		// results port never carries the report, and the console still has the panic.
		code, _, r := userRun(t, append(example, "--module", "mydrv=warn=1", "--append", "panic_on_warn=1")...)
		b := r.Boots[0]
		if code != 1 || r.Passed || b.TimedOut {
			t.Fatalf("exit %d, passed %v, timed out %v: want 1, false, false", code, r.Passed, b.TimedOut)
		}
		var kinds []string
		for _, s := range b.Splats {
			kinds = append(kinds, s.Kind)
		}
		if strings.Join(kinds, " ") != "WARNING panic" {
			t.Errorf("splats %q, want WARNING and panic", kinds)
		}
		if len(b.Modules) != 1 || b.Modules[0].Exit != "" || len(b.Runs) != 1 || b.Runs[0].Status != "did not finish" {
			t.Errorf("modules %+v, runs %+v: want insmod and the command unfinished", b.Modules, b.Runs)
		}
		wantContains(t, "problems", b.Problems, "never reported its end")
	})

	t.Run("module-fails-to-load", func(t *testing.T) {
		// kstrtobool takes y/n/1/0/t/f/on/off (by first letter): "maybe" is -EINVAL.
		code, out, r := userRun(t, append(example, "--module", "mydrv=warn=maybe")...)
		b := r.Boots[0]
		if code != 1 || r.Passed {
			t.Fatalf("exit %d, passed %v: want 1 and false", code, r.Passed)
		}
		if len(b.Modules) != 1 || b.Modules[0].Exit == "0" || b.Modules[0].Exit == "" {
			t.Errorf("modules %+v: want insmod to fail", b.Modules)
		}
		if len(b.Runs) != 1 || !strings.HasPrefix(b.Runs[0].Status, "skipped") || len(b.Unloads) != 0 {
			t.Errorf("runs %+v, unloads %+v: want the command skipped and nothing to unload", b.Runs, b.Unloads)
		}
		wantContains(t, "problems", b.Problems, "module mydrv: insmod exited")
		if !strings.Contains(out, "SKIPPED") {
			t.Errorf("summary lacks SKIPPED")
		}
	})

	t.Run("timeout", func(t *testing.T) {
		// Long enough for the boot on a loaded machine, so the timeout hits the command.
		limit := max(15*time.Second, 4*passWall)
		code, out, r := userRun(t, "--module-src", "examples/mydrv", "--run", "echo sleeping; sleep 100000",
			"--timeout", limit.String())
		b := r.Boots[0]
		if code != 1 || r.Passed || !b.TimedOut {
			t.Fatalf("exit %d, passed %v, timed out %v: want 1, false, true", code, r.Passed, b.TimedOut)
		}
		wantContains(t, "problems", b.Problems, fmt.Sprintf("timeout: the guest did not power off within %v; it was running run 1 `echo sleeping; sleep 100000`", limit))
		if len(b.Runs) != 1 || b.Runs[0].Status != "did not finish" {
			t.Errorf("runs %+v: want one that did not finish", b.Runs)
		}
		wantContains(t, "last output", b.LastOutput, "sleeping")
		if !strings.Contains(out, "DID NOT FINISH") || !strings.Contains(out, "what the guest printed last") {
			t.Errorf("summary lacks the run's status or the guest's last output")
		}
	})
}
