package bars

import (
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	"vgpu/ratelog"
)

// Claim hands a dword-aligned register range to one owner. Offsets passed to the handlers are
// relative to the claim's Offset. Read may be nil (reads 0); Write may be nil (writes ignored).
type Claim struct {
	Name   string
	Offset uint32 // byte offset in the BAR, dword-aligned
	Size   uint32 // bytes, a multiple of 4
	Read   func(off uint32) uint32
	Write  func(off uint32, v uint32)
}

// RegisterFile is a trapped register BAR made of claims.
type RegisterFile struct {
	size   uint32
	claims []Claim
	owner  []uint16 // per dword: claim index + 1, 0 = unclaimed

	limit atomic.Pointer[ratelog.Limiter] // nil: no log lines (counts only)

	mu        sync.Mutex
	unclaimed map[uint32]uint64 // byte offset → access count
	misshapen uint64            // accesses that were neither 4 bytes dword-aligned nor 8 bytes qword-aligned

	spin  spinDetector            // spin.go
	names func(off uint32) string // SetRegisterNames
}

// maxClaims bounds the owner table's index type.
const maxClaims = 1<<16 - 1

// NewRegisterFile builds a register BAR of size bytes from claims. Overlapping or out-of-range
// claims are a construction error naming both parties.
func NewRegisterFile(size uint32, claims ...Claim) (*RegisterFile, error) {
	if size == 0 || size%4 != 0 {
		return nil, fmt.Errorf("bars: register file size %#x is not a positive multiple of 4", size)
	}
	if len(claims) > maxClaims {
		return nil, fmt.Errorf("bars: %d claims, at most %d", len(claims), maxClaims)
	}
	f := &RegisterFile{size: size, claims: claims, owner: make([]uint16, size/4), unclaimed: map[uint32]uint64{}}
	f.spin.threshold = SpinThreshold
	for i, c := range claims {
		if c.Offset%4 != 0 || c.Size%4 != 0 || c.Size == 0 {
			return nil, fmt.Errorf("bars: claim %q [%#x+%#x) is not dword-aligned", c.Name, c.Offset, c.Size)
		}
		if uint64(c.Offset)+uint64(c.Size) > uint64(size) {
			return nil, fmt.Errorf("bars: claim %q [%#x+%#x) is outside the %#x-byte BAR", c.Name, c.Offset, c.Size, size)
		}
		for d := c.Offset / 4; d < (c.Offset+c.Size)/4; d++ {
			if prev := f.owner[d]; prev != 0 {
				return nil, fmt.Errorf("bars: claim %q overlaps claim %q at %#x", c.Name, claims[prev-1].Name, d*4)
			}
			f.owner[d] = uint16(i + 1)
		}
	}
	return f, nil
}

// Size is the BAR size in bytes.
func (f *RegisterFile) Size() uint32 { return f.size }

// logKeyMisshapen is the ratelog key of the misshapen-access line.
const logKeyMisshapen = "regs-misshapen-access"

// SetLimiter makes misshapen accesses log a line (offset and size) through l, rate-limited; the
// count in Diagnostics is kept either way. Without a limiter (nil, the default) nothing is
// logged. Safe at any time.
func (f *RegisterFile) SetLimiter(l *ratelog.Limiter) { f.limit.Store(l) }

// Read serves a trapped read. Registers are 32 bits wide; a qword-aligned 8-byte read returns
// two consecutive registers (low first), as a 64-bit CPU load would. Any other shape reads
// all-ones (see shapeOK).
func (f *RegisterFile) Read(off uint64, p []byte) error { return f.read(off, p, true) }

func (f *RegisterFile) read(off uint64, p []byte, track bool) error {
	if !f.shapeOK(off, p) {
		for i := range p {
			p[i] = 0xff // what a bus returns for an access the device does not decode
		}
		return nil
	}
	for i := 0; i < len(p); i += 4 {
		binary.LittleEndian.PutUint32(p[i:], f.read32(uint32(off)+uint32(i), track))
	}
	return nil
}

