package gpummu

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"vgpu/abi"
	"vgpu/engine"
)

// TestInvalidationRacesTranslation: readers translate one GART page over and over (Read, and
// Copy's run translation) while the driver points it at a new page holding a new epoch number
// and invalidates, again and again. The TLB may serve the old page until VM_INVALIDATE returns,
// but never after: a read that starts after an invalidation returned must see at least that
// epoch. A TLB fill from a PTE read before the invalidation, inserted after it, would break
// this. Run with -race.
func TestInvalidationRacesTranslation(t *testing.T) {
	const (
		pages     = 64
		base      = 0x80000 // the pages the GART page is pointed at, in system memory
		allEpochs = 100
	)
	epochs := uint32(allEpochs)
	if testing.Short() {
		epochs = 30
	}
	w := newWorld(t)
	w.mmu.b = yieldAfterTable{w.mem} // widen the window between a PTE read and its TLB fill
	var epoch atomic.Uint32          // the last epoch whose invalidation returned
	var reads atomic.Int64           // reads done, so each epoch is read a few times before the next
	point := func(e uint32) {
		pa := uint64(base + e%pages*PageSize)
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], e)
		w.mem.cpuWrite(engine.DomainSystem, pa, b[:])
		w.mem.putPTE(engine.DomainSystem, sysTable, 0, sysPTE(pa, rw))
		w.setReg(abi.REG_GMC_VM_INVALIDATE, 1)
		epoch.Store(e)
	}
	point(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := engine.Access{Slot: r, Bypass: true} // straight to memory: only translation matters
			var b [4]byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				before := epoch.Load()
				var err error
				if r == 0 {
					// Copy translates the source run, then copies it to VRAM.
					if err = w.mmu.Copy(a, fb+uint64(r)*PageSize, page(0), 4); err == nil {
						err = w.mmu.Read(a, fb+uint64(r)*PageSize, b[:])
					}
				} else {
					err = w.mmu.Read(a, page(0), b[:])
				}
				if err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
				if got := binary.LittleEndian.Uint32(b[:]); int32(got-before) < 0 {
					t.Errorf("reader %d: read epoch %d after the invalidation of epoch %d returned", r, got, before)
					return
				}
			}
		}()
	}
	for e := uint32(1); e <= epochs && !t.Failed(); e++ {
		for n := reads.Load(); reads.Load() < n+4 && !t.Failed(); {
			runtime.Gosched()
		}
		point(e)
	}
	close(stop)
	wg.Wait()
}

// yieldAfterTable is the test memory with a scheduling point after every read of the GART
// table, where a TLB fill would race an invalidation.
type yieldAfterTable struct{ *memBacking }

func (y yieldAfterTable) ReadPhys(d engine.Domain, addr uint64, p []byte) error {
	err := y.memBacking.ReadPhys(d, addr, p)
	if d == engine.DomainSystem && addr >= sysTable && addr < sysTable+gartPages*abi.PTE_BYTES {
		runtime.Gosched()
	}
	return err
}
