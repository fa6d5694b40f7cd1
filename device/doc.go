// Package device assembles the GPU function: it builds the config space (pcie), the three
// apertures (bars), guest-memory access (dma) and interrupt lines (irq), wires them together,
// and serves the result to the vfio-user transport as a vfiouser.Device. It is the only package
// that imports all of them.
//
// Data flow for a register write: vfiouser worker → Device.RegionWrite(region 5) →
// bars.RegisterFile → the owning block's handler (identity, scratch, self-test) → an engine
// goroutine (the self-test DMA today; the command processor later) → dma.Space → guest memory →
// irq.Controller → the vector's eventfd → QEMU injects the MSI.
//
// Threading: every vfiouser.Device method runs on the transport's single worker goroutine.
// Work that touches guest memory runs on engine goroutines, never on the worker: with guest
// memory that is not shared, a DMA is a message QEMU answers from its main loop, and that loop
// may be blocked waiting for our reply to the very register write that started the work.
//
// Reset: DEVICE_RESET and FLR go through one function, reset, which stops engines (their
// results are discarded by generation), then clears doorbells, registers, interrupt state and
// config space, in that order. DMA mappings survive a reset (QEMU keeps guest RAM mapped);
// they are dropped on client disconnect, with the interrupt eventfds.
package device
