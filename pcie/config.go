package pcie

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrAccess is wrapped by the errors Read and Write return for an access that is empty or
// does not lie inside the ConfigSize bytes of config space.
var ErrAccess = errors.New("pcie: config access out of range")

// Hooks are the device's callbacks. Both are optional and are called synchronously from
// Write, after the write has been applied, so they see the new state through Config's
// accessors. They must not call Write or Reset.
type Hooks struct {
	// Command is called when a write changes the COMMAND register's Memory Space or Bus
	// Master bit (also when an FLR clears them), with the new values.
	Command func(memory, busMaster bool)
	// FLR is called when the guest sets Initiate Function Level Reset in the Express Device
	// Control register, after config space has been returned to its power-on state. The
	// device resets the rest of the function here.
	FLR func()
}

// Config is the config space of one PCI Express function: a 4 KiB register file with
// per-bit write semantics. It does no I/O and is not safe for concurrent use: the device's
// single worker goroutine owns it.
type Config struct {
	spec  Spec
	hooks Hooks

	regs  [ConfigSize]byte // what the guest reads
	init  [ConfigSize]byte // power-on values
	wmask [ConfigSize]byte // bits a write replaces
	w1c   [ConfigSize]byte // bits a write of 1 clears
}

// New validates spec and builds the power-on config space. Invalid specs yield an error
// wrapping ErrInvalidSpec.
func New(spec Spec, hooks Hooks) (*Config, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if r := spec.ResizableBAR; r != nil {
		cp := *r // keep the caller's pointer out of our state
		spec.ResizableBAR = &cp
	}
	c := &Config{spec: spec, hooks: hooks}
	c.build()
	c.regs = c.init
	return c, nil
}

// checkRange refuses empty accesses and any byte outside [0, ConfigSize), without
// overflowing on huge offsets.
func checkRange(off uint64, n int) error {
	if n == 0 || off >= ConfigSize || uint64(n) > ConfigSize-off {
		return fmt.Errorf("%w: offset %#x, length %d", ErrAccess, off, n)
	}
	return nil
}

// Read copies len(p) bytes of config space starting at off into p. Reads have no side
// effects; any length is allowed (QEMU reads all 4 KiB at once when it realizes the device).
func (c *Config) Read(off uint64, p []byte) error {
	if err := checkRange(off, len(p)); err != nil {
		return err
	}
	copy(p, c.regs[off:])
	return nil
}

// Write stores p at off with the hardware's write semantics, byte by byte: read-only and
// reserved bits keep their value, write-1-to-clear bits are cleared by ones, the rest take
// the written value. Then the side effects run: an unsupported power state written to PMCSR
// is discarded, Initiate FLR resets the function, and the hooks are called.
func (c *Config) Write(off uint64, p []byte) error {
	if err := checkRange(off, len(p)); err != nil {
		return err
	}
	oldCmd := c.u16(offCommand)
	oldPS := c.regs[capPM+pmPMCSR] & pmcsrStateMask
	flr := false
	for i, v := range p {
		o := int(off) + i
		m := c.wmask[o]
		c.regs[o] = (c.regs[o] &^ m) | (v & m)
		c.regs[o] &^= v & c.w1c[o]
		if o == capExp+expDevCtl+1 && v&(devCtlFLR>>8) != 0 {
			flr = true
		}
	}
	// D1 and D2 are not supported: the PM spec says such a write completes but changes
	// nothing.
	if ps := c.regs[capPM+pmPMCSR] & pmcsrStateMask; ps != pmcsrD0 && ps != pmcsrD3hot {
		c.regs[capPM+pmPMCSR] = c.regs[capPM+pmPMCSR]&^pmcsrStateMask | oldPS
	}
	if flr {
		// FLR returns the function's config space to its power-on state. The spec keeps
		// sticky bits and a few link fields; this function has none worth keeping.
		c.Reset()
	}
	if newCmd := c.u16(offCommand); (oldCmd^newCmd)&(cmdMemory|cmdBusMaster) != 0 && c.hooks.Command != nil {
		c.hooks.Command(newCmd&cmdMemory != 0, newCmd&cmdBusMaster != 0)
	}
	if flr && c.hooks.FLR != nil {
		c.hooks.FLR()
	}
	return nil
}

// Reset returns config space to its power-on state (device reset, FLR). It calls no hooks:
// whoever resets the device already knows.
func (c *Config) Reset() { c.regs = c.init }

// MemoryEnabled reports COMMAND.Memory Space: whether the function decodes its BARs.
func (c *Config) MemoryEnabled() bool { return c.u16(offCommand)&cmdMemory != 0 }

