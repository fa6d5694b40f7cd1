package cp

import (
	"errors"
	"fmt"
	"vgpu/engine"

	"vgpu/abi"
)

// fault is why a queue halts: a CP_ERROR_* code, the data address for memory errors, a short
// reason for the log, and the Memory/Registers error that caused it. Faults are values: they
// travel up to the execution loop, which records them in the HQD and raises the IV.
type fault struct {
	code    uint32
	addr    uint64 // the faulting GPU address, when hasAddr
	hasAddr bool
	info    uint32 // ERROR_INFO instead of the packet header, when hasInfo (shader errors)
	hasInfo bool
	why     string
	err     error
}

func (f *fault) Error() string {
	s := errorName(f.code) + ": " + f.why
	if f.hasAddr {
		s += fmt.Sprintf(" at %#x", f.addr)
	}
	if f.err != nil {
		s += ": " + f.err.Error()
	}
	return s
}

func (f *fault) Unwrap() error { return f.err }

// Keys of cp's rate-limited log lines (Config.Limiter): a fixed set, one per kind of event.
const (
	logKeyPrefix  = "cp."
	logKeyHalt    = "cp.halt"
	logKeyIgnored = "cp.ignored-write"
	logKeyRefused = "cp.activation-refused"
	logKeyClose   = "cp.close"
)

// Sentinels of the execution loop (not guest errors).
var (
	errStop   = errors.New("cp: dequeue requested") // a drain or reset interrupted the packet
	errHalted = errors.New("cp: queue halted")      // already halted and reported
)

func badPacket(why string) error { return &fault{code: abi.CP_ERROR_BAD_PACKET, why: why} }
func reserved(why string) error  { return &fault{code: abi.CP_ERROR_RESERVED_BITS, why: why} }
func badOpcode(why string) error { return &fault{code: abi.CP_ERROR_BAD_OPCODE, why: why} }

func badRegister(why string, err error) error {
	return &fault{code: abi.CP_ERROR_BAD_REGISTER, why: why, err: err}
}

// memFault classifies a Memory error: a translation fault (the error, or one it wraps, is an
// engine.TranslationFaulter reporting true) or any other access failure.
func memFault(err error, va uint64) error {
	code := uint32(abi.CP_ERROR_MEMORY)
	var tf engine.TranslationFaulter
	if errors.As(err, &tf) && tf.TranslationFault() {
		code = abi.CP_ERROR_TRANSLATION
	}
	return &fault{code: code, addr: va, hasAddr: true, why: "memory access failed", err: err}
}

func asFault(err error) *fault {
	var f *fault
	if errors.As(err, &f) {
		return f
	}
	return &fault{code: abi.CP_ERROR_BAD_PACKET, why: "internal error", err: err}
}

// errorName is the CP_ERROR_* name of a code, for logs.
func errorName(code uint32) string {
	switch code {
	case abi.CP_ERROR_NONE:
		return "CP_ERROR_NONE"
	case abi.CP_ERROR_BAD_OPCODE:
		return "CP_ERROR_BAD_OPCODE"
	case abi.CP_ERROR_RESERVED_BITS:
		return "CP_ERROR_RESERVED_BITS"
	case abi.CP_ERROR_BAD_PACKET:
		return "CP_ERROR_BAD_PACKET"
	case abi.CP_ERROR_TRANSLATION:
		return "CP_ERROR_TRANSLATION"
	case abi.CP_ERROR_MEMORY:
		return "CP_ERROR_MEMORY"
	case abi.CP_ERROR_BAD_REGISTER:
		return "CP_ERROR_BAD_REGISTER"
	case abi.CP_ERROR_IB_DEPTH:
		return "CP_ERROR_IB_DEPTH"
	case abi.CP_ERROR_IB_LIMIT:
		return "CP_ERROR_IB_LIMIT"
	case abi.CP_ERROR_RING_CONFIG:
		return "CP_ERROR_RING_CONFIG"
	case abi.CP_ERROR_SHADER:
		return "CP_ERROR_SHADER"
	}
	return fmt.Sprintf("CP_ERROR_%d", code)
}

// errorSource is the IV source id of a halt: bad opcodes and malformed packets (including
// IB nesting and loop errors) are IH_SRC_CP_BAD_OPCODE; reserved bits IH_SRC_CP_RESERVED_BITS;
// bad addresses, failed accesses, refused registers and an unusable ring IH_SRC_CP_GPF.
func errorSource(code uint32) uint8 {
	switch code {
	case abi.CP_ERROR_RESERVED_BITS:
		return abi.IH_SRC_CP_RESERVED_BITS
	case abi.CP_ERROR_TRANSLATION, abi.CP_ERROR_MEMORY, abi.CP_ERROR_BAD_REGISTER, abi.CP_ERROR_RING_CONFIG:
		return abi.IH_SRC_CP_GPF
	}
	return abi.IH_SRC_CP_BAD_OPCODE
}
