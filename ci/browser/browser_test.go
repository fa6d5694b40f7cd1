package browser

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// start launches the browser for a test. Without Chromium the test fails (CI installs it),
// except under -short.
func start(t *testing.T) (*Browser, context.Context) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no headless browser")
	}
	path, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	b, err := Start(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b, ctx
}

// TestProblemsSeen: the checks the timeline test relies on do see a page's errors.
func TestProblemsSeen(t *testing.T) {
	b, ctx := start(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "bad.html")
	os.WriteFile(page, []byte(`<!DOCTYPE html><html><body><p id="p">hello</p>
<img src="missing.png">
<script>console.error("an error", 42); console.log("not an error");</script>
<script>undefinedFunction();</script>
</body></html>`), 0o644)
	if err := b.Navigate(ctx, "file://"+page); err != nil {
		t.Fatal(err)
	}
	var text string
	if err := b.Evaluate(ctx, `document.getElementById("p").textContent`, &text); err != nil || text != "hello" {
		t.Errorf("evaluate: %q, %v", text, err)
	}
	if err := b.Evaluate(ctx, `nosuch.thing`, nil); err == nil {
		t.Errorf("an exception in Evaluate gave no error")
	}
	probs := strings.Join(b.Problems(), "\n")
	for _, want := range []string{"console.error: an error 42", "undefinedFunction is not defined", "missing.png"} {
		if !strings.Contains(probs, want) {
			t.Errorf("problems lack %q:\n%s", want, probs)
		}
	}
	if strings.Contains(probs, "not an error") {
		t.Errorf("console.log counted as a problem:\n%s", probs)
	}
	png, err := b.Screenshot(ctx)
	if err != nil || len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Errorf("screenshot: %d bytes, %v", len(png), err)
	}
}

func TestCloseKillsTheBrowser(t *testing.T) {
	b, ctx := start(t)
	pid := b.cmd.Process.Pid
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.profile); !os.IsNotExist(err) {
		t.Errorf("profile %s left behind: %v", b.profile, err)
	}
	if left := groupMembers(pid); len(left) > 0 {
		t.Errorf("processes of the browser's group left: %v", left)
	}
	if err := b.Navigate(ctx, "about:blank"); err == nil {
		t.Errorf("a call after Close succeeded")
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// groupMembers lists the processes whose process group is pgid.
func groupMembers(pgid int) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			out = append(out, e.Name()+" "+s[:i+1])
		}
	}
	return out
}
