package vm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestBuildArgs(t *testing.T) {
	args, err := BuildArgs(Config{Accel: "tcg", MemoryMiB: 256, IOMMU: true, VfioUserSocket: "/run/x/gpu.sock",
		GPUProps:    map[string]any{"x-msg-timeout": 10000},
		SerialPorts: []SerialPort{{Name: "results", Path: "/run/x/res.sock"}},
		Kernel:      "/k/vmlinux", Initrd: "/k/initrd.gz", Append: "console=ttyS0 intel_iommu=on",
		Extra: []string{"-trace", "vfio_user_*"}}, "/run/x")
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(args, " ")
	t.Log(line)
	for _, want := range []string{
		"-machine q35,accel=tcg,memory-backend=mem,kernel-irqchip=split",
		"-object memory-backend-memfd,id=mem,size=256M,share=on -m 256M -smp 1",
		"-nographic -vga none -nic none -monitor none",
		"-serial file:/run/x/console.log",
		"-qmp unix:/run/x/qmp.sock,server=on,wait=off",
		"-no-reboot",
		"-kernel /k/vmlinux -initrd /k/initrd.gz -append console=ttyS0 intel_iommu=on -trace vfio_user_*",
		"-chardev socket,id=vport0,path=/run/x/res.sock -device virtserialport,bus=vser0.0,chardev=vport0,name=results",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("args lack %q", want)
		}
	}
	iommu := slices.Index(args, "intel-iommu,caching-mode=on")
	gpu := slices.IndexFunc(args, func(a string) bool { return strings.Contains(a, "vfio-user-pci") })
	ser := slices.Index(args, "virtio-serial-pci,id=vser0")
	if iommu < 0 || gpu < 0 || ser < 0 || !(iommu < gpu && gpu < ser) {
		t.Errorf("device order: iommu %d, gpu %d, serial %d", iommu, gpu, ser)
	}
	var dev map[string]any
	if err := json.Unmarshal([]byte(args[gpu]), &dev); err != nil {
		t.Fatalf("GPU device is not JSON: %s", args[gpu])
	}
	if dev["driver"] != "vfio-user-pci" || dev["id"] != GPUID || dev["x-msg-timeout"] != float64(10000) {
		t.Errorf("GPU device %v", dev)
	}
	if s, _ := dev["socket"].(map[string]any); s["type"] != "unix" || s["path"] != "/run/x/gpu.sock" {
		t.Errorf("GPU socket %v", dev["socket"])
	}

	plain, _ := BuildArgs(Config{Accel: "kvm", Reboot: true}, "/d")
	pl := strings.Join(plain, " ")
	if strings.Contains(pl, "iommu") || strings.Contains(pl, "kernel-irqchip") || strings.Contains(pl, "vfio-user") ||
		strings.Contains(pl, "-no-reboot") || strings.Contains(pl, "-kernel") || !strings.Contains(pl, "-cpu host") ||
		!strings.Contains(pl, "size=512M") {
		t.Errorf("plain args: %s", pl)
	}
	for _, bad := range []struct {
		cfg Config
		dir string
	}{
		{Config{Accel: "hvf"}, "/d"},
		{Config{Accel: "tcg"}, "/a,b"},
		{Config{Accel: "tcg", Initrd: "/i"}, "/d"},
		{Config{Accel: "tcg"}, "/" + strings.Repeat("x", 120)},
	} {
		if _, err := BuildArgs(bad.cfg, bad.dir); err == nil {
			t.Errorf("BuildArgs(%+v, %q) accepted", bad.cfg, bad.dir)
		}
	}
}

func TestDetectAccel(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	vmx := write("cpuinfo-vmx", "processor\t: 0\nflags\t\t: fpu vme de pse vmx sse\n")
	novmx := write("cpuinfo-plain", "processor\t: 0\nflags\t\t: fpu vme de pse sse hypervisor\n")
	dev := write("kvm", "") // stands in for /dev/kvm: openable read-write
	pvm := filepath.Join(dir, "kvm_pvm")
	os.Mkdir(pvm, 0o755)
	none := filepath.Join(dir, "absent")
	for _, c := range []struct {
		pvm, dev, cpu, want string
	}{
		{pvm, dev, vmx, "tcg"},
		{none, none, vmx, "tcg"},
		{none, dev, novmx, "tcg"},
		{none, dev, vmx, "kvm"},
		{none, dev, none, "tcg"},
	} {
		got, why := detectAccel(c.pvm, c.dev, c.cpu)
		if got != c.want {
			t.Errorf("detectAccel(%s, %s, %s) = %s (%s), want %s", filepath.Base(c.pvm), filepath.Base(c.dev), filepath.Base(c.cpu), got, why, c.want)
		}
	}
	a, why := DetectAccel()
	t.Logf("this machine: %s (%s)", a, why)
}

func TestParsePCI(t *testing.T) {
	// Trimmed query-pci output of a q35 with a root port and a device behind it.
	raw := `[{"bus":0,"devices":[
	 {"bus":0,"slot":0,"function":0,"class_info":{"desc":"Host bridge","class":1536},"id":{"device":10688,"vendor":32902,"subsystem":4352,"subsystem-vendor":6900},"qdev_id":"","regions":[]},
	 {"bus":0,"slot":1,"function":0,"class_info":{"class":1540},"id":{"device":12,"vendor":6966},"qdev_id":"rp1","irq_pin":1,"regions":[{"bar":0,"type":"memory","address":4273934336,"size":4096,"prefetch":false,"mem_type_64":false}],
	  "pci_bridge":{"bus":{"number":1,"secondary":1,"subordinate":1},"devices":[
	   {"bus":1,"slot":0,"function":0,"class_info":{"desc":"Display controller","class":896},"id":{"device":4336,"vendor":6900},"qdev_id":"gpu0","irq_pin":1,
	    "regions":[{"bar":0,"type":"memory","address":-1,"size":268435456,"prefetch":true,"mem_type_64":true},{"bar":4,"type":"io","address":49152,"size":256}]}]}}]}]`
	devs, err := ParsePCI(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 3 {
		t.Fatalf("%d devices: %+v", len(devs), devs)
	}
	if d := devs[0]; d.Vendor != 0x8086 || d.Device != 0x29c0 || d.Class != 0x0600 || d.String() != "00:00.0 8086:29c0 class 0600 Host bridge" {
		t.Errorf("host bridge %+v", d)
	}
	g, ok := FindPCI(devs, 0x1af4, 0x10f0)
	if !ok || g.BDF() != "01:00.0" || g.QdevID != "gpu0" || g.Class != 0x0380 {
		t.Fatalf("gpu %+v", g)
	}
	b0, _ := g.BAR(0)
	if b0.Type != "mem" || !b0.Mem64 || !b0.Prefetch || b0.Address != Unassigned || b0.Size != 256<<20 {
		t.Errorf("BAR0 %+v", b0)
	}
	b4, _ := g.BAR(4)
	if b4.Type != "io" || b4.Address != 0xc000 || b4.Size != 256 {
		t.Errorf("BAR4 %+v", b4)
	}
}
