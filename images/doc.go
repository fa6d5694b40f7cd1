// Package images provisions the third-party binaries vgpu runs against, starting with QEMU,
// into a per-user cache, from Debian's signed archive.
//
// # Why
//
// vgpu is a vfio-user server, and the only client that matters is QEMU's vfio-user-pci, which
// first shipped in QEMU 10.1. The hosts vgpu is developed and tested on run Debian 12, whose
// QEMU (7.2) does not have it. Debian 13's backports do (QEMU 11.1.3), and their binaries run on
// a bookworm host when started through trixie's own dynamic loader with trixie's libraries, with
// no installation and no root-owned changes to the host.
//
// # What is cached where
//
// The cache folder is $VGPU_CACHE, else $XDG_CACHE_HOME/vgpu, else ~/.cache/vgpu (CacheDir):
//
//	apt-<key>/              a private apt root per (mirror, suites): sources.list, apt.conf,
//	                        verified package lists; reused and refreshed by later runs
//	qemu-<key>/             the unpacked QEMU tree (usr/bin, usr/lib/x86_64-linux-gnu,
//	                        usr/share/qemu, usr/share/seabios) and the .vgpu-complete marker
//	qemu-<key>.lock         flock(2) taken while provisioning that tree
//	qemu-<key>.tmp-*        a tree being built; removed by the next provisioner if left over
//
// The key of a QEMU tree is a hash of the pinned package list (QEMUPackages), so changing a
// version in the table provisions a new tree next to the old one. A tree is built in a temporary
// folder, checked (the binary must start, report its version and list vfio-user-pci), marked
// complete, then renamed into place: a tree either exists complete or not at all, and an
// interrupted run is simply redone. Once a tree exists, QEMU() touches neither apt nor the
// network. Provisioning from an empty cache downloads about 27.5 MB and takes well under 30 s.
//
// # Which archive
//
// Packages come from the Debian archive the host's apt uses: the first Debian (not -security)
// entry of /etc/apt/sources.list, then of sources.list.d/*.list and *.sources in apt's order
// (HostMirror); the guest's bookworm-security packages from the host's "<release>-security"
// entry (HostSecurityMirror). $VGPU_DEBIAN_MIRROR and $VGPU_DEBIAN_SECURITY_MIRROR (or the
// Mirror options, the --debian-mirror flags of vgpu run and vgpu qemu) choose others. There is
// no built-in archive: with neither, provisioning fails with an error naming both. The archive
// is consulted only when something must be downloaded.
//
// A qemu-system-x86_64 in PATH is preferred when it is new enough (MinQEMU) and lists
// vfio-user-pci; QEMUOptions.NoSystem forces the pinned build.
//
// The Apt type is generic: other provisioners (guest kernels, headers, busybox from bookworm)
// use it with their own Sources and their own pinned lists.
//
// # Pitfalls this package works around
//
//   - A private apt root (Dir::Etc elsewhere) also moves the trusted key folder, so apt finds no
//     keys and rejects the archive. Each sources.list line therefore names
//     /usr/share/keyrings/debian-archive-keyring.gpg with signed-by; bookworm's keyring already
//     holds the trixie keys. Unsigned lists are an error, never trusted=yes.
//   - A private root ignores pin preferences, and a plain "apt-get download qemu-system-x86"
//     quietly takes the trixie version (10.0, no vfio-user-pci) instead of the backport. Every
//     download names its exact version (name=version).
//   - The host's apt.conf.d is still read (which keeps proxies working), including hooks that
//     would run appstream or PackageKit after an update and the DEP-11 metadata targets; the
//     private apt.conf clears those.
//   - As root, apt downloads as the _apt user, which cannot write below /root; the private root
//     runs with APT::Sandbox::User=root. The files are still checked against the signed lists.
//   - The provisioned binary must be started through usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
//     with --library-path (the host's glibc is too old), and then QEMU cannot find its firmware
//     from /proc/self/exe: Command passes -L usr/share/qemu and -L usr/share/seabios (without the
//     second, QEMU fails with "could not load PC BIOS 'bios-256k.bin'").
//   - The set is the ldd closure of the binary plus firmware (48 packages), not apt's full
//     dependency closure (90, with GTK and friends): no loadable modules (qemu-system-common) and
//     no NIC ROMs (ipxe-qemu), so VMs run headless with -nic none.
package images
