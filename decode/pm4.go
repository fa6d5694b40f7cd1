package decode

import (
	"errors"
	"fmt"
	"strings"

	"vgpu/abi"
)

// Why a packet, frame, entry or program did not decode in full. A decoder never fails
// outright: it returns what it could read with one of these (wrapped with detail) in Err.
var (
	ErrTruncated     = errors.New("truncated")        // fewer dwords (bytes) than the header says
	ErrUnknownOpcode = errors.New("unknown opcode")   // an opcode vgpu does not know
	ErrBadType       = errors.New("not a PM4 packet") // a type-0/type-1 header: the CP halts on it
	ErrBadCount      = errors.New("wrong COUNT")      // a payload size the opcode does not take
	ErrReservedBits  = errors.New("reserved bits set")
	ErrBadHeader     = errors.New("bad header") // an MES frame whose TYPE or DWSIZE is wrong
)

// Packet is one decoded PM4 packet.
type Packet struct {
	Offset    int      // dword offset of the header in its ring or IB (PM4Packet: 0)
	Dwords    []uint32 // the packet's dwords, header first (truncated: those there were)
	Type      uint32   // header TYPE: 3, or 2 for the one-dword filler; 0 and 1 are errors
	Opcode    uint32   // type 3: IT_OPCODE
	Count     uint32   // type 3: COUNT, payload dwords minus one
	Predicate bool     // header PREDICATE
	Compute   bool     // header SHADER_TYPE: 1 = compute
	Name      string   // the opcode's abi name without PM4_IT_ (NOP, WRITE_DATA, ...), TYPE2, UNKNOWN_0x55
	Fields    []Field  // the payload's fields, in packet order
	Err       error    // nil or one of the Err* above, wrapped with detail
}

// Len is the number of dwords the packet occupies (len(Dwords)).
func (p Packet) Len() int { return len(p.Dwords) }

// Field returns the field named name (the first one, for names a packet repeats).
func (p Packet) Field(name string) (Field, bool) {
	for _, f := range p.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// String is the packet on one line: its name, the header's count (and pred/compute flags),
// then name=value fields; a packet with an error ends with the error and its raw dwords.
func (p Packet) String() string {
	var b strings.Builder
	b.WriteString(p.Name)
	if p.Type == abi.PM4_TYPE3 {
		fmt.Fprintf(&b, " count=%d", p.Count)
		if p.Predicate {
			b.WriteString(" pred=1")
		}
		if p.Compute {
			b.WriteString(" compute=1")
		}
	}
	for _, f := range p.Fields {
		b.WriteByte(' ')
		b.WriteString(f.String())
	}
	if p.Err != nil {
		fmt.Fprintf(&b, " error=%q raw=%s", p.Err.Error(), rawText(p.Dwords))
	}
	return b.String()
}

// PM4Packet decodes the packet at dws[0] and returns it with the number of dwords it occupies
// (0 only when dws is empty). A packet the dwords do not hold in full is ErrTruncated and
// occupies all of dws.
func PM4Packet(dws []uint32) (Packet, int) {
	if len(dws) == 0 {
		return Packet{Name: "EMPTY", Err: fmt.Errorf("%w: no dwords", ErrTruncated)}, 0
	}
	hdr := dws[0]
	p := Packet{Type: hdr >> abi.PM4_HEADER_TYPE__SHIFT}
	switch p.Type {
	case abi.PM4_TYPE2:
		p.Name, p.Dwords = "TYPE2", dws[:1]
		return p, 1
	case abi.PM4_TYPE3:
	default:
		p.Name, p.Dwords = fmt.Sprintf("TYPE%d", p.Type), dws[:1]
		p.Err = fmt.Errorf("%w: type-%d header %#08x", ErrBadType, p.Type, hdr)
		return p, 1
	}
	p.Opcode = uint32(field(hdr, abi.PM4_HEADER_OPCODE_MASK, abi.PM4_HEADER_OPCODE__SHIFT))
	p.Count = uint32(field(hdr, abi.PM4_HEADER_COUNT_MASK, abi.PM4_HEADER_COUNT__SHIFT))
	p.Predicate = hdr&abi.PM4_HEADER_PREDICATE_MASK != 0
	p.Compute = hdr&abi.PM4_HEADER_SHADER_TYPE_MASK != 0
	op, known := opcodes[p.Opcode]
	if known {
		p.Name = op.name
	} else {
		p.Name = fmt.Sprintf("UNKNOWN_%#x", p.Opcode)
	}
	n := int(p.Count) + 2
	oneDword := hdr&(abi.PM4_HEADER_COUNT_MASK|abi.PM4_HEADER_OPCODE_MASK) == abi.PM4_NOP_ONE_DWORD&(abi.PM4_HEADER_COUNT_MASK|abi.PM4_HEADER_OPCODE_MASK)
	if oneDword {
		n = 1 // PACKET3(NOP, 0x3FFF): the one-dword filler
	}
	if n > len(dws) {
		p.Dwords = dws
		p.Err = fmt.Errorf("%w: %d dwords of %d", ErrTruncated, len(dws), n)
		return p, len(dws)
	}
	p.Dwords = dws[:n]
	switch {
	case hdr&headerReserved != 0:
		p.Err = fmt.Errorf("%w: header [7:2] %#x", ErrReservedBits, hdr&headerReserved)
	case !known:
		p.Err = fmt.Errorf("%w %#x", ErrUnknownOpcode, p.Opcode)
		return p, n
	case op.count >= 0 && int(p.Count) != op.count:
		p.Err = fmt.Errorf("%w: %s takes COUNT %d, not %d", ErrBadCount, op.name, op.count, p.Count)
	case op.count < 0 && int(p.Count) < op.min && !oneDword:
		p.Err = fmt.Errorf("%w: %s takes COUNT %d or more, not %d", ErrBadCount, op.name, op.min, p.Count)
	}
	if op.decode != nil {
		p.Fields = op.decode(p.Dwords)
	}
	return p, n
}

// headerReserved is header bits [7:2], which the CP requires to be zero.
const headerReserved = 0x000000FC

// Packets is a decoded stream: one line per packet, its dword offset first.
type Packets []Packet

func (ps Packets) String() string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "0x%04x: %s\n", p.Offset, p.String())
	}
	return b.String()
}

// PM4Stream decodes a linear stream (an IB, or a ring's dwords in order) from dws[0] to its
// end; each packet's Offset is its index in dws. A truncated last packet ends the stream.
func PM4Stream(dws []uint32) Packets {
	var out Packets
	for off := 0; off < len(dws); {
		p, n := PM4Packet(dws[off:])
		p.Offset = off
		out = append(out, p)
		off += n
	}
	return out
}

// PM4Ring decodes a ring's packets from rptr to wptr (dword offsets, each taken modulo the
// ring's size; equal offsets are an empty ring): a packet that runs past the ring's end
// continues at dword 0, as the CP reads it. Offsets are ring offsets (wrapped).
func PM4Ring(ring []uint32, rptr, wptr uint64) Packets {
	size := uint64(len(ring))
	if size == 0 {
		return nil
	}
	start, end := rptr%size, wptr%size
	n := (end + size - start) % size
	lin := make([]uint32, 0, n)
	lin = append(lin, ring[start:min(start+n, size)]...)
	lin = append(lin, ring[:n-uint64(len(lin))]...)
	out := PM4Stream(lin)
	for i := range out {
		out[i].Offset = int((start + uint64(out[i].Offset)) % size)
	}
	return out
}
