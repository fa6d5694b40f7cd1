package hostile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"
	"unsafe"

	"vgpu/abi"
	"vgpu/vfiouser/vfiousertest"
)

// livenessTimeout bounds every wait for the server: a register read, a reset, the SIGUSR1
// report. It detects a hang; it is not a speed assertion.
const livenessTimeout = 5 * time.Second

// Region index of PCI config space in vfio-user.
const regionConfig = 7

// VRAM layout (offsets; GPU address = GPU_FB_BASE + offset). Everything the CPU writes lies
// inside the BAR window.
const (
	vIH        = 0x000000 // IH ring, up to 64 KiB
	vIHWptr    = 0x010000 // IH wptr write-back
	vRptr      = 0x011000 // + 64·slot: rptr reports
	vPoll      = 0x020000 // + 256·slot: polled write pointers, one L2 line each (engines update them through L2)
	vFence     = 0x013000 // + 64·slot: fences in VRAM
	vMarker    = 0x014000 // + 64·slot: markers and gates
	vGART      = 0x100000 // the GART table
	vRing      = 0x200000 // + slot·ringStride: rings
	ringStride = 0x40000  // 256 KiB: rings of up to 2^16 dwords
	vIB        = 0x800000 // + slot·ibStride: indirect buffers
	ibStride   = 0x40000
	vScratch   = 0x1000000 // 16 MiB .. 64 MiB: engine scratch inside the window
	vBig       = 0x4000000 // 64 MiB .. 256 MiB: GPU-only VRAM beyond the BAR
)

// GART: an aperture at gartBase whose pages map the guest areas, plus pages that point where
// accesses must fail.
const (
	gartBase  = 0x10_0000_0000
	gSys      = 0    // 2048 pages: the sys area
	gPastSys  = 2048 // → the IOVA just past the sys mapping (unmapped)
	gSmall    = 2049 // 16 pages: small
	gNofd     = 2065 // 64 pages: nofd (DMA messages)
	gTop      = 2129 // 16 PTEs written with top's IOVAs, which need more than 48 bits: must fault
	gInvalid  = 2145 // PTE without VALID
	gVRAMEnd  = 2146 // → the last VRAM page (not system memory)
	gPastVRAM = 2147 // → VRAM offset = VRAM size
	gReadOnly = 2148 // → sys page 0 without WRITEABLE
	gPages    = 2149
)

func gart(page uint64) uint64 { return gartBase + page*abi.PTE_PAGE_SIZE }
func fb(off uint64) uint64    { return abi.GPU_FB_BASE + off }

// gartIOVA is the GPU address that reaches a sys-area IOVA.
func gartSys(iova uint64) uint64 { return gart(gSys) + (iova - sysIOVA) }

// ringTestIOVA is the sys page the ring test writes (always allowed to change).
const ringTestIOVA = sysIOVA + 0x1000

// doorbellBase is the first 64-bit doorbell the suite's queues use (slot s rings doorbellBase+s).
const doorbellBase = 8

const numSlots = abi.BLOCK_HQD_COUNT

func hqd(slot int, reg uint32) uint32 {
	return abi.BLOCK_HQD_BASE + uint32(slot)*abi.BLOCK_HQD_STRIDE + reg
}

// driver is one client doing what QEMU and a guest driver do.
type driver struct {
	c    *vfiousertest.Client
	bar  *vfiousertest.Mapping
	vram []byte // BAR0: the CPU-visible VRAM
	mem  *guestMem
	irq  []int // eventfds of MSI-X vectors 0.., as last registered
	caps map[byte]uint64
	// dbPage is the doorbell BAR when the server polls it (--doorbell poll): doorbells are
	// then rung by storing to it, as a guest does through QEMU's mapping.
	dbMap  *vfiousertest.Mapping
	dbPage []byte
}

// dial connects and negotiates like QEMU, maps BAR0 and finds the capabilities.
func dial(socket string) (*driver, error) {
	uc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return nil, err
	}
	c, err := vfiousertest.NewClient(uc, vfiousertest.WithTimeout(livenessTimeout))
	if err != nil {
		return nil, err
	}
	d := &driver{c: c, caps: map[byte]uint64{}}
	if _, err := c.Negotiate(); err != nil {
		c.Close()
		return nil, fmt.Errorf("negotiate: %w", err)
	}
	if d.bar, err = c.MmapRegion(abi.BAR_VRAM); err != nil {
		c.Close()
		return nil, fmt.Errorf("mmap BAR0: %w", err)
	}
	if d.vram = d.bar.At(0, vramWindow); d.vram == nil {
		d.close()
		return nil, errors.New("BAR0 mapping is smaller than the window")
	}
	if err := d.findCaps(); err != nil {
		d.close()
		return nil, err
	}
	if mode, err := d.reg(abi.REG_ID_DOORBELL_MODE); err == nil && mode == abi.DOORBELL_MODE_POLL {
		if d.dbMap, err = c.MmapRegion(abi.BAR_DOORBELL); err != nil {
			d.close()
			return nil, fmt.Errorf("mmap the polled doorbell BAR: %w", err)
		}
		d.dbPage = d.dbMap.At(0, abi.DOORBELL_SIZE)
	}
	return d, nil
}

