package abi

// Access says how software may use a register.
type Access uint8

const (
	RO Access = iota // reads return device state; writes are ignored
	RW               // read/write storage or control
	WO               // write-only command; reads return 0
)

func (a Access) String() string {
	switch a {
	case RO:
		return "RO"
	case RW:
		return "RW"
	case WO:
		return "WO"
	}
	return "?"
}

// Field is a bit field inside a register.
type Field struct {
	Name         string
	Shift, Width uint
	Doc          string
}

// Register is one 32-bit register, at a byte offset into the register BAR.
type Register struct {
	Name   string // without the block prefix
	Offset uint32 // byte offset from the block base
	Access Access
	Doc    string
	Fields []Field
}

// Block is a group of registers owned by one part of the device. The register file refuses to
// build when two blocks' ranges overlap.
type Block struct {
	Name      string
	Base      uint32 // byte offset into the register BAR
	Size      uint32 // bytes claimed, a multiple of 4
	Doc       string
	Registers []Register
}

// Const is a named value software writes or reads (status codes, magic numbers, layout numbers).
type Const struct {
	Name  string
	Value uint64
	Doc   string
}

// ConstGroup is a set of related values; Prefix is prepended to each name.
type ConstGroup struct {
	Prefix string
	Doc    string
	Consts []Const
}

// Blocks is the register map of the register BAR (BAR5), in address order.
var Blocks = []Block{
	{
		Name: "ID", Base: 0x0000, Size: 0x100,
		Doc: "Identity: what this device is and how it was configured. Read-only.",
		Registers: []Register{
			{Name: "MAGIC", Offset: 0x00, Access: RO, Doc: "Reads ID_MAGIC_VALUE (\"VGPU\" in memory order)."},
			{Name: "VERSION", Offset: 0x04, Access: RO, Doc: "Interface version.", Fields: []Field{
				{Name: "MINOR", Shift: 0, Width: 16},
				{Name: "MAJOR", Shift: 16, Width: 16},
			}},
			{Name: "VRAM_SIZE_LO", Offset: 0x08, Access: RO, Doc: "VRAM size in bytes, low 32 bits."},
			{Name: "VRAM_SIZE_HI", Offset: 0x0C, Access: RO, Doc: "VRAM size in bytes, high 32 bits."},
			{Name: "VRAM_WINDOW_LO", Offset: 0x10, Access: RO, Doc: "CPU-visible VRAM (BAR0 size) in bytes, low 32 bits."},
			{Name: "VRAM_WINDOW_HI", Offset: 0x14, Access: RO, Doc: "CPU-visible VRAM (BAR0 size) in bytes, high 32 bits."},
			{Name: "DOORBELL_MODE", Offset: 0x18, Access: RO, Doc: "How doorbell writes reach the device: a DOORBELL_MODE_* value."},
			{Name: "MSIX_VECTORS", Offset: 0x1C, Access: RO, Doc: "Number of MSI-X vectors."},
			{Name: "DOORBELL_COUNT", Offset: 0x20, Access: RO, Doc: "Number of 64-bit doorbells in BAR2."},
		},
	},
	{
		Name: "SCRATCH", Base: 0x0100, Size: 0x20,
		Doc: "Eight scratch registers: plain storage, cleared by reset, for ring and MMIO tests.",
		Registers: []Register{
			{Name: "0", Offset: 0x00, Access: RW}, {Name: "1", Offset: 0x04, Access: RW},
			{Name: "2", Offset: 0x08, Access: RW}, {Name: "3", Offset: 0x0C, Access: RW},
			{Name: "4", Offset: 0x10, Access: RW}, {Name: "5", Offset: 0x14, Access: RW},
			{Name: "6", Offset: 0x18, Access: RW}, {Name: "7", Offset: 0x1C, Access: RW},
		},
	},
	{
		Name: "SELFTEST", Base: 0x0200, Size: 0x100,
		Doc: "Self-test block: proves the interrupt and DMA paths end to end without any engine.",
		Registers: []Register{
			{Name: "IRQ", Offset: 0x00, Access: WO, Doc: "Writing k raises MSI-X vector k (INTx when MSI-X is off). Out-of-range vectors are counted in IRQ_ERRORS."},
			{Name: "IRQ_ERRORS", Offset: 0x04, Access: RO, Doc: "Count of SELFTEST_IRQ writes naming a vector the device does not have."},
			{Name: "INTX_ACK", Offset: 0x08, Access: WO, Doc: "Writing 1 de-asserts the INTx line raised by SELFTEST_IRQ."},
			{Name: "DMA_ADDR_LO", Offset: 0x10, Access: RW, Doc: "DMA target address (IOVA), low 32 bits."},
			{Name: "DMA_ADDR_HI", Offset: 0x14, Access: RW, Doc: "DMA target address (IOVA), high 32 bits."},
			{Name: "DMA_LEN", Offset: 0x18, Access: RW, Doc: "Bytes to write; a multiple of 4, at most SELFTEST_DMA_MAX_LEN."},
			{Name: "DMA_PATTERN", Offset: 0x1C, Access: RW, Doc: "Dword i of the target receives PATTERN + i."},
			{Name: "DMA_CTRL", Offset: 0x20, Access: WO, Doc: "Start a self-test DMA.", Fields: []Field{
				{Name: "GO", Shift: 0, Width: 1, Doc: "1 starts the transfer (ignored while BUSY)."},
				{Name: "IRQ_EN", Shift: 1, Width: 1, Doc: "Raise IRQ_VECTOR when the transfer ends (done or error)."},
				{Name: "IRQ_VECTOR", Shift: 8, Width: 11, Doc: "MSI-X vector for completion."},
			}},
			{Name: "DMA_STATUS", Offset: 0x24, Access: RO, Doc: "A SELFTEST_DMA_STATUS_* value."},
			{Name: "DMA_COUNT", Offset: 0x28, Access: RO, Doc: "Number of self-test transfers that completed successfully."},
		},
	},
}

