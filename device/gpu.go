package device

import (
	"errors"
	"fmt"
	"vgpu/compute"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/dma"
	"vgpu/engine"
	"vgpu/gpummu"
	"vgpu/gpuvm"
	"vgpu/irq"
	"vgpu/l2"
	"vgpu/mes"
)

// gpu is the GPU core behind the register blocks: the L2 model, the memory controller, the
// interrupt handler ring and the command processor. They share package engine's types, so the
// CP uses the MMU and the IH directly.
type gpu struct {
	cache *l2.Cache
	mmu   *gpummu.MMU
	vm    *gpuvm.VM // VMIDs 1..15, and the AMD-format fault latch of all VMIDs
	ih    *irq.IH
	cp    *cp.CP
	mes   *mes.MES      // the scheduler firmware: user queues on the slots it owns
	cus   *compute.Pool // the compute units: shader dispatches of every queue
	hdp   hdp
	// config is the CONFIG block: plain storage, as CONFIG_SCRATCH_* are on AMD parts.
	config [8]uint32
}

func (d *Device) newGPU() {
	g := &d.gpu
	back := physBacking{d}
	g.cache = l2.New(back, d.log.With("part", "l2"))
	g.cache.SetLimiter(d.rl)
	g.mmu = gpummu.New(g.cache, back, d.cfg.VRAMSize, d.log.With("part", "gpummu"))
	g.mmu.SetLimiter(d.rl)
	g.vm = gpuvm.New(gpuvm.Config{Tables: tableReader{back}, VRAMSize: d.cfg.VRAMSize,
		Log: d.log.With("part", "gpuvm"), Limiter: d.rl})
	g.mmu.SetVM(g.vm)
	g.ih = irq.NewIH(ihMemory{g.mmu}, d.raiseVector, d.log.With("part", "ih"))
	g.ih.SetLimiter(d.rl)
	g.vm.SetIVSink(g.ih.Push)
	// An invalidation engine's VMID-0 bit drops the GART translations, as GMC_VM_INVALIDATE.
	g.vm.SetVMID0Flush(func() { g.mmu.WriteReg(abi.REG_GMC_VM_INVALIDATE-abi.BLOCK_GMC_BASE, 1) })
	g.cus = compute.New(compute.Config{CUs: d.computeUnits(), Memory: g.mmu, Interrupts: interruptPort{g},
		Strict: g.cache.Strict, Log: d.rl})
	g.cp = cp.New(cp.Config{
		Memory:     g.mmu,
		Registers:  registerPort{d},
		Interrupts: interruptPort{g},
		TLB:        g.vm,
		// A mapped queue stopped, idled or parked: the scheduler looks at its slot.
		Notify:  func(slot int) { g.mes.Notify(slot) },
		Compute: g.cus,
		Log:     d.log.With("part", "cp"),
		Limiter: d.rl,
	})
	d.newMES()
	// Engine writes can satisfy a parked WAIT_REG_MEM: tell the CP to re-check.
	g.mmu.SetOnWrite(g.cp.Wake)
}

// reset returns the core to power-on state: engines first, then what they use.
func (g *gpu) reset() {
	g.mes.Reset() // first: a revoked scheduler places no queue on the slots the CP frees
	g.cp.Reset()
	g.vm.Reset() // releases waiting retry faults: their (revoked) queues stop
	g.ih.Reset()
	g.mmu.Reset()
	g.cache.Reset()
	g.cache.SetStrict(false)
	g.hdp = hdp{}
	g.config = [8]uint32{}
}

// close stops the engines for good: the CP's goroutines (bounded wait) and the L2's
// maintenance pass.
func (g *gpu) close() {
	if g.mes != nil {
		g.mes.Close()
	}
	if g.cp != nil {
		g.cp.Close()
	}
	if g.cus != nil {
		g.cus.Close()
	}
	if g.cache != nil {
		g.cache.Close()
	}
}

// computeUnits is the configured number of compute units.
func (d *Device) computeUnits() int {
	if d.cfg.ComputeUnits <= 0 {
		return DefaultComputeUnits
	}
	return d.cfg.ComputeUnits
}

// raiseVector delivers an interrupt the IH ring raises.
func (d *Device) raiseVector(vector int) {
	// Refusals are counted here; irq logs them (rate-limited) under its own keys.
	if err := d.deliver(vector); err != nil && !errors.Is(err, errNoBusMaster) {
		d.stats.irqErrors.Add(1)
	}
}

