package device_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/abi"
	"vgpu/device"
	"vgpu/pm4"
	"vgpu/vfiouser"
)

// FuzzDevice drives the whole device through the interface the vfio-user server uses (and
// nothing else: the fuzz target must not depend on the device's internals). The input decodes
// to a sequence of operations: region reads and writes on every region (config space, the
// register BAR including the MSI-X page, doorbells, the VRAM window, regions without
// storage), DMA_MAP/UNMAP of a small memfd and of fd-less memory, SET_IRQS with bools and
// eventfds, DEVICE_RESET, FLR, COMMAND and MSI-X enables, and client reconnects. One device
// is built per fuzzing process and returned to power-on between inputs.
//
// Invariants: no panic; every call returns within opTimeout (a watchdog crashes the process
// with every goroutine's stack otherwise, which the fuzzer records as a crasher); accesses the
// device must refuse (outside a region, on a region without storage) return errors, although
// the server checks bounds before it calls the device; non-empty in-range accesses to config
// space, and while Memory Space is on to the BARs, succeed; DMA_MAPs that cannot be honoured
// (empty, past 2^64, past the file) are refused; the read-only bits of config space never
// change.
func FuzzDevice(f *testing.F) {
	w := newDeviceWorld(f)
	for _, s := range fuzzDeviceSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w.begin(t)
		in := input{data: data}
		for n := 0; n < maxOps && !in.done(); n++ {
			w.step(t, &in)
		}
	})
}

// opTimeout bounds every device call. A register write is answered in microseconds; this is
// a hang detector, generous enough for a loaded 2-core machine under the race detector.
const opTimeout = 10 * time.Second

const maxOps = 256

// Operations (the first byte of each step, modulo opCount).
const (
	opConfigRead = iota
	opConfigWrite
	opRegRead
	opRegWrite
	opMSIXPage
	opDoorbell
	opVRAM
	opNoStorage
	opMap
	opUnmap
	opSetIRQs
	opReset
	opFLR
	opCommand
	opMSIX
	opReconnect
	opCount
)

var opNames = [opCount]string{"config read", "config write", "register read", "register write",
	"MSI-X page access", "doorbell access", "VRAM access", "access without storage", "DMA_MAP",
	"DMA_UNMAP", "SET_IRQS", "DEVICE_RESET", "FLR", "COMMAND write", "MSI-X control write",
	"reconnect"}

// input hands out the fuzz input a byte or a value at a time; past its end it yields zeros.
type input struct {
	data []byte
	pos  int
}

func (in *input) done() bool { return in.pos >= len(in.data) }

func (in *input) u8() byte {
	if in.pos >= len(in.data) {
		in.pos++
		return 0
	}
	in.pos++
	return in.data[in.pos-1]
}

func (in *input) u16() uint16 { return uint16(in.u8()) | uint16(in.u8())<<8 }

func (in *input) bytes(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = in.u8()
	}
	return p
}

// accessSize picks an access width: mostly the ones drivers use, sometimes odd or empty.
func (in *input) accessSize() int {
	return [...]int{4, 8, 4, 1, 2, 4, 8, 3, 0, 16}[in.u8()%10]
}

// deviceWorld is one device, built once per fuzzing process, and what the test knows about it.
type deviceWorld struct {
	dev   *device.Device
	info  vfiouser.DeviceInfo
	peer  *memPeer
	memfd *os.File // the test keeps it; each DMA_MAP hands the device a dup
	zeros []byte   // what begin writes over the directly addressed VRAM
	regs  []uint32 // every register's byte offset in BAR5 (all instances)

	power    []byte // config space at power-on
	readOnly []roByte
	expCap   int // PCI Express capability (FLR lives in its Device Control register)
	msixCap  int

	// memOn mirrors COMMAND.Memory Space, re-read after every operation that may change it.
	memOn bool

	// The watchdog: the operation in progress and when it started (0: none).
	opStart atomic.Int64
	opName  atomic.Value // string
}