// Groups holds the enumerated values and layout numbers of the interface.
var Groups = []ConstGroup{
	{Prefix: "PCI_", Doc: "PCI identity defaults (vendor and device can be overridden by server flags).", Consts: []Const{
		{Name: "VENDOR_ID", Value: 0x1234, Doc: "Default vendor ID (QEMU's experimental range)."},
		{Name: "DEVICE_ID", Value: 0x5650, Doc: "Default device ID (\"VP\")."},
		{Name: "SUBSYSTEM_VENDOR_ID", Value: 0x1234},
		{Name: "SUBSYSTEM_ID", Value: 0x0001},
		{Name: "REVISION", Value: 0x01},
		{Name: "CLASS_CODE", Value: 0x030200, Doc: "Display controller / 3D controller."},
	}},
	{Prefix: "BAR_", Doc: "Which PCI BAR holds what.", Consts: []Const{
		{Name: "VRAM", Value: 0, Doc: "64-bit prefetchable VRAM window (BAR0/1)."},
		{Name: "DOORBELL", Value: 2, Doc: "64-bit doorbell aperture (BAR2/3)."},
		{Name: "REGS", Value: 5, Doc: "32-bit register aperture (BAR5)."},
	}},
	{Prefix: "REGS_", Doc: "Register BAR layout.", Consts: []Const{
		{Name: "SIZE", Value: 0x40000, Doc: "Register BAR size in bytes."},
		{Name: "MSIX_TABLE_OFFSET", Value: 0x3F000, Doc: "MSI-X table: on the last page of the register BAR."},
		{Name: "MSIX_PBA_OFFSET", Value: 0x3F800, Doc: "MSI-X pending-bit array, same page."},
		{Name: "MSIX_MAX_VECTORS", Value: 128, Doc: "The MSI-X page has room for this many vectors."},
	}},
	{Prefix: "DOORBELL_", Doc: "Doorbell aperture layout.", Consts: []Const{
		{Name: "SIZE", Value: 0x4000, Doc: "Doorbell BAR size in bytes."},
		{Name: "STRIDE", Value: 8, Doc: "Bytes per doorbell: each is 64 bits."},
		{Name: "PER_PAGE", Value: 512, Doc: "Doorbells per 4 KiB page."},
		{Name: "MODE_TRAP", Value: 0, Doc: "Doorbell BAR is trapped: every write is a vfio-user message."},
		{Name: "MODE_POLL", Value: 1, Doc: "Doorbell BAR is shared memory that the device polls."},
	}},
	{Prefix: "ID_", Doc: "Identity values.", Consts: []Const{
		{Name: "MAGIC_VALUE", Value: 0x55504756, Doc: "\"VGPU\" as bytes in memory order."},
		{Name: "VERSION_MAJOR", Value: 1},
		{Name: "VERSION_MINOR", Value: 0},
	}},
	{Prefix: "SELFTEST_", Doc: "Self-test DMA status codes and bounds.", Consts: []Const{
		{Name: "DMA_MAX_LEN", Value: 1 << 20, Doc: "Largest self-test transfer in bytes."},
		{Name: "DMA_STATUS_IDLE", Value: 0, Doc: "No transfer since reset."},
		{Name: "DMA_STATUS_BUSY", Value: 1, Doc: "Transfer in progress."},
		{Name: "DMA_STATUS_DONE", Value: 2, Doc: "Last transfer completed."},
		{Name: "DMA_STATUS_ERR_BUS_MASTER", Value: 3, Doc: "Refused: Bus Master Enable is off in COMMAND."},
		{Name: "DMA_STATUS_ERR_FAULT", Value: 4, Doc: "The target range is not (writably) mapped for the device."},
		{Name: "DMA_STATUS_ERR_LENGTH", Value: 5, Doc: "DMA_LEN is zero, not a multiple of 4, or too large."},
	}},
}
