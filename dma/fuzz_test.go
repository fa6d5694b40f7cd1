package dma

import (
	"bytes"
	"errors"
	"math"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The fuzz world: IOVAs [0, fuzzSpace), two memfds of fuzzFile bytes, and a fake client
// serving fd-less mappings with memory indexed directly by IOVA.
const (
	fuzzSpace = 24 << 10
	fuzzFile  = 8 << 10
)

// modelByte is the reference model's view of one IOVA.
type modelByte struct {
	kind        uint8 // 0 unmapped, 1 memfd 0, 2 memfd 1, 3 message
	read, write bool
	off         uint32 // offset in the memfd (< fuzzFile); 8 bytes a byte keeps begin's clear cheap
}

// FuzzSpace interprets its input as a sequence of map/unmap/read/write/bus-master operations
// and checks every result against a byte-per-IOVA reference model: no panic, faults exactly
// where the model has a hole or a missing permission, reads return the modelled bytes, and
// writes change exactly the modelled bytes of the memfds and of the client's memory.
func FuzzSpace(f *testing.F) {
	f.Add([]byte{0, 10, 5, 0, 0, 3, 3, 100, 3, 50})
	f.Add([]byte{0, 0, 31, 0, 0, 3, 1, 0, 3, 200, 4, 10, 7, 30, 3, 0, 0, 100})
	f.Add([]byte{0, 20, 10, 1, 40, 3, 0, 25, 10, 2, 8, 1, 4, 60, 0, 250, 2, 24, 255, 3, 60, 0, 250})
	f.Add([]byte{1, 5, 31, 2, 0, 1, 4, 4, 5, 200, 5, 3, 4, 5, 200, 6, 4, 4, 5, 9})
	f.Add([]byte{0, 0, 31, 0, 0, 3, 0, 26, 31, 1, 0, 2, 0, 52, 31, 2, 0, 3, 4, 0, 0, 255, 3, 20, 7, 250})
	w := newSpaceWorld(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		baseline := w.begin(t)
		s, client, model, fileMem, msgMem := w.space, w.client, w.model, w.fileMem, w.msgMem
		busMaster := true

		arg := func(i int) byte {
			if i < len(data) {
				return data[i]
			}
			return 0
		}
		for i, step := 0, 0; i < len(data) && step < 64; step++ {
			op := data[i] % 7
			b1, b2, b3, b4, b5 := arg(i+1), arg(i+2), arg(i+3), arg(i+4), arg(i+5)
			switch op {
			case 0, 1: // map
				i += 6
				iova := uint64(b1) * 80
				size := (uint64(b2)%32 + 1) * 64
				off := uint64(b4) * 32
				m := Mapping{IOVA: iova, Size: size, Offset: off, Read: b5&1 != 0, Write: b5&2 != 0}
				kind := b3%3 + 1
				if kind < 3 {
					m.File = dupFile(t, w.files[kind-1])
				}
				err := s.Map(m)
				if kind < 3 && off+size > fuzzFile {
					if !errors.Is(err, syscall.EINVAL) {
						t.Fatalf("Map(%+v) past the file: got %v, want EINVAL", m, err)
					}
					break
				}
				if err != nil {
					t.Fatalf("Map(%+v): %v", m, err)
				}
				for a := iova; a < iova+size; a++ {
					model[a] = modelByte{kind: kind, off: uint32(off + (a - iova)), read: m.Read, write: m.Write}
				}
			case 2: // unmap
				i += 3
				iova := uint64(b1) * 80
				size := (uint64(b2)%32 + 1) * 64
				if b2 == 255 {
					size = math.MaxUint64
				}
				s.Unmap(iova, size)
				end := uint64(fuzzSpace)
				if size != math.MaxUint64 {
					end = min(end, iova+size)
				}
				for a := iova; a < end; a++ {
					model[a] = modelByte{}
				}
			case 3, 4: // read, write
				i += 4
				write := op == 4
				iova := uint64(b1)*96 + uint64(b2&63)
				p := w.buf[:int(b3)*12]
				for j := range p {
					p[j] = byte(step*31 + j)
				}
				var err error
				if write {
					err = s.Write(iova, p)
				} else {
					err = s.Read(iova, p)
				}
				wantErr, at := modelAccess(model, busMaster, iova, len(p), write)
				if wantErr != nil {
					var fe *FaultError
					if !errors.As(err, &fe) || !errors.Is(err, wantErr) || fe.At != at {
						t.Fatalf("access %#x+%d write=%v: got %v, want fault %v at %#x", iova, len(p), write, err, wantErr, at)
					}
					break // a fault moves nothing: the whole-memory check at the end sees it
				} else if err != nil {
					t.Fatalf("access %#x+%d write=%v: unexpected error %v", iova, len(p), write, err)
				}
				// The bytes the access touched, in the memory behind them: the memfds through
				// the test's own shared mapping, the client's memory under its lock. Model
				// first, then compare: two IOVAs of one write may alias one memfd byte.
				cells := func(j int) (cell, real *byte) {
					a := iova + uint64(j)
					switch mb := model[a]; mb.kind {
					case 1, 2:
						return &fileMem[mb.kind-1][mb.off], &w.fileView[mb.kind-1][mb.off]
					default:
						return &msgMem[a], &client.mem[a]
					}
				}
				client.mu.Lock()
				for j := range p {
					cell, _ := cells(j)
					if write {
						*cell = p[j]
						w.dirty = true
					} else if p[j] != *cell {
						client.mu.Unlock()
						t.Fatalf("read %#x+%d: byte %d = %#x, model says %#x", iova, len(p), j, p[j], *cell)
					}
				}
				for j := range p {
					if cell, real := cells(j); *real != *cell {
						client.mu.Unlock()
						t.Fatalf("access %#x+%d write=%v: byte %d of the backing is %#x, model says %#x", iova, len(p), write, j, *real, *cell)
					}
				}
				client.mu.Unlock()
			case 5:
				i++
				busMaster = !busMaster
				s.SetBusMaster(busMaster)
			case 6:
				i++
				s.UnmapAll()
				clear(model)
			}
			if st := s.Stats(); st.BackingFiles > 2 {
				t.Fatalf("more backing files than files: %+v", st)
			}
		}
		s.UnmapAll()
		if st := s.Stats(); st.Mappings != 0 || st.BackingFiles != 0 {
			t.Fatalf("UnmapAll left state: %+v", st)
		}
		// Once per input, all of memory: a write that strayed outside its bytes shows here.
		for k := range w.files {
			if !bytes.Equal(w.fileView[k], fileMem[k]) {
				t.Fatalf("memfd %d differs from the model", k)
			}
		}
		client.mu.Lock()
		same := bytes.Equal(client.mem, msgMem)
		client.mu.Unlock()
		if !same {
			t.Fatalf("client memory differs from the model")
		}
		if got := fdCount(t); got != baseline {
			t.Fatalf("fd leak: %d fds, started with %d", got, baseline)
		}
	})
}