// roByte is a config-space byte with the bits of it that must never change.
type roByte struct {
	off  int
	mask byte
}

const (
	memfdSize = 64 << 10
	vramSize  = 4 << 20
	vramWin   = 1 << 20
	vramLow   = 64 << 10 // VRAM operations reach [0, vramLow) and the last vramEdge bytes
	vramEdge  = 64
)

func newDeviceWorld(tb testing.TB) *deviceWorld {
	cfg := device.DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow = vramSize, vramWin
	dev, err := device.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dev.Close() })
	fd, err := unix.MemfdCreate("fuzz-dma", unix.MFD_CLOEXEC)
	if err != nil {
		tb.Fatal(err)
	}
	memfd := os.NewFile(uintptr(fd), "fuzz-dma")
	tb.Cleanup(func() { memfd.Close() })
	if err := memfd.Truncate(memfdSize); err != nil {
		tb.Fatal(err)
	}
	w := &deviceWorld{dev: dev, info: dev.Info(), peer: &memPeer{mem: make([]byte, memfdSize)}, memfd: memfd,
		zeros: make([]byte, vramLow+vramEdge)}
	for _, b := range abi.Blocks {
		for i := range max(b.Count, 1) {
			for _, r := range b.Registers {
				w.regs = append(w.regs, b.Base+i*b.Stride+r.Offset)
			}
		}
	}
	w.power = make([]byte, w.info.Regions[regionConfig].Size)
	if err := dev.RegionRead(regionConfig, 0, w.power); err != nil {
		tb.Fatal(err)
	}
	w.readOnly, w.expCap, w.msixCap = readOnlyBytes(w.power, w.info)
	if w.expCap == 0 || w.msixCap == 0 {
		tb.Fatalf("config space lacks the Express (%#x) or MSI-X (%#x) capability", w.expCap, w.msixCap)
	}
	w.opName.Store("")
	stop := make(chan struct{})
	tb.Cleanup(func() { close(stop) })
	go w.watchdog(stop)
	dev.Connected(w.peer)
	return w
}

const regionConfig = 7 // VFIO_PCI_CONFIG_REGION_INDEX

// readOnlyBytes lists the config-space bits a guest can never change, from the power-on image
// and the PCI rules (not from the device's own masks): identity, header type, the capability
// chains, MSI-X geometry, PCIe capability registers, BAR type bits, absent BARs and ROM.
func readOnlyBytes(p []byte, info vfiouser.DeviceInfo) (ro []roByte, expCap, msixCap int) {
	all := func(off, n int) {
		for i := off; i < off+n; i++ {
			ro = append(ro, roByte{i, 0xff})
		}
	}
	all(0x00, 4) // vendor, device ID
	all(0x08, 4) // revision, class code
	all(0x0e, 1) // header type
	all(0x2c, 4) // subsystem IDs
	all(0x30, 4) // expansion ROM: none
	all(0x34, 1) // capabilities pointer
	all(0x3d, 1) // interrupt pin
	for i := 0; i < 6; i++ {
		off := 0x10 + 4*i
		switch {
		case info.Regions[i].Size == 0 && i > 0 && binary.LittleEndian.Uint32(p[off-4:])&0x6 == 0x4:
			// upper half of a 64-bit BAR: address bits
		case info.Regions[i].Size == 0:
			all(off, 4) // absent
		default:
			ro = append(ro, roByte{off, 0x0f}) // memory space, type, prefetchable
		}
	}
	for c, n := int(p[0x34]), 0; c != 0 && n < 48; c, n = int(p[c+1]), n+1 {
		all(c, 2) // ID, next
		switch p[c] {
		case 0x11: // MSI-X
			msixCap = c
			ro = append(ro, roByte{c + 2, 0xff}, roByte{c + 3, 0x07}) // table size
			all(c+4, 8)                                               // table and PBA location
		case 0x10: // PCI Express
			expCap = c
			all(c+2, 2)  // capabilities register
			all(c+4, 4)  // device capabilities
			all(c+12, 4) // link capabilities
		case 0x01: // power management
			all(c+2, 2) // PMC
		}
	}
	for c, n := 0x100, 0; c != 0 && c+4 <= len(p) && n < 48; n++ {
		hdr := binary.LittleEndian.Uint32(p[c:])
		if hdr == 0 {
			break
		}
		all(c, 4)
		c = int(hdr >> 20)
	}
	return ro, expCap, msixCap
}

