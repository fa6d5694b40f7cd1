package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"vgpu/abi"
	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
)

const (
	preemptGroup  = 64 // work-items per workgroup
	preemptGroups = 16
	preemptStack  = 8  // stack bytes per work-item (the shader uses none)
	preemptMaxCUs = 64 // the most --compute-units: the CSA holds a workgroup per CU
	// preemptWork is the LCG steps of all queues together (5 instructions each): about
	// 1.6 G instructions, split so the run takes the same whatever the slot count. Each
	// dispatch lasts far longer than the scheduler needs to act, even on a loaded host
	// whose cores the compute units keep busy.
	preemptWork    = 320_000_000
	preemptWait    = 90 * time.Second
	preemptHigh    = 2 // NORMAL_HIGH queues beyond the slots (no CAP_SYS_NICE needed)
	preemptWaiters = 4 // NORMAL_LOW queues beyond the slots
)

// shaderPreempt: long shaders on oversubscribed user queues. Four more NORMAL_LOW queues than
// there are HQD slots, each with a context save area, each run one long dispatch of
// spinShader, so MES takes turns by quantum; once the slots are full, two NORMAL_HIGH ones
// arrive, which MES must make room for. Running dispatches are preempted mid-shader (saved into their queue's CSA) and
// resumed later. Every work-item's result must be the uninterrupted one, no queue may halt
// or hang, and some queue must have been preempted. The latency of the preemptions seen in
// MES's event log (request → unmap, state saved) is reported.
func shaderPreempt(t *T) {
	d := openDev(t)
	nq := int(d.Info.Num_hqd_slots) + preemptWaiters + preemptHigh
	items := uint64(preemptGroup * preemptGroups)
	steps := max(1000, preemptWork/(items*uint64(nq)))
	code, err := assemble(spinShader())
	t.Check(err, "assemble the spin shader")
	prog := newProgram(t, d, code, programFlags)
	csa := csaBytes(preemptMaxCUs, preemptGroup, preemptStack)
	pasid, err := ownPASID()
	t.Check(err, "find this file's PASID")

	type job struct {
		q   *drm.Queue
		out *drm.Buffer
		end uint64
	}
	jobs := make([]job, nq)
	for k := range jobs {
		prio := uint32(drm.VGPU_USERQ_PRIORITY_NORMAL_LOW)
		if k >= nq-preemptHigh {
			prio = drm.VGPU_USERQ_PRIORITY_NORMAL_HIGH
		}
		q := newQueue(t, d, drm.QueueConfig{CSABytes: csa, Priority: prio})
		out := newData(t, d, 8*items, "output")
		for i := range items {
			*out.U64(8 * i) = 0xDEAD_BEEF_DEAD_BEEF
		}
		jobs[k] = job{q: q, out: out}
	}
	log := &mesLog{seen: map[uint64]mesEvent{}}
	t.Check(log.poll(), "read vgpu_mes")
	start := time.Now()
	submit := func(k int) {
		j := jobs[k]
		p := dispatch{
			sh: pm4.Shader{Program: prog.VA, Slots: uint32(len(code) / 8), Threads: [3]uint32{preemptGroup, 1, 1},
				Stack: preemptStack, Args: argsOf(t, d, j.out.VA, steps)},
			grid: [3]uint32{preemptGroups, 1, 1},
		}
		end, err := j.q.Job(p.packets()...)
		t.Check(err, "submit queue %d's dispatch", j.q.ID)
		jobs[k].end = end
	}
	// The low-priority queues fill every slot and wait for more; once as many have started
	// as there are slots, the high-priority ones arrive: MES must preempt a running one
	// (PRIORITY) whether or not quanta expire meanwhile.
	for k := range nq - preemptHigh {
		submit(k)
	}
	for started := 0; started < int(d.Info.Num_hqd_slots) && time.Since(start) < 5*time.Second; {
		time.Sleep(100 * time.Microsecond)
		started = 0
		for _, j := range jobs[:nq-preemptHigh] {
			if j.q.Rptr() != 0 {
				started++
			}
		}
	}
	running := 0
	for _, j := range jobs[:nq-preemptHigh] {
		if j.q.UserFence() < j.end {
			running++
		}
	}
	t.Logf("the high-priority queues after %v, with %d of %d low-priority dispatches still running",
		time.Since(start).Round(time.Microsecond), running, nq-preemptHigh)
	for k := nq - preemptHigh; k < nq; k++ {
		submit(k)
	}
	// A queue that is not in a slot although it started its job (rptr > 0) and its job's
	// fence is still to come (read after vgpu_clients: fences only grow) was preempted with
	// its dispatch in flight: the RELEASE_MEM before the fence waits for the dispatch.
	inFlight := map[uint32]bool{}
	sampleInFlight := func() {
		st, err := queueStates()
		if err != nil {
			t.Fatalf("read vgpu_clients: %v", err)
		}
		for _, j := range jobs {
			if q, ok := st[j.q.ID]; ok && q.state != "mapped" && q.rptr > 0 && j.end != 0 && j.q.UserFence() < j.end {
				inFlight[j.q.ID] = true
			}
		}
	}
	// An eviction of the file (debugfs vgpu_evict) removes every queue from MES where it
	// stopped (REMOVE_QUEUE: a dispatch in flight is saved into the CSA) and adds it again,
	// whatever MES's turns did: the queues whose job had started and whose fence had not come
	// just before are stopped with their dispatch in flight (the eviction waits for no
	// fence of theirs: no SIGNAL).
	evicted := 0
	for _, j := range jobs {
		if j.q.Rptr() != 0 && j.q.UserFence() < j.end {
			inFlight[j.q.ID] = true
			evicted++
		}
	}
	t.Check(evict(os.Getpid()), "evict this process's file while its dispatches run")
	for _, j := range jobs {
		for j.q.UserFence() < j.end {
			if time.Since(start) > preemptWait {
				t.Fatalf("queue %d's dispatch not done after %v (user fence %d, end %d)", j.q.ID, preemptWait, j.q.UserFence(), j.end)
			}
			if err := log.poll(); err != nil {
				t.Fatalf("read vgpu_mes: %v", err)
			}
			sampleInFlight()
			time.Sleep(time.Millisecond) // the log shows 16 events: look often
		}
	}
	took := time.Since(start)
	log.poll()
	for _, j := range jobs {
		bad, first := 0, -1
		for i := range items {
			if *j.out.U64(8 * i) != spinWant(i, steps) {
				if bad++; first < 0 {
					first = int(i)
				}
			}
		}
		if bad > 0 {
			f := uint64(first)
			t.Errorf("queue %d: %d of %d work-items stored a result other than the uninterrupted run's; the first out[%d] = %#x, want %#x",
				j.q.ID, bad, items, f, *j.out.U64(8 * f), spinWant(f, steps))
		}
		if st, err := d.QueryStatus(j.q.ID); err != nil || st != 0 {
			t.Errorf("queue %d: QUERY_STATUS %#x, %v; want 0 (a preempted dispatch must not halt or hang its queue)", j.q.ID, st, err)
		}
	}
	st, err := queueStates()
	t.Check(err, "read vgpu_clients")
	total, maps := 0, 0
	for _, j := range jobs {
		total += st[j.q.ID].preempts
		maps += st[j.q.ID].maps
		if st[j.q.ID].maps > 1 {
			inFlight[j.q.ID] = true // unmapped before its one job was done, mapped again
		}
	}
	// A request for a queue with work (QUANTUM, PRIORITY) stops a running dispatch; an IDLE
	// one a queue with nothing left to run.
	var busy, idle []time.Duration
	for _, p := range log.preemptions(pasid) {
		if p.reason == abi.MES_UNMAP_IDLE {
			idle = append(idle, p.took)
		} else {
			busy = append(busy, p.took)
		}
	}
	t.Logf("%d queues on %d HQD slots, %d work-items x %d LCG steps each, a CSA of %d KiB each: %v; %d maps, %d preemptions (vgpu_clients), %d queues seen preempted with their dispatch in flight (%d of them when the file was evicted)",
		nq, d.Info.Num_hqd_slots, items, steps, csa>>10, took.Round(time.Millisecond), maps, total, len(inFlight), evicted)
	if len(inFlight) == 0 {
		t.Errorf("no queue was seen unmapped with its dispatch in flight (%d preemptions, %d maps for %d queues): the case did not test instruction-level preemption",
			total, maps, nq)
	}
	for _, c := range []struct {
		what string
		d    []time.Duration
	}{{"of queues with work (QUANTUM, PRIORITY: the dispatch saved)", busy}, {"of idle queues", idle}} {
		if len(c.d) > 0 {
			s := stats(c.d)
			t.Logf("preemption latency %s, MES's request to the unmap in its log: median %v, p99 %v, max %v over %d",
				c.what, s.median, s.p99, slices.Max(c.d), len(c.d))
		}
	}
	if len(busy) > 0 {
		t.Perf("shader_preempt_latency_median_us", us(stats(busy).median), "us")
	}
}

