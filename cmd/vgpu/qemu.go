package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"vgpu/images"
)

// provisionQEMU makes sure a QEMU with vfio-user-pci is available (the system's when new
// enough, else the pinned Debian build in the cache) and prints how to run it.
func provisionQEMU(args []string) error {
	fl := flag.NewFlagSet("qemu", flag.ContinueOnError)
	noSystem := fl.Bool("no-system", false, "ignore a qemu-system-x86_64 in PATH; use the pinned Debian build")
	mirror := fl.String("debian-mirror", "", "Debian archive to download from (default: $"+images.MirrorEnv+", else the host's apt sources)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	inst, err := images.QEMU(ctx, images.QEMUOptions{Progress: os.Stderr, NoSystem: *noSystem, Mirror: *mirror})
	if err != nil {
		return err
	}
	cmd := inst.Command(ctx)
	fmt.Printf("QEMU %s (%s)\n%s\n", inst.Version(), map[bool]string{true: "system", false: "cached Debian build"}[inst.System], strings.Join(cmd.Args, " "))
	return nil
}
