package main

import (
	"fmt"
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
	// 300 M instructions, split so the run takes the same whatever the slot count.
	preemptWork = 60_000_000
	preemptWait = 90 * time.Second
)

// shaderPreempt: long shaders on oversubscribed user queues. Two more queues than there are
// HQD slots, each with a context save area, each run one long dispatch of spinShader at once:
// MES time-slices them, so dispatches are preempted mid-shader (saved into their queue's
// CSA) and resumed. Every work-item's result must be the uninterrupted one, no queue may halt
// or hang, and some queue must have been preempted. The latency of the preemptions seen in
// MES's event log (request → unmap, state saved) is reported.
func shaderPreempt(t *T) {
	d := openDev(t)
	nq := int(d.Info.Num_hqd_slots) + 2
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
		q := newQueue(t, d, drm.QueueConfig{CSABytes: csa})
		out := newData(t, d, 8*items, "output")
		for i := range items {
			*out.U64(8 * i) = 0xDEAD_BEEF_DEAD_BEEF
		}
		jobs[k] = job{q: q, out: out}
	}
	log := &mesLog{seen: map[uint64]mesEvent{}}
	t.Check(log.poll(), "read vgpu_mes")
	start := time.Now()
	for k, j := range jobs {
		p := dispatch{
			sh: pm4.Shader{Program: prog.VA, Slots: uint32(len(code) / 8), Threads: [3]uint32{preemptGroup, 1, 1},
				Stack: preemptStack, Args: argsOf(t, d, j.out.VA, steps)},
			grid: [3]uint32{preemptGroups, 1, 1},
		}
		end, err := j.q.Job(p.packets()...)
		t.Check(err, "submit queue %d's dispatch", j.q.ID)
		jobs[k].end = end
	}
	for _, j := range jobs {
		for j.q.UserFence() < j.end {
			if time.Since(start) > preemptWait {
				t.Fatalf("queue %d's dispatch not done after %v (user fence %d, end %d)", j.q.ID, preemptWait, j.q.UserFence(), j.end)
			}
			if err := log.poll(); err != nil {
				t.Fatalf("read vgpu_mes: %v", err)
			}
			time.Sleep(2 * time.Millisecond)
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
	preempts, err := queuePreempts()
	t.Check(err, "read vgpu_clients")
	total := 0
	for _, j := range jobs {
		total += preempts[j.q.ID]
	}
	if total == 0 {
		t.Errorf("no queue was preempted (%d queues on %d slots): the case did not test preemption", nq, d.Info.Num_hqd_slots)
	}
	lat := log.latencies(pasid)
	t.Logf("%d queues on %d HQD slots, %d work-items x %d LCG steps each, a CSA of %d KiB each: %v; %d preemptions (vgpu_clients), %d seen in MES's log",
		nq, d.Info.Num_hqd_slots, items, steps, csa>>10, took.Round(time.Millisecond), total, len(lat))
	if len(lat) > 0 {
		s := stats(lat)
		t.Logf("preemption latency (MES request to unmap, the dispatch saved): median %v, p99 %v, max %v over %d",
			s.median, s.p99, slices.Max(lat), len(lat))
		t.Perf("shader_preempt_latency_median_us", us(s.median), "us")
	}
}

// argsOf is a new argument block for spinShader.
func argsOf(t *T, d *drm.Device, out, steps uint64) uint64 {
	a := newData(t, d, 4096, "argument")
	*a.U64(spinArgOut), *a.U64(spinArgSteps) = out, steps
	return a.VA
}

// queuePreempts reads each queue's preemption count from vgpu_clients ("queue ID: ...
// preempts R ...").
func queuePreempts() (map[uint32]int, error) {
	s, err := readDebugfs("vgpu_clients")
	if err != nil {
		return nil, err
	}
	out := map[uint32]int{}
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "queue" {
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSuffix(f[1], ":"), 10, 32)
		if err != nil {
			continue
		}
		for i := 2; i+1 < len(f); i++ {
			if f[i] == "preempts" {
				n, err := strconv.Atoi(f[i+1])
				if err != nil {
					return nil, fmt.Errorf("vgpu_clients line %q: %v", l, err)
				}
				out[uint32(id)] = n
			}
		}
	}
	return out, nil
}

// mesEvent is one line of vgpu_mes's event log.
type mesEvent struct {
	seq, kind, reason, db, pasid, t uint64
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
	var ok [6]bool
	e.seq, ok[0] = num(f[0][1:])
	e.kind, ok[1] = num(f[2])
	e.reason, ok[2] = num(f[4])
	e.db, ok[3] = num(f[10])
	var vp uint64
	vp, ok[4] = num(f[12])
	e.t, ok[5] = num(f[16])
	e.pasid = vp & 0xFFFF // MES_EVT_DW_VMID_PASID: PASID [15:0]
	for _, o := range ok {
		if !o {
			return mesEvent{}, false
		}
	}
	return e, true
}

// latencies pairs each preemption request (PREEMPT) with the next unmap of the same
// doorbell that saved the queue (not RESET or HALTED), for unmaps of the PASID's queues.
func (m *mesLog) latencies(pasid uint64) []time.Duration {
	var evs []mesEvent
	for _, e := range m.seen {
		evs = append(evs, e)
	}
	slices.SortFunc(evs, func(a, b mesEvent) int { return int(int64(a.seq) - int64(b.seq)) })
	asked := map[uint64]mesEvent{}
	var out []time.Duration
	for i, e := range evs {
		if i > 0 && e.seq != evs[i-1].seq+1 {
			clear(asked) // a gap: a request's unmap may be among the events not seen
		}
		switch e.kind {
		case abi.MES_EVT_PREEMPT:
			asked[e.db] = e
		case abi.MES_EVT_UNMAP:
			if p, ok := asked[e.db]; ok && e.pasid == pasid && e.reason != abi.MES_UNMAP_RESET && e.reason != abi.MES_UNMAP_HALTED && e.t >= p.t {
				out = append(out, time.Duration(e.t-p.t))
			}
			delete(asked, e.db)
		}
	}
	return out
}
