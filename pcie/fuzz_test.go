package pcie

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

// fuzzSpecs are the layouts the fuzzer picks from with its first byte.
func fuzzSpecs() []Spec {
	noRebar := vgpuSpec()
	noRebar.ResizableBAR = nil
	bar32 := Spec{
		VendorID: 0x1af4, DeviceID: 0x1, ClassCode: 0x038000,
		BARs: [6]BAR{
			0: {Size: 1 << 31},
			1: {Size: 4096, Prefetchable: true},
			2: {Size: 8 << 30, Mem64: true},
		},
		MSIX:         MSIX{Vectors: 2048, TableBAR: 2, TableOffset: 0x10000, PBABAR: 1, PBAOffset: 0xf00},
		ResizableBAR: &ResizableBAR{BAR: 0, Current: 1 << 31, Max: 1 << 31},
	}
	return []Spec{vgpuSpec(), spec64Big(), noRebar, bar32}
}

// fuzzWrites decodes data as a sequence of writes: offset (2 bytes, little endian; offsets
// past the config space test refusal), length (1 byte, 0..16), then that many data bytes
// (fewer if data runs out).
func fuzzWrites(data []byte, fn func(off uint64, p []byte)) {
	for len(data) >= 3 {
		off := uint64(binary.LittleEndian.Uint16(data)) % (ConfigSize + 0x100)
		n := int(data[2]) % 17
		data = data[3:]
		n = min(n, len(data))
		fn(off, data[:n])
		data = data[n:]
	}
}

func FuzzConfigWrite(f *testing.F) {
	rec := func(off uint16, p ...byte) []byte {
		return append(binary.LittleEndian.AppendUint16(nil, off), append([]byte{byte(len(p))}, p...)...)
	}
	cat := func(spec byte, recs ...[]byte) []byte {
		out := []byte{spec}
		for _, r := range recs {
			out = append(out, r...)
		}
		return out
	}
	ones := []byte{0xff, 0xff, 0xff, 0xff}
	f.Add(cat(0, rec(offBAR0, ones...), rec(offBAR0+4, ones...), rec(offBAR0+0x14, ones...)))
	f.Add(cat(1, rec(offBAR0, ones...), rec(offBAR0+4, ones...), rec(offROM, 0x00, 0xf8, 0xff, 0xff)))
	f.Add(cat(3, rec(offBAR0, ones...), rec(offBAR0+4, ones...), rec(offBAR0+8, ones...), rec(offBAR0+0xc, ones...)))
	f.Add(cat(0, rec(offCommand, 0x06, 0x04), rec(capExp+expDevCtl, 0x10, 0xa8), rec(offCommand, 0x02)))
	f.Add(cat(0, rec(offStatus, 0xff, 0xff), rec(capPM+pmPMCSR, 0x03), rec(capPM+pmPMCSR, 0x01)))
	f.Add(cat(2, rec(capMSIX, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)))
	f.Add(cat(0, rec(extCapRebar, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)))
	f.Add(cat(1, rec(0x0fff, 0xff), rec(0x0ffe, 0xff, 0xff, 0xff), rec(0xffff, 1, 2, 3)))
	// All ones over the header, the capabilities and the start of extended space.
	for spec := byte(0); spec < 4; spec++ {
		seed := []byte{spec}
		for off := uint16(0); off < 0x140; off += 16 {
			seed = append(seed, rec(off, bytes.Repeat([]byte{0xff}, 16)...)...)
		}
		f.Add(seed)
	}
	f.Add(cat(3, rec(0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)))

	worlds := newConfigWorlds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		w := worlds[int(data[0])%len(worlds)]
		w.begin(t)
		var buf [16]byte
		fuzzWrites(data[1:], func(off uint64, p []byte) {
			flrs := w.flrs
			err := w.c.Write(off, p)
			if inRange := len(p) > 0 && off+uint64(len(p)) <= ConfigSize; inRange != (err == nil) {
				t.Fatalf("Write(%#x, %d bytes): err %v", off, len(p), err)
			}
			if w.c.MemoryEnabled() != w.mem || w.c.BusMasterEnabled() != w.bme {
				t.Fatalf("COMMAND changed to mem=%v bme=%v without a hook call", w.c.MemoryEnabled(), w.c.BusMasterEnabled())
			}
			if w.flrs != flrs {
				// FLR: everything is back at power-on (the hook saw it before the device reset).
				if w.c.regs != w.c.init {
					t.Fatalf("config space differs from power-on after FLR")
				}
				return
			}
			if err != nil {
				return
			}
			// What the write touched, read back through Read: no bit outside a writable or
			// W1C mask moved. PMCSR is the one side effect outside the written bytes.
			got := buf[:len(p)]
			if err := w.c.Read(off, got); err != nil {
				t.Fatal(err)
			}
			for i, v := range got {
				w.checkByte(t, int(off)+i, v)
			}
			for i := capPM + pmPMCSR; i < capPM+pmPMCSR+2; i++ {
				w.checkByte(t, i, w.c.regs[i])
			}
			if err := checkInvariants(w.spec, w.power[:], w.c.regs[:]); err != nil {
				t.Fatalf("after Write(%#x, % x): %v", off, p, err)
			}
		})
		// Once per input, the whole space: Read agrees with the registers, and no read-only
		// bit anywhere moved (a write that strayed outside its bytes shows up here).
		now := make([]byte, ConfigSize)
		if err := w.c.Read(0, now); err != nil {
			t.Fatal(err)
		}
		for i, v := range now {
			w.checkByte(t, i, v)
		}
		if err := checkInvariants(w.spec, w.power[:], now); err != nil {
			t.Fatal(err)
		}
	})
}

