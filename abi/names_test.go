package abi

import "testing"

func TestNameOf(t *testing.T) {
	tests := []struct {
		prefix string
		v      uint64
		want   string
	}{
		{"HQD_STATE_", HQD_STATE_HALTED, "HQD_STATE_HALTED"},
		{"L2_EVENT_", L2_EVENT_STALE_READ, "L2_EVENT_STALE_READ"},
		{"HQD_STATE_", 0xee, "HQD_STATE_0xee?"},
		{"NO_SUCH_", 1, "NO_SUCH_0x1?"},
	}
	for _, tc := range tests {
		if got := NameOf(tc.prefix, tc.v); got != tc.want {
			t.Errorf("NameOf(%q, %#x) = %q, want %q", tc.prefix, tc.v, got, tc.want)
		}
	}
}
