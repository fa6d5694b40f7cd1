package decode_test

import (
	"encoding/binary"
	"testing"

	"vgpu/decode"
	"vgpu/pm4"
)

func dwordsOf(b []byte) []uint32 {
	dws := make([]uint32, len(b)/4)
	for i := range dws {
		dws[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return dws
}

func bytesOf(dws []uint32) []byte {
	b := make([]byte, 4*len(dws))
	for i, d := range dws {
		binary.LittleEndian.PutUint32(b[4*i:], d)
	}
	return b
}

// FuzzPM4: any dwords decode without a panic; a stream's packets cover it exactly, in order;
// a ring decodes whatever its offsets.
func FuzzPM4(f *testing.F) {
	f.Add(bytesOf(pm4.WriteMem(0x100, 1, 2)), uint16(0), uint16(3))
	f.Add(bytesOf(append(pm4.Fence(0x200, 1, 2, true), pm4.Nop(1)...)), uint16(5), uint16(1))
	f.Add(bytesOf(pm4.SetShReg(0x240, 1, 2, 3)), uint16(1), uint16(0))
	f.Add(bytesOf([]uint32{0xC0FF5500, 0x00010000}), uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, rptr, wptr uint16) {
		dws := dwordsOf(b)
		ps := decode.PM4Stream(dws)
		off := 0
		for _, p := range ps {
			if p.Offset != off || p.Len() == 0 {
				t.Fatalf("packet at %d has offset %d, length %d", off, p.Offset, p.Len())
			}
			off += p.Len()
			_ = p.String()
		}
		if off != len(dws) {
			t.Fatalf("packets cover %d of %d dwords", off, len(dws))
		}
		rs := decode.PM4Ring(dws, uint64(rptr), uint64(wptr))
		_ = rs.String()
		if len(dws) == 0 && rs != nil {
			t.Fatal("packets from an empty ring")
		}
	})
}