// redial connects again: right after a disconnect the server may still be tearing the old
// connection down and refuse a second client, so it retries until livenessTimeout.
func redial(socket string) (*driver, error) {
	deadline := time.Now().Add(livenessTimeout)
	for {
		d, err := dial(socket)
		if err == nil || time.Now().After(deadline) {
			return d, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// close disconnects (the client's eventfds are closed) and unmaps BAR0; guest memory stays
// with its owner.
func (d *driver) close() {
	d.c.Close()
	if d.bar != nil {
		d.bar.Close()
	}
	if d.dbMap != nil {
		d.dbMap.Close()
	}
}

// ring rings 64-bit doorbell index with v: a store to the shared page in poll mode, else a
// trapped write (posted: without waiting for the reply).
func (d *driver) ring(index uint64, v uint64, posted bool) error {
	if d.dbPage != nil {
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&d.dbPage[8*index])), v)
		return nil
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	if posted {
		return d.c.PostWrite(abi.BAR_DOORBELL, 8*index, b[:])
	}
	return d.c.Write(abi.BAR_DOORBELL, 8*index, b[:])
}

func (d *driver) findCaps() error {
	p, err := d.cfgRead(0x34, 1)
	for n := 0; err == nil && p != 0 && n < 48; n++ {
		var id, next uint32
		if id, err = d.cfgRead(uint64(p), 1); err != nil {
			break
		}
		if next, err = d.cfgRead(uint64(p)+1, 1); err != nil {
			break
		}
		d.caps[byte(id)] = uint64(p)
		p = next &^ 3
	}
	if err != nil {
		return fmt.Errorf("capability list: %w", err)
	}
	if d.caps[0x10] == 0 || d.caps[0x11] == 0 {
		return fmt.Errorf("capabilities %v: want Express and MSI-X", d.caps)
	}
	return nil
}

func (d *driver) cfgRead(off uint64, n int) (uint32, error) {
	var b [4]byte
	err := d.c.Read(regionConfig, off, b[:n])
	return binary.LittleEndian.Uint32(b[:]), err
}

func (d *driver) cfgWrite(off uint64, n int, v uint32) error {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return d.c.Write(regionConfig, off, b[:n])
}

// flr sets Initiate Function Level Reset in the Express Device Control register.
func (d *driver) flr() error {
	ctl, err := d.cfgRead(d.caps[0x10]+8, 2)
	if err != nil {
		return err
	}
	return d.cfgWrite(d.caps[0x10]+8, 2, ctl|1<<15)
}

func (d *driver) reg(off uint32) (uint32, error) {
	var b [4]byte
	err := d.c.Read(abi.BAR_REGS, uint64(off), b[:])
	return binary.LittleEndian.Uint32(b[:]), err
}

func (d *driver) setReg(off, v uint32) error {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return d.c.Write(abi.BAR_REGS, uint64(off), b[:])
}

// postReg writes a register without waiting (QEMU's posted MMIO writes).
func (d *driver) postReg(off, v uint32) error {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return d.c.PostWrite(abi.BAR_REGS, uint64(off), b[:])
}

func (d *driver) setRegs(pairs ...[2]uint32) error {
	for _, p := range pairs {
		if err := d.setReg(p[0], p[1]); err != nil {
			return fmt.Errorf("write %s (%#x) = %#x: %w", regName(p[0]), p[0], p[1], err)
		}
	}
	return nil
}

func regName(off uint32) string {
	if n := abi.RegisterNames[off]; n != "" {
		return n
	}
	return "register"
}

// set64 writes a LO/HI register pair.
func set64(lo uint32, v uint64) [][2]uint32 {
	return [][2]uint32{{lo, uint32(v)}, {lo + 4, uint32(v >> 32)}}
}

// alive reads ID_MAGIC: the liveness probe.
func (d *driver) alive() (time.Duration, error) {
	start := time.Now()
	v, err := d.reg(abi.REG_ID_MAGIC)
	if err != nil {
		return time.Since(start), err
	}
	if v != abi.ID_MAGIC_VALUE {
		return time.Since(start), fmt.Errorf("ID_MAGIC reads %#x, want %#x", v, abi.ID_MAGIC_VALUE)
	}
	return time.Since(start), nil
}

// enable is pci_enable_device + pci_set_master + MSI-X with fresh eventfds on every vector.
func (d *driver) enable() error {
	if err := d.cfgWrite(0x04, 2, 0x0006); err != nil {
		return fmt.Errorf("COMMAND: %w", err)
	}
	if err := d.cfgWrite(d.caps[0x11]+2, 2, 1<<15); err != nil {
		return fmt.Errorf("MSI-X enable: %w", err)
	}
	fds, err := d.c.EnableMSIX(msixCount)
	if err != nil {
		return fmt.Errorf("SET_IRQS MSI-X: %w", err)
	}
	d.irq = fds
	return nil
}

// attach maps guest memory (all areas).
func (d *driver) attach(m *guestMem) error {
	d.mem = m
	return m.mapAll(d.c)
}

// gartPTEs is the GART table the suite uses.
func gartPTEs() []uint64 {
	rw := uint64(abi.PTE_VALID_MASK | abi.PTE_SYSTEM_MASK | abi.PTE_READABLE_MASK | abi.PTE_WRITEABLE_MASK)
	ptes := make([]uint64, gPages)
	run := func(first uint64, iova uint64, pages uint64) {
		for i := uint64(0); i < pages; i++ {
			ptes[first+i] = (iova + i*abi.PTE_PAGE_SIZE) | rw
		}
	}
	run(gSys, sysIOVA, sysSize/abi.PTE_PAGE_SIZE)
	run(gPastSys, sysIOVA+sysSize, 1)
	run(gSmall, smallIOVA, smallSize/abi.PTE_PAGE_SIZE)
	run(gNofd, nofdIOVA, nofdSize/abi.PTE_PAGE_SIZE)
	run(gTop, topIOVA, topSize/abi.PTE_PAGE_SIZE) // bits 63:48 spill into MTYPE etc.: must not reach top
	vramRW := uint64(abi.PTE_VALID_MASK | abi.PTE_READABLE_MASK | abi.PTE_WRITEABLE_MASK)
	ptes[gVRAMEnd] = (vramSize - abi.PTE_PAGE_SIZE) | vramRW
	ptes[gPastVRAM] = vramSize | vramRW
	ptes[gReadOnly] = sysIOVA | abi.PTE_VALID_MASK | abi.PTE_SYSTEM_MASK | abi.PTE_READABLE_MASK
	return ptes
}

// setupGART writes the table into VRAM and programs the GMC.
func (d *driver) setupGART() error {
	for i, pte := range gartPTEs() {
		binary.LittleEndian.PutUint64(d.vram[vGART+8*i:], pte)
	}
	regs := set64(abi.REG_GMC_GART_START_LO, gartBase)
	regs = append(regs, set64(abi.REG_GMC_GART_END_LO, gart(gPages)-1)...)
	regs = append(regs, set64(abi.REG_GMC_GART_TABLE_LO, vGART|abi.PDE_VALID_MASK)...)
	regs = append(regs, [2]uint32{abi.REG_GMC_GART_CNTL, abi.REG_GMC_GART_CNTL__ENABLE_MASK},
		[2]uint32{abi.REG_GMC_VM_FAULT_CNTL, abi.REG_GMC_VM_FAULT_CNTL__CLEAR_MASK},
		[2]uint32{abi.REG_GMC_VM_INVALIDATE, 1})
	return d.setRegs(regs...)
}

// setupIH enables the IH ring (2^log2 dwords in VRAM at vIH) with wptr write-back; extra adds
// RB_CNTL bits (overflow).
func (d *driver) setupIH(log2 uint32, extra uint32) error {
	clear(d.vram[vIH : vIH+(4<<min(log2, 14))])
	clear(d.vram[vIHWptr : vIHWptr+4])
	regs := [][2]uint32{{abi.REG_IH_RB_CNTL, 0}}
	regs = append(regs, set64(abi.REG_IH_RB_BASE_LO, fb(vIH))...)
	regs = append(regs, set64(abi.REG_IH_RB_WPTR_ADDR_LO, fb(vIHWptr))...)
	regs = append(regs, [2]uint32{abi.REG_IH_MSIX_VECTOR, 0},
		[2]uint32{abi.REG_IH_RB_CNTL, log2<<abi.REG_IH_RB_CNTL__RB_SIZE__SHIFT | abi.REG_IH_RB_CNTL__RB_ENABLE_MASK |
			abi.REG_IH_RB_CNTL__ENABLE_INTR_MASK | abi.REG_IH_RB_CNTL__WPTR_WRITEBACK_ENABLE_MASK | extra})
	return d.setRegs(regs...)
}

// bringUp is what a driver does after a reset: enable the function, the GART and the IH.
func (d *driver) bringUp() error {
	if err := d.enable(); err != nil {
		return err
	}
	if err := d.setupGART(); err != nil {
		return err
	}
	return d.setupIH(14, 0)
}

// queue is one HQD the suite drives, with its ring in VRAM.
type queue struct {
	d        *driver
	slot     int
	ringOff  uint64 // VRAM offset of the ring
	size     uint64 // dwords
	wptr     uint64
	poll     bool
	pollAddr uint64 // VRAM offset of the polled wptr
}

// queueOpts shapes a queue. Zero values: the slot's ring area, 2^10 dwords, doorbell kicks.
type queueOpts struct {
	log2 uint   // ring dwords = 2^log2, 6..16
	poll bool   // poll the wptr at vPoll + 64·slot (with a doorbell too)
	base uint64 // a GPU address for the ring instead of the slot's VRAM area (no CPU access)
	// report and pollGPU override the rptr report address and the polled wptr's address.
	report, pollGPU uint64
}

func ringOffset(slot int) uint64 { return vRing + uint64(slot)*ringStride }

// startQueue programs and activates slot (after a DEQUEUE_RESET of whatever ran there).
func (d *driver) startQueue(slot int, o queueOpts) (*queue, error) {
	if o.log2 == 0 {
		o.log2 = 10
	}
	q := &queue{d: d, slot: slot, ringOff: ringOffset(slot), size: 1 << o.log2, poll: o.poll,
		pollAddr: vPoll + 256*uint64(slot)}
	base := fb(q.ringOff)
	if o.base != 0 {
		base = o.base
	} else {
		clear(d.vram[q.ringOff : q.ringOff+4*q.size])
	}
	if err := d.dequeue(slot, abi.HQD_DEQUEUE_RESET); err != nil {
		return nil, err
	}
	regs := set64(hqd(slot, abi.REG_HQD_PQ_BASE_LO), base)
	regs = append(regs, [2]uint32{hqd(slot, abi.REG_HQD_PQ_CONTROL), uint32(o.log2 - 1)},
		[2]uint32{hqd(slot, abi.REG_HQD_VMID), 0})
	report := fb(vRptr + 64*uint64(slot))
	if o.report != 0 {
		report = o.report
	}
	regs = append(regs, set64(hqd(slot, abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO), report)...)
	regs = append(regs, [2]uint32{hqd(slot, abi.REG_HQD_PQ_DOORBELL_CONTROL),
		2*(doorbellBase+uint32(slot))<<abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT&
			abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK | abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK})
	pollCntl := uint32(0)
	if o.poll {
		binary.LittleEndian.PutUint64(d.vram[q.pollAddr:], 0)
		pollCntl = abi.REG_HQD_PQ_WPTR_POLL_CNTL__EN_MASK
	}
	pollGPU := fb(q.pollAddr)
	if o.pollGPU != 0 {
		pollGPU = o.pollGPU
	}
	regs = append(regs, set64(hqd(slot, abi.REG_HQD_PQ_WPTR_POLL_ADDR_LO), pollGPU)...)
	regs = append(regs, [2]uint32{hqd(slot, abi.REG_HQD_PQ_WPTR_POLL_CNTL), pollCntl},
		[2]uint32{hqd(slot, abi.REG_HQD_ACTIVE), 1})
	if err := d.setRegs(regs...); err != nil {
		return nil, err
	}
	return q, nil
}

// dequeue requests a stop and waits (bounded) until ACTIVE reads 0.
func (d *driver) dequeue(slot int, how uint32) error {
	if err := d.setReg(hqd(slot, abi.REG_HQD_DEQUEUE_REQUEST), how); err != nil {
		return err
	}
	deadline := time.Now().Add(livenessTimeout)
	for {
		v, err := d.reg(hqd(slot, abi.REG_HQD_ACTIVE))
		if err != nil || v == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slot %d still ACTIVE %v after DEQUEUE_REQUEST %d", slot, livenessTimeout, how)
		}
		time.Sleep(time.Millisecond)
	}
}