// begin returns the device to what a new VM sees: the previous client gone, a reset, a new
// client without mappings. VRAM survives a reset (as on hardware), so the part of it an input
// can address directly is cleared, as are the DMA memories: an input then behaves the same
// whatever ran before it, and a crasher reproduces alone.
func (w *deviceWorld) begin(t *testing.T) {
	w.call(t, "begin: disconnect", func() error { w.dev.Disconnected(); return nil })
	w.call(t, "begin: DEVICE_RESET", w.dev.Reset)
	w.call(t, "begin: clear memory", func() error {
		if err := w.dev.RegionWrite(regionConfig, 0x04, []byte{0x02}); err != nil { // Memory Space on
			return err
		}
		if err := w.dev.RegionWrite(abi.BAR_VRAM, 0, w.zeros); err != nil {
			return err
		}
		if err := w.dev.RegionWrite(abi.BAR_VRAM, vramWin-vramEdge, w.zeros[:vramEdge]); err != nil {
			return err
		}
		if err := w.dev.RegionWrite(regionConfig, 0x04, []byte{0x00}); err != nil {
			return err
		}
		if err := w.memfd.Truncate(0); err != nil {
			return err
		}
		return w.memfd.Truncate(memfdSize)
	})
	w.peer.mu.Lock()
	clear(w.peer.mem)
	w.peer.mu.Unlock()
	w.call(t, "begin: connect", func() error { w.dev.Connected(w.peer); return nil })
	w.memOn = false
	w.checkConfig(t, "begin")
}

// call runs one device call under the watchdog.
func (w *deviceWorld) call(t *testing.T, name string, fn func() error) error {
	w.opName.Store(name)
	w.opStart.Store(time.Now().UnixNano())
	err := fn()
	w.opStart.Store(0)
	return err
}

// watchdog crashes the process (every goroutine's stack printed) when a call runs longer than
// opTimeout: a hang becomes a crasher the fuzzer keeps.
func (w *deviceWorld) watchdog(stop chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if s := w.opStart.Load(); s != 0 && time.Since(time.Unix(0, s)) > opTimeout {
			debug.SetTraceback("all")
			panic(fmt.Sprintf("FuzzDevice: %s has not returned after %v", w.opName.Load(), opTimeout))
		}
	}
}

