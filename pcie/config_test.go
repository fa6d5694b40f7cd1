package pcie

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func read(t *testing.T, c *Config, off uint64, n int) uint64 {
	t.Helper()
	p := make([]byte, 8)
	if err := c.Read(off, p[:n]); err != nil {
		t.Fatalf("Read(%#x, %d): %v", off, n, err)
	}
	return binary.LittleEndian.Uint64(p)
}

func write(t *testing.T, c *Config, off uint64, n int, v uint64) {
	t.Helper()
	p := binary.LittleEndian.AppendUint64(nil, v)[:n]
	if err := c.Write(off, p); err != nil {
		t.Fatalf("Write(%#x, %d, %#x): %v", off, n, v, err)
	}
}

// TestWriteMasks writes a value to one register of a power-on config and checks what reads
// back: the register's write mask, read-only and reserved bits.
func TestWriteMasks(t *testing.T) {
	tests := []struct {
		name string
		off  uint64
		size int
		val  uint64
		want uint64
	}{
		{"vendor ID", offVendorID, 2, 0xffff, 0x1234},
		{"device ID", offDeviceID, 2, 0x0000, 0x5650},
		{"vendor+device dword", offVendorID, 4, 0, 0x56501234},
		{"revision", offRevision, 1, 0xff, 0x01},
		{"class code", offProgIF, 3, 0xffffff, 0x030200},
		{"cache line size", offCacheLineSize, 1, 0x10, 0x10},
		{"latency timer", offLatencyTimer, 1, 0xff, 0},
		{"header type", offHeaderType, 1, 0xff, 0},
		{"BIST", offBIST, 1, 0xff, 0},
		{"cardbus CIS", offCardbusCIS, 4, 0xffffffff, 0},
		{"subsystem vendor", offSubsysVendor, 2, 0, 0x1234},
		{"subsystem ID", offSubsysID, 2, 0xffff, 0x0001},
		{"capability pointer", offCapPtr, 1, 0x80, capPM},
		{"reserved 0x35", 0x35, 3, 0xffffff, 0},
		{"interrupt line", offIntLine, 1, 0x0b, 0x0b},
		{"interrupt pin", offIntPin, 1, 0x04, intPinA},
		{"min_gnt/max_lat", offMinGnt, 2, 0xffff, 0},
		{"COMMAND all ones", offCommand, 2, 0xffff, 0x0546},
		{"COMMAND I/O only", offCommand, 2, cmdIO, 0},
		{"STATUS RO bits", offStatus, 2, 0x06ff, stsCapList},
		{"PM header", capPM, 2, 0xffff, capIDPM | capMSIX<<8},
		{"PMC", capPM + pmPMC, 2, 0xffff, pmcVersion3},
		{"PMCSR D3hot", capPM + pmPMCSR, 2, 0xffff, pmcsrNoSoftReset | pmcsrD3hot},
		{"PMCSR D1 discarded", capPM + pmPMCSR, 2, 1, pmcsrNoSoftReset},
		{"PMCSR D2 discarded", capPM + pmPMCSR, 1, 2, pmcsrNoSoftReset},
		{"PMCSR PME bits RO", capPM + pmPMCSR, 2, pmcsrPMEEnable | pmcsrPMEStatus, pmcsrNoSoftReset},
		{"MSI-X header", capMSIX, 2, 0, capIDMSIX | capExp<<8},
		{"MSI-X control", capMSIX + msixCtrl, 2, 0xffff, 0xc000 | 15},
		{"MSI-X control size RO", capMSIX + msixCtrl, 2, 0, 15},
		{"MSI-X table", capMSIX + msixTable, 4, 0, 0x3f000 | 5},
		{"MSI-X PBA", capMSIX + msixPBA, 4, 0xffffffff, 0x3f800 | 5},
		{"Express header", capExp, 2, 0xffff, capIDExp},
		{"Express flags", capExp + expFlags, 2, 0xffff, 2},
		{"DevCap", capExp + expDevCap, 4, 0, 0x10008fe1},
		{"DevCtl all ones", capExp + expDevCtl, 2, 0x7fff, 0x79ff},
		{"DevCtl zeros", capExp + expDevCtl, 2, 0, 0},
		{"DevCtl MPS 256 MRRS 4K", capExp + expDevCtl, 2, 1<<5 | 5<<12, 1<<5 | 5<<12},
		{"DevSta", capExp + expDevSta, 2, 0xffff, 0},
		{"LnkCap", capExp + expLnkCap, 4, 0, 0x00400103},
		{"LnkCtl", capExp + expLnkCtl, 2, 0xffff, lnkCtlWritable},
		{"LnkSta", capExp + expLnkSta, 2, 0xffff, 0x1103},
		{"slot/root registers", capExp + 0x14, 4, 0xffffffff, 0},
		{"DevCap2", capExp + expDevCap2, 4, 0, 0x10},
		{"DevCtl2", capExp + expDevCtl2, 2, 0xffff, 0x10},
		{"LnkCap2", capExp + expLnkCap2, 4, 0, 0x0e},
		{"LnkCtl2 target speed", capExp + expLnkCtl2, 2, 0xffff, 0xf},
		{"LnkCtl2 gen1", capExp + expLnkCtl2, 2, 1, 1},
		{"after Express", capExp + expLen, 4, 0xffffffff, 0},
		{"end of conventional space", 0xfc, 4, 0xffffffff, 0},
		{"rebar header", extCapRebar, 4, 0, 0x00010015},
		{"rebar capability", extCapRebar + rebarCap, 4, 0, 0x7000},
		{"rebar control size RO", extCapRebar + rebarCtrl, 4, 0xffffffff, 0x0820},
		{"extended space", 0x200, 4, 0xffffffff, 0},
		{"last dword", ConfigSize - 4, 4, 0xffffffff, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustNew(t, vgpuSpec(), Hooks{})
			write(t, c, tt.off, tt.size, tt.val)
			if got := read(t, c, tt.off, tt.size); got != tt.want {
				t.Errorf("after writing %#x at %#x: read %#x, want %#x", tt.val, tt.off, got, tt.want)
			}
		})
	}
}

