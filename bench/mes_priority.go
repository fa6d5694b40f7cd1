package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// The high-priority latency figure: a HIGH queue's job (the oversubscription figure's short
// job; submitted, then waited for on its fence interrupt) timed from its submission to the
// client seeing it complete, while 16 NORMAL queues keep every one of the 16 MES slots busy
// with long jobs (each an INDIRECT_BUFFER of 1638 one-dword WRITE_DATA, thousands queued),
// beside the same job on the same queue with the device idle. Under load every job must take a
// slot by preemption: before each one the client waits (untimed) until the HIGH queue is off
// the hardware and all 16 slots hold NORMAL queues, and afterwards it checks that the HIGH
// queue was mapped once per job and that every NORMAL queue made progress. Idle, the HIGH
// queue stays mapped between jobs (idle grace longIdle): the baseline is a mapped queue's
// doorbell → fence → interrupt. The load is stopped after each loaded block by RESET of the
// NORMAL queues (their queued work discarded). The device runs in a child process, as QEMU
// sees it: in the client's process, the client's wake-up for the fence interrupt waits for
// the CPU the device's busy goroutines hold, which is the measurement's cost, not the
// device's (in-process the same jobs measured 150–200 µs under load).

const (
	hpLoad     = 16
	hpLoadRing = 1 << 14 // dwords: 4095 IB calls
	hpIBDwords = 8190    // 1638 WRITE_DATA of 5 dwords
	hpWait     = 5 * time.Second
)

type priorityRig struct {
	*mesRig
	high *mesQueue
	load []*mesQueue
	ib   uint64 // the load's IB (in the load process)
}

func newPriorityRig() (*priorityRig, error) {
	r, err := newMESRig(0xFF, 0xFF, mesSchedConfig{idleGrace: longIdle, preemptGrace: osPreempt, process: true})
	if err != nil {
		return nil, err
	}
	h := &priorityRig{mesRig: r}
	if err := h.build(); err != nil {
		return nil, errors.Join(err, r.Close())
	}
	return h, nil
}

func (h *priorityRig) build() error {
	lp, err := h.newProc()
	if err != nil {
		return err
	}
	hp, err := h.newProc()
	if err != nil {
		return err
	}
	var adds []*mesFrameB
	for i := range hpLoad {
		q, f, err := h.newQueue(lp, fmt.Sprintf("NORMAL %d", i), hpLoadRing, abi.MES_PRIORITY_NORMAL, 0)
		if err != nil {
			return err
		}
		h.load, adds = append(h.load, q), append(adds, f)
	}
	q, f, err := h.newQueue(hp, "HIGH", osRing, abi.MES_PRIORITY_HIGH, 0)
	if err != nil {
		return err
	}
	h.high, adds = q, append(adds, f)
	// The IB: WRITE_DATA to the first load queue's data page, which every load queue's
	// process (the same one) maps.
	ibOff, err := h.alloc(4 * hpIBDwords)
	if err != nil {
		return err
	}
	if h.ib, err = lp.mapVRAM(ibOff, 4*hpIBDwords, abi.PTE_VALID_MASK|abi.PTE_READABLE_MASK|abi.PTE_EXECUTABLE_MASK); err != nil {
		return err
	}
	dst := h.load[0].va(mqData)
	for at, k := ibOff, uint32(0); at+4*5 <= ibOff+4*hpIBDwords; k++ {
		for _, d := range pm4.WriteMem(dst, k) {
			binary.LittleEndian.PutUint32(h.VRAM[at:], d)
			at += 4
		}
	}
	return h.frames(adds)
}

// startLoad fills every NORMAL queue's ring with IB calls and waits (untimed) until all 16
// slots hold them.
func (h *priorityRig) startLoad() ([]uint64, error) {
	call := pm4.IndirectBuffer{Addr: h.ib, Size: hpIBDwords}.Encode()
	start := make([]uint64, len(h.load))
	for i, q := range h.load {
		start[i] = q.wptr
		for q.wptr+uint64(len(call)) <= start[i]+hpLoadRing-uint64(len(call)) {
			q.emit(call)
		}
		if err := q.kick(); err != nil {
			return nil, err
		}
	}
	return start, h.waitBusy()
}