// queueState is a queue's line in vgpu_clients.
type queueState struct {
	state          string
	rptr           uint64
	maps, preempts int
}

// queueStates reads every queue's line of vgpu_clients ("queue ID: doorbell D priority P
// state S slot N vmid V maps M preempts R rptr X ...").
func queueStates() (map[uint32]queueState, error) {
	s, err := readDebugfs("vgpu_clients")
	if err != nil {
		return nil, err
	}
	return parseQueueStates(s)
}

func parseQueueStates(s string) (map[uint32]queueState, error) {
	out := map[uint32]queueState{}
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "queue" {
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSuffix(f[1], ":"), 10, 32)
		if err != nil {
			continue
		}
		var q queueState
		for i := 2; i+1 < len(f); i++ {
			var err error
			switch f[i] {
			case "state":
				q.state = f[i+1]
			case "maps":
				q.maps, err = strconv.Atoi(f[i+1])
			case "preempts":
				q.preempts, err = strconv.Atoi(f[i+1])
			case "rptr":
				q.rptr, err = strconv.ParseUint(f[i+1], 10, 64)
			}
			if err != nil {
				return nil, fmt.Errorf("vgpu_clients line %q: %v", l, err)
			}
		}
		out[uint32(id)] = q
	}
	return out, nil
}

