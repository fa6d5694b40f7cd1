package hostile

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// putDwords writes dwords into CPU-visible VRAM at off.
func (d *driver) putDwords(off uint64, dws ...[]uint32) {
	for _, p := range dws {
		for _, w := range p {
			binary.LittleEndian.PutUint32(d.vram[off:], w)
			off += 4
		}
	}
}

func dwordBytes(dws ...[]uint32) []byte {
	var b []byte
	for _, p := range dws {
		for _, w := range p {
			b = binary.LittleEndian.AppendUint32(b, w)
		}
	}
	return b
}

// attackSelfReference runs indirect buffers that call or chain themselves (in VRAM, in guest
// memory through the GART, and in memory served by DMA messages), a ring that calls itself as
// an IB, and GART tables that map themselves and are rewritten through themselves. IB nesting
// and expansion limits must halt each with its named error; the self-mapped tables must not
// let a write escape the guest's mappings.
func attackSelfReference(t *testing.T, e *env) {
	d := e.d
	ib := func(i int) uint64 { return vIB + uint64(i)*0x1000 }
	sysIB, nofdIB := uint64(sysIOVA+0x300000), uint64(nofdIOVA+0x1000)
	for _, c := range []struct {
		name  string
		setup func(ring uint64) []uint32 // lays out IBs, returns the ring's packets
		halt  uint32
	}{
		{"IB that calls itself", func(uint64) []uint32 {
			d.putDwords(ib(0), pm4.IndirectBuffer{Addr: fb(ib(0)), Size: 4}.Encode())
			return pm4.IndirectBuffer{Addr: fb(ib(0)), Size: 4}.Encode()
		}, abi.CP_ERROR_IB_DEPTH},
		{"IB that chains to itself", func(uint64) []uint32 {
			d.putDwords(ib(0), pm4.Nop(4), pm4.IndirectBuffer{Addr: fb(ib(0)), Size: 8, Chain: true}.Encode())
			return pm4.IndirectBuffer{Addr: fb(ib(0)), Size: 8}.Encode()
		}, abi.CP_ERROR_IB_LIMIT},
		{"IB2 that chains to itself", func(uint64) []uint32 {
			d.putDwords(ib(0), pm4.IndirectBuffer{Addr: fb(ib(1)), Size: 4}.Encode())
			d.putDwords(ib(1), pm4.IndirectBuffer{Addr: fb(ib(1)), Size: 4, Chain: true}.Encode())
			return pm4.IndirectBuffer{Addr: fb(ib(0)), Size: 4}.Encode()
		}, abi.CP_ERROR_IB_LIMIT},
		{"two IBs chaining to each other", func(uint64) []uint32 {
			d.putDwords(ib(0), pm4.IndirectBuffer{Addr: fb(ib(1)), Size: 4, Chain: true}.Encode())
			d.putDwords(ib(1), pm4.IndirectBuffer{Addr: fb(ib(0)), Size: 4, Chain: true}.Encode())
			return pm4.IndirectBuffer{Addr: fb(ib(0)), Size: 4}.Encode()
		}, abi.CP_ERROR_IB_LIMIT},
		{"IB1 calling an IB2 that calls IB1", func(uint64) []uint32 {
			d.putDwords(ib(0), pm4.IndirectBuffer{Addr: fb(ib(1)), Size: 4}.Encode())
			d.putDwords(ib(1), pm4.IndirectBuffer{Addr: fb(ib(0)), Size: 4}.Encode())
			return pm4.IndirectBuffer{Addr: fb(ib(0)), Size: 4}.Encode()
		}, abi.CP_ERROR_IB_DEPTH},
		{"ring that calls itself as an IB", func(ring uint64) []uint32 {
			return pm4.IndirectBuffer{Addr: fb(ring), Size: 4}.Encode()
		}, abi.CP_ERROR_IB_DEPTH},
		{"CHAIN in the ring to the ring", func(ring uint64) []uint32 {
			return pm4.IndirectBuffer{Addr: fb(ring), Size: 4, Chain: true}.Encode()
		}, abi.CP_ERROR_BAD_PACKET},
		{"IB in guest memory chaining to itself through the GART", func(uint64) []uint32 {
			e.mem.set(sysIB, dwordBytes(pm4.Nop(2), pm4.IndirectBuffer{Addr: gartSys(sysIB), Size: 6, Chain: true}.Encode()))
			return pm4.IndirectBuffer{Addr: gartSys(sysIB), Size: 6}.Encode()
		}, abi.CP_ERROR_IB_LIMIT},
		{"IB in message-served memory chaining to itself", func(uint64) []uint32 {
			g := gart(gNofd) + (nofdIB - nofdIOVA)
			e.mem.set(nofdIB, dwordBytes(pm4.IndirectBuffer{Addr: g, Size: 4, Chain: true}.Encode()))
			return pm4.IndirectBuffer{Addr: g, Size: 4}.Encode()
		}, abi.CP_ERROR_IB_LIMIT},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := d.startQueue(1, queueOpts{})
			if err != nil {
				t.Fatal(err)
			}
			marker := uint64(vMarker + 64)
			d.setVRAM32(marker, 0)
			start := time.Now()
			if err := q.submit(c.setup(q.ringOff), bypassWrite(fb(marker), 0x600D)); err != nil {
				t.Fatal(err)
			}
			state, code, err := q.settle(livenessTimeout)
			if err != nil {
				t.Fatal(err)
			}
			expectHalt(t, d, q.slot, state, code, []uint32{c.halt}, d.vramU32(marker) == 0x600D)
			t.Logf("%s after %v", describeState(state, code), time.Since(start).Round(time.Microsecond))
		})
	}
	selfMappedGART(t, e, false)
	selfMappedGART(t, e, true)
}

