package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"vgpu/decode"
)

const decodeUsage = `usage: vgpu decode pm4|ib|ring|mes|iv|shader [--hex] [--rptr N] [--wptr N] [FILE|-]
       vgpu decode ring --slot N [--control PATH]   (a running server's queue, from its rptr)

Disassembles the device's binary formats into text with AMD's field names (docs/decode.md):
  pm4, ib  a PM4 stream (an IB, or any packets in order), offsets from dword 0
  ring     a PM4 ring's dwords, decoded from --rptr to --wptr (wrapping; without --wptr the
           whole ring from --rptr)
  mes      MES API frames (64 dwords each)
  iv       IH ring entries (8 dwords each)
  shader   an eBPF shader program (8-byte slots)
Input is raw little-endian binary, or with --hex text of hex dwords (one or more a line,
0x optional; "OFFSET:" tokens and # comments are skipped). FILE - or none reads stdin.

flags:
`

// decodeMaxDwords bounds the input: an 8 MiB ring (the largest HQD ring) plus slack.
const decodeMaxDwords = 1 << 22

var errDecodeUsage = errors.New("usage: vgpu decode pm4|ib|ring|mes|iv|shader [--hex] [FILE|-]")

func runDecode(args []string) error { return decodeTo(args, os.Stdin, os.Stdout) }

// decodeTo is vgpu decode with its input and output given (tests).
func decodeTo(args []string, stdin io.Reader, stdout io.Writer) error {
	fl := flag.NewFlagSet("decode", flag.ContinueOnError)
	hex := fl.Bool("hex", false, "input is hex dwords as text, not raw little-endian binary")
	rptr := fl.Uint64("rptr", 0, "ring: the first dword to decode (the CP's read pointer, taken modulo the ring size)")
	wptr := fl.Int64("wptr", -1, "ring: the dword after the last to decode (the write pointer; -1: the whole ring from --rptr)")
	slot := fl.Int("slot", -1, "ring: decode HQD slot N's ring of a running server (its pending packets, from rptr) instead of a file")
	ctl := fl.String("control", os.Getenv(controlEnv), "with --slot: the server's control socket (default $"+controlEnv+")")
	fl.Usage = func() {
		fmt.Fprint(fl.Output(), decodeUsage)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() == 0 {
		fl.Usage()
		return errDecodeUsage
	}
	kind := fl.Arg(0)
	switch kind {
	case "pm4", "ib", "ring", "mes", "iv", "shader":
	default:
		return fmt.Errorf("%w (unknown format %q)", errDecodeUsage, kind)
	}
	if err := fl.Parse(fl.Args()[1:]); err != nil { // flags may also follow the kind
		return err
	}
	if fl.NArg() > 1 {
		return fmt.Errorf("%w (one input file, got %d)", errDecodeUsage, fl.NArg())
	}
	if *slot >= 0 {
		// From a running device: the control socket reads the ring (as vgpu status --ring).
		if kind != "ring" || fl.NArg() != 0 {
			return fmt.Errorf("%w (--slot decodes a running server's ring: vgpu decode ring --slot N)", errDecodeUsage)
		}
		if *ctl == "" {
			return errors.New("--control is required with --slot (or set $" + controlEnv + ")")
		}
		return printRing(stdout, *ctl, *slot, false)
	}
	in := stdin
	if name := fl.Arg(0); name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	if kind == "shader" && !*hex {
		// A program is bytes, not dwords: a partial last slot is the decoder's to show.
		code, err := io.ReadAll(io.LimitReader(in, decode.MaxShaderBytes+1))
		if err != nil {
			return err
		}
		return printShader(code, stdout)
	}
	dws, err := decode.Dwords(in, *hex, decodeMaxDwords)
	if err != nil {
		return err
	}
	var text fmt.Stringer
	switch kind {
	case "pm4", "ib":
		text = decode.PM4Stream(dws)
	case "ring":
		text = ringPackets(dws, *rptr, *wptr)
	case "mes":
		text = decode.MESFrames(dws)
	case "iv":
		text = decode.IVs(dws)
	case "shader":
		b := make([]byte, 4*len(dws))
		for i, d := range dws {
			binary.LittleEndian.PutUint32(b[4*i:], d)
		}
		return printShader(b, stdout)
	}
	_, err = io.WriteString(stdout, text.String())
	return err
}

// ringPackets decodes a ring from rptr to wptr, or (wptr < 0) all of it from rptr on.
func ringPackets(ring []uint32, rptr uint64, wptr int64) decode.Packets {
	if wptr >= 0 || len(ring) == 0 {
		return decode.PM4Ring(ring, rptr, uint64(max(wptr, 0)))
	}
	start := rptr % uint64(len(ring))
	ps := decode.PM4Stream(append(append([]uint32(nil), ring[start:]...), ring[:start]...))
	for i := range ps {
		ps[i].Offset = int((start + uint64(ps[i].Offset)) % uint64(len(ring)))
	}
	return ps
}

// printShader prints a program's listing; a program that did not decode in full is an error
// after the listing of what did.
func printShader(code []byte, stdout io.Writer) error {
	is, err := decode.Shader(code)
	if _, werr := io.WriteString(stdout, is.String()); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("shader: %w", err)
	}
	return nil
}
