package decode

import (
	"fmt"
	"strings"

	"vgpu/abi"
)

// Field is one decoded field: AMD's name for it (lower case, as umr prints it), its raw value
// and the text it is shown as (a select by name, an address in hex, a register by name).
type Field struct {
	Name  string
	Value uint64
	Text  string
}

func (f Field) String() string { return f.Name + "=" + f.Text }

// names maps the values of one select to their abi names (without the group prefix).
type names map[uint64]string

// sel is a select field shown by name: "MEM(5)", or "7?" for a value with no name.
func sel(name string, v uint64, n names) Field {
	if s, ok := n[v]; ok {
		return Field{name, v, fmt.Sprintf("%s(%d)", s, v)}
	}
	return Field{name, v, fmt.Sprintf("%d?", v)}
}

func hex(name string, v uint64) Field { return Field{name, v, fmt.Sprintf("%#x", v)} }

func dec(name string, v uint64) Field { return Field{name, v, fmt.Sprintf("%d", v)} }

func flag(name string, on bool) Field {
	if on {
		return Field{name, 1, "1"}
	}
	return Field{name, 0, "0"}
}

// bits is a set of one-bit flags shown as their names joined by '|' ("0" when none is set).
func bits(name string, v uint64, flags []bitName) Field {
	var set []string
	rest := v
	for _, b := range flags {
		if v&b.mask != 0 {
			set = append(set, b.name)
			rest &^= b.mask
		}
	}
	if rest != 0 {
		set = append(set, fmt.Sprintf("%#x", rest))
	}
	if len(set) == 0 {
		return Field{name, v, "0"}
	}
	return Field{name, v, strings.Join(set, "|")}
}

type bitName struct {
	mask uint64
	name string
}

// reg is a register operand given as a dword offset into the register BAR, shown with its abi
// name when it has one.
func reg(name string, dword uint64) Field {
	if n, ok := regName(dword); ok {
		return Field{name, dword, fmt.Sprintf("%#x(%s)", dword, n)}
	}
	return hex(name, dword)
}

func regName(dword uint64) (string, bool) {
	if dword > 0xFFFFFFFF/4 {
		return "", false
	}
	n, ok := abi.RegisterNames[uint32(dword*4)]
	return n, ok
}

func field(v, mask, shift uint32) uint64 { return uint64(v & mask >> shift) }

func addr64(lo, hi uint32) uint64 { return uint64(hi)<<32 | uint64(lo) }

// maxListed bounds the values a list field shows (a SET_*_REG or WRITE_DATA can carry 16 K
// dwords): the text names how many more there are.
const maxListed = 32

// list shows dwords as [0x1 0x2 ...] with at most maxListed of them.
func list(name string, dws []uint32) Field {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range dws {
		if i == maxListed {
			fmt.Fprintf(&b, " ...%d more", len(dws)-i)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%#x", d)
	}
	b.WriteByte(']')
	return Field{name, uint64(len(dws)), b.String()}
}

// rawText is dwords in hex, at most maxListed of them (the raw form of a packet the decoder
// could not decode).
func rawText(dws []uint32) string { return list("", dws).Text }
