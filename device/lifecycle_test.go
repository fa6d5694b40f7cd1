package device

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/bars"
	"vgpu/pm4"
	"vgpu/vfiouser/vfiousertest"
)

// Layout of the life-cycle tests' GPU objects in VRAM (offsets), and where guest memory goes.
const (
	ltRing     = 0x10000 // 1024-dword ring
	ltRptr     = 0x12000
	ltGART     = 0x20000
	ltFence    = 0x30000
	ltIOVA     = 0x1_0000_0000
	ltGART0    = 0x0000_0100_0000_0000 // GPU address of the GART aperture
	ltGuest    = 1 << 16
	ltSlot     = 1
	ltRingDw   = 1024
	ltDoorbell = 3
)

// driver is one client acting as a guest driver on a shared device.
type driver struct {
	t    *testing.T
	r    *rig
	vram []byte
	mem  *vfiousertest.GuestMemory
	wptr uint64
}

// attach connects a client, maps VRAM, enables the function, maps guest memory (filled with
// fill) at ltIOVA and exposes it through the GART at ltGART0 (cached unless uc).
func attach(t *testing.T, dev *Device, fill byte, uc bool) *driver {
	t.Helper()
	r := &rig{t: t, dev: dev, c: vfiousertest.NewPair(t, dev)}
	m, err := r.c.MmapRegion(abi.BAR_VRAM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	mem, err := vfiousertest.NewGuestMemory(ltGuest)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	for i := range mem.Bytes() {
		mem.Bytes()[i] = fill
	}
	if err := r.c.DMAMap(ltIOVA, mem, 0, ltGuest, vfiousertest.MapOptions{}); err != nil {
		t.Fatal(err)
	}
	d := &driver{t: t, r: r, vram: m.At(0, dev.cfg.VRAMWindow), mem: mem}
	r.enable(true)
	mtype := uint64(0)
	if uc {
		mtype = abi.PTE_MTYPE_UC << abi.PTE_MTYPE__SHIFT
	}
	pages := uint64(ltGuest / abi.PTE_PAGE_SIZE)
	for i := range pages {
		pte := (ltIOVA + i*abi.PTE_PAGE_SIZE) | abi.PTE_VALID_MASK | abi.PTE_SYSTEM_MASK |
			abi.PTE_READABLE_MASK | abi.PTE_WRITEABLE_MASK | mtype
		binary.LittleEndian.PutUint64(d.vram[ltGART+8*i:], pte)
	}
	end := uint64(ltGART0) + pages*abi.PTE_PAGE_SIZE - 1
	for _, w := range [][2]uint32{
		{abi.REG_GMC_GART_START_LO, uint32(ltGART0 & 0xffffffff)}, {abi.REG_GMC_GART_START_HI, uint32(ltGART0 >> 32)},
		{abi.REG_GMC_GART_END_LO, uint32(end)}, {abi.REG_GMC_GART_END_HI, uint32(end >> 32)},
		{abi.REG_GMC_GART_TABLE_LO, ltGART | abi.PDE_VALID_MASK}, {abi.REG_GMC_GART_TABLE_HI, 0},
		{abi.REG_GMC_GART_CNTL, abi.REG_GMC_GART_CNTL__ENABLE_MASK},
		{abi.REG_GMC_VM_INVALIDATE, 1},
	} {
		r.setReg(w[0], w[1])
	}
	return d
}

func (d *driver) hqd(reg, v uint32) {
	d.r.setReg(abi.BLOCK_HQD_BASE+ltSlot*abi.BLOCK_HQD_STRIDE+reg, v)
}

func (d *driver) hqdRead(reg uint32) uint32 {
	return d.r.reg(abi.BLOCK_HQD_BASE + ltSlot*abi.BLOCK_HQD_STRIDE + reg)
}

// startQueue programs and activates the test queue with an empty ring.
func (d *driver) startQueue() {
	clear(d.vram[ltRing : ltRing+4*ltRingDw])
	ring, rptr := uint64(abi.GPU_FB_BASE+ltRing), uint64(abi.GPU_FB_BASE+ltRptr)
	d.hqd(abi.REG_HQD_PQ_BASE_LO, uint32(ring))
	d.hqd(abi.REG_HQD_PQ_BASE_HI, uint32(ring>>32))
	d.hqd(abi.REG_HQD_PQ_CONTROL, 9) // 2^(9+1) = 1024 dwords
	d.hqd(abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO, uint32(rptr))
	d.hqd(abi.REG_HQD_PQ_RPTR_REPORT_ADDR_HI, uint32(rptr>>32))
	d.hqd(abi.REG_HQD_PQ_DOORBELL_CONTROL, 2*ltDoorbell<<abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT|
		abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK)
	d.hqd(abi.REG_HQD_ACTIVE, 1)
	d.wptr = 0
}

// submit writes packets at wptr and rings the doorbell.
func (d *driver) submit(pkts ...[]uint32) {
	for _, p := range pkts {
		for _, dw := range p {
			binary.LittleEndian.PutUint32(d.vram[ltRing+4*(d.wptr%ltRingDw):], dw)
			d.wptr++
		}
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], d.wptr)
	if err := d.r.c.Write(abi.BAR_DOORBELL, 8*ltDoorbell, b[:]); err != nil {
		d.t.Fatal(err)
	}
}

