package gpuvm

import (
	"encoding/binary"
	"testing"

	"vgpu/abi"
)

// The translation benchmarks, each beside a same-run baseline (only ratios travel between
// runs on a shared machine):
//
//   - TLBHit: Translate of 64 mapped pages in turn, every one a TLB hit; its baseline is the
//     floor of any hashed TLB, one Go map lookup of the page plus the address arithmetic.
//   - Walk4: Translate where neither the TLB nor the PDE cache can help (4096 addresses in
//     turn, spread over the root's 512 entries so every cached PDE is evicted before its
//     reuse): a full 4-level walk, checked to read 4 entries each; its baseline is the 4
//     dependent entry reads alone, through the same TableReader.
func BenchmarkTranslate(b *testing.B) {
	b.Run("TLBHit", func(b *testing.B) {
		w, vas := tlbHitWorld(b)
		a := acc(1)
		b.ResetTimer()
		for i := range b.N {
			if _, err := w.vm.Translate(a, vas[i%len(vas)], false); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		rate(b)
		if s := w.vm.Stats(); s.TLBMisses > uint64(len(vas)) {
			b.Fatalf("%d TLB misses: not a TLB-hit benchmark", s.TLBMisses)
		}
	})
	b.Run("TLBHitBaseline", func(b *testing.B) {
		_, vas := tlbHitWorld(b)
		tlb := map[uint64]uint64{}
		for _, va := range vas {
			tlb[va>>pageShift] = va + 0x10_0000
		}
		var sum uint64
		b.ResetTimer()
		for i := range b.N {
			va := vas[i%len(vas)]
			pa, ok := tlb[va>>pageShift]
			if !ok {
				b.Fatal("miss")
			}
			sum += pa + va&pageMask
		}
		b.StopTimer()
		rate(b)
		_ = sum
	})
	b.Run("Walk4", func(b *testing.B) {
		w, vas := walkWorld(b)
		a := acc(1)
		for _, va := range vas { // warm: the first pass fills and thrashes the caches
			if _, err := w.vm.Translate(a, va, false); err != nil {
				b.Fatal(err)
			}
		}
		before := w.vm.Stats()
		b.ResetTimer()
		for i := range b.N {
			if _, err := w.vm.Translate(a, vas[i%len(vas)], false); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		rate(b)
		s := w.vm.Stats()
		if reads, n := s.TableReads-before.TableReads, uint64(b.N); reads != 4*n || s.TLBHits != before.TLBHits {
			b.Fatalf("%d table reads and %d TLB hits for %d translations: not full walks", reads, s.TLBHits-before.TLBHits, n)
		}
	})
	b.Run("Walk4Baseline", func(b *testing.B) {
		w, vas := walkWorld(b)
		var buf [8]byte
		b.ResetTimer()
		for i := range b.N {
			va := vas[i%len(vas)]
			pde := w.tab.root | abi.PDE_VALID_MASK
			for l := 3; l >= 0; l-- {
				if err := w.m.ReadPTE(vram(pde&abi.PDE_TABLE_ADDRESS_MASK+idx(l, va&(vaLimit-1))*8), buf[:]); err != nil {
					b.Fatal(err)
				}
				pde = binary.LittleEndian.Uint64(buf[:])
			}
			if pde&abi.PTE_VALID_MASK == 0 {
				b.Fatal("not mapped")
			}
		}
		b.StopTimer()
		rate(b)
	})
}

func rate(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "translations/s")
	}
}

func tlbHitWorld(b *testing.B) (*world, []uint64) {
	w := newWorld(&testing.T{})
	w.enable(1, cntl(0))
	var vas []uint64
	for i := range 64 {
		va := va1 + uint64(i)<<pageShift
		w.tab.set(0, va, (0x10_0000+uint64(i)<<pageShift)|rw)
		vas = append(vas, va+0x40)
	}
	for _, va := range vas {
		if _, err := w.vm.Translate(acc(1), va, false); err != nil {
			b.Fatal(err)
		}
	}
	return w, vas
}

// walkWorld maps 8 pages under each of the root's 512 entries, sharing the lower tables (a
// page-table DAG: every root entry points at one PDB1), and orders the addresses so that
// consecutive translations use different root entries.
func walkWorld(b *testing.B) (*world, []uint64) {
	w := newWorld(&testing.T{})
	w.enable(1, cntl(0))
	const subs = 8
	var vas []uint64
	for s := range subs {
		va := uint64(s) << 30 // under root entry 0
		w.tab.set(0, va, (0x10_0000+uint64(s)<<pageShift)|rw)
	}
	pdb1 := w.tab.dirs[[3]uint64{3, w.tab.root, 0}]
	for r := range 512 {
		w.m.put(vram(w.tab.root+uint64(r)*8), pdb1|abi.PDE_VALID_MASK)
	}
	for s := range subs {
		for r := range 512 {
			va := uint64(r)<<39 | uint64(s)<<30 | 0x80
			if r >= 256 {
				va |= 0xFFFF_0000_0000_0000 // the upper half of the 48-bit space, sign-extended
			}
			vas = append(vas, va)
		}
	}
	if len(vas) <= 2*TLBEntries || 3*512 <= 4*PDECacheEntries {
		b.Fatal("the address set does not defeat the caches")
	}
	return w, vas
}
