package ratelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	tests := []struct {
		name        string
		burst       int
		lines       int
		advance     time.Duration // clock step between lines
		wantWritten int
		wantSupp    uint64
	}{
		{"under the burst", 5, 3, 0, 3, 0},
		{"flood within one interval", 5, 50000, 0, 5, 49995},
		{"spread over intervals", 2, 10, time.Second, 10, 0},
		{"two per interval", 2, 8, 500 * time.Millisecond, 8, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Second, tc.burst)
			now := time.Unix(1000, 0)
			l.SetClock(func() time.Time { return now })
			written := 0
			for i := 0; i < tc.lines; i++ {
				if l.Warn("k", "event", "i", i) {
					written++
				}
				now = now.Add(tc.advance)
			}
			if written != tc.wantWritten {
				t.Errorf("written %d, want %d", written, tc.wantWritten)
			}
			if got := l.Suppressed(); got != tc.wantSupp {
				t.Errorf("suppressed %d, want %d", got, tc.wantSupp)
			}
			if n := strings.Count(buf.String(), "\n"); n != tc.wantWritten {
				t.Errorf("log has %d lines, want %d", n, tc.wantWritten)
			}
		})
	}
}

func TestSuppressedCountCarried(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Second, 1)
	now := time.Unix(0, 0)
	l.SetClock(func() time.Time { return now })
	l.Warn("a", "x")
	l.Warn("a", "x")
	l.Warn("a", "x")
	l.Warn("b", "y") // another key has its own budget
	now = now.Add(time.Second)
	l.Warn("a", "x")
	out := buf.String()
	if !strings.Contains(out, "suppressed=2") {
		t.Errorf("the line after suppression does not carry the count:\n%s", out)
	}
	if strings.Count(out, "msg=y") != 1 {
		t.Errorf("key b was limited by key a:\n%s", out)
	}
	c := l.Counts()
	if len(c) != 2 || c[0] != (Count{"a", 2, 2}) || c[1] != (Count{"b", 1, 0}) {
		t.Errorf("counts %+v", c)
	}
}

func TestNilLimiter(t *testing.T) {
	var l *Limiter
	if l.Warn("k", "m") || l.Counts() != nil || l.Suppressed() != 0 {
		t.Error("a nil limiter logs or counts")
	}
}
