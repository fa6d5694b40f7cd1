package cp_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
)

// hqdRegs are the HQD registers a restore reproduces.
var hqdRegs = []uint32{abi.REG_HQD_ACTIVE, abi.REG_HQD_VMID, abi.REG_HQD_PQ_BASE_LO, abi.REG_HQD_PQ_BASE_HI,
	abi.REG_HQD_PQ_CONTROL, abi.REG_HQD_PQ_RPTR, abi.REG_HQD_PQ_RPTR_REPORT_ADDR_LO, abi.REG_HQD_PQ_WPTR_LO,
	abi.REG_HQD_PQ_WPTR_HI, abi.REG_HQD_PQ_DOORBELL_CONTROL, abi.REG_HQD_STATUS, abi.REG_HQD_ERROR_ADDR_LO,
	abi.REG_HQD_ERROR_INFO, abi.REG_HQD_FENCES}

func savePaused(t *testing.T, c *cp.CP) (cp.State, error) {
	t.Helper()
	if err := c.Pause(time.Second); err != nil {
		t.Fatal(err)
	}
	defer c.Unpause()
	return c.SaveState()
}

// TestSnapshotSlots: an idle queue (with user data set by an earlier packet) and a halted one
// are saved and given to a new CP over the same memory; the registers read back the same, the
// halted queue stays halted, and the idle one runs the next packets from where it was.
func TestSnapshotSlots(t *testing.T) {
	r, ring := start(t, 1)
	ring.Submit(pm4.SetShReg(abi.SH_COMPUTE_USER_DATA_0, 0xAA, 0xBB),
		pm4.WriteMem(dataBase, 1), pm4.Fence(dataBase+8, 1, 1, false))
	ring.WaitIdle(t)
	cptest.Eventually(t, "queue idle", func() bool { return r.CP.Queue(1).Idle })
	bad := r.StartQueue(3, queueConfig(3))
	bad.Submit([]uint32{0}) // a type-0 packet
	bad.WaitHalt(t)
	if _, err := r.CP.SaveState(); !errors.Is(err, cp.ErrNotPaused) {
		t.Errorf("SaveState without Pause: %v", err)
	}
	st, err := savePaused(t, r.CP)
	if err != nil {
		t.Fatal(err)
	}
	before := map[[2]uint32]uint32{}
	for _, slot := range []int{1, 3} {
		for _, reg := range hqdRegs {
			before[[2]uint32{uint32(slot), reg}] = r.ReadHQD(slot, reg)
		}
	}
	r.CP.Reset()
	if !r.CP.Quiesce(time.Second) {
		t.Fatal("old CP still busy")
	}
	c2 := cp.New(cp.Config{Memory: r.Mem, Registers: r.Regs, Interrupts: r.IVs})
	t.Cleanup(c2.Close)
	if err := c2.RestoreState(&st); err != nil {
		t.Fatal(err)
	}
	for k, v := range before {
		if got := c2.ReadHQD(int(k[0]), k[1]); got != v {
			t.Errorf("slot %d %s = %#x after the restore, %#x before", k[0], abi.RegisterNames[abi.BLOCK_HQD_BASE+k[1]], got, v)
		}
	}
	if q := c2.Queue(3); q.State != abi.HQD_STATE_HALTED || q.Error != abi.CP_ERROR_BAD_OPCODE {
		t.Errorf("halted queue after the restore: %+v", q)
	}
	// The idle queue continues: a WRITE_DATA of the restored user data's effect is not
	// observable directly, so it writes memory and fences.
	ring.Rig = &cptest.Rig{CP: c2, Mem: r.Mem, Regs: r.Regs, IVs: r.IVs}
	ring.Submit(pm4.WriteMem(dataBase+16, 2), pm4.Fence(dataBase+8, 2, 2, false))
	ring.WaitIdle(t)
	if got := r.Mem.Load32(dataBase + 16); got != 2 {
		t.Errorf("packet after the restore wrote %d", got)
	}
	if err := c2.RestoreState(&st); !errors.Is(err, cp.ErrNotFresh) {
		t.Errorf("second restore: %v", err)
	}
}