func (d *driver) fence() uint32 { return binary.LittleEndian.Uint32(d.vram[ltFence:]) }

// eventually polls cond (a liveness bound, not a speed assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func newSharedDevice(t *testing.T) *Device {
	cfg := DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow = 16<<20, 16<<20
	dev, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// TestDisconnectIsolatesClients is the isolation contract: work the first client's guest set in
// motion (a parked wait that the next client's memory would satisfy, dirty L2 lines) never
// reaches the next client's memory, even when that client enables Bus Master without a reset.
func TestDisconnectIsolatesClients(t *testing.T) {
	dev := newSharedDevice(t)
	target := uint64(ltGART0 + 0x100)
	t.Run("first client", func(t *testing.T) {
		d := attach(t, dev, 0xFF, false)
		d.startQueue()
		// Dirty L2 lines: 16 lines written through the cache, never written back.
		for off := uint64(0x1000); off < 0x1800; off += 128 {
			d.submit(pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_TC_L2, Addr: ltGART0 + off, Data: line(0xBAD0BAD0)}.Encode())
		}
		// A fence without its GL2 write-back: the lines stay dirty.
		d.submit(pm4.ReleaseMem{CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, DataSel: pm4.Data32,
			Addr: abi.GPU_FB_BASE + ltFence, Data: 1}.Encode())
		eventually(t, "fence 1", func() bool { return d.fence() == 1 })
		if n := d.r.reg(abi.REG_L2_DIRTY_LINES); n == 0 {
			t.Fatal("no dirty L2 lines to test with")
		}
		// A wait for a zero that this client's memory (all 0xFF) never has, then a write.
		d.submit(pm4.WaitRegMem{Function: pm4.FuncEQ, Space: pm4.SpaceMem,
			CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, Addr: ltGART0, Ref: 0, Mask: 0xFFFFFFFF, Interval: 10}.Encode(),
			pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_MEM, Addr: target, Data: []uint32{0xDEAD}}.Encode())
		eventually(t, "queue parked", func() bool {
			return d.hqdRead(abi.REG_HQD_STATUS)&abi.REG_HQD_STATUS__STATE_MASK == abi.HQD_STATE_WAITING
		})
		if n := dev.gpu.mmu.Stats().TLBEntries; n == 0 {
			t.Fatal("no cached GART translations to test with")
		}
	})
	// The departed client's GART entries pointed at its IOVAs: none may be served to the next.
	if n := dev.gpu.mmu.Stats().TLBEntries; n != 0 {
		t.Errorf("%d translations of the departed client are still cached", n)
	}
	lost := dev.Diagnostics().GPU.L2.Lost
	if lost == 0 {
		t.Error("the departed client's dirty lines were not counted as lost")
	}
	d := attach(t, dev, 0, false) // zero-filled memory at the same IOVAs, Bus Master on
	if cmd := d.r.cfgRead(0x04, 2); cmd&pcieCommandBusMaster == 0 {
		t.Fatal("test setup: the second client did not enable Bus Master")
	}
	d.r.setReg(abi.REG_L2_CONTROL, abi.REG_L2_CONTROL__WB_MASK|abi.REG_L2_CONTROL__INV_MASK)
	eventually(t, "L2_CONTROL done", func() bool { return d.r.reg(abi.REG_L2_STATUS)&abi.REG_L2_STATUS__BUSY_MASK == 0 })
	time.Sleep(100 * time.Millisecond) // a parked wait re-checks at least every 1 ms
	if !bytes.Equal(d.mem.Bytes(), make([]byte, ltGuest)) {
		i := bytes.IndexFunc(d.mem.Bytes(), func(r rune) bool { return r != 0 })
		t.Fatalf("the first client's work reached the second client's memory (first non-zero byte at %#x)", i)
	}
	if a := d.hqdRead(abi.REG_HQD_ACTIVE); a != 0 {
		t.Errorf("HQD_ACTIVE %d after the client that started it left", a)
	}
	if got := d.r.reg(abi.REG_L2_DISCARDED); uint64(got) != lost {
		t.Errorf("L2_DISCARDED %d, diagnostics say %d", got, lost)
	}
	// The configuration stayed and the device works for the new client.
	d.startQueue()
	d.submit(pm4.WriteMem(target, 0x600D), pm4.Fence(abi.GPU_FB_BASE+ltFence, 7, 7, false))
	eventually(t, "second client's fence", func() bool { return d.fence() == 7 })
	if got := binary.LittleEndian.Uint32(d.mem.Bytes()[0x100:]); got != 0x600D {
		t.Errorf("second client's write: %#x", got)
	}
}

