package main

import (
	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
	"vgpu/shaders"
)

const (
	sumN     = 1 << 16 // atomic_sum elements (u32), split between two queues
	sumGroup = 64
)

// shaderAtomics: a reduction by the project's atomic_sum, its 64 Ki work-items split between
// two user queues that run at once and add into one 64-bit sum (atomics at the L2, from
// every CU and both queues). The values need all 64 bits of the sum.
func shaderAtomics(t *T) {
	d := openDev(t)
	s := shaders.AtomicSum()
	code := build(t, s)
	prog := newProgram(t, d, code, programFlags)
	in := newData(t, d, 4*sumN, "input")
	sum := newData(t, d, 4096, "sum")
	var want uint64
	iv := u32s(in)
	for i := range uint32(sumN) {
		iv[i] = 0xFFFF_0000 + i
		want += uint64(iv[i])
	}
	*sum.U64(0) = 0
	queues := []*drm.Queue{newQueue(t, d, drm.QueueConfig{}), newQueue(t, d, drm.QueueConfig{})}
	ends := make([]uint64, len(queues))
	half := uint64(sumN / len(queues))
	for k, q := range queues {
		args := newData(t, d, 4096, "argument")
		setArgs(t, args, s, map[string]uint64{"in": in.VA + 4*half*uint64(k), "sum": sum.VA})
		p := dispatch{
			sh:   pm4.Shader{Program: prog.VA, Slots: uint32(len(code) / 8), Threads: [3]uint32{sumGroup, 1, 1}, Args: args.VA},
			grid: [3]uint32{uint32(half) / sumGroup, 1, 1},
		}
		var err error
		ends[k], err = q.Job(p.packets()...)
		t.Check(err, "submit the reduction's part %d to queue %d", k, q.ID)
	}
	for k, q := range queues {
		t.Check(q.WaitUserFence(ends[k], jobTimeout), "wait for the reduction's part %d", k)
	}
	if got := *sum.U64(0); got != want {
		t.Errorf("sum of %d elements by atomics on %d queues: %#x, want %#x (%+d)", sumN, len(queues), got, want, int64(got-want))
	}
}
