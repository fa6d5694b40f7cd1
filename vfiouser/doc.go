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
// loop on partial sendmsg, and attach descriptors to the first chunk only.
//
// # Threading contract
//
// Device methods are called one at a time, never concurrently, in the order the client's
// commands arrived, each after the previous one returned. They are not always called from the
// same goroutine (see below), but every call happens after the previous one in the Go memory
// model sense, so a Device needs no locking against itself for these calls. A Device method
// must not wait for anything the client has to do: QEMU answers DMA requests from its main
// loop, which may itself be waiting for our reply.
//
// Connected(peer) runs right after the VERSION reply is sent, before any other command.
// Disconnected runs once the connection is gone, after every pending Peer request has failed
// with ErrDisconnected (an engine blocked in one may be what Disconnected waits for) and after
// every other Device call has returned; commands still queued are dropped.
//
// Peer methods may be called from any goroutine, concurrently. They split transfers at the
// client's max_data_xfer_size, wait for each reply (matched by our own message id) for at most
// the peer timeout (DefaultPeerTimeout, WithPeerTimeout), fail with ErrDisconnected once the
// client is gone, and wrap the errno of an error reply. Replies nobody waits for (late ones, or
// QEMU's error replies to requests that asked for none) are logged and dropped.
//
// Info is read at VERSION and again at every DEVICE_GET_INFO; the region and IRQ layout must
// not change while a client is connected (QEMU caches it too).
//
// # Why the reader executes commands itself
//
// A round trip costs a handful of syscalls; on the machines vgpu runs on, handing each command
// from a reader goroutine to a worker goroutine (and each reply back to a waiting caller) added
// about a third to every trapped MMIO access, mostly in extra scheduler and netpoll work. So
// the goroutine that reads a command runs it too, and there is no hand-off on the hot path.
//
// The danger of that is a command that cannot finish before a DMA reply is read (an unmap that
// waits for an engine's in-flight DMA; or a Device breaking the contract above). Two roles
// therefore move between goroutines: the reader role (exactly one goroutine reads the socket)
// and the executor role (exactly one runs commands). A reader that starts executing leaves the
// reader role vacant; whenever a Peer request is outstanding — already when the command starts,
// or registered while it runs — a helper goroutine takes the vacant role at once, so replies
// are always read. Commands the helper reads while the executor is busy queue behind it (at
// most commandQueueDepth, then reading pauses) and the executor runs them in order before it
// gives up the role. When it is done, the executor takes the reader role back if it is still
// vacant, else it leaves. Without Peer traffic one goroutine does everything.
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
