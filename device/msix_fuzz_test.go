package device

import (
	"encoding/binary"
	"errors"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"vgpu/abi"
	"vgpu/irq"
)

// fuzzMSIXOps bounds the operations of one input (the rest is ignored): the fuzzer minimizes
// every new input with a search quadratic in its length and fuzzes nothing meanwhile.
const fuzzMSIXOps = 32

// FuzzMSIXPage drives the MSI-X page of the register BAR through the device's trapped-access
// path (RegionRead/RegionWrite) with random offsets, sizes and values, mixed with interrupts,
// eventfd assignments and resets, against a model: table dwords read back what was written;
// the space between the table and the PBA reads 0 and ignores writes; the PBA is read-only and
// shows exactly the model's pending vectors; a Vector Control Mask Bit holds its vector's
// interrupts once the client has unmasked any vector through the table; unmasking delivers
// what is pending; every eventfd got exactly the model's signals.
//
// Input: 7-byte operations: a byte with the kind (mod 8: write, write, read, read, raise,
// assign an eventfd, reset, read the PBA) and the size (bits 3-7: 4, 8 or a misshapen size),
// an offset u16 into the page (mod 0x1000, rounded to the size for aligned kinds), 4 data bytes.
func FuzzMSIXPage(f *testing.F) {
	vc := func(v int) uint16 { return uint16(v*msixEntrySize + msixVectorControl) }
	op := func(kind, size byte, off uint16, data ...byte) []byte {
		b := []byte{kind | size<<3, byte(off), byte(off >> 8)}
		return append(b, append(data, make([]byte, 4-len(data))...)...)
	}
	cat := func(ops ...[]byte) (out []byte) {
		for _, o := range ops {
			out = append(out, o...)
		}
		return out
	}
	f.Add(cat(op(5, 0, 3), op(0, 0, vc(3), 0), op(4, 0, 3), op(4, 0, 4), op(7, 0, 0)))
	f.Add(cat(op(5, 0, 1), op(4, 0, 1), op(0, 0, vc(2), 0), op(4, 0, 1), op(0, 0, vc(1), 0), op(2, 0, vc(1))))
	f.Add(cat(op(0, 1, 8, 1, 2, 3, 4), op(2, 1, 8), op(0, 0, 0x800, 0xff, 0xff, 0xff, 0xff), op(7, 0, 0)))
	f.Add(cat(op(0, 2, 0x104, 9), op(2, 2, 0x102), op(6, 0, 0), op(2, 0, vc(0))))

	cfg := DefaultConfig()
	cfg.VRAMSize, cfg.VRAMWindow, cfg.MSIXVectors = 1<<20, 1<<20, 16
	d, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	defer d.Close()
	if err := d.RegionWrite(regionConfig, 0x04, []byte{0x02, 0}); err != nil { // Memory Space on
		f.Fatal(err)
	}
	nv := cfg.MSIXVectors
	type fd struct {
		peek int
		want uint64
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// Between inputs: the client leaves, and the MSI-X parts of a device reset.
		d.irqs.Close()
		d.resetMSIXTable()
		d.irqs.Reset()
		table := make([]byte, 16*nv)
		for v := 0; v < nv; v++ {
			table[16*v+msixVectorControl] = msixMaskBit
		}
		inUse := false
		pending := make([]bool, nv)
		fds := make([]*fd, nv) // eventfd assigned to each vector
		var all []*fd
		defer func() {
			for _, x := range all {
				unix.Close(x.peek)
			}
		}()
		masked := func(v int) bool { return inUse && table[16*v+msixVectorControl]&msixMaskBit != 0 }
		deliver := func(v int) {
			if fds[v] == nil || masked(v) {
				pending[v] = true
				return
			}
			pending[v] = false
			fds[v].want++
		}
		buf := make([]byte, 8)
		for ops := 0; len(in) >= 7 && ops < fuzzMSIXOps; in, ops = in[7:], ops+1 {
			kind := in[0] % 8
			n := [...]int{4, 8, 1, 2, 3, 16, 4, 4}[in[0]>>3%8]
			off := uint32(binary.LittleEndian.Uint16(in[1:])) % 0x1000
			if n == 4 || n == 8 {
				off &^= uint32(n - 1)
			}
			if n > 8 {
				n = 8 // the transport passes at most what the register file decodes or refuses
				off |= 4
			}
			p := buf[:n]
			for i := range p {
				p[i] = in[3+i%4] + byte(i/4)
			}
			decoded := n == 4 || n == 8 && off%8 == 0
			bar := uint64(abi.REGS_MSIX_TABLE_OFFSET + off)
			if off+uint32(n) > 0x1000 && kind < 4 { // past the end of the BAR: the transport's error
				if err := d.RegionRead(abi.BAR_REGS, bar, p); !errors.Is(err, syscall.EINVAL) {
					t.Fatalf("read %#x+%d past the BAR: %v, want EINVAL", off, n, err)
				}
				continue
			}
			switch kind {
			case 0, 1:
				if err := d.RegionWrite(abi.BAR_REGS, bar, p); err != nil {
					t.Fatalf("write %#x+%d: %v", off, n, err)
				}
				if !decoded {
					continue
				}
				for i := 0; i < n; i += 4 {
					a := int(off) + i
					if a+4 > len(table) {
						continue // past the table: undecoded or the read-only PBA
					}
					copy(table[a:], p[i:i+4])
					if a%16 == msixVectorControl {
						v := a / 16
						if p[i]&msixMaskBit == 0 {
							inUse = true
							if pending[v] {
								deliver(v)
							}
						}
					}
				}
			case 2, 3:
				if err := d.RegionRead(abi.BAR_REGS, bar, p); err != nil {
					t.Fatalf("read %#x+%d: %v", off, n, err)
				}
				for i := range p {
					want := byte(0xff)
					if decoded {
						want = modelMSIXByte(int(off)+i, table, pending)
					}
					if p[i] != want {
						t.Fatalf("read %#x+%d byte %d = %#x, want %#x (%x)", off, n, i, p[i], want, p)
					}
				}
			case 4:
				v := int(in[3]) % nv
				if err := d.irqs.TriggerMSIX(v); err != nil {
					t.Fatal(err)
				}
				deliver(v)
			case 5:
				v := int(in[3]) % nv
				efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
				if err != nil {
					t.Fatal(err)
				}
				peek, err := unix.FcntlInt(uintptr(efd), unix.F_DUPFD_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				x := &fd{peek: peek}
				all = append(all, x)
				err = d.irqs.Set(irq.Request{Flags: irq.DataEventfd | irq.ActionTrigger, Index: irq.IndexMSIX,
					Start: uint32(v), Count: 1, Files: []*os.File{os.NewFile(uintptr(efd), "fuzz")}})
				if err != nil {
					t.Fatal(err)
				}
				fds[v] = x
				if pending[v] {
					deliver(v)
				}
			case 6:
				d.resetMSIXTable()
				d.irqs.Reset()
				clear(table)
				for v := 0; v < nv; v++ {
					table[16*v+msixVectorControl] = msixMaskBit
				}
				clear(pending)
			case 7:
				var b [4]byte
				if err := d.RegionRead(abi.BAR_REGS, abi.REGS_MSIX_PBA_OFFSET, b[:]); err != nil {
					t.Fatal(err)
				}
				for i := range b {
					if want := modelMSIXByte(msixPBAOffset+i, table, pending); b[i] != want {
						t.Fatalf("PBA byte %d = %08b, want %08b", i, b[i], want)
					}
				}
			}
		}
		masks := 0
		for v := 0; v < nv; v++ {
			if table[16*v+msixVectorControl]&msixMaskBit != 0 {
				masks++
			}
		}
		if st := d.irqs.Stats(); st.TableMasked != masks || st.TableInUse != inUse {
			t.Fatalf("controller: %d vectors table-masked (in use %v), the table has %d (in use %v)", st.TableMasked, st.TableInUse, masks, inUse)
		}
		for i, x := range all {
			var b [8]byte
			var got uint64
			if n, err := unix.Read(x.peek, b[:]); err == nil && n == 8 {
				got = binary.LittleEndian.Uint64(b[:])
			}
			if got != x.want {
				t.Fatalf("eventfd %d: %d signals, want %d", i, got, x.want)
			}
		}
	})
}

// modelMSIXByte is byte a of the MSI-X page as the model has it.
func modelMSIXByte(a int, table []byte, pending []bool) byte {
	switch {
	case a < len(table):
		return table[a]
	case a >= msixPBAOffset:
		var b byte
		for bit := 0; bit < 8; bit++ {
			if v := 8*(a-msixPBAOffset) + bit; v < len(pending) && pending[v] {
				b |= 1 << bit
			}
		}
		return b
	}
	return 0
}
