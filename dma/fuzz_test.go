package dma

import (
	"bytes"
	"errors"
	"math"
	"os"
	"syscall"
	"testing"
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
	off         uint64
	read, write bool
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
	f.Fuzz(func(t *testing.T, data []byte) {
		baseline := fdCount(t)
		var files [2]*os.File
		var fileMem [2][]byte
		for i := range files {
			seed := byte(0x30 + i)
			fd := newMemfdRaw(t, fuzzFile, seed) // closed below, before the fd-leak check
			files[i] = fd
			fileMem[i] = make([]byte, fuzzFile)
			for j := range fileMem[i] {
				fileMem[i][j] = pattern(seed, j)
			}
		}
		client := &fakeClient{mem: make([]byte, fuzzSpace)}
		msgMem := make([]byte, fuzzSpace)
		for i := range msgMem {
			msgMem[i] = byte(i * 13)
			client.mem[i] = msgMem[i]
		}
		model := make([]modelByte, fuzzSpace)
		busMaster := true

		s := NewSpace(nil)
		s.SetTransport(client)
		s.SetBusMaster(true)

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
					m.File = dupFile(t, files[kind-1])
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
					model[a] = modelByte{kind: kind, off: off + (a - iova), read: m.Read, write: m.Write}
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
				p := make([]byte, int(b3)*12)
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
				} else if err != nil {
					t.Fatalf("access %#x+%d write=%v: unexpected error %v", iova, len(p), write, err)
				}
				for j := range p {
					if wantErr != nil {
						break
					}
					mb := model[iova+uint64(j)]
					var cell *byte
					switch mb.kind {
					case 1, 2:
						cell = &fileMem[mb.kind-1][mb.off]
					case 3:
						cell = &msgMem[iova+uint64(j)]
					}
					if write {
						*cell = p[j]
					} else if p[j] != *cell {
						t.Fatalf("read %#x+%d: byte %d = %#x, model says %#x", iova, len(p), j, p[j], *cell)
					}
				}
				if write {
					for k := range files {
						if got := fileBytes(t, files[k], 0, fuzzFile); !bytes.Equal(got, fileMem[k]) {
							t.Fatalf("write %#x+%d: memfd %d differs from the model", iova, len(p), k)
						}
					}
					client.mu.Lock()
					same := bytes.Equal(client.mem, msgMem)
					client.mu.Unlock()
					if !same {
						t.Fatalf("write %#x+%d: client memory differs from the model", iova, len(p))
					}
				}
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
		for _, f := range files {
			f.Close()
		}
		if got := fdCount(t); got != baseline {
			t.Fatalf("fd leak: %d fds, started with %d", got, baseline)
		}
	})
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
