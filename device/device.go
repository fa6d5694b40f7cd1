package device

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"vgpu/engine"

	"vgpu/abi"
	"vgpu/bars"
	"vgpu/dma"
	"vgpu/inject"
	"vgpu/irq"
	"vgpu/l2"
	"vgpu/pcie"
	"vgpu/ratelog"
	"vgpu/trace"
	"vgpu/vfiouser"
)

// vfio-user region indexes for a PCI device (VFIO_PCI_*_REGION_INDEX).
const (
	regionROM    = 6
	regionConfig = 7
	numRegions   = 9 // BAR0-5, ROM, config, VGA: QEMU requires at least 8
	configSize   = 4096
	numIRQs      = 5 // INTx, MSI, MSI-X, ERR, REQ
)

// Config is what a server flag can change about the device.
type Config struct {
	VendorID, DeviceID             uint16
	SubsystemVendorID, SubsystemID uint16
	VRAMSize                       uint64 // bytes of VRAM (sparse memfd)
	VRAMWindow                     uint64 // CPU-visible part, the BAR0 size
	Doorbells                      bars.DoorbellMode
	MSIXVectors                    int
	ComputeUnits                   int // compute units of shader dispatches (0: DefaultComputeUnits)
	Log                            *slog.Logger

	// Trace records the timeline (docs/trace.md; nil: off). The caller closes it after Close.
	Trace *trace.Recorder
	// Inject: fault-injection rules in force from the start (device/inject.go).
	Inject []inject.Rule
}

// DefaultComputeUnits is the compute units of a Config that names none.
const DefaultComputeUnits = 8

// DefaultConfig is a 1 GiB GPU with a 256 MiB BAR, trapped doorbells and 16 MSI-X vectors.
func DefaultConfig() Config {
	return Config{
		VendorID:          abi.PCI_VENDOR_ID,
		DeviceID:          abi.PCI_DEVICE_ID,
		SubsystemVendorID: abi.PCI_SUBSYSTEM_VENDOR_ID,
		SubsystemID:       abi.PCI_SUBSYSTEM_ID,
		VRAMSize:          1 << 30,
		VRAMWindow:        256 << 20,
		Doorbells:         bars.DoorbellTrap,
		MSIXVectors:       16,
		ComputeUnits:      DefaultComputeUnits,
	}
}

// Device is the vgpu PCI function. It implements vfiouser.Device.
type Device struct {
	cfg       Config
	log       *slog.Logger
	config    *pcie.Config
	regs      *bars.RegisterFile
	vram      *bars.VRAM
	doorbells *bars.Doorbells
	mem       *dma.Space
	irqs      *irq.Controller
	info      vfiouser.DeviceInfo

	// msixOn and intxOff mirror config space for engine goroutines: pcie.Config belongs to
	// the worker, but an engine decides between MSI-X and INTx when its work completes.
	msixOn, intxOff, busMaster atomic.Bool

	scratch   [8]uint32
	msixTable []byte // the table QEMU normally emulates; kept so trapped accesses behave
	selftest  selfTest
	gpu       gpu

	// regMu serialises the register file between the vfio-user worker and packets that
	// reach registers from queue goroutines.
	regMu sync.Mutex

	// vramGate: engine accesses to the VRAM memfd enter it, so Close unmaps VRAM only when no
	// goroutine can still copy into it.
	vramGate engineGate
	// rl rate-limits every log line a guest or client can trigger (one limiter for the device).
	rl *ratelog.Limiter
	// inj: the fault-injection rules (inject.go).
	inj *inject.Set

	stats counters
	snap  snapDevice // snapshot.go
}

// counters are the device's diagnostic counts, read by Diagnostics.
type counters struct {
	resets, flrs, disconnects atomic.Uint64
	stragglers                atomic.Uint64 // cut-offs after which an engine call-out was still in flight
	barAccessWhileMemOff      atomic.Uint64
	irqWithoutBusMaster       atomic.Uint64
	irqErrors                 atomic.Uint64
}

var _ vfiouser.Device = (*Device)(nil)