func TestSnapshotSlotRefusals(t *testing.T) {
	good := func() cp.State {
		var s cp.State
		sl := &s.Slots[1]
		sl.BaseLo, sl.Control = ringBase, ringQS
		sl.Queue, sl.State = true, abi.HQD_STATE_RUNNING
		return s
	}
	for _, tc := range []struct {
		name string
		edit func(*cp.SlotState)
	}{
		{"wptr behind rptr", func(s *cp.SlotState) { s.Rptr, s.Wptr = 10, 5 }},
		{"wptr beyond a ring", func(s *cp.SlotState) { s.Wptr = 1 << 20 }},
		{"bad ring size", func(s *cp.SlotState) { s.Control = 31 }},
		{"misaligned ring", func(s *cp.SlotState) { s.BaseLo = ringBase + 4 }},
		{"running with an error", func(s *cp.SlotState) { s.ErrCode = abi.CP_ERROR_BAD_OPCODE }},
		{"unknown state", func(s *cp.SlotState) { s.State = 99 }},
		{"dequeued but halted", func(s *cp.SlotState) { s.Stopped, s.State = true, abi.HQD_STATE_HALTED }},
		{"error code too wide", func(s *cp.SlotState) { s.State, s.ErrCode = abi.HQD_STATE_HALTED, 1<<20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cptest.NewRig(t, memSize)
			s := good()
			tc.edit(&s.Slots[1])
			if err := r.CP.RestoreState(&s); !errors.Is(err, cp.ErrBadSlotState) {
				t.Fatalf("%v, want ErrBadSlotState", err)
			}
			if st := r.CP.Stats(); st.Live != 0 || st.Queues[1].Active {
				t.Errorf("a refused restore left a queue: %+v", st.Queues[1])
			}
		})
	}
	r := cptest.NewRig(t, memSize)
	s := good()
	if err := r.CP.RestoreState(&s); err != nil {
		t.Errorf("the good state: %v", err)
	}
}

// TestSnapshotBusyQueue: a queue parked inside an IB is not at a packet boundary.
func TestSnapshotBusyQueue(t *testing.T) {
	r, ring := start(t, 1)
	ib := cptest.NewIB(r.Mem, ibBase)
	ib.Emit(pm4.WaitMem(dataBase, 1))
	ring.Submit(cptest.IBCall(ib))
	r.WaitState(t, 1, abi.HQD_STATE_WAITING)
	if _, err := savePaused(t, r.CP); !errors.Is(err, cp.ErrBusy) {
		t.Errorf("snapshot of a queue waiting in an IB: %v", err)
	}
	r.Mem.Store32(dataBase, 1)
	cptest.Eventually(t, "queue idle", func() bool { return r.CP.Queue(1).Idle })
	if _, err := savePaused(t, r.CP); err != nil {
		t.Errorf("snapshot once idle: %v", err)
	}
}

// TestSnapshotShaderInFlight: a register queue with a shader dispatch in flight is refused
// by name (it has no context save area to save the dispatch to); once the dispatch ends the
// queue is saved.
func TestSnapshotShaderInFlight(t *testing.T) {
	r, ring, _ := shaderRig(t, 1)
	sh := putProgram(t, r, gatedStore(), [3]uint32{4, 1, 1})
	ring.Submit(sh.Encode(), pm4.DispatchDirect(2, 1, 1))
	cptest.Eventually(t, "the dispatch started", func() bool { return r.CP.Stats().ShaderDispatches == 1 })
	_, err := savePaused(t, r.CP)
	if !errors.Is(err, cp.ErrBusy) || !strings.Contains(err.Error(), "shader dispatches in flight") {
		t.Errorf("snapshot with a dispatch in flight: %v", err)
	}
	r.Mem.Store32(shFlag, 1)
	wantOutEventually := func() bool { return r.Mem.Load32(shOut+4*7) == 8 }
	cptest.Eventually(t, "the dispatch ended", wantOutEventually)
	cptest.Eventually(t, "queue idle", func() bool { return r.CP.Queue(1).Idle })
	if _, err := savePaused(t, r.CP); err != nil {
		t.Errorf("snapshot after the dispatch: %v", err)
	}
}