// emit writes packets at the wptr (no kick).
func (q *queue) emit(dws ...[]uint32) {
	ring := q.d.vram[q.ringOff : q.ringOff+4*q.size]
	for _, p := range dws {
		for _, dw := range p {
			binary.LittleEndian.PutUint32(ring[4*(q.wptr%q.size):], dw)
			q.wptr++
		}
	}
}

// kick publishes the wptr: the polled qword (when polling) and the doorbell.
func (q *queue) kick() error {
	if q.poll {
		binary.LittleEndian.PutUint64(q.d.vram[q.pollAddr:], q.wptr)
	}
	return q.d.ring(doorbellBase+uint64(q.slot), q.wptr, false)
}

// submit emits packets and kicks.
func (q *queue) submit(dws ...[]uint32) error {
	q.emit(dws...)
	return q.kick()
}

// status returns HQD_STATUS's state and error.
func (d *driver) status(slot int) (state, code uint32, err error) {
	v, err := d.reg(hqd(slot, abi.REG_HQD_STATUS))
	return v & abi.REG_HQD_STATUS__STATE_MASK >> abi.REG_HQD_STATUS__STATE__SHIFT,
		v & abi.REG_HQD_STATUS__ERROR_MASK >> abi.REG_HQD_STATUS__ERROR__SHIFT, err
}

