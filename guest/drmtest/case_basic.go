package main

import (
	"errors"

	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"

	"golang.org/x/sys/unix"
)

// userqBasic: create a queue, run jobs through ring + wptr + doorbell, see their writes and
// their fences (the user fence by polling, the driver's through SIGNAL and a syncobj wait),
// free it.
func userqBasic(t *T) {
	d := openDev(t)
	t.Logf("INFO: VRAM %d MiB (%d visible), VA [%#x, %#x), %d HQD slots, doorbell page %d, eop %d/%d, ip mask %#x",
		d.Info.Vram_size>>20, d.Info.Vram_visible_size>>20, d.Info.Va_start, d.Info.Va_end,
		d.Info.Num_hqd_slots, d.Info.Doorbell_page_size, d.Info.Eop_size, d.Info.Eop_alignment, d.Info.Userq_ip_mask)
	if d.Info.Userq_ip_mask&(1<<drm.VGPU_HW_IP_COMPUTE) == 0 {
		t.Fatalf("INFO userq_ip_mask %#x has no compute", d.Info.Userq_ip_mask)
	}
	q := newQueue(t, d, drm.QueueConfig{})
	if q.FenceVA == 0 || q.FenceVA%8 != 0 {
		t.Errorf("CREATE returned fence_va %#x: want a non-zero, 8-byte aligned VA", q.FenceVA)
	}
	const jobs = 32
	var end uint64
	for i := 0; i < jobs; i++ {
		var err error
		end, err = q.Job(pm4.WriteMem(q.ScratchVA(i), uint32(0xC0DE0000+i), uint32(i)))
		t.Check(err, "job %d", i)
	}
	t.Check(q.WaitUserFence(end, jobTimeout), "wait for %d jobs", jobs)
	for i := 0; i < jobs; i++ {
		if got, want := q.Scratch(i), uint64(i)<<32|uint64(0xC0DE0000+i); got != want {
			t.Errorf("job %d wrote %#x, want %#x", i, got, want)
		}
	}
	if got := q.UserFence(); got != end {
		t.Errorf("user fence %d after the last job, want its end %d", got, end)
	}
	// The driver's fence: SIGNAL at the current wptr (all jobs done), then one more job.
	s, err := d.SyncobjCreate(0)
	t.Check(err, "syncobj create")
	end2, err := q.Job(pm4.WriteMem(q.ScratchVA(jobs), 7))
	t.Check(err, "job")
	t.Check(d.Signal(q.ID, []uint32{s}, nil), "USERQ_SIGNAL")
	t.Check(d.SyncobjWait([]uint32{s}, jobTimeout, 0), "wait for the SIGNAL fence (seqno %d) on its syncobj", end2)
	t.Check(q.WaitUserFence(end2, jobTimeout), "wait")
	if st, err := d.QueryStatus(q.ID); err != nil || st != 0 {
		t.Errorf("QUERY_STATUS of a healthy queue: flags %#x, %v; want 0, nil", st, err)
	}
	if r := q.Rptr(); r > q.Wptr() {
		t.Errorf("reported rptr %d beyond wptr %d", r, q.Wptr())
	}
	id := q.ID
	t.Check(q.Free(), "FREE")
	if err := d.FreeQueue(id); !errors.Is(err, unix.ENOENT) {
		t.Errorf("second FREE of queue %d: %v, want ENOENT", id, err)
	}
	if _, err := d.QueryStatus(id); !errors.Is(err, unix.ENOENT) {
		t.Errorf("QUERY_STATUS of a freed queue: %v, want ENOENT", err)
	}
}
