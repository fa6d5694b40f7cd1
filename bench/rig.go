package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"vgpu/abi"
	"vgpu/bars"
	"vgpu/device"
	"vgpu/pm4"
	"vgpu/trace"
	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

// VRAM layout used by the rig (offsets into VRAM; GPU address = GPU_FB_BASE + offset).
const (
	vramIH      = 0x0000000 // 64 KiB IH ring
	vramIHWptr  = 0x0010000 // IH wptr write-back
	vramFence   = 0x0010100 // fence dword
	vramRptr    = 0x0010200 // rptr report
	vramScratch = 0x0011000 // WRITE_DATA targets
	vramStamps  = 0x0012000 // GPU-clock timestamps (engine_time.go)
	vramGART    = 0x0100000 // GART table
	vramRing    = 0x0800000 // ring (up to 8 MiB)
	vramCopyDst = 0x1000000 // DMA_DATA destinations (two areas of up to 64 MiB)

	gartBase   = 0x0000010000000000 // GPU address of the GART aperture
	guestIOVA  = 0x100000000        // where the rig maps its guest memory
	computeQ   = 1                  // HQD slot used (compute pipe 0 queue 0)
	doorbellQW = 3                  // its 64-bit doorbell
)

// rigVRAM is the VRAM (and BAR0 window) of every rig's device.
const rigVRAM = 256 << 20

// Rig is a device served to a Go client that drives it like a driver.
type Rig struct {
	Dev    *device.Device // nil when the device runs in a child process
	C      *vfiousertest.Client
	VRAM   []byte // BAR0 as the client mapped it
	Guest  *vfiousertest.GuestMemory
	IRQ    []int  // MSI-X eventfds
	Poll   []byte // doorbell page (poll mode)
	ring   []byte // the ring, inside VRAM
	wptr   uint64 // dwords
	size   uint64 // ring size in dwords
	closer []func() error
}

// RigConfig shapes a rig.
type RigConfig struct {
	Doorbells  bars.DoorbellMode
	RingDwords uint64 // power of two, 64 .. 2^21
	GuestBytes int    // guest memory mapped at guestIOVA and through the GART (0: none)
	NoQueue    bool   // leave every queue inactive
	Process    bool   // serve the device from a child process (see ServeIfChild)
	// ComputeUnits (in-process rigs only; 0: the device's default) shapes the compute units.
	ComputeUnits int
	// Trace (in-process rigs only) records the device's and the server's timeline (trace.go).
	Trace *trace.Recorder
}

// NewRig starts a device and brings up the IH ring, one compute queue (unless NoQueue) and
// (with guest memory) the GART.
func NewRig(rc RigConfig) (*Rig, error) {
	if !rc.NoQueue && (rc.RingDwords < 64 || rc.RingDwords > 1<<21 || rc.RingDwords&(rc.RingDwords-1) != 0) {
		return nil, fmt.Errorf("rig: ring of %d dwords: want a power of two from 64 to 2^21", rc.RingDwords)
	}
	r := &Rig{size: rc.RingDwords}
	var err error
	if rc.Process {
		err = r.connectChild(rc.Doorbells)
	} else {
		err = r.connect(rc.Doorbells, rc.ComputeUnits, rc.Trace)
	}
	if err == nil {
		_, err = r.C.Negotiate()
	}
	if err == nil {
		err = r.bringUp(rc)
	}
	if err != nil {
		return nil, errors.Join(err, r.Close())
	}
	return r, nil
}

// connect serves a device in this process over a socketpair.
func (r *Rig) connect(mode bars.DoorbellMode, cus int, rec *trace.Recorder) error {
	dev, err := newDevice(mode, cus, func(c *device.Config) { c.Trace = rec })
	if err != nil {
		return err
	}
	r.Dev = dev
	r.closer = append(r.closer, func() error { return dev.Close() })
	sc, cc, err := vfiousertest.Socketpair()
	if err != nil {
		return err
	}
	srv := vfiouser.NewServer(dev, slog.New(slog.NewTextHandler(io.Discard, nil)), vfiouser.WithTrace(rec))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.ServeConn(ctx, sc); close(done) }()
	r.closer = append(r.closer, func() error { cancel(); sc.Close(); <-done; return nil })
	if r.C, err = vfiousertest.NewClient(cc); err != nil {
		return err
	}
	r.closer = append(r.closer, r.C.Close)
	return nil
}

// connectChild serves a device from a child process.
func (r *Rig) connectChild(mode bars.DoorbellMode) error {
	cc, wait, err := startChild(mode)
	if err != nil {
		return err
	}
	r.closer = append(r.closer, wait)
	if r.C, err = vfiousertest.NewClient(cc); err != nil {
		return err
	}
	r.closer = append(r.closer, r.C.Close) // hanging up ends the child
	return nil
}

