package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
)

const (
	evictRounds = 4
	evictJobs   = 1024 // per queue: long enough for evictions to land among them
)

// evict writes pid (0: every client) to vgpu_evict; the write returns when the eviction is
// done, or its error.
func evict(pid int) error {
	dir, err := debugfsDir()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "vgpu_evict"), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.Itoa(pid))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// userqEvict: two queues write every job's index into a VRAM BO (CPU-visible) and a GPU-only
// VRAM BO while evictions of this process run (and once of every client); afterwards every
// job's write is there, data written before is intact, the CPU mapping still works and the
// queues still run.
func userqEvict(t *T) {
	d := openDev(t)
	vis, err := d.NewBuffer(64<<10, drm.VGPU_GEM_DOMAIN_VRAM, drm.VGPU_GEM_CREATE_CPU_ACCESS_REQUIRED, drm.RW, 4096, true)
	t.Check(err, "visible VRAM BO")
	hid, err := d.NewBuffer(64<<10, drm.VGPU_GEM_DOMAIN_VRAM, drm.VGPU_GEM_CREATE_NO_CPU_ACCESS, drm.RW, 4096, false)
	t.Check(err, "GPU-only VRAM BO")
	sys, err := d.NewBuffer(64<<10, drm.VGPU_GEM_DOMAIN_SYSTEM, 0, drm.RW, 4096, true)
	t.Check(err, "system BO")
	for i := uint64(0); i < 4096; i += 8 { // a pattern in the upper half, which no job writes
		*vis.U64(32<<10 + i) = 0x5A5A_0000_0000 | i
	}
	qs := []*drm.Queue{newQueue(t, d, drm.QueueConfig{}), newQueue(t, d, drm.QueueConfig{})}
	run(t, qs[0], pm4.DMAFill(hid.VA+32<<10, 0xF111F111, 32<<10))

	var wg sync.WaitGroup
	errs := make([]error, len(qs))
	for qi, q := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < evictJobs; j++ {
				off := uint64(qi*evictJobs+j) * 4
				end, err := q.Job(pm4.WriteMem(vis.VA+off, uint32(0xE0000+qi*evictJobs+j)),
					pm4.WriteMem(hid.VA+off, uint32(0xF0000+qi*evictJobs+j)),
					pm4.WriteMem(sys.VA+off, uint32(0xD0000+qi*evictJobs+j)))
				if err == nil {
					err = q.WaitUserFence(end, jobTimeout)
				}
				if err != nil {
					errs[qi] = fmt.Errorf("queue %d job %d: %w", qi, j, err)
					return
				}
			}
		}()
	}
	loaded := make(chan struct{})
	go func() { wg.Wait(); close(loaded) }()
	// Evict this process again and again while the jobs run (every fourth time every client),
	// at least evictRounds times.
	rounds, during := 0, 0
	for busy := true; busy || rounds < evictRounds; rounds++ {
		select {
		case <-loaded:
			busy = false
		default:
			during++
		}
		pid := os.Getpid()
		if rounds%4 == 3 {
			pid = 0
		}
		if err := evict(pid); err != nil {
			t.Errorf("eviction %d (pid %d): %v", rounds, pid, err)
		}
		if rounds > 1000 {
			t.Errorf("the load did not finish within 1000 evictions")
			break
		}
	}
	<-loaded
	t.Logf("%d evictions, %d of them while jobs ran", rounds, during)
	if during == 0 {
		t.Errorf("no eviction overlapped the jobs")
	}
	for _, err := range errs {
		if err != nil {
			t.Errorf("%v", err)
		}
	}
	t.Check(evict(os.Getpid()), "eviction after the load")
	// The GPU-only BO is read back through the GPU into the system BO's upper half.
	run(t, qs[1], pm4.DMACopy(sys.VA+32<<10, hid.VA, 32<<10), pm4.DMACopy(sys.VA+48<<10, hid.VA+32<<10, 8))
	for qi := range qs {
		for j := 0; j < evictJobs; j++ {
			k := uint64(qi*evictJobs + j)
			if got := *vis.U32(k * 4); got != uint32(0xE0000+k) {
				t.Errorf("visible VRAM word %d: %#x, want %#x", k, got, 0xE0000+k)
			}
			if got := *sys.U32(k * 4); got != uint32(0xD0000+k) {
				t.Errorf("system word %d: %#x, want %#x", k, got, 0xD0000+k)
			}
			if got := *sys.U32(32<<10 + k*4); got != uint32(0xF0000+k) {
				t.Errorf("GPU-only VRAM word %d: %#x, want %#x", k, got, 0xF0000+k)
			}
		}
	}
	for i := uint64(0); i < 4096; i += 8 {
		if got := *vis.U64(32<<10 + i); got != 0x5A5A_0000_0000|i {
			t.Errorf("visible VRAM pattern at %#x: %#x after evictions", 32<<10+i, got)
			break
		}
	}
	if got := *sys.U64(48 << 10); got != 0xF111F111_F111F111 {
		t.Errorf("GPU-only VRAM fill read back %#x after evictions", got)
	}
	for i, q := range qs {
		if st, err := d.QueryStatus(q.ID); err != nil || st != 0 {
			t.Errorf("queue %d after evictions: QUERY_STATUS %#x, %v", i, st, err)
		}
	}
	if c, err := readDebugfs("vgpu_clients"); err == nil {
		for _, l := range strings.Split(c, "\n") {
			if strings.Contains(l, "evictions") {
				t.Logf("vgpu_clients: %s", strings.TrimSpace(l))
			}
		}
	}
}