// New builds a device from cfg.
func New(cfg Config) (*Device, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := validate(cfg); err != nil {
		return nil, err
	}
	d := &Device{cfg: cfg, log: cfg.Log, rl: ratelog.New(cfg.Log, 0, 0)}
	var err error
	if d.vram, err = bars.NewVRAM(cfg.VRAMSize, cfg.VRAMWindow); err != nil {
		return nil, err
	}
	d.mem = dma.NewSpace(d.log.With("part", "dma"))
	d.mem.SetLimiter(d.rl)
	d.irqs = irq.New(cfg.MSIXVectors, d.log.With("part", "irq"))
	d.irqs.SetLimiter(d.rl)
	d.msixTable = make([]byte, 16*cfg.MSIXVectors)
	d.selftest.init(d)
	d.newGPU()
	d.initInjection()
	// Doorbells last: in poll mode their poller starts at once and rings into the GPU core.
	if d.doorbells, err = bars.NewDoorbells(cfg.Doorbells, abi.DOORBELL_SIZE, d.doorbellRang); err != nil {
		d.Close()
		return nil, err
	}
	if d.config, err = pcie.New(d.pciSpec(), pcie.Hooks{Command: d.commandChanged, FLR: d.flr}); err != nil {
		d.Close()
		return nil, err
	}
	if d.regs, err = bars.NewRegisterFile(abi.REGS_SIZE, d.claims()...); err != nil {
		d.Close()
		return nil, err
	}
	d.regs.SetLimiter(d.rl)
	d.regs.SetRegisterNames(func(off uint32) string { return abi.RegisterNames[off] })
	d.resetMSIXTable()
	d.info = d.deviceInfo()
	return d, nil
}

func validate(cfg Config) error {
	pow2 := func(v uint64) bool { return v != 0 && v&(v-1) == 0 }
	switch {
	case !pow2(cfg.VRAMWindow) || cfg.VRAMWindow < 1<<20:
		return fmt.Errorf("device: BAR window %#x must be a power of two of at least 1 MiB", cfg.VRAMWindow)
	case !pow2(cfg.VRAMSize) || cfg.VRAMSize < cfg.VRAMWindow:
		return fmt.Errorf("device: VRAM size %#x must be a power of two no smaller than the BAR window %#x", cfg.VRAMSize, cfg.VRAMWindow)
	case cfg.MSIXVectors < 1 || cfg.MSIXVectors > abi.REGS_MSIX_MAX_VECTORS:
		return fmt.Errorf("device: %d MSI-X vectors, want 1..%d", cfg.MSIXVectors, abi.REGS_MSIX_MAX_VECTORS)
	case len(cfg.Inject) > inject.MaxRules:
		return fmt.Errorf("device: %d injection rules, at most %d", len(cfg.Inject), inject.MaxRules)
	}
	return nil
}

func (d *Device) pciSpec() pcie.Spec {
	var s pcie.Spec
	s.VendorID, s.DeviceID = d.cfg.VendorID, d.cfg.DeviceID
	s.SubsystemVendorID, s.SubsystemID = d.cfg.SubsystemVendorID, d.cfg.SubsystemID
	s.Revision = abi.PCI_REVISION
	s.ClassCode = abi.PCI_CLASS_CODE
	s.BARs[abi.BAR_VRAM] = pcie.BAR{Size: d.cfg.VRAMWindow, Mem64: true, Prefetchable: true}
	s.BARs[abi.BAR_DOORBELL] = pcie.BAR{Size: abi.DOORBELL_SIZE, Mem64: true}
	s.BARs[abi.BAR_REGS] = pcie.BAR{Size: abi.REGS_SIZE}
	s.MSIX = pcie.MSIX{
		Vectors:  d.cfg.MSIXVectors,
		TableBAR: abi.BAR_REGS, TableOffset: abi.REGS_MSIX_TABLE_OFFSET,
		PBABAR: abi.BAR_REGS, PBAOffset: abi.REGS_MSIX_PBA_OFFSET,
	}
	s.ResizableBAR = &pcie.ResizableBAR{BAR: abi.BAR_VRAM, Current: d.cfg.VRAMWindow, Max: d.cfg.VRAMSize}
	return s
}