func (w *deviceWorld) step(t *testing.T, in *input) {
	op := int(in.u8()) % opCount
	name := opNames[op]
	switch op {
	case opConfigRead, opConfigWrite:
		off := uint64(in.u16())
		if off&0x8000 == 0 {
			off %= 0x140 // the header and capabilities, where the bits are
		} else {
			off %= uint64(len(w.power)) + 16
		}
		n := in.accessSize()
		w.configAccess(t, op == opConfigWrite, off, in.bytes(n))
	case opRegRead, opRegWrite, opMSIXPage:
		var off uint64
		switch sel := in.u8(); {
		case op == opMSIXPage:
			off = abi.REGS_MSIX_TABLE_OFFSET + uint64(in.u16())%(abi.REGS_SIZE-abi.REGS_MSIX_TABLE_OFFSET+8)
		case sel%4 == 0: // anywhere, and a little past the end
			off = uint64(binary.LittleEndian.Uint32(in.bytes(4))) % (abi.REGS_SIZE + 16)
		default: // a defined register, sometimes misaligned
			off = uint64(w.regs[int(in.u16())%len(w.regs)]) + uint64(sel>>6)
		}
		write := op == opRegWrite || op == opMSIXPage && in.u8()&1 != 0
		n := in.accessSize()
		w.barAccess(t, name, abi.BAR_REGS, write, off, in.bytes(n))
	case opDoorbell:
		write := in.u8()&1 != 0
		off := uint64(in.u16()) % (w.info.Regions[abi.BAR_DOORBELL].Size + 16)
		n := in.accessSize()
		w.barAccess(t, name, abi.BAR_DOORBELL, write, off, in.bytes(n))
	case opVRAM:
		write := in.u8()&1 != 0
		var off uint64
		switch where := in.u8() % 3; where {
		case 0:
			off = uint64(in.u16())
		case 1:
			off = vramWin - uint64(in.u16()%vramEdge)
		default:
			off = vramWin + uint64(in.u16())
		}
		n := int(in.u8() % 65)
		w.barAccess(t, name, abi.BAR_VRAM, write, off, in.bytes(n))
	case opNoStorage:
		region := [...]uint32{1, 3, 4, 6, 8, 9, 0xffffffff}[in.u8()%7]
		p := make([]byte, 4)
		write := in.u8()&1 != 0
		err := w.call(t, name, func() error {
			if write {
				return w.dev.RegionWrite(region, 0, p)
			}
			return w.dev.RegionRead(region, 0, p)
		})
		// BAR1/3/4 lie in the BAR space: with Memory Space off the function decodes nothing
		// there (master abort, no error). Everywhere else a region without storage is refused.
		if err == nil && (region > abi.BAR_REGS || w.memOn) {
			t.Fatalf("%s to region %d (memory %v) succeeded", name, region, w.memOn)
		}
	case opMap:
		w.dmaMap(t, in)
	case opUnmap:
		iova, size := w.iova(in), uint64(in.u8())<<12
		all := in.u8()&1 != 0
		if all {
			iova, size = 0, 0
		}
		if err := w.call(t, name, func() error { return w.dev.DMAUnmap(iova, size, all) }); err != nil && all {
			t.Fatalf("DMA_UNMAP all: %v", err)
		}
	case opSetIRQs:
		w.setIRQs(t, in)
	case opReset:
		if err := w.call(t, name, w.dev.Reset); err != nil {
			t.Fatalf("DEVICE_RESET: %v", err)
		}
		w.checkConfig(t, name)
	case opFLR:
		w.configAccess(t, true, uint64(w.expCap+8+1), []byte{0x80}) // Device Control bit 15
	case opCommand:
		v := in.u8() & 0x07 // I/O (absent), Memory Space, Bus Master
		if in.u8()&1 != 0 {
			w.configAccess(t, true, 0x04, []byte{v, 0x04}) // and Interrupt Disable
		} else {
			w.configAccess(t, true, 0x04, []byte{v})
		}
	case opMSIX:
		w.configAccess(t, true, uint64(w.msixCap+3), []byte{in.u8() & 0xc0}) // Enable, Function Mask
	case opReconnect:
		w.call(t, name, func() error { w.dev.Disconnected(); w.dev.Connected(w.peer); return nil })
	}
}

// configAccess reads or writes config space and checks the result and the read-only bits.
func (w *deviceWorld) configAccess(t *testing.T, write bool, off uint64, p []byte) {
	name := "config read"
	if write {
		name = "config write"
	}
	err := w.call(t, name, func() error {
		if write {
			return w.dev.RegionWrite(regionConfig, off, p)
		}
		return w.dev.RegionRead(regionConfig, off, p)
	})
	inRange := len(p) > 0 && off+uint64(len(p)) <= uint64(len(w.power))
	if inRange != (err == nil) {
		t.Fatalf("%s [%#x+%d): error %v", name, off, len(p), err)
	}
	if write {
		w.checkConfig(t, fmt.Sprintf("%s [%#x+%d) % x", name, off, len(p), p))
	}
}

