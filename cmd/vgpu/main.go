// Command vgpu is the virtual GPU's command line: `vgpu serve` runs the vfio-user server that
// QEMU's vfio-user-pci device attaches to.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

const usage = `usage: vgpu <command> [flags]

commands:
  run       boot guests against a virtual GPU and run the guest suites: KTAP (vgpu_test.ko) and DRM (vgpu_drm.ko + vgpu-drmtest) (the main job)
  serve     run the vfio-user server for one virtual GPU function
  status    print a running server's device state (queues, scheduler, faults, interrupts) from its control socket
  inject    add, list or clear fault-injection rules of a running server through its control socket (docs/inject.md)
  snapshot  save a running server's device state to a file (vgpu serve --restore FILE starts from it)
  timeline  draw a trace (--trace of run or serve) as one self-contained HTML page: vgpu timeline TRACE [-o OUT.html]
  decode    disassemble PM4 streams and rings, MES frames, IVs and eBPF shaders from a file (raw or hex) into text
  bench     measure the hot paths (vfio-user round trip from Go and from a C client built with gcc, doorbell → interrupt, register reads while 16 queues self-kick, CP, DMA_DATA) beside same-run baselines
  qemu      provision a QEMU with vfio-user-pci (>= 10.1) into the cache and print its path

Run 'vgpu <command> -h' for the command's flags.

environment (run, qemu):
  VGPU_CACHE                    cache folder (default $XDG_CACHE_HOME/vgpu or ~/.cache/vgpu)
  VGPU_DEBIAN_MIRROR            Debian archive to download from (default: the host's apt sources)
  VGPU_DEBIAN_SECURITY_MIRROR   Debian security archive, for the guest kernel (same default)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "run":
		err = run(args)
	case "serve":
		err = serve(args)
	case "status":
		err = status(args)
	case "inject":
		err = injectCmd(args)
	case "snapshot":
		err = snapshot(args)
	case "bench":
		err = runBench(args)
	case "qemu":
		err = provisionQEMU(args)
	case "decode":
		err = runDecode(args)
	case "timeline":
		err = timelineCmd(args)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "vgpu: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) && !errors.Is(err, errTestsFailed) {
		fmt.Fprintf(os.Stderr, "vgpu %s: %v\n", os.Args[1], err)
	}
	os.Exit(exitCode(err))
}

// exitCode is the process status for a command's result: 0 for success and for -h (the flag
// set printed the command's help, as asked), 1 for failed tests and for any other error.
func exitCode(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 1
}