// errNoBusMaster: an interrupt not sent because COMMAND.Bus Master is off.
var errNoBusMaster = errors.New("Bus Master Enable is off: an MSI is a memory write and cannot be sent")

// deliver is the one place that decides how the function signals an interrupt: an MSI is a
// memory write by the function, so Bus Master gates it like any DMA; with MSI-X enabled the
// vector's message is sent; otherwise INTx is asserted unless COMMAND.INTx Disable is set. It
// returns why nothing could be sent (Bus Master off, a vector the function does not have).
func (d *Device) deliver(vector int) error {
	if !d.busMaster.Load() {
		d.stats.irqWithoutBusMaster.Add(1)
		return errNoBusMaster
	}
	if d.msixOn.Load() {
		return d.irqs.TriggerMSIX(vector)
	}
	if !d.intxOff.Load() {
		d.irqs.AssertINTx()
	}
	return nil
}

// routeDoorbell sends a doorbell write to whoever listens on it: the IH read pointer or a
// queue. index is the 64-bit doorbell number; registers speak in dword indexes (2·index).
func (d *Device) routeDoorbell(index int, value uint64) {
	dword := uint32(index) * 2
	if db, on := d.gpu.ih.DoorbellRPTR(); on && (db == dword || db == dword+1) {
		if db == dword+1 {
			value >>= 32
		}
		d.gpu.ih.SetRPTR(uint32(value))
		return
	}
	d.gpu.mes.Doorbell(dword, value) // first: it records the value before the HQD may miss it
	d.gpu.cp.Doorbell(dword, value)
}

// claimDoorbell zeroes the doorbell of an HQD slot about to be activated: the queue starts
// with wptr 0, and its first ring must be seen even when it writes the value the doorbell held
// (the last wptr of the queue that used the doorbell before), which a polled doorbell would
// not notice (bars.Doorbells.Clear). A queue already active keeps its doorbell.
func (d *Device) claimDoorbell(slot int) {
	if d.gpu.cp.ReadHQD(slot, abi.REG_HQD_ACTIVE)&1 != 0 {
		return
	}
	ctl := d.gpu.cp.ReadHQD(slot, abi.REG_HQD_PQ_DOORBELL_CONTROL)
	if ctl&abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_EN_MASK == 0 {
		return
	}
	dword := (ctl & abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET_MASK) >> abi.REG_HQD_PQ_DOORBELL_CONTROL__DOORBELL_OFFSET__SHIFT
	d.doorbells.Clear(int(dword / 2))
}

// physBacking is the L2's memory: system addresses are DMA addresses (IOVAs) served by
// dma.Space, which also applies Bus Master; VRAM addresses are offsets into the VRAM memfd,
// reached through the device's VRAM gate (so Close never unmaps VRAM under a copy).
// ReadDirect/WriteDirect are its never-waiting path (l2.DirectBacking).
type physBacking struct{ d *Device }

func (b physBacking) ReadPhys(dom engine.Domain, addr uint64, p []byte) error {
	if dom == engine.DomainSystem {
		return b.d.mem.Read(addr, p)
	}
	return b.withVRAM(addr, len(p), func(v []byte) { copy(p, v) })
}

func (b physBacking) WritePhys(dom engine.Domain, addr uint64, p []byte) error {
	if dom == engine.DomainSystem {
		return b.d.mem.Write(addr, p)
	}
	return b.withVRAM(addr, len(p), func(v []byte) { copy(v, p) })
}

func (b physBacking) ReadDirect(dom engine.Domain, addr uint64, p []byte) error {
	if dom == engine.DomainSystem {
		return notDirect(b.d.mem.ReadDirect(addr, p))
	}
	return b.ReadPhys(dom, addr, p)
}

func (b physBacking) WriteDirect(dom engine.Domain, addr uint64, p []byte) error {
	if dom == engine.DomainSystem {
		return notDirect(b.d.mem.WriteDirect(addr, p))
	}
	return b.WritePhys(dom, addr, p)
}

// notDirect speaks l2's language for dma's "this memory needs a message".
func notDirect(err error) error {
	if errors.Is(err, dma.ErrMessageServed) {
		return fmt.Errorf("%w: %w", l2.ErrNotDirect, err)
	}
	return err
}

