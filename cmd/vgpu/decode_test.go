package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
	"vgpu/decode"
	"vgpu/pm4"
	"vgpu/shader"
)

func rawDwords(dws []uint32) []byte {
	b := make([]byte, 4*len(dws))
	for i, d := range dws {
		binary.LittleEndian.PutUint32(b[4*i:], d)
	}
	return b
}

func hexDwords(dws []uint32) []byte {
	var b bytes.Buffer
	for i, d := range dws {
		if i%4 == 0 {
			fmt.Fprintf(&b, "%04x:", i)
		}
		fmt.Fprintf(&b, " 0x%08x", d)
		if i%4 == 3 {
			b.WriteByte('\n')
		}
	}
	b.WriteString("\n# end\n")
	return b.Bytes()
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecodeCommand(t *testing.T) {
	ib := append(append(pm4.WriteMem(0x1000, 1), pm4.Fence(0x2000, 3, 4, true)...), pm4.Packet(0x55, 0)...)
	ring := make([]uint32, 64)
	for i := range ring {
		ring[i] = pm4.Nop(1)[0]
	}
	copy(ring[60:], pm4.WriteMem(0x3000, 7)) // 5 dwords: wraps
	copy(ring, pm4.WriteMem(0x3000, 7)[4:])
	frame := make([]uint32, abi.MES_API_FRAME_DWORDS)
	frame[0] = abi.MES_API_TYPE_SCHEDULER | abi.MES_SCH_API_REMOVE_QUEUE<<abi.MES_API_HEADER_OPCODE__SHIFT | abi.MES_API_FRAME_DWORDS<<abi.MES_API_HEADER_DWSIZE__SHIFT
	frame[abi.MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET] = 0x30
	iv := []uint32{abi.IH_CLIENT_GRBM_CP | abi.IH_SRC_CP_EOP<<8 | 0x24<<16, 0x100, 0, 0, 0x77, 0, 0, 0}
	code, err := shader.Assemble(asm.Instructions{asm.Mov.Imm(asm.R1, 0), asm.FnMapLookupElem.Call(), asm.Return()})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		in   []byte // a file's contents
		want []string
	}{
		{"ib-raw", []string{"ib"}, rawDwords(ib), []string{"0x0000: WRITE_DATA count=3 dst_sel=MEM(5)", "\n0x0005: RELEASE_MEM count=6", "int_sel=IRQ_CONFIRM(2)", "\n0x000d: UNKNOWN_0x55 count=0 error=\"unknown opcode 0x55\""}},
		{"pm4-hex", []string{"pm4", "--hex"}, hexDwords(ib), []string{"0x0000: WRITE_DATA", "0x0005: RELEASE_MEM"}},
		{"ring-window", []string{"ring", "--rptr", "60", "--wptr", "1"}, rawDwords(ring), []string{"0x003c: WRITE_DATA count=3 dst_sel=MEM(5) wr_one_addr=0 wr_confirm=1 cache_policy=LRU(0) engine_sel=ME(0) addr=0x3000 data=[0x7]\n"}},
		{"ring-whole", []string{"ring", "--hex", "--rptr", "60"}, hexDwords(ring), []string{"0x003c: WRITE_DATA", "addr=0x3000 data=[0x7]\n0x0001: NOP count=16383\n"}},
		{"mes", []string{"mes"}, rawDwords(frame), []string{"0x0000: REMOVE_QUEUE doorbell_offset=0x30"}},
		{"iv", []string{"iv", "--hex"}, hexDwords(iv), []string{"0x0000: CP_EOP client_id=GRBM_CP(20) source_id=181 ring_id=0x24", "slot=3 src_data0=0x77"}},
		{"shader", []string{"shader"}, code, []string{"   0: b7 01 00 00 00 00 00 00 MovImm dst: r1 imm: 0\n", "   1: 85 00 00 00 01 00 00 00 Call SHADER_HELPER_GLOBAL_ID\n", "   2: 95"}},
		{"flags-first", []string{"--hex", "iv"}, hexDwords(iv), []string{"CP_EOP"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			args := append(c.args, writeFile(t, "in", c.in))
			if err := decodeTo(args, nil, &out); err != nil {
				t.Fatal(err)
			}
			s := out.String()
			at := 0
			for _, w := range c.want {
				i := strings.Index(s[at:], w)
				if i < 0 {
					t.Fatalf("%q not found (in order) in:\n%s", w, s)
				}
				at += i + len(w)
			}
		})
	}
}

func TestDecodeCommandStdin(t *testing.T) {
	var out bytes.Buffer
	if err := decodeTo([]string{"pm4", "--hex", "-"}, strings.NewReader("c0001000 0\n"), &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "0x0000: NOP count=0 payload_dwords=1\n" {
		t.Errorf("%q", out.String())
	}
}

func TestDecodeCommandErrors(t *testing.T) {
	big := writeFile(t, "big", make([]byte, 4*decodeMaxDwords+4))
	partial := writeFile(t, "partial", []byte{1, 2, 3})
	cases := []struct {
		name string
		args []string
		err  error
	}{
		{"help", []string{"-h"}, flag.ErrHelp},
		{"help-after-kind", []string{"pm4", "-h"}, flag.ErrHelp},
		{"no-kind", nil, errDecodeUsage},
		{"unknown-kind", []string{"gfx", partial}, errDecodeUsage},
		{"two-files", []string{"pm4", partial, partial}, errDecodeUsage},
		{"missing-file", []string{"pm4", filepath.Join(t.TempDir(), "none")}, os.ErrNotExist},
		{"too-large", []string{"pm4", big}, decode.ErrTooLarge},
		{"partial-dword", []string{"mes", partial}, decode.ErrBadInput},
		{"bad-hex", []string{"iv", "--hex", writeFile(t, "bad", []byte("0xzz\n"))}, decode.ErrBadInput},
		{"partial-shader", []string{"shader", partial}, decode.ErrTruncated},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := decodeTo(c.args, strings.NewReader(""), &out)
			if !errors.Is(err, c.err) {
				t.Errorf("error %v, want %v", err, c.err)
			}
		})
	}
}