// selfMappedGART points a GART page at the table page holding that page's own PTE (in VRAM,
// or in guest memory with system set) and has a queue rewrite PTEs through it: its own, and
// those of the last 48 sys pages, with random values, invalidating the TLB each time and
// writing through the pages it just remapped.
func selfMappedGART(t *testing.T, e *env, system bool) {
	name := "GART table in VRAM mapping itself"
	if system {
		name = "GART table in guest memory mapping itself"
	}
	t.Run(name, func(t *testing.T) {
		d, r := e.d, e.rng
		defer func() {
			if err := d.setupGART(); err != nil {
				t.Error(err)
			}
		}()
		const self = gInvalid
		ptes := gartPTEs()
		selfPage := uint64(self * 8 / abi.PTE_PAGE_SIZE) // the table page that holds PTE[self]
		tableIOVA := uint64(sysIOVA + 0x400000)
		rw := uint64(abi.PTE_VALID_MASK | abi.PTE_READABLE_MASK | abi.PTE_WRITEABLE_MASK)
		if system {
			ptes[self] = (tableIOVA + selfPage*abi.PTE_PAGE_SIZE) | rw | abi.PTE_SYSTEM_MASK
			b := make([]byte, 8*len(ptes))
			for i, p := range ptes {
				binary.LittleEndian.PutUint64(b[8*i:], p)
			}
			e.mem.set(tableIOVA, b)
			e.mem.allow(tableIOVA, uint64(len(b)))
			if err := d.setRegs(append(set64(abi.REG_GMC_GART_TABLE_LO, tableIOVA|abi.PDE_VALID_MASK|abi.PDE_SYSTEM_MASK),
				[2]uint32{abi.REG_GMC_VM_INVALIDATE, 1})...); err != nil {
				t.Fatal(err)
			}
		} else {
			ptes[self] = (vGART + selfPage*abi.PTE_PAGE_SIZE) | rw
			binary.LittleEndian.PutUint64(d.vram[vGART+8*self:], ptes[self])
			if err := d.setReg(abi.REG_GMC_VM_INVALIDATE, 1); err != nil {
				t.Fatal(err)
			}
		}
		// New PTEs send the writes to sys pages, VRAM, the table, or (random ones) anywhere a
		// 48-bit PTE can name; small and nofd are never named (a random PTE hitting them is
		// 2^-30 unlikely), so they must not change.
		e.mem.allowArea("sys")
		window := gart(self) // GPU address of the table page holding PTE[self]
		ptAddr := func(page uint64) uint64 { return window + (page*8)%abi.PTE_PAGE_SIZE }
		inval := pm4.WriteReg(abi.REG_GMC_VM_INVALIDATE/4, 1)
		q, err := d.startQueue(1, queueOpts{log2: 14})
		if err != nil {
			t.Fatal(err)
		}
		selfTarget := ptes[self] &^ 0xFFF
		for i := 0; i < 200; i++ {
			// Rewrite one of the PTEs the self-mapped page holds (2048.. : past-sys, small,
			// nofd, top, and PTE[self] itself), then write through it. Most new PTEs point
			// at a sys page, at engine scratch VRAM or at the table page itself; the last
			// quarter are random (the first fault ends the run).
			page := uint64(2048 + r.IntN(gPages-2048))
			var v uint64
			switch {
			case page == self:
				// PTE[self] is only ever rewritten with itself: moving it would send the
				// following PTE writes elsewhere and leave the old PTEs in place.
				v = ptes[self]
			case i >= 150:
				v = r.Uint64()
			case r.IntN(3) == 0:
				v = (sysIOVA + r.Uint64N(sysSize/abi.PTE_PAGE_SIZE)*abi.PTE_PAGE_SIZE) | rw | abi.PTE_SYSTEM_MASK
			case r.IntN(2) == 0:
				v = (vScratch + r.Uint64N(1024)*abi.PTE_PAGE_SIZE) | rw
			default:
				v = selfTarget | rw
				if system {
					v |= abi.PTE_SYSTEM_MASK
				}
			}
			q.emit(bypassWrite(ptAddr(page), uint32(v), uint32(v>>32)), inval, bypassWrite(gart(page)+uint64(r.IntN(1024))*4, r.Uint32()))
		}
		q.emit(bypassWrite(fb(vMarker+64), 0x600D))
		d.setVRAM32(vMarker+64, 0)
		if err := q.kick(); err != nil {
			t.Fatal(err)
		}
		state, code, err := q.settle(livenessTimeout)
		if err != nil {
			t.Fatal(err)
		}
		rptr, _ := d.reg(hqd(q.slot, abi.REG_HQD_PQ_RPTR))
		t.Logf("self-mapped table rewritten through itself: queue %s at rewrite %d of 200, completed %v",
			describeState(state, code), rptr/uint32(len(inval)+11), d.vramU32(vMarker+64) == 0x600D)
		if state != abi.HQD_STATE_HALTED && d.vramU32(vMarker+64) != 0x600D {
			t.Errorf("queue %s neither halted nor completed within %v", describeState(state, code), livenessTimeout)
		}
	})
}

