package dma

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// directSpace maps, with Bus Master on: [0x10000, +64K) and [0x20000, +64K) read-write (two
// mappings of one memfd, adjacent in IOVA), [0x30000, +4K) read-only, [0x40000, +4K)
// write-only, and [0x50000, +4K) served through messages (fakeClient).
func directSpace(t *testing.T) (*Space, []byte) {
	t.Helper()
	f := newMemfd(t, 256<<10, 1)
	s := NewSpace(nil)
	t.Cleanup(s.UnmapAll)
	maps := []Mapping{
		{IOVA: 0x10000, Size: 64 << 10, Offset: 0, Read: true, Write: true, File: dupFile(t, f)},
		{IOVA: 0x20000, Size: 64 << 10, Offset: 64 << 10, Read: true, Write: true, File: dupFile(t, f)},
		{IOVA: 0x30000, Size: 4 << 10, Offset: 128 << 10, Read: true, File: dupFile(t, f)},
		{IOVA: 0x40000, Size: 4 << 10, Offset: 132 << 10, Write: true, File: dupFile(t, f)},
		{IOVA: 0x50000, Size: 4 << 10, Read: true, Write: true},
	}
	for _, m := range maps {
		if err := s.Map(m); err != nil {
			t.Fatal(err)
		}
	}
	s.SetTransport(&fakeClient{mem: make([]byte, 1<<20)})
	s.SetBusMaster(true)
	return s, fileBytes(t, f, 0, 256<<10)
}

func TestDirectCopies(t *testing.T) {
	type op func(s *Space, buf []byte) bool
	out := func(iova uint64) op { return func(s *Space, b []byte) bool { return s.CopyOut(b, iova) } }
	in := func(iova uint64) op { return func(s *Space, b []byte) bool { return s.CopyIn(iova, b) } }
	within := func(dst, src uint64) op {
		return func(s *Space, b []byte) bool { return s.CopyWithin(dst, src, uint64(len(b))) }
	}
	tests := []struct {
		name  string
		n     int
		op    op
		bmOff bool
		ok    bool
	}{
		{"out-one-mapping", 4096, out(0x10100), false, true},
		{"out-across-mappings", 8192, out(0x1f000), false, true},
		{"out-read-only", 4096, out(0x30000), false, true},
		{"out-write-only", 16, out(0x40000), false, false},
		{"out-unmapped", 16, out(0x60000), false, false},
		{"out-runs-off-end", 8192, out(0x30800), false, false},
		{"out-message", 16, out(0x50000), false, false},
		{"out-bus-master-off", 16, out(0x10000), true, false},
		{"out-too-large", MaxAccess + 1, out(0x10000), false, false},
		{"out-empty", 0, out(0x60000), false, true},
		{"in-one-mapping", 4096, in(0x10100), false, true},
		{"in-across-mappings", 8192, in(0x1f000), false, true},
		{"in-write-only", 16, in(0x40000), false, true},
		{"in-read-only", 16, in(0x30000), false, false},
		{"in-message", 16, in(0x50000), false, false},
		{"in-bus-master-off", 16, in(0x10000), true, false},
		{"within", 8192, within(0x10000, 0x1f000), false, true},
		{"within-ro-to-wo", 4096, within(0x40000, 0x30000), false, true},
		{"within-to-read-only", 16, within(0x30000, 0x10000), false, false},
		{"within-from-write-only", 16, within(0x10000, 0x40000), false, false},
		{"within-from-message", 16, within(0x10000, 0x50000), false, false},
		{"within-to-message", 16, within(0x50000, 0x10000), false, false},
		{"within-bus-master-off", 16, within(0x10000, 0x20000), true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := directSpace(t)
			if tc.bmOff {
				s.SetBusMaster(false)
			}
			before := s.Stats()
			buf := make([]byte, tc.n)
			for i := range buf {
				buf[i] = byte(i*13 + 5)
			}
			if got := tc.op(s, buf); got != tc.ok {
				t.Fatalf("ok = %v, want %v", got, tc.ok)
			}
			after := s.Stats()
			if after.Faults != before.Faults {
				t.Errorf("direct copy counted %d faults", after.Faults-before.Faults)
			}
			moved := uint64(0)
			if tc.ok {
				moved = uint64(tc.n)
			}
			if got := after.BytesViaMmap - before.BytesViaMmap; got != moved {
				t.Errorf("BytesViaMmap grew by %d, want %d", got, moved)
			}
		})
	}
}

