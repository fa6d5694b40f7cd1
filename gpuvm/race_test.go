package gpuvm

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"vgpu/abi"
	"vgpu/engine"
)

// Invalidation racing translation: while one goroutine flips a VMID's PTEs between two pages
// and invalidates after each flip, translators in that VMID and in others see only pages
// that are or were mapped there; once the flipper stops and invalidates, every VMID
// translates to the final mapping. Run with -race.
func TestInvalidationRacesTranslation(t *testing.T) {
	w := newWorld(t)
	const vmids = 4
	const pages = 64
	for vmid := 1; vmid <= vmids; vmid++ {
		w.enable(vmid, cntl(0))
	}
	w.vm.WriteReg(regStrictCntl, 1) // the re-walks race too
	pageA := func(i int) uint64 { return 0x10_0000 + uint64(i)<<12 }
	pageB := func(i int) uint64 { return 0x20_0000 + uint64(i)<<12 }
	for i := range pages {
		w.tab.set(0, uint64(i)<<12, pageA(i)|rw)
	}
	var stop atomic.Bool
	var bad atomic.Int64
	var wg sync.WaitGroup
	for vmid := 1; vmid <= vmids; vmid++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := engine.Access{VMID: vmid, Slot: vmid}
			for n := 0; !stop.Load() || n < 2000; n++ {
				i := n % pages
				tr, err := w.vm.Translate(a, uint64(i)<<12, n%2 == 0)
				if err != nil || (tr.PA != vram(pageA(i)) && tr.PA != vram(pageB(i))) {
					bad.Add(1)
				}
			}
		}()
	}
	for round := range 200 {
		for i := range pages {
			p := pageA(i)
			if round%2 == 0 {
				p = pageB(i)
			}
			w.tab.set(0, uint64(i)<<12, p|rw)
		}
		w.vm.WriteEngine(round%NumEngines, engReq, 0xFFFE|reqAny)
		if round%3 == 0 {
			w.vm.InvalidateVMIDs(1 << 2)
		}
	}
	stop.Store(true)
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d translations to a page never mapped there", bad.Load())
	}
	w.vm.InvalidateVMIDs(0xFFFE)
	for vmid := 1; vmid <= vmids; vmid++ {
		for i := range pages {
			if pa := mustPA(t, w, acc(vmid), uint64(i)<<12); pa != vram(pageA(i)) { // round 199 wrote A
				t.Fatalf("vmid %d page %d: %v after the final invalidation", vmid, i, pa)
			}
		}
	}
}

// Concurrent VMIDs with their own tables, faults and CAM traffic: every translation gives
// its own VMID's page, retry faults are released by acks from another goroutine.
func TestConcurrentVMIDs(t *testing.T) {
	w := newWorld(t)
	roots := make([]*tables, NumVMIDs)
	for vmid := 1; vmid < NumVMIDs; vmid++ {
		tab := w.tab
		if vmid > 1 {
			tab = &tables{m: w.m, next: w.tab.next, dirs: map[[3]uint64]uint64{}}
			tab.root = tab.alloc()
		}
		for i := range 16 {
			tab.set(0, uint64(i)<<12, uint64(vmid)<<16|uint64(i)<<12|rw)
		}
		w.tab.next = tab.next
		roots[vmid] = tab
		w.vm.WriteContext(vmid, ctxBaseLo, uint32(tab.root|abi.PDE_VALID_MASK))
		w.vm.WriteContext(vmid, ctxEndLo, 0xFFFF)
		w.vm.WriteContext(vmid, ctxCntl, cntl(retryCntl))
	}
	var acks sync.WaitGroup
	done := make(chan struct{})
	acks.Add(1)
	go func() { // the driver's fault handler: ack everything
		defer acks.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, iv := range w.takeIVs() {
				w.vm.WriteReg(regCAMAck, iv.Data[2])
			}
		}
	}()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for vmid := 1; vmid < NumVMIDs; vmid++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := acc(vmid)
			for n := range 3000 {
				i := uint64(n % 20) // pages 16..19 are unmapped: retry faults
				tr, err := w.vm.Translate(a, i<<12, false)
				var r *RetryFault
				switch {
				case i >= 16 && errors.As(err, &r):
					<-r.RetryReady()
				case err != nil || tr.PA != vram(uint64(vmid)<<16|i<<12):
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	acks.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d wrong translations", bad.Load())
	}
}
