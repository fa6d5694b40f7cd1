package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
)

// Register reads under load: how long a trapped register read takes while every compute
// queue runs guest work that never ends, beside the same reads with the queues idle. The
// device runs in a child process (as it does for QEMU), so the client's own scheduling is not
// part of the figure.
//
// Each loaded queue self-kicks: its ring runs the INCREMENT kernel on a counter (adding the
// ring's size), then COPY_DATA's the counter into its own HQD_PQ_WPTR_LO — a register write
// that moves its write pointer one ring further — then a ring's worth of type-2 fillers, so
// the ring's contents run again and again for as long as the queue is active. The fillers make
// the queue busy on the CPU (about a thousand packets per fetch of the ring) rather than on
// the L2's lock, which the three accesses of the kick take.

const (
	firstLoadSlot   = 1    // compute slots 1..16
	loadQueues      = 16   // every compute queue
	loadRingDwords  = 4096 // 16 KiB
	loadRingLog2    = 12
	loadRingStride  = 4 * loadRingDwords
	loadCountStride = 0x100
	minLoadedSample = 100 // fewer loaded samples than this make p99 the maximum: said in the note
)

// loadRig is a rig (device in a child process) with loadQueues self-kicking queues, active
// but not yet kicked.
type loadRig struct {
	*Rig
	wptr [loadQueues]uint32 // each queue's write pointer when last checked
}

func hqdReg(slot int, reg uint32) uint32 {
	return abi.BLOCK_HQD_BASE + uint32(slot)*abi.BLOCK_HQD_STRIDE + reg
}

func newLoadRig() (*loadRig, error) {
	rig, err := NewRig(RigConfig{RingDwords: loadRingDwords, NoQueue: true, Process: true})
	if err != nil {
		return nil, err
	}
	l := &loadRig{Rig: rig}
	for i := range loadQueues {
		if err := l.program(firstLoadSlot + i); err != nil {
			return nil, errors.Join(fmt.Errorf("queue %d: %w", firstLoadSlot+i, err), rig.Close())
		}
	}
	return l, nil
}

// program writes slot's self-kicking ring and counter into VRAM and activates the queue.
func (l *loadRig) program(slot int) error {
	ringOff := vramRing + uint64(slot)*loadRingStride
	counterOff := vramScratch + uint64(slot)*loadCountStride
	fb := uint64(abi.GPU_FB_BASE)
	counter := fb + counterOff
	var ring []uint32
	ring = append(ring, pm4.Kernel(abi.KERNEL_INCREMENT, counter, 0, 0)...)
	ring = append(ring, pm4.DispatchDirect(loadRingDwords, 1, 1)...)
	ring = append(ring, pm4.CopyData{
		SrcSel: abi.PM4_COPY_DATA_SEL_TC_L2, Src: counter, // through L2, where INCREMENT wrote
		DstSel: abi.PM4_COPY_DATA_SEL_REG, Dst: uint64(hqdReg(slot, abi.REG_HQD_PQ_WPTR_LO) / 4),
	}.Encode()...)
	for len(ring) < loadRingDwords {
		ring = append(ring, pm4.Type2()...)
	}
	for i, dw := range ring {
		binary.LittleEndian.PutUint32(l.VRAM[ringOff+4*uint64(i):], dw)
	}
	// The first pass is the kick from start; it leaves the counter at the next pass's end.
	binary.LittleEndian.PutUint32(l.VRAM[counterOff:], loadRingDwords)
	base := fb + ringOff
	for _, w := range [][2]uint32{
		{abi.REG_HQD_PQ_BASE_LO, uint32(base)}, {abi.REG_HQD_PQ_BASE_HI, uint32(base >> 32)},
		{abi.REG_HQD_PQ_CONTROL, loadRingLog2 - 1}, // QUEUE_SIZE
		{abi.REG_HQD_ACTIVE, 1},
	} {
		if err := l.SetReg(hqdReg(slot, w[0]), w[1]); err != nil {
			return err
		}
	}
	return nil
}

