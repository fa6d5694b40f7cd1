package ci

import (
	"context"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/vm"
)

// TestQEMUAttach attaches a stock QEMU to `vgpu serve` (no guest OS: SeaBIOS enumerates the
// device and assigns its BARs), checks what QEMU sees over QMP, resets the VM, quits, and
// attaches a second QEMU to the same server — without and with an emulated VT-d.
func TestQEMUAttach(t *testing.T) {
	inst := needQEMU(t)
	for _, tc := range []struct {
		name  string
		iommu bool
	}{{"no-iommu", false}, {"intel-iommu", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			srv := startServer(t, dir, "--vram", "1G", "--bar-window", "256M")
			for attach := 1; attach <= 2; attach++ {
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				v, err := vm.Start(ctx, inst, vm.Config{MemoryMiB: 256, IOMMU: tc.iommu, VfioUserSocket: srv.socket, Log: testWriter{t}}, t.TempDir())
				if err != nil {
					cancel()
					t.Fatalf("attach %d: %v", attach, err)
				}
				srv.waitLog("client connected", attach, 30*time.Second)
				checkPCI(t, v)
				if attach == 1 {
					before := srv.count("device reset", "DEVICE_RESET")
					if err := v.SystemReset(); err != nil {
						t.Fatalf("system_reset: %v", err)
					}
					srv.waitLog("device reset", before+1, 30*time.Second, "DEVICE_RESET")
					checkPCI(t, v) // firmware enumerates the device again after the reset
				}
				if err := v.Quit(); err != nil {
					t.Fatalf("quit: %v", err)
				}
				if err := v.Wait(ctx); err != nil {
					t.Fatalf("QEMU exit: %v", err)
				}
				cancel()
				srv.waitLog("vfio-user: client", attach, 30*time.Second, "disconnected")
				t.Logf("attach %d: %v", attach, time.Since(start).Round(time.Millisecond))
			}
			srv.stop()
		})
	}
}

// checkPCI asserts the guest-visible identity and BARs, as query-pci reports them. SeaBIOS
// assigns BARs asynchronously to QMP, so it polls until the BARs are placed.
func checkPCI(t *testing.T, v *vm.VM) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		devs, err := v.QueryPCI()
		if err != nil {
			t.Fatalf("query-pci: %v", err)
		}
		d, ok := vm.FindPCI(devs, abi.PCI_VENDOR_ID, abi.PCI_DEVICE_ID)
		if !ok {
			t.Fatalf("query-pci does not list %04x:%04x: %v", abi.PCI_VENDOR_ID, abi.PCI_DEVICE_ID, devs)
		}
		if d.Class != abi.PCI_CLASS_CODE>>8 || d.SubsystemVendor != abi.PCI_SUBSYSTEM_VENDOR_ID || d.Subsystem != abi.PCI_SUBSYSTEM_ID {
			t.Fatalf("device %v: class %#04x subsystem %04x:%04x", d, d.Class, d.SubsystemVendor, d.Subsystem)
		}
		want := []vm.PCIBAR{
			{Index: abi.BAR_VRAM, Type: "mem", Mem64: true, Prefetch: true, Size: 256 << 20},
			{Index: abi.BAR_DOORBELL, Type: "mem", Mem64: true, Size: abi.DOORBELL_SIZE},
			{Index: abi.BAR_REGS, Type: "mem", Size: abi.REGS_SIZE},
		}
		placed := true
		for _, w := range want {
			got, ok := d.BAR(w.Index)
			if !ok {
				t.Fatalf("BAR%d missing: %+v", w.Index, d.BARs)
			}
			if got.Type != w.Type || got.Mem64 != w.Mem64 || got.Prefetch != w.Prefetch || got.Size != w.Size {
				t.Fatalf("BAR%d = %+v, want %+v", w.Index, got, w)
			}
			placed = placed && got.Address != vm.Unassigned && got.Address != 0
		}
		if len(d.BARs) != len(want) {
			t.Fatalf("BARs = %+v, want exactly %d", d.BARs, len(want))
		}
		if placed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("firmware did not place every BAR within 60 s: %+v", d.BARs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
