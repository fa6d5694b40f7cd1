package l2

import (
	"sync"
	"testing"

	"vgpu/engine"
)

// TestConcurrentSharedLines: goroutines share a few lines byte by byte (goroutine g owns the
// bytes i with i%writers == g), and each writes its bytes cached and uncached and reads them
// back cached and uncached, while another goroutine writes back and invalidates (discarding
// would lose data legitimately), directly and through L2_CONTROL maintenance. A small
// cache of two-way sets makes fills evict lines other goroutines are using. Whatever the
// interleaving, each goroutine must read back its own last values, and after a final
// write-back memory must hold every goroutine's last values: byte-masked write-back, fills
// racing evictions and uncached accesses racing write-backs must never lose or revive a byte.
// Run with -race.
func TestConcurrentSharedLines(t *testing.T) {
	const (
		writers = 4
		span    = 8 * LineBytes // the shared lines, in both domains
		rounds  = 1500
	)
	m := &directMem{memBacking: newMem(span, span)}
	c := newGeometry(m, 2, 2, nil)
	c.SetStrict(true) // read hits also check memory, owning the line meanwhile
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			d := engine.Domain(i % 2)
			switch i % 4 {
			case 0:
				c.WriteBack(nil)
			case 1:
				c.Invalidate(&Range{Domain: d, Addr: uint64(i%8) * LineBytes, Size: 2 * LineBytes})
			case 2:
				c.StartMaintenance(OpWriteBackInvalidate)
			case 3:
				c.FenceCheck(i%writers, 0)
				_ = c.Stats()
			}
		}
	}()
	final := make([][engine.NumDomains][span]byte, writers)
	var workers sync.WaitGroup
	for g := range writers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			cur := &final[g]
			x := uint32(g*7919 + 1)
			for r := range rounds {
				x = x*1103515245 + 12345
				d := engine.Domain(x >> 31 & 1)
				// A run of this goroutine's bytes: every writers-th byte from a start.
				start := uint64(x>>8)%(span-LineBytes)/writers*writers + uint64(g)
				v := byte(r + 1)
				for i := start; i < start+LineBytes && i < span; i += writers {
					pa := engine.PhysAddr{Domain: d, Addr: i}
					var err error
					if x>>4%2 == 0 {
						err = c.Write(g, pa, i, []byte{v})
					} else {
						err = c.WriteUncached(pa, []byte{v})
					}
					if err != nil {
						t.Error(err)
						return
					}
					cur[d][i] = v
				}
				// Read the whole span back both ways; only this goroutine's bytes are checked.
				var buf [span]byte
				read := c.Read
				if x>>5%2 == 0 {
					read = func(_ int, pa engine.PhysAddr, _ uint64, p []byte) error { return c.ReadUncached(pa, p) }
				}
				if err := read(g, engine.PhysAddr{Domain: d, Addr: 0}, 0, buf[:]); err != nil {
					t.Error(err)
					return
				}
				for i := uint64(g); i < span; i += writers {
					if buf[i] != cur[d][i] {
						t.Errorf("writer %d round %d: %v byte %#x reads %d, last written %d", g, r, d, i, buf[i], cur[d][i])
						return
					}
				}
			}
		}()
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	c.Close()
	c.WriteBack(nil)
	for d := range engine.NumDomains {
		got := m.cpuRead(d, 0, span)
		for i := range uint64(span) {
			if want := final[i%writers][d][i]; got[i] != want {
				t.Fatalf("%v byte %#x is %d in memory after write-back, writer %d wrote %d last", d, i, got[i], i%writers, want)
			}
		}
	}
	if err := c.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.StaleReads != 0 {
		// Nothing wrote memory behind the cache: every difference strict mode saw would be a
		// cache bug (an uncached write that did not update a line, a fill of older bytes).
		t.Errorf("%d stale reads reported", s.StaleReads)
	}
}
