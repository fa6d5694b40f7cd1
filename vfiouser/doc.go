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
// The server's socket is blocking and outside the runtime's poller (NewBlockingConn), so a
// trapped access costs the system calls a C server would make, not a failed recvmsg, an
// epoll_wait and a scheduler round before the read that succeeds (and a wake-up of whichever
// thread sleeps in epoll_wait on every message). The reader waits in poll(2) for POLLIN and
// then reads without waiting, rather than sleeping inside recvmsg: a thread asleep in recvmsg
// is on the socket's wait queue without a filter, so it is also woken each time the client
// reads one of our replies (the write space that gives back), and with client and server on
// one CPU the scheduler often ran it at once, for nothing (two context switches), and then
// never saw the client's request arrive as a wake-up that could run the server before the
// client slept. After a posted command (NO_REPLY) nothing of ours is left for the client to
// read, and the reader sleeps in recvmsg itself. Sends try without blocking first and without
// the runtime's system call bookkeeping. Close shuts the socket down, which wakes a blocked
// reader or writer; the descriptor is closed when the last system call using it has returned,
// so its number cannot be reused under one.
//
// A thread blocked in the socket keeps its processor (P), and goroutines the reader just made
// runnable — the engine a doorbell write kicked, the caller a DMA reply completed — are queued
// on that processor: they would wait for the runtime's monitor to take it away (20 µs to 10 ms).
// So after any command but REGION_READ, and after every Peer reply, the next read first tries
// without blocking and, when it would block and some goroutine is runnable, yields first.
//
// A plain 4- or 8-byte REGION_READ (fastread.go) is answered without the general dispatch:
// the same checks and Device call, its own reply buffer, one send. On one CPU each instruction
// between reading a request and sending the reply counts about twice: the client, woken by the
// write space our read gave back, is runnable all that time, and the longer the server runs
// the more often the scheduler lets the client run, find nothing and sleep again.
//
// Measured with bench's C client, both ends on one CPU of a 2-core guest (kernel 6.18, load
// average 5-9 from other work), alternating with the previous transport (blocking recvmsg,
// general dispatch): a trapped register read costs the C echo +0.83, +0.12, +0.93 and -0.14 µs
// (the previous one +1.56, +0.27, +1.79, +0.92 in the same runs). The echo is the C client's
// own forked child, sharing its code pages: in 12 alternating runs of a stand-in client, a
// separate C server binary answering the same request measured +0.24 µs over it (medians) on a
// socketpair and +0.43 µs listening on a path, as we do. What is left is mostly the
// scheduler's: the C client sleeps in recv and is woken when the server reads its request
// (write space again); how often the scheduler then runs it at once depends on how long the
// server runs. The C client prints each side's context switches, which show it.
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