// checkConfig checks the read-only bits of config space and refreshes memOn.
func (w *deviceWorld) checkConfig(t *testing.T, after string) {
	var now [0x200]byte
	if err := w.dev.RegionRead(regionConfig, 0, now[:]); err != nil {
		t.Fatalf("after %s: config read: %v", after, err)
	}
	for _, r := range w.readOnly {
		if d := (now[r.off] ^ w.power[r.off]) & r.mask; d != 0 {
			t.Fatalf("after %s: read-only bits %#02x of config byte %#x changed (now %#02x, power-on %#02x)",
				after, d, r.off, now[r.off], w.power[r.off])
		}
	}
	w.memOn = now[0x04]&0x02 != 0
}

// barAccess reads or writes a BAR region. While Memory Space is on, a non-empty access inside
// the region succeeds and one outside fails (the server checks the region's bounds too; the
// device must not rely on it); while it is off nothing is decoded (reads return
// all-ones, writes are dropped) and no error is due.
func (w *deviceWorld) barAccess(t *testing.T, name string, region uint32, write bool, off uint64, p []byte) {
	err := w.call(t, name, func() error {
		if write {
			return w.dev.RegionWrite(region, off, p)
		}
		return w.dev.RegionRead(region, off, p)
	})
	if !w.memOn {
		if err != nil {
			t.Fatalf("%s [%#x+%d) with Memory Space off: %v", name, off, len(p), err)
		}
		return
	}
	if len(p) == 0 {
		return // the server never forwards an empty access; either answer is fine
	}
	inRange := off+uint64(len(p)) <= w.info.Regions[region].Size
	if inRange != (err == nil) {
		t.Fatalf("%s [%#x+%d) of a %#x-byte region: error %v", name, off, len(p), w.info.Regions[region].Size, err)
	}
}

// iova picks a DMA address: low memory, where the GPU's tests look, or the edges of the space.
func (w *deviceWorld) iova(in *input) uint64 {
	switch sel := in.u8(); sel % 4 {
	case 0, 1:
		return uint64(sel>>2) << 12
	case 2:
		return uint64(in.u16()) << 20
	default:
		return -uint64(in.u8()) << 12 // at the top of the 64-bit space
	}
}

