package device

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"vgpu/abi"
	"vgpu/pm4"
)

// TestRingDump: a queue stopped on a wait has the wait and what follows it pending; the dump
// reads them from the ring through the FB aperture. Slots without a queue are named errors.
func TestRingDump(t *testing.T) {
	dev := newSharedDevice(t)
	d := attach(t, dev, 0, true)
	d.startQueue()
	d.submit(pm4.WriteMem(abi.GPU_FB_BASE+ltFence, 7))
	wait := pm4.WaitMem(abi.GPU_FB_BASE+ltFence+64, 1)
	after := pm4.WriteMem(abi.GPU_FB_BASE+ltFence+4, 8)
	d.submit(wait, after)
	eventually(t, "queue waiting", func() bool { return d.state() == abi.HQD_STATE_WAITING })
	r, err := dev.RingDump(ltSlot)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(wait), after...); !slices.Equal(r.Dwords, want) || r.Start != r.Rptr || r.Wptr != d.wptr || r.VMID != 0 {
		t.Fatalf("dump %+v, want %#x", r, want)
	}
	for _, tc := range []struct {
		slot int
		want error
	}{{-1, ErrNoSuchSlot}, {99, ErrNoSuchSlot}, {ltSlot + 1, ErrSlotInactive}} {
		if _, err := dev.RingDump(tc.slot); !errors.Is(err, tc.want) {
			t.Errorf("slot %d: %v, want %v", tc.slot, err, tc.want)
		}
	}
}

// TestRingDumpGART: a ring in system memory behind the GART is read through the GART entry
// and the mmapped guest memory, across the ring's wrap.
func TestRingDumpGART(t *testing.T) {
	dev := newSharedDevice(t)
	d := attach(t, dev, 0, true)
	const ringOff, ringDw = 0x2000, 1024 // guest memory offset; 2^(9+1) dwords
	ring := uint64(ltGART0 + ringOff)
	d.hqd(abi.REG_HQD_PQ_BASE_LO, uint32(ring))
	d.hqd(abi.REG_HQD_PQ_BASE_HI, uint32(ring>>32))
	d.hqd(abi.REG_HQD_PQ_CONTROL, 9)
	report := uint64(abi.GPU_FB_BASE + ltRptr)
	d.hqd(abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO, uint32(report))
	d.hqd(abi.REG_HQD_PQ_RPTR_REPORT_ADDR_HI, uint32(report>>32))
	d.hqd(abi.REG_HQD_PQ_DOORBELL_CONTROL, 2*ltDoorbell<<abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT|
		abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK)
	d.hqd(abi.REG_HQD_ACTIVE, 1)
	// A NOP up to two dwords before the ring's end, run; then a wait that wraps to its start
	// (over the NOP, as a driver reuses its ring).
	start := uint64(ringDw - 2)
	put := func(at uint64, dws []uint32) {
		for i, dw := range dws {
			binary.LittleEndian.PutUint32(d.mem.Bytes()[ringOff+4*((at+uint64(i))%ringDw):], dw)
		}
	}
	ring64 := func(w uint64) { // the doorbell
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], w)
		if err := d.r.c.Write(abi.BAR_DOORBELL, 8*ltDoorbell, b[:]); err != nil {
			t.Fatal(err)
		}
	}
	put(0, pm4.Nop(int(start)))
	ring64(start)
	eventually(t, "the NOP done", func() bool { return d.hqdRead(abi.REG_HQD_PQ_RPTR) == uint32(start) })
	wait := pm4.WaitMem(abi.GPU_FB_BASE+ltFence+64, 1)
	put(start, wait)
	ring64(start + uint64(len(wait)))
	eventually(t, "queue waiting", func() bool { return d.state() == abi.HQD_STATE_WAITING })
	r, err := dev.RingDump(ltSlot)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Dwords, wait) || r.Start != start {
		t.Fatalf("dump %+v, want %#x from %d", r, wait, start)
	}
}
