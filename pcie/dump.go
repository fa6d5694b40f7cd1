package pcie

import (
	"fmt"
	"strings"
)

// Dump renders the whole config space as text in the spirit of `lspci -vvv` followed by
// `lspci -xxxx`: header fields, COMMAND/STATUS decoded, each BAR, each capability decoded,
// then a hex dump of every 16-byte line that is not all zero. It decodes the current
// register contents (walking the capability lists as a guest would), so it is also a
// debugging aid for a device that has been programmed.
func (c *Config) Dump() string {
	var b strings.Builder
	c.dumpHeader(&b)
	c.dumpCaps(&b)
	c.dumpExtCaps(&b)
	b.WriteString("\n")
	c.dumpHex(&b)
	return b.String()
}

func (c *Config) u8(off int) uint8 { return c.regs[off] }

func sign(name string, on bool) string {
	if on {
		return name + "+"
	}
	return name + "-"
}

// flags renders (name string, on bool) pairs as lspci does: "Mem+ BusMaster-".
func flags(bits ...any) string {
	parts := make([]string, 0, len(bits)/2)
	for i := 0; i+1 < len(bits); i += 2 {
		parts = append(parts, sign(bits[i].(string), bits[i+1].(bool)))
	}
	return strings.Join(parts, " ")
}

func className(class uint32) string {
	switch class >> 8 {
	case 0x0300:
		return "VGA compatible controller"
	case 0x0301:
		return "XGA compatible controller"
	case 0x0302:
		return "3D controller"
	case 0x0380:
		return "Display controller"
	}
	return "Class"
}

// sizeString formats a BAR size the way lspci does ("16K", "256M", "1G").
func sizeString(n uint64) string {
	units := []string{"", "K", "M", "G", "T", "P", "E"}
	u := 0
	for n >= 1024 && n%1024 == 0 && u < len(units)-1 {
		n /= 1024
		u++
	}
	return fmt.Sprintf("%d%s", n, units[u])
}

// rebarSizeString formats a Resizable BAR size as lspci does ("256MB", "1GB").
func rebarSizeString(n uint64) string { return sizeString(n) + "B" }

func (c *Config) dumpHeader(b *strings.Builder) {
	class := uint32(c.u8(offBaseClass))<<16 | uint32(c.u8(offSubClass))<<8 | uint32(c.u8(offProgIF))
	fmt.Fprintf(b, "%s [%04x]: Device [%04x:%04x] (rev %02x) (prog-if %02x)\n",
		className(class), class>>8, c.u16(offVendorID), c.u16(offDeviceID), c.u8(offRevision), class&0xff)
	fmt.Fprintf(b, "\tSubsystem: Device [%04x:%04x]\n", c.u16(offSubsysVendor), c.u16(offSubsysID))
	ht := c.u8(offHeaderType)
	fn := "single function"
	if ht&0x80 != 0 {
		fn = "multi-function"
	}
	fmt.Fprintf(b, "\tHeader type: %02x (%s), BIST: %02x\n", ht&0x7f, fn, c.u8(offBIST))

	cmd := c.u16(offCommand)
	fmt.Fprintf(b, "\tControl: %s\n", flags(
		"I/O", cmd&cmdIO != 0, "Mem", cmd&cmdMemory != 0, "BusMaster", cmd&cmdBusMaster != 0,
		"SpecCycle", cmd&cmdSpecial != 0, "MemWINV", cmd&cmdMWI != 0, "VGASnoop", cmd&cmdVGASnoop != 0,
		"ParErr", cmd&cmdParity != 0, "Stepping", cmd&cmdStepping != 0, "SERR", cmd&cmdSERR != 0,
		"FastB2B", cmd&cmdFastB2B != 0, "DisINTx", cmd&cmdINTxDisable != 0))
	sts := c.u16(offStatus)
	devsel := [...]string{"fast", "medium", "slow", "??"}[(sts&stsDevselMask)>>9]
	fmt.Fprintf(b, "\tStatus: %s DEVSEL=%s %s\n",
		flags("Cap", sts&stsCapList != 0, "66MHz", sts&sts66MHz != 0, "UDF", sts&stsUDF != 0,
			"FastB2B", sts&stsFastB2B != 0, "ParErr", sts&stsMasterParity != 0),
		devsel,
		flags(">TAbort", sts&stsSigTargetAbort != 0, "<TAbort", sts&stsRecTargetAbort != 0,
			"<MAbort", sts&stsRecMasterAbort != 0, ">SERR", sts&stsSigSystemError != 0,
			"<PERR", sts&stsDetectedParity != 0, "INTx", sts&stsINTx != 0))
	fmt.Fprintf(b, "\tLatency: %d, Cache Line Size: %d bytes\n", c.u8(offLatencyTimer), 4*int(c.u8(offCacheLineSize)))
	if pin := c.u8(offIntPin); pin >= 1 && pin <= 4 {
		fmt.Fprintf(b, "\tInterrupt: pin %c routed to IRQ %d\n", 'A'+pin-1, c.u8(offIntLine))
	} else {
		fmt.Fprintf(b, "\tInterrupt: none (pin %d), line %d\n", pin, c.u8(offIntLine))
	}

	for i := 0; i < numBARs; i++ {
		bar := c.spec.BARs[i]
		if bar.Size == 0 {
			continue
		}
		raw := c.u32(offBAR0 + 4*i)
		width := "32-bit"
		if raw&barTypeMask == barType64 {
			width = "64-bit"
		}
		pf := "non-prefetchable"
		if raw&barPrefetchable != 0 {
			pf = "prefetchable"
		}
		dis := ""
		if cmd&cmdMemory == 0 {
			dis = " [disabled]"
		}
		fmt.Fprintf(b, "\tRegion %d: Memory at %08x (%s, %s)%s [size=%s]\n",
			i, c.BARAddress(i), width, pf, dis, sizeString(bar.Size))
	}
	if rom := c.u32(offROM); rom != 0 {
		fmt.Fprintf(b, "\tExpansion ROM: %08x\n", rom)
	} else {
		b.WriteString("\tExpansion ROM: none\n")
	}
}

