package decode_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"vgpu/decode"
)

func TestDwords(t *testing.T) {
	cases := []struct {
		name string
		in   string
		hex  bool
		want []uint32
		err  error
	}{
		{"raw", "\x01\x00\x00\xc0\xff\xff\xff\xff", false, []uint32{0xC0000001, 0xFFFFFFFF}, nil},
		{"raw-partial", "\x01\x00\x00", false, nil, decode.ErrBadInput},
		{"raw-too-large", strings.Repeat("\x00", 4*5), false, nil, decode.ErrTooLarge},
		{"hex", "0xc0023700 500\n\n  0X10,0x20\r\n", true, []uint32{0xC0023700, 0x500, 0x10, 0x20}, nil},
		{"hex-offsets-comments", "0x0000: c0001000 1 # a NOP\n// nothing\n0004: 2 // tail\n", true, []uint32{0xC0001000, 1, 2}, nil},
		{"hex-bad", "12 zz\n", true, nil, decode.ErrBadInput},
		{"hex-wide", "100000000\n", true, nil, decode.ErrBadInput},
		{"hex-bare-prefix", "0x\n", true, nil, decode.ErrBadInput},
		{"hex-too-large", "1 2 3 4 5\n", true, nil, decode.ErrTooLarge},
		{"hex-long-line", strings.Repeat(" ", 2<<20), true, nil, decode.ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decode.Dwords(bytes.NewReader([]byte(c.in)), c.hex, 4)
			if !errors.Is(err, c.err) || c.err == nil && !slices.Equal(got, c.want) {
				t.Errorf("got %#x, %v; want %#x, %v", got, err, c.want, c.err)
			}
		})
	}
}
