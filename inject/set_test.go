package inject

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"vgpu/ratelog"
)

func mustSet(t *testing.T, text string) (*Set, *bytes.Buffer) {
	t.Helper()
	rules, err := Parse(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	s := NewSet(ratelog.New(slog.New(slog.NewTextHandler(&log, nil)), time.Hour, 100))
	if _, err := s.Add(rules...); err != nil {
		t.Fatal(err)
	}
	return s, &log
}

// Each hook against the rules of its kind: which events of a fixed sequence are injected.
func TestSetMatching(t *testing.T) {
	type ev func(s *Set) bool
	irq := func(v int) ev { return func(s *Set) bool { d, _ := s.Interrupt(v); return d } }
	delay := func(v int) ev { return func(s *Set) bool { _, d := s.Interrupt(v); return d == 5*time.Millisecond } }
	ivDrop := func(c, src uint8) ev { return func(s *Set) bool { return s.IV(c, src).Drop } }
	ivSrc := func(src uint8) ev {
		return func(s *Set) bool { a := s.IV(1, src); return a.SetSource && a.Source == 9 || a.XOR[2] == 0x10 }
	}
	dmaEv := func(iova uint64, n int, w bool) ev { return func(s *Set) bool { return s.DMA(iova, n, w) } }
	stall := func(slot, db int) ev { return func(s *Set) bool { return s.Stall(slot, db) } }
	mes := func(op uint32) ev { return func(s *Set) bool { return s.MESFrame(op) } }
	stale := func(v int) ev { return func(s *Set) bool { return s.Stale(v) } }
	for _, tc := range []struct {
		rules  string
		events []ev
		want   string // one letter per event: x injected, . not
	}{
		{"irq.drop:n=2", []ev{irq(0), irq(1), irq(0), irq(1)}, ".x.."},
		{"irq.drop:vector=1", []ev{irq(0), irq(1), irq(0), irq(1)}, ".x.x"},
		{"irq.drop:vector=1,n=2", []ev{irq(1), irq(0), irq(1), irq(1)}, "..x."},
		{"irq.delay:for=5ms,vector=3", []ev{delay(3), delay(2), delay(3)}, "x.x"},
		{"iv.drop:src=0xb5,n=1", []ev{ivDrop(0x14, 0xb4), ivDrop(0x14, 0xb5), ivDrop(0x14, 0xb5)}, ".x."},
		{"iv.drop:client=0xa", []ev{ivDrop(0x14, 0), ivDrop(0xa, 0), ivDrop(0xa, 3)}, ".xx"},
		{"iv.corrupt:n=2,new-src=9", []ev{ivSrc(1), ivSrc(2), ivSrc(3)}, ".x."},
		{"iv.corrupt:src=5,xor2=0x10,n=every", []ev{ivSrc(5), ivSrc(4), ivSrc(5)}, "x.x"},
		{"dma.fail:iova=0x1000-0x2000", []ev{dmaEv(0, 0x1000, false), dmaEv(0xfff, 2, false), dmaEv(0x1fff, 1, true), dmaEv(0x2000, 8, true)}, ".xx."},
		{"dma.fail:iova=0x1000+0x1000,dir=write,n=2", []ev{dmaEv(0x1000, 4, true), dmaEv(0x1000, 4, false), dmaEv(0x1000, 4, true), dmaEv(0x1000, 4, true)}, "..x."},
		{"dma.fail:iova=0-0x10", []ev{dmaEv(0x10, 0, false), dmaEv(0xf, 0, false)}, ".x"},
		{"queue.stall:slot=1", []ev{stall(2, 6), stall(1, 6), stall(1, 6)}, ".x."},
		{"queue.stall:doorbell=0x400,n=every", []ev{stall(1, 0x402), stall(3, 0x400), stall(1, 0x400), stall(1, Any)}, ".xx."},
		{"mes.hang", []ev{mes(5), mes(5)}, "x."},
		{"mes.hang:n=3", []ev{mes(5), mes(4), mes(5), mes(5)}, "..x."},
		{"mes.hang:op=4", []ev{mes(5), mes(4), mes(4)}, ".x."},
		{"tlb.stale:vmid=2", []ev{stale(1), stale(2), stale(2)}, ".x."},
		{"tlb.stale:n=every", []ev{stale(1), stale(2)}, "xx"},
		// Two rules of a kind: both count the event, the first acts.
		{"irq.drop:n=1; irq.drop:vector=0,n=2", []ev{irq(0), irq(0), irq(0)}, "xx."},
		// Rules of other kinds do not see the event.
		{"mes.hang; tlb.stale", []ev{irq(0), dmaEv(0, 1, true), stall(1, 1)}, "..."},
	} {
		s, log := mustSet(t, tc.rules)
		var got strings.Builder
		for _, e := range tc.events {
			if e(s) {
				got.WriteByte('x')
			} else {
				got.WriteByte('.')
			}
		}
		if got.String() != tc.want {
			t.Errorf("%s: got %s, want %s", tc.rules, got.String(), tc.want)
		}
		fired := uint64(0)
		for _, st := range s.List() {
			fired += st.Fired
		}
		if n := uint64(strings.Count(tc.want, "x")); fired != n || uint64(strings.Count(log.String(), "inject: ")) != n {
			t.Errorf("%s: %d fired, %d log lines, want %d:\n%s", tc.rules, fired, strings.Count(log.String(), "inject: "), n, log)
		}
	}
}

func TestSetLifecycle(t *testing.T) {
	var s *Set
	if s.Has(IRQDrop) || s.MESFrame(1) || s.List() != nil {
		t.Fatal("a nil Set injects")
	}
	s, _ = mustSet(t, "mes.hang:n=1; irq.drop:vector=1")
	if !s.Has(MESHang) || !s.Has(IRQDrop) || s.Has(DMAFail) {
		t.Fatalf("kinds %#x", s.kinds.Load())
	}
	if !s.MESFrame(3) {
		t.Fatal("mes.hang did not fire")
	}
	// Spent: the hooks no longer pay for it, List still shows it.
	if s.Has(MESHang) {
		t.Fatal("a spent rule still costs the hook")
	}
	st := s.List()
	if len(st) != 2 || !st[0].Spent || st[0].Fired != 1 || st[1].Spent || st[0].ID != 1 || st[1].ID != 2 {
		t.Fatalf("List %+v", st)
	}
	if err := s.Remove(2); err != nil || s.Has(IRQDrop) {
		t.Fatalf("Remove: %v, kinds %#x", err, s.kinds.Load())
	}
	if err := s.Remove(2); !errors.Is(err, ErrNoRule) {
		t.Fatalf("Remove twice: %v", err)
	}
	s.Clear()
	if len(s.List()) != 0 || s.kinds.Load() != 0 || s.Totals()[MESHang] != 1 {
		t.Fatalf("after Clear: %+v, totals %v", s.List(), s.Totals())
	}
	many := make([]Rule, MaxRules+1)
	for i := range many {
		many[i] = newRule(TLBStale)
	}
	if _, err := s.Add(many...); !errors.Is(err, ErrTooManyRules) || len(s.List()) != 0 {
		t.Fatalf("Add of %d: %v", len(many), err)
	}
}

// Hooks and control calls at once (go test -race): the Nth event fires exactly once.
func TestSetConcurrent(t *testing.T) {
	s, _ := mustSet(t, "irq.drop:n=500")
	var wg sync.WaitGroup
	var mu sync.Mutex
	drops := 0
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 250; i++ {
				if d, _ := s.Interrupt(i % 4); d {
					mu.Lock()
					drops++
					mu.Unlock()
				}
				_ = s.List()
			}
		}()
	}
	wg.Wait()
	if drops != 1 || s.List()[0].Seen != 500 {
		t.Fatalf("%d drops, %+v", drops, s.List())
	}
}
