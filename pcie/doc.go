// Package pcie is the PCI Express configuration space of the vgpu function: a 4 KiB register
// file with the write semantics of real hardware, built from a Spec and driven by the
// device's config-region accesses (vfio-user region 7).
//
// # Why a real register model
//
// QEMU's vfio-user-pci client does not invent a config space for the device: at realize it
// reads all 4096 bytes in one REGION_READ and builds its view from them (IDs, BAR types,
// the capability chain, MSI-X geometry, Express and extended capabilities). After that it
// emulates some bits itself (BAR addresses, the ROM BAR, MSI/MSI-X control, the PM power
// state) but still forwards every guest config write to us, including firmware's BAR sizing
// writes of 0xffffffff, restore writes, and COMMAND writes. So the bytes returned must behave
// like hardware:
//
//   - Vendor, device, subsystem IDs, revision, class code, header type (0, single function),
//     capability pointers and IDs, and the Interrupt Pin (INTA) are read-only.
//   - COMMAND implements Memory Space, Bus Master, Parity Error Response, SERR# and
//     Interrupt Disable; I/O Space is hardwired 0 because there are no I/O BARs.
//   - STATUS reports the capability list; its error bits are write-1-to-clear.
//   - Each BAR reads 0 in the address bits below its size and keeps its type bits (memory,
//     32/64-bit, prefetchable) read-only, so writing all ones returns the size mask. The
//     upper slot of a 64-bit BAR is writable above the size. Absent BARs read 0.
//   - The Expansion ROM BAR reads 0 whatever is written. Echoing QEMU's ROM probe
//     (0xfffff800) would make it believe a ROM exists.
//   - Reserved and unimplemented registers read 0 and ignore writes.
//
// Writes are applied byte by byte through a write mask and a write-1-to-clear mask, so any
// access width and alignment (including one 4 KiB write) behaves as the per-register rules
// above. Accesses must be non-empty and lie inside the 4 KiB; others are refused with
// ErrAccess and change nothing.
//
// # Layout
//
// Header type 0, then the standard capability list at 0x40: Power Management (0x40,
// version 3, D0 and D3hot, No_Soft_Reset), MSI-X (0x50: table size, table and PBA
// BIR/offset from the Spec; Enable and Function Mask writable) and PCI Express (0x60,
// version 2, Endpoint: 256-byte max payload, Role-Based Error Reporting, FLR capable, a
// trained Gen3 x16 link without ASPM). The extended list at 0x100 holds the Resizable BAR
// capability when the Spec has one; otherwise the dword at 0x100 is 0, meaning "no extended
// capabilities".
//
// The Resizable BAR capability lists every power of two from the current size up to the
// maximum and reports the current size, read-only. QEMU rewrites this capability for the
// guest to advertise the current size alone and drops writes to its size field, because vfio
// cannot change a region's size after realize; the window size is a server flag instead.
//
// MSI-X vectors themselves are not here: QEMU emulates the table, so the device learns about
// vectors and masking from SET_IRQS, not from config space.
//
// # Side effects
//
// Hooks.Command is called when a write changes Memory Space or Bus Master, so the device can
// gate BAR access and DMA like hardware. Setting Initiate Function Level Reset in the Express
// Device Control register (the bit reads back 0) returns config space to its power-on state,
// then calls Hooks.Command if that cleared Memory Space or Bus Master, then Hooks.FLR, in
// which the device resets the rest of the function. Reset does the same state change for a
// device reset without calling hooks. Writing an unsupported power state (D1, D2) to PMCSR
// is discarded, as the PM specification requires; D3hot is recorded but not enforced.
//
// Dump renders the live register contents as lspci -vvv style text plus a hex dump; the
// golden test compares it for the layout vgpu serves.
//
// # Threading
//
// A Config does no I/O, starts no goroutines and has no locks. It is owned by the device's
// single worker goroutine (the one the vfio-user server calls in message order); hooks run
// on that goroutine, inside Write, and must not call Write or Reset.
package pcie
