package dma

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestStreamCopy: streamCopy copies exactly copy's bytes — no more, no fewer — whatever the
// alignment of either side and the length: below streamMin (Go's copy), at it, and with heads
// and tails around the streaming body.
func TestStreamCopy(t *testing.T) {
	const pad = 128
	sizes := []int{0, 1, 63, streamMin - 1, streamMin, streamMin + 1, streamMin + 63, streamMin + 64,
		64<<10 + 17, 256 << 10, goStreams - 1, goStreams}
	for _, n := range sizes {
		for _, dOff := range []int{0, 1, 8, 15, 16, 33} {
			for _, sOff := range []int{0, 3, 16} {
				t.Run(fmt.Sprintf("n%d/dst+%d/src+%d", n, dOff, sOff), func(t *testing.T) {
					src := make([]byte, n+sOff)
					for i := range src {
						src[i] = byte(i*7 + i>>8)
					}
					dst := bytes.Repeat([]byte{0xee}, pad+n+pad)
					want := bytes.Clone(dst)
					copy(want[pad+dOff:pad+dOff+n], src[sOff:])
					streamCopy(dst[pad+dOff:pad+dOff+n], src[sOff:sOff+n])
					if !bytes.Equal(dst, want) {
						i := 0
						for dst[i] == want[i] {
							i++
						}
						t.Fatalf("byte %d (of the padded buffer) is %#x, want %#x", i, dst[i], want[i])
					}
				})
			}
		}
	}
}

// TestStreamCopyBackingShrunk: a streaming copy (long enough to stream) from or into a mapping
// whose file the client truncated faults inside the streaming loop; the fault is recovered and
// the copy refused, as for Go's copy.
func TestStreamCopyBackingShrunk(t *testing.T) {
	s, files, _ := setup(t, []mapSpec{rw(0x10000, 16*page, 0)})
	if err := files[0].Truncate(4 * page); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8*page) // from page 2: pages 4.. are gone
	if len(buf) < streamMin {
		t.Fatalf("test copy of %d bytes would not stream", len(buf))
	}
	if s.CopyOut(buf, 0x12000) {
		t.Error("CopyOut over the truncated part succeeded")
	}
	if s.CopyIn(0x12000, buf) {
		t.Error("CopyIn over the truncated part succeeded")
	}
	// The part still backed streams as before.
	if !s.CopyIn(0x10000, buf[:4*page]) || !s.CopyOut(buf[:4*page], 0x10000) {
		t.Error("copy of the part still backed refused")
	}
	// And a plain access reports the fault, naming the first missing byte.
	var fe *FaultError
	if err := s.Read(0x14000, buf[:8]); !errors.As(err, &fe) || fe.At != 0x14000 {
		t.Errorf("read past the truncated file: %v", err)
	}
}
