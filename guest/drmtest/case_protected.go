package main

import (
	"time"

	"vgpu/abi"
	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
)

// copyFence is a COPY_DATA of the 64-bit value at src (read through memory, bypassing L2)
// to dst: how a queue reads its fence slot, which the process can map only on the GPU.
func copyFence(src, dst uint64) []uint32 {
	return pm4.CopyData{SrcSel: abi.PM4_COPY_DATA_SEL_TC_L2, DstSel: abi.PM4_COPY_DATA_SEL_TC_L2,
		Src: src, Dst: dst, Bits64: true, SrcPolicy: abi.PM4_CACHE_POLICY_BYPASS, DstPolicy: abi.PM4_CACHE_POLICY_BYPASS}.Encode()
}

// protectedFence: PROTECTED_FENCE_SIGNAL advances the queue's fence slot (read back through
// the GPU: the slot is read-only in the VM); a WRITE_DATA to the slot from the queue faults,
// the driver reports the queue (QUERY_STATUS), the slot keeps its value, and the file's other
// queue goes on.
func protectedFence(t *T) {
	d := openDev(t)
	q := newQueue(t, d, drm.QueueConfig{})
	end1 := run(t, q) // its PROTECTED_FENCE_SIGNAL writes end1 to the slot
	end2 := run(t, q, copyFence(q.FenceVA, q.ScratchVA(0)))
	if got := q.Scratch(0); got != end1 {
		t.Errorf("fence slot %d after a job ending at %d (read by COPY_DATA)", got, end1)
	}
	// The driver sees the same slot: a SIGNAL fence at the current wptr completes.
	s, err := d.SyncobjCreate(0)
	t.Check(err, "syncobj create")
	t.Check(d.Signal(q.ID, []uint32{s}, nil), "USERQ_SIGNAL")
	t.Check(d.SyncobjWait([]uint32{s}, jobTimeout, 0), "SIGNAL fence after a completed job")
	value := end2 // the copy job's own PROTECTED_FENCE_SIGNAL

	// A direct write to the slot from the queue: a write-permission fault.
	other := newQueue(t, d, drm.QueueConfig{})
	bad, err := q.Job(pm4.WriteMem(q.FenceVA, 0xBAD, 0xBAD))
	t.Check(err, "submit the faulting write")
	var st uint32
	deadline := time.Now().Add(jobTimeout)
	for time.Now().Before(deadline) {
		if st, err = d.QueryStatus(q.ID); err != nil || st != 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Check(err, "QUERY_STATUS of the faulted queue")
	if st == 0 {
		t.Errorf("queue %d wrote its read-only fence slot (job ending at %d) and QUERY_STATUS still reports 0 after %v", q.ID, bad, jobTimeout)
	} else {
		t.Logf("after the write to the fence slot QUERY_STATUS reports %#x", st)
	}
	if q.UserFence() >= bad {
		t.Errorf("the job writing the fence slot completed (user fence %d ≥ %d)", q.UserFence(), bad)
	}
	run(t, other, copyFence(q.FenceVA, other.ScratchVA(0)))
	if got := other.Scratch(0); got != value {
		t.Errorf("fence slot %#x after the refused write, want %#x still", got, value)
	}
}
