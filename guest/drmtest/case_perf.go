package main

import (
	"fmt"
	"time"

	"vgpu/guest/drmtest/drm"
)

// Sizes of the measurement: enough jobs for a median and a p99 under TCG, bounded in time.
const (
	perfThroughputJobs = 3000
	perfRounds         = 3                // throughput rounds, user queue and kernel queue in turn; the median is reported
	perfLatencyJobs    = 200              // per round
	perfBudget         = 20 * time.Second // per figure: stop early and measure what ran
)

// perfUserqVsKQ measures, in the same boot, an empty job through a user queue (ring, wptr,
// doorbell; completion seen by polling the user fence the job's RELEASE_MEM writes) against
// an empty SUBMIT on the kernel queue (completion through its out syncobj). It reports the
// figures; it fails only if they could not be measured (speed is reported, not asserted).
func perfUserqVsKQ(t *T) {
	d := openDev(t)
	s, err := d.SyncobjCreate(0)
	t.Check(err, "syncobj create")
	for i := 0; i < 20; i++ {
		t.Check(kqJob(d, s), "kernel-queue warm-up job")
	}
	q := newQueue(t, d, drm.QueueConfig{RingBytes: 256 << 10})
	for i := 0; i < 20; i++ { // warm up: first mappings, MES placement
		run(t, q)
	}
	// Latency in alternating rounds too: each path's samples are pooled over the rounds.
	var uLat, kLat []time.Duration
	for r := 0; r < perfRounds; r++ {
		kl, err := kqLatency(d, s)
		t.Check(err, "kernel-queue latency, round %d", r)
		ul, err := userqLatency(q)
		t.Check(err, "user-queue latency, round %d", r)
		kLat, uLat = append(kLat, kl...), append(uLat, ul...)
	}
	k := stats(kLat)
	t.Perf("kq_latency_median_us", round(us(k.median)), "us")
	t.Perf("kq_latency_p99_us", round(us(k.p99)), "us")
	// Throughput in alternating rounds, so both paths see the same host conditions.
	var uRounds, kRounds []float64
	for r := 0; r < perfRounds; r++ {
		uj, err := userqThroughput(q)
		t.Check(err, "user-queue throughput, round %d", r)
		kj, err := kqThroughput(d, s)
		t.Check(err, "kernel-queue throughput, round %d", r)
		uRounds, kRounds = append(uRounds, uj), append(kRounds, kj)
	}
	uJobs, kJobs := median(uRounds), median(kRounds)
	t.Logf("throughput rounds: userq %v jobs/s, kq %v jobs/s", roundAll(uRounds), roundAll(kRounds))
	t.Perf("kq_jobs_per_s", round(kJobs), "jobs/s")
	u := stats(uLat)
	t.Perf("userq_jobs_per_s", round(uJobs), "jobs/s")
	t.Perf("userq_latency_median_us", round(us(u.median)), "us")
	t.Perf("userq_latency_p99_us", round(us(u.p99)), "us")
	jr, lr, line := ratioLine(uJobs, kJobs, u.median, k.median)
	t.Perf("userq_vs_kq_jobs_ratio", round(jr), "x")
	t.Perf("userq_vs_kq_latency_ratio", round(lr), "x")
	t.Logf("%s (%d user-queue, %d kernel-queue latency samples)", line, len(uLat), len(kLat))
	if uJobs <= 0 || kJobs <= 0 || u.median <= 0 || k.median <= 0 {
		t.Errorf("a figure is missing: userq %.0f jobs/s, %v; kq %.0f jobs/s, %v", uJobs, u.median, kJobs, k.median)
	}
}

func round(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

func roundAll(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = round(x)
	}
	return out
}

// userqThroughput submits empty jobs back to back (waiting only when the ring is full) and
// waits for the last: jobs per second.
func userqThroughput(q *drm.Queue) (float64, error) {
	start := time.Now()
	var end uint64
	n := 0
	for ; n < perfThroughputJobs && time.Since(start) < perfBudget; n++ {
		e, err := q.Job()
		if err != nil { // ring full (not with 256 KiB of 10-dword jobs): drain, then go on
			if err := q.WaitUserFence(end, jobTimeout); err != nil {
				return 0, err
			}
			if e, err = q.Job(); err != nil {
				return 0, err
			}
		}
		end = e
	}
	if err := q.WaitUserFence(end, jobTimeout); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// userqLatency is submit-to-seen of single empty jobs.
func userqLatency(q *drm.Queue) ([]time.Duration, error) {
	var lat []time.Duration
	start := time.Now()
	for i := 0; i < perfLatencyJobs && time.Since(start) < perfBudget; i++ {
		t0 := time.Now()
		end, err := q.Job()
		if err != nil {
			return nil, err
		}
		if err := q.WaitUserFence(end, jobTimeout); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

func kqJob(d *drm.Device, s uint32) error {
	sub := drm.Submit{Out_syncobj: s}
	if err := d.Submit(&sub); err != nil {
		return err
	}
	if err := d.SyncobjWait([]uint32{s}, jobTimeout, 0); err != nil {
		return fmt.Errorf("wait for kernel-queue job %d: %w", sub.Seqno, err)
	}
	return nil
}

// kqThroughput submits empty jobs back to back, each replacing the syncobj's fence, and
// waits for the last.
func kqThroughput(d *drm.Device, s uint32) (float64, error) {
	start := time.Now()
	n := 0
	for ; n < perfThroughputJobs && time.Since(start) < perfBudget; n++ {
		sub := drm.Submit{Out_syncobj: s}
		if err := d.Submit(&sub); err != nil {
			return 0, err
		}
	}
	if err := d.SyncobjWait([]uint32{s}, jobTimeout, 0); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func kqLatency(d *drm.Device, s uint32) ([]time.Duration, error) {
	var lat []time.Duration
	start := time.Now()
	for i := 0; i < perfLatencyJobs && time.Since(start) < perfBudget; i++ {
		t0 := time.Now()
		if err := kqJob(d, s); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}
