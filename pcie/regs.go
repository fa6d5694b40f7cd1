package pcie

// ConfigSize is the size of a PCI Express function's configuration space: 256 bytes of
// conventional space followed by the extended space. QEMU's vfio-user client keeps the device
// express only when the config region is this large.
const ConfigSize = 4096

// Offsets in the type-0 header (PCI Local Bus 3.0 §6.1, PCIe Base §7.5.1).
const (
	offVendorID      = 0x00
	offDeviceID      = 0x02
	offCommand       = 0x04
	offStatus        = 0x06
	offRevision      = 0x08
	offProgIF        = 0x09
	offSubClass      = 0x0a
	offBaseClass     = 0x0b
	offCacheLineSize = 0x0c
	offLatencyTimer  = 0x0d
	offHeaderType    = 0x0e
	offBIST          = 0x0f
	offBAR0          = 0x10 // six 32-bit slots, 0x10..0x27
	offCardbusCIS    = 0x28
	offSubsysVendor  = 0x2c
	offSubsysID      = 0x2e
	offROM           = 0x30
	offCapPtr        = 0x34
	offIntLine       = 0x3c
	offIntPin        = 0x3d
	offMinGnt        = 0x3e
	offMaxLat        = 0x3f

	headerSize = 0x40
	numBARs    = 6
)

// COMMAND register bits.
const (
	cmdIO          = 1 << 0
	cmdMemory      = 1 << 1
	cmdBusMaster   = 1 << 2
	cmdSpecial     = 1 << 3
	cmdMWI         = 1 << 4
	cmdVGASnoop    = 1 << 5
	cmdParity      = 1 << 6
	cmdStepping    = 1 << 7
	cmdSERR        = 1 << 8
	cmdFastB2B     = 1 << 9
	cmdINTxDisable = 1 << 10

	// cmdWritable: the bits an express endpoint without I/O BARs implements. I/O Space,
	// Special Cycles, MWI, VGA snoop, stepping and fast back-to-back are hardwired to 0.
	cmdWritable = cmdMemory | cmdBusMaster | cmdParity | cmdSERR | cmdINTxDisable
)

// STATUS register bits.
const (
	stsINTx            = 1 << 3
	stsCapList         = 1 << 4
	sts66MHz           = 1 << 5
	stsUDF             = 1 << 6
	stsFastB2B         = 1 << 7
	stsMasterParity    = 1 << 8
	stsDevselMask      = 3 << 9
	stsSigTargetAbort  = 1 << 11
	stsRecTargetAbort  = 1 << 12
	stsRecMasterAbort  = 1 << 13
	stsSigSystemError  = 1 << 14
	stsDetectedParity  = 1 << 15
	stsW1C             = stsMasterParity | stsSigTargetAbort | stsRecTargetAbort | stsRecMasterAbort | stsSigSystemError | stsDetectedParity
	headerTypeSingleFn = 0x00
	intPinA            = 1
)

// BAR register bits (memory BARs only: vgpu has no I/O BARs).
const (
	barIOSpace      = 1 << 0
	barType64       = 2 << 1
	barTypeMask     = 3 << 1
	barPrefetchable = 1 << 3
	barFlagMask     = 0xf
)

// Capability identifiers.
const (
	capIDPM   = 0x01
	capIDExp  = 0x10
	capIDMSIX = 0x11

	extCapIDRebar = 0x0015
)

// Where vgpu places its capabilities. The standard list is PM → MSI-X → Express; each
// structure starts on a 16-byte boundary (the spec needs dword alignment) so a hex dump
// reads easily. QEMU's vfio code sizes a capability by the distance to the next one, so gaps
// are harmless.
const (
	capPM   = 0x40
	capMSIX = 0x50
	capExp  = 0x60

	extCapRebar = 0x100
)

// Power Management capability (PCI PM 1.2 §3.2), offsets from the capability start.
const (
	pmPMC   = 2
	pmPMCSR = 4
	pmLen   = 8

	pmcVersion3 = 3

	pmcsrStateMask   = 3
	pmcsrD0          = 0
	pmcsrD3hot       = 3
	pmcsrNoSoftReset = 1 << 3
	pmcsrPMEEnable   = 1 << 8
	pmcsrPMEStatus   = 1 << 15
)

// MSI-X capability (PCI 3.0 §6.8.2), offsets from the capability start.
const (
	msixCtrl  = 2
	msixTable = 4
	msixPBA   = 8
	msixLen   = 12

	msixCtrlSizeMask = 0x07ff
	msixCtrlMask     = 1 << 14
	msixCtrlEnable   = 1 << 15
	msixBIRMask      = 7

	msixEntrySize = 16
)

// MSIXMaxVectors is the largest table the 11-bit MSI-X Table Size field can describe.
const MSIXMaxVectors = 2048

