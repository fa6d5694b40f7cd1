// Package vfiouser is the vfio-user transport of vgpu: it serves one Device to one client (QEMU's
// vfio-user-pci) over a unix stream socket. It knows nothing of PCI or GPUs; regions, interrupts
// and DMA maps are passed to the Device as plain values.
//
// # Data flow
//
//	socket ─► Conn.ReadMessage (framing, SCM_RIGHTS fds)
//	       ─► reply (type 1)   ─► peer: completes the Peer request with that id
//	       ─► command (type 0) ─► handler: validate ─► Device method ─► reply via Conn.WriteMessage
//	Device's engines ─► Peer.DMARead/DMAWrite ─► DMA_READ/DMA_WRITE request ─► wait for its reply
//
// Conn reads ahead (several messages per recvmsg when the client pipelines) and still gives
// every descriptor to the right message: Linux ends a stream read right after the segment that
// carried descriptors, and senders attach them to the first bytes of their message, so they
// belong to the message holding the last byte of that read. Writes hold one mutex per message,
// loop on partial sends, and attach descriptors to the first chunk only; a small message
// without descriptors (every reply to a register access) is copied into one buffer and sent
// with one send(2), the rest with sendmsg(2) and iovecs.
//
// The server's socket is blocking and outside the runtime's poller (NewBlockingConn): the
// reader waits inside recvmsg, so a trapped access costs one recvmsg and one send, as in a C
// server, instead of a failed recvmsg, an epoll_wait and a scheduler round before the read that
// succeeds (and a wake-up of whichever thread sleeps in epoll_wait on every message). Sends try
// without blocking first and without the runtime's system call bookkeeping. Close shuts the
// socket down, which wakes a blocked reader or writer; the descriptor is closed when the last
// system call using it has returned, so its number cannot be reused under one.
//
// A thread blocked in recvmsg keeps its processor (P), and goroutines the reader just made
// runnable — the engine a doorbell write kicked, the caller a DMA reply completed — are queued
// on that processor: they would wait for the runtime's monitor to take it away (20 µs to 10 ms).
// So after any command but REGION_READ, and after every Peer reply, the next read first tries
// without blocking and, when it would block and some goroutine is runnable, yields first.
// Measured with a Go client in another process: a trapped register read −20%, doorbell →
// interrupt and DMA through the client unchanged or faster, posted writes unchanged.
//
// What is left of a trapped register read's cost above the C echo (bench's C client, both ends
// on one CPU; a 2-core Firecracker guest, kernel 6.18) is mostly not this package's code.
// Stand-in servers answering the same REGION_READ in the same runs, medians over the echo:
// single-threaded C with recv(2), +0 to +0.1 µs; a Go server that only frames and replies,
// with recvfrom, +0.8; the same with recvmsg(2), +1.2 to +1.3 (recvmsg costs 0.3–0.5 µs more
// than recv in C too, with or without a control buffer); this package with the device, +1.5.
// recvmsg cannot be avoided: SCM_RIGHTS descriptors are attached to the first bytes of their
// message and are discarded by any read without a control buffer, and nothing cheaper than a
// system call tells whether the next bytes carry some. So +1 µs is below what any Go server
// that reads with recvmsg measured on that machine.
//
// With the client in the server's own process (this package's benchmarks, bench) the poller
// design could run client, reader and engine goroutines on one thread without any OS wake-up,
// a shortcut no real client has: the Go client's register read measured ~8 µs in-process
// against ~15 µs from another process. Both ends now block in the kernel (vfiousertest uses
// NewBlockingConn too), so in-process figures are close to the other-process ones (~11 µs
// against ~12.5 µs): slower than the old in-process figures, faster than the old real ones.
//
// # Why the reader executes commands itself
//
// A round trip costs a handful of syscalls; on the machines vgpu runs on, handing each command
// from a reader goroutine to a worker goroutine (and each reply back to a waiting caller) added
// about a third to every trapped MMIO access, mostly in extra scheduler and netpoll work. So
// the goroutine that reads a command runs it too, and there is no hand-off on the hot path; it
// reads the next command into the same Message, and takes no lock but the session's own
// (twice) and the write mutex. Debug logging is decided once per connection.
//
// The danger of that is a command that cannot finish before a DMA reply is read (an unmap that
// waits for an engine's in-flight DMA; or a Device breaking the contract above). Two roles
// therefore move between goroutines: the reader role (exactly one goroutine reads the socket)
// and the executor role (exactly one runs commands). A reader that starts executing leaves the
// reader role vacant; whenever a Peer request is outstanding — already when the command starts,
// or registered while it runs — a helper goroutine takes the vacant role at once, so replies
// are always read. Commands the helper reads while the executor is busy queue behind it (at
// most commandQueueDepth, then reading pauses) and the executor runs them in order before it
// gives up the role; a reader whose wait for room outlasted the executor (it drained the queue
// and left) becomes the executor itself. When it is done, the executor takes the reader role
// back if it is still vacant, else it leaves. Without Peer traffic one goroutine does
// everything.
//
// # Errors
//
// Every malformed command gets a header-only error reply (flags reply|ERROR, positive errno):
// the errno a Device error wraps (syscall.Errno), else EINVAL; ENOSYS for commands we do not
// implement; EINVAL for DMA_READ/WRITE sent by the client. Error replies go out even for
// NO_REPLY commands (QEMU does the same for our posted requests, and a header-only reply cannot
// desynchronise its stream). Only a lost framing — a size below 16 or above MaxMessageSize, or
// a stream ending inside a message — ends the connection, as does a failed VERSION (nothing else
// may come before it). Nothing the client sends can panic the server.
//
// # Descriptors
//
// Every descriptor received is closed on every path unless it was handed over: the DMA_MAP fd
// (DMAMapping.File) and the SET_IRQS eventfds (SetIRQs.Files) belong to the Device once passed.
// If the Device returns an error, the server closes those files again (os.File.Close is
// idempotent, so a Device that closed them already is fine; one that keeps them must succeed).
// Region files stay the Device's: each GET_REGION_INFO reply of an mmap-able region carries a
// fresh dup, closed after sending. Commands that take no descriptors, or more than allowed
// (MSG_CTRUNC included), fail with EINVAL and their descriptors are closed.
//
// # Region info as QEMU wants it
//
// A region with sparse areas gets a SPARSE_MMAP capability (CAPS flag, cap_offset 32) only when
// the request's argsz has room for it; otherwise the reply is the 32-byte info without CAPS and
// with argsz set to the full size, and QEMU asks again (QEMU rejects CAPS with a cap_offset
// outside what it received). Every reply for an mmap-able region carries exactly one fd.
package vfiouser