// configWorld is one fuzz layout, built once per fuzzing process and reset between inputs
// (building a Config is most of the cost of a short input). The hooks check against the
// state of the input being run.
type configWorld struct {
	spec  Spec
	c     *Config
	power [ConfigSize]byte // what Read returns at power-on

	t        *testing.T // the current input
	mem, bme bool       // what the Command hook has told us
	flrs     int        // FLR hook calls in this input
}

func newConfigWorlds(tb testing.TB) []*configWorld {
	var ws []*configWorld
	for _, spec := range fuzzSpecs() {
		w := &configWorld{spec: spec}
		c, err := New(spec, Hooks{Command: w.command, FLR: w.flr})
		if err != nil {
			tb.Fatalf("New: %v", err)
		}
		w.c = c
		if err := c.Read(0, w.power[:]); err != nil {
			tb.Fatal(err)
		}
		ws = append(ws, w)
	}
	return ws
}

// begin returns the world to power-on for a new input.
func (w *configWorld) begin(t *testing.T) {
	w.c.Reset()
	w.t, w.mem, w.bme, w.flrs = t, false, false, 0
}

func (w *configWorld) command(m, b bool) {
	c := w.c
	if m == w.mem && b == w.bme {
		w.t.Errorf("Command hook called without a change (%v, %v)", m, b)
	}
	if m != c.MemoryEnabled() || b != c.BusMasterEnabled() {
		w.t.Errorf("Command hook args (%v, %v) disagree with state (%v, %v)",
			m, b, c.MemoryEnabled(), c.BusMasterEnabled())
	}
	w.mem, w.bme = m, b
}

func (w *configWorld) flr() {
	w.flrs++
	if w.c.regs != w.c.init {
		w.t.Errorf("FLR hook called before config space was reset")
	}
}

// checkByte: byte i reads v; no bit outside the package's writable or W1C masks differs from
// power-on.
func (w *configWorld) checkByte(t *testing.T, i int, v byte) {
	c := w.c
	if d := (v ^ c.init[i]) &^ (c.wmask[i] | c.w1c[i]); d != 0 {
		t.Fatalf("byte %#x: read-only bits %#02x changed (now %#02x, power-on %#02x)", i, d, v, c.init[i])
	}
}

