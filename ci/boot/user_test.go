package boot

import (
	"os"
	"strings"
	"testing"
	"time"

	"vgpu/images"
)

func TestKernelLog(t *testing.T) {
	raw := "6,1,0,-;Linux version 6.1.0\n" +
		" SUBSYSTEM=pci\n DEVICE=+pci:0000:00:02.0\n" +
		"4,2,1703511,-;WARNING: CPU: 0 PID: 94 at mydrv.c:65\n" +
		"6,3,2000001,-,caller=T1;a\\x0aline\\x09tab \\x01 ctrl\n" +
		"torn record\n" +
		"6,x,y,-;bad numbers\n"
	got := KernelLog([]byte(raw))
	want := []string{
		"[    0.000000] Linux version 6.1.0",
		"[    1.703511] WARNING: CPU: 0 PID: 94 at mydrv.c:65",
		"[    2.000001] a",
		"[    2.000001] line\ttab \\x01 ctrl",
		"torn record",
		"6,x,y,-;bad numbers",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("KernelLog:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestFindSplats(t *testing.T) {
	real, err := os.ReadFile("testdata/warn_on.log")
	if err != nil {
		t.Fatal(err)
	}
	lines := func(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }
	for _, tc := range []struct {
		name  string
		log   []string
		kinds []string
		title []string // substrings of each title
		nline []int    // lines in each report
	}{
		{"none", lines("[ 1.0] mydrv: loaded\n[ 1.1] Call Trace:\n[ 1.2]  dump_stack+0x1\n[ 1.3] INFO: something else"), nil, nil, nil},
		{"WARN_ON (a real report)", lines(string(real)), []string{"WARNING"}, []string{"WARNING: CPU: 0 PID: 94 at mydrv.c:65 mydrv_probe.cold+0x0/0x3a [mydrv]"}, []int{54}},
		{"oops after BUG, one report, RIP in the title", lines(`[ 2.0] BUG: kernel NULL pointer dereference, address: 0000000000000008
[ 2.0] #PF: supervisor read access in kernel mode
[ 2.0] Oops: 0000 [#1] PREEMPT SMP NOPTI
[ 2.0] RIP: 0010:mydrv_read+0x12/0x40 [mydrv]
[ 2.0] Call Trace:
[ 2.0]  <TASK>
[ 2.0]  vfs_read+0x1/0x2
[ 2.0]  </TASK>
[ 2.0] ---[ end trace 0000000000000000 ]---
[ 2.1] mydrv: after`), []string{"BUG"}, []string{"BUG: kernel NULL pointer dereference, address: 0000000000000008 (RIP mydrv_read+0x12/0x40)"}, []int{9}},
		{"lockdep with its banner, ends at </TASK>", lines(`[ 3.0] ======================================================
[ 3.0] WARNING: possible circular locking dependency detected
[ 3.0] 6.1.0 #1 Not tainted
[ 3.0] stack backtrace:
[ 3.0] Call Trace:
[ 3.0]  <TASK>
[ 3.0]  </TASK>
[ 3.1] next message
[ 3.2] kernel BUG at drivers/x.c:12!`), []string{"lockdep", "BUG"}, []string{"possible circular locking", "kernel BUG at drivers/x.c:12!"}, []int{7, 1}},
		{"panic, hung task, RCU stall", lines(`[ 4.0] INFO: task insmod:94 blocked for more than 120 seconds.
[ 5.0] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:
[ 6.0] Kernel panic - not syncing: Fatal exception
[ 6.0] ---[ end Kernel panic - not syncing: Fatal exception ]---`), []string{"hung task", "RCU stall", "panic"}, []string{"insmod:94", "rcu_preempt", "Fatal exception"}, []int{1, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FindSplats(tc.log)
			if len(got) != len(tc.kinds) {
				t.Fatalf("%d splats %+v, want %d", len(got), got, len(tc.kinds))
			}
			for i, s := range got {
				if s.Kind != tc.kinds[i] || !strings.Contains(s.Title, tc.title[i]) || len(s.Lines) != tc.nline[i] {
					t.Errorf("splat %d: kind %s title %q, %d lines; want %s, %q, %d", i, s.Kind, s.Title, len(s.Lines), tc.kinds[i], tc.title[i], tc.nline[i])
				}
			}
		})
	}
	// A log that never ends a report: bounded.
	flood := []string{"[ 1.0] WARNING: CPU: 0 PID: 1 at x.c:1 f+0x0/0x1"}
	for range 1000 {
		flood = append(flood, "[ 1.0]  frame+0x0/0x1")
	}
	if s := FindSplats(flood); len(s) != 1 || len(s[0].Lines) != maxSplatLines {
		t.Errorf("flood: %d splats, first %d lines; want 1 of %d", len(s), len(s[0].Lines), maxSplatLines)
	}
	// The console adds what the kernel log lacks (a panic), once.
	a := FindSplats(lines("[ 1.0] WARNING: CPU: 0 PID: 1 at x.c:1 f+0x0/0x1"))
	b := FindSplats(lines("[ 1.0] WARNING: CPU: 0 PID: 1 at x.c:1 f+0x0/0x1\n[ 2.0] Kernel panic - not syncing: x"))
	b = findSplats(lines("[ 1.0] WARNING: CPU: 0 PID: 1 at x.c:1 f+0x0/0x1\n[ 2.0] Kernel panic - not syncing: x"), "console")
	if m := mergeSplats(a, b); len(m) != 2 || m[1].Kind != "panic" || m[0].Source != "kernel log" || m[1].Source != "console" || m[1].Line != 2 {
		t.Errorf("merged %+v", m)
	}
}

func TestParseUser(t *testing.T) {
	plan := &images.RunPlan{
		Modules:  []images.PlanModule{{Name: "dep", Dependency: true}, {Name: "mydrv", Args: "warn=1"}, {Name: "other"}},
		Commands: []string{"sh /test.sh", "printf ktap", "false", "sleep 9"},
	}
	report := strings.Split(`# vgpu-init: out m-dep: insmod: note
# vgpu-init: module dep rc=0 cs=3
# vgpu-init: module mydrv rc=0 cs=12
# vgpu-init: out m-other: insmod: can't insert 'other.ko': Invalid parameters
# vgpu-init: module other rc=1 cs=1
# vgpu-init: out 1: read: magic=0x55504756
# vgpu-init: out 2: KTAP version 1
# vgpu-init: out 2: 1..2
# vgpu-init: out 2: ok 1 a
# vgpu-init: out 2: not ok 2 b
# vgpu-init: run 1 rc=0 cs=4
# vgpu-init: run 2 rc=0 cs=2
# vgpu-init: run 3 rc=1 cs=1
# vgpu-init: unload mydrv rc=0
# vgpu-init: irqs mydrv=1
# vgpu-init: unload dep rc=1
# vgpu-init: irqs dep=0
# vgpu-init: end`, "\n")
	kernel := []string{"[ 1.0] boot", "[ 2.0] KTAP version 1", "[ 2.0] 1..1", "[ 2.0]     KTAP version 1", "[ 2.0]     1..1",
		"[ 2.0]     ok 1 case", "[ 2.0] ok 1 suite", "[ 3.0] KTAP version 1", "[ 3.0] 1..1", "[ 3.0] ok 1 second"}
	u := parseUser(plan, report, kernel)
	if m := u.Modules[1]; m.RC != "0" || m.Time != 120*time.Millisecond || m.Args != "warn=1" {
		t.Errorf("module mydrv %+v", m)
	}
	if m := u.Modules[2]; m.RC != "1" || len(m.Output) != 1 {
		t.Errorf("module other %+v", m)
	}
	if r := u.Runs[0]; r.Status() != "passed" || r.Time != 40*time.Millisecond || r.Output[0] != "read: magic=0x55504756" {
		t.Errorf("run 1 %+v", r)
	}
	if s := []string{u.Runs[2].Status(), u.Runs[3].Status()}; s[0] != "failed (exit 1)" || s[1] != "did not finish" {
		t.Errorf("run statuses %q", s)
	}
	if len(u.KTAP) != 3 || u.KTAP[0].Source != "run 2" || u.KTAP[1].Source != "kernel log" || len(u.KTAP[1].Report.Tests) != 1 ||
		u.KTAP[2].Report.Tests[0].Name != "second" {
		t.Fatalf("KTAP %+v", u.KTAP)
	}
	got := u.Problems(true)
	want := []string{
		"module other: insmod exited 1: insmod: can't insert 'other.ko': Invalid parameters",
		"run 3 `false`: failed (exit 1)",
		"run 4 `sleep 9`: did not finish",
		"rmmod mydrv: 1 interrupt handlers naming it are left",
		"rmmod dep: exited 1",
		"KTAP (run 2): failed: b",
	}
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("problem %d = %q, want %q", i, got[i], want[i])
		}
	}
	// Not unloaded: a problem only when /init got to its end.
	u2 := parseUser(plan, []string{"# vgpu-init: module dep rc=0 cs=1"}, nil)
	if p := strings.Join(u2.Problems(true), "\n"); !strings.Contains(p, "module dep: loaded but never unloaded") {
		t.Errorf("problems %s", p)
	}
	if p := strings.Join(u2.Problems(false), "\n"); strings.Contains(p, "never unloaded") {
		t.Errorf("problems without an end %s", p)
	}
}