func TestCommandHook(t *testing.T) {
	type call struct{ mem, bme bool }
	tests := []struct {
		name   string
		writes []uint16 // successive 16-bit COMMAND writes
		want   []call
		final  uint16
	}{
		{"memory on", []uint16{cmdMemory}, []call{{true, false}}, cmdMemory},
		{"bus master on", []uint16{cmdBusMaster}, []call{{false, true}}, cmdBusMaster},
		{"both, then same again", []uint16{cmdMemory | cmdBusMaster, cmdMemory | cmdBusMaster},
			[]call{{true, true}}, cmdMemory | cmdBusMaster},
		{"on then off", []uint16{cmdMemory | cmdBusMaster, 0}, []call{{true, true}, {false, false}}, 0},
		{"other bits only: no call", []uint16{cmdParity | cmdSERR | cmdINTxDisable}, nil,
			cmdParity | cmdSERR | cmdINTxDisable},
		{"I/O ignored: no call", []uint16{cmdIO}, nil, 0},
		{"INTx disable with memory", []uint16{cmdINTxDisable | cmdMemory}, []call{{true, false}},
			cmdINTxDisable | cmdMemory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []call
			c := mustNew(t, vgpuSpec(), Hooks{Command: func(m, b bool) { got = append(got, call{m, b}) }})
			for _, w := range tt.writes {
				write(t, c, offCommand, 2, uint64(w))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("hook calls %v, want %v", got, tt.want)
			}
			if v := read(t, c, offCommand, 2); v != uint64(tt.final) {
				t.Errorf("COMMAND = %#x, want %#x", v, tt.final)
			}
			if c.MemoryEnabled() != (tt.final&cmdMemory != 0) || c.BusMasterEnabled() != (tt.final&cmdBusMaster != 0) ||
				c.INTxDisabled() != (tt.final&cmdINTxDisable != 0) {
				t.Errorf("accessors: mem %v bme %v intx-disabled %v for COMMAND %#x",
					c.MemoryEnabled(), c.BusMasterEnabled(), c.INTxDisabled(), tt.final)
			}
		})
	}
}