// dmaMap maps part of the memfd (or, without an fd, the peer's memory) at a chosen IOVA.
func (w *deviceWorld) dmaMap(t *testing.T, in *input) {
	iova := w.iova(in)
	size := uint64(in.u8()%32) << 12 // 0..124 KiB: sometimes empty, sometimes past the file
	offset := uint64(in.u8()%16) << 12
	flags := uint32(in.u8() & 3)
	withFile := in.u8()&1 != 0
	m := vfiouser.DMAMapping{IOVA: iova, Size: size, Offset: offset, Flags: flags}
	if withFile {
		fd, err := unix.FcntlInt(w.memfd.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		m.File = os.NewFile(uintptr(fd), "fuzz-dma-dup") // the device owns it now
	}
	err := w.call(t, "DMA_MAP", func() error { return w.dev.DMAMap(m) })
	bad := size == 0 || iova+size < iova && iova+size != 0 || withFile && offset+size > memfdSize
	if bad && err == nil {
		t.Fatalf("DMA_MAP iova %#x size %#x offset %#x file %v: accepted", iova, size, offset, withFile)
	}
}

// setIRQs sends a SET_IRQS of any shape: the device validates it.
func (w *deviceWorld) setIRQs(t *testing.T, in *input) {
	index := uint32(in.u8() % 6)
	sel := in.u8()
	data := [...]uint32{vfiouser.IRQSetDataNone, vfiouser.IRQSetDataBool, vfiouser.IRQSetDataEventfd}[sel%3]
	action := [...]uint32{vfiouser.IRQSetActionTrigger, vfiouser.IRQSetActionMask, vfiouser.IRQSetActionUnmask}[sel/3%3]
	flags := data | action
	if sel >= 0xf0 {
		flags = uint32(in.u8()) // garbage flags
	}
	start := uint32(in.u8() % 20)
	count := uint32(in.u8() % 20)
	if sel&0x80 != 0 && sel < 0xf0 {
		count = ^uint32(0) - uint32(in.u8())
	}
	req := vfiouser.SetIRQs{Flags: flags, Index: index, Start: start, Count: count}
	switch {
	case flags&vfiouser.IRQSetDataBool != 0:
		req.Bools = make([]bool, min(count, 32))
		for i := range req.Bools {
			req.Bools[i] = in.u8()&1 != 0
		}
	case flags&vfiouser.IRQSetDataEventfd != 0:
		n := min(count, 20, uint32(in.u8()%21))
		for range n {
			fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
			if err != nil {
				t.Fatal(err)
			}
			req.Files = append(req.Files, os.NewFile(uintptr(fd), "fuzz-eventfd")) // the device owns it
		}
	}
	w.call(t, "SET_IRQS", func() error { return w.dev.SetIRQs(req) })
}

// memPeer is the client's side of fd-less DMA: memPeer.mem at IOVA 0. Engines call it from
// their goroutines.
type memPeer struct {
	mu  sync.Mutex
	mem []byte
}

var errNoMemory = errors.New("fuzz peer: no memory at this address")

func (p *memPeer) access(iova uint64, b []byte, write bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if iova >= uint64(len(p.mem)) || uint64(len(b)) > uint64(len(p.mem))-iova {
		return errNoMemory
	}
	if write {
		copy(p.mem[iova:], b)
	} else {
		copy(b, p.mem[iova:])
	}
	return nil
}

func (p *memPeer) DMARead(iova uint64, b []byte) error  { return p.access(iova, b, false) }
func (p *memPeer) DMAWrite(iova uint64, b []byte) error { return p.access(iova, b, true) }

// script builds inputs in FuzzDevice's format, for seeds a driver would send.
type script []byte

func (s script) command(v byte) script { return append(s, opCommand, v, 0) }

// reg writes 32 bits at any register BAR offset.
func (s script) reg(off, v uint32) script {
	s = binary.LittleEndian.AppendUint32(append(s, opRegWrite, 0), off)
	return binary.LittleEndian.AppendUint32(append(s, 0), v) // access size 4
}

func (s script) regRead(off uint32) script {
	return append(binary.LittleEndian.AppendUint32(append(s, opRegRead, 0), off), 0)
}

// vram writes the window from off (below 64 KiB), 64 bytes per operation.
func (s script) vram(off uint16, dwords []uint32) script {
	var p []byte
	for _, d := range dwords {
		p = binary.LittleEndian.AppendUint32(p, d)
	}
	for len(p) > 0 {
		n := min(len(p), 64)
		s = binary.LittleEndian.AppendUint16(append(s, opVRAM, 1, 0), off)
		s = append(append(s, byte(n)), p[:n]...)
		p, off = p[n:], off+uint16(n)
	}
	return s
}

func (s script) doorbell(index int, v uint64) script {
	s = binary.LittleEndian.AppendUint16(append(s, opDoorbell, 1), uint16(8*index))
	return binary.LittleEndian.AppendUint64(append(s, 1), v) // access size 8
}

// mapMemfd maps the first size bytes of the memfd at IOVA 0, read-write.
func (s script) mapMemfd(pages byte) script {
	return append(s, opMap, 0, pages, 0, 3, 1)
}

func hqd(slot int, reg uint32) uint32 {
	return abi.BLOCK_HQD_BASE + uint32(slot)*abi.BLOCK_HQD_STRIDE + reg
}

// queue brings up hardware queue slot with a 64-dword ring at VRAM offset ring, writes the
// packets into it and submits them (by PQ_WPTR, or by doorbell index db when db >= 0).
func (s script) queue(slot int, ring uint16, db int, packets ...[]uint32) script {
	var dws []uint32
	for _, p := range packets {
		dws = append(dws, p...)
	}
	base := abi.GPU_FB_BASE + uint64(ring)
	s = s.reg(hqd(slot, abi.REG_HQD_PQ_BASE_LO), uint32(base)).reg(hqd(slot, abi.REG_HQD_PQ_BASE_HI), uint32(base>>32))
	s = s.reg(hqd(slot, abi.REG_HQD_PQ_CONTROL), 5) // 2^(5+1) dwords
	if db >= 0 {
		s = s.reg(hqd(slot, abi.REG_HQD_PQ_DOORBELL_CONTROL), uint32(2*db)<<abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT|abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK)
	}
	s = s.vram(ring, dws).reg(hqd(slot, abi.REG_HQD_ACTIVE), 1)
	if db >= 0 {
		return s.doorbell(db, uint64(len(dws)))
	}
	return s.reg(hqd(slot, abi.REG_HQD_PQ_WPTR_LO), uint32(len(dws)))
}

// fuzzDeviceSeeds are starting points: what a driver does, which the fuzzer then bends.
func fuzzDeviceSeeds() []script {
	fb := uint64(abi.GPU_FB_BASE)
	ih := script{}.command(0x06).reg(abi.REG_IH_RB_BASE_LO, uint32(fb+0x8000)).reg(abi.REG_IH_RB_BASE_HI, uint32((fb+0x8000)>>32)).
		reg(abi.REG_IH_RB_CNTL, 8<<abi.REG_IH_RB_CNTL__RB_SIZE__SHIFT|abi.REG_IH_RB_CNTL__RB_ENABLE_MASK|abi.REG_IH_RB_CNTL__ENABLE_INTR_MASK)
	return []script{
		// Identity, scratch, reset.
		script{}.command(0x02).regRead(abi.REG_ID_MAGIC).reg(abi.REG_SCRATCH_0, 0x12345678).regRead(abi.REG_SCRATCH_0).append(opReset),
		// A compute queue: WRITE_DATA and a fence with an interrupt, submitted by PQ_WPTR.
		ih.queue(1, 0x1000, -1, pm4.WriteMem(fb+0x2000, 0xdeadbeef), pm4.Fence(fb+0x2100, 1, 7, true)).regRead(hqd(1, abi.REG_HQD_STATUS)),
		// The graphics queue by doorbell, then a copy and an FLR while it may still run.
		ih.queue(0, 0x1400, 3, pm4.WriteMem(fb+0x2200, 1, 2, 3), pm4.Fence(fb+0x2300, 2, 0, true)).append(opFLR),
		// Self-test DMA into mapped memory, MSI-X on with eventfds on every vector.
		script{}.command(0x06).mapMemfd(4).append(opMSIX, 0x80, opSetIRQs, 2, 2, 0, 16, 16).
			reg(abi.REG_SELFTEST_DMA_ADDR_LO, 0x100).reg(abi.REG_SELFTEST_DMA_LEN, 0x200).reg(abi.REG_SELFTEST_DMA_PATTERN, 0xa5a5a5a5).
			reg(abi.REG_SELFTEST_DMA_CTRL, 1|1<<abi.REG_SELFTEST_DMA_CTRL__IRQ_EN__SHIFT).regRead(abi.REG_SELFTEST_DMA_STATUS),
		// Sizing a BAR, an FLR, then config garbage.
		script{opConfigWrite, 0x10, 0, 0, 0xff, 0xff, 0xff, 0xff, opConfigRead, 0x10, 0, 0, opFLR,
			opConfigWrite, 0x40, 0, 0, 1, 2, 3, 4},
		// Doorbells and VRAM at their ends, with Memory Space on and off; regions without storage.
		script{}.command(0x02).doorbell(2047, 5).append(opVRAM, 0, 1, 0, 0, 8, opCommand, 0, 0, opNoStorage, 1, 0, opNoStorage, 6, 1),
		// Reconnect while mapped, unmap everything.
		script{}.command(0x06).mapMemfd(16).append(opReconnect, opUnmap, 0, 0, 1),
	}
}

func (s script) append(b ...byte) script { return append(s, b...) }
