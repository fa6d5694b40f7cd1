package hostile

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"vgpu/abi"
	"vgpu/vfiouser/vfiousertest"
)

// garbage is a register value an attacker would try: zero, all ones, single bits, small
// numbers, or anything.
func garbage(r *rand.Rand) uint32 {
	switch r.IntN(8) {
	case 0:
		return 0
	case 1:
		return 0xFFFFFFFF
	case 2:
		return 1
	case 3:
		return 1 << r.IntN(32)
	case 4:
		return r.Uint32() & 0xFF
	}
	return r.Uint32()
}

// claimedOffsets lists every register dword offset inside a block of abi.Blocks.
func claimedOffsets() []uint32 {
	var offs []uint32
	for _, b := range abi.Blocks {
		for off := b.Base; off < b.Base+b.Size; off += 4 {
			offs = append(offs, off)
		}
	}
	return offs
}

// poster sends posted writes and syncs every so often, so the socket never holds an unbounded
// backlog and an error shows up near its cause.
type poster struct {
	d *driver
	n int
}

func (p *poster) write(region uint32, off uint64, b []byte) error {
	if err := p.d.c.PostWrite(region, off, b); err != nil {
		return err
	}
	if p.n++; p.n%512 == 0 {
		return p.d.c.Sync()
	}
	return nil
}

func (p *poster) reg(off, v uint32) error {
	return p.write(abi.BAR_REGS, uint64(off), le(v))
}

func (p *poster) sync() error { return p.d.c.Sync() }