// attackSelfKicking starts a self-kicking queue on every slot: each pass writes the GPU clock
// into its own dword of guest memory (through the GART) and of VRAM, and nothing stops the
// loops but a reset. Register reads must still be answered meanwhile, and every loop must make
// progress (no queue starved for the whole half second); the figures are logged, as they are
// what issue item 3's budget and yield are about. After the suite's DEVICE_RESET nothing may
// move.
func attackSelfKicking(t *testing.T, e *env) {
	d := e.d
	loopIOVA := uint64(sysIOVA + 0x500000)
	e.mem.allow(loopIOVA, 64*numSlots)
	qs := make([]*queue, numSlots)
	for slot := range qs {
		q, err := d.selfKicking(slot, clockTo(gartSys(loopIOVA+64*uint64(slot))), clockTo(fb(vMarker+64*uint64(slot))))
		if err != nil {
			t.Fatalf("slot %d: %v", slot, err)
		}
		qs[slot] = q
	}
	time.Sleep(20 * time.Millisecond)
	passes := func() []uint32 {
		out := make([]uint32, len(qs))
		for i, q := range qs {
			out[i] = d.vramU32(q.pollAddr) / loopDwords
		}
		return out
	}
	before := passes()
	lat := probeLatency(t, d, 500*time.Millisecond)
	after := passes()
	var made []uint32
	for slot := range qs {
		n := after[slot] - before[slot]
		made = append(made, n)
		if n == 0 {
			state, code, _ := d.status(slot)
			t.Errorf("slot %d: its self-kicking loop made no pass in 500 ms while the others ran (queue %s): starved", slot, describeState(state, code))
		}
	}
	sorted := slices.Clone(made)
	slices.Sort(sorted)
	t.Logf("passes in 500 ms per slot: %v (min %d, median %d, max %d); register reads meanwhile: %v",
		made, sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1], lat)
}