// BusMasterEnabled reports COMMAND.Bus Master: whether the function may issue DMA and MSI-X
// messages.
func (c *Config) BusMasterEnabled() bool { return c.u16(offCommand)&cmdBusMaster != 0 }

// INTxDisabled reports COMMAND.Interrupt Disable.
func (c *Config) INTxDisabled() bool { return c.u16(offCommand)&cmdINTxDisable != 0 }

// MSIXEnabled reports the MSI-X Enable bit.
func (c *Config) MSIXEnabled() bool { return c.u16(capMSIX+msixCtrl)&msixCtrlEnable != 0 }

// MSIXFunctionMasked reports the MSI-X Function Mask bit.
func (c *Config) MSIXFunctionMasked() bool { return c.u16(capMSIX+msixCtrl)&msixCtrlMask != 0 }

// BARAddress returns the address programmed into BAR i (both halves for a 64-bit BAR),
// without the type bits. It returns 0 for an absent BAR, the upper slot of a 64-bit BAR, or
// an index outside 0..5. While firmware sizes a BAR the value is the size mask it wrote.
func (c *Config) BARAddress(i int) uint64 {
	if !c.spec.present(i) {
		return 0
	}
	addr := uint64(c.u32(offBAR0+4*i) &^ barFlagMask)
	if c.spec.BARs[i].Mem64 {
		addr |= uint64(c.u32(offBAR0+4*(i+1))) << 32
	}
	return addr
}

func (c *Config) u16(off int) uint16 { return binary.LittleEndian.Uint16(c.regs[off:]) }
func (c *Config) u32(off int) uint32 { return binary.LittleEndian.Uint32(c.regs[off:]) }

// reg describes one register for build: its power-on value, writable and W1C bits.
type reg struct {
	off, size    int
	val, rw, w1c uint64
}

func (c *Config) set(r reg) {
	for i := 0; i < r.size; i++ {
		sh := 8 * i
		c.init[r.off+i] = byte(r.val >> sh)
		c.wmask[r.off+i] = byte(r.rw >> sh)
		c.w1c[r.off+i] = byte(r.w1c >> sh)
	}
}

// build lays out the power-on image and the write masks from the spec.
func (c *Config) build() {
	s := &c.spec
	c.set(reg{off: offVendorID, size: 2, val: uint64(s.VendorID)})
	c.set(reg{off: offDeviceID, size: 2, val: uint64(s.DeviceID)})
	c.set(reg{off: offCommand, size: 2, rw: cmdWritable})
	c.set(reg{off: offStatus, size: 2, val: stsCapList, w1c: stsW1C})
	c.set(reg{off: offRevision, size: 1, val: uint64(s.Revision)})
	c.set(reg{off: offProgIF, size: 3, val: uint64(s.ClassCode)})
	c.set(reg{off: offCacheLineSize, size: 1, rw: 0xff})
	// Latency Timer and BIST are hardwired 0 on express functions.
	c.set(reg{off: offHeaderType, size: 1, val: headerTypeSingleFn})
	for i := 0; i < numBARs; i++ {
		c.buildBAR(i)
	}
	c.set(reg{off: offSubsysVendor, size: 2, val: uint64(s.SubsystemVendorID)})
	c.set(reg{off: offSubsysID, size: 2, val: uint64(s.SubsystemID)})
	// Expansion ROM BAR (0x30): no ROM, so all bits are read-only 0. QEMU probes it with
	// 0xfffff800 and would invent a ROM if the write were echoed.
	c.set(reg{off: offCapPtr, size: 1, val: capPM})
	c.set(reg{off: offIntLine, size: 1, rw: 0xff})
	c.set(reg{off: offIntPin, size: 1, val: intPinA})

	c.buildPM(capMSIX)
	c.buildMSIX(capExp)
	c.buildExp(0)
	if s.ResizableBAR != nil {
		c.buildRebar(0)
	}
	// Without extended capabilities the dword at 0x100 stays 0, which the spec defines as
	// "no extended capabilities".
}

func (c *Config) buildBAR(i int) {
	s := &c.spec
	b := s.BARs[i]
	off := offBAR0 + 4*i
	if b.Size == 0 {
		if s.upperHalf(i) {
			// Upper 32 address bits of the BAR below: writable above the size.
			c.set(reg{off: off, size: 4, rw: uint64(uint32(^(s.BARs[i-1].Size - 1) >> 32))})
		}
		return // absent: reads 0, writes ignored
	}
	var flags uint64
	if b.Mem64 {
		flags |= barType64
	}
	if b.Prefetchable {
		flags |= barPrefetchable
	}
	// Address bits below the size read 0 (that is how firmware sizes the BAR); the type bits
	// are read-only.
	rw := uint64(uint32(^(b.Size - 1))) &^ barFlagMask
	c.set(reg{off: off, size: 4, val: flags, rw: rw})
}

