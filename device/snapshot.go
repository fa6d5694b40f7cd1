package device

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/gpummu"
	"vgpu/gpuvm"
	"vgpu/irq"
	"vgpu/l2"
	"vgpu/mes"
	"vgpu/pcie"
)

// Snapshots: SaveSnapshot writes the device's state to a file (format in snapshot_format.go,
// docs/snapshot.md); RestoreSnapshot puts it into a fresh device before any client attaches.
//
// Quiescing: the CP is paused (cp.Pause: no queue executes a packet) and so is the scheduler
// (mes.Pause: its goroutine parks between frames), and the snapshot is taken only when every
// queue is at a packet boundary — idle, parked in a WAIT_REG_MEM at ring level, waiting for a
// turn between packets, halted or dequeued — with no shader dispatch in flight (a
// register-activated queue has no context save area to save one to: refused with
// ErrSnapshotBusy naming the slot), no scheduler frame in progress or queue leaving its slot
// (mes.ErrPause), no self-test transfer, L2 maintenance pass or IH write in progress. The
// scheduler's tables are saved with it, and the slots it mapped with their mapping
// (snapshot_mes.go checks the two agree).
// The register lock is held while the register blocks are read. VRAM and the L2's lines are
// read while the CP stays paused.

// snapshotTimeout bounds how long SaveSnapshot waits for the engines to reach a packet
// boundary; pauseTimeout bounds one attempt's wait for the execution turns.
const (
	snapshotTimeout = 2 * time.Second
	pauseTimeout    = 200 * time.Millisecond
)

// snapDevice is the device's snapshot bookkeeping.
type snapDevice struct {
	attached atomic.Bool // a client has connected: RestoreSnapshot refuses
	save     sync.Mutex  // one SaveSnapshot at a time
	// cfgMu orders config space between the vfio-user worker's writes (and resets) and a
	// snapshot's read of it from another goroutine.
	cfgMu sync.Mutex
}

// snapRegs is the device's own register state (secDevice, before the MSI-X table bytes and
// the pending bits).
type snapRegs struct {
	Scratch           [8]uint32
	Config            [8]uint32 // the CONFIG block
	HDPDone           uint32
	HDPFlushes        uint32
	SelftestAddr      uint64
	SelftestLen       uint32
	SelftestPattern   uint32
	SelftestStatus    uint32
	SelftestCompleted uint32
	SelftestIRQErrors uint32
}

// snapL2Head starts secL2.
type snapL2Head struct {
	Strict bool
	Lines  uint32
}

// snapshot is everything but VRAM, as read from a device or a file.
type snapshot struct {
	config    [pcie.ConfigSize]byte
	regs      snapRegs
	msixTable []byte
	pending   []bool
	gmc       gpummu.State
	vm        gpuvm.State
	ih        irq.IHState
	mes       mes.State
	cp        cp.State
	doorbells []uint64
	strict    bool
	lines     []l2.Line
}

func (d *Device) header() snapHeader {
	h := snapHeader{FormatVersion: snapFormatVersion, ABIVersion: abiVersion(),
		VRAMSize: d.cfg.VRAMSize, VRAMWindow: d.cfg.VRAMWindow, MSIXVectors: uint32(d.cfg.MSIXVectors),
		ComputeUnits: uint32(d.computeUnits()), Doorbells: uint32(d.cfg.Doorbells),
		VendorID: d.cfg.VendorID, DeviceID: d.cfg.DeviceID, SubVendorID: d.cfg.SubsystemVendorID,
		SubsystemID: d.cfg.SubsystemID, Slots: cp.NumSlots}
	copy(h.Magic[:], snapMagic)
	return h
}

