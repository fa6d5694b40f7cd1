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
// ratios (absolute numbers on shared machines mean little). Any scenario that cannot set up
// its device or its baseline, or whose results check wrong, ends the run with its reason (the
// C client's figure needs gcc: the client is built at bench time).
func runBench(args []string) error {
	bench.ServeIfChild() // the load scenario re-executes us as its device server
	fl := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fl.Bool("quick", false, "skip the large copies, the idle measurement and the load figure")
	if err := fl.Parse(args); err != nil {
		return err
	}
	scenarios := []func() ([]bench.Result, error){
		one(bench.RegionRead().Run),
		one(bench.CClientRegionRead),
		one(bench.DoorbellIRQ(bars.DoorbellTrap).Run),
		one(bench.DoorbellIRQ(bars.DoorbellPoll).Run),
		one(bench.PacketRate().Run),
		one(bench.TracePacketRate), one(bench.TraceDoorbellIRQ),
		one(bench.PacketRateVMIDs().Run),
		one(bench.PacketRateProcessVMID().Run),
		one(bench.TranslateTLBHit().Run),
		one(bench.TranslateWalk().Run),
	}
	sizes := []int{4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20}
	if *quick {
		sizes = sizes[:2]
	} else {
		scenarios = append(scenarios,
			func() ([]bench.Result, error) { return bench.RegionReadUnderLoad(2000, 3*time.Second) },
			one(func() (bench.Result, error) { return bench.IdleCPU(2 * time.Second) }))
	}
	for _, size := range sizes {
		scenarios = append(scenarios, one(bench.Copy(size).Run))
	}
	scenarios = append(scenarios, one(bench.ShaderALU().Run), one(bench.ShaderVectorAdd().Run),
		one(bench.ShaderScaling().Run))
	// The MES figures last: the oversubscription one fails the run if any queue completed
	// nothing in a window, and the others should be measured first.
	scenarios = append(scenarios,
		one(func() (bench.Result, error) { return bench.MESSwitch(5) }),
		one(func() (bench.Result, error) { return bench.ShaderPreemptLatency(21) }),
		func() ([]bench.Result, error) { return bench.MESPriorityLatency(100, mesRounds(*quick)) },
		func() ([]bench.Result, error) { return bench.MESOversubscription(time.Second, mesRounds(*quick)) })
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "measurement\tvalue\tbaseline (same run)\tratio\tnote")
	for i, s := range scenarios {
		fmt.Fprintf(os.Stderr, "\rmeasuring %d/%d", i+1, len(scenarios))
		rs, err := s()
		if err != nil {
			fmt.Fprintln(os.Stderr)
			w.Flush()
			return err
		}
		for _, r := range rs {
			if !(r.Value > 0) {
				fmt.Fprintln(os.Stderr)
				w.Flush()
				return fmt.Errorf("%s measured %v %s", r.Name, r.Value, r.Unit)
			}
			ratio := fmt.Sprintf("%.2f×", r.Ratio())
			if r.Base == 0 {
				ratio = "— (baseline 0)"
			}
			fmt.Fprintf(w, "%s\t%.3g %s\t%s: %.3g %s\t%s\t%s\n", r.Name, r.Value, r.Unit, r.Baseline, r.Base, r.Unit, ratio, r.Note)
		}
	}
	fmt.Fprintln(os.Stderr)
	return w.Flush()
}

// mesRounds is how many rounds the MES figures alternate (each a second or so).
func mesRounds(quick bool) int {
	if quick {
		return 1
	}
	return 3
}

// one adapts a single-result measurement.
func one(f func() (bench.Result, error)) func() ([]bench.Result, error) {
	return func() ([]bench.Result, error) {
		r, err := f()
		return []bench.Result{r}, err
	}
}