func (c *Config) buildPM(next int) {
	c.set(reg{off: capPM, size: 1, val: capIDPM})
	c.set(reg{off: capPM + 1, size: 1, val: uint64(next)})
	// PMC: version 3; no D1/D2, no PME, no auxiliary current.
	c.set(reg{off: capPM + pmPMC, size: 2, val: pmcVersion3})
	// PMCSR: PowerState is writable (D0 and D3hot; D1/D2 writes are dropped in Write).
	// No_Soft_Reset: D3hot→D0 keeps the function's state, so QEMU does not take a PM
	// transition for a reset method.
	c.set(reg{off: capPM + pmPMCSR, size: 2, val: pmcsrNoSoftReset, rw: pmcsrStateMask})
}

func (c *Config) buildMSIX(next int) {
	m := c.spec.MSIX
	c.set(reg{off: capMSIX, size: 1, val: capIDMSIX})
	c.set(reg{off: capMSIX + 1, size: 1, val: uint64(next)})
	c.set(reg{off: capMSIX + msixCtrl, size: 2, val: uint64(m.Vectors - 1), rw: msixCtrlEnable | msixCtrlMask})
	c.set(reg{off: capMSIX + msixTable, size: 4, val: uint64(m.TableOffset) | uint64(m.TableBAR)})
	c.set(reg{off: capMSIX + msixPBA, size: 4, val: uint64(m.PBAOffset) | uint64(m.PBABAR)})
}

func (c *Config) buildExp(next int) {
	x := capExp
	c.set(reg{off: x, size: 1, val: capIDExp})
	c.set(reg{off: x + 1, size: 1, val: uint64(next)})
	c.set(reg{off: x + expFlags, size: 2, val: expFlagsVersion2 | expTypeEndpoint<<expFlagsTypeShift})
	c.set(reg{off: x + expDevCap, size: 4,
		val: devCapMPS256 | devCapExtTag | devCapL0sNoLimit | devCapL1NoLimit | devCapRBER | devCapFLR})
	// Initiate FLR (bit 15) is not in the mask: Write watches for it and it always reads 0.
	c.set(reg{off: x + expDevCtl, size: 2, val: devCtlDefault, rw: devCtlWritable})
	c.set(reg{off: x + expDevSta, size: 2, w1c: devStaW1C})
	// A Gen3 x16 link with no ASPM; the status shows it trained at full speed and width.
	c.set(reg{off: x + expLnkCap, size: 4, val: linkSpeedGen3 | linkWidthX16<<4 | lnkCapASPMOptComp})
	c.set(reg{off: x + expLnkCtl, size: 2, rw: lnkCtlWritable})
	c.set(reg{off: x + expLnkSta, size: 2, val: linkSpeedGen3 | linkWidthX16<<4 | lnkStaSlotClk})
	// Slot and root registers (0x14..0x23) are reserved for an endpoint: zero.
	c.set(reg{off: x + expDevCap2, size: 4, val: devCap2CTODisable})
	c.set(reg{off: x + expDevCtl2, size: 2, rw: devCtl2CTODisable})
	c.set(reg{off: x + expLnkCap2, size: 4, val: lnkCap2Speeds})
	c.set(reg{off: x + expLnkCtl2, size: 2, val: linkSpeedGen3, rw: lnkCtl2TargetMask})
}

func (c *Config) buildRebar(next int) {
	r := c.spec.ResizableBAR
	x := extCapRebar
	c.set(reg{off: x, size: 4, val: extCapIDRebar | 1<<16 | uint64(next)<<20})
	var capSizes, ctrlSizes uint64
	for n := log2(r.Current); n <= log2(r.Max); n++ {
		if n <= rebarCapMaxLog2 {
			capSizes |= 1 << (n - 20 + 4) // bit 4 = 1 MiB
		} else {
			ctrlSizes |= 1 << (n - rebarCapMaxLog2 - 1 + 16) // bit 16 = 256 TiB
		}
	}
	c.set(reg{off: x + rebarCap, size: 4, val: capSizes})
	// Control: BAR index, one resizable BAR, BAR Size = current. Read-only: see ResizableBAR.
	ctrl := uint64(r.BAR) | 1<<rebarCtrlNBARShift | uint64(log2(r.Current)-20)<<rebarCtrlSizeShift | ctrlSizes
	c.set(reg{off: x + rebarCtrl, size: 4, val: ctrl})
}
