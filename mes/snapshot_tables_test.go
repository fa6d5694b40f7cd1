package mes

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/pm4"
)

// tablesRig is a scheduler with one compute slot and three queues of two processes: the
// first parked in its slot on a WAIT_REG_MEM of gate, the others unmapped with work (their
// gang quantum is an hour: nothing takes turns), plus a fourth that halted.
type tablesRig struct {
	*rig
	qs   []*testQueue
	gate uint64
}

func newTablesRig(t testing.TB) *tablesRig {
	r := &tablesRig{rig: newRig(t), gate: queueBase - 0x100}
	r.hwResources(0x1, 0, 0xFF00)
	const hour = uint64(time.Hour / 100)
	shared := uint64(queueBase - 0x1000) // the second process's context
	for i := range 4 {
		proc := uint64(queueBase + 0xA00) // queue 0's
		if i%2 == 1 {
			proc = shared
		}
		q := r.queueAt(i, proc)
		q.add(abi.MES_PRIORITY_NORMAL, hour)
		r.qs = append(r.qs, q)
	}
	// The fourth halts first (a packet vgpu refuses), alone in the slot.
	r.qs[3].submit(pm4.Packet(0x7E, 0)...)
	r.waitFor("queue 3 halted", 2*time.Second, func() bool {
		return r.qs[3].status()&abi.REG_MES_QUERY_STATUS__HAS_WORK_MASK != 0 && r.qs[3].status()&abi.REG_MES_QUERY_STATUS__MAPPED_MASK == 0 &&
			r.mes.Status().Unmaps > 0
	})
	r.qs[0].submit(pm4.WaitMem(r.gate, 1)...)
	r.qs[0].job(0)
	r.waitFor("queue 0 mapped", 2*time.Second, func() bool { return r.qs[0].status()&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0 })
	r.qs[1].job(0)
	r.qs[2].job(0)
	r.waitFor("queues 1, 2 waiting", 2*time.Second, func() bool {
		return r.qs[1].status()&abi.REG_MES_QUERY_STATUS__HAS_WORK_MASK != 0 && r.qs[2].status()&abi.REG_MES_QUERY_STATUS__HAS_WORK_MASK != 0
	})
	return r
}

