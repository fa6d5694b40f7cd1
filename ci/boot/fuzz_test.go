package boot

import (
	"strings"
	"testing"

	"vgpu/images"
)

// FuzzGuestLogs feeds guest-written bytes (the kmsg stream, the results port) to the decoders:
// none may panic, a splat never holds more than maxSplatLines, and every splat's title is one
// of the log's lines.
func FuzzGuestLogs(f *testing.F) {
	f.Add([]byte("4,2,1703511,-;WARNING: CPU: 0 PID: 94 at mydrv.c:65\n SUBSYSTEM=pci\n6,3,x;y\n"), []byte("# vgpu-init: module m rc=0 cs=3\n# vgpu-init: out 1: KTAP version 1\n# vgpu-init: run 1 rc=0 cs=1\n"))
	f.Add([]byte("0,1,0,-;======\n0,2,1,-;BUG: x\\x0a---[ end trace\n"), []byte("# vgpu-init: out 99: x\n# vgpu-init: run -1 rc= cs=\n# vgpu-init: irqs m=99999999999999999999\n"))
	plan := &images.RunPlan{Modules: []images.PlanModule{{Name: "m"}}, Commands: []string{"a", "b"}}
	f.Fuzz(func(t *testing.T, kmsg, report []byte) {
		log := KernelLog(kmsg)
		for _, s := range FindSplats(log) {
			if len(s.Lines) > maxSplatLines || s.Line < 1 || s.Line > len(log) {
				t.Fatalf("splat %+v in a log of %d lines", s, len(log))
			}
			if !strings.HasPrefix(stripTimestamp(log[s.Line-1]), strings.SplitN(s.Title, " (RIP ", 2)[0]) {
				t.Fatalf("title %q is not line %d %q", s.Title, s.Line, log[s.Line-1])
			}
		}
		res := &Result{}
		judgeUser(res, plan, report)
		if len(res.User.Runs) != 2 || len(res.User.Modules) != 1 {
			t.Fatalf("the plan's steps changed: %+v", res.User)
		}
		guestWhere(consoleLines(report), plan)
	})
}
