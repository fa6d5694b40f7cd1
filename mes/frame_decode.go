package mes

import "vgpu/decode"

// frameText is a failed frame decoded (package decode) for its log line: the opcode, every
// field by AMD's name, and the api_status fence the failure leaves unwritten. Bounded.
func frameText(f *frame) string { return decode.MESFrame(f[:]).String() }
