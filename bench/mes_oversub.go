package bench

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"vgpu/abi"
	"vgpu/vfiouser/vfiousertest"
)

// The oversubscription figures: 1024 user queues added through ADD_QUEUE at one priority level
// (NORMAL) on the 16 compute slots SET_HW_RESOURCES gives MES, each kept fed with short jobs
// by the client (a job: three one-dword WRITE_DATA of its sequence number and a RELEASE_MEM
// fence; one job per submission — ring, wptr shadow, doorbell — as a user-mode driver submits,
// at most osInFlight outstanding per queue). Over a measured window the client counts the jobs
// each queue completed (its fence moved): the aggregate rate, and Jain's fairness index over
// the per-queue counts; a queue that completed nothing fails the figure.
//
// The baseline is the same jobs, fed the same way, on 16 permanently mapped queues: a second
// device in the same run (both devices serve from child processes, as QEMU sees them), with the same processes (8; page tables, PASIDs) and the same queue
// layout, whose 16 compute slots are activated through HQD registers, each in the VMID MES
// would give its process. Not 16 MES queues on the 16 slots: a MES queue idle past its idle
// grace gives its slot up even when nobody waits, so they would not be a permanently mapped
// baseline.
//
// Driver tuning (SET_SCHEDULING_CONFIG and ADD_QUEUE): GANG_QUANTUM osQuantum, 2 ms (1, 2 and
// 5 ms measure alike; the quantum runs from a queue's first execution turn in its slot, so a
// just-mapped queue waiting for a turn is not preempted for it). With 32 jobs in flight a
// mapped queue has work for its turns. Idle grace (PROCESS_GRACE_PERIOD_SAME_LEVEL) 10 ms.
// Preemption grace (GRACE_PERIOD_OTHER_LEVELS) osPreempt: on this shared 2-core host a process
// can stall for tens of milliseconds (the scheduler now marks hung only a queue inside a
// dispatch at its grace, and any other only 2 s after the request, but a long grace costs
// nothing here). OVERSUBSCRIPTION_TIMER 0: the unmapped-doorbell
// intercept is on.

// Knobs (variables so that a probe can try others).
var (
	osInFlight uint32 = 32    // jobs a queue may have outstanding
	osQuantum  uint64 = 20000 // GANG_QUANTUM, 100 ns units: 2 ms
)

const (
	osQueues  = 1024
	osBase    = 16 // the baseline's queues: one per compute slot
	osProcs   = 8  // queue k in process k % osProcs (VMID 1 + k % osProcs in the baseline)
	osWrites  = 3  // WRITE_DATA per job
	osRing    = 1024
	osIdle    = 100000  // PROCESS_GRACE_PERIOD_SAME_LEVEL: 10 ms
	osPreempt = 5000000 // GRACE_PERIOD_OTHER_LEVELS: 500 ms
	osDrain   = 20 * time.Second
)

// osWarm bounds the wait for every queue to complete its first job (a test shortens it).
var osWarm = 20 * time.Second

// oversubRig is the MES device with its 1024 queues and the baseline device with its 16.
type oversubRig struct {
	mes, kern     *mesRig
	devQs, baseQs []*mesQueue
}

func newOversubRig() (*oversubRig, error) {
	o := &oversubRig{}
	var err error
	if o.mes, err = newMESRig(0xFF, 0xFF, mesSchedConfig{idleGrace: osIdle, preemptGrace: osPreempt, process: true}); err != nil {
		return nil, err
	}
	if o.kern, err = newKernelRig(); err != nil {
		return nil, errors.Join(err, o.mes.Close())
	}
	if err := o.build(); err != nil {
		return nil, errors.Join(err, o.Close())
	}
	return o, nil
}

func (o *oversubRig) Close() error { return errors.Join(o.kern.Close(), o.mes.Close()) }

// queues creates n queues over osProcs processes of r.
func queues(r *mesRig, n int, name func(int) string) ([]*mesQueue, []*mesFrameB, error) {
	procs := make([]*mesProc, osProcs)
	for i := range procs {
		p, err := r.newProc()
		if err != nil {
			return nil, nil, err
		}
		procs[i] = p
	}
	var qs []*mesQueue
	var adds []*mesFrameB
	for i := range n {
		q, f, err := r.newQueue(procs[i%osProcs], name(i), osRing, abi.MES_PRIORITY_NORMAL, osQuantum)
		if err != nil {
			return nil, nil, err
		}
		qs, adds = append(qs, q), append(adds, f)
	}
	return qs, adds, nil
}

func (o *oversubRig) build() error {
	qs, adds, err := queues(o.mes, osQueues, func(i int) string { return fmt.Sprint(i) })
	if err != nil {
		return err
	}
	if err := o.mes.frames(adds); err != nil {
		return err
	}
	o.devQs = qs
	if qs, _, err = queues(o.kern, osBase, func(i int) string { return fmt.Sprintf("baseline %d (slot %d)", i, 1+i) }); err != nil {
		return err
	}
	for i, q := range qs {
		if err := o.kern.activate(q, 1+i, 1+i%osProcs); err != nil {
			return err
		}
	}
	o.baseQs = qs
	return nil
}

// osWindow is one measured window.
type osWindow struct {
	counts       []uint32 // jobs each queue completed in the window
	took         time.Duration
	maps, unmaps uint32 // in the window
}

func (w osWindow) rate() float64 {
	var s float64
	for _, c := range w.counts {
		s += float64(c)
	}
	return s / w.took.Seconds()
}

