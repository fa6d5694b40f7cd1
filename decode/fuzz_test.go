package decode_test

import (
	"bytes"
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

// FuzzMESFrame: any dwords decode as frames without a panic, 64 dwords each.
func FuzzMESFrame(f *testing.F) {
	f.Add(bytesOf(newFrame(2).set(18, 8)[:]))
	f.Add(bytesOf(newFrame(14).set(1, 4)[:]))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		dws := dwordsOf(b)
		fs := decode.MESFrames(dws)
		for i, fr := range fs {
			if fr.Offset != 64*i || len(fr.Dwords) == 0 || len(fr.Dwords) > 64 {
				t.Fatalf("frame %d: offset %d, %d dwords", i, fr.Offset, len(fr.Dwords))
			}
			_ = fr.String()
		}
		_ = fs.String()
	})
}

// FuzzIV: any dwords decode as IV entries without a panic.
func FuzzIV(f *testing.F) {
	f.Add(bytesOf([]uint32{0x14 | 181<<8, 1, 2, 3, 4, 5, 6, 7}))
	f.Add(bytesOf([]uint32{0x0A, 0, 0, 0, 0x100, 0xA5, 3, 0x40840}))
	f.Fuzz(func(t *testing.T, b []byte) {
		es := decode.IVs(dwordsOf(b))
		for _, e := range es {
			_ = e.String()
		}
	})
}

// FuzzShader: any bytes decode as a program without a panic; the instructions cover the
// bytes in order.
func FuzzShader(f *testing.F) {
	f.Add([]byte{0x18, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xdb, 0x34, 8, 0, 0xa0, 0, 0, 0, 0x85, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, code []byte) {
		is, _ := decode.Shader(code)
		off := 0
		for _, in := range is {
			if in.Slot*8 != off || len(in.Raw) == 0 {
				t.Fatalf("instruction at byte %d has slot %d, %d bytes", off, in.Slot, len(in.Raw))
			}
			off += len(in.Raw)
			_ = in.String()
		}
		if off != min(len(code), decode.MaxShaderBytes) {
			t.Fatalf("instructions cover %d of %d bytes", off, len(code))
		}
		_ = is.String()
	})
}

// FuzzDwords: the input reader refuses or accepts any text and bytes without a panic, and
// never returns more than its bound.
func FuzzDwords(f *testing.F) {
	f.Add([]byte("0xc0023700 0x500\n0000: 1 2, 3 # comment\n"), true)
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, false)
	f.Fuzz(func(t *testing.T, in []byte, hex bool) {
		dws, err := decode.Dwords(bytes.NewReader(in), hex, 16)
		if err == nil && len(dws) > 16 {
			t.Fatalf("%d dwords over a bound of 16", len(dws))
		}
	})
}