func (c *Config) dumpCaps(b *strings.Builder) {
	if c.u16(offStatus)&stsCapList == 0 {
		return
	}
	pos := int(c.u8(offCapPtr)) &^ 3
	// A well-formed list has at most (256-64)/4 entries; the bound guards against loops.
	for ttl := (0x100 - headerSize) / 4; pos >= headerSize && ttl > 0; ttl-- {
		id := c.u8(pos)
		switch id {
		case capIDPM:
			c.dumpPM(b, pos)
		case capIDMSIX:
			c.dumpMSIX(b, pos)
		case capIDExp:
			c.dumpExp(b, pos)
		default:
			fmt.Fprintf(b, "\tCapabilities: [%02x] Unknown capability %02x\n", pos, id)
		}
		pos = int(c.u8(pos+1)) &^ 3
	}
}

func (c *Config) dumpPM(b *strings.Builder, pos int) {
	pmc := c.u16(pos + pmPMC)
	fmt.Fprintf(b, "\tCapabilities: [%02x] Power Management version %d\n", pos, pmc&7)
	fmt.Fprintf(b, "\t\tFlags: %s AuxCurrent=%dmA PME(%s)\n",
		flags("PMEClk", pmc&(1<<3) != 0, "DSI", pmc&(1<<5) != 0, "D1", pmc&(1<<9) != 0, "D2", pmc&(1<<10) != 0),
		[...]int{0, 55, 100, 160, 220, 270, 320, 375}[(pmc>>6)&7],
		strings.ReplaceAll(flags("D0", pmc&(1<<11) != 0, "D1", pmc&(1<<12) != 0, "D2", pmc&(1<<13) != 0,
			"D3hot", pmc&(1<<14) != 0, "D3cold", pmc&(1<<15) != 0), " ", ","))
	csr := c.u16(pos + pmPMCSR)
	fmt.Fprintf(b, "\t\tStatus: D%d %s DSel=%d DScale=%d %s\n", csr&pmcsrStateMask,
		flags("NoSoftRst", csr&pmcsrNoSoftReset != 0, "PME-Enable", csr&pmcsrPMEEnable != 0),
		(csr>>9)&0xf, (csr>>13)&3, sign("PME", csr&pmcsrPMEStatus != 0))
}

func (c *Config) dumpMSIX(b *strings.Builder, pos int) {
	ctrl := c.u16(pos + msixCtrl)
	fmt.Fprintf(b, "\tCapabilities: [%02x] MSI-X: %s Count=%d %s\n", pos,
		sign("Enable", ctrl&msixCtrlEnable != 0), int(ctrl&msixCtrlSizeMask)+1, sign("Masked", ctrl&msixCtrlMask != 0))
	t := c.u32(pos + msixTable)
	p := c.u32(pos + msixPBA)
	fmt.Fprintf(b, "\t\tVector table: BAR=%d offset=%08x\n", t&msixBIRMask, t&^msixBIRMask)
	fmt.Fprintf(b, "\t\tPBA: BAR=%d offset=%08x\n", p&msixBIRMask, p&^msixBIRMask)
}

var linkSpeeds = [...]string{"unknown", "2.5GT/s", "5GT/s", "8GT/s", "16GT/s", "32GT/s", "64GT/s"}

