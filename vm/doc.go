// Package vm starts QEMU virtual machines for vgpu: the tests that attach a vfio-user device,
// and later `vgpu run`.
//
// Start builds the command line from a Config (BuildArgs), starts the QEMU that images.QEMU
// provides, waits for QMP and connects with github.com/digitalocean/go-qemu. The VM's folder
// holds everything worth keeping as an artefact (Logs): console.log (the guest's ttyS0),
// stdout.log, stderr.log, qmp-events.log and cmdline.txt, plus the qmp.sock socket.
//
// The machine is a q35 with one vCPU, no display, no NIC and no HMP monitor. Guest RAM is a
// shared memfd (memory-backend-memfd,share=on, used as -machine memory-backend), so that the
// vfio-user server receives a file descriptor with each DMA_MAP and can map guest memory; with
// plain -m RAM the maps arrive without fds. The GPU is attached as vfio-user-pci with id GPUID.
//
// # Pitfalls
//
//   - Accelerator: on these hosts /dev/kvm is nested PVM (module kvm_pvm): it opens fine, but a
//     stock kernel runs tens of times slower than under TCG and dies on instructions PVM cannot
//     emulate. DetectAccel chooses tcg there, and also when /dev/kvm is missing or the CPU has
//     no vmx/svm. "-accel kvm -accel tcg" is no fallback: KVM opens, then hangs.
//   - vfio-user-pci takes its socket only as a QAPI object, so the device is written in JSON
//     (-device '{"driver":"vfio-user-pci","socket":{"type":"unix","path":...}}'); the
//     key=value forms are rejected. Booleans in GPUProps must be JSON booleans.
//   - The vfio-user server must be listening before Start; otherwise QEMU exits at once with
//     "Failed to connect", which Start reports with QEMU's stderr.
//   - With IOMMU, intel-iommu must precede the GPU on the command line and the machine needs
//     kernel-irqchip=split; the guest needs intel_iommu=on.
//   - A virtio-serial controller placed before the GPU would take slot 00:01.0; the GPU comes
//     first. Serial port sockets are client sockets: listen before Start.
//   - -no-reboot (the default) turns a guest reboot or a panic=-1 into process exit, but QEMU
//     also treats QMP system_reset as a shutdown then, and SeaBIOS resets the machine once more
//     by itself after any reset (it finds its shadow copy initialised). SystemReset switches the
//     reboot action to reset around the reset and waits for that firmware reset.
//   - With no kernel, SeaBIOS tries disk, CD and floppy, prints "No bootable device." and waits
//     forever (-boot reboot-timeout=-1): enough for attach tests.
//   - go-qemu's QMP calls have no timeouts; Run bounds each one (Config.QMPTimeout) and closes
//     the connection on expiry. go-qemu reads replies with a 64 KiB line limit, so avoid
//     commands with huge replies (query-qmp-schema). Start's context bounds the whole life of
//     the QEMU process; QEMU also gets SIGKILL (Pdeathsig) when the thread that started it ends,
//     which in practice means when the Go process dies.
package vm
