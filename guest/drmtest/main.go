// Command vgpu-drmtest is the guest DRM suite of vgpu: a static userspace program (built with
// CGO_ENABLED=0) that drives vgpu_drm.ko through its render node — BOs, VA mappings, user
// queues it feeds itself (PM4 into its own ring, the wptr in memory, the mapped doorbell: no
// system call per job), syncobjs, the driver's kernel queue — and prints KTAP version 1 on
// stdout, with performance figures as "# perf <name> <value> <unit>" lines.
//
//	vgpu-drmtest [--tests a,b] [--iommu-mode off|on] [--inject-rules] [--list]
//
// --inject-rules says the device runs with the fault-injection rules of the inject cases
// (case_inject.go): vgpu run gives it only to the boot it starts with those rules; without it
// those cases skip ("needs injection").
// It exits 0 when it ran (failures are in the KTAP), 2 on a usage error. Cases that need
// other processes re-execute /proc/self/exe with --child.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"vgpu/guest/drmtest/ktap"
)

// options are the parsed command line.
type options struct {
	tests     []string // case names, in suite order
	iommuMode string
	list      bool
	child     string // --child MODE: run a helper process of a case
	childArgs []string
	caseLimit time.Duration
	injected  bool // --inject-rules
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("vgpu-drmtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tests := fs.String("tests", "", "comma-separated cases to run (default: all)")
	o := &options{}
	fs.StringVar(&o.iommuMode, "iommu-mode", "", "the guest's IOMMU mode (off, on), printed as a diagnostic")
	fs.BoolVar(&o.list, "list", false, "print the case names and exit")
	fs.BoolVar(&o.injected, "inject-rules", false, "the device runs with the inject cases' fault-injection rules (vgpu run's inject boots)")
	fs.StringVar(&o.child, "child", "", "internal: run a case's helper process")
	fs.DurationVar(&o.caseLimit, "case-timeout", 90*time.Second, "a case still running after this fails and ends the run")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.childArgs = fs.Args()
	if o.child == "" && len(o.childArgs) > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", o.childArgs)
	}
	sel, err := selectCases(*tests, caseNames())
	if err != nil {
		return nil, err
	}
	o.tests = sel
	return o, nil
}

// selectCases turns --tests into case names in suite order; an unknown name is an error.
func selectCases(list string, known []string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return known, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		found := false
		for _, k := range known {
			found = found || k == n
		}
		if !found {
			return nil, fmt.Errorf("unknown case %q (cases: %s)", n, strings.Join(known, ","))
		}
		want[n] = true
	}
	var out []string
	for _, k := range known {
		if want[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--tests %q names no case", list)
	}
	return out, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vgpu-drmtest:", err)
		os.Exit(2)
	}
	if o.child != "" {
		os.Exit(runChild(o.child, o.childArgs))
	}
	if o.list {
		fmt.Println(strings.Join(caseNames(), "\n"))
		return
	}
	injected = o.injected
	k := ktap.New(os.Stdout, len(o.tests))
	k.Diag("vgpu-drmtest: iommu-mode %s", orDash(o.iommuMode))
	runSuite(k, o)
	k.Diag("vgpu-drmtest: %d of %d cases failed", k.Failed(), len(o.tests))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