// argsOf is a new argument block for spinShader.
func argsOf(t *T, d *drm.Device, out, steps uint64) uint64 {
	a := newData(t, d, 4096, "argument")
	*a.U64(spinArgOut), *a.U64(spinArgSteps) = out, steps
	return a.VA
}

// mesEvent is one line of vgpu_mes's event log.
type mesEvent struct {
	seq, kind, reason, db, pasid, rptr, t uint64
}

// mesLog collects vgpu_mes's event-log tail over many reads (it shows the last 16 events).
type mesLog struct {
	seen map[uint64]mesEvent
}

func (m *mesLog) poll() error {
	s, err := readDebugfs("vgpu_mes")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(s, "\n") {
		if e, ok := parseMESEvent(l); ok {
			m.seen[e.seq] = e
		}
	}
	return nil
}

// parseMESEvent reads "  #SEQ kind K reason R slot S prio P db 0xD vmid_pasid 0xV rptr N t T".
func parseMESEvent(l string) (mesEvent, bool) {
	f := strings.Fields(l)
	if len(f) != 17 || !strings.HasPrefix(f[0], "#") || f[15] != "t" {
		return mesEvent{}, false
	}
	num := func(s string) (uint64, bool) {
		v, err := strconv.ParseUint(s, 0, 64)
		return v, err == nil
	}
	var e mesEvent
	var ok [7]bool
	e.seq, ok[0] = num(f[0][1:])
	e.kind, ok[1] = num(f[2])
	e.reason, ok[2] = num(f[4])
	e.db, ok[3] = num(f[10])
	var vp uint64
	vp, ok[4] = num(f[12])
	e.t, ok[5] = num(f[16])
	e.rptr, ok[6] = num(f[14])
	e.pasid = vp & 0xFFFF // MES_EVT_DW_VMID_PASID: PASID [15:0]
	for _, o := range ok {
		if !o {
			return mesEvent{}, false
		}
	}
	return e, true
}

// preemption is a request (PREEMPT) and the unmap of the same doorbell that saved the queue
// (not RESET or HALTED): why, where the queue's rptr was, and how long it took.
type preemption struct {
	reason, rptr uint64
	took         time.Duration
}

// preemptions pairs the requests and unmaps of the PASID's queues.
func (m *mesLog) preemptions(pasid uint64) []preemption {
	var evs []mesEvent
	for _, e := range m.seen {
		evs = append(evs, e)
	}
	slices.SortFunc(evs, func(a, b mesEvent) int { return int(int64(a.seq) - int64(b.seq)) })
	asked := map[uint64]mesEvent{}
	var out []preemption
	for i, e := range evs {
		if i > 0 && e.seq != evs[i-1].seq+1 {
			clear(asked) // a gap: a request's unmap may be among the events not seen
		}
		switch e.kind {
		case abi.MES_EVT_PREEMPT:
			asked[e.db] = e
		case abi.MES_EVT_UNMAP:
			if p, ok := asked[e.db]; ok && e.pasid == pasid && e.reason != abi.MES_UNMAP_RESET && e.reason != abi.MES_UNMAP_HALTED && e.t >= p.t {
				out = append(out, preemption{reason: e.reason, rptr: e.rptr, took: time.Duration(e.t - p.t)})
			}
			delete(asked, e.db)
		}
	}
	return out
}
