package trace

import (
	"bufio"
	"bytes"
	"io"
	"path/filepath"
	"sync"
	"testing"
)

// TestNilRecorderIsFree: recording off is a nil *Recorder, whose every method returns at
// once without allocating (the hooks stay in the engines' hot paths).
func TestNilRecorderIsFree(t *testing.T) {
	var r *Recorder
	allocs := testing.AllocsPerRun(100, func() {
		r.Begin(HQD(1), "WRITE_DATA", U("addr", 0x1000), S("why", "x"))
		r.End(HQD(1), U("status", 0))
		r.Instant(TrackIH, "IV", U("src", 181))
		r.FlowStep(HQD(1), "fence", r.NewFlow())
		r.FlowEnd(TrackIH, "IV", r.TakeRingFlow(3))
		r.SetSlotFlow(1, 5)
		_ = r.TakeSlotFlow(1)
		r.SetRingFlow(3, 5)
		_ = r.On()
	})
	if allocs != 0 {
		t.Fatalf("a nil recorder allocated %v times per run", allocs)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRecordAndLoad records slices, instants and a flow from several goroutines and reads
// the file back.
func TestRecordAndLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.pftrace")
	r, err := Create(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for slot := range 4 {
		wg.Go(func() {
			for i := range 50 {
				r.Begin(HQD(slot), "run")
				r.Begin(HQD(slot), "INDIRECT_BUFFER", U("base", uint64(i)))
				r.Begin(HQD(slot), "WRITE_DATA")
				r.End(HQD(slot))
				r.End(HQD(slot))
				r.End(HQD(slot), S("status", "done"))
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			r.Begin(CU(3), "workgroup")
			r.End(CU(3))
		}
	})
	wg.Wait()
	f := r.NewFlow()
	r.FlowStep(HQD(2), "doorbell", f, U("wptr", 8))
	r.SetSlotFlow(2, f)
	g := r.TakeSlotFlow(2)
	r.FlowStep(HQD(2), "fence", g)
	r.SetRingFlow(4, g)
	r.FlowEnd(TrackIH, "IV", r.TakeRingFlow(4))
	if r.TakeSlotFlow(2) != 0 || r.TakeRingFlow(4) != 0 {
		t.Error("a taken flow was still there")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != ErrClosed {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
	if r.Dropped() != 0 {
		t.Errorf("%d events dropped", r.Dropped())
	}
	tl, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"device", "transport", "MES", "IH ring", "HQD 0", "HQD 16", "CU 3"} {
		if _, ok := tl.Track(name); !ok {
			t.Errorf("no track %q", name)
		}
	}
	if _, ok := tl.Track("CU 2"); ok {
		t.Error("CU 2 declared without events")
	}
	if tl.Unmatched != 0 || tl.Unfinished != 0 {
		t.Errorf("unbalanced: %d unmatched ends, %d unfinished slices", tl.Unmatched, tl.Unfinished)
	}
	count := map[string]int{}
	for _, s := range tl.Slices {
		count[s.Name]++
		want := map[string]int{"run": 0, "INDIRECT_BUFFER": 1, "WRITE_DATA": 2, "workgroup": 0}[s.Name]
		if s.Depth != want {
			t.Errorf("%s at depth %d, want %d", s.Name, s.Depth, want)
		}
		if s.End < s.Start {
			t.Errorf("%s ends before it starts", s.Name)
		}
	}
	if count["run"] != 200 || count["WRITE_DATA"] != 200 || count["workgroup"] != 20 {
		t.Errorf("slice counts %v", count)
	}
	for _, s := range tl.Slices {
		if s.Name == "run" {
			if a, ok := s.Arg("status"); !ok || a.String() != "done" {
				t.Errorf("run slice lost its end annotation: %v", s.Args)
			}
			break
		}
	}
	fl := tl.Flows[f]
	if len(fl) != 3 || fl[0].Name != "doorbell" || fl[1].Name != "fence" || fl[2].Name != "IV" || !fl[2].Last {
		t.Errorf("flow %d: %+v", f, fl)
	}
	last := tl.Instants[len(tl.Instants)-1]
	if last.Name != "trace closed" {
		t.Fatalf("last instant %q, want the trailer", last.Name)
	}
	if a, _ := last.Arg("events dropped"); a.Val != 0 {
		t.Errorf("trailer says %d dropped", a.Val)
	}
}

// blockingWriter holds every Write until release is closed.
type blockingWriter struct {
	release chan struct{}
	buf     bytes.Buffer
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	<-b.release
	return b.buf.Write(p)
}

// TestFullQueueDrops: a writer that cannot keep up makes events drop (counted), never makes
// the recording goroutine wait or the queue grow.
func TestFullQueueDrops(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	r := New(w, Options{Queue: 8})
	const n = 20000 // more than the 64 KiB buffer and the queue can hold
	for range n {
		r.Instant(TrackMES, "frame", U("op", 1))
	}
	if r.Dropped() == 0 {
		t.Fatal("nothing dropped with the writer stalled")
	}
	close(w.release)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	written, _ := r.Written()
	if written+r.Dropped() != n+1 { // +1: the trailer
		t.Errorf("written %d + dropped %d != %d events", written, r.Dropped(), n+1)
	}
	tl, err := Load(&w.buf)
	if err != nil {
		t.Fatal(err)
	}
	last := tl.Instants[len(tl.Instants)-1]
	if a, _ := last.Arg("events dropped"); a.Val != r.Dropped() {
		t.Errorf("trailer says %d dropped, recorder %d", a.Val, r.Dropped())
	}
}

// TestSizeCap: the file stops at MaxBytes (plus the trailer).
func TestSizeCap(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf, Options{MaxBytes: 4 << 10})
	for i := range 5000 {
		r.Instant(HQD(1), "doorbell", U("wptr", uint64(i)))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > 5<<10 {
		t.Errorf("file %d bytes with a 4 KiB cap", buf.Len())
	}
	if r.Dropped() == 0 {
		t.Error("nothing dropped at the cap")
	}
	if _, err := Load(&buf); err != nil {
		t.Fatal(err)
	}
}

func TestEventsAfterCloseIgnored(t *testing.T) {
	r := New(io.Discard, Options{})
	r.Close()
	r.Instant(TrackDevice, "late") // must neither panic nor block
	r.Begin(HQD(0), "late")
}

func TestTrackNames(t *testing.T) {
	for _, tc := range []struct {
		t    Track
		want string
	}{
		{TrackDevice, "device"}, {TrackTransport, "transport"}, {TrackMES, "MES"}, {TrackIH, "IH ring"},
		{HQD(0), "HQD 0"}, {HQD(16), "HQD 16"}, {HQD(17), "invalid"}, {HQD(-1), "invalid"},
		{CU(0), "CU 0"}, {CU(MaxCUs - 1), "CU 255"}, {CU(MaxCUs), "invalid"},
	} {
		if got := tc.t.Name(); got != tc.want {
			t.Errorf("track %d: %q, want %q", tc.t, got, tc.want)
		}
	}
	r := New(io.Discard, Options{})
	r.Instant(HQD(40), "out of range") // dropped without a panic
	r.Close()
}

func BenchmarkOff(b *testing.B) {
	var r *Recorder
	b.ReportAllocs()
	for i := range b.N {
		r.Begin(HQD(1), "WRITE_DATA", U("addr", uint64(i)))
		r.End(HQD(1))
	}
}

func BenchmarkOn(b *testing.B) {
	r := New(io.Discard, Options{MaxBytes: 1 << 62})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := uint64(0)
		for pb.Next() {
			r.Begin(HQD(1), "WRITE_DATA", U("addr", i))
			r.End(HQD(1))
			i++
		}
	})
	b.StopTimer()
	r.Close()
	b.ReportMetric(float64(r.Dropped())/float64(2*b.N), "dropped/event")
}

// BenchmarkWriter is the writer's own cost per event: an event turned into a packet and
// written (to io.Discard), on the writer goroutine.
func BenchmarkWriter(b *testing.B) {
	r := &Recorder{}
	w := newWriter(r, bufio.NewWriter(io.Discard), 1<<62)
	e := event{track: HQD(1), kind: kindInstant, name: "WRITE_DATA", nargs: 2,
		args: [maxArgs]Arg{U("addr", 0x1000), U("size", 4)}}
	b.ReportAllocs()
	for i := range b.N {
		e.ts = int64(i)
		w.event(&e)
	}
}