// TestCommandHookByteWrites: a write of only the low COMMAND byte, or of a whole dword that
// also carries STATUS, still reports the change.
func TestCommandHookByteWrites(t *testing.T) {
	n := 0
	c := mustNew(t, vgpuSpec(), Hooks{Command: func(m, b bool) { n++ }})
	write(t, c, offCommand, 1, cmdMemory)
	write(t, c, offCommand+1, 1, cmdINTxDisable>>8) // high byte only: no MEM/BME change
	write(t, c, offCommand, 4, cmdMemory|cmdBusMaster|0xffff0000)
	if n != 2 {
		t.Errorf("hook called %d times, want 2", n)
	}
	// The dword write also rewrote COMMAND's high byte, clearing Interrupt Disable.
	if got := read(t, c, offCommand, 4); got != uint64(cmdMemory|cmdBusMaster|stsCapList<<16) {
		t.Errorf("COMMAND/STATUS = %#x", got)
	}
}

func TestStatusW1C(t *testing.T) {
	const errs = stsMasterParity | stsSigTargetAbort | stsRecTargetAbort | stsRecMasterAbort | stsSigSystemError | stsDetectedParity
	tests := []struct {
		name  string
		off   uint64
		size  int
		val   uint64
		want  uint16
		setup uint16
	}{
		{"write 0 keeps", offStatus, 2, 0, stsCapList | errs, errs},
		{"write ones clears all", offStatus, 2, 0xffff, stsCapList, errs},
		{"clear master abort only", offStatus, 2, stsRecMasterAbort, stsCapList | errs&^stsRecMasterAbort, errs},
		{"high byte write", offStatus + 1, 1, 0x80, stsCapList | errs&^stsDetectedParity, errs},
		{"dword RMW of COMMAND clears", offCommand, 4, uint64(stsCapList|stsSigSystemError) << 16,
			stsCapList | errs&^stsSigSystemError, errs},
		{"Cap bit not clearable", offStatus, 2, stsCapList, stsCapList, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustNew(t, vgpuSpec(), Hooks{})
			// Nothing in this package raises error bits yet; plant them as hardware would.
			binary.LittleEndian.PutUint16(c.regs[offStatus:], stsCapList|tt.setup)
			write(t, c, tt.off, tt.size, tt.val)
			if got := uint16(read(t, c, offStatus, 2)); got != tt.want {
				t.Errorf("STATUS = %#04x, want %#04x", got, tt.want)
			}
		})
	}
	t.Run("DevSta", func(t *testing.T) {
		c := mustNew(t, vgpuSpec(), Hooks{})
		c.regs[capExp+expDevSta] = devStaW1C
		write(t, c, capExp+expDevSta, 2, devStaUR|devStaCorrErr|devStaTrPend)
		if got := read(t, c, capExp+expDevSta, 2); got != devStaNonFatal|devStaFatal {
			t.Errorf("DevSta = %#x", got)
		}
	})
}

func spec64Big() Spec {
	s := vgpuSpec()
	s.BARs[0] = BAR{Size: 16 << 30, Mem64: true, Prefetchable: true}
	s.ResizableBAR = &ResizableBAR{BAR: 0, Current: 16 << 30, Max: 64 << 30}
	return s
}

func TestBARSizing(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		off  uint64
		val  uint32
		want uint32
	}{
		{"BAR0 low 256M 64-bit pref", vgpuSpec(), 0x10, 0xffffffff, 0xf0000000 | barType64 | barPrefetchable},
		{"BAR1 upper half of 256M", vgpuSpec(), 0x14, 0xffffffff, 0xffffffff},
		{"BAR2 low 16K 64-bit", vgpuSpec(), 0x18, 0xffffffff, 0xffffc000 | barType64},
		{"BAR3 upper half of 16K", vgpuSpec(), 0x1c, 0xffffffff, 0xffffffff},
		{"BAR4 absent", vgpuSpec(), 0x20, 0xffffffff, 0},
		{"BAR5 256K 32-bit", vgpuSpec(), 0x24, 0xffffffff, 0xfffc0000},
		{"BAR5 type bits RO", vgpuSpec(), 0x24, 0x0000000f, 0},
		{"BAR0 type bits RO", vgpuSpec(), 0x10, 0, barType64 | barPrefetchable},
		{"16G BAR low: all address bits below size", spec64Big(), 0x10, 0xffffffff, barType64 | barPrefetchable},
		{"16G BAR upper half", spec64Big(), 0x14, 0xffffffff, 0xfffffffc},
		{"ROM sizing", vgpuSpec(), offROM, 0xfffff800, 0},
		{"ROM enable", vgpuSpec(), offROM, 0xfebc0001, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustNew(t, tt.spec, Hooks{})
			write(t, c, tt.off, 4, uint64(tt.val))
			if got := uint32(read(t, c, tt.off, 4)); got != tt.want {
				t.Errorf("BAR at %#x after writing %#x: %#08x, want %#08x", tt.off, tt.val, got, tt.want)
			}
		})
	}
}

