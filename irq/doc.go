// Package irq holds the device's interrupt lines as the client programs them with
// DEVICE_SET_IRQS, and raises them by writing to the client's eventfds.
//
// # Data flow
//
// The device layer converts each vfiouser.SetIRQs into a Request and calls Controller.Set from
// the server's worker goroutine. Engines call TriggerMSIX, AssertINTx/DeassertINTx and
// RaiseError from their own goroutines. Raising an interrupt is an 8-byte little-endian 1
// written to the eventfd currently registered for it; QEMU hands these eventfds to KVM as
// irqfds, so the write injects the interrupt without QEMU's main loop. Register reads of the
// MSI-X PBA come to ReadPBA, trapped writes of a table entry's Vector Control to SetTableMask.
//
// Indexes: INTx (1 line), MSI (not offered: count 0, every request is EINVAL), MSI-X (the
// count given to New), ERR (1) and REQ (1; QEMU never uses it).
//
// # What QEMU 11.1.3 sends (observed)
//
// MSI-X, when the guest sets the MSI-X Enable bit: first INTx is torn down on index 0 (mask
// 0x09, unmask 0x11, then DATA_NONE|TRIGGER count 0 = 0x21, which disables it). Then on index
// 2, with NORESIZE advertised: DATA_EVENTFD|TRIGGER (0x24) start 0 count 1 with one fd;
// 0x21 count 0, disabling the whole index; 0x24 start 0 count N with N fds. QEMU repeats that
// tear-down and re-creation every time the guest starts using more vectors. Without NORESIZE:
// 0x24 start 0 count 1 with no fd (enable MSI-X with no vector), then one 0x24 per vector.
// Runs of vectors without an eventfd arrive as 0x24 with no fds at all, meaning "de-assign
// [start, start+count)"; large sets come in chunks of at most the server's max_msg_fds.
// MSI-X disable: per-vector 0x24 re-assignments, then 0x21 count 0, then INTx is set up again.
//
// Masking never reaches us as table writes or ACTION_MASK: QEMU keeps the MSI-X table and does
// the guest's per-vector masking and pending-bit bookkeeping itself (another client may use the
// device's trapped table instead: see SetTableMask below). When the guest masks a
// vector, QEMU swaps that vector's eventfd (0x24 start k count 1 with a new fd, one QEMU
// reads itself instead of KVM); on unmask it swaps back. Eventfds therefore change at any
// time and we always signal the one registered now; the old one is closed when replaced.
//
// INTx with KVM: a trigger eventfd (0x24 on index 0) and a resample eventfd given with
// ACTION_UNMASK|DATA_EVENTFD (0x14). KVM signals the resample eventfd when the guest EOIs the
// line; the device must then re-signal the trigger if it still asserts the line. DATA_NONE
// ACTION_MASK/UNMASK (0x09/0x11) are immediate mask/unmask commands. Without a resample
// eventfd (no KVM irqfd), QEMU's vfio PCI code treats the guest's next BAR access after an
// interrupt as the EOI and sends 0x11 (from QEMU's source; not observed here).
//
// # Semantics implemented
//
// MSI-X vector k is signalled at once when it has an eventfd and is masked neither by
// ACTION_MASK nor in the MSI-X table; otherwise its pending bit is set and it is delivered,
// clearing the bit, as soon as all three allow it (an unmask of either kind, a new eventfd). So
// an interrupt raised while QEMU re-creates the vector set (0x21 then 0x24) is not lost — as on
// hardware, where the PBA holds it. A 0x21 disable closes the index's eventfds but keeps
// pending bits and masks; only Reset clears them. DATA_NONE/DATA_BOOL with ACTION_TRIGGER
// trigger the selected vectors (loopback).
//
// The table's Mask Bits come from trapped writes of Vector Control (the device calls
// SetTableMask); reset sets every one (PCI power-on state). QEMU never writes the trapped table,
// so the bits count only from the first unmask written through the table until Close: a client
// that uses the table gets PCI semantics (including "reset masks everything"), QEMU, which
// masks by swapping eventfds, is unaffected.
//
// INTx is level-triggered over an edge-only eventfd: AssertINTx signals on the rising edge, and
// while the line stays asserted every resample signal, client unmask or trigger-fd assignment
// signals again. DeassertINTx signals nothing. We do not auto-mask after signalling: an extra
// signal for a line that is already asserted is harmless to QEMU/KVM, whereas waiting for an
// unmask that a client does not send would lose interrupts.
//
// Only eventfds are accepted (checked through /proc/self/fd; anything else makes SET_IRQS fail
// with EINVAL), and they are made non-blocking when registered, so a signal never waits for
// the client. A write that fails with EAGAIN (counter at its maximum) is counted as Saturated:
// the reader sees the counter non-zero, the interrupt is pending there anyway. Other write
// failures are counted as Dropped. Every log line a client or guest can cause (refused
// SET_IRQS, vectors out of range, saturated or failing eventfds) goes through a
// ratelog.Limiter (SetLimiter), and every such event is counted in Stats.
//
// # Threading
//
// One mutex guards all state. No eventfd is written under it: what to signal is decided under
// the lock, the write is made after it is released (send.go), so no client descriptor holds up
// the paths that need the lock. The os.File keeps its descriptor number alive while a write is
// in progress, so a write never reaches a recycled descriptor: it lands in the eventfd it was
// decided for, or finds it closed (replaced by SET_IRQS, or the client gone), and then an MSI-X
// interrupt follows its vector to the current eventfd or stays pending. Descriptors replaced or
// de-assigned by Set are closed after the lock is released. The INTx resample eventfd is watched by one goroutine, reading a
// non-blocking dup through the runtime poller; replacing it, disabling INTx or Close closes
// that dup (which wakes the reader) and waits for the goroutine to exit, outside the lock,
// because the goroutine itself takes the lock to re-signal.
//
// Ownership: Set takes the Request's Files on every path and closes them on error. Close
// closes every eventfd (client disconnect) but keeps device state; Reset keeps eventfds but
// clears pending bits, SET_IRQS masks and the INTx level, and masks every vector in the table
// (device reset).
//
// # Interrupt handler ring (IH)
//
// IH (ih.go) is the GPU's interrupt handler: engines report events as IVs and the IH delivers
// them to the driver through a ring in GPU memory, as AMD's IH does (docs/device.md "Interrupt
// handler ring"; registers REG_IH_*, entry layout IH_* in abi). It imports abi only; the device
// gives it an IHMemory (GPU addresses, VMID 0, through gpummu bypassing the L2) and a raise
// function (irq.Controller's MSI-X trigger), and routes the register block and the rptr
// doorbell (DoorbellRPTR, SetRPTR) to it.
//
// Ring contract. The driver programs IH_RB_BASE (256-byte aligned; low bits read as 0, the high
// half keeps 16 bits), IH_RB_CNTL.RB_SIZE (log2 dwords, clamped to 8..16 with a warning:
// 1 KiB..256 KiB, so byte offsets fit RB_WPTR.OFFSET [17:2]), optionally IH_RB_WPTR_ADDR with
// WPTR_WRITEBACK_ENABLE, then RB_ENABLE and ENABLE_INTR. For each IV the IH writes a 32-byte
// entry at base + wptr — DW0 client | source<<8 | ring id<<16 | (VMID & 0xF)<<24, DW1/DW2
// timestamp [31:0]/[47:32] (nanoseconds since NewIH or Reset, monotonic, wrapping at 48 bits),
// DW3 PASID (node 0), DW4-7 data — advances wptr (bytes, modulo the ring size), writes the
// RB_WPTR register value (offset | RB_OVERFLOW) as one little-endian dword to IH_RB_WPTR_ADDR,
// and raises IH_MSIX_VECTOR. The driver consumes entries up to wptr and writes IH_RB_RPTR
// (bytes, masked to the ring, dword granular) or rings the rptr doorbell; if entries remain
// (rptr != wptr) the vector is raised again (RPTR_REARM). The ring holds size/32 - 1 entries:
// it is full when one more entry would make wptr reach rptr. Then, without
// WPTR_OVERFLOW_ENABLE, new entries are dropped; with it the IH keeps writing over the oldest
// entries (wptr passes rptr) and sets RB_WPTR.RB_OVERFLOW until a write of WPTR_OVERFLOW_CLEAR
// (an action bit; it reads 0). Clearing RB_ENABLE drops entries not yet written and sets rptr
// and wptr to 0 (amdgpu zeroes both on disable; RB_WPTR is read-only here). IH_ENTRIES and
// IH_DROPPED count entries published and lost; Stats has more (write and writeback errors,
// overflows, raises, backpressure stalls). RB_CNTL reads back RB_SIZE = 8 after reset.
//
// Ordering and locking. The IH's mutex is never held across IHMemory.Write or raise: a memory
// write may be a vfio-user DMA message answered by QEMU's main loop while QEMU waits for our
// worker, which may be waiting for that mutex in ReadReg/WriteReg. Entries are published in
// order through a single writer role instead of per-entry tickets: Push encodes the entry and
// takes its timestamp under the lock, appending it to a FIFO backlog (bounded; a full backlog
// makes Push wait, like a CP stalling on the IH). Whichever Push finds no writer becomes the
// writer and loops: under the lock it reserves a run (as many backlog entries as fit
// contiguously before the ring end, and before rptr unless overflow is enabled — entries that
// cannot fit are dropped); without the lock it writes the run with one IHMemory.Write; under
// the lock it commits (advances wptr over the run) or, if the write failed, drops the run
// without moving wptr, so the next run lands in the same slots and the ring never shows a hole
// or an unwritten slot; then without the lock it writes wptr back and raises. So the driver
// sees entries before the wptr that covers them, in push order (per pushing goroutine and
// globally, with non-decreasing timestamps), and wptr writebacks happen in ring order. A ring moved
// (base, size or enable changed) while a run is being written does not publish that run (it
// is dropped); after Reset it is forgotten. Reset does not wait for a write in flight (it runs
// on the worker), so such a write may still land in the old ring. Memory and writeback
// failures are counted (Stats) and logged through a ratelog.Limiter (by default at most once a
// second per kind; IH.SetLimiter installs the device's).
package irq