// line is one L2 line of dwords v.
func line(v uint32) []uint32 {
	out := make([]uint32, 32)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestResetsStopEngines: a queue parked in a wait, at each kind of reset, is inactive after it
// and never acts again, although the memory it waits on then satisfies it.
func TestResetsStopEngines(t *testing.T) {
	resets := []struct {
		name  string
		reset func(d *driver)
	}{
		{"DEVICE_RESET", func(d *driver) {
			if err := d.r.c.Reset(); err != nil {
				d.t.Fatal(err)
			}
		}},
		{"FLR", func(d *driver) {
			d.r.cfgWrite(uint64(d.r.findCap(0x10))+8, 2, 1<<15) // Device Control: Initiate FLR
		}},
	}
	for _, tc := range resets {
		t.Run(tc.name, func(t *testing.T) {
			dev := newSharedDevice(t)
			d := attach(t, dev, 0xFF, true)
			d.startQueue()
			d.submit(pm4.WaitRegMem{Function: pm4.FuncEQ, Space: pm4.SpaceMem,
				CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, Addr: ltGART0, Ref: 0, Mask: 0xFFFFFFFF, Interval: 10}.Encode(),
				pm4.WriteData{Dst: abi.PM4_WRITE_DATA_DST_MEM, Addr: ltGART0 + 0x100, Data: []uint32{0xDEAD}}.Encode())
			eventually(t, "queue parked", func() bool {
				return d.hqdRead(abi.REG_HQD_STATUS)&abi.REG_HQD_STATUS__STATE_MASK == abi.HQD_STATE_WAITING
			})
			tc.reset(d)
			d.r.enable(false) // memory decoding back on to read the registers; Bus Master stays off
			if a := d.hqdRead(abi.REG_HQD_ACTIVE); a != 0 {
				t.Fatalf("HQD_ACTIVE %d right after the reset returned", a)
			}
			// Satisfy the old wait and give the device back its Bus Master: nothing may move.
			clear(d.mem.Bytes())
			d.r.enable(true)
			time.Sleep(50 * time.Millisecond)
			if got := binary.LittleEndian.Uint32(d.mem.Bytes()[0x100:]); got != 0 {
				t.Fatalf("a queue stopped by %s wrote %#x after it", tc.name, got)
			}
		})
	}
}

// TestSelftestDMAStopsAtCutOff: a self-test transfer accepted before an FLR or a disconnect
// never lands after it, even when Bus Master is on again at once (the transfer's write races
// the cut-off, so each case is tried several times).
func TestSelftestDMAStopsAtCutOff(t *testing.T) {
	const iova, n, tries = 0x1_0000_0000, abi.SELFTEST_DMA_MAX_LEN, 10
	start := func(t *testing.T, r *rig) *vfiousertest.GuestMemory {
		mem, err := vfiousertest.NewGuestMemory(2 << 20)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mem.Close() })
		if err := r.c.DMAMap(iova, mem, 0, 2<<20, vfiousertest.MapOptions{}); err != nil {
			t.Fatal(err)
		}
		r.enable(true)
		r.setReg(abi.REG_SELFTEST_DMA_ADDR_LO, uint32(iova&0xffffffff))
		r.setReg(abi.REG_SELFTEST_DMA_ADDR_HI, uint32(iova>>32))
		r.setReg(abi.REG_SELFTEST_DMA_LEN, n)
		r.setReg(abi.REG_SELFTEST_DMA_PATTERN, 0xA0000000)
		r.setReg(abi.REG_SELFTEST_DMA_CTRL, abi.REG_SELFTEST_DMA_CTRL__GO_MASK)
		return mem
	}
	landed := func(mem *vfiousertest.GuestMemory) bool {
		time.Sleep(20 * time.Millisecond)
		b := mem.Bytes()
		return b[0] != 0 || b[n-4] != 0
	}
	t.Run("FLR", func(t *testing.T) {
		for i := range tries {
			r := newRig(t)
			mem := start(t, r)
			exp := r.findCap(0x10)
			r.cfgWrite(exp+8, 2, r.cfgRead(exp+8, 2)|1<<15)
			r.enable(true) // the driver brings the function back up at once
			clear(mem.Bytes()[:n])
			if landed(mem) {
				t.Fatalf("try %d: a transfer accepted before the FLR landed after it", i)
			}
		}
	})
	t.Run("disconnect", func(t *testing.T) {
		for i := range tries {
			dev := newSharedDevice(t)
			t.Run("first client", func(t *testing.T) {
				start(t, &rig{t: t, dev: dev, c: vfiousertest.NewPair(t, dev)})
			})
			r := &rig{t: t, dev: dev, c: vfiousertest.NewPair(t, dev)}
			mem, err := vfiousertest.NewGuestMemory(2 << 20)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { mem.Close() })
			if err := r.c.DMAMap(iova, mem, 0, 2<<20, vfiousertest.MapOptions{}); err != nil {
				t.Fatal(err)
			}
			r.enable(true)
			if landed(mem) {
				t.Fatalf("try %d: the first client's transfer landed in the next client's memory", i)
			}
		}
	})
}