// PCI Express capability, version 2 (PCIe Base §7.5.3), offsets from the capability start.
const (
	expFlags   = 0x02
	expDevCap  = 0x04
	expDevCtl  = 0x08
	expDevSta  = 0x0a
	expLnkCap  = 0x0c
	expLnkCtl  = 0x10
	expLnkSta  = 0x12
	expDevCap2 = 0x24
	expDevCtl2 = 0x28
	expDevSta2 = 0x2a
	expLnkCap2 = 0x2c
	expLnkCtl2 = 0x30
	expLnkSta2 = 0x32
	expLen     = 0x3c // a v2 endpoint structure, slot and root registers included (zero)

	expFlagsVersion2    = 2
	expTypeEndpoint     = 0 // Device/Port Type field (bits 7:4)
	expFlagsTypeShift   = 4
	expFlagsIntMsgShift = 9

	devCapMPS256     = 1       // Max_Payload_Size Supported: 256 bytes
	devCapExtTag     = 1 << 5  // 8-bit tags
	devCapL0sNoLimit = 7 << 6  // Endpoint L0s Acceptable Latency: no limit
	devCapL1NoLimit  = 7 << 9  // Endpoint L1 Acceptable Latency: no limit
	devCapRBER       = 1 << 15 // Role-Based Error Reporting
	devCapFLR        = 1 << 28 // Function Level Reset Capability

	devCtlCorrErr   = 1 << 0
	devCtlNonFatal  = 1 << 1
	devCtlFatal     = 1 << 2
	devCtlURReport  = 1 << 3
	devCtlRelaxOrd  = 1 << 4
	devCtlMPSShift  = 5 // 3 bits: 128 << n bytes
	devCtlMPSMask   = 7 << devCtlMPSShift
	devCtlExtTag    = 1 << 8
	devCtlPhantom   = 1 << 9
	devCtlAuxPM     = 1 << 10
	devCtlNoSnoop   = 1 << 11
	devCtlMRRSShift = 12 // 3 bits: 128 << n bytes
	devCtlMRRSMask  = 7 << devCtlMRRSShift
	devCtlFLR       = 1 << 15 // Initiate Function Level Reset: always reads 0

	// devCtlWritable: error-reporting enables, Relaxed Ordering, MPS, Extended Tag, No Snoop and
	// MRRS. Phantom Functions and Aux Power PM are hardwired 0 (neither is supported).
	devCtlWritable = devCtlCorrErr | devCtlNonFatal | devCtlFatal | devCtlURReport |
		devCtlRelaxOrd | devCtlMPSMask | devCtlExtTag | devCtlNoSnoop | devCtlMRRSMask
	// devCtlDefault is the power-on value: Relaxed Ordering and No Snoop enabled, 128-byte
	// payload, 512-byte read requests (the spec's defaults).
	devCtlDefault = devCtlRelaxOrd | devCtlNoSnoop | 2<<devCtlMRRSShift

	devStaCorrErr  = 1 << 0
	devStaNonFatal = 1 << 1
	devStaFatal    = 1 << 2
	devStaUR       = 1 << 3
	devStaAuxPwr   = 1 << 4
	devStaTrPend   = 1 << 5
	devStaW1C      = devStaCorrErr | devStaNonFatal | devStaFatal | devStaUR

	linkSpeedGen3 = 3  // 8.0 GT/s; index into the Supported Link Speeds vector of LnkCap2
	linkWidthX16  = 16 // lanes

	lnkCapASPMOptComp = 1 << 22

	lnkCtlASPMMask  = 3 << 0
	lnkCtlRCB       = 1 << 3
	lnkCtlCommClk   = 1 << 6
	lnkCtlExtSynch  = 1 << 7
	lnkCtlClockPM   = 1 << 8
	lnkCtlAutWidDis = 1 << 9
	lnkCtlWritable  = lnkCtlASPMMask | lnkCtlRCB | lnkCtlCommClk | lnkCtlExtSynch

	lnkStaSlotClk = 1 << 12

	devCap2CTODisable = 1 << 4 // Completion Timeout Disable Supported; no programmable ranges
	devCtl2CTODisable = 1 << 4

	lnkCap2Speeds = 0x0e // Supported Link Speeds vector: 2.5, 5.0 and 8.0 GT/s

	lnkCtl2TargetMask = 0x0f
)

// Resizable BAR extended capability (PCIe Base §7.8.6), offsets from the capability start.
const (
	rebarCap  = 4
	rebarCtrl = 8
	rebarLen  = 12 // header + one (capability, control) pair

	rebarCtrlIdxMask   = 7
	rebarCtrlNBARShift = 5
	rebarCtrlSizeShift = 8
	rebarCtrlSizeMask  = 0x3f << rebarCtrlSizeShift

	rebarMinSize = 1 << 20 // encoded size 0 = 1 MiB
	// The capability register holds sizes 1 MiB (bit 4) .. 128 TiB (bit 31); the control
	// register's bits 16..31 continue with 256 TiB .. 8 EiB.
	rebarCapMaxLog2 = 47
	rebarMaxLog2    = 63
	// QEMU (hw/vfio/pci.c) exposes the capability only when the current size lies between
	// 1 MiB and 512 GiB, the range in which the spec requires a device to support some size.
	rebarCurrentMaxLog2 = 39
)
