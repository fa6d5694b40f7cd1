package bars

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"
)

// regFuzzRig is one register file, built once per fuzz run, with a read-write block, a
// read-only block, a write-only block and unclaimed space around them.
type regFuzzRig struct {
	f  *RegisterFile
	rw [0x80 / 4]uint32
}

const (
	fuzzRegSize = 0x400
	fuzzRWBase  = 0x000 // [0x000, 0x080) read-write
	fuzzROBase  = 0x080 // [0x080, 0x0C0) read-only: reads a fixed pattern
	fuzzWOBase  = 0x100 // [0x100, 0x120) write-only: reads 0
	fuzzWOEnd   = 0x120
)

// fuzzMaxOps bounds the operations one input may hold (the rest is ignored): the fuzzer
// minimizes every new input with a search quadratic in its length, and while it does, it fuzzes
// nothing. 32 operations reach every state these targets have.
const fuzzMaxOps = 32

func fuzzROValue(off uint32) uint32 { return 0xA5000000 | off }

func newRegFuzzRig(t testing.TB) *regFuzzRig {
	r := &regFuzzRig{}
	f, err := NewRegisterFile(fuzzRegSize,
		Claim{Name: "rw", Offset: fuzzRWBase, Size: 0x80,
			Read:  func(off uint32) uint32 { return r.rw[off/4] },
			Write: func(off uint32, v uint32) { r.rw[off/4] = v }},
		Claim{Name: "ro", Offset: fuzzROBase, Size: 0x40, Read: fuzzROValue},
		Claim{Name: "wo", Offset: fuzzWOBase, Size: fuzzWOEnd - fuzzWOBase, Write: func(uint32, uint32) {}},
	)
	if err != nil {
		t.Fatal(err)
	}
	r.f = f
	return r
}

// FuzzRegisterFile drives the register BAR with accesses of random offsets (also past the end),
// sizes (0 to 16 bytes) and data, against a model: only dword-aligned 4-byte and qword-aligned
// 8-byte accesses are decoded, the rest read all-ones, change nothing and are counted;
// accesses outside the BAR fail Check with EINVAL; read-only registers never change; every
// unclaimed dword touched is counted.
//
// Input: 7-byte operations (short, because minimizing an input costs time quadratic in its
// length): a byte with the kind (bit 0: write) and size (the rest, mod 17), offset u16 (mod
// twice the BAR size), 4 data bytes repeated as needed.
func FuzzRegisterFile(f *testing.F) {
	f.Add([]byte{1 | 4<<1, 0x10, 0, 1, 2, 3, 4})
	f.Add([]byte{1 | 8<<1, 0x24, 0, 1, 2, 3, 4, 8 << 1, 0x20, 0, 0, 0, 0, 0})
	f.Add([]byte{1 | 8<<1, 0x78, 0, 1, 2, 3, 4, 1 | 4<<1, 0x80, 0, 9, 9, 9, 9})
	f.Add([]byte{8 << 1, 0xFC, 3, 0, 0, 0, 0, 1 | 16<<1, 0, 0, 1, 1, 1, 1})
	r := newRegFuzzRig(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		r.rw = [len(r.rw)]uint32{} // reset between inputs; counters are checked as deltas
		model := r.rw
		un0, bad0 := r.f.Diagnostics()
		var unTouched, badWant uint64
		buf := make([]byte, 16)
		for ops := 0; len(in) >= 7 && ops < fuzzMaxOps; in, ops = in[7:], ops+1 {
			write := in[0]&1 != 0
			n := int(in[0]>>1) % 17
			off := uint64(binary.LittleEndian.Uint16(in[1:])) % (2 * fuzzRegSize)
			data := in[3:7]
			p := buf[:n]
			for i := range p {
				p[i] = data[i%4] + byte(i/4)
			}
			outside := n == 0 || off >= fuzzRegSize || uint64(n) > fuzzRegSize-off
			if err := r.f.Check(off, n); outside != (err != nil) || err != nil && !errors.Is(err, syscall.EINVAL) {
				t.Fatalf("Check(%#x, %d) = %v, outside the BAR: %v", off, n, err, outside)
			}
			if outside {
				continue // the device never passes these on
			}
			decoded := n == 4 && off%4 == 0 || n == 8 && off%8 == 0
			if !decoded {
				badWant++
			}
			if write {
				if err := r.f.Write(off, p); err != nil {
					t.Fatalf("Write(%#x, %d): %v", off, n, err)
				}
				if decoded {
					for i := 0; i < n; i += 4 {
						a := uint32(off) + uint32(i)
						if a < fuzzROBase {
							model[a/4] = binary.LittleEndian.Uint32(p[i:])
						} else if a >= fuzzWOEnd || a >= fuzzROBase+0x40 && a < fuzzWOBase {
							unTouched++
						}
					}
				}
			} else {
				if err := r.f.Read(off, p); err != nil {
					t.Fatalf("Read(%#x, %d): %v", off, n, err)
				}
				for i := 0; i < n; i++ {
					want := byte(0xff)
					if decoded {
						a := uint32(off) + uint32(i)&^3
						var v uint32
						switch {
						case a < fuzzROBase:
							v = model[a/4]
						case a < fuzzROBase+0x40:
							v = fuzzROValue(a - fuzzROBase)
						case a >= fuzzWOBase && a < fuzzWOEnd:
						default:
							if i%4 == 0 {
								unTouched++
							}
						}
						want = byte(v >> (8 * (i % 4)))
					}
					if p[i] != want {
						t.Fatalf("Read(%#x, %d) byte %d = %#x, want %#x (data %x)", off, n, i, p[i], want, p)
					}
				}
			}
			if r.rw != model {
				t.Fatalf("after %#x+%d (write %v): registers %x, want %x", off, n, write, r.rw, model)
			}
		}
		un1, bad1 := r.f.Diagnostics()
		if bad1-bad0 != badWant {
			t.Fatalf("misshapen counted %d, want %d", bad1-bad0, badWant)
		}
		if got := sumUnclaimed(un1) - sumUnclaimed(un0); got != unTouched {
			t.Fatalf("unclaimed accesses counted %d, want %d", got, unTouched)
		}
		for _, u := range un1 {
			if name, ok := r.f.Claimed(u.Offset); ok {
				t.Fatalf("claimed offset %#x (%s) counted as unclaimed", u.Offset, name)
			}
		}
	})
}

func sumUnclaimed(u []UnclaimedAccess) uint64 {
	var n uint64
	for _, x := range u {
		n += x.Count
	}
	return n
}
