package hostile

import (
	"strings"
	"testing"
)

// The suite's own checks must be able to fail: these tests break what they look for.

func TestGuardMemoryReports(t *testing.T) {
	m, err := newGuestMem(defaultAreas(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	if p := m.check(); p != nil {
		t.Fatalf("fresh memory: %v", p)
	}
	sys, small := m.area("sys"), m.area("small")
	for _, tc := range []struct {
		name  string
		touch func()
		want  string // substring of the one problem expected; "" for none
	}{
		{"write just past a mapped area", func() { m.b[sys.off+sys.size] ^= 0xFF }, "canary overwritten"},
		{"write just before a mapped area", func() { m.b[small.off-1] ^= 1 }, "guard after sys"},
		{"untargeted write in an area", func() { m.b[small.off+100] ^= 0x10 }, "area small"},
		{"write the attack was allowed to do", func() { m.allow(sysIOVA+0x1000, 8); m.b[sys.off+0x1004] ^= 1 }, ""},
		{"write by the client itself", func() { m.set(sysIOVA+0x2000, []byte{1, 2, 3, 4}) }, ""},
		{"write at the last byte of the 64-bit space, allowed by a range that wraps", func() {
			top := m.area("top")
			m.allow(^uint64(0)-15, 64)
			m.b[top.off+top.size-1] ^= 1
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := m.snapshot()
			tc.touch()
			p := m.check()
			switch {
			case tc.want == "" && p != nil:
				t.Errorf("reported %v, want nothing", p)
			case tc.want != "" && (len(p) != 1 || !strings.Contains(p[0], tc.want)):
				t.Errorf("reported %q, want one problem mentioning %q", p, tc.want)
			}
			if tc.want != "" && m.changedSince(snap, "x") == nil {
				t.Error("changedSince saw nothing")
			}
			copy(m.b, m.want) // undo
			m.allowed = nil
		})
	}
}

func TestLogProblems(t *testing.T) {
	clean := `{"time":"x","level":"WARN","msg":"cp: queue halted","why":"panic: not really, a guest string"}
vgpu diagnostics:
goroutines: 5
`
	if p := logProblems([]byte(clean)); p != nil {
		t.Errorf("clean log reported: %q", p)
	}
	for _, bad := range []string{
		"panic: runtime error: index out of range [3] with length 3\n\ngoroutine 7 [running]:\n",
		"fatal error: concurrent map writes\n",
		"==================\nWARNING: DATA RACE\nWrite at 0x00c000 by goroutine 8:\n",
		"SIGSEGV: segmentation violation\n",
	} {
		if p := logProblems([]byte(clean + bad)); len(p) == 0 {
			t.Errorf("not reported: %q", bad)
		}
	}
}

func TestGoroutineLine(t *testing.T) {
	log := "vgpu diagnostics:\nresets: 0\ngoroutines: 12\n{\"msg\":\"goroutines: 99\"}\ngoroutines: 7\n"
	m := goroutineLine.FindAllStringSubmatch(log, -1)
	if len(m) != 2 || m[1][1] != "7" {
		t.Errorf("matches %q, want the two report lines, the last saying 7", m)
	}
}

func TestParseKB(t *testing.T) {
	if v, err := parseKB("   1234 kB"); err != nil || v != 1234 {
		t.Errorf("parseKB = %d, %v", v, err)
	}
	if _, err := parseKB("12 MB"); err == nil {
		t.Error("parseKB accepted MB")
	}
}