func (d *Device) deviceInfo() vfiouser.DeviceInfo {
	rw := uint32(vfiouser.RegionFlagRead | vfiouser.RegionFlagWrite)
	regions := make([]vfiouser.RegionInfo, numRegions)
	regions[abi.BAR_VRAM] = vfiouser.RegionInfo{
		Flags: rw | vfiouser.RegionFlagMmap, Size: d.vram.Window(), File: d.vram.File(),
		Sparse: []vfiouser.SparseArea{{Offset: 0, Size: d.vram.Window()}},
	}
	regions[abi.BAR_DOORBELL] = vfiouser.RegionInfo{Flags: rw, Size: d.doorbells.Size()}
	if f := d.doorbells.File(); f != nil {
		regions[abi.BAR_DOORBELL].Flags |= vfiouser.RegionFlagMmap
		regions[abi.BAR_DOORBELL].File = f
		regions[abi.BAR_DOORBELL].Sparse = []vfiouser.SparseArea{{Offset: 0, Size: d.doorbells.Size()}}
	}
	regions[abi.BAR_REGS] = vfiouser.RegionInfo{Flags: rw, Size: uint64(d.regs.Size())}
	regions[regionConfig] = vfiouser.RegionInfo{Flags: rw, Size: configSize}
	irqs := make([]vfiouser.IRQInfo, numIRQs)
	irqs[vfiouser.IRQIndexINTx] = vfiouser.IRQInfo{Flags: vfiouser.IRQInfoEventfd | vfiouser.IRQInfoMaskable | vfiouser.IRQInfoAutomasked, Count: 1}
	irqs[vfiouser.IRQIndexMSI] = vfiouser.IRQInfo{Flags: vfiouser.IRQInfoEventfd, Count: 0}
	// No NORESIZE: QEMU then adds vectors one at a time instead of tearing the whole set down
	// and re-creating it each time the guest enables one more.
	irqs[vfiouser.IRQIndexMSIX] = vfiouser.IRQInfo{Flags: vfiouser.IRQInfoEventfd, Count: uint32(d.cfg.MSIXVectors)}
	irqs[vfiouser.IRQIndexErr] = vfiouser.IRQInfo{Flags: vfiouser.IRQInfoEventfd, Count: 1}
	irqs[vfiouser.IRQIndexReq] = vfiouser.IRQInfo{Flags: vfiouser.IRQInfoEventfd, Count: 1}
	return vfiouser.DeviceInfo{
		Flags:   vfiouser.DeviceFlagReset | vfiouser.DeviceFlagPCI,
		Regions: regions,
		IRQs:    irqs,
	}
}

// Info implements vfiouser.Device.
func (d *Device) Info() vfiouser.DeviceInfo { return d.info }

// RegionRead implements vfiouser.Device.
func (d *Device) RegionRead(region uint32, off uint64, p []byte) error {
	if region == regionConfig {
		return d.config.Read(off, p)
	}
	if !d.barDecoded(region) {
		for i := range p {
			p[i] = 0xff // master abort: the function does not decode memory while MEM is off
		}
		return nil
	}
	switch region {
	case abi.BAR_VRAM:
		return d.vram.Read(off, p)
	case abi.BAR_DOORBELL:
		return d.doorbells.Read(off, p)
	case abi.BAR_REGS:
		if err := d.regs.Check(off, len(p)); err != nil {
			return err
		}
		d.regMu.Lock()
		defer d.regMu.Unlock()
		return d.regs.Read(off, p)
	}
	return fmt.Errorf("device: read of region %d, which has no storage: %w", region, syscall.EINVAL)
}

// RegionWrite implements vfiouser.Device.
func (d *Device) RegionWrite(region uint32, off uint64, p []byte) error {
	if region == regionConfig {
		d.snap.cfgMu.Lock()
		err := d.config.Write(off, p)
		d.snap.cfgMu.Unlock()
		d.snapshotConfig()
		return err
	}
	if !d.barDecoded(region) {
		return nil
	}
	switch region {
	case abi.BAR_VRAM:
		return d.vram.Write(off, p)
	case abi.BAR_DOORBELL:
		return d.doorbells.Write(off, p)
	case abi.BAR_REGS:
		if err := d.regs.Check(off, len(p)); err != nil {
			return err
		}
		d.regMu.Lock()
		defer d.regMu.Unlock()
		return d.regs.Write(off, p)
	}
	return fmt.Errorf("device: write to region %d, which has no storage: %w", region, syscall.EINVAL)
}

// barDecoded applies COMMAND.Memory Space to trapped BAR accesses, as hardware does.
func (d *Device) barDecoded(region uint32) bool {
	if region > abi.BAR_REGS || d.config.MemoryEnabled() {
		return true
	}
	d.stats.barAccessWhileMemOff.Add(1)
	return false
}

// DMAMap implements vfiouser.Device.
func (d *Device) DMAMap(m vfiouser.DMAMapping) error {
	return d.mem.Map(dma.Mapping{
		IOVA: m.IOVA, Size: m.Size, Offset: m.Offset,
		Read:  m.Flags&vfiouser.DMAFlagRead != 0,
		Write: m.Flags&vfiouser.DMAFlagWrite != 0,
		File:  m.File,
	})
}

// DMAUnmap implements vfiouser.Device. Once no access to the range is in flight, the L2's
// lines of that memory are dropped: they belong to memory the device may no longer reach, and
// dirty ones (a driver that unmapped memory the GPU wrote without a write-back) are counted.
func (d *Device) DMAUnmap(iova, size uint64, all bool) error {
	if all {
		d.mem.UnmapAll()
		d.gpu.cache.DropLost(&l2.Range{Domain: engine.DomainSystem, Addr: 0, Size: math.MaxUint64})
		return nil
	}
	d.mem.Unmap(iova, size)
	d.gpu.cache.DropLost(&l2.Range{Domain: engine.DomainSystem, Addr: iova, Size: size})
	return nil
}