// spaceWorld is FuzzSpace's world, built once per fuzzing process and returned to its
// starting state by begin (memfd creation and filling were most of a short input's cost).
type spaceWorld struct {
	space    *Space
	client   *fakeClient
	files    [2]*os.File // the test keeps these; the Space gets dups
	fileView [2][]byte   // the test's own shared mapping of each memfd
	fileMem  [2][]byte   // the model of each memfd
	msgMem   []byte      // the model of the client's memory
	model    []modelByte
	buf      []byte
	dirty    bool // a write may have changed memory since begin
}

func newSpaceWorld(tb testing.TB) *spaceWorld {
	w := &spaceWorld{
		client: &fakeClient{mem: make([]byte, fuzzSpace)},
		msgMem: make([]byte, fuzzSpace),
		model:  make([]modelByte, fuzzSpace),
		buf:    make([]byte, 255*12),
		dirty:  true,
	}
	for i := range w.files {
		w.files[i] = newMemfd(tb, fuzzFile, byte(0x30+i))
		v, err := unix.Mmap(int(w.files[i].Fd()), 0, fuzzFile, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			tb.Fatalf("mmap memfd: %v", err)
		}
		tb.Cleanup(func() { unix.Munmap(v) })
		w.fileView[i] = v
		w.fileMem[i] = make([]byte, fuzzFile)
	}
	w.space = NewSpace(nil)
	return w
}

// begin returns the world to its starting state for a new input and returns the fd count the
// input must end with.
func (w *spaceWorld) begin(t *testing.T) int {
	if w.dirty {
		for i := range w.files {
			for j := range w.fileMem[i] {
				w.fileMem[i][j] = pattern(byte(0x30+i), j)
			}
			copy(w.fileView[i], w.fileMem[i])
		}
		for i := range w.msgMem {
			w.msgMem[i] = byte(i * 13)
		}
		w.client.mu.Lock()
		copy(w.client.mem, w.msgMem)
		w.client.mu.Unlock()
		w.dirty = false
	}
	w.client.mu.Lock()
	w.client.calls = w.client.calls[:0]
	w.client.mu.Unlock()
	clear(w.model)
	w.space.UnmapAll()
	w.space.SetTransport(w.client)
	w.space.SetBusMaster(true)
	return fdCount(t)
}

// modelAccess returns the fault the model predicts for an access, and where.
func modelAccess(model []modelByte, busMaster bool, iova uint64, n int, write bool) (error, uint64) {
	if !busMaster {
		return ErrBusMasterOff, iova
	}
	for j := 0; j < n; j++ {
		a := iova + uint64(j)
		if a >= uint64(len(model)) || model[a].kind == 0 {
			return ErrUnmapped, a
		}
		if write && !model[a].write || !write && !model[a].read {
			return ErrPermission, a
		}
	}
	return nil, 0
}