// TestBARSizeAndRestore does what firmware does: save, size with all ones, decode the size,
// restore, then assign addresses; and checks BARAddress along the way.
func TestBARSizeAndRestore(t *testing.T) {
	c := mustNew(t, vgpuSpec(), Hooks{})
	sizes := map[int]uint64{0: 256 << 20, 2: 16 << 10, 5: 256 << 10}
	for i, want := range sizes {
		off := uint64(offBAR0 + 4*i)
		mem64 := c.spec.BARs[i].Mem64
		orig := read(t, c, off, 4)
		write(t, c, off, 4, 0xffffffff)
		lo := read(t, c, off, 4)
		mask := lo &^ barFlagMask
		hi := uint64(0)
		if mem64 {
			write(t, c, off+4, 4, 0xffffffff)
			hi = read(t, c, off+4, 4)
		} else {
			hi = 0xffffffff
		}
		size := ^(hi<<32 | mask) + 1
		if size != want {
			t.Errorf("BAR%d decoded size %#x, want %#x", i, size, want)
		}
		write(t, c, off, 4, orig)
		if mem64 {
			write(t, c, off+4, 4, 0)
		}
		if got := read(t, c, off, 4); got != orig {
			t.Errorf("BAR%d restore: %#x, want %#x", i, got, orig)
		}
	}
	write(t, c, 0x10, 4, 0xc0000000)
	write(t, c, 0x14, 4, 0x00000040)
	write(t, c, 0x18, 4, 0xfe004000)
	write(t, c, 0x24, 4, 0xfe040000|0xfff) // low bits below the size are dropped
	for i, want := range map[int]uint64{0: 0x40c0000000, 1: 0, 2: 0xfe004000, 3: 0, 4: 0, 5: 0xfe040000, -1: 0, 6: 0} {
		if got := c.BARAddress(i); got != want {
			t.Errorf("BARAddress(%d) = %#x, want %#x", i, got, want)
		}
	}
	if got := read(t, c, 0x10, 4); got != 0xc000000c {
		t.Errorf("BAR0 reg = %#x", got)
	}
}

func TestMSIXControl(t *testing.T) {
	tests := []struct {
		name           string
		off            uint64
		size           int
		val            uint64
		enable, masked bool
	}{
		{"enable via word", capMSIX + msixCtrl, 2, msixCtrlEnable, true, false},
		{"mask via word", capMSIX + msixCtrl, 2, msixCtrlMask, false, true},
		{"both via high byte", capMSIX + msixCtrl + 1, 1, 0xc0, true, true},
		{"dword write with header", capMSIX, 4, 0xffff0000, true, true},
		{"table size bits ignored", capMSIX + msixCtrl, 2, 0x3fff, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustNew(t, vgpuSpec(), Hooks{})
			write(t, c, tt.off, tt.size, tt.val)
			if c.MSIXEnabled() != tt.enable || c.MSIXFunctionMasked() != tt.masked {
				t.Errorf("enable %v masked %v, want %v %v", c.MSIXEnabled(), c.MSIXFunctionMasked(), tt.enable, tt.masked)
			}
			if got := read(t, c, capMSIX+msixCtrl, 2) & msixCtrlSizeMask; got != 15 {
				t.Errorf("table size field %d, want 15", got)
			}
		})
	}
}

