package device

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"vgpu/abi"
)

// The snapshot file (docs/snapshot.md): a header, sections, an end section holding a CRC-32C
// of every byte before it. All integers are little-endian.
//
//	header:  magic "VGPUSNAP", format version u32, ABI version u32 (ID_VERSION), the device
//	         configuration (snapHeader)
//	section: id u32, length u64, length bytes of payload (ids strictly increasing)
//	end:     id secEnd, length 4, CRC-32C (Castagnoli) u32
//
// The file is user input: lengths are checked against per-section bounds before anything is
// read, the header must match the device's configuration field by field, nothing is applied
// before the checksum has been verified (VRAM pages, written as they are read, are cleared
// again on any error).

const (
	snapMagic         = "VGPUSNAP"
	snapFormatVersion = 2 // 2: the scheduler's tables and MES-mapped slots
)

// Section ids, in file order.
const (
	secConfig    uint32 = 1  // PCIe config space (4 KiB)
	secDevice    uint32 = 2  // scratch, CONFIG, HDP, self-test registers, MSI-X table and pending bits
	secGMC       uint32 = 3  // gpummu.State
	secVM        uint32 = 4  // gpuvm.State
	secIH        uint32 = 5  // irq.IHState
	secMES       uint32 = 6  // mes.State (MarshalBinary: registers, firmware state, tables)
	secCP        uint32 = 7  // cp.State
	secDoorbells uint32 = 8  // count u32, then (index u32, value u64) for each non-zero doorbell
	secL2        uint32 = 9  // strict flag, line count, lines
	secVRAM      uint32 = 10 // page count, then (page index u64, page bytes) for each non-zero page
	secEnd       uint32 = 0xFFFF_FFFF
)

// vramPageSize is the granularity of the sparse VRAM section.
const vramPageSize = 4096

// Named errors of a snapshot file (errors.Is).
var (
	ErrSnapshotFormat   = errors.New("device: not a vgpu snapshot")
	ErrSnapshotVersion  = errors.New("device: snapshot format version not supported")
	ErrSnapshotABI      = errors.New("device: snapshot of another ABI version")
	ErrSnapshotConfig   = errors.New("device: snapshot of a device with another configuration")
	ErrSnapshotCorrupt  = errors.New("device: snapshot file damaged")
	ErrSnapshotChecksum = errors.New("device: snapshot checksum mismatch")
	// ErrSnapshotBusy: the engines could not be stopped at a packet boundary (see the
	// wrapped reason); try again.
	ErrSnapshotBusy = errors.New("device: snapshot: engines busy")
	// ErrSnapshotNotFresh: RestoreSnapshot on a device a client has already used.
	ErrSnapshotNotFresh = errors.New("device: restore: only a fresh device, before any client attaches, can be restored")
)

// snapHeader is the device configuration a snapshot belongs to: every field must match.
type snapHeader struct {
	Magic         [8]byte
	FormatVersion uint32
	ABIVersion    uint32
	VRAMSize      uint64
	VRAMWindow    uint64
	MSIXVectors   uint32
	ComputeUnits  uint32
	Doorbells     uint32 // bars.DoorbellMode
	VendorID      uint16
	DeviceID      uint16
	SubVendorID   uint16
	SubsystemID   uint16
	Slots         uint32 // cp.NumSlots
}

func abiVersion() uint32 { return abi.ID_VERSION_MAJOR<<16 | abi.ID_VERSION_MINOR }

// crcTable is CRC-32C.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// snapWriter writes sections through the checksum.
type snapWriter struct {
	w   io.Writer
	crc hash.Hash32
	err error
}

func newSnapWriter(w io.Writer) *snapWriter {
	h := crc32.New(crcTable)
	return &snapWriter{w: io.MultiWriter(w, h), crc: h}
}

func (s *snapWriter) put(v any) {
	if s.err == nil {
		s.err = binary.Write(s.w, binary.LittleEndian, v)
	}
}