func (r *Rig) bringUp(rc RigConfig) error {
	m, err := r.C.MmapRegion(abi.BAR_VRAM)
	if err != nil {
		return err
	}
	r.closer = append(r.closer, m.Close)
	r.VRAM = m.At(0, rigVRAM)
	if rc.Doorbells == bars.DoorbellPoll {
		pm, err := r.C.MmapRegion(abi.BAR_DOORBELL)
		if err != nil {
			return err
		}
		r.closer = append(r.closer, pm.Close)
		r.Poll = pm.At(0, abi.DOORBELL_SIZE)
	}
	// pci_enable_device + pci_set_master, then MSI-X.
	if err := r.cfg16(0x04, 0x6); err != nil {
		return err
	}
	if err := r.enableMSIX(); err != nil {
		return err
	}
	if rc.GuestBytes > 0 {
		if err := r.mapGuest(rc.GuestBytes); err != nil {
			return err
		}
	}
	// IH ring: 64 KiB in VRAM, wptr write-back, overwrite on overflow so the rig never has
	// to acknowledge entries on the measured path.
	fb := uint64(abi.GPU_FB_BASE)
	ih := fb + vramIH
	wb := fb + vramIHWptr
	for _, w := range [][2]uint32{
		{abi.REG_IH_RB_BASE_LO, uint32(ih)}, {abi.REG_IH_RB_BASE_HI, uint32(ih >> 32)},
		{abi.REG_IH_RB_WPTR_ADDR_LO, uint32(wb)}, {abi.REG_IH_RB_WPTR_ADDR_HI, uint32(wb >> 32)},
		{abi.REG_IH_RB_CNTL, 14<<abi.REG_IH_RB_CNTL__RB_SIZE__SHIFT | abi.REG_IH_RB_CNTL__RB_ENABLE_MASK |
			abi.REG_IH_RB_CNTL__ENABLE_INTR_MASK | abi.REG_IH_RB_CNTL__WPTR_WRITEBACK_ENABLE_MASK |
			abi.REG_IH_RB_CNTL__WPTR_OVERFLOW_ENABLE_MASK},
	} {
		if err := r.SetReg(w[0], w[1]); err != nil {
			return err
		}
	}
	if rc.NoQueue {
		return nil
	}
	return r.startQueue()
}

func (r *Rig) startQueue() error {
	fb := uint64(abi.GPU_FB_BASE)
	ring, rptr := fb+vramRing, fb+vramRptr
	log2 := uint32(0)
	for 1<<log2 < r.size {
		log2++
	}
	r.ring = r.VRAM[vramRing : vramRing+4*r.size]
	clear(r.ring)
	hqd := func(reg, v uint32) error {
		return r.SetReg(abi.BLOCK_HQD_BASE+computeQ*abi.BLOCK_HQD_STRIDE+reg, v)
	}
	for _, w := range [][2]uint32{
		{abi.REG_HQD_PQ_BASE_LO, uint32(ring)}, {abi.REG_HQD_PQ_BASE_HI, uint32(ring >> 32)},
		{abi.REG_HQD_PQ_CONTROL, log2 - 1},
		{abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO, uint32(rptr)}, {abi.REG_HQD_PQ_RPTR_REPORT_ADDR_HI, uint32(rptr >> 32)},
		{abi.REG_HQD_PQ_DOORBELL_CONTROL, 2*doorbellQW<<abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT |
			abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK},
		{abi.REG_HQD_ACTIVE, 1},
	} {
		if err := hqd(w[0], w[1]); err != nil {
			return err
		}
	}
	r.wptr = 0
	return nil
}

func (r *Rig) cfg16(off uint64, v uint16) error {
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], v)
	return r.C.Write(7, off, b[:])
}

func (r *Rig) enableMSIX() error {
	var b [1]byte
	for p := uint64(0x34); ; {
		if err := r.C.Read(7, p, b[:]); err != nil {
			return err
		}
		p = uint64(b[0])
		if p == 0 {
			return fmt.Errorf("no MSI-X capability")
		}
		if err := r.C.Read(7, p, b[:]); err != nil {
			return err
		}
		if b[0] == 0x11 {
			if err := r.cfg16(p+2, 1<<15); err != nil {
				return err
			}
			break
		}
		p++
	}
	fds, err := r.C.EnableMSIX(1)
	r.IRQ = fds
	return err
}