func TestFLR(t *testing.T) {
	var events []string
	c := mustNew(t, vgpuSpec(), Hooks{
		Command: func(m, b bool) { events = append(events, fmt.Sprintf("command %v %v", m, b)) },
		FLR:     func() { events = append(events, "flr") },
	})
	power := make([]byte, ConfigSize)
	if err := c.Read(0, power); err != nil {
		t.Fatal(err)
	}
	// Program the function the way a driver would.
	write(t, c, 0x10, 4, 0xc0000000)
	write(t, c, 0x24, 4, 0xfe000000)
	write(t, c, offCommand, 2, cmdMemory|cmdBusMaster)
	write(t, c, offIntLine, 1, 11)
	write(t, c, capMSIX+msixCtrl, 2, msixCtrlEnable)
	write(t, c, capExp+expDevCtl, 2, 0x2810|1<<5)
	events = nil

	// Linux's pcie_flr: read-modify-write of DevCtl with Initiate FLR set.
	ctl := read(t, c, capExp+expDevCtl, 2)
	write(t, c, capExp+expDevCtl, 2, ctl|devCtlFLR)

	if want := []string{"command false false", "flr"}; !reflect.DeepEqual(events, want) {
		t.Errorf("hook events %q, want %q", events, want)
	}
	after := make([]byte, ConfigSize)
	if err := c.Read(0, after); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, power) {
		t.Errorf("config after FLR differs from power-on:\n%s", lineDiff(hexLines(power), hexLines(after)))
	}
	if c.MemoryEnabled() || c.BusMasterEnabled() || c.MSIXEnabled() || c.BARAddress(0) != 0 {
		t.Errorf("state survived FLR")
	}
	if got := read(t, c, capExp+expDevCtl, 2); got&devCtlFLR != 0 {
		t.Errorf("Initiate FLR reads back set: %#x", got)
	}

	// FLR from a power-on state: no COMMAND change, so only the FLR hook runs; a byte write
	// of the high DevCtl byte is enough.
	events = nil
	write(t, c, capExp+expDevCtl+1, 1, 0x80)
	if want := []string{"flr"}; !reflect.DeepEqual(events, want) {
		t.Errorf("hook events %q, want %q", events, want)
	}
	// Without hooks an FLR still resets.
	c2 := mustNew(t, vgpuSpec(), Hooks{})
	write(t, c2, offCommand, 2, cmdMemory)
	write(t, c2, capExp+expDevCtl, 2, devCtlFLR)
	if c2.MemoryEnabled() {
		t.Errorf("FLR without hooks did not reset COMMAND")
	}
}

func hexLines(p []byte) string {
	var b strings.Builder
	for i := 0; i < len(p); i += 16 {
		fmt.Fprintf(&b, "%03x: % x\n", i, p[i:i+16])
	}
	return b.String()
}

func TestReset(t *testing.T) {
	called := false
	c := mustNew(t, vgpuSpec(), Hooks{Command: func(bool, bool) { called = true }, FLR: func() { called = true }})
	write(t, c, offCommand, 2, cmdMemory)
	write(t, c, capPM+pmPMCSR, 2, pmcsrD3hot)
	called = false
	c.Reset()
	if called {
		t.Errorf("Reset called a hook")
	}
	if c.MemoryEnabled() || read(t, c, capPM+pmPMCSR, 2) != pmcsrNoSoftReset {
		t.Errorf("Reset left state behind")
	}
}

