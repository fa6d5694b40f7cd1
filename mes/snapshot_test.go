package mes

import (
	"errors"
	"testing"
	"time"

	"vgpu/abi"
)

func pausedState(t testing.TB, m *MES) (State, error) {
	t.Helper()
	resume, err := m.Pause(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer resume()
	return m.SaveState()
}

// TestSnapshotScheduler: a running scheduler is saved between frames, with its queues;
// without a Pause it is not read at all.
func TestSnapshotScheduler(t *testing.T) {
	r := newRig(t)
	r.hwResources(0x3, 0, 0xFF00)
	if _, err := r.mes.SaveState(); !errors.Is(err, ErrActive) {
		t.Errorf("SaveState without Pause: %v", err)
	}
	s, err := pausedState(t, r.mes)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Running.Active || !s.Running.HW || s.Running.Owned != 0x6 || s.Running.VMIDs != 0xFF00 || s.Running.Rptr == 0 {
		t.Errorf("saved %+v", s.Running)
	}
	q := r.queueAt(0, 0)
	q.add(abi.MES_PRIORITY_NORMAL, 0)
	if s, err := pausedState(t, r.mes); err != nil || len(s.Tables.Queues) != 1 || len(s.Tables.Procs) != 1 {
		t.Errorf("a scheduler with a queue: %v, tables %+v", err, s.Tables)
	}
	q.remove()
	r.waitFor("queue removed", time.Second, func() bool { return r.rreg(abi.REG_MES_QUEUES) == 0 })
	if _, err := pausedState(t, r.mes); err != nil {
		t.Errorf("after the last REMOVE_QUEUE: %v", err)
	}
}

func TestRestoreSchedulerRefusals(t *testing.T) {
	r := newRig(t)
	r.hwResources(0x3, 0, 0xFF00)
	good, err := pausedState(t, r.mes)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*RunningState)
	}{
		{"VMID 0", func(s *RunningState) { s.VMIDs |= 1 }},
		{"slots beyond the CP", func(s *RunningState) { s.Owned = 1 << 20 }},
		{"wptr behind rptr", func(s *RunningState) { s.Wptr = s.Rptr - 1 }},
		{"negative period", func(s *RunningState) { s.IdleGraceNs[1] = -1 }},
		{"resources without SET_HW_RESOURCES", func(s *RunningState) { s.HW = false }},
		{"aggregated doorbell beyond the BAR", func(s *RunningState) { s.Aggregated[0] = 1 << 20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r2 := newRig(t)
			r2.wreg(abi.REG_MES_RING_ACTIVE, 0)
			s := good
			tc.edit(&s.Running)
			if err := r2.mes.RestoreState(s); !errors.Is(err, ErrBadState) {
				t.Fatalf("%v, want ErrBadState", err)
			}
			if r2.rreg(abi.REG_MES_RING_ACTIVE) != 0 || r2.mes.Owned() != 0 {
				t.Error("a refused restore started the scheduler")
			}
		})
	}
	r2 := newRig(t)
	r2.wreg(abi.REG_MES_RING_ACTIVE, 0)
	if err := r2.mes.RestoreState(good); err != nil {
		t.Fatal(err)
	}
	if r2.rreg(abi.REG_MES_RING_ACTIVE) != 1 || r2.mes.Owned() != 0x6 || r2.rreg(abi.REG_MES_RING_RPTR) != r.rreg(abi.REG_MES_RING_RPTR) {
		t.Errorf("restored: active %d owned %#x rptr %d", r2.rreg(abi.REG_MES_RING_ACTIVE), r2.mes.Owned(), r2.rreg(abi.REG_MES_RING_RPTR))
	}
}
