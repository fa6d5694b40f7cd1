// Package engine is the contract every GPU engine (the command processor's queues, the IH
// writer, and later the MES and the shader units) shares with the memory path and the
// interrupt handler: who accesses memory and how (Access), where an address lands (PhysAddr),
// cache maintenance (CacheOp), interrupt vectors (IV), and the three interfaces engines call
// (Memory, Copier, Interrupts), with the error kinds engines must tell apart.
//
// An access in a process address space may be Privileged: made with the kernel's privilege
// (a write then needs no PTE_WRITEABLE; nothing else changes). Only the CP's
// PROTECTED_FENCE_SIGNAL uses it, so a process can read a fence the device advances but not
// forge it; VMID 0 ignores it.
//
// It is a leaf: it imports nothing of vgpu, so every engine and every memory-side package
// (l2, gpummu, gpuvm, irq) can use the same types without adapters.
package engine

import "fmt"

// Domain names the physical memory an address belongs to.
type Domain uint8

const (
	// DomainSystem is system memory, addressed by DMA address (an IOVA under a vIOMMU).
	DomainSystem Domain = iota
	// DomainVRAM is device memory, addressed by offset from the start of VRAM.
	DomainVRAM

	// NumDomains is the number of domains (for arrays indexed by Domain).
	NumDomains
)

func (d Domain) String() string {
	switch d {
	case DomainSystem:
		return "system"
	case DomainVRAM:
		return "vram"
	}
	return fmt.Sprintf("domain(%d)", uint8(d))
}

// PhysAddr is a physical address: a domain and an address inside it.
type PhysAddr struct {
	Domain Domain
	Addr   uint64
}

func (a PhysAddr) String() string { return fmt.Sprintf("%v:%#x", a.Domain, a.Addr) }

// Kind is what an access does with memory, for permission checks.
type Kind uint8

const (
	// Data is a data read or write (packets' operands, copies, fences, IH entries).
	Data Kind = iota
	// Fetch is an instruction fetch: in a process address space (VMID 1..15) the CP's fetch
	// of indirect buffers and, later, shader code; it needs the page's EXECUTABLE bit.
	Fetch
)

// Access says who accesses memory and how.
type Access struct {
	VMID   int  // address space (0: the kernel's; 1..15: process contexts)
	Slot   int  // hardware queue slot making the access (fault and L2 reports); -1: none
	Bypass bool // cache policy BYPASS: straight to memory, not allocated in L2 (fences, IH, ring fetch)
	Kind   Kind
	// Client is the memory client id reported in fault status and fault IVs (AMD's CID
	// numbering: abi.VM_CID_*).
	Client uint8
	// Privileged: the access is made with the kernel's privilege in a process address space
	// (VMID 1..15): a write to a page without PTE_WRITEABLE does not fault. Everything else —
	// translation, range, validity, read and execute permissions — is checked as usual, and
	// VMID 0 ignores it. Only the CP's PROTECTED_FENCE_SIGNAL write sets it, so a process can
	// read a fence the device advances but cannot forge it.
	Privileged bool
}

// CacheOp is an L2 maintenance action (RELEASE_MEM, ACQUIRE_MEM, L2_CONTROL).
type CacheOp uint8

const (
	CacheWB      CacheOp = iota + 1 // write back dirty lines, keep them valid
	CacheInv                        // invalidate lines (dirty data is written back first)
	CacheWBInv                      // write back, then invalidate
	CacheDiscard                    // drop lines without writing them back
)

func (o CacheOp) String() string {
	switch o {
	case CacheWB:
		return "WB"
	case CacheInv:
		return "INV"
	case CacheWBInv:
		return "WB_INV"
	case CacheDiscard:
		return "DISCARD"
	}
	return fmt.Sprintf("cacheop(%d)", uint8(o))
}

// CacheAll, as the size of a Memory.CacheOp call, means "every line" (the va is then 0); any
// other size is a GPU address range [va, va+size).
const CacheAll = ^uint64(0)

// IV is one interrupt vector as an engine reports it. The IH encodes it as a 32-byte AMD IV
// entry (abi.IH_*); Data[0..3] become IV dwords 4..7 (AMD SRC_DATA[0..3]).
type IV struct {
	Client, Source, RingID, VMID uint8
	PASID                        uint16
	Data                         [4]uint32
}

// Memory is the GPU address space as engines see it (gpummu.MMU in the device).
//
// Errors are access failures, classified by the interfaces below: a TranslationFaulter
// reporting true halts a queue with CP_ERROR_TRANSLATION, a Retrier makes it wait and replay,
// any other error halts it with CP_ERROR_MEMORY. Write implementations notify parked engines
// themselves.
type Memory interface {
	Read(a Access, va uint64, p []byte) error
	Write(a Access, va uint64, p []byte) error
	CacheOp(a Access, op CacheOp, va, size uint64) error
	// FenceCheck is called before a fence's data write, after its cache actions: strict L2
	// mode reports dirty lines written by slot that the fence would publish too early.
	FenceCheck(slot int, va uint64)
}

// Copier is an optional interface of a Memory: copy n bytes from GPU address src to GPU
// address dst with access a, as Read into a buffer followed by Write would (same permissions,
// faults and wake-ups), but without the bounce buffer where the memory allows.
type Copier interface {
	Copy(a Access, dst, src uint64, n uint64) error
}

// Interrupts receives engines' interrupt vectors (irq.IH in the device). Push must not block
// on anything an engine goroutine does.
type Interrupts interface {
	Push(iv IV)
}

// TranslationFaulter is implemented by errors of a GPU address that did not translate
// (TranslationFault true) and by errors of translated accesses that memory refused (false).
type TranslationFaulter interface {
	TranslationFault() bool
}

// FaultAddresser is implemented by access errors that know the GPU address that failed.
type FaultAddresser interface {
	FaultAddress() uint64
}

// Retrier is implemented by a recoverable (retry) fault: the access did not happen and must
// not be reported as failed. The engine waits, without holding anything another engine needs,
// until the channel is closed (the driver acknowledged the fault, or the context was reset),
// then replays the access from its start; it may also give up when it is itself reset or
// dequeued.
type Retrier interface {
	RetryReady() <-chan struct{}
}
