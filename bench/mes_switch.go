package bench

import (
	"errors"
	"fmt"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
	"vgpu/vfiouser/vfiousertest"
)

// The switch-cost figure: SET_HW_RESOURCES gives MES one compute slot (slot 1) and two queues
// of one process, A and B, take turns with one short job each (a one-dword WRITE_DATA and an
// interrupting fence; submitted, then waited for on the interrupt): every job finds the other
// queue idle in the slot, so MES unmaps it (saving it to its MQD) and maps this one — one
// switch per job, checked (MES_MAPS grows by one per job). The same jobs on A alone, which
// stays mapped (checked: no map), cost the rest of the job: the switch is the median of the
// differences of interleaved blocks of the two (swBlocksPerRound). Beside it, in the same
// rig, the cost of 20 one-dword WRITE_DATA packets through the device path (A, mapped, runs
// them in fenced chunks of up to half its ring, as the packet-rate figure does; its median
// block). The device runs in a child process, as QEMU sees it.

// longIdle is the idle grace (100 ns units: 10 s) of the rigs whose baselines need a queue to
// stay mapped: with nobody waiting a queue keeps its slot until it has been idle that long.
const longIdle = 100_000_000

const (
	swRing    = 1 << 16 // A's ring (the packet baseline's chunks)
	swPackets = 20      // the baseline: packets per op
	swWait    = 10 * time.Second
)

type switchRig struct {
	*mesRig
	a, b *mesQueue
	last *mesQueue // the queue that ran the last job
}

func newSwitchRig() (*switchRig, error) {
	r, err := newMESRig(0x1, 0, mesSchedConfig{idleGrace: longIdle, preemptGrace: osPreempt, process: true})
	if err != nil {
		return nil, err
	}
	s := &switchRig{mesRig: r}
	if err := s.build(); err != nil {
		return nil, errors.Join(err, r.Close())
	}
	return s, nil
}

func (s *switchRig) build() error {
	p, err := s.newProc()
	if err != nil {
		return err
	}
	a, fa, err := s.newQueue(p, "A", swRing, abi.MES_PRIORITY_NORMAL, 0)
	if err != nil {
		return err
	}
	b, fb, err := s.newQueue(p, "B", osRing, abi.MES_PRIORITY_NORMAL, 0)
	if err != nil {
		return err
	}
	s.a, s.b = a, b
	return s.frames([]*mesFrameB{fa, fb})
}

// one runs one job on q and waits for it.
func (s *switchRig) one(q *mesQueue) error {
	q.job(1, true)
	if err := q.kick(); err != nil {
		return err
	}
	s.last = q
	return s.waitJobs([]*mesQueue{q}, swWait)
}

// counted runs f and fails unless MES_MAPS grew by want (the clock stopped around the reads).
func (s *switchRig) counted(c Clock, want func(n int) uint32, n int, f func() error) error {
	c.StopTimer()
	var err error
	before := s.reg(abi.REG_MES_MAPS, &err)
	c.StartTimer()
	if err != nil {
		return err
	}
	if err := f(); err != nil {
		return err
	}
	c.StopTimer()
	defer c.StartTimer()
	if got := s.reg(abi.REG_MES_MAPS, &err) - before; err == nil && got != want(n) {
		return fmt.Errorf("%d maps for %d jobs, want %d", got, n, want(n))
	}
	return err
}

// alternate: every job goes to the queue that did not run the last one.
func (s *switchRig) alternate(n int, c Clock) error {
	return s.counted(c, func(n int) uint32 { return uint32(n) }, n, func() error {
		for range n {
			q := s.a
			if s.last == s.a {
				q = s.b
			}
			if err := s.one(q); err != nil {
				return err
			}
		}
		return nil
	})
}

// toA makes A the queue in the slot, its last job's packets counted (untimed). A queue adds a
// batch's packets to CP_PACKETS after the fence the client waited on, so even when A already
// ran the last job the count may still be on its way: settle it either way.
func (s *switchRig) toA(c Clock) error {
	c.StopTimer()
	defer c.StartTimer()
	if s.last != s.a {
		if err := s.one(s.a); err != nil {
			return err
		}
	}
	return s.settled(s.a)
}

// settled waits until q's rptr report shows its last job: the CP adds a batch's packets to
// CP_PACKETS before it writes the report, and the packet figure that may follow compares
// CP_PACKETS deltas exactly (the job's fence alone is seen before the count).
func (s *switchRig) settled(q *mesQueue) error {
	want := uint32(q.wptr % q.ringDwords)
	for deadline := time.Now().Add(swWait); q.word(mqReport) != want; time.Sleep(10 * time.Microsecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("queue %s: rptr report %d, want %d after its last job", q, q.word(mqReport), want)
		}
	}
	return nil
}

