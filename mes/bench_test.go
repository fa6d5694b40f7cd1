package mes

import (
	"testing"
	"time"

	"vgpu/abi"
)

// BenchmarkSwitch is the scheduler's side of a switch, in-process over the rig's flat memory:
// two queues of one process take turns on one slot with a one-packet job each (a doorbell
// of the unmapped queue; MES unmaps the idle one, saving it to its MQD, and maps this one),
// beside the same jobs on one queue that stays mapped, measured in the same run. The
// difference is the switch: the hop to the scheduler's goroutine, its pass, the MQD and
// context reads and writes, and the CP's new activation. It fails unless every alternating
// job was one map and the lone queue none. bench's MESSwitch is the device figure; ns/op
// (the benchmark's own clock, stopped) means nothing here.
func BenchmarkSwitch(b *testing.B) {
	alt := switchJobs(b, true, b.N)
	alone := switchJobs(b, false, b.N)
	b.ReportMetric(float64(alt.Nanoseconds())/float64(b.N), "ns/switch-job")
	b.ReportMetric(float64(alone.Nanoseconds())/float64(b.N), "ns/mapped-job")
	b.ReportMetric(float64((alt-alone).Nanoseconds())/float64(b.N), "ns/switch")
}

// switchJobs runs n jobs (alternating between two queues, or on one) on a fresh rig with one
// slot and returns the time they took; each job is waited for before the next.
func switchJobs(b *testing.B, alternate bool, n int) time.Duration {
	b.StopTimer()
	r := newRig(b)
	r.wakeOnWrite()
	r.hwResources(0x1, 0, 0xFFFE)
	// An idle grace of 10 s: the lone queue keeps its slot however slow the host is (an
	// alternating job never waits for it: a waiter takes an idle slot at once).
	cfg := newFrame(abi.MES_SCH_API_SET_SCHEDULING_CONFIG)
	for l := uint64(0); l < abi.MES_PRIORITY_LEVELS; l++ {
		cfg.set64(abi.MES_SCHED_CFG_DW_PROCESS_GRACE_PERIOD_SAME_LEVEL+2*l, 100_000_000)
	}
	r.ok(cfg, abi.MES_SCHED_CFG_DW_API_STATUS)
	qs := []*testQueue{r.queueAt(0, 0), r.queueAt(1, 0)}
	for _, q := range qs {
		q.add(abi.MES_PRIORITY_NORMAL, 0)
	}
	var seq [2]uint32
	tick := time.NewTicker(time.Millisecond) // only for the deadline: a job's write wakes the wait
	defer tick.Stop()
	run := func(n int) {
		for i := range n {
			k := 0
			if alternate {
				k = i & 1
			}
			q, s := qs[k], seq[k]
			seq[k]++
			q.job(s)
			deadline := time.Now().Add(10 * time.Second)
			for !q.done(s) {
				select {
				case <-r.wrote:
				case now := <-tick.C:
					if now.After(deadline) {
						b.Fatalf("job %d on queue %d not done after 10 s", s, k)
					}
				}
			}
		}
	}
	run(100) // both queues mapped once, A left in the slot
	maps := r.rreg(abi.REG_MES_MAPS)
	start := time.Now()
	run(n)
	took := time.Since(start)
	got, want := r.rreg(abi.REG_MES_MAPS)-maps, uint32(0)
	if alternate {
		want = uint32(n)
	}
	if got != want {
		b.Fatalf("alternate=%v: %d maps for %d jobs, want %d", alternate, got, n, want)
	}
	return took
}
