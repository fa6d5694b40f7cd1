package mes

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"vgpu/abi"
	"vgpu/cp"
)

// The scheduler's part of a snapshot file (device secMES), little-endian:
//
//	Registers, RunningState                      fixed size
//	procs u32, gangs u32, queues u32             each at most MES_MAX_QUEUES
//	procs × ProcRecord, gangs × GangRecord
//	queues × (QueueFields, dispatches u32, dispatches × DispatchRecord)   dispatches ≤ cp.MaxSavedDispatches
//
// Decoding reads record by record, so what it allocates follows the bytes actually there,
// never a count in the file; MaxStateBytes bounds the whole.

var (
	fixedBytes    = binary.Size(Registers{}) + binary.Size(RunningState{})
	procBytes     = binary.Size(ProcRecord{})
	gangBytes     = binary.Size(GangRecord{})
	queueBytes    = binary.Size(QueueFields{})
	dispatchBytes = binary.Size(DispatchRecord{})
)

// MaxStateBytes bounds the encoded State (every queue with the most saved dispatches).
var MaxStateBytes = uint64(fixedBytes + 12 + abi.MES_MAX_QUEUES*(procBytes+gangBytes+queueBytes+4+cp.MaxSavedDispatches*dispatchBytes))

// MarshalBinary encodes s.
func (s *State) MarshalBinary() ([]byte, error) {
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) } // a bytes.Buffer does not fail
	w(&s.Registers)
	w(&s.Running)
	t := &s.Tables
	w([3]uint32{uint32(len(t.Procs)), uint32(len(t.Gangs)), uint32(len(t.Queues))})
	w(t.Procs)
	w(t.Gangs)
	for i := range t.Queues {
		q := &t.Queues[i]
		w(&q.QueueFields)
		w(uint32(len(q.Dispatches)))
		w(q.Dispatches)
	}
	return b.Bytes(), nil
}

// ErrBadEncoding: a State's bytes that do not decode (truncated, or a count beyond its bound).
var ErrBadEncoding = errors.New("mes: restore: the scheduler's state does not decode")

// DecodeState reads an encoded State from r (at most MaxStateBytes are read). The tables'
// contents are checked by RestoreState; here only their counts.
func DecodeState(r io.Reader) (State, error) {
	var s State
	lr := &io.LimitedReader{R: r, N: int64(MaxStateBytes)}
	rd := func(v any) error {
		if err := binary.Read(lr, binary.LittleEndian, v); err != nil {
			return fmt.Errorf("%w: %v", ErrBadEncoding, err)
		}
		return nil
	}
	if err := rd(&s.Registers); err != nil {
		return State{}, err
	}
	if err := rd(&s.Running); err != nil {
		return State{}, err
	}
	var n [3]uint32
	if err := rd(&n); err != nil {
		return State{}, err
	}
	if n[0] > abi.MES_MAX_QUEUES || n[1] > abi.MES_MAX_QUEUES || n[2] > abi.MES_MAX_QUEUES {
		return State{}, fmt.Errorf("%w: %d processes, %d gangs, %d queues (at most %d)", ErrBadEncoding, n[0], n[1], n[2], abi.MES_MAX_QUEUES)
	}
	t := &s.Tables
	for range n[0] {
		var p ProcRecord
		if err := rd(&p); err != nil {
			return State{}, err
		}
		t.Procs = append(t.Procs, p)
	}
	for range n[1] {
		var g GangRecord
		if err := rd(&g); err != nil {
			return State{}, err
		}
		t.Gangs = append(t.Gangs, g)
	}
	for range n[2] {
		var q QueueRecord
		var nd uint32
		if err := rd(&q.QueueFields); err != nil {
			return State{}, err
		}
		if err := rd(&nd); err != nil {
			return State{}, err
		}
		if nd > cp.MaxSavedDispatches {
			return State{}, fmt.Errorf("%w: queue %#x: %d saved dispatches (at most %d)", ErrBadEncoding, q.Doorbell, nd, cp.MaxSavedDispatches)
		}
		for range nd {
			var d DispatchRecord
			if err := rd(&d); err != nil {
				return State{}, err
			}
			q.Dispatches = append(q.Dispatches, d)
		}
		t.Queues = append(t.Queues, q)
	}
	return s, nil
}
