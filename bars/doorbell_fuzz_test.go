package bars

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"
)

// One page: the logic does not depend on the size, and every reset and scan walks all of it.
const fuzzDoorbellSize = 0x1000

// FuzzDoorbells drives both doorbell modes with trapped accesses of random offsets (also past
// the end), sizes and data, guest stores through the poll-mode mapping, poller scans and
// resets, against a model of the page.
//
// Trap mode: every write rings each doorbell it touches, at once, with the combined 64-bit
// value; reads return the page; accesses outside the aperture fail with EINVAL and change
// nothing. Poll mode (the poller's scan is run synchronously, so each check is exact and
// cheap; TestDoorbellPollResetRace covers the poller goroutine against Reset): trapped writes
// ring nothing by themselves; a scan rings exactly the doorbells whose value differs from what
// the previous scan saw — or from 0 after a reset or a clear of that doorbell — with their
// current value, in index order; a reset or a clear rings nothing.
//
// Input: 7-byte operations (short, because minimizing an input costs time quadratic in its
// length): a byte with the kind (mod 8: trapped write, trapped read, guest store, reset, scan
// three times to make scans common, clear) and size (bits 3-7, mod 10), offset u16 (mod 5/4 of
// the aperture), 4 data bytes repeated as needed.
func FuzzDoorbells(f *testing.F) {
	f.Add([]byte{8 << 3, 0x18, 0, 0x40, 0, 0, 1, 4, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{4 << 3, 0x2C, 0, 2, 0, 0, 0, 4 << 3, 0x28, 0, 0x10, 0, 0, 0})
	f.Add([]byte{2, 0x38, 0, 42, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 2, 0x38, 0, 42, 0, 0, 0})
	f.Add([]byte{8 << 3, 0xFC, 0x0F, 1, 1, 1, 1, 1 | 9<<3, 0, 0, 0, 0, 0, 0})

	var trapRings ringLog
	trap, err := newDoorbells(DoorbellTrap, fuzzDoorbellSize, trapRings.ring, false)
	if err != nil {
		f.Fatal(err)
	}
	defer trap.Close()
	var pollRings ringLog
	poll, err := newDoorbells(DoorbellPoll, fuzzDoorbellSize, pollRings.ring, false)
	if err != nil {
		f.Fatal(err)
	}
	defer poll.Close()
	guest := mapDoorbells(f, poll)
	const slots = fuzzDoorbellSize / 8

	f.Fuzz(func(t *testing.T, in []byte) {
		// Reset between inputs: both pages zero, nothing seen, the ring logs empty.
		trap.Reset()
		poll.Reset()
		poll.scan()
		trapRings.take()
		pollRings.take()
		var page, seen [slots]uint64
		var wantTrap [][2]uint64
		scan := func() {
			t.Helper()
			var want [][2]uint64
			for i, v := range page {
				if v != seen[i] {
					want = append(want, [2]uint64{uint64(i), v})
					seen[i] = v
				}
			}
			poll.scan()
			if got := pollRings.take(); !equalRings(got, want) {
				t.Fatalf("poll scan rang %x, want %x", got, want)
			}
		}
		buf := make([]byte, 9)
		for ops := 0; len(in) >= 7 && ops < fuzzMaxOps; in, ops = in[7:], ops+1 {
			kind := in[0] % 8
			n := int(in[0]>>3) % 10
			off := uint64(binary.LittleEndian.Uint16(in[1:])) % (fuzzDoorbellSize * 5 / 4)
			var data [8]byte
			for i := range data {
				data[i] = in[3+i%4] + byte(i/4)
			}
			p := buf[:n]
			copy(p, data[:])
			outside := n == 0 || off >= fuzzDoorbellSize || uint64(n) > fuzzDoorbellSize-off
			switch kind {
			case 0, 1: // trapped write or read, the same bytes in both modes
				for _, d := range []*Doorbells{trap, poll} {
					var err error
					if kind == 0 {
						err = d.Write(off, p)
					} else {
						err = d.Read(off, p)
					}
					if outside != (err != nil) || err != nil && !errors.Is(err, syscall.EINVAL) {
						t.Fatalf("%s access %#x+%d = %v, outside: %v", d.Mode(), off, n, err, outside)
					}
				}
				if outside {
					continue
				}
				if kind == 1 {
					for i := range p {
						a := off + uint64(i)
						if want := byte(page[a/8] >> (8 * (a % 8))); p[i] != want {
							t.Fatalf("read %#x+%d byte %d = %#x, want %#x", off, n, i, p[i], want)
						}
					}
					continue
				}
				for s := off / 8; s <= (off+uint64(n)-1)/8; s++ {
					for i := range p {
						if a := off + uint64(i); a/8 == s {
							page[s] = page[s]&^(0xff<<(8*(a%8))) | uint64(p[i])<<(8*(a%8))
						}
					}
					wantTrap = append(wantTrap, [2]uint64{s, page[s]})
				}
			case 2: // the guest stores a whole doorbell through its mapping (poll mode)
				s := int(off/8) % slots
				v := binary.LittleEndian.Uint64(data[:])
				atomic.StoreUint64((*uint64)(unsafe.Pointer(&guest[8*s])), v)
				if err := trap.Write(uint64(8*s), data[:]); err != nil { // keep the pages equal
					t.Fatal(err)
				}
				page[s] = v
				wantTrap = append(wantTrap, [2]uint64{uint64(s), v})
			case 3:
				trap.Reset()
				poll.Reset()
				page, seen = [slots]uint64{}, [slots]uint64{}
			case 7: // a queue takes the doorbell over: it reads 0, and rings nothing
				s := int(off/8) % slots
				trap.Clear(s)
				poll.Clear(s)
				page[s], seen[s] = 0, 0
			case 4, 5, 6:
				scan()
			}
			if got := pollRings.take(); len(got) != 0 {
				t.Fatalf("poll mode rang %x outside a scan", got)
			}
		}
		if got := trapRings.take(); !equalRings(got, wantTrap) {
			t.Fatalf("trap rings %x, want %x", got, wantTrap)
		}
		scan()
		for i := range page {
			if got := atomic.LoadUint64(&poll.slots[i]); got != page[i] {
				t.Fatalf("poll page doorbell %d = %#x, want %#x", i, got, page[i])
			}
		}
	})
}