// awaitState polls the slot's state until it is want or timeout passes, and returns the state
// it saw last. Setups use it instead of a fixed sleep: on a loaded machine a queue may take far
// longer than usual to reach the packet it is meant to park on.
func (d *driver) awaitState(slot int, want uint32, timeout time.Duration) (state, code uint32, err error) {
	deadline := time.Now().Add(timeout)
	for {
		state, code, err = d.status(slot)
		if err != nil || state == want || time.Now().After(deadline) {
			return state, code, err
		}
		time.Sleep(time.Millisecond)
	}
}

// settle waits until the queue has executed everything submitted (rptr reached the wptr) or
// halted, or timeout passes; it returns the state it saw last.
func (q *queue) settle(timeout time.Duration) (state, code uint32, err error) {
	deadline := time.Now().Add(timeout)
	for {
		state, code, err = q.d.status(q.slot)
		if err != nil || state == abi.HQD_STATE_HALTED || state == abi.HQD_STATE_IDLE {
			return
		}
		rptr, err := q.d.reg(hqd(q.slot, abi.REG_HQD_PQ_RPTR))
		if err != nil {
			return state, code, err
		}
		if state == abi.HQD_STATE_RUNNING && uint64(rptr) == q.wptr&(q.size-1) {
			// rptr is published before the rptr report is written: give a failing report
			// the moment it needs to halt the queue.
			time.Sleep(2 * time.Millisecond)
			return q.d.status(q.slot)
		}
		if time.Now().After(deadline) {
			return state, code, nil
		}
		time.Sleep(500 * time.Microsecond)
	}
}