func linkSpeed(v uint32) string {
	if int(v) < len(linkSpeeds) {
		return linkSpeeds[v]
	}
	return "unknown"
}

func (c *Config) dumpExp(b *strings.Builder, pos int) {
	fl := c.u16(pos + expFlags)
	typ := "Unknown type"
	switch (fl >> expFlagsTypeShift) & 0xf {
	case 0:
		typ = "Endpoint"
	case 1:
		typ = "Legacy Endpoint"
	case 9:
		typ = "Root Complex Integrated Endpoint"
	}
	fmt.Fprintf(b, "\tCapabilities: [%02x] Express (v%d) %s, MSI %02x\n", pos, fl&0xf, typ, (fl>>expFlagsIntMsgShift)&0x1f)

	latency := func(v uint32, l1 bool) string {
		if v == 7 {
			return "unlimited"
		}
		if l1 {
			return fmt.Sprintf("<%dus", 1<<v)
		}
		return fmt.Sprintf("<%dns", 64<<v)
	}
	dc := c.u32(pos + expDevCap)
	fmt.Fprintf(b, "\t\tDevCap:\tMaxPayload %d bytes, PhantFunc %d, Latency L0s %s, L1 %s\n",
		128<<(dc&7), (dc>>3)&3, latency((dc>>6)&7, false), latency((dc>>9)&7, true))
	fmt.Fprintf(b, "\t\t\t%s SlotPowerLimit %dW\n",
		flags("ExtTag", dc&devCapExtTag != 0, "RBE", dc&devCapRBER != 0, "FLReset", dc&devCapFLR != 0),
		(dc>>18)&0xff) // scale 1.0x at power-on
	ctl := c.u16(pos + expDevCtl)
	fmt.Fprintf(b, "\t\tDevCtl:\t%s\n", flags("CorrErr", ctl&devCtlCorrErr != 0, "NonFatalErr", ctl&devCtlNonFatal != 0,
		"FatalErr", ctl&devCtlFatal != 0, "UnsupReq", ctl&devCtlURReport != 0))
	fmt.Fprintf(b, "\t\t\t%s\n", flags("RlxdOrd", ctl&devCtlRelaxOrd != 0, "ExtTag", ctl&devCtlExtTag != 0,
		"PhantFunc", ctl&devCtlPhantom != 0, "AuxPwr", ctl&devCtlAuxPM != 0, "NoSnoop", ctl&devCtlNoSnoop != 0,
		"FLReset", ctl&devCtlFLR != 0))
	fmt.Fprintf(b, "\t\t\tMaxPayload %d bytes, MaxReadReq %d bytes\n",
		128<<((ctl&devCtlMPSMask)>>devCtlMPSShift), 128<<((ctl&devCtlMRRSMask)>>devCtlMRRSShift))
	st := c.u16(pos + expDevSta)
	fmt.Fprintf(b, "\t\tDevSta:\t%s\n", flags("CorrErr", st&devStaCorrErr != 0, "NonFatalErr", st&devStaNonFatal != 0,
		"FatalErr", st&devStaFatal != 0, "UnsupReq", st&devStaUR != 0, "AuxPwr", st&devStaAuxPwr != 0,
		"TransPend", st&devStaTrPend != 0))

	lc := c.u32(pos + expLnkCap)
	aspm := [...]string{"not supported", "L0s", "L1", "L0s L1"}[(lc>>10)&3]
	fmt.Fprintf(b, "\t\tLnkCap:\tPort #%d, Speed %s, Width x%d, ASPM %s\n", lc>>24, linkSpeed(lc&0xf), (lc>>4)&0x3f, aspm)
	fmt.Fprintf(b, "\t\t\t%s\n", flags("ClockPM", lc&(1<<18) != 0, "Surprise", lc&(1<<19) != 0,
		"LLActRep", lc&(1<<20) != 0, "BwNot", lc&(1<<21) != 0, "ASPMOptComp", lc&lnkCapASPMOptComp != 0))
	lctl := c.u16(pos + expLnkCtl)
	aspmCtl := [...]string{"Disabled", "L0s Enabled", "L1 Enabled", "L0s L1 Enabled"}[lctl&lnkCtlASPMMask]
	rcb := 64
	if lctl&lnkCtlRCB != 0 {
		rcb = 128
	}
	fmt.Fprintf(b, "\t\tLnkCtl:\tASPM %s; RCB %d bytes, %s\n", aspmCtl, rcb,
		flags("Disabled", lctl&(1<<4) != 0, "CommClk", lctl&lnkCtlCommClk != 0))
	fmt.Fprintf(b, "\t\t\t%s\n", flags("ExtSynch", lctl&lnkCtlExtSynch != 0, "ClockPM", lctl&lnkCtlClockPM != 0,
		"AutWidDis", lctl&lnkCtlAutWidDis != 0, "BWInt", lctl&(1<<10) != 0, "AutBWInt", lctl&(1<<11) != 0))
	ls := c.u16(pos + expLnkSta)
	fmt.Fprintf(b, "\t\tLnkSta:\tSpeed %s, Width x%d\n", linkSpeed(uint32(ls&0xf)), (ls>>4)&0x3f)
	fmt.Fprintf(b, "\t\t\t%s\n", flags("TrErr", ls&(1<<10) != 0, "Train", ls&(1<<11) != 0,
		"SlotClk", ls&lnkStaSlotClk != 0, "DLActive", ls&(1<<13) != 0, "BWMgmt", ls&(1<<14) != 0,
		"ABWMgmt", ls&(1<<15) != 0))

	dc2 := c.u32(pos + expDevCap2)
	cto := "Not Supported"
	if r := dc2 & 0xf; r != 0 {
		cto = fmt.Sprintf("Range %x", r)
	}
	fmt.Fprintf(b, "\t\tDevCap2: Completion Timeout: %s, %s\n", cto, sign("TimeoutDis", dc2&devCap2CTODisable != 0))
	dctl2 := c.u16(pos + expDevCtl2)
	fmt.Fprintf(b, "\t\tDevCtl2: Completion Timeout: value %x, %s\n", dctl2&0xf, sign("TimeoutDis", dctl2&devCtl2CTODisable != 0))
	lc2 := c.u32(pos + expLnkCap2)
	var speeds []string
	for i := 1; i < len(linkSpeeds); i++ {
		if lc2&(1<<i) != 0 {
			speeds = append(speeds, linkSpeeds[i])
		}
	}
	fmt.Fprintf(b, "\t\tLnkCap2: Supported Link Speeds: %s\n", strings.Join(speeds, ", "))
	fmt.Fprintf(b, "\t\tLnkCtl2: Target Link Speed: %s\n", linkSpeed(uint32(c.u16(pos+expLnkCtl2)&lnkCtl2TargetMask)))
	fmt.Fprintf(b, "\t\tLnkSta2: %04x\n", c.u16(pos+expLnkSta2))
}

