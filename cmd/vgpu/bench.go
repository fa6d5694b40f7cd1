package main

import (
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"vgpu/bars"
	"vgpu/bench"
)

// runBench measures the hot paths, each beside a baseline from the same run, and prints the
// ratios (absolute numbers on shared machines mean little).
func runBench(args []string) error {
	fl := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fl.Bool("quick", false, "skip the large copies and the idle measurement")
	if err := fl.Parse(args); err != nil {
		return err
	}
	scenarios := []func() (bench.Result, error){
		bench.RegionRead,
		func() (bench.Result, error) { return bench.DoorbellToInterrupt(bars.DoorbellTrap) },
		func() (bench.Result, error) { return bench.DoorbellToInterrupt(bars.DoorbellPoll) },
		bench.PacketRate,
	}
	sizes := []int{4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20}
	if *quick {
		sizes = sizes[:2]
	} else {
		scenarios = append(scenarios, func() (bench.Result, error) { return bench.IdleCPU(2 * time.Second) })
	}
	for _, size := range sizes {
		scenarios = append(scenarios, func() (bench.Result, error) { return bench.CopyBandwidth(size) })
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "measurement\tvalue\tbaseline (same run)\tratio\tnote")
	for i, s := range scenarios {
		fmt.Fprintf(os.Stderr, "\rmeasuring %d/%d", i+1, len(scenarios))
		r, err := s()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\t%.3g %s\t%s: %.3g %s\t%.2f×\t%s\n", r.Name, r.Value, r.Unit, r.Baseline, r.Base, r.Unit, r.Ratio(), r.Note)
	}
	fmt.Fprintln(os.Stderr)
	return w.Flush()
}
