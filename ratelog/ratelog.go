// Package ratelog is the one rate limiter for log lines a guest (or a client) can trigger.
//
// Anything an untrusted guest can cause at MMIO speed — a queue halt, an interrupt to a vector
// that does not exist, a refused DMA — must not turn into host log volume at the same speed.
// Every such line goes through a Limiter under a fixed key naming the event kind (keys are
// constants in the code, so the key set is bounded). Each key may log Burst lines per Interval;
// further lines are counted, not written, and the next line that is written carries the count
// of those it stands for ("suppressed"). Counts per key are kept for the diagnostics report.
package ratelog

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// Defaults: a few lines a second per kind is enough to see what happens and cheap to keep.
const (
	DefaultInterval = time.Second
	DefaultBurst    = 5
)

// Limiter rate-limits log lines per key. The zero value is not usable; use New.
type Limiter struct {
	log      *slog.Logger
	interval time.Duration
	burst    int
	now      func() time.Time

	mu   sync.Mutex
	keys map[string]*keyState
}

type keyState struct {
	windowStart time.Time
	inWindow    int    // lines written in the current window
	pending     uint64 // suppressed since the last written line
	logged      uint64 // lines written in total
	suppressed  uint64 // lines suppressed in total
}

// New returns a limiter writing to log; interval ≤ 0 or burst ≤ 0 take the defaults.
func New(log *slog.Logger, interval time.Duration, burst int) *Limiter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	if burst <= 0 {
		burst = DefaultBurst
	}
	return &Limiter{log: log, interval: interval, burst: burst, now: time.Now, keys: map[string]*keyState{}}
}

// SetClock replaces the time source (tests).
func (l *Limiter) SetClock(now func() time.Time) {
	l.mu.Lock()
	l.now = now
	l.mu.Unlock()
}

// Log writes msg at level under key unless the key has used its burst in the current
// interval; it reports whether the line was written. A written line that follows suppressed
// ones carries "suppressed"=N.
func (l *Limiter) Log(level slog.Level, key, msg string, args ...any) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	k := l.keys[key]
	if k == nil {
		k = &keyState{}
		l.keys[key] = k
	}
	now := l.now()
	if now.Sub(k.windowStart) >= l.interval {
		k.windowStart, k.inWindow = now, 0
	}
	if k.inWindow >= l.burst {
		k.pending++
		k.suppressed++
		l.mu.Unlock()
		return false
	}
	k.inWindow++
	k.logged++
	pending := k.pending
	k.pending = 0
	l.mu.Unlock()
	if pending > 0 {
		args = append(args, "suppressed", pending)
	}
	l.log.Log(context.Background(), level, msg, args...)
	return true
}

// Warn is Log at slog.LevelWarn.
func (l *Limiter) Warn(key, msg string, args ...any) bool {
	return l.Log(slog.LevelWarn, key, msg, args...)
}

// Info is Log at slog.LevelInfo.
func (l *Limiter) Info(key, msg string, args ...any) bool {
	return l.Log(slog.LevelInfo, key, msg, args...)
}

// Count is one key's totals.
type Count struct {
	Key                string
	Logged, Suppressed uint64
}

// Counts returns every key's totals, sorted by key.
func (l *Limiter) Counts() []Count {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	out := make([]Count, 0, len(l.keys))
	for key, k := range l.keys {
		out = append(out, Count{Key: key, Logged: k.logged, Suppressed: k.suppressed})
	}
	l.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Suppressed returns the number of lines suppressed under every key.
func (l *Limiter) Suppressed() uint64 {
	var n uint64
	for _, c := range l.Counts() {
		n += c.Suppressed
	}
	return n
}
