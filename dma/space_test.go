package dma

import (
	"bytes"
	"errors"
	"math"
	"os"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"
)

const page = 4096

// mapSpec describes one Map call in a table; file is an index into the test's memfds, or -1
// for a mapping without fd.
type mapSpec struct {
	iova, size, off uint64
	r, w            bool
	file            int
}

func rw(iova, size, off uint64) mapSpec { return mapSpec{iova, size, off, true, true, 0} }

// src names a run of expected bytes: len bytes of memfd file starting at off.
type src struct {
	file int
	off  int
	n    int
}

func expect(seeds []byte, srcs ...src) []byte {
	var out []byte
	for _, s := range srcs {
		for i := 0; i < s.n; i++ {
			out = append(out, pattern(seeds[s.file], s.off+i))
		}
	}
	return out
}

// setup builds a Space with Bus Master on and two 64 KiB memfds, applying maps.
func setup(t *testing.T, maps []mapSpec) (*Space, []*os.File, []byte) {
	t.Helper()
	seeds := []byte{0x11, 0xa5}
	files := []*os.File{newMemfd(t, 16*page, seeds[0]), newMemfd(t, 16*page, seeds[1])}
	s := NewSpace(nil)
	t.Cleanup(s.UnmapAll)
	s.SetBusMaster(true)
	for _, m := range maps {
		mm := Mapping{IOVA: m.iova, Size: m.size, Offset: m.off, Read: m.r, Write: m.w}
		if m.file >= 0 {
			mm.File = dupFile(t, files[m.file])
		}
		if err := s.Map(mm); err != nil {
			t.Fatalf("Map(%+v): %v", m, err)
		}
	}
	return s, files, seeds
}