// SaveSnapshot stops the engines at a packet boundary, writes the device's state to w and
// lets them go on. It returns ErrSnapshotBusy (wrapping the reason, e.g. cp.ErrBusy naming a
// slot, mes.ErrActive) when they do not reach one within snapshotTimeout. What is saved and
// what is not: docs/snapshot.md.
func (d *Device) SaveSnapshot(w io.Writer) error {
	d.snap.save.Lock()
	defer d.snap.save.Unlock()
	deadline := time.Now().Add(snapshotTimeout)
	for {
		err := d.saveOnce(w)
		if err == nil || errors.Is(err, errSnapshotWrite) {
			return err
		}
		if errors.Is(err, mes.ErrActive) || time.Now().After(deadline) {
			return fmt.Errorf("%w: %w", ErrSnapshotBusy, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// errSnapshotWrite marks a failure of w: not worth another attempt.
var errSnapshotWrite = errors.New("device: snapshot: writing the file")

// saveOnce is one attempt: pause the CP and the scheduler, capture, write, let them go on.
func (d *Device) saveOnce(w io.Writer) error {
	if err := d.gpu.cp.Pause(pauseTimeout); err != nil {
		return err
	}
	defer d.gpu.cp.Unpause()
	resume, err := d.gpu.mes.Pause(pauseTimeout)
	if err != nil {
		return err
	}
	defer resume()
	s, err := d.capture()
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := d.write(bw, s); err != nil { // VRAM too: still paused
		return fmt.Errorf("%w: %w", errSnapshotWrite, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("%w: %w", errSnapshotWrite, err)
	}
	return nil
}

// capture reads every block; the CP is paused.
func (d *Device) capture() (*snapshot, error) {
	g := &d.gpu
	s := &snapshot{}
	var err error
	if g.cache.ReadReg(abi.REG_L2_STATUS-abi.BLOCK_L2_BASE)&abi.REG_L2_STATUS__BUSY_MASK != 0 {
		return nil, errors.New("an L2_CONTROL maintenance pass is running")
	}
	d.snap.cfgMu.Lock()
	s.config = d.config.SaveState()
	d.snap.cfgMu.Unlock()

	d.regMu.Lock() // from here no register write (MES_RING_ACTIVE, HQD_ACTIVE) interleaves
	defer d.regMu.Unlock()
	if s.mes, err = g.mes.SaveState(); err != nil {
		return nil, err
	}
	st := &d.selftest
	st.mu.Lock()
	s.regs = snapRegs{Scratch: d.scratch, Config: g.config, HDPDone: g.hdp.done, HDPFlushes: g.hdp.flushes,
		SelftestAddr: st.addr, SelftestLen: st.length, SelftestPattern: st.pattern, SelftestStatus: st.status,
		SelftestCompleted: st.completed, SelftestIRQErrors: st.irqErrors}
	st.mu.Unlock()
	if s.regs.SelftestStatus == abi.SELFTEST_DMA_STATUS_BUSY {
		return nil, errors.New("a self-test DMA transfer is running")
	}
	if s.cp, err = g.cp.SaveState(); err != nil {
		return nil, err
	}
	if s.ih, err = g.ih.SaveState(); err != nil {
		return nil, err
	}
	s.msixTable = append([]byte(nil), d.msixTable...)
	s.pending = d.irqs.PendingVectors()
	s.gmc = g.mmu.SaveState()
	s.vm = g.vm.SaveState()
	s.doorbells = d.doorbells.Values()
	s.strict = g.cache.Strict()
	s.lines = g.cache.SaveLines()
	return s, nil
}

func (d *Device) write(w io.Writer, s *snapshot) error {
	sw := newSnapWriter(w)
	sw.put(d.header())
	sw.section(secConfig, s.config)
	sw.put(secDevice)
	sw.put(uint64(binary.Size(s.regs) + len(s.msixTable) + len(s.pending)))
	sw.put(s.regs)
	sw.raw(s.msixTable)
	sw.put(s.pending)
	sw.section(secGMC, s.gmc)
	sw.section(secVM, s.vm)
	sw.section(secIH, s.ih)
	writeMESSection(sw, &s.mes)
	sw.section(secCP, s.cp)
	writeDoorbells(sw, s.doorbells)
	head := snapL2Head{Strict: s.strict, Lines: uint32(len(s.lines))}
	sw.put(secL2)
	sw.put(uint64(binary.Size(head)) + uint64(len(s.lines))*lineSize)
	sw.put(head)
	for i := range s.lines {
		sw.put(&s.lines[i])
	}
	d.writeVRAM(sw)
	return sw.end()
}

// doorbellEntry is a non-zero doorbell in the file (most of the 8192 are zero).
type doorbellEntry struct {
	Index uint32
	Value uint64
}

var doorbellEntrySize = uint64(binary.Size(doorbellEntry{}))

func writeDoorbells(sw *snapWriter, v []uint64) {
	var set []doorbellEntry
	for i, x := range v {
		if x != 0 {
			set = append(set, doorbellEntry{uint32(i), x})
		}
	}
	sw.put(secDoorbells)
	sw.put(4 + uint64(len(set))*doorbellEntrySize)
	sw.put(uint32(len(set)))
	sw.put(set)
}

func readDoorbells(sr *snapReader, count int) ([]uint64, error) {
	if err := sr.next(secDoorbells, 4+uint64(count)*doorbellEntrySize); err != nil {
		return nil, err
	}
	var n uint32
	if err := sr.get(&n); err != nil {
		return nil, err
	}
	if uint64(n) > uint64(count) || sr.left != uint64(n)*doorbellEntrySize {
		return nil, corrupt("doorbell section: %d doorbells in %d bytes", n, sr.left)
	}
	v := make([]uint64, count)
	next := uint32(0)
	for range n {
		var e doorbellEntry
		if err := sr.get(&e); err != nil {
			return nil, err
		}
		if e.Index < next || e.Index >= uint32(count) {
			return nil, corrupt("doorbell %d out of order or beyond the %d doorbells", e.Index, count)
		}
		v[e.Index], next = e.Value, e.Index+1
	}
	return v, nil
}

// lineSize is one l2.Line in the file.
var lineSize = uint64(binary.Size(l2.Line{}))

// pageEntry is one VRAM page's size in the file: its index and its bytes.
const pageEntry = 8 + vramPageSize

// writeVRAM writes the non-zero pages. Only the memfd's allocated extents are looked at
// (VRAM is sparse: reading its holes would allocate them). The section's length comes first,
// so the pages are found in a first pass (a page the guest's CPU changes between the passes is
// written as it is in the second: the CPU is not stopped by a snapshot).
func (d *Device) writeVRAM(sw *snapWriter) {
	mem := d.vram.Bytes()
	var pages []uint64
	next, total := uint64(0), uint64(len(mem))/vramPageSize
	for _, e := range d.vram.DataExtents() {
		for p := max(e[0]/vramPageSize, next); p < (e[1]+vramPageSize-1)/vramPageSize && p < total; p++ {
			if !zeroPage(mem[p*vramPageSize : (p+1)*vramPageSize]) {
				pages = append(pages, p)
			}
			next = p + 1
		}
	}
	sw.put(secVRAM)
	sw.put(8 + uint64(len(pages))*pageEntry)
	sw.put(uint64(len(pages)))
	// Each page is copied before it is written: the file and the checksum must see the same
	// bytes, and the guest's CPU may write the page between the two.
	buf := make([]byte, vramPageSize)
	for _, p := range pages {
		sw.put(p)
		copy(buf, mem[p*vramPageSize:(p+1)*vramPageSize])
		sw.raw(buf)
	}
}

func zeroPage(p []byte) bool {
	for i := 0; i < len(p); i += 8 {
		if binary.LittleEndian.Uint64(p[i:]) != 0 {
			return false
		}
	}
	return true
}

// RestoreSnapshot reads a snapshot from r and puts it into this device, which must be fresh
// (no client has attached; ErrSnapshotNotFresh otherwise). The whole file is checked before
// anything but VRAM changes (a bad file leaves the device at power-on, VRAM zeroed again):
// ErrSnapshotFormat, ErrSnapshotVersion, ErrSnapshotABI, ErrSnapshotConfig (naming the
// field), ErrSnapshotCorrupt, ErrSnapshotChecksum, or a package's error for a saved state it
// refuses. Running queues continue from their saved positions at once (they are idle, or
// parked on a WAIT_REG_MEM that is evaluated again).
func (d *Device) RestoreSnapshot(r io.Reader) error {
	if d.snap.attached.Load() {
		return ErrSnapshotNotFresh
	}
	d.snap.save.Lock()
	defer d.snap.save.Unlock()
	sr := newSnapReader(bufio.NewReaderSize(r, 1<<20))
	var written []uint64
	s, err := d.read(sr, &written)
	if err == nil {
		err = d.apply(s)
	}
	if err != nil {
		d.stopEngines(eventDeviceReset)
		d.config.Reset()
		d.snapshotConfig()
		d.mem.SetBusMaster(false)
		d.resetState()
		for _, p := range written {
			d.vram.Zero(p*vramPageSize, vramPageSize)
		}
		return err
	}
	return nil
}

// read decodes and checks the file; VRAM pages go straight to VRAM (written lists them).
func (d *Device) read(sr *snapReader, written *[]uint64) (*snapshot, error) {
	var h snapHeader
	sr.left = uint64(binary.Size(h))
	if err := sr.get(&h); err != nil {
		if errors.Is(err, ErrSnapshotCorrupt) {
			return nil, fmt.Errorf("%w: shorter than a header", ErrSnapshotFormat)
		}
		return nil, err
	}
	want := d.header()
	switch {
	case string(h.Magic[:]) != snapMagic:
		return nil, fmt.Errorf("%w: magic %q", ErrSnapshotFormat, h.Magic[:])
	case h.FormatVersion != snapFormatVersion:
		return nil, fmt.Errorf("%w: version %d, this server reads %d", ErrSnapshotVersion, h.FormatVersion, snapFormatVersion)
	case h.ABIVersion != want.ABIVersion:
		return nil, fmt.Errorf("%w: %d.%d, this server is %d.%d", ErrSnapshotABI,
			h.ABIVersion>>16, h.ABIVersion&0xFFFF, want.ABIVersion>>16, want.ABIVersion&0xFFFF)
	}
	for _, f := range []struct {
		name      string
		got, want uint64
	}{
		{"VRAM size", h.VRAMSize, want.VRAMSize},
		{"VRAM window", h.VRAMWindow, want.VRAMWindow},
		{"MSI-X vectors", uint64(h.MSIXVectors), uint64(want.MSIXVectors)},
		{"compute units", uint64(h.ComputeUnits), uint64(want.ComputeUnits)},
		{"doorbell mode", uint64(h.Doorbells), uint64(want.Doorbells)},
		{"vendor id", uint64(h.VendorID), uint64(want.VendorID)},
		{"device id", uint64(h.DeviceID), uint64(want.DeviceID)},
		{"subsystem vendor id", uint64(h.SubVendorID), uint64(want.SubVendorID)},
		{"subsystem id", uint64(h.SubsystemID), uint64(want.SubsystemID)},
		{"HQD slots", uint64(h.Slots), uint64(want.Slots)},
	} {
		if f.got != f.want {
			return nil, fmt.Errorf("%w: %s is %#x in the file, %#x here", ErrSnapshotConfig, f.name, f.got, f.want)
		}
	}

	s := &snapshot{}
	var err error
	if err := sr.fixed(secConfig, &s.config); err != nil {
		return nil, err
	}
	n := d.cfg.MSIXVectors
	s.msixTable, s.pending = make([]byte, len(d.msixTable)), make([]bool, n)
	devLen := uint64(binary.Size(s.regs) + len(s.msixTable) + n)
	if err := sr.next(secDevice, devLen); err != nil {
		return nil, err
	}
	if sr.left != devLen {
		return nil, corrupt("device section length %d, want %d", sr.left, devLen)
	}
	if err := sr.get(&s.regs); err != nil {
		return nil, err
	}
	if err := sr.bytes(s.msixTable); err != nil {
		return nil, err
	}
	if err := sr.get(s.pending); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		id uint32
		v  any
	}{{secGMC, &s.gmc}, {secVM, &s.vm}, {secIH, &s.ih}} {
		if err := sr.fixed(f.id, f.v); err != nil {
			return nil, err
		}
	}
	if s.mes, err = readMES(sr); err != nil {
		return nil, err
	}
	if err := sr.fixed(secCP, &s.cp); err != nil {
		return nil, err
	}
	if err := checkMESSlots(&s.mes, &s.cp); err != nil {
		return nil, err
	}
	if s.doorbells, err = readDoorbells(sr, d.doorbells.Count()); err != nil {
		return nil, err
	}
	if err := d.readL2(sr, s); err != nil {
		return nil, err
	}
	if err := d.readVRAM(sr, written); err != nil {
		return nil, err
	}
	return s, sr.end()
}

func (d *Device) readL2(sr *snapReader, s *snapshot) error {
	var head snapL2Head
	capacity := uint64(d.gpu.cache.Capacity())
	if err := sr.next(secL2, uint64(binary.Size(head))+capacity*lineSize); err != nil {
		return err
	}
	if err := sr.get(&head); err != nil {
		return err
	}
	if uint64(head.Lines) > capacity || sr.left != uint64(head.Lines)*lineSize {
		return corrupt("L2 section: %d lines in %d bytes (capacity %d)", head.Lines, sr.left, capacity)
	}
	s.strict = head.Strict
	s.lines = make([]l2.Line, head.Lines) // at most the cache's capacity
	for i := range s.lines {
		if err := sr.get(&s.lines[i]); err != nil {
			return err
		}
	}
	return nil
}

func (d *Device) readVRAM(sr *snapReader, written *[]uint64) error {
	mem := d.vram.Bytes()
	total := uint64(len(mem)) / vramPageSize
	if err := sr.next(secVRAM, 8+total*pageEntry); err != nil {
		return err
	}
	var count uint64
	if err := sr.get(&count); err != nil {
		return err
	}
	if count > total || sr.left != count*pageEntry {
		return corrupt("VRAM section: %d pages in %d bytes (VRAM has %d)", count, sr.left, total)
	}
	next := uint64(0)
	for range count {
		var p uint64
		if err := sr.get(&p); err != nil {
			return err
		}
		if p < next || p >= total {
			return corrupt("VRAM page %d out of order or beyond VRAM", p)
		}
		*written = append(*written, p)
		if err := sr.bytes(mem[p*vramPageSize : (p+1)*vramPageSize]); err != nil {
			return err
		}
		next = p + 1
	}
	return nil
}

// apply programs the checked state into the fresh device.
func (d *Device) apply(s *snapshot) error {
	g := &d.gpu
	if err := d.config.RestoreState(s.config); err != nil {
		return err
	}
	d.snapshotConfig()
	d.commandChanged(d.config.MemoryEnabled(), d.config.BusMasterEnabled())
	if s.regs.SelftestStatus == abi.SELFTEST_DMA_STATUS_BUSY {
		return corrupt("a self-test transfer in progress")
	}
	d.regMu.Lock()
	defer d.regMu.Unlock()
	d.scratch, g.config = s.regs.Scratch, s.regs.Config
	g.hdp = hdp{done: s.regs.HDPDone, flushes: s.regs.HDPFlushes}
	st := &d.selftest
	st.mu.Lock()
	st.addr, st.length, st.pattern = s.regs.SelftestAddr, s.regs.SelftestLen, s.regs.SelftestPattern
	st.status, st.completed, st.irqErrors = s.regs.SelftestStatus, s.regs.SelftestCompleted, s.regs.SelftestIRQErrors
	st.mu.Unlock()
	for off := 0; off+4 <= len(s.msixTable); off += 4 {
		d.writeMSIXPage(uint32(off), binary.LittleEndian.Uint32(s.msixTable[off:]))
	}
	if g.mmu.RestoreState(s.gmc) {
		d.rl.Warn("snapshot-gart-clamped", "restore: the saved GART aperture is larger than gpummu translates")
	}
	g.vm.RestoreState(s.vm)
	g.ih.RestoreState(s.ih)
	g.cache.SetStrict(s.strict)
	if err := g.cache.RestoreLines(s.lines); err != nil {
		return err
	}
	// The CP first: the scheduler's first pass finds the queues it mapped in their slots.
	if err := g.cp.RestoreState(&s.cp); err != nil {
		return err
	}
	if err := g.mes.RestoreState(s.mes); err != nil {
		return err
	}
	if err := d.doorbells.RestoreValues(s.doorbells); err != nil {
		return err
	}
	return d.irqs.RestorePending(s.pending)
}
