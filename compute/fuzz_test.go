package compute

import (
	"testing"

	"vgpu/abi"
)

// FuzzUnmarshalSaved: a context save area is guest memory; any bytes decode into a Saved or
// an error, never a panic, and what decodes encodes back to the same bytes' meaning.
func FuzzUnmarshalSaved(f *testing.F) {
	it := SavedItem{PC: 1, Kind: abi.SHADER_ITEM_BARRIER, SleepNS: 5, Stack: make([]byte, 16)}
	it.Regs[10] = abi.SHADER_STACK_TOP
	f.Add((&Saved{Next: 2, Total: 4, GroupItems: 1, Stack: 16, Groups: []SavedGroup{{Index: 1, Items: []SavedItem{it}}}}).Marshal())
	f.Add((&Saved{Next: 0, Total: 1, GroupItems: 3, Stack: 0}).Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := UnmarshalSaved(b)
		if err != nil {
			return
		}
		again, err := UnmarshalSaved(s.Marshal())
		if err != nil {
			t.Fatalf("a decoded area does not decode after encoding: %v", err)
		}
		if again.Next != s.Next || again.Total != s.Total || len(again.Groups) != len(s.Groups) {
			t.Fatalf("round trip changed the state: %+v vs %+v", again, s)
		}
	})
}