// SetIRQs implements vfiouser.Device.
func (d *Device) SetIRQs(r vfiouser.SetIRQs) error {
	return d.irqs.Set(irq.Request{Flags: r.Flags, Index: r.Index, Start: r.Start, Count: r.Count, Bools: r.Bools, Files: r.Files})
}

// Connected implements vfiouser.Device.
func (d *Device) Connected(p vfiouser.Peer) {
	d.snap.attached.Store(true)
	d.mem.SetTransport(p)
}

// Disconnected implements vfiouser.Device: the client's mappings and eventfds die with it, the
// engines stop and forget their work, and Bus Master is cleared, so nothing the old client's
// guest set in motion can reach the next client's memory; configuration (registers, config
// space otherwise) and VRAM stay for the next client (see lifecycle.go).
func (d *Device) Disconnected() {
	d.stats.disconnects.Add(1)
	d.rl.Info("lifecycle-disconnect", "client gone: engines stopped, device cut off from guest memory", "reason", string(eventDisconnect))
	d.stopEngines(eventDisconnect)
	d.dropClientMemory()
	d.mem.SetTransport(nil)
	d.mem.UnmapAll()
	d.irqs.Close()
	d.clearBusMaster()
}

// clearBusMaster clears COMMAND.Bus Master Enable as a driver's pci_clear_master would: DMA and
// MSI stay off until the next client's guest enables them.
func (d *Device) clearBusMaster() {
	var b [2]byte
	if d.config.Read(0x04, b[:]) != nil {
		return
	}
	cmd := uint16(b[0]) | uint16(b[1])<<8
	cmd &^= pcieCommandBusMaster
	d.snap.cfgMu.Lock()
	_ = d.config.Write(0x04, []byte{byte(cmd), byte(cmd >> 8)})
	d.snap.cfgMu.Unlock()
	d.snapshotConfig()
}

// pcieCommandBusMaster is COMMAND bit 2.
const pcieCommandBusMaster = 1 << 2

// Reset implements vfiouser.Device (DEVICE_RESET). It is idempotent: QEMU sends it twice per
// system_reset.
func (d *Device) Reset() error {
	d.stats.resets.Add(1)
	d.rl.Info("lifecycle-reset", "device reset", "reason", string(eventDeviceReset))
	d.stopEngines(eventDeviceReset)
	d.snap.cfgMu.Lock()
	d.config.Reset()
	d.snap.cfgMu.Unlock()
	d.snapshotConfig()
	d.resetState()
	return nil
}

// snapshotConfig publishes the config-space bits engines need; called after every change.
func (d *Device) snapshotConfig() {
	d.msixOn.Store(d.config.MSIXEnabled())
	d.busMaster.Store(d.config.BusMasterEnabled())
	d.intxOff.Store(d.config.INTxDisabled())
}

// flr is pcie's hook for Initiate Function Level Reset; config space has already been reset
// (so Bus Master is off there; stopEngines cuts dma off to match).
func (d *Device) flr() {
	d.stats.flrs.Add(1)
	d.rl.Info("lifecycle-flr", "device reset", "reason", string(eventFLR))
	d.stopEngines(eventFLR)
	d.resetState()
}

func (d *Device) commandChanged(memory, busMaster bool) {
	d.log.Debug("command register", "memory", memory, "bus_master", busMaster)
	d.mem.SetBusMaster(busMaster)
}

func (d *Device) doorbellRang(index int, value uint64) {
	d.routeDoorbell(index, value)
}

// Close releases the device's memory. The device must not be served afterwards. It follows
// the life-cycle contract, then waits (bounded) for every goroutine the engines started; VRAM
// is unmapped only once no engine access can reach it.
func (d *Device) Close() error {
	if d.mem != nil && d.gpu.cp != nil {
		d.stopEngines(eventClose)
	}
	d.gpu.close()
	var errs []error
	if d.irqs != nil {
		d.irqs.Close()
	}
	if d.mem != nil {
		d.mem.UnmapAll()
	}
	if d.doorbells != nil {
		errs = append(errs, d.doorbells.Close())
	}
	if d.vram != nil {
		if d.vramGate.close(quiesceTimeout) {
			errs = append(errs, d.vram.Close())
		} else {
			// Unmapping now could fault a goroutine still copying: leave the mapping to the
			// process's exit.
			d.log.Error("close: an engine is still inside VRAM; VRAM stays mapped", "waited", quiesceTimeout)
		}
	}
	return errors.Join(errs...)
}