func TestGuestWhere(t *testing.T) {
	plan := &images.RunPlan{Commands: []string{"sh /t.sh", "sleep 100"}}
	for _, tc := range []struct {
		console string
		plan    *images.RunPlan
		want    string
	}{
		{"[ 0.1] Linux version\n[ 0.2] Run /init as init process", plan, "booting the kernel"},
		{"# vgpu-init: begin module mydrv\n[ 1.0] mydrv: probing", plan, "loading module mydrv"},
		{"# vgpu-init: begin module mydrv\n# vgpu-init: module mydrv rc=0 cs=1\n# vgpu-init: begin run 1\nok\n# vgpu-init: run 1 rc=0 cs=1\n# vgpu-init: begin run 2\n", plan, "running run 2 `sleep 100`"},
		{"# vgpu-init: begin unload mydrv\r\n", plan, "unloading module mydrv"},
		{"# vgpu-init: run 2 rc=0 cs=1\n# vgpu-init: unload mydrv rc=0\n", plan, "in /init after its last step"},
		{"# vgpu-init: note: x\n", nil, "in the vgpu_test suite"},
	} {
		if got := guestWhere(consoleLines([]byte(tc.console)), tc.plan); !strings.HasPrefix(got, tc.want) {
			t.Errorf("guestWhere(%q) = %q, want %q", tc.console, got, tc.want)
		}
	}
}

