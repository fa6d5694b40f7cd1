package cp

import (
	"testing"

	"vgpu/trace"
)

// TestTraceSlots: the recorder has a track for every HQD slot.
func TestTraceSlots(t *testing.T) {
	if trace.HQDSlots != NumSlots {
		t.Fatalf("trace.HQDSlots = %d, cp.NumSlots = %d", trace.HQDSlots, NumSlots)
	}
}

// TestOpNames: the packet slices are named by opcode.
func TestOpNames(t *testing.T) {
	opNamesOnce.Do(makeOpNames)
	for op, want := range map[uint32]string{0x37: "WRITE_DATA", 0x49: "RELEASE_MEM", 0x3C: "WAIT_REG_MEM"} {
		if opNames[op] != want {
			t.Errorf("opcode %#x named %q, want %q", op, opNames[op], want)
		}
	}
}