func TestReadWrite(t *testing.T) {
	const top = math.MaxUint64 - page + 1 // last page of the 64-bit space
	tests := []struct {
		name    string
		maps    []mapSpec
		unmap   [][2]uint64
		write   bool
		iova    uint64
		n       int
		want    []src  // on success: the bytes read, or where the written bytes land
		wantErr error  // sentinel, nil for success
		wantAt  uint64 // FaultError.At when wantErr is set
	}{
		{name: "read whole map", maps: []mapSpec{rw(0x10000, 2*page, 0)},
			iova: 0x10000, n: 2 * page, want: []src{{0, 0, 2 * page}}},
		{name: "read inside map with file offset", maps: []mapSpec{rw(0x10000, 2*page, 3*page)},
			iova: 0x10010, n: 100, want: []src{{0, 3*page + 0x10, 100}}},
		{name: "write inside map with file offset", maps: []mapSpec{rw(0x10000, 2*page, 3*page)},
			write: true, iova: 0x10ff0, n: 64, want: []src{{0, 3*page + 0xff0, 64}}},
		{name: "read across adjacent maps of different files",
			maps: []mapSpec{rw(0x20000, page, 5*page), {0x21000, page, 2 * page, true, true, 1}},
			iova: 0x20f00, n: 0x200, want: []src{{0, 5*page + 0xf00, 0x100}, {1, 2 * page, 0x100}}},
		{name: "write across three 4K maps",
			maps:  []mapSpec{rw(0x30000, page, 7*page), rw(0x31000, page, 1*page), rw(0x32000, page, 4*page)},
			write: true, iova: 0x30800, n: 2 * page, want: []src{{0, 7*page + 0x800, 0x800}, {0, page, page}, {0, 4 * page, 0x800}}},
		{name: "gap between maps faults at the gap",
			maps: []mapSpec{rw(0x20000, page, 0), rw(0x22000, page, page)},
			iova: 0x20f00, n: 0x1200, wantErr: ErrUnmapped, wantAt: 0x21000},
		{name: "nothing mapped", iova: 0x5000, n: 8, wantErr: ErrUnmapped, wantAt: 0x5000},
		{name: "access starts before the map", maps: []mapSpec{rw(0x10000, page, 0)},
			iova: 0xfff0, n: 0x20, wantErr: ErrUnmapped, wantAt: 0xfff0},
		{name: "access ends after the map", maps: []mapSpec{rw(0x10000, page, 0)},
			iova: 0x10ff0, n: 0x20, wantErr: ErrUnmapped, wantAt: 0x11000},
		{name: "write to read-only map", maps: []mapSpec{{0x10000, page, 0, true, false, 0}},
			write: true, iova: 0x10000, n: 4, wantErr: ErrPermission, wantAt: 0x10000},
		{name: "write reaching a read-only map",
			maps:  []mapSpec{rw(0x10000, page, 0), {0x11000, page, page, true, false, 0}},
			write: true, iova: 0x10ffc, n: 8, wantErr: ErrPermission, wantAt: 0x11000},
		{name: "read of write-only map", maps: []mapSpec{{0x10000, page, 0, false, true, 0}},
			iova: 0x10000, n: 4, wantErr: ErrPermission, wantAt: 0x10000},
		{name: "read-only map reads", maps: []mapSpec{{0x10000, page, 0, true, false, 0}},
			iova: 0x10000, n: 4, want: []src{{0, 0, 4}}},
		{name: "zero length", iova: 0x1234, n: 0},
		{name: "access wraps past 2^64", maps: []mapSpec{rw(top, page, 0)},
			iova: math.MaxUint64 - 3, n: 8, wantErr: ErrUnmapped, wantAt: math.MaxUint64 - 3},
		{name: "map ending exactly at 2^64", maps: []mapSpec{rw(top, page, 2*page)},
			iova: math.MaxUint64 - 7, n: 8, want: []src{{0, 3*page - 8, 8}}},
		{name: "unmapped after unmap", maps: []mapSpec{rw(0x10000, page, 0)}, unmap: [][2]uint64{{0x10000, page}},
			iova: 0x10000, n: 1, wantErr: ErrUnmapped, wantAt: 0x10000},
		{name: "split keeps left part", maps: []mapSpec{rw(0x10000, 4*page, 0)}, unmap: [][2]uint64{{0x11000, page}},
			iova: 0x10000, n: page, want: []src{{0, 0, page}}},
		{name: "split keeps right part with its offset", maps: []mapSpec{rw(0x10000, 4*page, page)},
			unmap: [][2]uint64{{0x11000, page}},
			iova:  0x12000, n: 2 * page, want: []src{{0, 3 * page, 2 * page}}},
		{name: "split hole faults", maps: []mapSpec{rw(0x10000, 4*page, 0)}, unmap: [][2]uint64{{0x11000, page}},
			iova: 0x10ff0, n: 0x20, wantErr: ErrUnmapped, wantAt: 0x11000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, files, seeds := setup(t, tc.maps)
			for _, u := range tc.unmap {
				s.Unmap(u[0], u[1])
			}
			p := make([]byte, tc.n)
			for i := range p {
				p[i] = byte(0xf0 ^ i)
			}
			orig := append([]byte(nil), p...)
			before := [][]byte{fileBytes(t, files[0], 0, 16*page), fileBytes(t, files[1], 0, 16*page)}
			var err error
			if tc.write {
				err = s.Write(tc.iova, p)
			} else {
				err = s.Read(tc.iova, p)
			}
			if tc.wantErr != nil {
				var fe *FaultError
				if !errors.As(err, &fe) || !errors.Is(err, tc.wantErr) {
					t.Fatalf("unexpected error: got %v, want a *FaultError wrapping %v", err, tc.wantErr)
				}
				if fe.At != tc.wantAt || fe.IOVA != tc.iova || fe.Len != tc.n || fe.Write != tc.write {
					t.Errorf("unexpected fault (-want +got):\n-{IOVA:%#x Len:%d Write:%v At:%#x}\n+%+v",
						tc.iova, tc.n, tc.write, tc.wantAt, fe)
				}
				if !bytes.Equal(p, orig) {
					t.Errorf("failed read changed the buffer")
				}
				for i, f := range files {
					if !bytes.Equal(fileBytes(t, f, 0, 16*page), before[i]) {
						t.Errorf("failed access changed memfd %d", i)
					}
				}
				if got := s.Stats().Faults; got != 1 {
					t.Errorf("unexpected Stats().Faults: got %d, want 1", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !tc.write {
				if want := expect(seeds, tc.want...); !bytes.Equal(p, want) {
					t.Errorf("unexpected data (-want +got):\n-%x\n+%x", want, p)
				}
				return
			}
			// The written bytes landed where expected, and nowhere else changed.
			pos := 0
			after := [][]byte{fileBytes(t, files[0], 0, 16*page), fileBytes(t, files[1], 0, 16*page)}
			for _, w := range tc.want {
				copy(before[w.file][w.off:w.off+w.n], p[pos:pos+w.n])
				pos += w.n
			}
			for i := range files {
				if !bytes.Equal(after[i], before[i]) {
					t.Errorf("memfd %d: unexpected contents after write", i)
				}
			}
		})
	}
}

func TestAccessTooLarge(t *testing.T) {
	s, _, _ := setup(t, []mapSpec{rw(0, 16*page, 0)})
	p := make([]byte, MaxAccess+1)
	for _, err := range []error{s.Read(0, p), s.Write(0, p)} {
		var fe *FaultError
		if !errors.As(err, &fe) || !errors.Is(err, ErrTooLarge) || fe.Len != MaxAccess+1 {
			t.Errorf("unexpected error: got %v, want a *FaultError wrapping ErrTooLarge", err)
		}
	}
}

func TestMapErrors(t *testing.T) {
	f := newMemfd(t, 4*page, 0)
	tests := []struct {
		name  string
		m     Mapping
		errno syscall.Errno
	}{
		{"zero size", Mapping{IOVA: 0x1000, Size: 0, Read: true}, syscall.EINVAL},
		{"range past 2^64", Mapping{IOVA: math.MaxUint64 - page + 2, Size: page, Read: true}, syscall.EINVAL},
		{"size past the file", Mapping{IOVA: 0, Size: 5 * page, Read: true}, syscall.EINVAL},
		{"offset+size past the file", Mapping{IOVA: 0, Size: 2 * page, Offset: 3 * page, Read: true}, syscall.EINVAL},
		{"offset past the file", Mapping{IOVA: 0, Size: 1, Offset: math.MaxUint64, Read: true}, syscall.EINVAL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSpace(nil)
			tc.m.File = dupFile(t, f)
			err := s.Map(tc.m)
			if !errors.Is(err, tc.errno) {
				t.Fatalf("unexpected error: got %v, want %v", err, tc.errno)
			}
			if !isClosed(tc.m.File) {
				t.Errorf("Map did not close the file of a refused mapping")
			}
			if st := s.Stats(); st.Mappings != 0 || st.BackingFiles != 0 {
				t.Errorf("unexpected Stats after refused map: %+v", st)
			}
		})
	}
}

func TestUnmap(t *testing.T) {
	base := []mapSpec{rw(0x10000, 4*page, 0), rw(0x20000, page, 8*page), rw(0x21000, page, 9*page)}
	sp := func(iova, last, off uint64) span { return span{iova, last, off, true, true, true} }
	all := []span{sp(0x10000, 0x13fff, 0), sp(0x20000, 0x20fff, 8*page), sp(0x21000, 0x21fff, 9*page)}
	tests := []struct {
		name        string
		iova, size  uint64
		wantRemoved int
		want        []span
	}{
		{"exact", 0x20000, page, 1, []span{all[0], all[2]}},
		{"nothing there", 0x50000, page, 0, all},
		{"size zero", 0x10000, 0, 0, all},
		{"between maps", 0x14000, 0xc000, 0, all},
		{"split in the middle", 0x11000, 2 * page, 1,
			[]span{sp(0x10000, 0x10fff, 0), sp(0x13000, 0x13fff, 3*page), all[1], all[2]}},
		{"trim left edge", 0xf000, 2 * page, 1, []span{sp(0x11000, 0x13fff, page), all[1], all[2]}},
		{"trim right edge", 0x13800, page, 1, []span{sp(0x10000, 0x137ff, 0), all[1], all[2]}},
		{"spanning several", 0x12000, 0xf800, 3, []span{sp(0x10000, 0x11fff, 0), sp(0x21800, 0x21fff, 9*page+0x800)}},
		{"to 2^64 (QEMU vIOMMU-off storm)", 0xfef00000, 0xffffffff01100000, 0, all},
		{"size runs past 2^64", 0x20800, math.MaxUint64, 2, []span{all[0], sp(0x20000, 0x207ff, 8*page)}},
		{"whole space", 0, math.MaxUint64, 3, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := setup(t, base)
			if got := s.Unmap(tc.iova, tc.size); got != tc.wantRemoved {
				t.Errorf("unexpected removed count: got %d, want %d", got, tc.wantRemoved)
			}
			if got := s.spans(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("unexpected mappings (-want +got):\n-%+v\n+%+v", tc.want, got)
			}
		})
	}
}