// checkInvariants checks, through the bytes a guest reads, the fields that must never change:
// identity, header type, capability structure, MSI-X geometry, BAR type bits and size
// alignment, the absent ROM, the self-clearing FLR bit. It returns the first violation (an
// error rather than t.Fatal: it runs after every write, where t.Helper's stack walk would cost
// more than the checks).
func checkInvariants(s Spec, power, now []byte) error {
	same := func(what string, off, n int) error {
		for i := off; i < off+n; i++ {
			if now[i] != power[i] {
				return fmt.Errorf("%s changed: byte %#x is %#02x, power-on %#02x", what, i, now[i], power[i])
			}
		}
		return nil
	}
	u16 := func(off int) uint16 { return binary.LittleEndian.Uint16(now[off:]) }
	u32 := func(off int) uint32 { return binary.LittleEndian.Uint32(now[off:]) }

	for _, f := range []struct {
		what   string
		off, n int
	}{
		{"vendor/device ID", offVendorID, 4},
		{"revision/class code", offRevision, 4},
		{"latency timer/header type/BIST", offLatencyTimer, 3},
		{"subsystem IDs", offSubsysVendor, 4},
		{"capability pointer and reserved", offCapPtr, 8},
		{"interrupt pin/min_gnt/max_lat", offIntPin, 3},
		{"PM header and PMC", capPM, 4},
		{"MSI-X header", capMSIX, 2},
		{"MSI-X table/PBA", capMSIX + msixTable, 8},
		{"Express header to DevCap", capExp, 8},
		{"LnkCap", capExp + expLnkCap, 4},
		{"LnkSta", capExp + expLnkSta, 2},
		{"DevCap2", capExp + expDevCap2, 4},
		{"LnkCap2", capExp + expLnkCap2, 4},
		{"extended capabilities", extCapRebar, rebarLen},
	} {
		if err := same(f.what, f.off, f.n); err != nil {
			return err
		}
	}
	if u16(offStatus)&stsCapList == 0 {
		return fmt.Errorf("STATUS lost Capabilities List")
	}
	if u16(capMSIX+msixCtrl)&msixCtrlSizeMask != uint16(s.MSIX.Vectors-1) {
		return fmt.Errorf("MSI-X table size changed: %#x", u16(capMSIX+msixCtrl))
	}
	if u32(offROM) != 0 {
		return fmt.Errorf("ROM BAR reads %#x", u32(offROM))
	}
	if u16(capExp+expDevCtl)&devCtlFLR != 0 {
		return fmt.Errorf("Initiate FLR reads 1")
	}
	if ps := u16(capPM+pmPMCSR) & pmcsrStateMask; ps != pmcsrD0 && ps != pmcsrD3hot {
		return fmt.Errorf("power state D%d is not supported", ps)
	}
	for i := 0; i < numBARs; i++ {
		off := offBAR0 + 4*i
		b := s.BARs[i]
		switch {
		case b.Size != 0:
			if got, want := u32(off)&barFlagMask, binary.LittleEndian.Uint32(power[off:])&barFlagMask; got != want {
				return fmt.Errorf("BAR%d type bits %#x, want %#x", i, got, want)
			}
			if low := uint32(b.Size-1) &^ barFlagMask; u32(off)&low != 0 {
				return fmt.Errorf("BAR%d = %#x has bits below its size %#x", i, u32(off), b.Size)
			}
			if b.Mem64 && b.Size > 1<<32 {
				if high := uint32((b.Size - 1) >> 32); u32(off+4)&high != 0 {
					return fmt.Errorf("BAR%d upper half %#x has bits below its size %#x", i, u32(off+4), b.Size)
				}
			}
		case i > 0 && s.BARs[i-1].Mem64:
			// upper half: checked with its lower slot
		default:
			if u32(off) != 0 {
				return fmt.Errorf("absent BAR%d reads %#x", i, u32(off))
			}
		}
	}
	return nil
}