// waitBusy waits until the HIGH queue is off the hardware and all 16 slots hold NORMAL queues.
func (h *priorityRig) waitBusy() error {
	for deadline := time.Now().Add(hpWait); ; time.Sleep(100 * time.Microsecond) {
		var err error
		mapped := h.reg(abi.REG_MES_MAPPED, &err)
		st, serr := h.high.status()
		if err = errors.Join(err, serr); err != nil {
			return err
		}
		if mapped == hpLoad && !st.mapped() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the NORMAL queues do not fill the 16 slots: MES_MAPPED %d, HIGH %v (%s)", mapped, st, h.mesState())
		}
	}
}

// stopLoad checks that every NORMAL queue ran, then RESETs them (their work discarded).
func (h *priorityRig) stopLoad(start []uint64) error {
	var fs []*mesFrameB
	for i, q := range h.load {
		st, err := q.status()
		if err != nil {
			return err
		}
		if st.rptr <= start[i] {
			return fmt.Errorf("queue %s made no progress under load: %v", q, st)
		}
		fs = append(fs, q.resetFrame())
	}
	if err := h.frames(fs); err != nil {
		return err
	}
	for _, q := range h.load {
		st, err := q.status()
		if err != nil {
			return err
		}
		if st.mapped() || st.rptr != q.wptr {
			return fmt.Errorf("queue %s after RESET: %v, wptr %d", q, st, q.wptr)
		}
	}
	return nil
}

// latency runs one HIGH job and returns submit → completion seen.
func (h *priorityRig) latency() (time.Duration, error) {
	t0 := time.Now()
	h.high.job(osWrites, true)
	if err := h.high.kick(); err != nil {
		return 0, err
	}
	if err := h.waitJobs([]*mesQueue{h.high}, hpWait); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	return d, h.high.checkJobs(osWrites)
}

// block measures n HIGH jobs, idle or under load.
func (h *priorityRig) block(n int, loaded bool) ([]time.Duration, error) {
	var start []uint64
	before, err := h.high.status()
	if err != nil {
		return nil, err
	}
	if loaded {
		if start, err = h.startLoad(); err != nil {
			return nil, err
		}
	} else if _, err := h.latency(); err != nil { // the queue is mapped from here on
		return nil, err
	}
	lat := make([]time.Duration, 0, n)
	for range n {
		if loaded {
			if err := h.waitBusy(); err != nil {
				return nil, err
			}
		}
		d, err := h.latency()
		if err != nil {
			return nil, err
		}
		lat = append(lat, d)
	}
	after, err := h.high.status()
	if err != nil {
		return nil, err
	}
	if loaded {
		if got := after.maps - before.maps; got != uint32(n) {
			return nil, fmt.Errorf("HIGH mapped %d times for %d jobs under load: not by preemption each time", got, n)
		}
		if err := h.stopLoad(start); err != nil {
			return nil, err
		}
	} else if got := after.maps - before.maps; got > 1 {
		return nil, fmt.Errorf("HIGH mapped %d times for %d jobs on an idle device", got, n)
	}
	return lat, h.healthy()
}

// MESPriorityLatency is the median and p99 of a HIGH queue's job latency with the 16 slots
// busy with NORMAL queues, beside the same on an idle device: rounds blocks of n jobs each way,
// alternating.
func MESPriorityLatency(n, rounds int) (rs []Result, err error) {
	const name = "MES HIGH-priority job, 16 NORMAL queues busy on the 16 slots"
	h, err := newPriorityRig()
	if err != nil {
		return nil, fmt.Errorf("%s: set-up: %w", name, err)
	}
	defer func() {
		if cerr := h.Close(); cerr != nil && err == nil {
			rs, err = nil, cerr
		}
	}()
	var idle, loaded []time.Duration
	for range rounds {
		l, err := h.block(n, false)
		if err != nil {
			return nil, fmt.Errorf("%s: baseline (idle device): %w", name, err)
		}
		idle = append(idle, l...)
		if l, err = h.block(n, true); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		loaded = append(loaded, l...)
	}
	note := fmt.Sprintf("%d jobs each way in %d alternating blocks; target ≤ 2×", len(loaded), rounds)
	return []Result{
		{Name: name + ": median", Value: micros(quantile(loaded, 0.5)), Unit: "µs", Baseline: "idle device, queue mapped: median",
			Base: micros(quantile(idle, 0.5)), Note: note},
		{Name: name + ": p99", Value: micros(quantile(loaded, 0.99)), Unit: "µs", Baseline: "idle device: p99",
			Base: micros(quantile(idle, 0.99)), Note: note},
	}, nil
}
