package mes

import (
	"encoding/binary"
	"time"

	"vgpu/abi"
)

// Register waits re-check on a timer that starts here and doubles to the cap: a wait the
// driver expects to hold at once (an invalidation ACK) costs one read.
const (
	minRegWait = 10 * time.Microsecond
	maxRegWait = time.Millisecond
)

func (a *activation) regRead(dw uint32) (uint32, error) {
	if !a.enter() {
		return 0, errRevoked
	}
	defer a.leave()
	return a.m.cfg.Registers.ReadReg(dw)
}

func (a *activation) regWrite(dw, v uint32) error {
	if !a.enter() {
		return errRevoked
	}
	defer a.leave()
	return a.m.cfg.Registers.WriteReg(dw, v)
}

func (a *activation) misc(f *frame, pos uint64, now time.Time) *frameErr {
	switch op := f.dw(abi.MES_MISC_DW_OPCODE); op {
	case abi.MES_MISC_OP_WRITE_REG:
		r, v := f.dw(abi.MES_MISC_DW_REG_OFFSET), f.dw(abi.MES_MISC_DW_WRITE_REG_VALUE)
		if err := a.regWrite(r, v); err != nil {
			return fail(abi.MES_ERR_REG_ACCESS, "WRITE_REG %#x: %v", r, err)
		}
	case abi.MES_MISC_OP_READ_REG:
		r, at := f.dw(abi.MES_MISC_DW_REG_OFFSET), f.qw(abi.MES_MISC_DW_READ_REG_BUFFER_ADDR)
		if at%4 != 0 {
			return fail(abi.MES_ERR_BAD_ADDRESS, "READ_REG buffer_addr %#x not dword aligned", at)
		}
		v, err := a.regRead(r)
		if err != nil {
			return fail(abi.MES_ERR_REG_ACCESS, "READ_REG %#x: %v", r, err)
		}
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], v)
		if err := a.write(at, b[:]); err != nil {
			return fail(abi.MES_ERR_BAD_ADDRESS, "READ_REG buffer_addr %#x: %v", at, err)
		}
	case abi.MES_MISC_OP_WAIT_REG_MEM:
		return a.waitRegMem(f, pos, now)
	case abi.MES_MISC_OP_NOTIFY_WORK_ON_UNMAPPED_QUEUE:
		a.pollShadows(now)
	case abi.MES_MISC_OP_INV_GART:
		if a.enter() {
			a.m.cfg.VM.InvalidateGART()
			a.leave()
		}
	case abi.MES_MISC_OP_QUERY_STATUS, abi.MES_MISC_OP_SET_SHADER_DEBUGGER, abi.MES_MISC_OP_NOTIFY_TO_UNMAP_PROCESSES,
		abi.MES_MISC_OP_CHANGE_CONFIG, abi.MES_MISC_OP_LAUNCH_CLEANER_SHADER:
		// Accepted: nothing on vgpu depends on them (no shader debugger, no cleaner shader).
	default:
		return fail(abi.MES_ERR_UNKNOWN_OPCODE, "MISC sub-opcode %d", op)
	}
	return nil
}

// waitRegMem is MISC WAIT_REG_MEM: wait (or write, then wait) until a register matches. The
// ring waits behind it; the scheduler keeps placing queues meanwhile.
func (a *activation) waitRegMem(f *frame, pos uint64, now time.Time) *frameErr {
	op := f.dw(abi.MES_MISC_DW_WAIT_OP)
	ref, mask := f.dw(abi.MES_MISC_DW_WAIT_REFERENCE), f.dw(abi.MES_MISC_DW_WAIT_MASK)
	r1, r2 := f.dw(abi.MES_MISC_DW_WAIT_REG_OFFSET1), f.dw(abi.MES_MISC_DW_WAIT_REG_OFFSET2)
	polled := r1
	switch op {
	case abi.MES_MISC_OP_WAIT_OP_WAIT:
	case abi.MES_MISC_OP_WAIT_OP_WRITE_WAIT_WRITE:
		if err := a.regWrite(r1, ref); err != nil {
			return fail(abi.MES_ERR_REG_ACCESS, "WAIT_REG_MEM write %#x: %v", r1, err)
		}
		polled = r2
	default:
		return fail(abi.MES_ERR_BAD_FIELD, "WAIT_REG_MEM op %d", op)
	}
	every := minRegWait
	deadline := now.Add(abi.MES_MISC_OP_WAIT_TIMEOUT_US * time.Microsecond)
	timeout := fail(abi.MES_ERR_WAIT_TIMEOUT, "register %#x & %#x never equalled %#x", polled, mask, ref&mask)
	err := a.wait(f, pos, now, deadline, every, timeout, func(time.Time) *frameErr {
		v, err := a.regRead(polled)
		if err != nil {
			return fail(abi.MES_ERR_REG_ACCESS, "WAIT_REG_MEM read %#x: %v", polled, err)
		}
		if v&mask == ref&mask {
			return nil
		}
		if a.pend != nil {
			a.pend.recheck = min(2*a.pend.recheck, maxRegWait)
		}
		return errWaiting
	})
	return err
}
