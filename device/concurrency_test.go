package device

import (
	"encoding/binary"
	"testing"

	"vgpu/abi"
	"vgpu/pm4"
)

// TestConcurrentQueuesShareLines runs eight queues at once through the whole device path
// (CP, GPU MMU and GART, L2, guest memory and VRAM), each writing its own dword of the same
// cache lines (in guest memory through the GART, and in VRAM), copying its own region with
// DMA_DATA through the L2, and fencing each round with an L2 write-back, while the client
// keeps writing back and invalidating the L2 and the TLBs through registers. When every fence
// has landed, memory must hold every queue's last value in every shared line and every copy.
// Run with -race.
func TestConcurrentQueuesShareLines(t *testing.T) {
	const (
		queues    = 8
		rounds    = 16
		lines     = 4
		ringDw    = 1024
		ringBase  = 0x100000 // VRAM: queue q's ring at ringBase + q*0x1000
		fenceBase = 0x180000 // VRAM: queue q's fence dword at fenceBase + q*64
		vramLines = 0x190000 // VRAM: the shared lines
		copyDst   = 0x1A0000 // VRAM: queue q copies to copyDst + q*0x400
		copySrc   = 0x8000   // guest memory: queue q copies from copySrc + q*0x400
		copyBytes = 0x300
	)
	dev := newSharedDevice(t)
	d := attach(t, dev, 0, false)
	for i := range ltGuest - copySrc {
		d.mem.Bytes()[copySrc+i] = byte(i*7 + i>>8)
	}
	fb := uint64(abi.GPU_FB_BASE)
	val := func(q, r int) uint32 { return uint32(q)<<16 | uint32(r) }
	for q := 1; q <= queues; q++ {
		var ring []uint32
		for r := 1; r <= rounds; r++ {
			for l := range lines {
				ring = append(ring, pm4.WriteMem(ltGART0+uint64(l)*128+uint64(q)*4, val(q, r))...)
				ring = append(ring, pm4.WriteMem(fb+vramLines+uint64(l)*128+uint64(q)*4, val(q, r))...)
			}
			ring = append(ring, pm4.DMACopy(fb+copyDst+uint64(q)*0x400, ltGART0+copySrc+uint64(q)*0x400, copyBytes)...)
			ring = append(ring, pm4.Fence(fb+fenceBase+uint64(q)*64, uint32(r), 0, false)...)
		}
		if len(ring) > ringDw {
			t.Fatalf("queue %d's program of %d dwords does not fit its ring", q, len(ring))
		}
		base := uint64(ringBase + q*0x1000)
		for i, dw := range ring {
			binary.LittleEndian.PutUint32(d.vram[base+uint64(4*i):], dw)
		}
		hqd := func(reg, v uint32) { d.r.setReg(abi.BLOCK_HQD_BASE+uint32(q)*abi.BLOCK_HQD_STRIDE+reg, v) }
		hqd(abi.REG_HQD_PQ_BASE_LO, uint32(fb+base))
		hqd(abi.REG_HQD_PQ_BASE_HI, uint32((fb+base)>>32))
		hqd(abi.REG_HQD_PQ_CONTROL, 9) // 1024 dwords
		hqd(abi.REG_HQD_ACTIVE, 1)
		hqd(abi.REG_HQD_PQ_WPTR_LO, uint32(len(ring)))
	}
	fence := func(q int) uint32 { return binary.LittleEndian.Uint32(d.vram[fenceBase+q*64:]) }
	done := func() bool {
		for q := 1; q <= queues; q++ {
			if fence(q) != rounds {
				return false
			}
		}
		return true
	}
	for i := 0; !done(); i++ {
		switch i % 3 {
		case 0:
			d.r.setReg(abi.REG_L2_CONTROL, abi.REG_L2_CONTROL__WB_MASK|abi.REG_L2_CONTROL__INV_MASK)
		case 1:
			d.r.setReg(abi.REG_GMC_VM_INVALIDATE, 1)
		case 2:
			for q := 1; q <= queues; q++ {
				st := d.r.reg(abi.BLOCK_HQD_BASE + uint32(q)*abi.BLOCK_HQD_STRIDE + abi.REG_HQD_STATUS)
				if st&abi.REG_HQD_STATUS__STATE_MASK == abi.HQD_STATE_HALTED {
					t.Fatalf("queue %d halted (status %#x)", q, st)
				}
			}
		}
		if i > 1e6 {
			t.Fatal("fences not written")
		}
	}
	for q := 1; q <= queues; q++ {
		for l := range lines {
			if got := binary.LittleEndian.Uint32(d.mem.Bytes()[l*128+q*4:]); got != val(q, rounds) {
				t.Errorf("guest line %d, queue %d's dword: %#x, want %#x", l, q, got, val(q, rounds))
			}
			if got := binary.LittleEndian.Uint32(d.vram[vramLines+l*128+q*4:]); got != val(q, rounds) {
				t.Errorf("VRAM line %d, queue %d's dword: %#x, want %#x", l, q, got, val(q, rounds))
			}
		}
		src := d.mem.Bytes()[copySrc+q*0x400:][:copyBytes]
		dst := d.vram[copyDst+q*0x400:][:copyBytes]
		if string(src) != string(dst) {
			t.Errorf("queue %d's copy differs from its source", q)
		}
	}
}