var stateNames = map[uint32]string{
	abi.HQD_STATE_IDLE: "IDLE", abi.HQD_STATE_RUNNING: "RUNNING", abi.HQD_STATE_WAITING: "WAITING",
	abi.HQD_STATE_HALTED: "HALTED", abi.HQD_STATE_BUSY_KERNEL: "BUSY_KERNEL",
}

var errorNames = map[uint32]string{
	abi.CP_ERROR_NONE: "NONE", abi.CP_ERROR_BAD_OPCODE: "BAD_OPCODE", abi.CP_ERROR_RESERVED_BITS: "RESERVED_BITS",
	abi.CP_ERROR_BAD_PACKET: "BAD_PACKET", abi.CP_ERROR_TRANSLATION: "TRANSLATION", abi.CP_ERROR_MEMORY: "MEMORY",
	abi.CP_ERROR_BAD_REGISTER: "BAD_REGISTER", abi.CP_ERROR_IB_DEPTH: "IB_DEPTH", abi.CP_ERROR_IB_LIMIT: "IB_LIMIT",
	abi.CP_ERROR_RING_CONFIG: "RING_CONFIG",
}

func describeState(state, code uint32) string {
	if state == abi.HQD_STATE_HALTED {
		return "HALTED/" + errorNames[code]
	}
	return stateNames[state]
}

// vramU32 reads a dword of CPU-visible VRAM.
func (d *driver) vramU32(off uint64) uint32 { return binary.LittleEndian.Uint32(d.vram[off:]) }

func (d *driver) setVRAM32(off uint64, v uint32) { binary.LittleEndian.PutUint32(d.vram[off:], v) }