// save pauses the CP and the scheduler and reads both.
func (r *tablesRig) save(t testing.TB) (State, cp.State) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; {
		if err := r.cp.Pause(time.Second); err != nil {
			t.Fatal(err)
		}
		resume, err := r.mes.Pause(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := r.mes.SaveState()
		var cs cp.State
		if err == nil {
			cs, err = r.cp.SaveState()
		}
		resume()
		r.cp.Unpause()
		if err == nil {
			return ms, cs
		}
		if testing.Verbose() {
			t.Logf("retry: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
}

// restoreInto builds a fresh rig with r's memory and restores the states into it.
func (r *tablesRig) restoreInto(t *testing.T, ms State, cs cp.State) (*rig, error) {
	r2 := newRig(t)
	r2.wreg(abi.REG_MES_RING_ACTIVE, 0)
	r2.mem.SetBytes(0, r.mem.Bytes(0, int(r.mem.Size())))
	if err := r2.cp.RestoreState(&cs); err != nil {
		return r2, err
	}
	return r2, r2.mes.RestoreState(ms)
}

// TestSnapshotTables: the tables, a mapped queue's slot and the unmapped queues' pending work
// survive a save and a restore into another scheduler on another CP; there the queues run on.
func TestSnapshotTables(t *testing.T) {
	r := newTablesRig(t)
	ms, cs := r.save(t)
	if len(ms.Tables.Procs) != 2 || len(ms.Tables.Gangs) != 4 || len(ms.Tables.Queues) != 4 || !cs.Slots[1].Mapped {
		t.Fatalf("saved %d processes, %d gangs, %d queues, slot 1 mapped %v", len(ms.Tables.Procs),
			len(ms.Tables.Gangs), len(ms.Tables.Queues), cs.Slots[1].Mapped)
	}
	states := map[uint8]int{}
	for _, q := range ms.Tables.Queues {
		switch {
		case q.State == QueueUnmapped && q.Wptr > q.Rptr, q.State == QueueMapped && q.Slot == 1, q.State == QueueHalted && q.ErrCode != 0:
			states[q.State]++
		}
	}
	if states[QueueUnmapped] != 2 || states[QueueMapped] != 1 || states[QueueHalted] != 1 {
		t.Fatalf("saved queues: %d unmapped with work, %d mapped, %d halted; want 2, 1, 1", states[QueueUnmapped],
			states[QueueMapped], states[QueueHalted])
	}
	b, _ := ms.MarshalBinary()
	dec, err := DecodeState(bytes.NewReader(b))
	if err != nil || !reflect.DeepEqual(dec, ms) {
		t.Fatalf("encoding round trip: %v", err)
	}
	before := r.mes.Status()
	r2, err := r.restoreInto(t, dec, cs)
	if err != nil {
		t.Fatal(err)
	}
	after := r2.mes.Status()
	if !reflect.DeepEqual(after.QueueList, before.QueueList) || after.Owned != before.Owned || after.Processes != 2 {
		t.Errorf("restored status\n%+v\nsaved\n%+v", after.QueueList, before.QueueList)
	}
	for i := range 3 {
		r.qs[i].r = r2
	}
	r2.mem.Store32(r.gate, 1) // the parked queue goes on; then the waiting ones get the slot
	for i := range 3 {
		r2.waitFor("job of queue "+string(rune('0'+i)), 5*time.Second, func() bool { return r.qs[i].done(0) })
	}
	r.qs[1].job(1)
	r2.waitFor("a new job after the restore", 5*time.Second, func() bool { return r.qs[1].done(1) })
	if st := r.qs[3].status(); st&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0 {
		t.Errorf("the halted queue was mapped after the restore: %#x", st)
	}
}

// TestRestoreTablesRefusals: edited tables are refused with ErrBadState and start nothing.
func TestRestoreTablesRefusals(t *testing.T) {
	r := newTablesRig(t)
	ms, cs := r.save(t)
	mapped := -1
	for i, q := range ms.Tables.Queues {
		if q.Slot >= 0 {
			mapped = i
		}
	}
	if mapped < 0 {
		t.Fatal("no mapped queue saved")
	}
	for _, tc := range []struct {
		name string
		edit func(*Tables)
	}{
		{"two queues on one slot", func(tb *Tables) { tb.Queues[(mapped+1)%4].Slot, tb.Queues[(mapped+1)%4].State = 1, QueueMapped }},
		{"a slot not the scheduler's", func(tb *Tables) { tb.Queues[mapped].Slot = 5 }},
		{"a slot beyond the CP", func(tb *Tables) { tb.Queues[mapped].Slot = 40 }},
		{"mapped without a slot", func(tb *Tables) { tb.Queues[mapped].Slot = -1 }},
		{"a doorbell twice", func(tb *Tables) { tb.Queues[1].Doorbell = tb.Queues[0].Doorbell }},
		{"a doorbell beyond the BAR", func(tb *Tables) { tb.Queues[1].Doorbell = 1 << 20 }},
		{"an odd doorbell", func(tb *Tables) { tb.Queues[1].Doorbell = 17 }},
		{"the ring's doorbell", func(tb *Tables) { tb.Queues[1].Doorbell = 4 }},
		{"a VMID not the scheduler's", func(tb *Tables) { tb.Procs[0].VMID = 3 }},
		{"a VMID held twice", func(tb *Tables) { tb.Procs[0].VMID, tb.Procs[1].VMID = 9, 9 }},
		{"a gang beyond the table", func(tb *Tables) { tb.Queues[0].Gang = 99 }},
		{"a process beyond the table", func(tb *Tables) { tb.Gangs[0].Proc = 99 }},
		{"a process without a queue", func(tb *Tables) { tb.Procs = append(tb.Procs, ProcRecord{Ctx: 0x7700}) }},
		{"a priority level beyond the API", func(tb *Tables) { tb.Gangs[0].Level = abi.MES_PRIORITY_LEVELS }},
		{"an unknown state", func(tb *Tables) { tb.Queues[1].State = 9 }},
		{"a graphics queue without the graphics slot", func(tb *Tables) { tb.Queues[1].Type = abi.MES_QUEUE_TYPE_GFX }},
		{"an SDMA queue", func(tb *Tables) { tb.Queues[1].Type = abi.MES_QUEUE_TYPE_SDMA }},
		{"wptr behind rptr", func(tb *Tables) { tb.Queues[1].Rptr = tb.Queues[1].Wptr + 1 }},
		{"a context record outside the gang's page", func(tb *Tables) { tb.Queues[1].Ctx += 0x10000 }},
		{"too many saved dispatches", func(tb *Tables) { tb.Queues[1].Dispatches = make([]DispatchRecord, cp.MaxSavedDispatches+1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ms
			s.Tables = Tables{Procs: append([]ProcRecord(nil), ms.Tables.Procs...), Gangs: append([]GangRecord(nil), ms.Tables.Gangs...),
				Queues: append([]QueueRecord(nil), ms.Tables.Queues...)}
			tc.edit(&s.Tables)
			r2, err := r.restoreInto(t, s, cs)
			if !errors.Is(err, ErrBadState) {
				t.Fatalf("%v, want ErrBadState", err)
			}
			if r2.rreg(abi.REG_MES_RING_ACTIVE) != 0 {
				t.Error("a refused restore started the scheduler")
			}
		})
	}
	// The CP without the mapped queue the tables name.
	cs2 := cs
	cs2.Slots[1] = cp.SlotState{}
	if _, err := r.restoreInto(t, ms, cs2); !errors.Is(err, ErrBadState) {
		t.Errorf("tables naming a slot the CP has empty: %v", err)
	}
}

// FuzzDecodeState: any bytes decode to a State or ErrBadEncoding, never a panic, and what
// decodes is refused or restored by a fresh scheduler without a panic.
func FuzzDecodeState(f *testing.F) {
	r := newTablesRig(f)
	ms, _ := r.save(f)
	b, _ := ms.MarshalBinary()
	f.Add(b)
	idle, _ := pausedState(f, newRig(f).mes)
	b, _ = idle.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeState(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrBadEncoding) {
				t.Fatalf("decode: %v", err)
			}
			return
		}
		r2 := newRig(t)
		r2.wreg(abi.REG_MES_RING_ACTIVE, 0)
		if err := r2.mes.RestoreState(s); err != nil && !errors.Is(err, ErrBadState) {
			t.Fatalf("restore: %v", err)
		}
	})
}

// TestSnapshotTablesWhileSwitching saves a scheduler whose three queues take turns on one
// slot (100 µs quanta), all three parked on a gate that opens only after the save: every
// state saved —
// whatever the moment — restores (a state the scheduler reached is never refused), and the
// restored scheduler runs the saved work to the end.
func TestSnapshotTablesWhileSwitching(t *testing.T) {
	r := newRig(t)
	r.hwResources(0x1, 0, 0xFF00)
	var qs []*testQueue
	for i := range 3 {
		q := r.queueAt(i, 0)
		q.add(abi.MES_PRIORITY_NORMAL, 1000) // 100 µs
		qs = append(qs, q)
	}
	tr := &tablesRig{rig: r, gate: queueBase - 0x100}
	waiting := 0
	for seq := range uint32(20) {
		for _, q := range qs {
			q.submit(pm4.WaitMem(tr.gate, seq+1)...)
			q.job(seq)
		}
		time.Sleep(time.Duration(seq%5) * 100 * time.Microsecond)
		ms, cs := tr.save(t)
		r2, err := tr.restoreInto(t, ms, cs)
		if err != nil {
			t.Fatalf("a saved state was refused: %v", err)
		}
		r2.mem.Store32(tr.gate, seq+1)
		r.mem.Store32(tr.gate, seq+1)
		for _, q := range ms.Tables.Queues {
			if q.State == QueueUnmapped && q.Wptr > q.Rptr {
				waiting++
				break
			}
		}
		// Its saved work runs to the end: every queue's rptr reaches its saved wptr.
		for i := range ms.Tables.Queues {
			q := ms.Tables.Queues[i]
			r2.waitFor("restored queue's work", 5*time.Second, func() bool {
				r2.wreg(abi.REG_MES_QUERY_DOORBELL, q.Doorbell)
				rp := uint64(r2.rreg(abi.REG_MES_QUERY_RPTR_LO)) | uint64(r2.rreg(abi.REG_MES_QUERY_RPTR_HI))<<32
				return rp >= q.Wptr
			})
		}
		r.waitFor("the jobs", 5*time.Second, func() bool { return qs[0].done(seq) && qs[1].done(seq) && qs[2].done(seq) })
	}
	t.Logf("20 snapshots of a switching scheduler restored, %d with a queue waiting for the slot", waiting)
	if waiting == 0 {
		t.Error("no snapshot caught a queue waiting for the slot")
	}
}

// TestSnapshotHungThenReset: a queue hung in its slot (the endless kernel) is inside a
// packet, so the CP refuses the snapshot (cp.ErrBusy); once RESET has discarded its work the
// scheduler is saved, and after the restore the reset queue and the one that waited run new
// work.
func TestSnapshotHungThenReset(t *testing.T) {
	r := newRig(t)
	r.hwResources(0x1, 0, 0xFF00)
	cfg := newFrame(abi.MES_SCH_API_SET_SCHEDULING_CONFIG)
	for l := uint64(0); l < abi.MES_PRIORITY_LEVELS; l++ {
		cfg.set64(abi.MES_SCHED_CFG_DW_GRACE_PERIOD_OTHER_LEVELS+2*l, 50000) // 5 ms
	}
	r.ok(cfg, abi.MES_SCHED_CFG_DW_API_STATUS)
	bad, good := r.queueAt(0, 0), r.queueAt(1, 0)
	bad.add(abi.MES_PRIORITY_NORMAL, 1000) // 100 µs quanta: good's wait preempts bad, which hangs
	bad.submit(pm4.Kernel(abi.KERNEL_ENDLESS, 0, 0, 0)...)
	bad.submit(pm4.DispatchDirect(1, 1, 1)...)
	r.waitFor("bad mapped", 2*time.Second, func() bool { return bad.status()&abi.REG_MES_QUERY_STATUS__MAPPED_MASK != 0 })
	good.add(abi.MES_PRIORITY_NORMAL, 1000)
	good.job(0)
	r.waitFor("bad hung", 5*time.Second, func() bool { return bad.status()&abi.REG_MES_QUERY_STATUS__HUNG_MASK != 0 })
	if err := r.cp.Pause(time.Second); err != nil {
		t.Fatal(err)
	}
	resume, err := r.mes.Pause(time.Second)
	if err != nil {
		r.cp.Unpause()
		t.Fatal(err)
	}
	ms, err := r.mes.SaveState()
	if err == nil {
		_, err = r.cp.SaveState()
	}
	resume()
	r.cp.Unpause()
	if !errors.Is(err, cp.ErrBusy) {
		t.Fatalf("snapshot with a hung queue: %v, want cp.ErrBusy", err)
	}
	if n := len(ms.Tables.Queues); n != 2 || ms.Tables.Queues[0].State != QueueHung || ms.Tables.Queues[0].Slot != 1 {
		t.Fatalf("the scheduler's own tables: %d queues, first %+v", n, ms.Tables.Queues[0].QueueFields.State)
	}
	rst := newFrame(abi.MES_SCH_API_RESET).set(abi.MES_RESET_DW_FLAGS, abi.MES_RESET_FLAG_RESET_QUEUE_ONLY_MASK).
		set(abi.MES_RESET_DW_DOORBELL_OFFSET, bad.db)
	r.ok(rst, abi.MES_RESET_DW_API_STATUS)
	r.waitFor("good job", 5*time.Second, func() bool { return good.done(0) })
	tr := &tablesRig{rig: r}
	ms, cs := tr.save(t)
	if q := ms.Tables.Queues[0]; q.State == QueueHung || q.Rptr != q.Wptr || q.ErrCode != 0 {
		t.Errorf("the reset queue saved as state %d, rptr %d wptr %d, error %d", q.State, q.Rptr, q.Wptr, q.ErrCode)
	}
	r2, err := tr.restoreInto(t, ms, cs)
	if err != nil {
		t.Fatal(err)
	}
	bad.r, good.r = r2, r2
	bad.job(1)
	good.job(1)
	r2.waitFor("jobs after the restore", 5*time.Second, func() bool { return bad.done(1) && good.done(1) })
	if r2.rreg(abi.REG_MES_HUNG) != 0 {
		t.Errorf("MES_HUNG %d after the restore", r2.rreg(abi.REG_MES_HUNG))
	}
}