// CopyPhys is l2.DirectCopier: one memory copy between the VRAM memfd and guest memory
// mmapped by dma.Space. dma.Space takes its read lock once per copy (never nested), checks Bus
// Master and permissions, and declines message-served mappings; any refusal is
// l2.ErrNotDirect, and the caller then takes the page-by-page path that reports it.
func (b physBacking) CopyPhys(dst, src engine.PhysAddr, n uint64) error {
	if n > uint64(maxInt) {
		return l2.ErrNotDirect
	}
	if src.Domain == engine.DomainSystem && dst.Domain == engine.DomainSystem {
		if !b.d.mem.CopyWithin(dst.Addr, src.Addr, n) {
			return l2.ErrNotDirect
		}
		return nil
	}
	at := dst.Addr
	if dst.Domain != engine.DomainVRAM {
		at = src.Addr
	}
	stripe, in := b.d.vramGate.enter(at)
	if !in {
		return l2.ErrNotDirect
	}
	defer b.d.vramGate.exit(stripe)
	var ok bool
	switch {
	case src.Domain == engine.DomainVRAM && dst.Domain == engine.DomainVRAM:
		s, err1 := b.vram(src.Addr, int(n))
		d, err2 := b.vram(dst.Addr, int(n))
		if ok = err1 == nil && err2 == nil; ok {
			copy(d, s)
		}
	case src.Domain == engine.DomainSystem && dst.Domain == engine.DomainVRAM:
		if d, err := b.vram(dst.Addr, int(n)); err == nil {
			ok = b.d.mem.CopyOut(d, src.Addr)
		}
	case src.Domain == engine.DomainVRAM && dst.Domain == engine.DomainSystem:
		if s, err := b.vram(src.Addr, int(n)); err == nil {
			ok = b.d.mem.CopyIn(dst.Addr, s)
		}
	}
	if !ok {
		return l2.ErrNotDirect
	}
	return nil
}

const maxInt = int(^uint(0) >> 1)

var (
	errOutsideVRAM = errors.New("outside VRAM")
	errDeviceGone  = errors.New("device closed: VRAM is no longer reachable")
)

// withVRAM runs f on the VRAM bytes [addr, addr+n) inside the VRAM gate.
func (b physBacking) withVRAM(addr uint64, n int, f func([]byte)) error {
	stripe, in := b.d.vramGate.enter(addr)
	if !in {
		return errDeviceGone
	}
	defer b.d.vramGate.exit(stripe)
	v, err := b.vram(addr, n)
	if err != nil {
		return err
	}
	f(v)
	return nil
}

// vram returns the VRAM bytes [addr, addr+n); the caller is inside the VRAM gate.
func (b physBacking) vram(addr uint64, n int) ([]byte, error) {
	mem := b.d.vram.Bytes()
	if addr >= uint64(len(mem)) || uint64(n) > uint64(len(mem))-addr {
		return nil, fmt.Errorf("VRAM access [%#x+%d): %w", addr, n, errOutsideVRAM)
	}
	return mem[addr : addr+uint64(n)], nil
}

// ihMemory is the IH ring's path to memory: VMID 0, never cached.
type ihMemory struct{ mmu *gpummu.MMU }

func (m ihMemory) Write(va uint64, p []byte) error {
	return m.mmu.Write(engine.Access{Bypass: true, Slot: -1}, va, p)
}

// tableReader is gpuvm's path to page tables: straight to memory, never through the L2 (the
// CPU writes them), like gpummu's GART entries.
type tableReader struct{ b physBacking }

func (r tableReader) ReadPTE(pa engine.PhysAddr, p []byte) error {
	return r.b.ReadPhys(pa.Domain, pa.Addr, p)
}

// interruptPort is the CP's Interrupts: the IH, with the PASID of the IV's VMID filled in
// from the VM block's PASID table (the CP knows VMIDs, not processes).
type interruptPort struct{ g *gpu }

func (p interruptPort) Push(iv engine.IV) {
	if iv.PASID == 0 {
		iv.PASID = p.g.vm.PASID(int(iv.VMID))
	}
	p.g.ih.Push(iv)
}

// errNotForPackets refuses a packet's access to a register it may not touch.
var errNotForPackets = errors.New("register not reachable by packets")

// registerPort is the register BAR as packets reach it (SET_*_REG, WRITE_DATA/COPY_DATA to a
// register, WAIT_REG_MEM on a register): every claimed register except the MSI-X page, under
// the same lock as the vfio-user worker's accesses.
type registerPort struct{ d *Device }