// mapGuest maps n bytes of guest memory at guestIOVA and exposes them at gartBase through a
// GART table in VRAM.
func (r *Rig) mapGuest(n int) error {
	g, err := vfiousertest.NewGuestMemory(n)
	if err != nil {
		return err
	}
	r.Guest = g
	r.closer = append(r.closer, g.Close)
	if err := r.C.DMAMap(guestIOVA, g, 0, uint64(n), vfiousertest.MapOptions{}); err != nil {
		return err
	}
	pages := uint64(n) / abi.PTE_PAGE_SIZE
	for i := uint64(0); i < pages; i++ {
		pte := (guestIOVA + i*abi.PTE_PAGE_SIZE) | abi.PTE_VALID_MASK | abi.PTE_SYSTEM_MASK |
			abi.PTE_READABLE_MASK | abi.PTE_WRITEABLE_MASK | abi.PTE_MTYPE_UC<<abi.PTE_MTYPE__SHIFT
		binary.LittleEndian.PutUint64(r.VRAM[vramGART+8*i:], pte)
	}
	end := uint64(gartBase) + pages*abi.PTE_PAGE_SIZE - 1
	table := uint64(vramGART) | abi.PDE_VALID_MASK
	for _, w := range [][2]uint32{
		{abi.REG_GMC_GART_START_LO, uint32(gartBase & 0xffffffff)}, {abi.REG_GMC_GART_START_HI, uint32(gartBase >> 32)},
		{abi.REG_GMC_GART_END_LO, uint32(end)}, {abi.REG_GMC_GART_END_HI, uint32(end >> 32)},
		{abi.REG_GMC_GART_TABLE_LO, uint32(table)}, {abi.REG_GMC_GART_TABLE_HI, uint32(table >> 32)},
		{abi.REG_GMC_GART_CNTL, abi.REG_GMC_GART_CNTL__ENABLE_MASK},
		{abi.REG_GMC_VM_INVALIDATE, 1},
	} {
		if err := r.SetReg(w[0], w[1]); err != nil {
			return err
		}
	}
	return nil
}

// SetReg writes a register (a trapped REGION_WRITE).
func (r *Rig) SetReg(off, v uint32) error {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return r.C.Write(abi.BAR_REGS, uint64(off), b[:])
}

// Reg reads a register.
func (r *Rig) Reg(off uint32) (uint32, error) {
	var b [4]byte
	err := r.C.Read(abi.BAR_REGS, uint64(off), b[:])
	return binary.LittleEndian.Uint32(b[:]), err
}

// Emit writes packets at the ring's wptr (no kick).
func (r *Rig) Emit(dws []uint32) {
	mask := r.size - 1 // a power of two: no division per dword on the measured path
	for _, dw := range dws {
		binary.LittleEndian.PutUint32(r.ring[4*(r.wptr&mask):], dw)
		r.wptr++
	}
}

// Kick rings the queue's doorbell with the wptr: a trapped write, or a store to the mmapped
// page in poll mode.
func (r *Rig) Kick() error {
	if r.Poll != nil {
		binary.LittleEndian.PutUint64(r.Poll[8*doorbellQW:], r.wptr)
		return nil
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], r.wptr)
	return r.C.Write(abi.BAR_DOORBELL, 8*doorbellQW, b[:])
}

// FenceGPU is the GPU address of the rig's fence dword.
func FenceGPU() uint64 { return abi.GPU_FB_BASE + vramFence }

// Fence reads the fence dword from VRAM.
func (r *Rig) Fence() uint32 { return binary.LittleEndian.Uint32(r.VRAM[vramFence:]) }

// WaitFence waits for the fence to reach seq (fences count up; a later one may already be
// there). The fence must interrupt: the wait blocks on the interrupt's eventfd, as a driver
// sleeps on its fence interrupt, rather than spinning beside the device on a shared machine
// or sleeping (a timer sleep here overshoots by about a millisecond).
func (r *Rig) WaitFence(seq uint32, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for int32(r.Fence()-seq) < 0 {
		left := time.Until(deadline)
		if left <= 0 {
			st, _ := r.Reg(abi.BLOCK_HQD_BASE + computeQ*abi.BLOCK_HQD_STRIDE + abi.REG_HQD_STATUS)
			return fmt.Errorf("fence %d not written after %v (fence %d, HQD_STATUS %#x)", seq, timeout, r.Fence(), st)
		}
		if _, err := vfiousertest.WaitIRQ(r.IRQ[0], left); err != nil && !errors.Is(err, vfiousertest.ErrTimeout) {
			return err
		}
	}
	return nil
}

// WaitIRQ waits for the IH vector's eventfd.
func (r *Rig) WaitIRQ(timeout time.Duration) error {
	_, err := vfiousertest.WaitIRQ(r.IRQ[0], timeout)
	return err
}

// Close tears the rig down and reports what failed on the way (a child server's exit).
func (r *Rig) Close() error {
	var errs []error
	for i := len(r.closer) - 1; i >= 0; i-- {
		if err := r.closer[i](); err != nil {
			errs = append(errs, err)
		}
	}
	r.closer = nil
	return errors.Join(errs...)
}

// fence is the packet a job ends with: amdgpu's end-of-pipe fence with an interrupt.
func fence(seq uint32, irq bool) []uint32 { return pm4.Fence(FenceGPU(), seq, seq, irq) }