func TestResizableBAR(t *testing.T) {
	tests := []struct {
		name     string
		rebar    *ResizableBAR
		bar      BAR
		barIndex int
		header   uint32
		capReg   uint32
		ctrlReg  uint32
	}{
		{"vgpu 256M..1G", &ResizableBAR{0, 256 << 20, 1 << 30}, BAR{256 << 20, true, true}, 0,
			0x00010015, 1<<12 | 1<<13 | 1<<14, 0x20 | 8<<8},
		{"single size 1M", &ResizableBAR{0, 1 << 20, 1 << 20}, BAR{1 << 20, true, true}, 0,
			0x00010015, 1 << 4, 0x20},
		{"BAR2 512G..128T", &ResizableBAR{2, 512 << 30, 128 << 40}, BAR{512 << 30, true, true}, 2,
			0x00010015, 0xff800000, 2 | 0x20 | 19<<8},
		{"beyond 128T goes to ctrl", &ResizableBAR{0, 512 << 30, 1 << 63}, BAR{512 << 30, true, false}, 0,
			0x00010015, 0xff800000, 0xffff0000 | 0x20 | 19<<8},
		{"32-bit BAR up to 2G", &ResizableBAR{5, 256 << 20, 2 << 30}, BAR{256 << 20, false, false}, 5,
			0x00010015, 0xf << 12, 5 | 0x20 | 8<<8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Spec{VendorID: 0x1234, ClassCode: 0x030200,
				MSIX: MSIX{Vectors: 1, TableBAR: tt.barIndex, PBABAR: tt.barIndex, PBAOffset: 0x800}}
			s.BARs[tt.barIndex] = tt.bar
			s.ResizableBAR = tt.rebar
			c := mustNew(t, s, Hooks{})
			got := [3]uint32{uint32(read(t, c, extCapRebar, 4)), uint32(read(t, c, extCapRebar+rebarCap, 4)),
				uint32(read(t, c, extCapRebar+rebarCtrl, 4))}
			want := [3]uint32{tt.header, tt.capReg, tt.ctrlReg}
			if got != want {
				t.Errorf("header/cap/ctrl = %#08x, want %#08x", got, want)
			}
			// The size field is read-only: a resize request changes nothing.
			write(t, c, extCapRebar+rebarCtrl, 4, 0)
			if v := uint32(read(t, c, extCapRebar+rebarCtrl, 4)); v != tt.ctrlReg {
				t.Errorf("ctrl after write = %#08x, want %#08x", v, tt.ctrlReg)
			}
		})
	}
	t.Run("absent", func(t *testing.T) {
		s := vgpuSpec()
		s.ResizableBAR = nil
		c := mustNew(t, s, Hooks{})
		if v := read(t, c, extCapRebar, 4); v != 0 {
			t.Errorf("extended header without capabilities = %#x, want 0", v)
		}
		if strings.Contains(c.Dump(), "Resizable") {
			t.Errorf("Dump shows a Resizable BAR capability that is absent")
		}
	})
	t.Run("spec not aliased", func(t *testing.T) {
		s := vgpuSpec()
		c := mustNew(t, s, Hooks{})
		s.ResizableBAR.Max = 1 << 40
		if strings.Contains(c.Dump(), "1TB") {
			t.Errorf("changing the caller's ResizableBAR changed the config")
		}
	})
}

func TestAccessBounds(t *testing.T) {
	tests := []struct {
		name string
		off  uint64
		n    int
		ok   bool
	}{
		{"whole space", 0, ConfigSize, true},
		{"last byte", ConfigSize - 1, 1, true},
		{"last dword", ConfigSize - 4, 4, true},
		{"zero length", 0, 0, false},
		{"zero length at end", ConfigSize, 0, false},
		{"one past end", ConfigSize, 1, false},
		{"straddles end", ConfigSize - 2, 4, false},
		{"too long", 0, ConfigSize + 1, false},
		{"huge offset", 1 << 63, 4, false},
		{"offset wraps", ^uint64(0) - 1, 4, false},
		{"max offset", ^uint64(0), 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustNew(t, vgpuSpec(), Hooks{})
			before := c.regs
			p := bytes.Repeat([]byte{0xff}, tt.n)
			rerr := c.Read(tt.off, make([]byte, tt.n))
			werr := c.Write(tt.off, p)
			for _, err := range []error{rerr, werr} {
				if tt.ok && err != nil {
					t.Errorf("unexpected error %v", err)
				}
				if !tt.ok && !errors.Is(err, ErrAccess) {
					t.Errorf("error %v, want ErrAccess", err)
				}
			}
			if !tt.ok && c.regs != before {
				t.Errorf("a refused write changed config space")
			}
		})
	}
}

