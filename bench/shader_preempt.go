package bench

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"vgpu/abi"
	"vgpu/compute"
	"vgpu/cp"
	"vgpu/cp/cptest"
	"vgpu/pm4"
	"vgpu/shader"
	"vgpu/shaders"
)

// The preemption-latency figure: a mapped queue (as MES maps one) runs an endless spin_sum
// dispatch on two compute units; from cp.Preempt (MES's unmap request) to the CP's Notify that
// the queue stopped with its dispatch saved to its context save area (every wave stopped
// between instructions, its state encoded and written) — the median over the rounds. Each
// round remaps the saved image (in another slot) and lets the shader run again before the
// next preemption, and checks the save (Preempted, one saved dispatch, the CSA's magic). The
// baseline, in the same rig and rounds, is the same preemption of a queue parked in a
// WAIT_REG_MEM: a busy queue's goroutine wakes, stops and saves, without shaders; the
// difference is what stopping and saving the compute units' waves costs. CP and compute
// units over cptest's in-memory stand-ins (no MMU, no transport).

const (
	spProg, spArgs, spOut = 0x10000, 0x11000, 0x12000
	spGate, spFence       = 0x13000, 0x13100
	spRingA, spRingB      = 0x20000, 0x30000
	spCSA, spCSASize      = 0x100000, 0x100000
	spRingQS              = 9 // 1024 dwords
	spRun                 = 2 * time.Millisecond
)

type preemptRig struct {
	cp     *cp.CP
	pool   *compute.Pool
	mem    *cptest.Memory
	stops  chan int
	shader cp.Image // the spin_sum queue's image (saved after each round)
	parked cp.Image
	wA, wB uint64
	round  int
}

func newPreemptRig() (*preemptRig, error) {
	r := &preemptRig{mem: cptest.NewMemory(spCSA + spCSASize), stops: make(chan int, 64)}
	r.pool = compute.New(compute.Config{CUs: 2, Memory: r.mem})
	r.cp = cp.New(cp.Config{Memory: r.mem, Registers: cptest.NewRegisters(), Interrupts: cptest.NewInterrupts(),
		Compute: r.pool, Notify: func(slot int) {
			select {
			case r.stops <- slot:
			default:
			}
		}})
	r.mem.SetOnWrite(r.cp.Wake)
	s := shaders.SpinSum()
	_, code, err := shader.Build(s.Insns)
	if err != nil {
		r.Close()
		return nil, err
	}
	for i := 0; i+4 <= len(code); i += 4 {
		r.mem.Store32(spProg+uint64(i), uint32(code[i])|uint32(code[i+1])<<8|uint32(code[i+2])<<16|uint32(code[i+3])<<24)
	}
	r.mem.Store64(spArgs, spOut)
	r.mem.Store64(spArgs+8, ^uint64(0)) // endless
	sh := pm4.Shader{Program: spProg, Slots: uint32(len(code) / 8), Threads: [3]uint32{64, 1, 1}, Args: spArgs}
	r.wA = r.ring(spRingA, sh.Encode(), pm4.DispatchDirect(4, 1, 1), pm4.Fence(spFence, 1, 0, false))
	r.wB = r.ring(spRingB, pm4.WaitMem(spGate, 1))
	r.shader = image(spRingA, r.wA)
	r.shader.CSABase, r.shader.CSASize = spCSA, spCSASize
	r.parked = image(spRingB, r.wB)
	return r, nil
}

func (r *preemptRig) ring(base uint64, pkts ...[]uint32) uint64 {
	var w uint64
	for _, p := range pkts {
		r.mem.StoreDwords(base+4*w, p)
		w += uint64(len(p))
	}
	return w
}

func image(base, w uint64) cp.Image {
	return cp.Image{Base: base, Control: spRingQS << abi.REG_HQD_PQ_CONTROL__QUEUE_SIZE__SHIFT, Wptr: w}
}

func (r *preemptRig) Close() error {
	r.cp.Close()
	r.pool.Close()
	return nil
}

// preempt maps img into slot, lets it run (until ready says it got going, then spRun more),
// and times Preempt to the Notify of its stop; it returns the saved image.
func (r *preemptRig) preempt(slot int, img cp.Image, w uint64, ready func() bool) (time.Duration, cp.Image, error) {
	if err := r.cp.Map(slot, img); err != nil {
		return 0, img, err
	}
	r.cp.Kick(slot, w)
	deadline := time.Now().Add(5 * time.Second)
	for !ready() {
		if time.Now().After(deadline) {
			return 0, img, fmt.Errorf("slot %d never got going", slot)
		}
		time.Sleep(50 * time.Microsecond)
	}
	time.Sleep(spRun)
	for len(r.stops) > 0 { // notes of earlier idleness or stops
		<-r.stops
	}
	t0 := time.Now()
	r.cp.Preempt(slot)
	var saved cp.Image
	var st cp.StopState
	for {
		if saved, st = r.cp.Saved(slot); st != cp.Running {
			break
		}
		select {
		case <-r.stops:
		case <-time.After(5 * time.Second):
			return 0, img, fmt.Errorf("slot %d did not stop", slot)
		}
	}
	d := time.Since(t0)
	r.cp.Release(slot)
	if st != cp.Preempted {
		return 0, img, fmt.Errorf("slot %d stopped as %v (error %d)", slot, st, saved.Error)
	}
	return d, saved, nil
}

// one round of both sides: the shader queue and the parked one, each in the next slot.
func (r *preemptRig) one() (shaderLat, parkedLat time.Duration, err error) {
	slot := 1 + r.round%8
	r.round++
	before := r.pool.Stats().Instructions
	shaderLat, saved, err := r.preempt(slot, r.shader, r.wA, func() bool { return r.pool.Stats().Instructions > before })
	if err != nil {
		return 0, 0, err
	}
	if len(saved.Exec.Dispatches) != 1 || r.mem.Load32(spCSA) != abi.SHADER_CSA_MAGIC || r.mem.Load32(spFence) != 0 {
		return 0, 0, fmt.Errorf("round %d: %d saved dispatches, CSA magic %#x, fence %d", r.round,
			len(saved.Exec.Dispatches), r.mem.Load32(spCSA), r.mem.Load32(spFence))
	}
	r.shader = saved
	parkedLat, _, err = r.preempt(9+slot%8, r.parked, r.wB, func() bool {
		return r.cp.Queue(9+slot%8).State == abi.HQD_STATE_WAITING
	})
	return shaderLat, parkedLat, err
}

// ShaderPreemptLatency measures the preemption of a mapped queue inside an endless shader
// beside that of a queue parked in a WAIT_REG_MEM, over rounds rounds (medians).
func ShaderPreemptLatency(rounds int) (res Result, err error) {
	r, err := newPreemptRig()
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	var sh, pk []time.Duration
	for range rounds {
		s, p, err := r.one()
		if err != nil {
			return res, err
		}
		sh, pk = append(sh, s), append(pk, p)
	}
	slices.Sort(sh)
	slices.Sort(pk)
	med := func(d []time.Duration) float64 { return float64(d[len(d)/2]) / float64(time.Microsecond) }
	return Result{
		Name: "shader preemption latency", Value: med(sh), Unit: "µs",
		Baseline: "preemption of a queue parked in WAIT_REG_MEM", Base: med(pk),
		Note: fmt.Sprintf("median of %d: Preempt to stopped with the endless spin_sum's 4 workgroups of 64 saved (2 CUs; max %.0f µs)",
			rounds, float64(sh[len(sh)-1])/float64(time.Microsecond)),
	}, nil
}
