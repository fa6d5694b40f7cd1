// Package decode turns the device's binary formats into readable text with AMD's field
// names, in the style of AMD's umr: PM4 packets (rings and IBs), MES v11 API frames, IH ring
// entries (IVs) and eBPF shader programs. The layouts are AMD's, bit-exact, as abi defines
// them; so are the names, where abi has them.
//
// Decoders never fail and never panic on bad input: what could not be decoded (an unknown
// opcode, a truncated packet, a bad header) is named in the result's Err (ErrTruncated,
// ErrUnknownOpcode, ...), and its String shows the raw dwords. Every String is bounded (long
// value lists are cut at maxListed with a count), so a guest-written packet can go into a log
// line as it is.
//
// The API:
//
//	PM4Packet(dws []uint32) (Packet, int)       // the packet at dws[0] and the dwords it occupies
//	PM4Stream(dws []uint32) Packets             // an IB (or any linear stream), offsets from 0
//	PM4Ring(ring []uint32, rptr, wptr uint64) Packets // a ring from rptr to wptr, wrapping
//	OpcodeName(op uint32) string
//	MESFrame(dws []uint32) Frame                // one 64-dword API frame
//	MESFrames(dws []uint32) Frames              // consecutive frames (an API ring's contents)
//	IV(dws []uint32) IVEntry                    // one 8-dword IH ring entry
//	IVs(dws []uint32) IVEntries                 // consecutive entries (an IH ring's contents)
//	Shader(code []byte) (Insns, error)          // an eBPF program, slot by slot
//	Dwords(r io.Reader, hex bool, max int) ([]uint32, error) // input: raw little-endian or hex text
//
// Packet, Frame, IVEntry and Insn each have Fields ([]Field: name, raw value, text) and a
// String of one line: the name (opcode, source), then name=value fields. The slice types
// (Packets, Frames, IVEntries, Insns) print one line per item, its offset first.
//
// decode imports only abi (and cilium/ebpf/asm for shaders): cp and mes import it for their
// halt and bad-frame log lines, and `vgpu decode` (cmd/vgpu) and the status socket use it.
package decode