// TestMultiByteAccess checks unaligned reads and writes that span several registers.
func TestMultiByteAccess(t *testing.T) {
	c := mustNew(t, vgpuSpec(), Hooks{})
	tests := []struct {
		name string
		off  uint64
		n    int
		want uint64
	}{
		{"device ID + COMMAND low", 0x03, 2, 0x0056},
		{"vendor high byte .. revision", 0x01, 8, 0x01_0010_0000_5650_12},
		{"class code + CLS", 0x09, 4, 0x00030200},
		{"BAR0 bytes 1..4", 0x11, 4, 0},
		{"capability pointer region", 0x33, 2, 0x4000},
		{"PM to MSI-X", 0x4e, 4, 0x60110000},
		{"PMCSR odd", 0x45, 1, 0},
	}
	for _, tt := range tests {
		t.Run("read "+tt.name, func(t *testing.T) {
			if got := read(t, c, tt.off, tt.n); got != tt.want {
				t.Errorf("read %d at %#x = %#x, want %#x", tt.n, tt.off, got, tt.want)
			}
		})
	}
	// A 3-byte write at 0x03 covers the device ID high byte (RO) and COMMAND (RW): only
	// COMMAND changes.
	write(t, c, 0x03, 3, 0x04_06_ff)
	if got := read(t, c, 0, 8); got != 0x0010_0406_5650_1234 {
		t.Errorf("after spanning write: %#016x", got)
	}
	// An 8-byte write over BAR0/BAR1 programs the full 64-bit address in one go.
	write(t, c, 0x10, 8, 0x0000_0001_e000_0000)
	if got := c.BARAddress(0); got != 0x1e0000000 {
		t.Errorf("BARAddress(0) = %#x", got)
	}
	// A write straddling the end of the MSI-X cap into the Express header changes only the
	// MSI-X enable bits.
	if err := c.Write(capMSIX+2, bytes.Repeat([]byte{0xff}, 0x10)); err != nil {
		t.Fatal(err)
	}
	if !c.MSIXEnabled() || read(t, c, capExp, 4) != 0x00020010 {
		t.Errorf("straddling write: msix %v, exp header %#x", c.MSIXEnabled(), read(t, c, capExp, 4))
	}
}

