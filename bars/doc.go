// Package bars implements the device's three PCI apertures as the server sees them:
//
//   - RegisterFile: the trapped register BAR. Each part of the device claims a dword range and
//     supplies read/write handlers; construction fails when two claims overlap, so an address
//     always has exactly one owner. Accesses nobody claimed are counted per offset for the
//     diagnostic report and otherwise behave like an empty bus (reads 0, writes dropped): a
//     driver poking the wrong register is a finding, not a crash.
//   - VRAM: a memfd of the full VRAM size (sparse until touched). QEMU mmaps the first
//     `window` bytes as BAR0, so guest CPU accesses never reach the server; the engines see the
//     whole memfd. VRAM beyond the window is GPU-only, as on a card without resizable BAR.
//     Its contents survive device resets, as on hardware (docs/device.md): nothing here clears it.
//   - Doorbells: 64-bit doorbells, DOORBELL_PER_PAGE per page, in one of two modes. In trap mode
//     the BAR is not mmapped and each write arrives as a REGION_WRITE. In poll mode the BAR is a
//     memfd that QEMU maps into the guest, and a poller goroutine scans it for changed values,
//     spinning briefly after activity and backing off to long sleeps while idle, because QEMU
//     11.1 offers no ioeventfd path to tell us of a write.
//
// Every memfd handed to a client (VRAM, the poll-mode doorbells) is sealed against shrinking
// and growing (F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL): the client holds the same file, and a
// truncation would make the server's next access to the lost pages a SIGBUS. Writes stay
// possible, since QEMU maps the files shared.
//
// Threading: RegisterFile handlers run on the caller's goroutine (the vfio-user worker).
// Its Read, Write and Spins must not run concurrently (the device serialises them under its
// register lock): the spin detector on the read path (spin.go) has no lock of its own.
// VRAM's byte slice may be used from any goroutine; Doorbells' ring callback runs on the
// caller's goroutine in trap mode and on the poller goroutine in poll mode. Doorbells.Reset runs
// on the vfio-user worker and never waits for the poller; the poller notices the reset through a
// generation count and compares against the zeroed page from then on (see scan).
package bars
