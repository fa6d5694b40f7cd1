// Package device assembles the GPU function: it builds the config space (pcie), the three
// apertures (bars), guest-memory access (dma), interrupt lines (irq) and the GPU core (l2,
// gpummu, irq.IH, cp), wires them together, and serves the result to the vfio-user transport
// as a vfiouser.Device. It is the only package that imports all of them.
//
// Data flow for a register write: vfiouser worker → Device.RegionWrite(region 5) →
// bars.RegisterFile → the owning block's handler (identity, scratch, self-test, the GPU
// blocks) → an engine goroutine (the self-test DMA, a CP queue, the L2's maintenance pass) →
// gpummu → l2 → dma.Space → guest memory; interrupts → irq.IH → Device.deliver →
// irq.Controller → the vector's eventfd → QEMU injects the MSI.
//
// Threading: every vfiouser.Device method runs on the transport's single worker goroutine.
// Work that touches guest memory runs on engine goroutines, never on the worker: with guest
// memory that is not shared, a DMA is a message QEMU answers from its main loop, and that loop
// may be blocked waiting for our reply to the very register write that started the work.
//
// Life cycle (lifecycle.go; docs/design.md states the contract): disconnect, DEVICE_RESET,
// FLR and Close each cut the device off from guest memory, stop every engine without waiting
// for a goroutine, wait (bounded) until no engine call-out from before the cut-off is in
// flight, then reset state under the register lock. DMA mappings survive a reset (QEMU keeps
// guest RAM mapped); they are dropped on client disconnect, with the interrupt eventfds. VRAM
// contents survive everything.
package device