func TestDedup(t *testing.T) {
	const n = 2000
	f := newMemfd(t, n*page, 0x3c)
	s := NewSpace(nil)
	s.SetBusMaster(true)
	baseline := fdCount(t)
	// IOVAs in reverse order of file offsets, as a vIOMMU scatters them.
	for i := 0; i < n; i++ {
		m := Mapping{IOVA: 0x100000 + uint64(i)*page, Size: page, Offset: uint64(n-1-i) * page, Read: true, Write: true,
			File: dupFile(t, f)}
		if err := s.Map(m); err != nil {
			t.Fatalf("Map %d: %v", i, err)
		}
	}
	if got := fdCount(t); got != baseline+1 {
		t.Errorf("unexpected fd count with %d maps: got %d, want %d (one kept per backing file)", n, got, baseline+1)
	}
	st := s.Stats()
	if st.Mappings != n || st.BackingFiles != 1 || st.BackingBytes != n*page || st.MessageMappings != 0 {
		t.Errorf("unexpected Stats: %+v", st)
	}
	// One access across all 2000 mappings.
	p := make([]byte, n*page)
	if err := s.Read(0x100000, p); err != nil {
		t.Fatalf("Read: %v", err)
	}
	for i := 0; i < n; i++ {
		off := (n - 1 - i) * page
		if p[i*page] != pattern(0x3c, off) || p[i*page+page-1] != pattern(0x3c, off+page-1) {
			t.Fatalf("page %d: wrong data", i)
		}
	}
	// Unmapping half keeps the backing; the last mapping takes it away.
	s.Unmap(0x100000, n/2*page)
	if st := s.Stats(); st.Mappings != n/2 || st.BackingFiles != 1 {
		t.Errorf("unexpected Stats after unmapping half: %+v", st)
	}
	s.Unmap(0x100000+n/2*page, n/2*page)
	if st := s.Stats(); st.Mappings != 0 || st.BackingFiles != 0 || st.BackingBytes != 0 {
		t.Errorf("unexpected Stats after unmapping all: %+v", st)
	}
	if got := fdCount(t); got != baseline {
		t.Errorf("unexpected fd count after unmap: got %d, want %d", got, baseline)
	}
}

