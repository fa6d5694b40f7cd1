package main

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
)

const (
	manyProcs  = 4
	manyQueues = 16
	manyJobs   = 12
)

// userqMany: 4 processes × 16 queues (more than MES has slots), each queue a run of jobs;
// every job's write lands and each queue's jobs complete in order.
func userqMany(t *T) {
	var wg sync.WaitGroup
	for p := 0; p < manyProcs; p++ {
		c, err := startChild("many", []string{strconv.Itoa(p)})
		t.Check(err, "start process %d", p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.expect("ok", 3*time.Minute); err != nil {
				t.Errorf("process %d: %v", p, err)
			}
			if err := c.wait(jobTimeout); err != nil {
				t.Errorf("process %d: %v", p, err)
			}
		}()
	}
	wg.Wait()
}

// doorbellUse is the driver's doorbell-page line of vgpu_bos, to explain an ENOSPC.
func doorbellUse() string {
	b, err := readDebugfs("vgpu_bos")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(b, "\n") {
		if strings.Contains(l, "doorbell pages") {
			return " (vgpu_bos: " + strings.TrimSpace(l) + ")"
		}
	}
	return ""
}

// childMany is one process of userq_many. Job j of a queue first checks that job j-1's write
// is there (a WAIT_REG_MEM that holds only then), then writes j: out of order, a queue would
// stop at a wait and time out.
func childMany(args []string) error {
	d, err := drm.Open(drm.RenderNode)
	if err != nil {
		return err
	}
	defer d.Close()
	qs := make([]*drm.Queue, manyQueues)
	for i := range qs {
		if qs[i], err = d.NewQueue(drm.QueueConfig{RingBytes: 16 << 10}); err != nil {
			return fmt.Errorf("process %s, queue %d: %w%s", args[0], i, err, doorbellUse())
		}
	}
	ends := make([]uint64, manyQueues)
	for j := 0; j < manyJobs; j++ {
		for i, q := range qs {
			var wait []uint32
			if j > 0 {
				wait = pm4.WaitMem(q.ScratchVA(j-1), uint32(j-1+1000))
			}
			ends[i], err = q.Job(wait, pm4.WriteMem(q.ScratchVA(j), uint32(j+1000)))
			if err != nil {
				return fmt.Errorf("queue %d job %d: %w", i, j, err)
			}
		}
	}
	for i, q := range qs {
		if err := q.WaitUserFence(ends[i], 2*time.Minute); err != nil {
			return fmt.Errorf("process %s: %w", args[0], err)
		}
		for j := 0; j < manyJobs; j++ {
			if got := q.Scratch(j); uint32(got) != uint32(j+1000) {
				return fmt.Errorf("process %s queue %d job %d wrote %d, want %d", args[0], i, j, got, j+1000)
			}
		}
		if st, err := d.QueryStatus(q.ID); err != nil || st != 0 {
			return fmt.Errorf("queue %d: QUERY_STATUS %#x, %v", i, st, err)
		}
	}
	for i, q := range qs {
		if err := q.Free(); err != nil {
			return fmt.Errorf("free queue %d: %w", i, err)
		}
	}
	tell("ok")
	return nil
}