func TestCmdlineUserRun(t *testing.T) {
	g := &images.GuestImage{CmdlineBase: "console=ttyS0 panic=-1 quiet no_timer_check"}
	suite := cmdline(Config{Guest: g, TestArgs: "tests=dma"})
	if !strings.Contains(suite, " quiet ") || !strings.Contains(suite, "vgpu_test_args") {
		t.Errorf("suite cmdline %q: want quiet and the test arguments", suite)
	}
	user := cmdline(Config{Guest: g, Plan: &images.RunPlan{}, TestArgs: "tests=dma", Append: []string{"loglevel=8", `dyndbg="module mydrv +p"`}})
	if strings.Contains(user, "quiet") || strings.Contains(user, "vgpu_test_args") ||
		!strings.HasSuffix(user, `no_timer_check loglevel=8 dyndbg="module mydrv +p"`) {
		t.Errorf("user cmdline %q: want no quiet, no test arguments, the appended ones last", user)
	}
}

// TestJudgeUser: a guest that died in insmod (no end line, a panic on the console) fails with
// the reasons named; a timeout does not also claim a missing end.
func TestJudgeUser(t *testing.T) {
	plan := &images.RunPlan{Modules: []images.PlanModule{{Name: "mydrv"}}, Commands: []string{"true"}}
	crash := &Result{Splats: []Splat{{Kind: "panic", Title: "Kernel panic - not syncing: x", Source: "console"}}}
	judgeUser(crash, plan, []byte("# vgpu-init: begin module mydrv\n[ 1.0] Kernel panic - not syncing: x\n"))
	want := []string{"never reported its end", "module mydrv: never finished loading", "run 1 `true`: did not finish", "kernel splat: panic: Kernel panic - not syncing: x"}
	if len(crash.Problems) != len(want) {
		t.Fatalf("problems %q, want %d", crash.Problems, len(want))
	}
	for i, w := range want {
		if !strings.Contains(crash.Problems[i], w) {
			t.Errorf("problem %d %q, want %q", i, crash.Problems[i], w)
		}
	}
	if !crash.Failed() || crash.Report == nil {
		t.Error("a crashed user run must fail and have an (empty) report")
	}
	hung := &Result{TimedOut: true}
	judgeUser(hung, plan, []byte("# vgpu-init: module mydrv rc=0 cs=1\n# vgpu-init: begin run 1\n"))
	for _, p := range hung.Problems {
		if strings.Contains(p, "never reported its end") || strings.Contains(p, "never unloaded") {
			t.Errorf("timed-out run: %q", p)
		}
	}
	ok := &Result{}
	judgeUser(ok, plan, []byte("# vgpu-init: module mydrv rc=0 cs=1\n# vgpu-init: run 1 rc=0 cs=1\n# vgpu-init: unload mydrv rc=0\n# vgpu-init: irqs mydrv=0\n# vgpu-init: end\n"))
	if ok.Failed() {
		t.Errorf("clean run failed: %q", ok.Problems)
	}
}