func TestUnmapAllClosesBackings(t *testing.T) {
	f, g := newMemfd(t, 4*page, 1), newMemfd(t, 4*page, 2)
	s := NewSpace(nil)
	baseline := fdCount(t)
	for i, file := range []*os.File{f, g, f, g} {
		if err := s.Map(Mapping{IOVA: uint64(i) * page, Size: page, Read: true, File: dupFile(t, file)}); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.BackingFiles != 2 || fdCount(t) != baseline+2 {
		t.Errorf("unexpected state before UnmapAll: %+v, %d fds over baseline", st, fdCount(t)-baseline)
	}
	s.UnmapAll()
	if st := s.Stats(); st.Mappings != 0 || st.BackingFiles != 0 || fdCount(t) != baseline {
		t.Errorf("unexpected state after UnmapAll: %+v, %d fds over baseline", st, fdCount(t)-baseline)
	}
}

func TestOverlappingMap(t *testing.T) {
	s, files, seeds := setup(t, []mapSpec{rw(0x10000, 4*page, 0)})
	// A message-served map punched into the middle of a file-backed one.
	if err := s.Map(Mapping{IOVA: 0x11000, Size: page, Read: true}); err != nil {
		t.Fatal(err)
	}
	want := []span{
		{0x10000, 0x10fff, 0, true, true, true},
		{0x11000, 0x11fff, 0, true, false, false},
		{0x12000, 0x13fff, 2 * page, true, true, true},
	}
	if got := s.spans(); !reflect.DeepEqual(got, want) {
		t.Errorf("unexpected mappings (-want +got):\n-%+v\n+%+v", want, got)
	}
	// Replacing two mappings at once with a map of the other file.
	if err := s.Map(Mapping{IOVA: 0x10800, Size: 0x1000, Offset: 0x800, Read: true, Write: true, File: dupFile(t, files[1])}); err != nil {
		t.Fatal(err)
	}
	want = []span{
		{0x10000, 0x107ff, 0, true, true, true},
		{0x10800, 0x117ff, 0x800, true, true, true},
		{0x11800, 0x11fff, 0x800, true, false, false},
		{0x12000, 0x13fff, 2 * page, true, true, true},
	}
	if got := s.spans(); !reflect.DeepEqual(got, want) {
		t.Errorf("unexpected mappings (-want +got):\n-%+v\n+%+v", want, got)
	}
	p := make([]byte, 0x1000)
	if err := s.Read(0x10800, p); err != nil {
		t.Fatal(err)
	}
	if want := expect(seeds, src{1, 0x800, 0x1000}); !bytes.Equal(p, want) {
		t.Errorf("replacing map does not read the new file")
	}
	if st := s.Stats(); st.BackingFiles != 2 {
		t.Errorf("unexpected BackingFiles: got %d, want 2", st.BackingFiles)
	}

	// An identical re-map is a no-op that closes its fd.
	dup := dupFile(t, files[0])
	if err := s.Map(Mapping{IOVA: 0x12000, Size: 2 * page, Offset: 2 * page, Read: true, Write: true, File: dup}); err != nil {
		t.Fatal(err)
	}
	if got := s.spans(); !reflect.DeepEqual(got, want) {
		t.Errorf("identical re-map changed the mappings:\n-%+v\n+%+v", want, got)
	}
	if !isClosed(dup) {
		t.Errorf("identical re-map kept its fd open")
	}

	// Replacing every mapping of files[1] releases its backing.
	if err := s.Map(Mapping{IOVA: 0x10000, Size: 4 * page, Read: true, Write: true, File: dupFile(t, files[0])}); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Mappings != 1 || st.BackingFiles != 1 {
		t.Errorf("unexpected Stats after full replacement: %+v", st)
	}
}

func TestReadOnlyFd(t *testing.T) {
	f := newMemfd(t, 4*page, 0x77)
	s := NewSpace(nil)
	defer s.UnmapAll()
	s.SetBusMaster(true)
	client := &fakeClient{base: 0x12000, mem: make([]byte, page)}
	s.SetTransport(client)

	// A read-only map on an O_RDONLY fd is served through a read-only mmap.
	if err := s.Map(Mapping{IOVA: 0x10000, Size: 2 * page, Read: true, File: reopen(t, f, os.O_RDONLY)}); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 16)
	if err := s.Read(0x10000, p); err != nil {
		t.Fatal(err)
	}
	if want := expect([]byte{0x77}, src{0, 0, 16}); !bytes.Equal(p, want) {
		t.Errorf("unexpected data through read-only mmap")
	}
	// A writable map on an O_RDONLY fd cannot use that mmap: it goes through messages.
	if err := s.Map(Mapping{IOVA: 0x12000, Size: page, Offset: 2 * page, Read: true, Write: true, File: reopen(t, f, os.O_RDONLY)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(0x12000, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if got, want := client.recorded(), []call{{true, 0x12000, 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("unexpected client calls (-want +got):\n-%+v\n+%+v", want, got)
	}
	if st := s.Stats(); st.BackingFiles != 1 || st.MessageMappings != 1 {
		t.Errorf("unexpected Stats: %+v", st)
	}
	// A read-write fd of the same file upgrades the shared mmap; the earlier mappings keep working.
	if err := s.Map(Mapping{IOVA: 0x13000, Size: page, Offset: 3 * page, Read: true, Write: true, File: reopen(t, f, os.O_RDWR)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(0x13000, []byte{9, 8, 7}); err != nil {
		t.Fatal(err)
	}
	if got := fileBytes(t, f, 3*page, 3); !bytes.Equal(got, []byte{9, 8, 7}) {
		t.Errorf("write through upgraded mmap: got %x", got)
	}
	if err := s.Read(0x10000, p); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.BackingFiles != 1 {
		t.Errorf("unexpected BackingFiles after upgrade: %d", st.BackingFiles)
	}
}

func TestNonMmappableFdFallsBack(t *testing.T) {
	s := NewSpace(nil)
	s.SetBusMaster(true)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := s.Map(Mapping{IOVA: 0x1000, Size: page, Read: true, File: r}); err != nil {
		t.Fatalf("Map with a pipe fd must not fail: %v", err)
	}
	if !isClosed(r) {
		t.Errorf("unusable fd was not closed")
	}
	if st := s.Stats(); st.MessageMappings != 1 || st.BackingFiles != 0 {
		t.Errorf("unexpected Stats: %+v", st)
	}
	if err := s.Read(0x1000, make([]byte, 4)); !errors.Is(err, ErrNoTransport) {
		t.Errorf("unexpected error: got %v, want ErrNoTransport", err)
	}
}

func TestBusMaster(t *testing.T) {
	s, _, _ := setup(t, []mapSpec{rw(0, page, 0)})
	p := make([]byte, 4)
	steps := []struct {
		on      bool
		wantErr error
	}{{false, ErrBusMasterOff}, {true, nil}, {false, ErrBusMasterOff}}
	for _, st := range steps {
		s.SetBusMaster(st.on)
		for _, write := range []bool{false, true} {
			var err error
			if write {
				err = s.Write(0, p)
			} else {
				err = s.Read(0, p)
			}
			if !errors.Is(err, st.wantErr) || (err == nil) != (st.wantErr == nil) {
				t.Errorf("bus master %v, write %v: unexpected error: got %v, want %v", st.on, write, err, st.wantErr)
			}
		}
	}
	if err := NewSpace(nil).Read(0, nil); !errors.Is(err, ErrBusMasterOff) {
		t.Errorf("a new Space must start with Bus Master off: got %v", err)
	}
}

func TestMessageDMA(t *testing.T) {
	tests := []struct {
		name      string
		maps      []mapSpec
		write     bool
		iova      uint64
		n         int
		noClient  bool
		clientErr error
		wantCalls []call
		wantErr   error
	}{
		{name: "read", maps: []mapSpec{{0x40000, 4 * page, 0, true, true, -1}},
			iova: 0x40010, n: 100, wantCalls: []call{{false, 0x40010, 100}}},
		{name: "write", maps: []mapSpec{{0x40000, 4 * page, 0, true, true, -1}},
			write: true, iova: 0x41000, n: 2 * page, wantCalls: []call{{true, 0x41000, 2 * page}}},
		{name: "adjacent message maps coalesce into one call",
			maps: []mapSpec{{0x40000, page, 0, true, true, -1}, {0x41000, page, 0, true, true, -1}},
			iova: 0x40800, n: page, wantCalls: []call{{false, 0x40800, page}}},
		{name: "mixed route: only the fd-less part goes to the client",
			maps: []mapSpec{rw(0x3f000, page, 0), {0x40000, page, 0, true, true, -1}, rw(0x41000, page, page)},
			iova: 0x3f800, n: 2 * page, wantCalls: []call{{false, 0x40000, page}}},
		{name: "permission is checked before asking the client",
			maps:  []mapSpec{{0x40000, page, 0, true, false, -1}},
			write: true, iova: 0x40000, n: 4, wantErr: ErrPermission},
		{name: "no client", maps: []mapSpec{{0x40000, page, 0, true, true, -1}}, noClient: true,
			iova: 0x40000, n: 4, wantErr: ErrNoTransport},
		{name: "client error is wrapped", maps: []mapSpec{{0x40000, page, 0, true, true, -1}}, clientErr: syscall.ENODEV,
			iova: 0x40000, n: 4, wantCalls: []call{{false, 0x40000, 4}}, wantErr: syscall.ENODEV},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := setup(t, tc.maps)
			client := &fakeClient{base: 0x40000, mem: make([]byte, 4*page), err: tc.clientErr}
			for i := range client.mem {
				client.mem[i] = byte(i * 3)
			}
			if !tc.noClient {
				s.SetTransport(client)
			}
			p := make([]byte, tc.n)
			for i := range p {
				p[i] = byte(i ^ 0x5a)
			}
			var err error
			if tc.write {
				err = s.Write(tc.iova, p)
			} else {
				err = s.Read(tc.iova, p)
			}
			if tc.wantErr != nil {
				var fe *FaultError
				if !errors.As(err, &fe) || !errors.Is(err, tc.wantErr) {
					t.Errorf("unexpected error: got %v, want a *FaultError wrapping %v", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got := client.recorded(); !reflect.DeepEqual(got, tc.wantCalls) {
				t.Errorf("unexpected client calls (-want +got):\n-%+v\n+%+v", tc.wantCalls, got)
			}
			if tc.wantErr != nil {
				return
			}
			for _, c := range tc.wantCalls {
				off := int(c.iova - tc.iova)
				if got, want := p[off:off+c.n], client.mem[c.iova-0x40000:][:c.n]; !bytes.Equal(got, want) {
					t.Errorf("data of call %+v differs between buffer and client memory", c)
				}
			}
			var n uint64
			for _, c := range tc.wantCalls {
				n += uint64(c.n)
			}
			if got := s.Stats().BytesViaMessages; got != n {
				t.Errorf("unexpected BytesViaMessages: got %d, want %d", got, n)
			}
		})
	}
}

// TestMessageDMAHoldsNoLock models the client serving our DMA_READ only after we have answered
// its DMA_UNMAP: if Read held the lock across the message, this would deadlock.
func TestMessageDMAHoldsNoLock(t *testing.T) {
	s, _, _ := setup(t, []mapSpec{{0x40000, page, 0, true, true, -1}, rw(0x50000, page, 0)})
	client := &fakeClient{base: 0x40000, mem: make([]byte, page)}
	client.hook = func() { s.Unmap(0x50000, page) }
	s.SetTransport(client)
	done := make(chan error, 1)
	go func() { done <- s.Read(0x40000, make([]byte, 8)) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read deadlocked against an Unmap issued while the client served it")
	}
}

func TestUnmapWaitsForAccess(t *testing.T) {
	s, _, _ := setup(t, []mapSpec{rw(0x10000, page, 0)})
	inCopy, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.duringCopy = func() {
		once.Do(func() {
			close(inCopy)
			<-release
		})
	}
	readDone := make(chan error, 1)
	go func() { readDone <- s.Read(0x10000, make([]byte, 64)) }()
	<-inCopy
	unmapped := make(chan int, 1)
	go func() { unmapped <- s.Unmap(0x10000, page) }()
	select {
	case <-unmapped:
		t.Fatal("Unmap returned while an access to the range was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-readDone; err != nil {
		t.Fatalf("in-flight Read: %v", err)
	}
	if n := <-unmapped; n != 1 {
		t.Errorf("unexpected removed count: %d", n)
	}
	if err := s.Read(0x10000, make([]byte, 1)); !errors.Is(err, ErrUnmapped) {
		t.Errorf("Read after Unmap: got %v, want ErrUnmapped", err)
	}
}

func TestConcurrentAccessAndMapChurn(t *testing.T) {
	f := newMemfd(t, 64*page, 0)
	s := NewSpace(nil)
	defer s.UnmapAll()
	s.SetBusMaster(true)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, 3*page)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				iova := uint64(i%60) * page
				if i%2 == 0 {
					_ = s.Read(iova, p)
				} else {
					_ = s.Write(iova, p)
				}
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		k := uint64(i % 64)
		if err := s.Map(Mapping{IOVA: k * page, Size: page, Offset: (63 - k) * page, Read: true, Write: true, File: dupFile(t, f)}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			s.Unmap(uint64(i%50)*page, 5*page)
		}
		_ = s.Stats()
	}
	close(stop)
	wg.Wait()
}

func TestTooManyMappings(t *testing.T) {
	s := NewSpace(nil)
	// Fd-less maps are cheap; the first is 3 bytes so it can be split later.
	if err := s.Map(Mapping{IOVA: 0, Size: 3, Read: true}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < MaxMappings; i++ {
		if err := s.Map(Mapping{IOVA: 2 + 2*uint64(i), Size: 1, Read: true}); err != nil {
			t.Fatalf("Map %d: %v", i, err)
		}
	}
	f := newMemfd(t, page, 0)
	dup := dupFile(t, f)
	err := s.Map(Mapping{IOVA: 1 << 40, Size: page, Read: true, File: dup})
	if !errors.Is(err, ErrTooManyMappings) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("unexpected error past MaxMappings: got %v, want ENOSPC", err)
	}
	if !isClosed(dup) {
		t.Errorf("refused Map kept its fd")
	}
	// Replacing a mapping in place does not grow the table and is accepted.
	if err := s.Map(Mapping{IOVA: 4, Size: 1, Read: true, Write: true}); err != nil {
		t.Errorf("in-place replacement at the limit: %v", err)
	}
	// An unmap that would split one mapping in two at the limit still succeeds.
	if got := s.Unmap(1, 1); got != 1 {
		t.Errorf("unexpected removed count: %d", got)
	}
	if got := s.Stats().Mappings; got > MaxMappings {
		t.Errorf("table grew past MaxMappings: %d", got)
	}
	s.SetBusMaster(true)
	s.SetTransport(&fakeClient{mem: make([]byte, 16)})
	if err := s.Read(0, make([]byte, 1)); err != nil {
		t.Errorf("left piece of the split: %v", err)
	}
	if err := s.Read(2, make([]byte, 1)); !errors.Is(err, ErrUnmapped) {
		t.Errorf("right piece dropped at the limit: got %v, want ErrUnmapped", err)
	}
}

func TestBackingShrunk(t *testing.T) {
	s, files, _ := setup(t, []mapSpec{rw(0x10000, 4*page, 0)})
	if err := files[0].Truncate(2 * page); err != nil {
		t.Fatal(err)
	}
	err := s.Read(0x12000, make([]byte, 8))
	var fe *FaultError
	if !errors.As(err, &fe) || !errors.Is(err, ErrUnmapped) || fe.At != 0x12000 {
		t.Fatalf("unexpected error reading past a truncated backing file: %v", err)
	}
	if err := s.Write(0x10000, []byte{1}); err != nil {
		t.Errorf("access to the part still backed: %v", err)
	}
}

func TestFaultErrorText(t *testing.T) {
	e := &FaultError{IOVA: 0x1000, Len: 8, Write: true, At: 0x1004, Reason: "no mapping", Err: ErrUnmapped}
	want := "dma: write of 8 bytes at 0x1000 failed at 0x1004: no mapping: dma: address not mapped"
	if got := e.Error(); got != want {
		t.Errorf("unexpected text (-want +got):\n-%s\n+%s", want, got)
	}
}

func BenchmarkReadVIOMMU(b *testing.B) {
	const n = 4096
	f := newMemfd(b, n*page, 0)
	s := NewSpace(nil)
	defer s.UnmapAll()
	s.SetBusMaster(true)
	for i := 0; i < n; i++ {
		if err := s.Map(Mapping{IOVA: uint64(i) * page, Size: page, Offset: uint64(i) * page, Read: true, Write: true, File: dupFile(b, f)}); err != nil {
			b.Fatal(err)
		}
	}
	p := make([]byte, 64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Read(uint64(i%n)*page+128, p); err != nil {
			b.Fatal(err)
		}
	}
}