func (c *Config) dumpExtCaps(b *strings.Builder) {
	pos := headerSizeExt
	for ttl := (ConfigSize - headerSizeExt) / 8; ttl > 0; ttl-- {
		h := c.u32(pos)
		if h == 0 {
			return
		}
		id, ver, next := h&0xffff, (h>>16)&0xf, int(h>>20)&^3
		switch id {
		case extCapIDRebar:
			c.dumpRebar(b, pos, ver)
		default:
			fmt.Fprintf(b, "\tCapabilities: [%03x v%d] Unknown extended capability %04x\n", pos, ver, id)
		}
		if next < headerSizeExt {
			return
		}
		pos = next
	}
}

const headerSizeExt = 0x100

func (c *Config) dumpRebar(b *strings.Builder, pos int, ver uint32) {
	fmt.Fprintf(b, "\tCapabilities: [%03x v%d] Physical Resizable BAR\n", pos, ver)
	ctrl0 := c.u32(pos + rebarCtrl)
	n := int((ctrl0 >> rebarCtrlNBARShift) & 7)
	for i := 0; i < n && pos+rebarCtrl+8*i+4 <= ConfigSize; i++ {
		capr := c.u32(pos + rebarCap + 8*i)
		ctrl := c.u32(pos + rebarCtrl + 8*i)
		var sizes []string
		for bit := 4; bit < 32; bit++ {
			if capr&(1<<bit) != 0 {
				sizes = append(sizes, rebarSizeString(1<<(20+bit-4)))
			}
		}
		for bit := 16; bit < 32; bit++ {
			if ctrl&(1<<bit) != 0 {
				sizes = append(sizes, rebarSizeString(1<<(48+bit-16)))
			}
		}
		cur := (ctrl & rebarCtrlSizeMask) >> rebarCtrlSizeShift
		fmt.Fprintf(b, "\t\tBAR %d: current size: %s, supported: %s\n",
			ctrl&rebarCtrlIdxMask, rebarSizeString(1<<(20+cur)), strings.Join(sizes, " "))
	}
}

func (c *Config) dumpHex(b *strings.Builder) {
	for line := 0; line < ConfigSize; line += 16 {
		row := c.regs[line : line+16]
		zero := true
		for _, v := range row {
			if v != 0 {
				zero = false
				break
			}
		}
		if zero {
			continue
		}
		fmt.Fprintf(b, "%03x:", line)
		for _, v := range row {
			fmt.Fprintf(b, " %02x", v)
		}
		b.WriteString("\n")
	}
}