func (s *snapWriter) raw(p []byte) {
	if s.err == nil {
		_, s.err = s.w.Write(p)
	}
}

// section writes one fixed-size value as a section.
func (s *snapWriter) section(id uint32, v any) {
	s.put(id)
	s.put(uint64(binary.Size(v)))
	s.put(v)
}

// end writes the end section with the checksum of everything before its CRC field.
func (s *snapWriter) end() error {
	s.put(secEnd)
	s.put(uint64(4))
	if s.err != nil {
		return s.err
	}
	sum := s.crc.Sum32()
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], sum)
	s.raw(b[:])
	return s.err
}

// snapReader reads a snapshot through the checksum, never more than a section's length.
type snapReader struct {
	r    io.Reader
	crc  hash.Hash32
	last uint32 // the last section id read
	left uint64 // bytes left in the current section
}

func newSnapReader(r io.Reader) *snapReader {
	h := crc32.New(crcTable)
	return &snapReader{r: io.TeeReader(r, h), crc: h}
}

// corrupt wraps ErrSnapshotCorrupt; a short file is corrupt too.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrSnapshotCorrupt}, args...)...)
}

func (s *snapReader) full(p []byte) error {
	if _, err := io.ReadFull(s.r, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return corrupt("the file ends early")
		}
		return err
	}
	return nil
}

// get reads a fixed-size value inside the current section.
func (s *snapReader) get(v any) error {
	n := uint64(binary.Size(v))
	if n > s.left {
		return corrupt("section %d: %d bytes left, %d needed", s.last, s.left, n)
	}
	buf := make([]byte, n) // n is a fixed size of ours, never a length from the file
	if err := s.full(buf); err != nil {
		return err
	}
	s.left -= n
	_, err := binary.Decode(buf, binary.LittleEndian, v)
	return err
}

// bytes reads len(p) bytes inside the current section.
func (s *snapReader) bytes(p []byte) error {
	if uint64(len(p)) > s.left {
		return corrupt("section %d: %d bytes left, %d needed", s.last, s.left, len(p))
	}
	s.left -= uint64(len(p))
	return s.full(p)
}

// next starts section want: the next id in the file must be it, and its length at most max.
func (s *snapReader) next(want uint32, max uint64) error {
	if s.left != 0 {
		return corrupt("section %d: %d bytes not understood", s.last, s.left)
	}
	var hdr [12]byte
	if err := s.full(hdr[:]); err != nil {
		return err
	}
	id, n := binary.LittleEndian.Uint32(hdr[:]), binary.LittleEndian.Uint64(hdr[4:])
	if id != want {
		return corrupt("section %d where section %d belongs", id, want)
	}
	if n > max {
		return corrupt("section %d: length %d beyond its bound %d", id, n, max)
	}
	s.last, s.left = id, n
	return nil
}

// fixed reads a section that holds exactly one fixed-size value.
func (s *snapReader) fixed(id uint32, v any) error {
	n := uint64(binary.Size(v))
	if err := s.next(id, n); err != nil {
		return err
	}
	if s.left != n {
		return corrupt("section %d: length %d, want %d", id, s.left, n)
	}
	return s.get(v)
}

// end reads the end section and compares the checksum.
func (s *snapReader) end() error {
	if err := s.next(secEnd, 4); err != nil {
		return err
	}
	if s.left != 4 {
		return corrupt("end section length %d", s.left)
	}
	want := s.crc.Sum32() // of every byte before the CRC field
	var b [4]byte
	if err := s.bytes(b[:]); err != nil {
		return err
	}
	if got := binary.LittleEndian.Uint32(b[:]); got != want {
		return fmt.Errorf("%w: file says %#08x, contents give %#08x", ErrSnapshotChecksum, got, want)
	}
	var extra [1]byte
	if n, _ := s.r.Read(extra[:]); n != 0 {
		return corrupt("bytes after the end section")
	}
	return nil
}
