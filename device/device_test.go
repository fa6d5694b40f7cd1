package device

import (
	"encoding/binary"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/bars"
	"vgpu/vfiouser"
	"vgpu/vfiouser/vfiousertest"
)

// rig is a device served to a Go client over a socketpair: the whole vfio-user path without QEMU.
type rig struct {
	t   *testing.T
	dev *Device
	c   *vfiousertest.Client
}

func newRig(t *testing.T, mutate ...func(*Config)) *rig {
	t.Helper()
	cfg := DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow = 64<<20, 16<<20
	for _, m := range mutate {
		m(&cfg)
	}
	dev, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return &rig{t: t, dev: dev, c: vfiousertest.NewPair(t, dev)}
}

func (r *rig) cfgRead(off uint64, n int) uint32 {
	r.t.Helper()
	b := make([]byte, 4)
	if err := r.c.Read(regionConfig, off, b[:n]); err != nil {
		r.t.Fatalf("config read %#x: %v", off, err)
	}
	return binary.LittleEndian.Uint32(b)
}

func (r *rig) cfgWrite(off uint64, n int, v uint32) {
	r.t.Helper()
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, v)
	if err := r.c.Write(regionConfig, off, b[:n]); err != nil {
		r.t.Fatalf("config write %#x: %v", off, err)
	}
}

// enable sets COMMAND like a driver's pci_enable_device + pci_set_master.
func (r *rig) enable(busMaster bool) {
	cmd := uint32(0x2) // Memory Space
	if busMaster {
		cmd |= 0x4
	}
	r.cfgWrite(0x04, 2, cmd)
}

// findCap walks the capability list for id, as the guest's PCI core does.
func (r *rig) findCap(id uint32) uint64 {
	r.t.Helper()
	for p, n := uint64(r.cfgRead(0x34, 1)), 0; p != 0 && n < 48; n++ {
		if r.cfgRead(p, 1) == id {
			return p
		}
		p = uint64(r.cfgRead(p+1, 1))
	}
	r.t.Fatalf("capability %#x not found", id)
	return 0
}

func (r *rig) reg(off uint32) uint32 {
	r.t.Helper()
	b := make([]byte, 4)
	if err := r.c.Read(abi.BAR_REGS, uint64(off), b); err != nil {
		r.t.Fatalf("register read %#x: %v", off, err)
	}
	return binary.LittleEndian.Uint32(b)
}

func (r *rig) setReg(off, v uint32) {
	r.t.Helper()
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, v)
	if err := r.c.Write(abi.BAR_REGS, uint64(off), b); err != nil {
		r.t.Fatalf("register write %#x: %v", off, err)
	}
}

func TestIdentityRegisters(t *testing.T) {
	r := newRig(t)
	r.enable(false)
	for _, tc := range []struct {
		reg  uint32
		want uint32
	}{
		{abi.REG_ID_MAGIC, abi.ID_MAGIC_VALUE},
		{abi.REG_ID_VERSION, abi.ID_VERSION_MAJOR<<16 | abi.ID_VERSION_MINOR},
		{abi.REG_ID_VRAM_SIZE_LO, 64 << 20},
		{abi.REG_ID_VRAM_SIZE_HI, 0},
		{abi.REG_ID_VRAM_WINDOW_LO, 16 << 20},
		{abi.REG_ID_DOORBELL_MODE, abi.DOORBELL_MODE_TRAP},
		{abi.REG_ID_MSIX_VECTORS, 16},
		{abi.REG_ID_DOORBELL_COUNT, abi.DOORBELL_SIZE / 8},
	} {
		if got := r.reg(tc.reg); got != tc.want {
			t.Errorf("%s = %#x, want %#x", abi.RegisterNames[tc.reg], got, tc.want)
		}
	}
	if got := r.cfgRead(0, 4); got != abi.PCI_DEVICE_ID<<16|abi.PCI_VENDOR_ID {
		t.Errorf("config IDs = %#x", got)
	}
	if got := r.cfgRead(0x08, 4) >> 8; got != abi.PCI_CLASS_CODE {
		t.Errorf("class = %#x, want %#x", got, abi.PCI_CLASS_CODE)
	}
}

