package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"vgpu/decode"
	"vgpu/device"
)

// controlEnv names the control socket when --control is not given.
const controlEnv = "VGPU_CONTROL"

// status is `vgpu status`: it asks a running server's control socket for the device's state
// and prints it as text, or as JSON for scripts.
func status(args []string) error {
	fl := flag.NewFlagSet("status", flag.ContinueOnError)
	path := fl.String("control", os.Getenv(controlEnv), "the server's control socket (vgpu serve's ready line names it; default $"+controlEnv+")")
	asJSON := fl.Bool("json", false, "print the status as JSON (the control socket's \"status\" result)")
	ring := fl.Int("ring", -1, "instead, print the packets queue slot N has yet to execute (from its rptr), decoded; VMID-0 rings only")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	if *path == "" {
		return errors.New("--control is required (or set $" + controlEnv + ")")
	}
	if *ring >= 0 {
		return printRing(os.Stdout, *path, *ring, *asJSON)
	}
	return printStatus(os.Stdout, *path, *asJSON)
}

// printRing is `vgpu status --ring N`: the control socket's "ring" result, decoded.
func printRing(w io.Writer, path string, slot int, asJSON bool) error {
	var raw json.RawMessage
	if err := callControl(path, "ring", map[string]int{"slot": slot}, &raw); err != nil {
		return err
	}
	if asJSON {
		return printJSON(w, raw)
	}
	var r device.RingDump
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("ring: %w", err)
	}
	_, err := io.WriteString(w, ringText(&r))
	return err
}

// ringText renders a ring dump: a heading, then one line per packet at its ring offset.
func ringText(r *device.RingDump) string {
	var b strings.Builder
	fmt.Fprintf(&b, "slot %d: ring %#x (%d dwords), VMID %d, rptr %d wptr %d: %d dwords pending\n",
		r.Slot, r.Base, r.SizeDwords, r.VMID, r.Rptr, r.Wptr, len(r.Dwords))
	for _, p := range decode.PM4Stream(r.Dwords) {
		fmt.Fprintf(&b, "  %#06x: %s\n", (r.Start+uint64(p.Offset))%max(r.SizeDwords, 1), p.String())
	}
	if r.Truncated {
		fmt.Fprintf(&b, "  ... (more than %d dwords pending)\n", device.MaxRingDumpDwords)
	}
	return b.String()
}

func printStatus(w io.Writer, path string, asJSON bool) error {
	var raw json.RawMessage
	if err := callControl(path, "status", nil, &raw); err != nil {
		return err
	}
	if asJSON {
		return printJSON(w, raw)
	}
	var s device.Status
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	_, err := io.WriteString(w, s.Text(statusPacketDecoder))
	return err
}

// statusPacketDecoder renders the packet a stopped queue sits on with package decode's PM4
// decoder, then its raw dwords (the status holds at most cp.MaxStatusPacketDwords of them: a
// longer packet decodes as truncated).
func statusPacketDecoder(dws []uint32) string {
	p, _ := decode.PM4Packet(dws)
	raw := make([]string, len(dws))
	for i, d := range dws {
		raw[i] = fmt.Sprintf("%08x", d)
	}
	return p.String() + "\n" + strings.Join(raw, " ")
}
