package cp

import (
	"bytes"
	"crypto/sha256"
	"errors"

	"vgpu/abi"
	"vgpu/engine"
	"vgpu/shader"
)

// A shader dispatch's program: fetched from COMPUTE_PGM with an instruction fetch in the
// queue's address space, decoded and checked, and kept while its bytes stay the same.

// lastProgram is the queue's last decoded shader.
type lastProgram struct {
	addr uint64
	vmid int
	code []byte
	prog *shader.Program
	hash [32]byte // SHA-256 of code (SavedDispatch.CodeHash)
}

// loadProgram fetches COMPUTE_PGM (an instruction fetch in the packet's address space) and
// decodes it; the last program is kept, and reused while its bytes are the same.
func (q *queue) loadProgram() (*shader.Program, error) {
	s := &q.sh
	if s.pgmSlots == 0 || s.pgmSlots > abi.SHADER_MAX_INSNS {
		return nil, q.shaderFault(&shader.Error{Reason: abi.SHADER_ERR_PROGRAM_SIZE}, s.pgm)
	}
	n := int(s.pgmSlots) * abi.SHADER_INSN_BYTES
	if overflows(s.pgm, uint64(n)) {
		return nil, badPacket("DISPATCH: program past the address space")
	}
	return q.fetchProgram(s.pgm, n, q.curVMID())
}

// fetchProgram reads n bytes of program at pgm in vmid and decodes them (q.lastProg: reused
// while the bytes are the same).
func (q *queue) fetchProgram(pgm uint64, n, vmid int) (*shader.Program, error) {
	buf, err := q.fetchCode(pgm, n, vmid)
	if err != nil {
		return nil, err
	}
	return q.decodeProgram(pgm, vmid, buf)
}

// fetchCode reads n bytes of program at pgm in vmid into q.pgmBuf.
func (q *queue) fetchCode(pgm uint64, n, vmid int) ([]byte, error) {
	if cap(q.pgmBuf) < n {
		q.pgmBuf = make([]byte, n)
	}
	buf := q.pgmBuf[:n]
	a := engine.Access{VMID: vmid, Slot: q.slot, Bypass: true, Kind: engine.Fetch, Client: abi.VM_CID_SQC_INST}
	if err := q.readAs(a, pgm, buf); err != nil {
		var f *fault
		if errors.As(err, &f) {
			return nil, q.shaderFault(&shader.Error{Reason: abi.SHADER_ERR_PROGRAM_FETCH, Addr: pgm, Err: err}, pgm)
		}
		return nil, err // a stop or a revocation
	}
	return buf, nil
}

// decodeProgram decodes the program bytes buf fetched from pgm in vmid.
func (q *queue) decodeProgram(pgm uint64, vmid int, buf []byte) (*shader.Program, error) {
	if c := &q.lastProg; c.prog != nil && c.addr == pgm && c.vmid == vmid && bytes.Equal(c.code, buf) {
		return c.prog, nil
	}
	prog, err := shader.Load(buf)
	if err != nil {
		var se *shader.Error
		errors.As(err, &se)
		return nil, q.shaderFault(se, pgm)
	}
	q.lastProg = lastProgram{addr: pgm, vmid: vmid, code: append(q.lastProg.code[:0], buf...), prog: prog, hash: sha256.Sum256(buf)}
	return prog, nil
}
