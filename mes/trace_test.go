package mes

import (
	"path/filepath"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/trace"
)

// newTracedRig is newRig with the CP and the scheduler recording on rec from the start.
func newTracedRig(t *testing.T, rec *trace.Recorder) *rig {
	t.Helper()
	r := &rig{t: t, mem: cptest.NewMemory(4 << 20), regs: cptest.NewRegisters(), ivs: cptest.NewInterrupts(),
		vm: &vmRecorder{bound: map[int]VMContext{}}}
	var m *MES
	r.cp = cp.New(cp.Config{Memory: r.mem, Registers: r.regs, Interrupts: r.ivs, Notify: func(slot int) { m.Notify(slot) }})
	r.cp.SetTrace(rec)
	m = New(Config{Memory: r.mem, Registers: r.regs, Interrupts: r.ivs, Slots: r.cp, VM: r.vm, Doorbells: 2048})
	m.SetTrace(rec)
	r.mes = m
	r.mem.SetOnWrite(r.cp.Wake)
	t.Cleanup(func() { m.Close(); r.cp.Close() })
	r.wreg(abi.REG_MES_RING_BASE_LO, ringBase)
	r.wreg(abi.REG_MES_RING_CONTROL, 13)
	r.wreg(abi.REG_MES_RING_DOORBELL, 4<<abi.REG_MES_RING_DOORBELL__OFFSET__SHIFT|abi.REG_MES_RING_DOORBELL__EN_MASK)
	r.wreg(abi.REG_MES_RING_ACTIVE, 1)
	return r
}

// TestTraceScheduler: four queues on two slots, recorded: the MES track has the frames and
// the maps and unmaps, balanced, and the slots' tracks the queues' runs.
func TestTraceScheduler(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mes.pftrace")
	rec, err := trace.Create(path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := newTracedRig(t, rec)
	r.hwResources(0x3, 0, 0xFFFE) // two slots
	qs := make([]*testQueue, 4)
	for i := range qs {
		qs[i] = r.queueAt(i, 0)
		qs[i].add(abi.MES_PRIORITY_NORMAL, 1000)
	}
	for j := uint32(0); j < 5; j++ {
		for _, q := range qs {
			q.job(j)
		}
	}
	r.waitFor("every job", 20*time.Second, func() bool {
		for _, q := range qs {
			if !q.done(4) {
				return false
			}
		}
		return true
	})
	for _, q := range qs {
		if q.remove() == 0 {
			t.Fatalf("REMOVE_QUEUE failed: %#x", r.rreg(abi.REG_MES_LAST_ERROR))
		}
	}
	r.mes.Close() // its goroutine's last events are in before the file is closed
	r.cp.Close()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	tl, err := trace.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if tl.Unmatched != 0 || tl.Unfinished != 0 {
		t.Errorf("unbalanced: %d unmatched ends, %d unfinished", tl.Unmatched, tl.Unfinished)
	}
	tracks := map[uint64]string{}
	for _, tk := range tl.Tracks {
		tracks[tk.UUID] = tk.Name
	}
	n := map[string]int{}
	for _, s := range tl.Slices {
		n[tracks[s.Track]+" "+s.Name]++
	}
	for _, want := range []string{"MES SET_HW_RSRC", "MES ADD_QUEUE", "MES REMOVE_QUEUE", "MES QUERY_SCHEDULER_STATUS",
		"MES map", "MES unmap", "HQD 1 run", "HQD 1 WRITE_DATA"} {
		if n[want] == 0 {
			t.Errorf("no %q slice (slices: %v)", want, n)
		}
	}
	if n["MES ADD_QUEUE"] != 4 || n["MES REMOVE_QUEUE"] != 4 || n["MES map"] < 4 {
		t.Errorf("ADD_QUEUE %d, REMOVE_QUEUE %d, map %d: want 4, 4, ≥ 4", n["MES ADD_QUEUE"], n["MES REMOVE_QUEUE"], n["MES map"])
	}
	var events int
	for _, in := range tl.Instants {
		if tracks[in.Track] == "MES" && (in.Name == "MAP" || in.Name == "UNMAP") {
			events++
		}
	}
	if events == 0 {
		t.Error("no MAP/UNMAP event instants on the MES track")
	}
}
