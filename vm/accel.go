package vm

import (
	"bufio"
	"os"
	"strings"
)

// DetectAccel picks the QEMU accelerator for this machine and says why. It returns "tcg" when
// the kvm_pvm module is loaded (the host is itself a PVM guest: its /dev/kvm opens fine but
// cannot run a stock kernel), when /dev/kvm is missing or not usable, or when the CPU flags have
// neither vmx nor svm; "kvm" otherwise. $VGPU_ACCEL=tcg|kvm overrides the detection.
func DetectAccel() (accel, reason string) {
	if a := os.Getenv("VGPU_ACCEL"); a == "tcg" || a == "kvm" {
		return a, "VGPU_ACCEL=" + a
	}
	return detectAccel("/sys/module/kvm_pvm", "/dev/kvm", "/proc/cpuinfo")
}

func detectAccel(pvmModule, kvmDev, cpuinfo string) (string, string) {
	if _, err := os.Stat(pvmModule); err == nil {
		return "tcg", "kvm_pvm is loaded: nested PVM cannot boot a stock guest kernel"
	}
	f, err := os.OpenFile(kvmDev, os.O_RDWR, 0)
	if err != nil {
		return "tcg", "no usable " + kvmDev + ": " + err.Error()
	}
	f.Close()
	ok, err := hasVirtFlag(cpuinfo)
	if err != nil {
		return "tcg", "cannot read " + cpuinfo + ": " + err.Error()
	}
	if !ok {
		return "tcg", "the CPU flags have neither vmx nor svm (nested virtualisation without hardware support)"
	}
	return "kvm", kvmDev + " is usable and the CPU has vmx/svm"
}

// hasVirtFlag tells whether any "flags" line of a cpuinfo file lists vmx or svm.
func hasVirtFlag(cpuinfo string) (bool, error) {
	f, err := os.Open(cpuinfo)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(k) != "flags" {
			continue
		}
		for _, fl := range strings.Fields(v) {
			if fl == "vmx" || fl == "svm" {
				return true, nil
			}
		}
	}
	return false, sc.Err()
}