func TestRegionLayout(t *testing.T) {
	r := newRig(t)
	info, err := r.c.DeviceInfo()
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRegions != numRegions || info.NumIRQs != numIRQs || info.Flags&vfiouser.DeviceFlagReset == 0 {
		t.Errorf("device info = %+v", info)
	}
	for _, tc := range []struct {
		index    uint32
		size     uint64
		mappable bool
	}{
		{abi.BAR_VRAM, 16 << 20, true},
		{1, 0, false},
		{abi.BAR_DOORBELL, abi.DOORBELL_SIZE, false},
		{abi.BAR_REGS, abi.REGS_SIZE, false},
		{regionROM, 0, false},
		{regionConfig, configSize, false},
	} {
		ri, err := r.c.RegionInfo(tc.index)
		if err != nil {
			t.Fatalf("region %d: %v", tc.index, err)
		}
		if ri.Size != tc.size || (ri.Flags&vfiouser.RegionFlagMmap != 0) != tc.mappable {
			t.Errorf("region %d: size %#x flags %#x; want size %#x mappable %v", tc.index, ri.Size, ri.Flags, tc.size, tc.mappable)
		}
	}
}

func TestScratchAndReset(t *testing.T) {
	r := newRig(t)
	r.enable(false)
	for i := uint32(0); i < 8; i++ {
		r.setReg(abi.REG_SCRATCH_0+4*i, 0xC0DE0000+i)
	}
	for i := uint32(0); i < 8; i++ {
		if got := r.reg(abi.REG_SCRATCH_0 + 4*i); got != 0xC0DE0000+i {
			t.Errorf("scratch %d = %#x", i, got)
		}
	}
	if err := r.c.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Reset(); err != nil { // QEMU sends two per system_reset
		t.Fatal(err)
	}
	if got := r.cfgRead(0x04, 2); got&0x6 != 0 {
		t.Errorf("COMMAND after reset = %#x, want memory and bus master off", got)
	}
	r.enable(false)
	if got := r.reg(abi.REG_SCRATCH_3); got != 0 {
		t.Errorf("scratch after reset = %#x, want 0", got)
	}
	if d := r.dev.Diagnostics(); d.Resets != 2 {
		t.Errorf("resets = %d, want 2", d.Resets)
	}
}

func TestFLR(t *testing.T) {
	r := newRig(t)
	r.enable(true)
	r.setReg(abi.REG_SCRATCH_0, 0x1234)
	exp := r.findCap(0x10)
	if r.cfgRead(exp+4, 4)&(1<<28) == 0 {
		t.Fatal("DevCap does not advertise FLR")
	}
	r.cfgWrite(exp+8, 2, r.cfgRead(exp+8, 2)|1<<15)
	if got := r.cfgRead(0x04, 2); got&0x6 != 0 {
		t.Errorf("COMMAND after FLR = %#x", got)
	}
	r.enable(true)
	if got := r.reg(abi.REG_SCRATCH_0); got != 0 {
		t.Errorf("scratch after FLR = %#x", got)
	}
	if d := r.dev.Diagnostics(); d.FLRs != 1 {
		t.Errorf("FLRs = %d", d.FLRs)
	}
}

func TestMemorySpaceGatesBARs(t *testing.T) {
	r := newRig(t)
	if got := r.reg(abi.REG_ID_MAGIC); got != 0xffffffff {
		t.Errorf("register read with memory decoding off = %#x, want all-ones", got)
	}
	r.setReg(abi.REG_SCRATCH_0, 5)
	r.enable(false)
	if got := r.reg(abi.REG_SCRATCH_0); got != 0 {
		t.Errorf("write with memory decoding off reached the device: %#x", got)
	}
	if d := r.dev.Diagnostics(); d.BARAccessWhileMemOff != 2 {
		t.Errorf("BAR accesses while off = %d, want 2", d.BARAccessWhileMemOff)
	}
}

func TestUnclaimedRegistersAreCounted(t *testing.T) {
	r := newRig(t)
	r.enable(false)
	if got := r.reg(0x20000); got != 0 {
		t.Errorf("unclaimed read = %#x", got)
	}
	r.setReg(0x20000, 1)
	d := r.dev.Diagnostics()
	if len(d.Unclaimed) != 1 || d.Unclaimed[0].Offset != 0x20000 || d.Unclaimed[0].Count != 2 {
		t.Errorf("unclaimed = %+v", d.Unclaimed)
	}
}

func (r *rig) enableMSIX() []int {
	r.t.Helper()
	msix := r.findCap(0x11)
	r.cfgWrite(msix+2, 2, r.cfgRead(msix+2, 2)|1<<15)
	fds, err := r.c.EnableMSIX(16)
	if err != nil {
		r.t.Fatal(err)
	}
	return fds
}