// window feeds qs: every queue is given jobs until it has osInFlight outstanding, again and
// again; once every queue has completed a job since the start, the window of d begins (each
// queue's fence read), then it ends (read again), feeding stops and every job is waited for
// and checked. The client sleeps on the fence interrupt when no queue can take a job.
func (o *mesRig) window(qs []*mesQueue, d time.Duration) (osWindow, error) {
	first := make([]uint32, len(qs))
	for i, q := range qs {
		first[i] = q.seq
	}
	feed := func() (bool, error) {
		fed := false
		for _, q := range qs {
			if q.seq-q.fence() >= osInFlight {
				continue
			}
			q.job(osWrites, true)
			if err := q.kick(); err != nil {
				return fed, err
			}
			fed = true
		}
		return fed, nil
	}
	run := func(until func() bool) error {
		for !until() {
			fed, err := feed()
			if err != nil {
				return err
			}
			if !fed {
				if err := o.WaitIRQ(time.Millisecond); err != nil && !errors.Is(err, vfiousertest.ErrTimeout) {
					return err
				}
			}
		}
		return nil
	}
	// Warm: every queue has been mapped and completed work.
	started, served := time.Now(), 0
	err := run(func() bool {
		for served < len(qs) && qs[served].fence() != first[served] {
			served++
		}
		return served == len(qs) || time.Since(started) > osWarm
	})
	if err == nil && served < len(qs) {
		err = fmt.Errorf("queue %s completed no job in %v: %s (%s)", qs[served], osWarm, qs[served].describe(), o.mesState())
	}
	if err != nil {
		return osWindow{}, err
	}
	var w osWindow
	var rerr error
	maps0, unmaps0 := o.reg(abi.REG_MES_MAPS, &rerr), o.reg(abi.REG_MES_UNMAPS, &rerr)
	at := make([]uint32, len(qs))
	t0 := time.Now()
	for i, q := range qs {
		at[i] = q.fence()
	}
	err = run(func() bool { return time.Since(t0) >= d })
	w.counts = make([]uint32, len(qs))
	for i, q := range qs {
		w.counts[i] = q.fence() - at[i]
	}
	w.took = time.Since(t0)
	w.maps, w.unmaps = o.reg(abi.REG_MES_MAPS, &rerr)-maps0, o.reg(abi.REG_MES_UNMAPS, &rerr)-unmaps0
	if err = errors.Join(err, rerr); err != nil {
		return osWindow{}, err
	}
	if err := o.waitJobs(qs, osDrain); err != nil {
		return osWindow{}, err
	}
	for _, q := range qs {
		if err := q.checkJobs(osWrites); err != nil {
			return osWindow{}, err
		}
	}
	if err := o.healthy(); err != nil {
		return osWindow{}, err
	}
	for i, c := range w.counts {
		if c == 0 {
			return osWindow{}, fmt.Errorf("queue %s completed nothing in the %v window (%d jobs in all; its fence %d at the window's start, %d at its end): %s",
				qs[i], w.took.Round(time.Millisecond), sum(w.counts), at[i], at[i]+c, qs[i].describe())
		}
	}
	return w, nil
}

func sum(x []uint32) uint64 {
	var s uint64
	for _, v := range x {
		s += uint64(v)
	}
	return s
}

// MESOversubscription measures rounds windows of d on the 1024 queues, each followed by one on
// the baseline's 16 (after one unmeasured window of each), and reports the median rates and
// the lowest fairness index.
func MESOversubscription(d time.Duration, rounds int) (rs []Result, err error) {
	const name = "MES: 1024 queues on 16 slots, short jobs"
	o, err := newOversubRig()
	if err != nil {
		return nil, fmt.Errorf("%s: set-up: %w", name, err)
	}
	defer func() {
		if cerr := o.Close(); cerr != nil && err == nil {
			rs, err = nil, cerr
		}
	}()
	var devRates, baseRates, devJain, baseJain []float64
	var maps []float64
	var minJobs, maxJobs []uint32
	for r := -1; r < rounds; r++ {
		dw, err := o.mes.window(o.devQs, d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		bw, err := o.kern.window(o.baseQs, d)
		if err != nil {
			return nil, fmt.Errorf("%s: baseline (16 permanently mapped queues): %w", name, err)
		}
		if r < 0 {
			continue // warm-up
		}
		devRates, baseRates = append(devRates, dw.rate()), append(baseRates, bw.rate())
		devJain, baseJain = append(devJain, jain(dw.counts)), append(baseJain, jain(bw.counts))
		maps = append(maps, float64(dw.maps)/dw.took.Seconds())
		minJobs, maxJobs = append(minJobs, slices.Min(dw.counts)), append(maxJobs, slices.Max(dw.counts))
	}
	note := fmt.Sprintf("%d windows of %v; %.3g maps/s; per queue %d–%d jobs a window; job = %d WRITE_DATA + fence, 1 per doorbell, ≤ %d in flight; gang quantum %v",
		rounds, d, median(maps), slices.Min(minJobs), slices.Max(maxJobs), osWrites, osInFlight, time.Duration(osQuantum)*100)
	return []Result{
		{Name: name, Value: median(devRates), Unit: "jobs/s", Baseline: "16 permanently mapped queues (HQD registers, VMIDs 1–8), same jobs", Base: median(baseRates),
			Note: note + "; target ≥ 0.8×"},
		{Name: "MES: Jain fairness over jobs per queue, 1024 queues", Value: slices.Min(devJain), Unit: "(index)",
			Baseline: "the baseline's 16 queues", Base: slices.Min(baseJain), Note: "lowest of the windows; target ≥ 0.95"},
	}, nil
}
