package bench

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"vgpu/abi"
)

// invalidate flushes every cached translation of vmid through invalidation engine 0 and
// waits for the acknowledgement, as a driver does after changing a page table.
func (v *vmRig) invalidate(t *testing.T, vmid int) {
	t.Helper()
	eng := uint32(abi.BLOCK_VM_INV_ENG_BASE)
	req := uint32(1)<<vmid | abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PTES_MASK | abi.REG_VM_INV_ENG_REQ__INVALIDATE_L1_PTES_MASK |
		abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE0_MASK | abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE1_MASK |
		abi.REG_VM_INV_ENG_REQ__INVALIDATE_L2_PDE2_MASK
	if err := v.SetReg(eng+abi.REG_VM_INV_ENG_REQ, req); err != nil {
		t.Fatal(err)
	}
	ack, err := v.Reg(eng + abi.REG_VM_INV_ENG_ACK)
	if err != nil || ack&(1<<vmid) == 0 {
		t.Fatalf("invalidation of VMID %d: ACK %#x, %v", vmid, ack, err)
	}
}

// TestVMIDQueues: every queue runs in its own address space (its rptr report lands in its own
// VRAM page, no fault is latched), and the scenario's checks catch a queue whose work went
// elsewhere or did not run, naming it.
func TestVMIDQueues(t *testing.T) {
	const n = 10 * vmQueues
	for _, tc := range []struct {
		name  string
		vmid  int
		spoil func(t *testing.T, v *vmRig, q *vmQueue)
		want  string
	}{
		{"none", 0, nil, ""},
		{"destination remapped", 5, func(t *testing.T, v *vmRig, q *vmQueue) {
			// The destination VA now reaches a page outside every queue's.
			v.tables[q.vmid].mapPage(vmVAPage+vmDstOff, vmTablesEnd|trRW)
			v.invalidate(t, q.vmid)
		}, "queue 6 (VMID 5): destination holds"},
		{"context disabled", 8, func(t *testing.T, v *vmRig, q *vmQueue) {
			// Every access of the queue is a mapping error: it halts at its next ring fetch.
			if err := v.SetReg(abi.BLOCK_VM_CONTEXT_BASE+uint32(q.vmid)*abi.BLOCK_VM_CONTEXT_STRIDE+abi.REG_VM_CONTEXT_CNTL, 0); err != nil {
				t.Fatal(err)
			}
		}, "queue 9 (VMID 8): fence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := newVMRig()
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			v.timeout = 300 * time.Millisecond
			op := v.op(v.qs[:])
			if _, err := timeOp(op, n); err != nil {
				t.Fatal(err)
			}
			for _, q := range v.qs {
				want := uint32(q.wptr % vmRingDwords)
				rptr := func() uint32 { return binary.LittleEndian.Uint32(q.page[vmRptrOff:]) }
				for deadline := time.Now().Add(irqTimeout); rptr() != want && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				if got := rptr(); got != want {
					t.Errorf("queue %d (VMID %d): rptr report %d in its page, wptr %d", q.slot, q.vmid, got, want)
				}
			}
			if st, err := v.Reg(abi.REG_VM_FAULT_STATUS); err != nil || st != 0 {
				t.Fatalf("VM_FAULT_STATUS %#x (%v) after the queues ran", st, err)
			}
			if tc.spoil == nil {
				return
			}
			tc.spoil(t, v, v.qs[tc.vmid])
			_, err = timeOp(op, n)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("after breaking queue %d: %v, want an error containing %q", v.qs[tc.vmid].slot, err, tc.want)
			}
			t.Log(err)
		})
	}
}
