package main

import (
	"time"

	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
)

// hangWait bounds the wait for the driver's hang detection: userq_timeout_ms (2 s by
// default) plus MES's reset, under TCG.
const hangWait = 30 * time.Second

// userqHang: a job that can never finish (a WAIT_REG_MEM on a value nothing writes) with a
// SIGNAL fence pending on one queue, while the file's other queue keeps running jobs. After
// the driver's timeout QUERY_STATUS says HUNG, the fence completes (with an error), and the
// other queue still runs.
func userqHang(t *T) {
	d := openDev(t)
	hung := newQueue(t, d, drm.QueueConfig{})
	good := newQueue(t, d, drm.QueueConfig{})
	if _, err := hung.Job(pm4.WaitMem(hung.ScratchVA(0), 0xDEAD)); err != nil {
		t.Fatalf("submit the endless job: %v", err)
	}
	s, err := d.SyncobjCreate(0)
	t.Check(err, "syncobj create")
	t.Check(d.Signal(hung.ID, []uint32{s}, nil), "USERQ_SIGNAL on the endless queue")

	start := time.Now()
	var st uint32
	for i := 0; ; i++ {
		run(t, good, pm4.WriteMem(good.ScratchVA(0), uint32(i)))
		if got := good.Scratch(0); got != uint64(i) {
			t.Fatalf("the healthy queue's job %d wrote %d", i, got)
		}
		st, err = d.QueryStatus(hung.ID)
		t.Check(err, "QUERY_STATUS of the endless queue")
		if st&drm.VGPU_USERQ_QUERY_STATUS_FLAGS_HUNG != 0 {
			t.Logf("HUNG (flags %#x) after %v; the healthy queue ran %d jobs meanwhile", st, time.Since(start).Round(time.Millisecond), i+1)
			break
		}
		if time.Since(start) > hangWait {
			t.Fatalf("the endless queue is not reported HUNG after %v (flags %#x)", hangWait, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := d.SyncobjWait([]uint32{s}, jobTimeout, 0); err != nil {
		t.Errorf("the hung queue's SIGNAL fence did not complete after the reset: %v", err)
	}
	if st, err := d.QueryStatus(good.ID); err != nil || st != 0 {
		t.Errorf("the healthy queue's QUERY_STATUS: %#x, %v; want 0", st, err)
	}
	run(t, good, pm4.WriteMem(good.ScratchVA(1), 0x600D))
	if got := good.Scratch(1); got != 0x600D {
		t.Errorf("the healthy queue after the reset wrote %#x", got)
	}
	if hung.UserFence() != 0 {
		t.Errorf("the endless job's user fence moved to %d", hung.UserFence())
	}
	t.Check(hung.Free(), "FREE of the hung queue")
}