// TestPolledDoorbellNewQueue: a queue started on a doorbell that an earlier queue used gets its
// first ring even when it writes the earlier queue's last wptr (the same first job). A polled
// doorbell only sees changes; before the device zeroed the doorbell at activation, that ring
// was lost and the queue never ran (the guest suite's poll-mode boot, on a reused slot).
func TestPolledDoorbellNewQueue(t *testing.T) {
	cfg := DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow = 16<<20, 16<<20
	cfg.Doorbells = bars.DoorbellPoll
	dev, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	d := attach(t, dev, 0, true)
	for round := uint32(1); round <= 3; round++ {
		d.startQueue()
		// The same packets every round: the doorbell gets the same wptr each time.
		d.submit(pm4.ReleaseMem{CachePolicy: abi.PM4_CACHE_POLICY_BYPASS, DataSel: pm4.Data32,
			Addr: abi.GPU_FB_BASE + ltFence, Data: 0x100}.Encode())
		eventually(t, fmt.Sprintf("round %d's fence", round), func() bool { return d.fence() == 0x100 })
		binary.LittleEndian.PutUint32(d.vram[ltFence:], 0)
		d.hqd(abi.REG_HQD_DEQUEUE_REQUEST, abi.HQD_DEQUEUE_RESET)
		eventually(t, "queue stopped", func() bool { return d.hqdRead(abi.REG_HQD_ACTIVE) == 0 })
	}
}
