package main

import (
	"time"

	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
)

// userqPriority: every priority level creates a queue that runs; with more LOW queues parked
// on a gate than MES has slots, a HIGH queue's job still completes (MES makes room for it)
// while they wait; opening the gate completes them all.
func userqPriority(t *T) {
	d := openDev(t)
	for _, p := range []uint32{drm.VGPU_USERQ_PRIORITY_NORMAL_LOW, drm.VGPU_USERQ_PRIORITY_LOW,
		drm.VGPU_USERQ_PRIORITY_NORMAL_HIGH, drm.VGPU_USERQ_PRIORITY_HIGH} {
		q := newQueue(t, d, drm.QueueConfig{Priority: p})
		run(t, q, pm4.WriteMem(q.ScratchVA(0), 0x100+p))
		if got := q.Scratch(0); got != uint64(0x100+p) {
			t.Errorf("priority %d queue wrote %#x, want %#x", p, got, 0x100+p)
		}
		t.Check(q.Free(), "free the priority %d queue", p)
	}

	gate := newQueue(t, d, drm.QueueConfig{}) // holds the gate word (scratch 0), idle
	n := int(d.Info.Num_hqd_slots) + 2
	low := make([]*drm.Queue, n)
	ends := make([]uint64, n)
	for i := range low {
		low[i] = newQueue(t, d, drm.QueueConfig{Priority: drm.VGPU_USERQ_PRIORITY_LOW})
		var err error
		ends[i], err = low[i].Job(pm4.WaitMem(gate.ScratchVA(0), 1), pm4.WriteMem(low[i].ScratchVA(0), uint32(i+1)))
		t.Check(err, "LOW queue %d", i)
	}
	high := newQueue(t, d, drm.QueueConfig{Priority: drm.VGPU_USERQ_PRIORITY_HIGH})
	run(t, high, pm4.WriteMem(high.ScratchVA(0), 0x4816))
	if got := high.Scratch(0); got != 0x4816 {
		t.Errorf("HIGH queue wrote %#x beside %d gated LOW queues, want 0x4816", got, n)
	}
	for i, q := range low {
		if got := q.Scratch(0); got != 0 {
			t.Errorf("LOW queue %d passed its closed gate (wrote %d)", i, got)
		}
	}
	gate.SetScratch(0, 1)
	for i, q := range low {
		if err := q.WaitUserFence(ends[i], jobTimeout+time.Duration(n)*time.Second); err != nil {
			t.Errorf("LOW queue %d after the gate opened: %v", i, err)
		} else if got := q.Scratch(0); got != uint64(i+1) {
			t.Errorf("LOW queue %d wrote %d, want %d", i, got, i+1)
		}
	}
}
