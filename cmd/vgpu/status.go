package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"vgpu/control"
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
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	if *path == "" {
		return errors.New("--control is required (or set $" + controlEnv + ")")
	}
	return printStatus(os.Stdout, *path, *asJSON)
}

func printStatus(w io.Writer, path string, asJSON bool) error {
	c, err := control.Dial(path)
	if err != nil {
		return err
	}
	defer c.Close()
	var raw json.RawMessage
	if err := c.Call("status", nil, &raw); err != nil {
		return err
	}
	if asJSON {
		var b bytes.Buffer
		if err := json.Indent(&b, raw, "", "  "); err != nil {
			return err
		}
		b.WriteByte('\n')
		_, err := w.Write(b.Bytes())
		return err
	}
	var s device.Status
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	_, err = io.WriteString(w, s.Text(statusPacketDecoder))
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