// attackRegisterGarbage writes random values to every claimed register of every block (three
// rounds), then to every unclaimed offset, tries misshapen accesses everywhere, writes every
// doorbell, and floods SELFTEST_IRQ with vectors the device does not have (the log must stay
// bounded). The read-only ID block must keep reading its values, plain storage must read back
// what was written and unclaimed offsets must read 0, as documented.
func attackRegisterGarbage(t *testing.T, e *env) {
	d, r := e.d, e.rng
	p := &poster{d: d}
	claimed := map[uint32]bool{}
	for _, off := range claimedOffsets() {
		claimed[off] = true
	}
	idBefore := readBlock(t, d, abi.BLOCK_ID_BASE, abi.BLOCK_ID_SIZE)
	for round := 0; round < 3; round++ {
		for _, off := range claimedOffsets() {
			if err := p.reg(off, garbage(r)); err != nil {
				t.Fatalf("round %d: posted write of %s (%#x): %v", round, regName(off), off, err)
			}
		}
		if err := p.sync(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, off := range claimedOffsets() {
			if _, err := d.reg(off); err != nil {
				t.Fatalf("round %d: read of %s (%#x) after garbage: %v", round, regName(off), off, err)
			}
		}
	}
	if got := readBlock(t, d, abi.BLOCK_ID_BASE, abi.BLOCK_ID_SIZE); got != idBefore {
		t.Errorf("the read-only ID block changed under garbage writes:\n got  % x\n want % x", got[:36], idBefore[:36])
	}
	// Plain storage keeps what is written.
	for _, base := range []uint32{abi.BLOCK_SCRATCH_BASE, abi.BLOCK_CONFIG_BASE} {
		for off := base; off < base+32; off += 4 {
			v := r.Uint32()
			if err := d.setReg(off, v); err != nil {
				t.Fatal(err)
			}
			if got, err := d.reg(off); err != nil || got != v {
				t.Errorf("%s: wrote %#x, read %#x (%v)", regName(off), v, got, err)
			}
		}
	}

	// Unclaimed offsets (below the MSI-X page, which the interrupt attack covers): writes are
	// ignored, reads return 0.
	unclaimed, wrongReads := 0, 0
	for off := uint32(0); off < abi.REGS_MSIX_TABLE_OFFSET; off += 4 {
		if claimed[off] {
			continue
		}
		unclaimed++
		if err := p.reg(off, garbage(r)); err != nil {
			t.Fatalf("posted write to unclaimed %#x: %v", off, err)
		}
	}
	if err := p.sync(); err != nil {
		t.Fatal(err)
	}
	for off := uint32(0); off < abi.REGS_MSIX_TABLE_OFFSET; off += 4 * 61 {
		if claimed[off] {
			continue
		}
		v, err := d.reg(off)
		if err != nil {
			t.Fatalf("read of unclaimed %#x: %v", off, err)
		}
		if v != 0 {
			if wrongReads++; wrongReads <= 3 {
				t.Errorf("unclaimed register offset %#x reads %#x after a garbage write, want 0", off, v)
			}
		}
	}
	t.Logf("garbage: %d claimed dwords × 3 rounds, %d unclaimed dwords", len(claimed), unclaimed)

	// Misshapen accesses anywhere in (and just past) the BAR: 1, 2, 3, 5..16 bytes, unaligned.
	// Errors are legitimate answers; the connection must survive them.
	refused := 0
	for i := 0; i < 1500; i++ {
		off := uint64(r.IntN(abi.REGS_SIZE + 16))
		if i%5 == 0 {
			off = uint64(abi.REGS_SIZE - 1 - r.IntN(8)) // straddling the end
		}
		n := []int{1, 2, 3, 5, 6, 7, 8, 12, 16}[r.IntN(9)]
		buf := make([]byte, n)
		var err error
		if r.IntN(2) == 0 {
			err = d.c.Read(abi.BAR_REGS, off, buf)
		} else {
			for j := range buf {
				buf[j] = byte(r.Uint32())
			}
			err = d.c.Write(abi.BAR_REGS, off, buf)
		}
		if err != nil {
			var re *vfiousertest.ReplyError
			if !errors.As(err, &re) {
				t.Fatalf("misshapen access %d bytes at %#x broke the connection: %v", n, off, err)
			}
			refused++
		}
	}
	t.Logf("misshapen register accesses: 1500, refused with an error reply: %d", refused)

	// Every doorbell, both halves, and odd shapes.
	var b8 [8]byte
	for db := uint64(0); db < abi.DOORBELL_SIZE/8; db++ {
		binary.LittleEndian.PutUint64(b8[:], r.Uint64())
		if err := p.write(abi.BAR_DOORBELL, 8*db, b8[:]); err != nil {
			t.Fatalf("doorbell %d: %v", db, err)
		}
		if err := p.write(abi.BAR_DOORBELL, 8*db+4*uint64(r.IntN(2)), b8[:4]); err != nil {
			t.Fatalf("doorbell %d half: %v", db, err)
		}
	}
	for i := 0; i < 200; i++ {
		off, n := uint64(r.IntN(abi.DOORBELL_SIZE+8)), 1+r.IntN(15)
		err := d.c.Write(abi.BAR_DOORBELL, off, make([]byte, n))
		var re *vfiousertest.ReplyError
		if err != nil && !errors.As(err, &re) {
			t.Fatalf("doorbell access %d bytes at %#x broke the connection: %v", n, off, err)
		}
	}

	// A flood of interrupts the device does not have: each is counted; the log must not grow
	// by a line per write (the suite checks the log's growth).
	errsBefore, _ := d.reg(abi.REG_SELFTEST_IRQ_ERRORS)
	const flood = 20000
	for i := 0; i < flood; i++ {
		if err := p.reg(abi.REG_SELFTEST_IRQ, msixCount+uint32(r.IntN(1<<20))); err != nil {
			t.Fatalf("SELFTEST_IRQ flood: %v", err)
		}
	}
	if err := p.sync(); err != nil {
		t.Fatal(err)
	}
	errsAfter, err := d.reg(abi.REG_SELFTEST_IRQ_ERRORS)
	if err != nil {
		t.Fatal(err)
	}
	if errsAfter-errsBefore != flood {
		t.Errorf("SELFTEST_IRQ_ERRORS went from %d to %d after %d bad vectors, want +%d", errsBefore, errsAfter, flood, flood)
	}
}

// attackConfigGarbage writes random bytes, words and dwords over the whole config space
// (three sweeps: FLR, D3hot, BARs, MSI-X control, Resizable BAR included) and reads it all
// back; the identity must survive.
func attackConfigGarbage(t *testing.T, e *env) {
	d, r := e.d, e.rng
	id, err := d.cfgRead(0, 4)
	if err != nil {
		t.Fatal(err)
	}
	p := &poster{d: d}
	for round := 0; round < 3; round++ {
		for off := uint64(0); off < 4096; {
			n := []int{1, 2, 4}[r.IntN(3)]
			if off%uint64(n) != 0 {
				n = 1
			}
			if err := p.write(regionConfig, off, le(garbage(r))[:n]); err != nil {
				t.Fatalf("config write %d bytes at %#x: %v", n, off, err)
			}
			off += uint64(n)
		}
		if err := p.sync(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		buf := make([]byte, 4096)
		if err := d.c.Read(regionConfig, 0, buf); err != nil {
			t.Fatalf("round %d: reading config space: %v", round, err)
		}
		if got := le32(buf); got != id {
			t.Errorf("round %d: vendor/device ID reads %#x, was %#x", round, got, id)
		}
	}
	// Past the end and odd sizes: error replies, not a broken connection.
	for _, a := range []struct {
		off uint64
		n   int
	}{{4095, 2}, {4096, 4}, {1 << 40, 4}, {^uint64(0), 1}, {0, 4097}, {4094, 4}} {
		err := d.c.Write(regionConfig, a.off, make([]byte, a.n))
		var re *vfiousertest.ReplyError
		if err == nil || !errors.As(err, &re) {
			t.Errorf("config write of %d bytes at %#x: %v, want an error reply", a.n, a.off, err)
		}
	}
}

func readBlock(t *testing.T, d *driver, base, size uint32) [abi.BLOCK_ID_SIZE]byte {
	t.Helper()
	var out [abi.BLOCK_ID_SIZE]byte
	for off := uint32(0); off < size && off < abi.BLOCK_ID_SIZE; off += 4 {
		v, err := d.reg(base + off)
		if err != nil {
			t.Fatal(err)
		}
		binary.LittleEndian.PutUint32(out[off:], v)
	}
	return out
}