// TestWholeSpace reads all 4 KiB at once, as QEMU does at realize, and checks it equals the
// concatenation of dword reads; then writes all 4 KiB of ones and checks only writable bits
// changed.
func TestWholeSpace(t *testing.T) {
	c := mustNew(t, vgpuSpec(), Hooks{})
	all := make([]byte, ConfigSize)
	if err := c.Read(0, all); err != nil {
		t.Fatal(err)
	}
	for off := 0; off < ConfigSize; off += 4 {
		if got := read(t, c, uint64(off), 4); got != uint64(binary.LittleEndian.Uint32(all[off:])) {
			t.Fatalf("dword at %#x = %#x, whole read has %#x", off, got, binary.LittleEndian.Uint32(all[off:]))
		}
	}
	var flr bool
	c.hooks.FLR = func() { flr = true }
	if err := c.Write(0, bytes.Repeat([]byte{0xff}, ConfigSize)); err != nil {
		t.Fatal(err)
	}
	if !flr {
		t.Errorf("a 4 KiB write of ones sets Initiate FLR and must reset")
	}
	c.Reset()
	c.hooks.FLR = nil
	// Same without the FLR bit: every bit that changed must be writable.
	p := bytes.Repeat([]byte{0xff}, ConfigSize)
	p[capExp+expDevCtl+1] &^= devCtlFLR >> 8
	if err := c.Write(0, p); err != nil {
		t.Fatal(err)
	}
	for i := range c.regs {
		if d := c.regs[i] ^ c.init[i]; d&^c.wmask[i] != 0 {
			t.Errorf("byte %#x changed non-writable bits %#02x", i, d&^c.wmask[i])
		}
	}
	if !c.MemoryEnabled() || !c.BusMasterEnabled() || !c.MSIXEnabled() {
		t.Errorf("writable bits did not take")
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name string
		edit func(s *Spec)
	}{
		{"vendor 0xffff", func(s *Spec) { s.VendorID = 0xffff }},
		{"vendor 0", func(s *Spec) { s.VendorID = 0 }},
		{"class code > 24 bits", func(s *Spec) { s.ClassCode = 0x1030200 }},
		{"BAR size not power of two", func(s *Spec) { s.BARs[5].Size = 3 << 16 }},
		{"BAR smaller than 4K", func(s *Spec) { s.BARs[5].Size = 2048 }},
		{"32-bit BAR of 4G", func(s *Spec) { s.BARs[5].Size = 4 << 30 }},
		{"absent BAR with flags", func(s *Spec) { s.BARs[4].Prefetchable = true }},
		{"64-bit BAR in slot 5", func(s *Spec) { s.BARs[5].Mem64 = true }},
		{"upper half used", func(s *Spec) { s.BARs[1] = BAR{Size: 4096} }},
		{"upper half flags", func(s *Spec) { s.BARs[3] = BAR{Mem64: true} }},
		{"0 vectors", func(s *Spec) { s.MSIX.Vectors = 0 }},
		{"2049 vectors", func(s *Spec) { s.MSIX.Vectors = 2049 }},
		{"table BAR absent", func(s *Spec) { s.MSIX.TableBAR = 4 }},
		{"table BAR is upper half", func(s *Spec) { s.MSIX.TableBAR = 1 }},
		{"table BAR out of range", func(s *Spec) { s.MSIX.TableBAR = 6 }},
		{"PBA BAR negative", func(s *Spec) { s.MSIX.PBABAR = -1 }},
		{"table misaligned", func(s *Spec) { s.MSIX.TableOffset = 0x3f004 }},
		{"PBA misaligned", func(s *Spec) { s.MSIX.PBAOffset = 0x3f801 }},
		{"table beyond BAR", func(s *Spec) { s.MSIX.TableOffset = 0x3ff80 }},
		{"PBA beyond BAR", func(s *Spec) { s.MSIX.PBAOffset = 0x40000 }},
		{"PBA offset wraps", func(s *Spec) { s.MSIX.PBAOffset = 0xfffffff8 }},
		{"256 vectors: table runs into PBA", func(s *Spec) { s.MSIX.Vectors = 256 }},
		{"table/PBA overlap", func(s *Spec) { s.MSIX.PBAOffset = 0x3f0f8 }},
		{"rebar on absent BAR", func(s *Spec) { s.ResizableBAR.BAR = 4 }},
		{"rebar on upper half", func(s *Spec) { s.ResizableBAR.BAR = 1 }},
		{"rebar index 7", func(s *Spec) { s.ResizableBAR.BAR = 7 }},
		{"rebar current != BAR size", func(s *Spec) { s.ResizableBAR.Current = 512 << 20 }},
		{"rebar current below 1M", func(s *Spec) {
			s.BARs[0].Size = 512 << 10
			s.ResizableBAR.Current = 512 << 10
		}},
		{"rebar current above 512G", func(s *Spec) {
			s.BARs[0].Size = 1 << 40
			s.ResizableBAR.Current, s.ResizableBAR.Max = 1<<40, 1<<40
		}},
		{"rebar max below current", func(s *Spec) { s.ResizableBAR.Max = 128 << 20 }},
		{"rebar max not power of two", func(s *Spec) { s.ResizableBAR.Max = 3 << 30 }},
		{"rebar 32-bit BAR max 4G", func(s *Spec) {
			s.BARs[0].Mem64, s.BARs[0].Prefetchable = false, false
			s.ResizableBAR.Max = 4 << 30
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := vgpuSpec()
			tt.edit(&s)
			c, err := New(s, Hooks{})
			if !errors.Is(err, ErrInvalidSpec) || c != nil {
				t.Errorf("New = %v, %v; want ErrInvalidSpec", c, err)
			}
		})
	}
	t.Run("valid variants", func(t *testing.T) {
		for _, s := range []Spec{
			vgpuSpec(),
			spec64Big(),
			{VendorID: 1, MSIX: MSIX{Vectors: 2048, TableBAR: 0, PBABAR: 0, PBAOffset: 0x8000},
				BARs: [6]BAR{{Size: 64 << 10}}},
			{VendorID: 1, MSIX: MSIX{Vectors: 1, TableBAR: 4, PBABAR: 4, PBAOffset: 0x10},
				BARs: [6]BAR{4: {Size: 1 << 63, Mem64: true}}},
		} {
			if _, err := New(s, Hooks{}); err != nil {
				t.Errorf("New(%+v): %v", s, err)
			}
		}
	})
}