func TestDirectCopyData(t *testing.T) {
	s, _ := directSpace(t)
	// Inside one mapping (the one-lookup path), at an offset into it.
	one := make([]byte, 4096)
	for i := range one {
		one[i] = byte(i*5 + 2)
	}
	if !s.CopyIn(0x20100, one) {
		t.Fatal("CopyIn inside one mapping refused")
	}
	back := make([]byte, len(one))
	if err := s.Read(0x20100, back); err != nil || !bytes.Equal(back, one) {
		t.Fatalf("Read after CopyIn inside one mapping: err %v, equal %v", err, bytes.Equal(back, one))
	}
	clear(back)
	if !s.CopyOut(back, 0x20100) || !bytes.Equal(back, one) {
		t.Fatal("CopyOut inside one mapping did not return what CopyIn wrote")
	}
	// CopyIn then CopyOut across the mapping boundary.
	want := make([]byte, 8192)
	for i := range want {
		want[i] = byte(i*3 + 1)
	}
	if !s.CopyIn(0x1f000, want) {
		t.Fatal("CopyIn refused")
	}
	got := make([]byte, len(want))
	if err := s.Read(0x1f000, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Read after CopyIn: err %v, equal %v", err, bytes.Equal(got, want))
	}
	clear(got)
	if !s.CopyOut(got, 0x1f000) || !bytes.Equal(got, want) {
		t.Fatal("CopyOut did not return what CopyIn wrote")
	}
	// CopyWithin from the straddling range to the read-write start.
	if !s.CopyWithin(0x10000, 0x1f000, 8192) {
		t.Fatal("CopyWithin refused")
	}
	if err := s.Read(0x10000, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Read after CopyWithin: err %v, equal %v", err, bytes.Equal(got, want))
	}
	// Read-only source into write-only destination lands in the file.
	if !s.CopyWithin(0x40000, 0x30000, 4096) {
		t.Fatal("CopyWithin ro→wo refused")
	}
	ro := make([]byte, 4096)
	if !s.CopyOut(ro, 0x30000) {
		t.Fatal("CopyOut ro refused")
	}
	s.mu.RLock()
	wo := s.regions[s.search(0x40000)]
	file := bytes.Clone(wo.back.mem[wo.offset : wo.offset+4096])
	s.mu.RUnlock()
	if !bytes.Equal(file, ro) {
		t.Fatal("write-only mapping does not hold the copied bytes")
	}
}

// TestDirectCopyUnmapFence: an Unmap issued while a direct copy is in flight waits for it, and
// copies started after it see the mapping gone (run under -race).
func TestDirectCopyUnmapFence(t *testing.T) {
	s, _ := directSpace(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.duringCopy = func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	buf := make([]byte, 64<<10)
	done := make(chan bool)
	go func() { done <- s.CopyOut(buf, 0x10000) }()
	<-entered
	unmapped := make(chan struct{})
	go func() {
		s.Unmap(0x10000, 64<<10)
		close(unmapped)
	}()
	select {
	case <-unmapped:
		t.Fatal("Unmap returned while a direct copy was in flight")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if !<-done {
		t.Fatal("copy in flight failed")
	}
	<-unmapped
	if s.CopyOut(buf, 0x10000) || s.CopyIn(0x10000, buf) || s.CopyWithin(0x20000, 0x10000, 16) {
		t.Fatal("direct copy succeeded after Unmap")
	}
}

// TestDirectCopyConcurrentUnmap hammers direct copies against map/unmap churn (for -race).
func TestDirectCopyConcurrentUnmap(t *testing.T) {
	f := newMemfd(t, 128<<10, 3)
	s := NewSpace(nil)
	defer s.UnmapAll()
	s.SetBusMaster(true)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if w == 0 {
					s.CopyOut(buf, 0x100000)
				} else {
					s.CopyWithin(0x100000+64<<10, 0x100000, 32<<10)
				}
			}
		}()
	}
	for range 200 {
		if err := s.Map(Mapping{IOVA: 0x100000, Size: 128 << 10, Read: true, Write: true, File: dupFile(t, f)}); err != nil {
			t.Fatal(err)
		}
		s.Unmap(0x100000, 128<<10)
	}
	close(stop)
	wg.Wait()
}