func (r registerPort) check(dw uint32) (uint32, error) {
	off := dw * 4
	if dw >= abi.REGS_SIZE/4 || off >= abi.REGS_MSIX_TABLE_OFFSET {
		return 0, fmt.Errorf("register dword %#x: %w", dw, errNotForPackets)
	}
	if _, ok := r.d.regs.Claimed(off); !ok {
		return 0, fmt.Errorf("register dword %#x is not implemented: %w", dw, errNotForPackets)
	}
	return off, nil
}

func (r registerPort) ReadReg(dw uint32) (uint32, error) {
	off, err := r.check(dw)
	if err != nil {
		return 0, err
	}
	var b [4]byte
	r.d.regMu.Lock()
	r.d.regs.ReadUntracked(uint64(off), b[:]) // not the driver: no spin detection
	r.d.regMu.Unlock()
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24, nil
}

func (r registerPort) WriteReg(dw uint32, v uint32) error {
	off, err := r.check(dw)
	if err != nil {
		return err
	}
	b := [4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}
	r.d.regMu.Lock()
	r.d.regs.Write(uint64(off), b[:])
	r.d.regMu.Unlock()
	return nil
}

// GPU register blocks: each forwards to its owner with offsets relative to the block.

func (d *Device) gpuClaims() map[string]blockOwner {
	g := &d.gpu
	return map[string]blockOwner{
		"GMC": {Read: g.mmu.ReadReg, Write: g.mmu.WriteReg},
		"IH":  {Read: g.ih.ReadReg, Write: g.ih.WriteReg},
		"L2":  {Read: g.cache.ReadReg, Write: g.cache.WriteReg},
		"CP":  {Read: g.cp.ReadReg, Write: g.cp.WriteReg},
		"HQD": {
			Read: func(off uint32) uint32 {
				return g.cp.ReadHQD(int(off/abi.BLOCK_HQD_STRIDE), off%abi.BLOCK_HQD_STRIDE)
			},
			Write: func(off, v uint32) {
				slot, reg := int(off/abi.BLOCK_HQD_STRIDE), off%abi.BLOCK_HQD_STRIDE
				if reg == abi.REG_HQD_ACTIVE && v&1 != 0 {
					d.claimDoorbell(slot)
				}
				g.cp.WriteHQD(slot, reg, v)
			},
		},
		"VM": {Read: g.vm.ReadReg, Write: g.vm.WriteReg},
		"VM_CONTEXT": {
			Read: func(off uint32) uint32 {
				return g.vm.ReadContext(int(off/abi.BLOCK_VM_CONTEXT_STRIDE), off%abi.BLOCK_VM_CONTEXT_STRIDE)
			},
			Write: func(off, v uint32) {
				g.vm.WriteContext(int(off/abi.BLOCK_VM_CONTEXT_STRIDE), off%abi.BLOCK_VM_CONTEXT_STRIDE, v)
			},
		},
		"VM_INV_ENG": {
			Read: func(off uint32) uint32 {
				return g.vm.ReadEngine(int(off/abi.BLOCK_VM_INV_ENG_STRIDE), off%abi.BLOCK_VM_INV_ENG_STRIDE)
			},
			Write: func(off, v uint32) {
				g.vm.WriteEngine(int(off/abi.BLOCK_VM_INV_ENG_STRIDE), off%abi.BLOCK_VM_INV_ENG_STRIDE, v)
			},
		},
		"MES":    {Read: g.mes.ReadReg, Write: g.mes.WriteReg},
		"HDP":    {Read: g.hdp.read, Write: g.hdp.write},
		"CONFIG": storage(&g.config),
	}
}

// gpuDiagnostics is the GPU core's part of the report.
type gpuDiagnostics struct {
	CP  cp.Stats
	MMU gpummu.Stats
	VM  gpuvm.Stats
	L2  l2.Stats
	IH  irq.IHStats
	MES mes.Stats
}

func (g *gpu) diagnostics() gpuDiagnostics {
	return gpuDiagnostics{CP: g.cp.Stats(), MMU: g.mmu.Stats(), VM: g.vm.Stats(), L2: g.cache.Stats(), IH: g.ih.Stats(), MES: g.mes.Stats()}
}

var (
	_ l2.DirectCopier  = physBacking{}
	_ l2.DirectBacking = physBacking{}
)