func TestSelftestInterruptEveryVector(t *testing.T) {
	r := newRig(t)
	r.enable(true)
	fds := r.enableMSIX()
	for k := range fds {
		r.setReg(abi.REG_SELFTEST_IRQ, uint32(k))
		if n, err := vfiousertest.WaitIRQ(fds[k], 5*time.Second); err != nil || n != 1 {
			t.Fatalf("vector %d: count %d, %v", k, n, err)
		}
	}
	for k, fd := range fds {
		if n, _ := vfiousertest.WaitIRQ(fd, 0); n != 0 {
			t.Errorf("vector %d: %d stray interrupts", k, n)
		}
	}
	r.setReg(abi.REG_SELFTEST_IRQ, 99)
	if got := r.reg(abi.REG_SELFTEST_IRQ_ERRORS); got != 1 {
		t.Errorf("IRQ_ERRORS = %d, want 1", got)
	}
	// An MSI is a memory write: with Bus Master off the function cannot send it.
	r.enable(false)
	r.setReg(abi.REG_SELFTEST_IRQ, 3)
	if n, _ := vfiousertest.WaitIRQ(fds[3], 100*time.Millisecond); n != 0 {
		t.Errorf("interrupt delivered with bus mastering off")
	}
	if d := r.dev.Diagnostics(); d.IRQWithoutBusMaster != 1 {
		t.Errorf("suppressed interrupts = %d, want 1", d.IRQWithoutBusMaster)
	}
}

// startDMA programs and starts a self-test transfer and waits for it to end.
func (r *rig) runDMA(iova uint64, length, pattern uint32) uint32 {
	r.t.Helper()
	r.setReg(abi.REG_SELFTEST_DMA_ADDR_LO, uint32(iova))
	r.setReg(abi.REG_SELFTEST_DMA_ADDR_HI, uint32(iova>>32))
	r.setReg(abi.REG_SELFTEST_DMA_LEN, length)
	r.setReg(abi.REG_SELFTEST_DMA_PATTERN, pattern)
	r.setReg(abi.REG_SELFTEST_DMA_CTRL, abi.REG_SELFTEST_DMA_CTRL__GO_MASK)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if s := r.reg(abi.REG_SELFTEST_DMA_STATUS); s != abi.SELFTEST_DMA_STATUS_BUSY {
			return s
		}
		time.Sleep(time.Millisecond)
	}
	r.t.Fatal("self-test DMA still busy after 10 s")
	return 0
}

func TestSelftestDMA(t *testing.T) {
	const iova = 0x1_0000_0000
	for _, tc := range []struct {
		name string
		opt  vfiousertest.MapOptions
	}{
		{"mmapped guest memory", vfiousertest.MapOptions{}},
		{"DMA_WRITE messages", vfiousertest.MapOptions{NoFD: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			mem, err := vfiousertest.NewGuestMemory(1 << 20)
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			if err := r.c.DMAMap(iova, mem, 0, 1<<20, tc.opt); err != nil {
				t.Fatal(err)
			}
			r.enable(true)
			if s := r.runDMA(iova+0x100, 64<<10, 0xA0000000); s != abi.SELFTEST_DMA_STATUS_DONE {
				t.Fatalf("status = %d, want DONE", s)
			}
			b := mem.Bytes()
			for i := 0; i < 64<<10; i += 4 {
				if got := binary.LittleEndian.Uint32(b[0x100+i:]); got != 0xA0000000+uint32(i/4) {
					t.Fatalf("dword %d = %#x", i/4, got)
				}
			}
			if b[0xFF] != 0 || b[0x100+64<<10] != 0 {
				t.Error("DMA wrote outside its range")
			}
			if got := r.reg(abi.REG_SELFTEST_DMA_COUNT); got != 1 {
				t.Errorf("DMA_COUNT = %d", got)
			}
		})
	}
}

