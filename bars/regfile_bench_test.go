package bars

import "testing"

// BenchmarkRegisterRead is the register file's own part of a trapped read (the claim lookup,
// the handler, the spin detector), without the transport around it: a driver polling one
// register, the access pattern the spin detector watches.
func BenchmarkRegisterRead(b *testing.B) {
	var v uint32
	f, err := NewRegisterFile(0x1000, Claim{Name: "R", Offset: 0, Size: 0x100, Read: func(off uint32) uint32 { return v }})
	if err != nil {
		b.Fatal(err)
	}
	var p [4]byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		v = uint32(i >> 4) // changes every 16 reads, as a register a driver waits on may
		f.Read(0x40, p[:])
	}
}