// Write serves a trapped write; qword-aligned 8-byte writes update two registers, low first.
// Writes of any other shape are dropped (see shapeOK).
func (f *RegisterFile) Write(off uint64, p []byte) error {
	if !f.shapeOK(off, p) {
		return nil
	}
	for i := 0; i < len(p); i += 4 {
		f.write32(uint32(off)+uint32(i), binary.LittleEndian.Uint32(p[i:]))
	}
	return nil
}

// shapeOK reports whether an access is one the register file decodes: 4 bytes at a
// dword-aligned offset or 8 bytes at a qword-aligned offset (docs/device.md). An 8-byte access
// at 4 mod 8 would straddle two register pairs as a 64-bit register is laid out; it is refused
// like any other misshapen access, and counted. An access beyond the BAR is the transport's
// error, reported as EINVAL by Check.
func (f *RegisterFile) shapeOK(off uint64, p []byte) bool {
	aligned := len(p) == 4 && off%4 == 0 || len(p) == 8 && off%8 == 0
	if aligned && off+uint64(len(p)) <= uint64(f.size) {
		return true
	}
	f.mu.Lock()
	f.misshapen++
	f.mu.Unlock()
	if l := f.limit.Load(); l != nil {
		l.Warn(logKeyMisshapen, "register access of a shape the BAR does not decode: reads all-ones, writes dropped",
			"offset", fmt.Sprintf("%#x", off), "bytes", len(p))
	}
	return false
}

func (f *RegisterFile) read32(off uint32, track bool) uint32 {
	c := f.claimAt(off)
	if c == nil {
		return 0
	}
	if c.Read == nil {
		return 0
	}
	v := c.Read(off - c.Offset)
	if track {
		f.noteRead(off, v)
	}
	return v
}

func (f *RegisterFile) write32(off uint32, v uint32) {
	c := f.claimAt(off)
	if c == nil {
		return
	}
	f.spin.wrote(off) // a write re-arms even a read-only register: the driver acted
	if c.Write != nil {
		c.Write(off-c.Offset, v)
	}
}

func (f *RegisterFile) claimAt(off uint32) *Claim {
	idx := f.owner[off/4]
	if idx == 0 {
		f.mu.Lock()
		f.unclaimed[off]++
		f.mu.Unlock()
		return nil
	}
	return &f.claims[idx-1]
}

// Check validates an access range against the BAR without performing it.
func (f *RegisterFile) Check(off uint64, n int) error {
	if n <= 0 || off >= uint64(f.size) || uint64(n) > uint64(f.size)-off {
		return fmt.Errorf("bars: access [%#x+%d) outside the %#x-byte register BAR: %w", off, n, f.size, syscall.EINVAL)
	}
	return nil
}

// UnclaimedAccess is one line of the diagnostic report.
type UnclaimedAccess struct {
	Offset uint32
	Count  uint64
}

// Diagnostics returns the unclaimed offsets touched (sorted) and the count of accesses that
// were neither dword-aligned 4-byte nor qword-aligned 8-byte accesses.
func (f *RegisterFile) Diagnostics() (unclaimed []UnclaimedAccess, misshapen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for off, n := range f.unclaimed {
		unclaimed = append(unclaimed, UnclaimedAccess{off, n})
	}
	sort.Slice(unclaimed, func(i, j int) bool { return unclaimed[i].Offset < unclaimed[j].Offset })
	return unclaimed, f.misshapen
}

// Claimed reports whether a claim owns the dword at byte offset off, and its name.
func (f *RegisterFile) Claimed(off uint32) (string, bool) {
	if off >= f.size {
		return "", false
	}
	if idx := f.owner[off/4]; idx != 0 {
		return f.claims[idx-1].Name, true
	}
	return "", false
}