func TestSelftestDMAErrors(t *testing.T) {
	const iova = 0x200000
	r := newRig(t)
	mem, err := vfiousertest.NewGuestMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if err := r.c.DMAMap(iova, mem, 0, 1<<19, vfiousertest.MapOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.c.DMAMap(iova+1<<19, mem, 1<<19, 1<<19, vfiousertest.MapOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	r.enable(false) // memory on, bus master off
	for _, tc := range []struct {
		name      string
		busMaster bool
		iova      uint64
		length    uint32
		want      uint32
	}{
		{"bus master off", false, iova, 4096, abi.SELFTEST_DMA_STATUS_ERR_BUS_MASTER},
		{"unmapped", true, 0x10000000, 4096, abi.SELFTEST_DMA_STATUS_ERR_FAULT},
		{"read-only map", true, iova + 1<<19, 4096, abi.SELFTEST_DMA_STATUS_ERR_FAULT},
		{"runs off the end of a map", true, iova + 1<<20 - 8, 16, abi.SELFTEST_DMA_STATUS_ERR_FAULT},
		{"length not a multiple of 4", true, iova, 6, abi.SELFTEST_DMA_STATUS_ERR_LENGTH},
		{"length too large", true, iova, abi.SELFTEST_DMA_MAX_LEN + 4, abi.SELFTEST_DMA_STATUS_ERR_LENGTH},
		{"zero length", true, iova, 0, abi.SELFTEST_DMA_STATUS_ERR_LENGTH},
		{"good after errors", true, iova, 4096, abi.SELFTEST_DMA_STATUS_DONE},
	} {
		r.enable(tc.busMaster)
		if got := r.runDMA(tc.iova, tc.length, 1); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
	for i, v := range mem.Bytes()[1<<19:] {
		if v != 0 {
			t.Fatalf("read-only memory changed at %#x", 1<<19+i)
		}
	}
}

func TestSelftestDMACompletionInterrupt(t *testing.T) {
	r := newRig(t)
	mem, _ := vfiousertest.NewGuestMemory(1 << 16)
	defer mem.Close()
	if err := r.c.DMAMap(0, mem, 0, 1<<16, vfiousertest.MapOptions{}); err != nil {
		t.Fatal(err)
	}
	r.enable(true)
	fds := r.enableMSIX()
	r.setReg(abi.REG_SELFTEST_DMA_LEN, 256)
	r.setReg(abi.REG_SELFTEST_DMA_CTRL, abi.REG_SELFTEST_DMA_CTRL__GO_MASK|abi.REG_SELFTEST_DMA_CTRL__IRQ_EN_MASK|5<<abi.REG_SELFTEST_DMA_CTRL__IRQ_VECTOR__SHIFT)
	if n, err := vfiousertest.WaitIRQ(fds[5], 5*time.Second); err != nil || n != 1 {
		t.Fatalf("completion interrupt: %d, %v", n, err)
	}
	if s := r.reg(abi.REG_SELFTEST_DMA_STATUS); s != abi.SELFTEST_DMA_STATUS_DONE {
		t.Errorf("status = %d", s)
	}
}

func TestVRAMIsSharedMemory(t *testing.T) {
	r := newRig(t)
	m, err := r.c.MmapRegion(abi.BAR_VRAM)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	copy(m.At(16<<20-4, 4), []byte{1, 2, 3, 4})
	if got := r.dev.vram.Bytes()[16<<20-2]; got != 3 {
		t.Errorf("VRAM byte seen by the device = %d, want 3", got)
	}
	r.enable(false)
	b := make([]byte, 4) // a trapped access sees the same memory
	if err := r.c.Read(abi.BAR_VRAM, 16<<20-4, b); err != nil || b[3] != 4 {
		t.Errorf("trapped VRAM read = %v, %v", b, err)
	}
}

func TestPolledDoorbells(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Doorbells = bars.DoorbellPoll })
	m, err := r.c.MmapRegion(abi.BAR_DOORBELL)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	binary.LittleEndian.PutUint64(m.At(8*7, 8), 3)
	deadline := time.Now().Add(5 * time.Second)
	for r.dev.Diagnostics().DoorbellRings == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := r.dev.Diagnostics().DoorbellRings; n != 1 {
		t.Errorf("doorbell rings = %d, want 1", n)
	}
}

func TestDisconnectDropsMappings(t *testing.T) {
	cfg := DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow = 16<<20, 16<<20
	dev, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	mem, _ := vfiousertest.NewGuestMemory(1 << 16)
	defer mem.Close()
	t.Run("first client", func(t *testing.T) {
		c := vfiousertest.NewPair(t, dev)
		if err := c.DMAMap(0, mem, 0, 1<<16, vfiousertest.MapOptions{}); err != nil {
			t.Fatal(err)
		}
		if n := dev.Diagnostics().DMA.Mappings; n != 1 {
			t.Fatalf("mappings = %d", n)
		}
		c.Write(regionConfig, 4, []byte{2, 0})
		b := make([]byte, 4)
		binary.LittleEndian.PutUint32(b, 77)
		c.Write(abi.BAR_REGS, abi.REG_SCRATCH_1, b)
	})
	if n := dev.Diagnostics().DMA.Mappings; n != 0 {
		t.Errorf("mappings after disconnect = %d, want 0", n)
	}
	c := vfiousertest.NewPair(t, dev)
	b := make([]byte, 4)
	if err := c.Read(abi.BAR_REGS, abi.REG_SCRATCH_1, b); err != nil || binary.LittleEndian.Uint32(b) != 77 {
		t.Errorf("device state after reconnect: scratch = %v, %v; want 77", b, err)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, mutate := range []func(*Config){
		func(c *Config) { c.VRAMWindow = 3 << 20 },
		func(c *Config) { c.VRAMSize = 1 << 20; c.VRAMWindow = 2 << 20 },
		func(c *Config) { c.MSIXVectors = 0 },
		func(c *Config) { c.MSIXVectors = 1000 },
	} {
		cfg := DefaultConfig()
		mutate(&cfg)
		if d, err := New(cfg); err == nil {
			d.Close()
			t.Errorf("New accepted %+v", cfg)
		}
	}
}
