package cp_test

import (
	"slices"
	"testing"

	"vgpu/abi"
	"vgpu/cp/cptest"
	"vgpu/pm4"
)

// TestHQDStatus: a slot's status names its ring and, where the queue sits on one packet
// (parked in a wait, halted), that packet's dwords as the ring holds them.
func TestHQDStatus(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pkt   []uint32
		state uint32
	}{
		{"parked wait", pm4.WaitMem(dataBase, 1), abi.HQD_STATE_WAITING},
		{"halted on an unknown opcode", []uint32{pm4.Header(0x7E, 3), 1, 2, 3}, abi.HQD_STATE_HALTED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ring := start(t, 1)
			ring.Submit(pm4.WriteMem(dataBase+8, 5))
			ring.WaitIdle(t)
			before := r.CP.HQDStatus(1) // a ring of 2^(QS+1) dwords
			if !before.Active || before.Packet != nil || before.RingBase != queueConfig(1).Base || before.RingBytes != 8<<ringQS {
				t.Fatalf("idle status %+v", before)
			}
			at := ring.Submit(tc.pkt) - uint64(len(tc.pkt))
			r.WaitState(t, 1, tc.state)
			s := r.CP.HQDStatus(1)
			if s.Rptr != at || !slices.Equal(s.Packet, tc.pkt) || s.PacketDwords != len(tc.pkt) || s.PacketAddr != queueConfig(1).Base+at*4 {
				t.Fatalf("status %+v, want the packet %#x at rptr %d", s, tc.pkt, at)
			}
			if s.Doorbell != queueConfig(1).Doorbell || !s.DoorbellOn {
				t.Fatalf("doorbell %#x %v", s.Doorbell, s.DoorbellOn)
			}
		})
	}
	// A halt inside an IB: the packet is the IB's, at its address, at IB level 1.
	t.Run("halted in an IB", func(t *testing.T) {
		r, ring := start(t, 1)
		bad := []uint32{pm4.Header(0x7E, 1), 9}
		ib := cptest.NewIB(r.Mem, ibBase)
		ib.WriteMem(dataBase, 1)
		at := ib.Emit(bad) - uint64(len(bad))
		ring.IB(ib)
		ring.Kick()
		r.WaitState(t, 1, abi.HQD_STATE_HALTED)
		s := r.CP.HQDStatus(1)
		if !slices.Equal(s.Packet, bad) || s.IBLevel != 1 || s.PacketAddr != ibBase+at*4 {
			t.Fatalf("status %+v, want %#x at %#x in IB level 1", s, bad, ibBase+at*4)
		}
	})
	if s := cptest.NewRig(t, memSize).CP.HQDStatus(99); s.Active || s.Slot != 99 {
		t.Fatalf("slot out of range: %+v", s)
	}
}