// alone: every job on A, which stays mapped.
func (s *switchRig) alone(n int, c Clock) error {
	if err := s.toA(c); err != nil {
		return err
	}
	return s.counted(c, func(int) uint32 { return 0 }, n, func() error {
		for range n {
			if err := s.one(s.a); err != nil {
				return err
			}
		}
		return nil
	})
}

// packetOp is 20·n one-dword WRITE_DATA packets on A (mapped), checked as the packet-rate
// figure checks them.
func (s *switchRig) packetOp() Op {
	a := s.a
	t := packetTarget{emit: a.emit, kick: a.kick, packets: s.packets,
		fence: a.va(mqPktFnc), dst: a.va(mqPktDst), readDst: func() uint32 { return a.word(mqPktDst) },
		waitFence: func(seq uint32, timeout time.Duration) error {
			deadline := time.Now().Add(timeout)
			for int32(a.word(mqPktFnc)-seq) < 0 {
				left := time.Until(deadline)
				if left <= 0 {
					return fmt.Errorf("queue A: packet fence %d not written after %v: %s", seq, timeout, a.describe())
				}
				if _, err := vfiousertest.WaitIRQ(s.IRQ[0], left); err != nil && !errors.Is(err, vfiousertest.ErrTimeout) {
					return err
				}
			}
			return nil
		}}
	op := t.op(swRing)
	return func(n int, c Clock) error {
		if err := s.toA(c); err != nil {
			return err
		}
		return s.counted(c, func(int) uint32 { return 0 }, n, func() error { return op(swPackets*n, c) })
	}
}

// swBlocksPerRound: each round of MESSwitch is this many short blocks per side. The switch is
// the difference of two per-job times of some 40 µs that differ by a few µs, and a loaded
// host's slow spells last milliseconds: sides alternating in rounds of 60 ms each (as Run's)
// put a different spell in each side's round, a noise several times the target's margin.
// Blocks of about 1.5 ms, interleaved, put the same spell on both sides of a pair, and the
// median of many pairs' differences leaves the few that a spell still splits out. The sides
// run the same jobs with the same checks as before; only the interleaving is finer.
const swBlocksPerRound = 40

// interleavedBlocks calibrates each op to a block of measureFor/blocks, then runs blocks
// blocks of them in turn, and returns each op's µs per iteration, block by block.
func interleavedBlocks(ops []Op, blocks int) ([][]float64, error) {
	ns := make([]int, len(ops))
	for i, op := range ops {
		r, err := measure(op, measureFor/time.Duration(blocks))
		if err != nil {
			return nil, err
		}
		ns[i] = r.N
	}
	us := make([][]float64, len(ops))
	for range blocks {
		for i, op := range ops {
			r, err := timeOp(op, ns[i])
			if err != nil {
				return nil, err
			}
			us[i] = append(us[i], micros(r.T)/float64(r.N))
		}
	}
	return us, nil
}

// MESSwitch is the cost of one switch (unmap of a queue, map of another) on one MES slot,
// beside 20 one-dword WRITE_DATA packets through the device path, in the same rig.
func MESSwitch(rounds int) (res Result, err error) {
	const name = "MES switch (unmap + map), one slot"
	s, err := newSwitchRig()
	if err != nil {
		return Result{}, fmt.Errorf("%s: set-up: %w", name, err)
	}
	defer func() {
		if cerr := s.Close(); cerr != nil && err == nil {
			res, err = Result{}, cerr
		}
	}()
	pk := s.packetOp()
	// Warm-up: a lap of A's ring, and a few switches.
	if _, err := timeOp(pk, swRing/len(pm4.WriteMem(0, 0))/swPackets); err != nil {
		return Result{}, fmt.Errorf("%s: baseline warm-up: %w", name, err)
	}
	if _, err := timeOp(s.alternate, 20); err != nil {
		return Result{}, fmt.Errorf("%s: warm-up: %w", name, err)
	}
	blocks := swBlocksPerRound*rounds + 1 // odd: a median
	us, err := interleavedBlocks([]Op{s.alternate, s.alone, pk}, blocks)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", name, err)
	}
	diff := make([]float64, blocks)
	for i := range diff {
		diff[i] = us[0][i] - us[1][i]
	}
	return Result{Name: name, Value: median(diff), Unit: "µs", Baseline: "20 one-dword WRITE_DATA (device path, same queue)",
		Base: median(us[2]),
		Note: fmt.Sprintf("job with a switch %.3g µs, without (queue stays mapped) %.3g µs; median of %d interleaved blocks; target ≤ 1×",
			median(us[0]), median(us[1]), blocks)}, nil
}