// start kicks every queue once and waits until each has kicked itself.
func (l *loadRig) start() error {
	for i := range loadQueues {
		if err := l.SetReg(hqdReg(firstLoadSlot+i, abi.REG_HQD_PQ_WPTR_LO), loadRingDwords); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := range loadQueues {
		slot := firstLoadSlot + i
		for {
			w, err := l.Reg(hqdReg(slot, abi.REG_HQD_PQ_WPTR_LO))
			if err != nil {
				return err
			}
			if w > loadRingDwords {
				l.wptr[i] = w
				break
			}
			if time.Now().After(deadline) {
				st, _ := l.Reg(hqdReg(slot, abi.REG_HQD_STATUS))
				return fmt.Errorf("queue %d did not start kicking itself (wptr %d, HQD_STATUS %#x)", slot, w, st)
			}
		}
	}
	return nil
}

// progress is what the queues ran between two checks.
type progress struct {
	passes           uint64 // all queues together
	slowest, fastest uint64 // one queue's
}

// check verifies that every queue is still active and not halted (its ring always leaves its
// write pointer a ring ahead, so an active queue always has work) and that the queues ran,
// and returns what they ran since the last check. A queue may be starved for a while (that
// is part of what the figure shows), so no single queue has to have moved.
func (l *loadRig) check() (progress, error) {
	p := progress{slowest: math.MaxUint64}
	for i := range loadQueues {
		slot := firstLoadSlot + i
		st, err := l.Reg(hqdReg(slot, abi.REG_HQD_STATUS))
		if err != nil {
			return progress{}, err
		}
		w, err := l.Reg(hqdReg(slot, abi.REG_HQD_PQ_WPTR_LO))
		if err != nil {
			return progress{}, err
		}
		if state := st & abi.REG_HQD_STATUS__STATE_MASK; state != abi.HQD_STATE_RUNNING {
			return progress{}, fmt.Errorf("queue %d stopped kicking itself (HQD_STATUS %#x, wptr %d): the reads were not all under load", slot, st, w)
		}
		n := uint64(w-l.wptr[i]) / loadRingDwords
		p.passes += n
		p.slowest, p.fastest = min(p.slowest, n), max(p.fastest, n)
		l.wptr[i] = w
	}
	if p.passes == 0 {
		return progress{}, errors.New("no queue ran while the reads were measured: they were not under load")
	}
	return p, nil
}

// readLatencies times up to n register reads one by one, stopping early after until (zero:
// never). Every read is checked.
func (l *loadRig) readLatencies(n int, until time.Time) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		v, err := l.Reg(abi.REG_ID_MAGIC)
		d := time.Since(t0)
		if err != nil {
			return nil, err
		}
		if v != abi.ID_MAGIC_VALUE {
			return nil, fmt.Errorf("ID_MAGIC reads %#x", v)
		}
		lat = append(lat, d)
		if !until.IsZero() && t0.After(until) {
			break
		}
	}
	return lat, nil
}

// maxLoadedReads bounds the reads RegionReadUnderLoad keeps.
const maxLoadedReads = 1 << 17

// RegionReadUnderLoad is the median and p99 of a trapped register read (Go client,
// REGION_READ of ID_MAGIC) while 16 queues self-kick, beside the same figures with the queues
// idle: idleReads reads idle, then reads one after another under load for loadedFor (at most
// maxLoadedReads). Reading for a fixed time rather than a fixed count keeps the rare long
// stalls, which a fast run of reads could miss, in the figure.
func RegionReadUnderLoad(idleReads int, loadedFor time.Duration) (rs []Result, err error) {
	l, err := newLoadRig()
	if err != nil {
		return nil, fmt.Errorf("register read under load: set-up: %w", err)
	}
	defer func() {
		// The device process must end cleanly once its client hangs up.
		if cerr := l.Close(); cerr != nil && err == nil {
			rs, err = nil, fmt.Errorf("register read under load: %w", cerr)
		}
	}()
	idle, err := l.readLatencies(idleReads, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("register read, queues idle: %w", err)
	}
	if err := l.start(); err != nil {
		return nil, fmt.Errorf("register read under load: %w", err)
	}
	start := time.Now()
	loaded, err := l.readLatencies(maxLoadedReads, start.Add(loadedFor))
	took := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("register read under load: %w", err)
	}
	p, err := l.check()
	if err != nil {
		return nil, err
	}
	note := fmt.Sprintf("%d reads (idle %d) in %.2g s; queues ran %.3g passes/s (one queue: %d to %d passes); target p99 ≤ 1 ms",
		len(loaded), len(idle), took.Seconds(), float64(p.passes)/took.Seconds(), p.slowest, p.fastest)
	if len(loaded) < minLoadedSample {
		note += "; few reads: p99 is the maximum"
	}
	name := fmt.Sprintf("register read, %d queues self-kicking", loadQueues)
	return []Result{
		{Name: name + ": median", Value: micros(quantile(loaded, 0.5)), Unit: "µs",
			Baseline: "queues idle: median", Base: micros(quantile(idle, 0.5)), Note: note},
		{Name: name + ": p99", Value: micros(quantile(loaded, 0.99)), Unit: "µs",
			Baseline: "queues idle: p99", Base: micros(quantile(idle, 0.99)), Note: note},
	}, nil
}
